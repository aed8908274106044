"""Small supervised models and what they show: the MLPs and synthetic tasks (`models`, `data`),
dead units, generalization, optimizers, gradient noise and clipping, autodiff, transfer,
distillation, contrastive learning and LoRA."""
