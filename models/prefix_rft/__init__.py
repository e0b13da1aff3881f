"""rl.prefix_rft: supervised and reinforcement fine-tuning blended by prefix sampling."""
