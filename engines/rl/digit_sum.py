"""The task RLVR trains on: binary digits and their sum, a program that checks an answer, and the
policy's sampling and held-out evaluation (engines.rl.grpo trains on it).

A prompt is `bits` binary digits and "="; the answer is their digit sum (the count of ones, 0…9).
Training prompts are drawn with every answer equally likely; a quarter of each answer's prompts (never
its only one) are held out. A response is any tokens, then EOS; the token just before EOS is the answer
(filler "." before it lets the policy change its length). Reward 1 if it is the right digit, else 0
(also with no EOS in `max_len`). The reward is exact: no reward model.

The evaluation also says where the answers sit: after how many tokens the sampled answers come, and
how accurate the policy's likeliest digit is at each place. An answered response's length |o| is its
answer's place + 2, so a change of length is a move of the answers.
"""
from dataclasses import dataclass

import torch

from engines.sequence.decoding import Cache
from engines.sequence.lm import TinyLM

DIGITS = 10
EQUALS, FILL, EOS = 10, 11, 12
VOCAB = 13
PRETRAIN_FILL = 3      # by default the warm start writes 0…3 filler tokens before its answer


@dataclass(frozen=True)
class Task:
    bits: int
    max_len: int
    train: torch.Tensor     # (n, bits + 1) prompt tokens
    heldout: torch.Tensor   # (m, bits + 1)

    @classmethod
    def make(cls, bits: int, max_len: int, share: float, seed: int) -> "Task":
        every = ((torch.arange(2 ** bits)[:, None] >> torch.arange(bits)) & 1)  # (2^bits, bits)
        prompts = torch.cat([every, torch.full((len(every), 1), EQUALS)], 1)
        generator, held = torch.Generator().manual_seed(seed), torch.zeros(len(prompts), dtype=torch.bool)
        for answer in range(bits + 1):  # a share of every answer's prompts, so every answer is trained on
            rows = (every.sum(-1) == answer).nonzero()[:, 0]
            held[rows[torch.randperm(len(rows), generator=generator)][:min(len(rows) - 1, round(share * len(rows)))]] = True
        return cls(bits, max_len, prompts[~held], prompts[held])

    def answers(self, prompts: torch.Tensor) -> torch.Tensor:
        return prompts[:, :self.bits].sum(-1)

    def draw(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """`count` training prompts, each answer equally likely (then a prompt uniformly among those with it):
        the rare sums (0 ones, all ones) are drawn as often as the common ones."""
        answers = self.answers(self.train)
        present = answers.unique()
        wanted = present[torch.randint(len(present), (count,), generator=generator)]
        scores = (answers[None] == wanted[:, None]).double()  # (count, train)
        return self.train[torch.multinomial(scores, 1, generator=generator)[:, 0]]


def parse(responses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, max_len) tokens -> the answer token (−1 if none: no EOS, or EOS first) and |o| (up to and
    including the first EOS; max_len without one)."""
    n, width = responses.shape
    is_eos = responses == EOS
    has = is_eos.any(-1)
    first = torch.where(has, is_eos.int().argmax(-1), torch.full((n,), width))
    before = responses.gather(1, (first - 1).clamp(min=0)[:, None]).squeeze(1)
    answer = torch.where(has & (first > 0), before, torch.full_like(before, -1))
    return answer, torch.where(has, first + 1, first)


def rewards_of(task: Task, prompts: torch.Tensor, responses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The checker: 1.0 where the answer is the prompt's digit sum; and |o|."""
    answer, length = parse(responses)
    return (answer == task.answers(prompts)).double(), length


def response_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return (torch.arange(width)[None] < lengths[:, None]).double()  # (n, width)


@torch.no_grad()
def sample(model: TinyLM, prompts: torch.Tensor, max_len: int, generator: torch.Generator,
           greedy: bool = False) -> torch.Tensor:
    """(n, max_len) response tokens at temperature 1 (or greedy), decoded with a key/value cache; a row may
    keep going after EOS (those tokens count for nothing). The cache runs the blocks itself: no mode to set."""
    cache, logits = Cache.prefill(model, prompts)  # logits (n, vocab), float32
    written, done = [], torch.zeros(len(prompts), dtype=torch.bool)
    for t in range(max_len):
        if done.all():  # every row has ended: the rest is EOS, and counts for nothing
            written.append(torch.full((len(prompts), max_len - t), EOS))
            break
        nxt = logits.argmax(-1, keepdim=True) if greedy else torch.multinomial(logits.softmax(-1), 1, generator=generator)
        written.append(nxt)
        done |= nxt[:, 0] == EOS
        logits = cache.step(nxt) if t < max_len - 1 else logits
    return torch.cat(written, 1)


def token_logps(model: TinyLM, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """log π(o_t | x, o_<t) of every response token: (n, max_len)."""
    ids = torch.cat([prompts, responses], 1)
    logits = model(ids[:, :-1])[:, prompts.shape[1] - 1:]
    return logits.log_softmax(-1).gather(-1, responses[..., None]).squeeze(-1).double()


@torch.no_grad()
def forced_accuracy(model: TinyLM, task: Task, most: int) -> list[float]:
    """Greedy accuracy on the held-out prompts when made to answer after k = 0…`most` filler tokens: the
    likeliest *digit* at that position (what the policy would answer there, had it stopped filling). One
    causal pass over prompt + `most` fillers reads every k: position k sees only the prompt and k fillers."""
    ids = torch.cat([task.heldout, torch.full((len(task.heldout), most), FILL)], 1)
    digits = model(ids)[:, task.heldout.shape[1] - 1:, :DIGITS].argmax(-1)  # (n, most + 1)
    return (digits == task.answers(task.heldout)[:, None]).double().mean(0).tolist()


@torch.no_grad()
def evaluate(model: TinyLM, task: Task, generator: torch.Generator, samples: int = 4) -> dict[str, float]:
    """Held-out prompts: accuracy of one sample at temperature 1 (mean of `samples` draws) and of the
    greedy answer; the mean |o| of the sampled responses, right and wrong. Where the answers sit: the share
    of sampled responses whose answer came after k tokens (`answer_at/k`, k = |o| − 2; responses with no
    answer count in none), and the greedy accuracy when made to answer after k fillers (`forced_at/k`),
    for k = 0…max_len − 2."""
    prompts = task.heldout.repeat(samples, 1)
    responses = sample(model, prompts, task.max_len, generator)
    rewards, lengths = rewards_of(task, prompts, responses)
    answered = parse(responses)[0] >= 0
    greedy, _ = rewards_of(task, task.heldout, sample(model, task.heldout, task.max_len, generator, greedy=True))
    wrong, right = rewards == 0, rewards == 1
    out = {"heldout/accuracy": float(rewards.mean()), "heldout/greedy_accuracy": float(greedy.mean()),
           "heldout/length": float(lengths.double().mean())}
    for k, forced in enumerate(forced_accuracy(model, task, task.max_len - 2)):
        out[f"answer_at/{k}"] = float((answered & (lengths == k + 2)).double().mean())
        out[f"forced_at/{k}"] = forced
    if wrong.any():
        out["heldout/length_wrong"] = float(lengths[wrong].double().mean())
    if right.any():
        out["heldout/length_right"] = float(lengths[right].double().mean())
    return out
