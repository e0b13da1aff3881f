"""TTT layers as learned linear attention (Liu et al., ICML 2026)."""
