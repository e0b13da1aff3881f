"""pbe.prm_rl: PPO with a process reward model for programming by example (PRM-PBE)."""
