"""uq.last_layer: last-layer vs full-network linearised-Laplace (GLM) uncertainty."""
