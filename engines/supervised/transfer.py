"""Transfer learning: pretrain on a task A with plenty of data, fine-tune on a related task B with little.

Both tasks read the same kind of hidden structure: features φ(x) = tanh(1.5·V x) of a random
projection V (8 of them from 16 inputs). Task A labels x by argmax φ_A(x)·U_A over 10
classes; task B by argmax φ_B(x)·U_B over 4, where V_B = r·V_A + √(1 − r²)·V′ mixes A's
projection with an independent one (r = `relatedness`: 1, the same features read out
differently; 0, unrelated features). A net trained on A learns features close to φ_A in its
hidden layers. On B's few examples, three arms start from the same place in turn:

- fine-tune everything: the pretrained net with a fresh 4-class head, every weight trained;
- last layer only: the pretrained body frozen (requires_grad off), only the new head trained;
- from scratch: a fresh net of the same shape.

Every arm is full-batch Adam on the same B examples, scored on the same held-out B examples.
"""
import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import accuracy, supervised, train

N_INPUTS, N_FEATURES, CLASSES_A, CLASSES_B, WIDTH = 16, 8, 10, 4, 64
PRETRAIN_BATCH, TEST_SIZE = 128, 2000
ARMS = ("fine-tune everything", "last layer only", "from scratch")


@dataclass
class Tasks:
    """Task A's stream and test set, task B's few training examples and test set."""
    generator: torch.Generator
    projection_a: torch.Tensor  # (features, inputs)
    projection_b: torch.Tensor
    readout_a: torch.Tensor     # (features, classes)
    readout_b: torch.Tensor

    def sample(self, task: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        projection, readout = (self.projection_a, self.readout_a) if task == "A" else (self.projection_b, self.readout_b)
        x = torch.randn(n, N_INPUTS, generator=self.generator)  # (n, inputs)
        return x, (torch.tanh(1.5 * x @ projection.T) @ readout).argmax(dim=1)

    def stream(self, task: str, n: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield self.sample(task, n)


def make_tasks(relatedness: float, seed: int) -> Tasks:
    generator = torch.Generator().manual_seed(seed)
    a, other = (torch.randn(N_FEATURES, N_INPUTS, generator=generator) / N_INPUTS ** 0.5 for _ in range(2))
    b = relatedness * a + (1 - relatedness ** 2) ** 0.5 * other
    return Tasks(generator, a, b, torch.randn(N_FEATURES, CLASSES_A, generator=generator),
                 torch.randn(N_FEATURES, CLASSES_B, generator=generator))


def network(classes: int, seed: int) -> nn.Sequential:
    torch_generator = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(N_INPUTS, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, classes))
    with torch.no_grad():
        for p in net.parameters():
            bound = 1 / (p.shape[-1] if p.dim() == 2 else WIDTH) ** 0.5
            p.uniform_(-bound, bound, generator=torch_generator)
    return net


class Transfer:
    """The tasks and the pretrained net, shared by the arms: `pretrain` runs first (its own phase),
    the fine-tuning arms read `self.pretrained` in later phases."""

    def __init__(self, relatedness: float, examples_b: int, seed: int) -> None:
        self.seed = seed
        self.tasks = make_tasks(relatedness, seed)
        self.test_a = self.tasks.sample("A", TEST_SIZE)
        self.train_b, self.test_b = self.tasks.sample("B", examples_b), self.tasks.sample("B", TEST_SIZE)
        self.pretrained: nn.Sequential | None = None

    def pretrain(self, steps: int, lr: float, log_every: int) -> Iterator[StepRecord | Diverged | None]:
        net = network(CLASSES_A, self.seed + 10)
        yield from train(net, torch.optim.Adam(net.parameters(), lr=lr), self.tasks.stream("A", PRETRAIN_BATCH),
                         supervised(net, F.cross_entropy), steps, log_every=log_every, on_log=self._scored(net, self.test_a))
        self.pretrained = net

    def finetune(self, arm: str, steps: int, lr: float, log_every: int) -> Iterator[StepRecord | Diverged | None]:
        if arm == "from scratch":
            net = network(CLASSES_B, self.seed + 20)
        else:
            net = copy.deepcopy(self.pretrained)
            net[-1] = network(CLASSES_B, self.seed + 20)[-1]  # a fresh head, the same one the scratch net gets
        if arm == "last layer only":
            for p in net[:-1].parameters():
                p.requires_grad_(False)  # the pretrained body is frozen: a linear probe of its features
        trained = [p for p in net.parameters() if p.requires_grad]
        batches = itertools.repeat(self.train_b)  # full batch: the same few examples every step
        yield from train(net, torch.optim.Adam(trained, lr=lr), batches, supervised(net, F.cross_entropy), steps,
                         log_every=log_every, on_log=self._scored(net, self.test_b, trained))

    @staticmethod
    def _scored(net: nn.Module, test: tuple[torch.Tensor, torch.Tensor], trained: list | None = None):
        """on_log: held-out loss and accuracy, before this step's update (and how many weights train)."""
        count = float(sum(p.numel() for p in trained)) if trained is not None else None

        def on_log(step: int) -> dict[str, float | torch.Tensor]:
            with torch.no_grad():
                net.eval()
                logits = net(test[0])
                net.train()
            extra = {"trained_weights": count} if count is not None else {}
            return {"test_loss": F.cross_entropy(logits, test[1]), "test_accuracy": accuracy(logits, test[1])["accuracy"],
                    **extra}
        return on_log
