"""theory.lora_meanfield: LoRA forgetting as perturbed mean-field self-attention on the sphere."""
