"""Distributed training and memory: real process groups launched per rank (`launch`, `worker`,
`spare_rank`), collectives (`collectives`, `collective_steps`, `shards`), memory measured by
category (`memory_tracking`) beside the analytic ZeRO model (`memory_model`), and what backward
keeps from forward and a checkpoint must hold (`activation_memory`, `resume`)."""
