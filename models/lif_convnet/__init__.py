"""snn.lif_convnet: a spiking LIF convnet for scikit-learn's digits (8x8), the reference SNN."""
