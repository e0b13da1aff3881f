"""snn.unisparse: BN affine parameters as learnable thresholds, energy-constrained spike and
weight sparsification of spiking ResNets (see ``functional`` for the equations and ``spec`` for
every design decision the paper's abstract leaves open)."""
