"""stats.self_distill: optimal unconstrained self-distillation in ridge regression."""
