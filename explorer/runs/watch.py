"""`watch`: the explorer's per-layer view of a person's own PyTorch training loop, in two lines.

    from explorer import watch
    run = watch(model, optimizer, name="my-run", every=10, config={"lr": 3e-4})
    for batch in data:
        loss = model(batch).loss
        loss.backward(); optimizer.step(); optimizer.zero_grad()
        run.log(loss=loss)            # optional: without it the hooks still measure every layer
    run.finish()                      # also at exit, on an exception (failed), on Ctrl-C (stopped)

The run appears in the run store at once, under the pseudo-scenario `watched` (scenarios/watched/),
and the page's "Your runs" view follows it live. What it measures, and how, is in
engines/loop/watching.py: hooks only, armed on every `every`-th optimizer step (the first
included), fused norms, one host transfer per logged step. `run.log(loss=...)` records the loss
of every step (a tensor stays on its device until the next logged step's transfer); a NaN or
infinite loss is recorded as the run's divergence, never raised. The store is written by a
background thread (explorer/runs/recording.py): a store that is locked or read-only costs a
warning, never the training.

Under `torch.distributed` rank 0 records by default; `ranks="all"` gives every rank a run of its
own ("name · rank k"). The gradients are read in the optimizer's pre-step hook, so after DDP's
all-reduce, after gradient accumulation and after `GradScaler.unscale_`.

This module imports torch: `explorer` itself does not (its `__getattr__` loads this on first use).
"""
import atexit
import json
import math
import sys
import threading
from typing import Any

import torch

from engines.loop.watching import ModuleWatch, WatchError, checked_every
from explorer.runs.recording import Recorder

__all__ = ["WatchError", "WatchedRun", "watch"]

_open_runs: list["WatchedRun"] = []
_installed = threading.Lock()
_hooks_in: list[bool] = []


class WatchedRun:
    """One watched run: `log` values, `finish` it, read its `diagnosis()`. A rank that does not record
    (`recording` False) takes the same calls and does nothing."""

    def __init__(self, probe: ModuleWatch | None, recorder: Recorder | None) -> None:
        self.probe, self.recorder = probe, recorder
        self.status: str | None = None  # how it ended, once it has
        self._offset: int | None = None

    @property
    def recording(self) -> bool:
        return self.recorder is not None

    @property
    def run_id(self) -> str | None:
        """The run's id in the store (None until the writer has added its row, or when it cannot)."""
        if self.recorder is not None and self.recorder.run_id is None:
            self.recorder.flush(timeout=10.0)
        return self.recorder.run_id if self.recorder is not None else None

    def log(self, loss: float | torch.Tensor | None = None, *, step: int | None = None,
            **values: float | torch.Tensor) -> None:
        """Record this step's loss (and any other scalars by name). The step is the optimizer step the
        values belong to: the one about to be taken, or the one just taken when `log` comes after
        `optimizer.step()` (told from the first call); `step=` says it outright."""
        if self.probe is None or self.status is not None:
            return
        if step is None:
            if self._offset is None:  # first call after a step: this loop logs after stepping
                self._offset = 1 if self.probe.step > 0 else 0
            step = max(0, self.probe.step - self._offset)
        if loss is not None:
            self.probe.scalar(step, "loss", loss)
        for name, value in values.items():
            self.probe.scalar(step, name, value)

    def finish(self, status: str | None = None, error: str | None = None) -> None:
        """End the run: finished (diverged when its loss went NaN or infinite), or as `status` says."""
        if self.status is not None:
            return
        if self.probe is not None:
            try:
                self.probe.flush()
            finally:
                self.probe.close()
        if self.recorder is not None:
            status = status or ("diverged" if self.recorder.diverged_at is not None else "finished")
            self.recorder.close(status, error)
        self.status = status or "finished"
        if self in _open_runs:
            _open_runs.remove(self)

    def rows(self) -> list[tuple[str, int, str, float]]:
        """Every record so far, `(arm, step, metric, value)`, values measured up to the last logged step."""
        if self.probe is not None and self.status is None:
            self.probe.flush()
        return self.recorder.rows() if self.recorder is not None else []

    def diagnosis(self) -> list[str]:
        """What to look for in this run, one sentence each, read from its records (the page's and
        `python -m explorer show RUN_ID`'s words), as terminal text: Unicode powers, no markdown."""
        if self.recorder is None:
            return []
        import pandas as pd
        from scenarios import get_scenario
        scenario = get_scenario("watched")
        frame = pd.DataFrame(self.rows(), columns=["arm", "step", "metric", "value"])
        explanation = scenario.explain(frame, scenario.validate(self.recorder.config))
        sentences = [explanation.takeaway, *explanation.details] if explanation.takeaway else []
        from explorer.plaintext import terminal_text
        return [terminal_text(sentence.text) for sentence in sentences] or [terminal_text(explanation.waiting)]

    def __enter__(self) -> "WatchedRun":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.finish(*_ending(kind, value))


