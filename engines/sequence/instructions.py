"""A toy instruction format, byte-level, and supervised fine-tuning (SFT) on it.

Every example is one line of bytes: an instruction, then its response,

    "reverse: dbca → acbd\\n"     "sort: dbca → abcd\\n"     "count: dbca → 4\\n"

the prompt up to and including "→ ", the response after it, ended by a newline (the model must
also learn to stop). Inputs are strings over the first `letters` letters, 2 … `length` long.
A quarter of the input strings (at most 200; the same ones under every task) are held out, and at
most 5,000 of the rest are trained on: the held-out instructions are inputs the model never trained
on, under any task. Rows are padded with byte
0 (never in any text), which no loss counts.

SFT is next-token training on these rows, with one of two targets (Wei et al. 2022; Ouyang et
al. 2022): the loss on the response tokens only (the prompt's targets ignored: the common
choice), or on every token, prompt included (random input letters add about ln(letters) nats
per input byte that no model can remove, and their gradient competes with the response's).

Instruction-following accuracy is exact match. Greedy decoding reproduces a response exactly
iff, fed the true response so far, the model's argmax is the true next byte at every response
position (by induction on the position; ties aside), so one teacher-forced forward pass scores
every held-out instruction at once (`response_accuracy`); tests/test_finetuning.py checks it
against `engines.sequence.lm.generate` token by token.
"""
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engines.sequence.lm import IGNORE

TASKS = ("reverse", "sort", "count")
ARROW = " → "
PAD = 0
HELD_OUT_SHARE, HELD_OUT_MOST, TRAIN_MOST = 0.25, 200, 5000
MIN_LENGTH = 2


def answer(task: str, text: str) -> str:
    if task == "reverse":
        return text[::-1]
    if task == "sort":
        return "".join(sorted(text))
    if task == "count":
        return str(len(text))
    raise ValueError(f"unknown task {task!r}; the tasks are {', '.join(TASKS)}")


def example(task: str, text: str) -> tuple[bytes, bytes]:
    """(prompt, response) bytes of one instruction."""
    return f"{task}: {text}{ARROW}".encode(), f"{answer(task, text)}\n".encode()


def inputs_count(letters: int, length: int) -> int:
    """Distinct input strings: Σ_{k=2}^{length} letters^k."""
    return sum(letters ** k for k in range(MIN_LENGTH, length + 1))


def split_counts(letters: int, length: int) -> tuple[int, int]:
    """(training inputs, held-out inputs) per task: a quarter held out, at most HELD_OUT_MOST; at most
    TRAIN_MOST of the rest train (more than SFT's steps ever read)."""
    total = inputs_count(letters, length)
    held = min(HELD_OUT_MOST, max(1, round(HELD_OUT_SHARE * total)))
    return min(TRAIN_MOST, total - held), held


def row_bytes(length: int) -> int:
    """The longest example's bytes (a window of that many + 0 fits a model whose context is one less)."""
    longest_task = max(TASKS, key=len)
    prompt, response = example(longest_task, "a" * length)
    return len(prompt) + max(len(response), len(str(length)) + 1)


@dataclass(frozen=True)
class InstructionSet:
    """Padded rows (n, width) of byte ids, where the response starts in each, and its task."""
    rows: torch.Tensor
    response_start: torch.Tensor   # (n,) index of the first response byte
    lengths: torch.Tensor          # (n,) bytes before the padding
    tasks: tuple[str, ...]         # per row

    def __len__(self) -> int:
        return len(self.rows)

    def targets(self, response_only: bool) -> torch.Tensor:
        """Next-byte targets (n, width − 1): the padding ignored, and the prompt too when `response_only`."""
        target = self.rows[:, 1:].clone()
        position = torch.arange(1, self.rows.shape[1])
        target[position[None, :] >= self.lengths[:, None]] = IGNORE
        if response_only:
            target[position[None, :] < self.response_start[:, None]] = IGNORE
        return target


def encode(pairs: list[tuple[str, str]], width: int) -> InstructionSet:
    lines = [example(task, text) for task, text in pairs]
    padded = b"".join((prompt + response).ljust(width, bytes([PAD])) for prompt, response in lines)
    rows = torch.from_numpy(np.frombuffer(padded, dtype=np.uint8).reshape(len(pairs), width).astype(np.int64))
    starts = torch.tensor([len(prompt) for prompt, _ in lines])
    lengths = torch.tensor([len(prompt) + len(response) for prompt, response in lines])
    return InstructionSet(rows, starts, lengths, tuple(task for task, _ in pairs))


def instruction_sets(tasks: tuple[str, ...], letters: int, length: int, seed: int) -> tuple[InstructionSet, InstructionSet]:
    """(training, held-out) instructions: every task on every input string, a quarter of the strings held
    out (drawn with `seed`, the same strings for every task)."""
    if not tasks:
        raise ValueError("an empty instruction set: name at least one task of " + ", ".join(TASKS))
    alphabet = "abcdefgh"[:letters]
    strings = ["".join(p) for k in range(MIN_LENGTH, length + 1) for p in itertools.product(alphabet, repeat=k)]
    order = np.random.default_rng(seed).permutation(len(strings))
    trained, held = split_counts(letters, length)
    width = row_bytes(length)
    train = [(task, strings[i]) for i in np.sort(order[held: held + trained]) for task in tasks]
    held_out = [(task, strings[i]) for i in np.sort(order[:held]) for task in tasks]
    return encode(train, width), encode(held_out, width)


class RowBatches:
    """Random rows of an InstructionSet (with replacement), `batch` at a time, forever."""

    def __init__(self, rows: InstructionSet, batch: int, seed: int) -> None:
        self.rows, self.batch = rows, batch
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        return torch.randint(0, len(self.rows), (self.batch,), generator=self.generator)


def sft_objective(model: torch.nn.Module, rows: InstructionSet, response_only: bool):
    """Next-byte cross-entropy on a batch of row indices: the response's targets only, or every byte's."""
    targets = rows.targets(response_only)

    def objective(index: torch.Tensor, logging: bool):
        logits = model(rows.rows[index, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), targets[index].flatten(), ignore_index=IGNORE)
        return loss
    return objective


@torch.no_grad()
def response_scores(model: torch.nn.Module, rows: InstructionSet) -> dict[str, float]:
    """Held-out measurements, teacher-forced in one pass: exact-match accuracy overall and per task,
    and the mean nats per response byte (`response_nats`) and per prompt byte (`prompt_nats`)."""
    logits = model(rows.rows[:, :-1]).float()
    response, everything = rows.targets(True), rows.targets(False)
    nll = F.cross_entropy(logits.flatten(0, 1), everything.flatten(), ignore_index=IGNORE, reduction="none")
    nll = nll.view(everything.shape)
    in_response = response != IGNORE
    in_prompt = (everything != IGNORE) & ~in_response
    right = (logits.argmax(-1) == response) | ~in_response
    exact = right.all(1).float()
    out = {"instruction_accuracy": float(exact.mean()),
           "response_nats": float(nll[in_response].mean()), "prompt_nats": float(nll[in_prompt].mean())}
    tasks = np.array(rows.tasks)
    for task in dict.fromkeys(rows.tasks):
        out[f"accuracy/{task}"] = float(exact[torch.as_tensor(tasks == task)].mean())
    return out
