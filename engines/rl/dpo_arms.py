"""DPO's β arms trained together: one batched policy whose weights lead with the arm (engines/loop/batched.py).

The arms of a β sweep share everything but β: the reference, the pairs, the initial policy
(a copy of the reference), the batch order and the optimizer's settings. So the K policies
are stacked (`StackedTinyLM`, or a (K, responses) table of logits), β is a (K, 1) tensor,
one Adam (elementwise: K independent optimizers) steps them all, and
`engines.loop.batched.train_arms` runs them in one loop. Every arm's records are those of
`engines.rl.dpo.tabular_arm` / `sequence_arm` for its β alone (tests/test_dpo_arms.py).
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
    """K copies of a `TinyLM` as one: tokens (batch, seq) shared by every arm -> logits (K, batch, seq, vocab)."""

    def __init__(self, models: Sequence[TinyLM]) -> None:
        super().__init__()
        self.prompt = StackedEmbedding([m.prompt for m in models])
        self.previous = StackedEmbedding([m.previous for m in models])
        self.position = StackedEmbedding([m.position for m in models])
        self.head = StackedLinear([m.head for m in models])

    def forward(self, tokens: Tensor) -> Tensor:
        positions = self.position(torch.arange(tokens.shape[1]))[:, None]  # (K, 1, seq, hidden)
        hidden = torch.tanh(self.prompt(tokens[:, :1]) + self.previous(tokens) + positions)  # (K, batch, seq, hidden)
        return self.head(hidden)

    @torch.no_grad()
    def all_logps(self, tokens: Tensor, completion_mask: Tensor) -> Tensor:
        """`arm_sequence_logps(self(tokens), ...)` for many sequences, (K, batch), at the cost of a few: a TinyLM's
        hidden state depends on (prompt, previous token, position) alone, so the next-token log-probabilities
        of every state form a (K, V, V, seq, V) table, computed row for row as `forward` computes them."""
        vocab, length = self.prompt.weight.shape[1], tokens.shape[1]
        every = torch.arange(vocab)
        hidden = torch.tanh(self.prompt(every)[:, :, None, None] + self.previous(every)[:, None, :, None]
                            + self.position(torch.arange(length))[:, None, None])  # (K, V, V, seq, hidden)
        table = self.head(hidden).log_softmax(-1)  # (K, prompt, previous, position, next)
        steps = torch.arange(length - 1)
        token_logps = table[:, tokens[:, :1], tokens[:, :-1], steps, tokens[:, 1:]]  # (K, batch, seq-1)
        return (token_logps * completion_mask[..., 1:]).sum(-1)


def arm_sequence_logps(logits: Tensor, tokens: Tensor, completion_mask: Tensor) -> Tensor:
    """`dpo_tasks.sequence_logps` per arm: logits (K, batch, seq, vocab), tokens (batch, seq) -> (K, batch)."""
    index = tokens[:, 1:, None].expand(logits.shape[0], -1, -1, -1)  # (K, batch, seq-1, 1)
    token_logps = logits[:, :, :-1].log_softmax(-1).gather(-1, index).squeeze(-1)
    return (token_logps * completion_mask[..., 1:]).sum(-1)


def train_dpo_arms(names: Sequence[str], policy_logps: Rows, reference_logps: Callable[[Tensor], Tensor],
                   parameters: list[Tensor], prefs: Preferences, betas: Sequence[float], steps: int, lr: float, *,
                   evaluate: Callable[[int, Tensor], dict], batch_pairs: int | None = None, log_every: int = 1,
                   seed: int = 0, firsts: Firsts | None = None, every_logps: Rows | None = None
                   ) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.train_dpo` for K β arms at once: the objective, windows, and `evaluate` per arm.
    `every_logps` (default `policy_logps`) computes the same numbers without gradients, for many rows."""
    every_logps = every_logps or policy_logps
    beta = torch.tensor(list(betas), dtype=torch.float64)[:, None]  # (K, 1)

    def objective(batch: Preferences, logging: bool):
        rows = torch.cat([batch.chosen, batch.rejected])
        chosen_logps, rejected_logps = policy_logps(rows).split(len(batch.chosen), dim=1)  # (K, pairs) each
        with torch.no_grad():
            ref_chosen, ref_rejected = reference_logps(rows).split(len(batch.chosen), dim=-1)
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
            chosen, rejected = every_logps(torch.cat([prefs.chosen, prefs.rejected])).split(len(prefs.chosen), dim=1)
            measured["dataset/logps_chosen"], measured["dataset/logps_rejected"] = chosen.mean(dim=1), rejected.mean(dim=1)
        return measured

    optimizer = torch.optim.Adam(parameters, lr=lr, foreach=True)  # elementwise: one Adam per arm, in one call
    yield from train_arms(names, parameters, optimizer, pair_batches(prefs, batch_pairs, seed), objective, steps,
                          log_every=log_every, on_log=on_log, window=True)


