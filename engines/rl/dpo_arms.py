"""DPO's β arms trained together: one batched policy whose weights lead with the arm (engines/loop/batched.py).

The arms of a β sweep share everything but β: the reference, the pairs, the initial policy
(a copy of the reference), the batch order and the optimizer's settings. So the K policies
are stacked (`StackedTinyLM`, or a (K, responses) table of logits), β is a (K, 1) tensor,
one Adam (elementwise: K independent optimizers) steps them all, and
`engines.loop.batched.train_arms` runs them in one loop. Several seeds of one run are more
arms: each arm then has its seed's level (task, reference, pairs, batch stream), stacked per
arm where the seeds differ. Every arm's records are those of `engines.rl.dpo.tabular_arm` /
`sequence_arm` for its β and seed alone (tests/test_batched_scenarios.py, tests/test_seeded.py).
"""
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch
from torch import Tensor, nn

from engines.loop.batched import ArmItems, train_arms
from engines.loop.stacked import StackedEmbedding, StackedLinear
from engines.rl.dpo import dpo_loss, optimum_logps, pair_batches
from engines.rl.dpo_tasks import Preferences, SequenceSetup, TabularTask, TinyLM

Rows = Callable[[Tensor], Tensor]  # table rows -> (K, rows) log-probabilities
Firsts = Sequence[Mapping[str, float]]


class StackedTinyLM(nn.Module):
    """K `TinyLM`s as one: tokens (batch, seq) shared by every arm, or (K, batch, seq) per arm -> logits
    (K, batch, seq, vocab)."""

    def __init__(self, models: Sequence[TinyLM]) -> None:
        super().__init__()
        self.prompt = StackedEmbedding([m.prompt for m in models])
        self.previous = StackedEmbedding([m.previous for m in models])
        self.position = StackedEmbedding([m.position for m in models])
        self.head = StackedLinear([m.head for m in models])

    def forward(self, tokens: Tensor) -> Tensor:
        shared = tokens.dim() == 2
        positions = self.position(torch.arange(tokens.shape[-1]))[:, None]  # (K, 1, seq, hidden)
        hidden = torch.tanh(self.prompt(tokens[..., :1], shared) + self.previous(tokens, shared) + positions)
        return self.head(hidden)  # (K, batch, seq, vocab)

    @torch.no_grad()
    def all_logps(self, tokens: Tensor, completion_mask: Tensor) -> Tensor:
        """`arm_sequence_logps(self(tokens), ...)` for many sequences, (K, batch), at the cost of a few: a TinyLM's
        hidden state depends on (prompt, previous token, position) alone, so the next-token log-probabilities
        of every state form a (K, V, V, seq, V) table, computed row for row as `forward` computes them."""
        vocab, length = self.prompt.weight.shape[1], tokens.shape[-1]
        every = torch.arange(vocab)
        hidden = torch.tanh(self.prompt(every)[:, :, None, None] + self.previous(every)[:, None, :, None]
                            + self.position(torch.arange(length))[:, None, None])  # (K, V, V, seq, hidden)
        table = self.head(hidden).log_softmax(-1)  # (K, prompt, previous, position, next)
        steps = torch.arange(length - 1)
        arm = slice(None) if tokens.dim() == 2 else torch.arange(len(table))[:, None, None]
        token_logps = table[arm, tokens[..., :1], tokens[..., :-1], steps, tokens[..., 1:]]  # (K, batch, seq-1)
        return (token_logps * completion_mask[..., 1:]).sum(-1)


def arm_sequence_logps(logits: Tensor, tokens: Tensor, completion_mask: Tensor) -> Tensor:
    """`dpo_tasks.sequence_logps` per arm: logits (K, batch, seq, vocab), tokens (batch, seq) or (K, batch, seq)
    -> (K, batch)."""
    index = tokens[..., 1:, None].expand(logits.shape[0], logits.shape[1], logits.shape[2] - 1, 1)  # (K, batch, seq-1, 1)
    token_logps = logits[:, :, :-1].log_softmax(-1).gather(-1, index).squeeze(-1)
    return (token_logps * completion_mask[..., 1:]).sum(-1)


def per_arm(values: Sequence[Tensor]) -> Tensor:
    """One tensor for every arm: the tensor itself when the arms share it, else stacked (K, ...)."""
    return values[0] if all(v is values[0] for v in values) else torch.stack(list(values))


def arm_prefs(prefs: Sequence[Preferences]) -> Preferences:
    """The arms' pairs: shared, or (K, pairs) per arm (seeds differ; every seed has as many pairs)."""
    return prefs[0] if all(p is prefs[0] for p in prefs) else Preferences(
        *(torch.stack([getattr(p, name) for p in prefs]) for name in ("chosen", "rejected", "label")))


