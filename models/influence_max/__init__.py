"""graph.influence_max: online influence maximisation, IC model, node-level feedback."""
