"""Preference learning and reinforcement learning: DPO (`dpo`, its worlds in `dpo_tasks`), the classic
RLHF recipe, a reward model then PPO (`rlhf`, `rlhf_worlds`), RL with verifiable rewards, GRPO and
Dr. GRPO on the tiny LM (`grpo`), and REINFORCE from scratch on the short corridor (`reinforce`) and on
a contextual bandit (`reinforce_bandit`)."""
