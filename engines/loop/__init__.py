"""The shared loop and what it measures: the instrumented training loop (`training`), per-layer
probes (`probes`), the records an engine hands out and the one divergence rule (`records`),
learning-rate schedules (`schedules`) and the process-wide settings of whoever trains (`runtime`)."""
