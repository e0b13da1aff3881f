"""alloc.envy_free: two-agent envy-free allocation from noisy queries (threshold rule)."""
