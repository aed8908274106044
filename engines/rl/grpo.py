"""RL with verifiable rewards: GRPO (Shao et al. 2024) and Dr. GRPO (Liu et al. 2025) on a tiny LM.

The task's answers are checked by a program, so the reward is exact — no reward model. A prompt is
`bits` binary digits and "="; the answer is their digit sum (the count of ones, 0…9). Training prompts
are drawn with every answer equally likely; a quarter of each answer's prompts (never its only one)
are held out. A response is any tokens, then EOS; the token just before EOS is the answer (filler "." before
it lets the policy change its length). Reward 1 if it is the right digit, else 0 (also with no EOS in `max_len`).

Warm start (`pretrain`): the project's TinyLM (engines.sequence.lm) is trained by teacher
forcing on well-formed responses "."×k, a *random* digit of 0…bits, EOS (k uniform in 0…`fill`, 3 by default), so it
writes the format and the range of answers but answers at chance (1/(bits + 1)). That model is also π_ref.

GRPO, per step: `prompts` training prompts, G samples each from π_old; rewards r_i; advantages within
each group A_i = (r_i − mean r)/std r (population std; a group whose rewards are all equal gets A = 0
exactly). Each token t of response o_i adds the clipped surrogate min(ρ A_i, clip(ρ, 1 − ε, 1 + ε) A_i),
ρ = π/π_old, minus β times the k3 estimate of KL(π‖π_ref), π_ref/π − log(π_ref/π) − 1. GRPO averages a
response's tokens (1/|o_i|); Dr. GRPO divides by the constant `max_len` and drops the std. No critic.

Two biases Dr. GRPO removes: with 1/|o|, a wrong answer's tokens are pushed down less the longer
it is, and a right one's pushed up more the shorter it is (so wrong answers drift longer than right ones);
with the std, a prompt's gradient is multiplied by 1/√(p(1 − p)) for its group's success rate p (measured).
"""
import copy
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from engines.loop.records import Diverged, StepRecord
from engines.loop.training import train
from engines.sequence.decoding import Cache
from engines.sequence.lm import LMSpec, TinyLM

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


# --- the warm start -----------------------------------------------------------------------------
def warm_start(task: Task, spec: LMSpec, steps: int, lr: float, batch: int, seed: int, log_every: int,
               built: dict, fill: int = PRETRAIN_FILL) -> Iterator[StepRecord | Diverged | None]:
    """Teacher forcing on "."×k (k uniform in 0…`fill`), random digit, EOS after training prompts; then one record (step
    `steps`) of the warm model's held-out accuracy and lengths. Leaves the model in `built["reference"]`."""
    model = TinyLM(spec)
    generator = torch.Generator().manual_seed(seed)

    def batches():
        while True:
            prompts = task.train[torch.randint(len(task.train), (batch,), generator=generator)]
            fill_count = torch.randint(fill + 1, (batch, 1), generator=generator)
            digit = torch.randint(task.bits + 1, (batch, 1), generator=generator)
            slot = torch.arange(task.max_len)[None]
            responses = torch.where(slot < fill_count, FILL, torch.where(slot == fill_count, digit, EOS))
            yield prompts, responses, fill_count + 2

    def objective(item, logging: bool):
        prompts, responses, lengths = item
        logps = token_logps(model, prompts, responses)
        return -(logps * response_mask(lengths[:, 0], task.max_len)).sum() / lengths.sum()

    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    for item in train(model, optimizer, batches(), objective, steps, log_every=log_every):
        yield item
        if isinstance(item, Diverged):
            return
    built["reference"] = model
    yield StepRecord(steps, evaluate(model, task, torch.Generator().manual_seed(seed + 1)))


@torch.no_grad()
def evaluate(model: TinyLM, task: Task, generator: torch.Generator, samples: int = 4) -> dict[str, float]:
    """Held-out prompts: accuracy of one sample at temperature 1 (mean of `samples` draws) and of the
    greedy answer; the mean |o| of the sampled responses, right and wrong."""
    prompts = task.heldout.repeat(samples, 1)
    rewards, lengths = rewards_of(task, prompts, sample(model, prompts, task.max_len, generator))
    greedy, _ = rewards_of(task, task.heldout, sample(model, task.heldout, task.max_len, generator, greedy=True))
    wrong, right = rewards == 0, rewards == 1
    out = {"heldout/accuracy": float(rewards.mean()), "heldout/greedy_accuracy": float(greedy.mean()),
           "heldout/length": float(lengths.double().mean())}
    if wrong.any():
        out["heldout/length_wrong"] = float(lengths[wrong].double().mean())
    if right.any():
        out["heldout/length_right"] = float(lengths[right].double().mean())
    return out