def tabular_arms(names: Sequence[str], task: TabularTask, prefs: Preferences, betas: Sequence[float], steps: int,
                 lr: float, log_every: int, firsts: Firsts | None = None) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.tabular_arm` for every β: a (K, responses) table of logits, each row starting at π_ref."""
    ref_logits = task.ref_logps.expand(len(betas), -1)  # the reference, computed per row as the policy is
    logits = ref_logits.clone().requires_grad_(True)
    optimum = torch.stack([optimum_logps(task.ref_logps, task.rewards, beta) for beta in betas])  # (K, responses)

    def evaluate(step: int, alive: Tensor) -> dict:
        with torch.no_grad():
            logps = logits.log_softmax(-1)
            ref_logps = ref_logits.log_softmax(-1)
            probs = logps.exp()
            kl = (probs * (logps - ref_logps)).sum(-1)  # one prompt: the mean over prompts is the value itself
            reward = (probs * task.rewards).sum(-1)
            tv = 0.5 * (probs - optimum.exp()).abs().sum(-1)
        last = {f"policy/response_{k:02d}": probs[:, k] for k in range(probs.shape[1])} if step == steps - 1 else {}
        return {"kl": kl, "true_reward": reward, "tv_to_optimum": tv, **last}

    yield from train_dpo_arms(names, lambda rows: logits.log_softmax(-1)[:, rows],
                              lambda rows: ref_logits.log_softmax(-1)[:, rows], [logits], prefs, betas, steps, lr,
                              evaluate=evaluate, log_every=log_every, firsts=firsts)


def sequence_arms(names: Sequence[str], setup: SequenceSetup, prefs: Preferences, betas: Sequence[float], steps: int,
                  lr: float, log_every: int, batch_pairs: int = 64, seed: int = 0,
                  firsts: Firsts | None = None) -> Iterator[ArmItems | None]:
    """`engines.rl.dpo.sequence_arm` for every β: K trainable copies of the reference LM as one."""
    policy = StackedTinyLM([setup.reference] * len(betas)).requires_grad_(True)
    mask = setup.task.completion_mask()
    ref_table, reward_table = setup.table(setup.ref_logps), setup.table(setup.rewards)

    def policy_logps(rows: Tensor) -> Tensor:
        tokens = setup.sequences[rows]
        return arm_sequence_logps(policy(tokens), tokens, mask).double()  # (K, rows)

    def reference_logps(rows: Tensor) -> Tensor:
        tokens = setup.sequences[rows]
        return arm_sequence_logps(setup.reference(tokens)[None], tokens, mask).double()[0]  # (rows,), as per arm

    in_dataset = torch.zeros(len(setup.sequences), dtype=torch.bool)
    in_dataset[torch.cat([prefs.chosen, prefs.rejected])] = True
    in_dataset = setup.table(in_dataset)  # (prompts, completions)

    def evaluate(step: int, alive: Tensor) -> dict:
        with torch.no_grad():
            logps = policy.all_logps(setup.sequences, mask).double()
            logps = logps.view(len(betas), *ref_table.shape)  # (K, prompts, completions)
            probs = logps.exp()
            kl = (probs * (logps - ref_table)).sum(-1).mean(-1)
            reward = (probs * reward_table).sum(-1).mean(-1)
            mass = (probs * in_dataset).sum(-1).mean(-1)
        return {"kl": kl, "true_reward": reward, "dataset/policy_mass": mass}

    yield from train_dpo_arms(names, policy_logps, reference_logps, list(policy.parameters()), prefs, betas, steps, lr,
                              evaluate=evaluate, batch_pairs=batch_pairs, log_every=log_every, seed=seed, firsts=firsts,
                              every_logps=lambda rows: policy.all_logps(setup.sequences[rows], mask).double())

