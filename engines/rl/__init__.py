"""Preference learning and reinforcement learning: DPO (`dpo`, its worlds in `dpo_tasks`) and the
classic RLHF recipe, a reward model then PPO (`rlhf`, `rlhf_worlds`)."""
