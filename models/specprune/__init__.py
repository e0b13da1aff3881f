"""SpecPrune-VLA (arXiv 2509.05614) on a small OpenVLA-OFT-shaped policy in Meta-World."""