def arm_batches(prefs: Sequence[Preferences], batch_pairs: int | None, seeds: Sequence[int]) -> Iterator[Preferences]:
    """Each arm's minibatches of pairs from its seed's stream (`pair_batches`, as its sequential arm draws them)."""
    streams = {}
    for p, seed in zip(prefs, seeds):
        streams.setdefault((id(p), seed), pair_batches(p, batch_pairs, seed))
    keys = [(id(p), seed) for p, seed in zip(prefs, seeds)]
    if len(streams) == 1:
        yield from next(iter(streams.values()))
    while True:
        drawn = {key: next(stream) for key, stream in streams.items()}
        yield arm_prefs([drawn[key] for key in keys])


def pick(table: Tensor, rows: Tensor) -> Tensor:
    """Per arm, the entries `rows` of its row of `table` (K, n): rows shared (m,) or per arm (K, m)."""
    return table[:, rows] if rows.dim() == 1 else table.gather(1, rows)


def train_dpo_arms(names: Sequence[str], policy_logps: Rows, reference_logps: Callable[[Tensor], Tensor],
                   parameters: list[Tensor], prefs: Sequence[Preferences], betas: Sequence[float], steps: int,
                   lr: float, *, evaluate: Callable[[int, Tensor], dict], batch_pairs: int | None = None,
                   log_every: int = 1, seeds: Sequence[int] | None = None, firsts: Firsts | None = None,
                   every_logps: Rows | None = None) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.train_dpo` for K β arms at once: the objective, windows, and `evaluate` per arm.
    `prefs` and `seeds` (of the batch streams) are per arm; `every_logps` (default `policy_logps`)
    computes the same numbers without gradients, for many rows."""
    every_logps = every_logps or policy_logps
    beta = torch.tensor(list(betas), dtype=torch.float64)[:, None]  # (K, 1)
    every_pair = arm_prefs(prefs)

    def objective(batch: Preferences, logging: bool):
        rows, pairs = torch.cat([batch.chosen, batch.rejected], dim=-1), batch.chosen.shape[-1]
        chosen_logps, rejected_logps = policy_logps(rows).split(pairs, dim=-1)  # (K, pairs) each
        with torch.no_grad():
            ref_chosen, ref_rejected = reference_logps(rows).split(pairs, dim=-1)
        losses, chosen_rewards, rejected_rewards = dpo_loss(chosen_logps, rejected_logps, ref_chosen, ref_rejected,
                                                            beta, batch.label)
        return losses.mean(dim=1), {
            "rewards/chosen": chosen_rewards.mean(dim=1), "rewards/rejected": rejected_rewards.mean(dim=1),
            "rewards/margins": (chosen_rewards - rejected_rewards).mean(dim=1),
            "rewards/accuracies": (chosen_rewards > rejected_rewards).double().mean(dim=1),
            "logps/chosen": chosen_logps.detach().mean(dim=1), "logps/rejected": rejected_logps.detach().mean(dim=1)}

    def on_log(step: int, alive: Tensor) -> dict:
        measured = evaluate(step, alive)
        if step == 0 and firsts is not None:
            for name in dict.fromkeys(n for first in firsts for n in first):
                measured[name] = [first.get(name) for first in firsts]
        with torch.no_grad():
            rows, pairs = torch.cat([every_pair.chosen, every_pair.rejected], dim=-1), every_pair.chosen.shape[-1]
            chosen, rejected = every_logps(rows).split(pairs, dim=-1)
            measured["dataset/logps_chosen"], measured["dataset/logps_rejected"] = chosen.mean(dim=1), rejected.mean(dim=1)
        return measured

    optimizer = torch.optim.Adam(parameters, lr=lr, foreach=True)  # elementwise: one Adam per arm, in one call
    yield from train_arms(names, parameters, optimizer, arm_batches(prefs, batch_pairs, seeds or [0] * len(names)),
                          objective, steps, log_every=log_every, on_log=on_log, window=True)


def tabular_arms(names: Sequence[str], tasks: Sequence[TabularTask], prefs: Sequence[Preferences],
                 betas: Sequence[float], steps: int, lr: float, log_every: int,
                 firsts: Firsts | None = None) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.tabular_arm` for every (β, task) arm: a (K, responses) table of logits, each row
    starting at its task's π_ref."""
    ref_logits = torch.stack([task.ref_logps for task in tasks])  # the references, computed per row as the policy is
    logits = ref_logits.clone().requires_grad_(True)
    rewards = per_arm([task.rewards for task in tasks])
    optimum = torch.stack([optimum_logps(task.ref_logps, task.rewards, beta) for task, beta in zip(tasks, betas)])

    def evaluate(step: int, alive: Tensor) -> dict:
        with torch.no_grad():
            logps = logits.log_softmax(-1)
            ref_logps = ref_logits.log_softmax(-1)
            probs = logps.exp()
            kl = (probs * (logps - ref_logps)).sum(-1)  # one prompt: the mean over prompts is the value itself
            reward = (probs * rewards).sum(-1)
            tv = 0.5 * (probs - optimum.exp()).abs().sum(-1)
        last = {f"policy/response_{k:02d}": probs[:, k] for k in range(probs.shape[1])} if step == steps - 1 else {}
        return {"kl": kl, "true_reward": reward, "tv_to_optimum": tv, **last}

    yield from train_dpo_arms(names, lambda rows: pick(logits.log_softmax(-1), rows),
                              lambda rows: pick(ref_logits.log_softmax(-1), rows), [logits], prefs, betas, steps, lr,
                              evaluate=evaluate, log_every=log_every, firsts=firsts)


