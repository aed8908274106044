"""Masked against causal: the same Transformer trained to fill hidden tokens from both sides (BERT) and to
predict the next token from the left (GPT), on the same topic lines (engines.sequence.topics).

Both arms are `TinyLM`s of one shape and one vocabulary (the source's tokens plus [MASK], which the causal
model never reads): the same parameters, the same steps, batches of the same number of input tokens. They
differ in the attention mask and the objective:

- *causal*: `next_token_objective` on random windows of `context + 1` tokens; held-out `heldout_nats` is
  the next-token loss on line-aligned windows, whose floor is the source's exact entropy rate.
- *masked*: `masked_objective` (Devlin et al. 2019: each token chosen with probability `mask_rate`; of
  those 80% become [MASK], 10% a random token, 10% stay; the loss on the chosen ones only) on windows of
  `context` tokens; held-out `heldout_masked_nats` is that loss under one fixed corruption of the
  held-out windows.

The middle-token fill, the task a causal model cannot see the answer to: in each held-out line one word
(position 1 … L−2, drawn once) is hidden. The masked model reads the line with [MASK] there; the causal
model reads the line up to it (its prediction at the position before). Recorded as `fill/accuracy` (argmax
right) and `fill/nats` (−ln p of the hidden word). The source's own answer is exact: given its topic a
line is a first-order chain, so the word at j given everything else is

    P(x_j | rest) ∝ P(x_j | topic, x_{j−1}) · P(x_{j+1} | topic, x_j)       (both sides)
    P(x_j | left)  = P(x_j | topic, x_{j−1})                                   (left only)

and `exact_fill` gives, over the same (line, position) pairs, the Bayes classifier's expected accuracy
(mean of max P) and the expected loss (mean entropy of P): `bayes/both_*`, `bayes/left_*`.
"""
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engines.loop.records import Diverged, StepRecord
from engines.sequence.lm import IGNORE, LMSpec, TinyLM, WindowBatches, evaluation_windows, lm_arm, mask_tokens, \
    masked_objective, token_nll
from engines.sequence.next_token import topic_corpus
from engines.sequence.text import entropy_nats
from engines.sequence.topics import TopicLines

BATCH, FILL_LINES, EVAL_WINDOWS = 16, 256, 64


@dataclass(frozen=True)
class FillArm:
    """One arm: the model's shape (`spec.causal` picks the objective), its training and the masking rate."""
    spec: LMSpec
    steps: int
    lr: float
    log_every: int
    mask_rate: float = 0.15
    batch: int = BATCH


def fill_positions(lines: int, line_length: int, seed: int) -> np.ndarray:
    """One hidden position per line, uniform on 1 … L−2 (a word with a word after it), seeded."""
    return np.random.default_rng(seed).integers(1, line_length - 1, lines)


def fill_posteriors(source: TopicLines, lines: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(left only, both sides): P(hidden word | …) over the words, (n, V) each, for line-aligned token ids
    (n, L) and the hidden position of each line."""
    rows = np.arange(len(lines))
    topic = lines[:, 0]
    before = lines[rows, positions - 1] - source.topics
    left = np.where((positions == 1)[:, None], source.start[topic],
                    source.table[topic, np.clip(before, 0, source.words - 1)])
    after = lines[rows, positions + 1] - source.topics
    both = left * source.table[topic, :, after]  # P(x_j | left) · P(x_{j+1} | topic, x_j) for every x_j
    return left, both / both.sum(-1, keepdims=True)


def exact_fill(source: TopicLines, lines: np.ndarray, positions: np.ndarray) -> dict[str, float]:
    """The source's own fill: Bayes accuracy (mean max P) and loss (mean entropy, nats), both sides and left only,
    and the entropy rate."""
    left, both = fill_posteriors(source, lines, positions)
    return {"bayes/left_accuracy": float(left.max(-1).mean()), "bayes/both_accuracy": float(both.max(-1).mean()),
            "bayes/left_nats": float(entropy_nats(left).mean()), "bayes/both_nats": float(entropy_nats(both).mean()),
            "entropy_rate": source.entropy_rate}


@torch.no_grad()
def model_fill(model: TinyLM, lines: torch.Tensor, positions: torch.Tensor, mask_id: int) -> dict[str, float]:
    """The model's fill of the hidden word of each line: accuracy and −ln p. Bidirectional: [MASK] in place,
    its logits there. Causal: its logits one position earlier (what it predicts next from the left)."""
    rows = torch.arange(len(lines))
    if model.spec.causal:
        logits = model(lines)[rows, positions - 1]
    else:
        hidden = lines.clone()
        hidden[rows, positions] = mask_id
        logits = model(hidden)[rows, positions]
    logits = logits.float()
    truth = lines[rows, positions]
    return {"fill/accuracy": float((logits.argmax(-1) == truth).float().mean()),
            "fill/nats": float(F.cross_entropy(logits, truth))}


@torch.no_grad()
def masked_nats(model: TinyLM, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean −ln p of the chosen tokens of a fixed corruption of held-out windows."""
    logits = model(inputs).float()
    return float(F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE))


def fill_records(arm: FillArm, topics: int, branching: int, line_length: int, seed: int
                 ) -> Iterator[StepRecord | Diverged | None]:
    """Train one arm on topic lines; at each log its held-out loss (next-token or masked-token) and its fill."""
    source, train, held_out = topic_corpus(topics, branching, line_length, seed)
    mask_id, model = source.vocab, TinyLM(arm.spec)
    lines = held_out[: FILL_LINES * line_length].reshape(-1, line_length)
    positions = torch.as_tensor(fill_positions(len(lines), line_length, seed + 5))
    lines = torch.as_tensor(lines)
    window = arm.spec.context // line_length * line_length  # whole lines, as the next-token page scores them
    windows = evaluation_windows(torch.as_tensor(held_out), window, EVAL_WINDOWS)  # (n, window + 1)
    if arm.spec.causal:
        objective, batches = None, WindowBatches(torch.as_tensor(train), arm.spec.context, arm.batch, seed + 1)
    else:
        objective = masked_objective(model, mask_id, source.vocab, seed + 2, arm.mask_rate)
        # `context` inputs a window, as the causal arm reads: WindowBatches yields one more than it is given
        batches = WindowBatches(torch.as_tensor(train), arm.spec.context - 1, arm.batch, seed + 1)
        inputs, targets = mask_tokens(windows[:, :-1], mask_id, source.vocab, arm.mask_rate,
                                      torch.Generator().manual_seed(seed + 3))

    def measure(step: int) -> dict[str, float]:
        values = model_fill(model, lines, positions, mask_id)
        if arm.spec.causal:
            values["heldout_nats"] = float(token_nll(model, windows).mean())
        else:
            values["heldout_masked_nats"] = masked_nats(model, inputs, targets)
        if step == 0:
            values["params"] = float(sum(p.numel() for p in model.parameters()))
        return values

    yield from lm_arm(model, batches, arm.steps, lr=arm.lr, log_every=arm.log_every, objective=objective, on_log=measure)


def exact_records(topics: int, branching: int, line_length: int, seed: int) -> Iterator[StepRecord]:
    """The source's exact fill and entropy rate over the held-out lines the models fill."""
    source, _, held_out = topic_corpus(topics, branching, line_length, seed)
    lines = held_out[: FILL_LINES * line_length].reshape(-1, line_length)
    yield StepRecord(0, exact_fill(source, lines, fill_positions(len(lines), line_length, seed + 5)))