def watch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, name: str | None = None, every: int = 10,
          config: dict[str, Any] | None = None, *, ranks: str = "0", scaler: Any = None,
          activations: bool = True, store: str | None = None) -> WatchedRun:
    """Attach the explorer to a training loop: per-module gradient norms, update-to-weight ratios,
    activation std and dead fractions every `every`-th optimizer step, into the run store.

    `config`: the run's settings as you want them shown and compared (JSON values). `ranks`: "0"
    (rank 0 records) or "all". `scaler`: a `torch.amp.GradScaler`, to record its scale and read the
    norms unscaled even where the loop steps before unscaling. `activations=False` leaves the
    forward hooks out. `store`: a store path (default `EXPLORER_STORE` or the explorer's own).
    A model with no parameters, a frozen one or `every` < 1 raise `WatchError` (a ValueError)."""
    every = checked_every(every)
    if ranks not in ("0", "all"):
        raise WatchError(f"ranks must be '0' (rank 0 records) or 'all' (every rank a run of its own), got {ranks!r}")
    rank, world = _rank_and_world()
    if rank != 0 and ranks == "0":
        ModuleWatch.check(model, optimizer)
        return WatchedRun(None, None)
    label = (name or "your model") + (f" · rank {rank}" if world > 1 and ranks == "all" else "")
    holder: list[Recorder] = []
    probe = ModuleWatch(model, optimizer, every, lambda step, metrics: holder[0].add(step, metrics),
                        activations=activations, scaler=scaler)
    notes = [*probe.notes, *_distributed_notes(rank, world)]
    settings = {**_json_safe(config or {}), "watch_every": every,
                "watch_layers": [layer.path for layer in probe.layers],
                "watch_kinds": [layer.kind for layer in probe.layers], "watch_after": [layer.after for layer in probe.layers],
                "watch_notes": notes}
    holder.append(Recorder(settings, label if name or world > 1 else name, label, store))
    for note in probe.notes:
        print(f"explorer.watch: {note}", file=sys.stderr)
    run = WatchedRun(probe, holder[0])
    _open_runs.append(run)
    _install_exit_hooks()
    return run


def _rank_and_world() -> tuple[int, int]:
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank(), distributed.get_world_size()
    return 0, 1


def _distributed_notes(rank: int, world: int) -> list[str]:
    if world == 1:
        return []
    return [f"rank {rank} of {world}: gradients as the optimizer step reads them, after DDP's all-reduce "
            "(the mean over ranks); activations of this rank's batch"]


def _json_safe(config: dict[str, Any]) -> dict[str, Any]:
    """The person's settings as JSON values (anything else as its text), NaN/inf as text too."""
    def safe(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return value
    return {str(key): safe(value) for key, value in json.loads(json.dumps(config, default=str)).items()}


def _ending(kind, value) -> tuple[str | None, str | None]:
    if kind is None:
        return None, None
    if issubclass(kind, KeyboardInterrupt):
        return "stopped", "stopped by Ctrl-C (KeyboardInterrupt)"
    return "failed", f"{kind.__name__}: {value}"


def _install_exit_hooks() -> None:
    """Once per process: an uncaught exception ends the open runs as failed (Ctrl-C: stopped), and the
    interpreter's exit ends the rest as finished. A SIGKILL runs neither: the run reads as incomplete."""
    with _installed:
        if _hooks_in:
            return
        _hooks_in.append(True)
        previous = sys.excepthook

        def excepthook(kind, value, traceback) -> None:
            status, error = _ending(kind, value)
            for run in list(_open_runs):
                run.finish(status, error)
            previous(kind, value, traceback)

        sys.excepthook = excepthook
        atexit.register(lambda: [run.finish() for run in list(_open_runs)])