def sequence_arms(names: Sequence[str], setups: Sequence[SequenceSetup], prefs: Sequence[Preferences],
                  betas: Sequence[float], steps: int, lr: float, log_every: int, batch_pairs: int = 64,
                  seeds: Sequence[int] | None = None, firsts: Firsts | None = None) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.sequence_arm` for every (β, setup) arm: K trainable copies of the arms' reference LMs
    as one; `seeds` are the arms' batch streams'."""
    policy = StackedTinyLM([setup.reference for setup in setups]).requires_grad_(True)
    shared, setup = all(s is setups[0] for s in setups), setups[0]
    reference = None if shared else StackedTinyLM([s.reference for s in setups]).requires_grad_(False)
    mask = setup.task.completion_mask()
    ref_table = per_arm([s.table(s.ref_logps) for s in setups])  # (prompts, completions) or (K, ...)
    reward_table = setup.table(setup.rewards)  # the echo reward does not depend on the seed

    def policy_logps(rows: Tensor) -> Tensor:
        tokens = setup.sequences[rows]
        return arm_sequence_logps(policy(tokens), tokens, mask).double()  # (K, rows)

    def reference_logps(rows: Tensor) -> Tensor:
        tokens = setup.sequences[rows]
        if reference is not None:
            return arm_sequence_logps(reference(tokens), tokens, mask).double()  # (K, rows)
        return arm_sequence_logps(setup.reference(tokens)[None], tokens, mask).double()[0]  # (rows,), as per arm

    def seen(p: Preferences) -> Tensor:  # (prompts, completions): the completions some pair shows
        in_dataset = torch.zeros(len(setup.sequences), dtype=torch.bool)
        in_dataset[torch.cat([p.chosen, p.rejected])] = True
        return setup.table(in_dataset)
    in_dataset = seen(prefs[0]) if all(p is prefs[0] for p in prefs) else torch.stack([seen(p) for p in prefs])

    def evaluate(step: int, alive: Tensor) -> dict:
        with torch.no_grad():
            logps = policy.all_logps(setup.sequences, mask).double()
            logps = logps.view(len(betas), *reward_table.shape)  # (K, prompts, completions)
            probs = logps.exp()
            kl = (probs * (logps - ref_table)).sum(-1).mean(-1)
            reward = (probs * reward_table).sum(-1).mean(-1)
            mass = (probs * in_dataset).sum(-1).mean(-1)
        return {"kl": kl, "true_reward": reward, "dataset/policy_mass": mass}

    yield from train_dpo_arms(names, policy_logps, reference_logps, list(policy.parameters()), prefs, betas, steps, lr,
                              evaluate=evaluate, batch_pairs=batch_pairs, log_every=log_every, seeds=seeds,
                              firsts=firsts,
                              every_logps=lambda rows: policy.all_logps(setup.sequences[rows], mask).double())


def level_arms(levels: Sequence, names: Sequence[str], betas: Sequence[float]) -> Iterator[ArmItems | None]:
    """Every (β, level) arm as one batched model: `levels[k]` (an `engines.rl.dpo.Level`) is arm k's, the same
    for every β of a sweep, or its seed's for the arms of several seeds; π*'s numbers on each arm's first record."""
    first, firsts = levels[0], [level.optimum(beta) for level, beta in zip(levels, betas)]
    data, prefs = [level.data for level in levels], [level.prefs for level in levels]
    if isinstance(first.data, TabularTask):
        return tabular_arms(names, data, prefs, betas, first.steps, first.lr, first.log_every, firsts)
    return sequence_arms(names, data, prefs, betas, first.steps, first.lr, first.log_every,
                         seeds=[level.batch_seed for level in levels], firsts=firsts)
