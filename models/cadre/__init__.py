"""causal.cadre: causal discovery among observed variables with latent dynamic drivers (CaDRe)."""
