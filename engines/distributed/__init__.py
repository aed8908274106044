"""Distributed training and memory: real process groups launched per rank (`launch`, `worker`,
`spare_rank`), collectives (`collectives`, `collective_steps`, `shards`), memory measured by
category (`memory_tracking`) beside the analytic ZeRO model (`memory_model`), and what backward
keeps from forward and a checkpoint must hold (`activation_memory`, `resume`); "will my model fit?",
one step of any model measured per rank under FakeTensorMode with a fake process group (`fit`,
`fit_step`, `fit_inputs`, `fit_models`, `fit_analytic`, `fit_report`)."""
