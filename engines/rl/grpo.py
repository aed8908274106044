"""RL with verifiable rewards: GRPO (Shao et al. 2024) and Dr. GRPO (Liu et al. 2025) on a tiny LM.

The task (engines.rl.digit_sum): a prompt of binary digits and "=", the answer their digit sum, checked
by a program, so the reward is exact — no reward model. A response is any tokens, then EOS; the token
just before EOS is the answer (filler "." before it lets the policy change its length).

Warm start (`warm_start`): the project's TinyLM (engines.sequence.lm) is trained by teacher
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
from engines.rl.digit_sum import EOS, FILL, PRETRAIN_FILL, Task, evaluate, response_mask, rewards_of, sample, token_logps
from engines.sequence.lm import LMSpec, TinyLM


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