# --- GRPO -----------------------------------------------------------------------------------------
def group_advantages(rewards: torch.Tensor, scale_by_std: bool) -> torch.Tensor:
    """(prompts, G) -> r − mean r, divided by the population std where `scale_by_std` (0 where the std is 0:
    a group whose rewards are all equal has A = 0 exactly)."""
    centred = rewards - rewards.mean(-1, keepdim=True)
    if not scale_by_std:
        return centred
    std = rewards.std(-1, correction=0, keepdim=True)
    return torch.where(std > 0, centred / torch.where(std > 0, std, 1.0), 0.0)


def grpo_loss(logps: torch.Tensor, old_logps: torch.Tensor, ref_logps: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, clip: float, beta: float, length_norm: bool) -> tuple[torch.Tensor, dict]:
    """Minus the mean over responses of Σ_t [min(ρA, clip(ρ)A) − β·k3] / |o| (`length_norm`) or / max_len.
    Tensors are (n, max_len); `advantages` (n,)."""
    ratio = (logps - old_logps).exp()
    a = advantages[:, None]
    unclipped, clipped = ratio * a, ratio.clamp(1 - clip, 1 + clip) * a
    log_ref_ratio = ref_logps - logps
    k3 = log_ref_ratio.exp() - log_ref_ratio - 1
    per_token = (torch.minimum(unclipped, clipped) - beta * k3) * mask
    norm = mask.sum(-1) if length_norm else torch.full((len(mask),), float(mask.shape[1]), dtype=mask.dtype)
    loss = -(per_token.sum(-1) / norm).mean()
    tokens = mask.sum()
    return loss, {"clipfrac": ((clipped < unclipped).double() * mask).sum() / tokens,
                  "kl": (k3.detach() * mask).sum() / tokens}


@dataclass
class Rollout:
    prompts: torch.Tensor     # (n, bits + 1): each prompt G times
    responses: torch.Tensor   # (n, max_len)
    mask: torch.Tensor        # (n, max_len)
    ref_logps: torch.Tensor   # (n, max_len)
    rewards: torch.Tensor     # (prompts, G)
    advantages: torch.Tensor  # (n,)
    lengths: torch.Tensor     # (n,)
    old_logps: torch.Tensor | None = None  # (n, max_len): π_old's, read off the rollout's first update (π = π_old)


def rollouts(task: Task, model: TinyLM, reference: TinyLM, prompts: int, group: int, epochs: int, scale_by_std: bool,
             seed: int, latest: dict) -> Iterator[Rollout]:
    generator = torch.Generator().manual_seed(seed)
    while True:
        picked = task.draw(prompts, generator)
        repeated = picked.repeat_interleave(group, 0)
        responses = sample(model, repeated, task.max_len, generator)
        rewards, lengths = rewards_of(task, repeated, responses)
        with torch.no_grad():
            ref = token_logps(reference, repeated, responses)
        grouped = rewards.view(prompts, group)
        rollout = Rollout(repeated, responses, response_mask(lengths, task.max_len), ref, grouped,
                          group_advantages(grouped, scale_by_std).reshape(-1), lengths)
        latest["rollout"] = rollout
        latest.setdefault("window", []).append(rollout)
        latest["drawn"] = latest.get("drawn", 0) + len(repeated)
        for _ in range(epochs):
            yield rollout


def rollout_metrics(window: list[Rollout]) -> dict[str, float]:
    """Pooled over the rollouts of one log window: mean reward, the share of groups whose rewards are all
    equal (A = 0) and all wrong, the mean |o| of every response, of the wrong and of the right ones."""
    rewards = torch.cat([b.rewards for b in window])
    flat, length = rewards.reshape(-1), torch.cat([b.lengths for b in window]).double()
    out = {"reward": float(flat.mean()), "zero_advantage_groups": float((rewards.std(-1, correction=0) == 0).double().mean()),
           "all_wrong_groups": float((rewards.amax(-1) == 0).double().mean()), "length": float(length.mean()),
           "wrong_share": float((flat == 0).double().mean())}
    for name, chosen in (("length_wrong", flat == 0), ("length_right", flat == 1)):
        if chosen.any():
            out[name] = float(length[chosen].mean())
    return out


