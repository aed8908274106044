"""Checkpoint and resume: what must be saved for a resumed run to be the uninterrupted one, bit for bit.

A training run's future depends on more than its weights: Adam's moment estimates and step
count, the learning-rate scheduler's position, and the random generator that draws the next
batch. Save all four with `torch.save`, load them into freshly built objects with
`torch.load(..., weights_only=True)` (it refuses anything but tensors and plain containers,
so a checkpoint file cannot run code), and the resumed run computes exactly the same floats
as the run that never stopped. Leave one out and it does not.

A loss is measured before its step's update, so the losses alone cannot show what the last
update did. After the last step each arm records its state too, as float64 fingerprints
(`state_fingerprints`: the weights', and Adam's moments, step counts and next learning rate,
each projected on one fixed random vector): bitwise equal states give bitwise equal fingerprints, and
different ones, with probability 1, different fingerprints.

Every arm builds its own model, optimizer, scheduler and batch generator from the seed;
nothing touches torch's global RNG, so arms may train side by side. The checkpoint goes to a
file of our own in a `tempfile.TemporaryDirectory`, removed when the arm ends or is stopped.
"""
import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import supervised, train

N_FEATURES, N_CLASSES, WIDTH, BATCH = 16, 4, 64, 32
PARTS = ("model", "optimizer", "scheduler", "rng")


@dataclass
class Run:
    """Everything a training run's next step depends on."""
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    generator: torch.Generator  # draws every batch
    teacher: torch.Tensor       # (features, classes): labels y = argmax(x·teacher)

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            x = torch.randn(BATCH, N_FEATURES, generator=self.generator)  # (batch, features)
            yield x, (x @ self.teacher).argmax(dim=1)

    def state(self) -> dict[str, object]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "rng": self.generator.get_state()}

    def load(self, state: dict[str, object], parts: tuple[str, ...]) -> None:
        if "model" in parts:
            self.model.load_state_dict(state["model"])
        if "optimizer" in parts:
            self.optimizer.load_state_dict(state["optimizer"])
        if "scheduler" in parts:
            self.scheduler.load_state_dict(state["scheduler"])
        if "rng" in parts:
            self.generator.set_state(state["rng"])


def new_run(seed: int, steps: int, lr: float, init_seed: int | None = None) -> Run:
    """A fresh run: weights from `init_seed` (default `seed`), batches from `seed`, cosine decay over `steps`."""
    torch_seed = torch.Generator().manual_seed(seed)
    teacher = torch.randn(N_FEATURES, N_CLASSES, generator=torch_seed)
    weights = torch.Generator().manual_seed(seed + 1 if init_seed is None else init_seed)
    model = nn.Sequential(nn.Linear(N_FEATURES, WIDTH), nn.Tanh(), nn.Linear(WIDTH, N_CLASSES))
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.25, 0.25, generator=weights)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    return Run(model, optimizer, scheduler, torch.Generator().manual_seed(seed + 2), teacher)


def part_bytes(state: dict[str, object]) -> dict[str, float]:
    """How many bytes each part takes in a `torch.save` file of its own (measured in memory)."""
    sizes = {}
    for part, value in state.items():
        buffer = io.BytesIO()
        torch.save(value, buffer)
        sizes[f"checkpoint_bytes/{part}"] = float(buffer.tell())
    return sizes


def shifted(records: Iterator, offset: int) -> Iterator:
    """A loop's records with their steps counted from `offset` (a resumed loop counts from 0)."""
    for record in records:
        if isinstance(record, StepRecord):
            record = StepRecord(record.step + offset, record.metrics)
        elif isinstance(record, Diverged):
            record = Diverged(record.step + offset, record.message)
        yield record


def fingerprint(tensors: Iterator[torch.Tensor]) -> float:
    """Σ ⟨t, r⟩ in float64 over the tensors in order, r drawn from one fixed seed: equal tensors
    give the same number bit for bit, different ones (almost surely) different numbers."""
    draw, total = torch.Generator().manual_seed(12345), torch.zeros((), dtype=torch.float64)
    for tensor in tensors:
        values = tensor.detach().reshape(-1).to(torch.float64)
        total += values @ torch.randn(values.numel(), generator=draw, dtype=torch.float64)
    return float(total)


def state_fingerprints(run: Run) -> dict[str, float]:
    """The weights' fingerprint, and the optimizer's: Adam's moments and step counts, and the
    learning rate its next step would take (the scheduler sets it in the param groups)."""
    saved = run.optimizer.state_dict()
    moments = [value if torch.is_tensor(value) else torch.tensor(float(value))
               for state in saved["state"].values() for _, value in sorted(state.items())]
    rates = torch.tensor([float(group["lr"]) for group in saved["param_groups"]], dtype=torch.float64)
    return {"state/weights": fingerprint(iter(run.model.parameters())), "state/optimizer": fingerprint(iter([*moments, rates]))}


def _steps(run: Run, steps: int, final_state: bool = True):
    """`steps` steps; then (`final_state`) one record at step `steps`, the index after the last
    step's: the state after the last update."""
    outcome = None
    for outcome in train(run.model, run.optimizer, run.batches(), supervised(run.model, F.cross_entropy), steps,
                         scheduler=run.scheduler, log_every=1):
        yield outcome
    if final_state and isinstance(outcome, StepRecord):
        yield StepRecord(steps, state_fingerprints(run))


def uninterrupted(seed: int, steps: int, lr: float) -> Iterator:
    yield from _steps(new_run(seed, steps, lr), steps)


def resumed(seed: int, steps: int, lr: float, resume_at: int, restored: tuple[str, ...] = PARTS) -> Iterator:
    """Train to `resume_at` (unrecorded: those steps are the uninterrupted run's), save a
    checkpoint, build every object afresh (other initial weights, a fresh generator), load the
    `restored` parts with weights_only=True and train on; records from `resume_at` on."""
    first = new_run(seed, steps, lr)
    for record in _steps(first, resume_at, final_state=False):
        yield record if isinstance(record, Diverged) else None
        if isinstance(record, Diverged):
            return
    with tempfile.TemporaryDirectory(prefix="explorer-checkpoint-") as folder:
        path = Path(folder) / "checkpoint.pt"
        state = first.state()
        torch.save(state, path)
        sizes = {**part_bytes(state), "checkpoint_bytes/file": float(path.stat().st_size)}
        del first, state
        run = new_run(seed, steps, lr, init_seed=seed + 1000)  # a process that knows only the seed and the file
        run.load(torch.load(path, weights_only=True), restored)
    for index, record in enumerate(shifted(_steps(run, steps - resume_at), resume_at)):
        if index == 0 and isinstance(record, StepRecord):
            record = StepRecord(record.step, {**record.metrics, **sizes})
        yield record
