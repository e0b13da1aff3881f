"""transfer.grad_transformer: a large model's update generated from a small model's."""