def group_gradient_norms(model: TinyLM, batch: Rollout, group: int) -> list[tuple[float, float, float]]:
    """For every group of the rollout: (p, ‖∇‖ of its policy-gradient term Σ_i A_i Σ_t log π(o_i,t) with
    A = (r − mean)/std, the same with A = r − mean), at ρ = 1 (the rollout's first update), the KL term
    aside. A group whose rewards are all equal has A = 0 and both norms are exactly 0; for 0 < p < 1 their
    ratio is the weight the std gives the prompt."""
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for g, rewards in enumerate(batch.rewards):
        rows = slice(g * group, (g + 1) * group)
        logps = token_logps(model, batch.prompts[rows], batch.responses[rows])
        terms = (logps * batch.mask[rows]).sum(-1)
        norms = []
        for scaled in (True, False):
            a = group_advantages(rewards[None], scaled)[0]
            grads = torch.autograd.grad((a * terms).sum(), params, retain_graph=scaled, allow_unused=True)
            norms.append(float(torch.sqrt(sum((x.double() ** 2).sum() for x in grads if x is not None))))
        out.append((float(rewards.mean()), *norms))
    return out


def weight_records(norms: list[tuple[float, float, float]]) -> dict[str, float]:
    """`weight/kk/{p,std,plain}` for the groups with 0 < p < 1; `equal_groups/count` and the largest gradient
    norm among the groups whose rewards were all equal (`equal_groups/max_grad_norm`: 0 exactly)."""
    mixed = [n for n in norms if 0 < n[0] < 1]
    equal = [max(n[1], n[2]) for n in norms if n[0] in (0.0, 1.0)]
    out = {f"weight/{k:02d}/{name}": v for k, n in enumerate(mixed) for name, v in zip(("p", "std", "plain"), n)}
    out["equal_groups/count"] = float(len(equal))
    if equal:
        out["equal_groups/max_grad_norm"] = max(equal)
    return out


def grpo_arm(task: Task, reference: TinyLM, *, steps: int, lr: float, prompts: int, group: int, epochs: int,
             clip: float, beta: float, dr: bool, log_every: int, weights_at: set[int], seed: int
             ) -> Iterator[StepRecord | Diverged | None]:
    """GRPO (dr=False: 1/|o| and std) or Dr. GRPO (dr=True: neither) from the warm start, Adam, `epochs`
    updates per rollout; rollout metrics averaged over each log window; the held-out evaluation on each log,
    and, at the logs in `weights_at`, each group's gradient weight (`weight/…`, index k of the logged groups)."""
    model = copy.deepcopy(reference).requires_grad_(True)
    reference.requires_grad_(False)  # shared by both arms: a frozen π_ref
    latest: dict = {}
    eval_generator = torch.Generator().manual_seed(seed + 7)

    def objective(batch: Rollout, logging: bool):
        logps = token_logps(model, batch.prompts, batch.responses)
        if batch.old_logps is None:  # the rollout's first update runs the policy that sampled it: ρ = 1
            batch.old_logps = logps.detach()
        loss, parts = grpo_loss(logps, batch.old_logps, batch.ref_logps, batch.advantages, batch.mask,
                                clip=clip, beta=beta, length_norm=not dr)
        return loss, parts

    def on_log(step: int) -> dict[str, float]:
        window = latest.pop("window", None) or [latest["rollout"]]  # a second log in one rollout: that rollout
        out = {**rollout_metrics(window), **evaluate(model, task, eval_generator)}
        out["samples"] = float(latest["drawn"])
        if step in weights_at:
            out.update(weight_records(group_gradient_norms(model, latest["rollout"], group)))
        return out

    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    batches = rollouts(task, model, reference, prompts, group, epochs, not dr, seed, latest)
    yield from train(model, optimizer, batches, objective, steps, log_every=log_every, on_log=on_log, window=True)
