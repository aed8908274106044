"""Autodiff, tensors and modules: how does PyTorch get a gradient, and what does a pretrained one carry?

An `nn.Module` owns tensors: parameters, which train, and buffers (here the input's mean and
std), which are saved with it but get no gradient. During one forward pass autograd records a
graph of backward nodes (`loss.grad_fn`, then `next_functions`, down to one `AccumulateGrad`
per parameter). `loss.backward()` walks it from the loss, each node multiplying the incoming
gradient by its local derivative: the chain rule, for W[j, i] of the first layer

    ∂L/∂W[j,i] = 2(ŷ − y) · v_j · (1 − h_j²) · x̃_i,

with v_j the output weight from hidden unit j (units and inputs count from 1).

The page computes each factor by hand, checks the running product against
`torch.autograd.grad`, and the whole gradient against central finite differences and
`torch.autograd.gradcheck` in float64.

Those gradients are what training follows, and what it learns can be reused: a net pretrained
on task A (10 classes, plenty of data) is fine-tuned on a related task B with a few examples,
every weight or only a fresh last layer, beside the same net trained from scratch on B alone.
`relatedness` sets how much of A's features B's labels depend on.

Look at the graph (numbers: the order backward ran the nodes), the chain figure (bars: local
derivatives; line: their product; crosses: autograd), and test accuracy on B per arm.
"""
import functools

import pandas as pd
from pydantic import Field

from scenarios.autodiff import figures as look
from scenarios.autodiff.figures import PASS
from scenarios.base import Arm, Scenario, ScenarioConfig, Work, in_turn, shown_by, together, view_field
from scenarios.cost import logs
from scenarios.claims import Final
from scenarios.explanation import Explanation, Sentence, join, say, trajectory
from scenarios.plotting import Figures, arm_colors, curves_figure
from scenarios.records import Records

PRETRAIN, FULL, LAST, SCRATCH = "pretrain on task A", "fine-tune everything", "last layer only", "from scratch"
TUNED = [FULL, LAST, SCRATCH]  # engines.supervised.transfer.ARMS
CLASSES_A, CLASSES_B = 10, 4


class Config(ScenarioConfig):
    hidden: int = Field(3, ge=1, le=6, description="Hidden units of TinyNet (2 inputs → hidden → 1 output).")
    relatedness: float = Field(1.0, ge=0.0, le=1.0, description="How much of task A's features task B's labels read: "
                               "1 = the same features, a new readout; 0 = unrelated features.")
    examples_b: int = Field(64, title="task B examples", ge=16, le=2000, json_schema_extra={"scale": "log"},
                            description="Training examples of task B (full batch). Few: pretraining matters most.")
    pretrain_steps: int = Field(300, ge=10, le=3000, description="Adam steps on task A (lr 3e-3, fresh batches of 128).")
    finetune_steps: int = Field(200, ge=10, le=2000, description="Full-batch Adam steps on task B, for every arm.")
    lr: float = Field(1e-2, ge=1e-4, le=1e-1, json_schema_extra={"scale": "log"}, description="Task B learning rate.")
    path_unit: int = view_field(1, title="chain path: hidden unit", ge=1, le=6, description="The chain figure's path: hidden unit j (capped at hidden).")
    path_input: int = view_field(1, title="chain path: input", ge=1, le=2, description="The chain figure's path: input i of W[j, i].")


def path_of(config: Config) -> tuple[int, int]:
    return min(config.path_unit, config.hidden), config.path_input


class Autodiff(Scenario):
    id = "autodiff"
    title = "Autodiff, tensors and modules"
    order = 5
    picture = "graph"
    topic = "Core mechanics"
    question = "How does PyTorch turn one forward pass into every gradient, and what does a pretrained network carry to a new task?"
    terms = {
        "nn.Module": shown_by("module", "module/", arm=PASS, how="named_parameters() and named_buffers() of TinyNet"),
        "Tensor": shown_by("module", "module/", arm=PASS, how="each parameter and buffer of TinyNet, a tensor: its shape, "
                                                              "dtype and number of elements"),
        "Forward pass": shown_by("forward", "forward/", arm=PASS, how="every intermediate of one example, stage by stage"),
        "Autograd": shown_by("graph", "graph/", arm=PASS, how="the grad_fn nodes one forward pass recorded, walked by next_functions"),
        "Autodiff": shown_by("checks", "check/", arm=PASS, how="the gradient autograd derives, against the chain rule by hand "
                                                              "and finite differences"),
        "Backpropagation": shown_by("graph", "graph/", arm=PASS, how="the order backward ran the nodes, loss first"),
        "Chain rule": shown_by("chain", "chain/", arm=PASS, how="one local derivative per node, multiplied along the path"),
        "Gradient": shown_by("chain", "chain/", arm=PASS, how="∂L/∂W[j, i] three ways: by hand, autograd, finite differences"),
        "Transfer learning": shown_by("transfer_accuracy", "test_accuracy", arm="last layer only",
                                      how="a frozen body pretrained on task A, a new head on task B"),
        "Fine-tuning": shown_by("transfer_accuracy", "test_accuracy", "trained_weights", arm="fine-tune",
                                how="the pretrained net trained further on task B's few examples"),
    }
    methods = {
        "Backpropagation": shown_by("graph", "graph/", arm=PASS, how="backward walks the recorded graph from the loss, node by node"),
        "Pretraining": shown_by("transfer_accuracy", "test_accuracy", arm="last layer only", partial=True,
                                how="a body trained first on task A carried to task B (supervised, not self-supervised on text)"),
    }
    formula = (r"\begin{aligned}\frac{\partial L}{\partial W_{ji}} &= \underbrace{2(\hat y - y)}_{\text{MseLoss}}\cdot"
               r"\underbrace{v_j}_{\text{Addmm}}\cdot\underbrace{(1 - h_j^2)}_{\text{Tanh}}\cdot"
               r"\underbrace{\tilde x_i}_{\text{Addmm}},\qquad h = \tanh(W\tilde x + b),\ \hat y = v^\top h + c\\"
               r"\frac{\partial L}{\partial\theta_k} &\approx \frac{L(\theta + \epsilon e_k) - L(\theta - \epsilon e_k)}"
               r"{2\epsilon}\quad(\text{float64},\ \epsilon = 10^{-6})\end{aligned}")
    Config = Config
    tiny = {"pretrain_steps": 20, "finetune_steps": 10, "examples_b": 32}
    presets = {
        "the fix: a pretrained body, a new head": {"relatedness": 1.0, "examples_b": 64},
        "the failure: unrelated tasks": {"relatedness": 0.0, "examples_b": 64},
        "plenty of task B data": {"examples_b": 2000},
        "Yosinski et al. 2014: transfer fades with relatedness": {"relatedness": 0.5},
    }

    # s per unit on the 2-core machine (bench/estimates.py, 2026-12-04, rates_reference beside them):
    rates = {"example_steps": 8.79e-07, "logs": 0.00125, "run": 0.0241, "steps": 0.000535}
    rates_reference = 0.1341  # the reference workload's CPU s beside the fit
    timed = ({"pretrain_steps": 800, "finetune_steps": 30}, {"examples_b": 2000, "finetune_steps": 60, "pretrain_steps": 50},
             {"finetune_steps": 400, "pretrain_steps": 50})

    def work(self, config: Config) -> Work:
        """Pretraining on batches of 128, three arms fine-tuning full-batch; every log scores 2000 test examples."""
        pre, tune = config.pretrain_steps, 3 * config.finetune_steps
        return Work({"steps": pre + tune, "example_steps": 128 * pre + tune * config.examples_b,
                     "logs": logs(pre) + 3 * logs(config.finetune_steps)},
                    floats=5 * 8000 + 4 * 16 * 2000 + 3 * 64 * config.examples_b)

    def phases(self, config: Config):
        from engines.loop.training import log_every_for
        from engines.supervised.autodiff import autodiff_records
        from engines.supervised.transfer import Transfer
        transfer = Transfer(config.relatedness, config.examples_b, config.seed)  # pretrained in phase 2, tuned in 3
        tune = functools.partial(transfer.finetune, steps=config.finetune_steps, lr=config.lr,
                                 log_every=log_every_for(config.finetune_steps))
        return (in_turn(Arm(PASS, autodiff_records(config.hidden, config.seed), 1, cost=20),
                        Arm(PRETRAIN, transfer.pretrain(config.pretrain_steps, 3e-3, log_every_for(config.pretrain_steps)),
                            config.pretrain_steps, needed=True))
                + together(*(Arm(arm, tune(arm), config.finetune_steps, cost=0.6) for arm in TUNED)))

    def arm_universe(self) -> list[str]:
        return [*TUNED, PRETRAIN, PASS]

    # --- what the run showed ----------------------------------------------------------
    def summarize(self, frame: pd.DataFrame, config: Config) -> dict:
        records = Records(frame)
        final = {arm: records.last(arm, "test_accuracy") for arm in [PRETRAIN, *TUNED]}
        headline = {"task B test accuracy (fine-tune everything)": final[FULL],
                    "task B test accuracy (last layer only)": final[LAST],
                    "task B test accuracy (from scratch)": final[SCRATCH],
                    "largest |autograd − finite differences|": look.largest_check("autograd_vs_fd")(records)}
        return {"headline": headline, "test_accuracy": final, "gradcheck": records.at(PASS, "check/gradcheck", 0),
                "largest_hand_vs_autograd": look.largest_check("hand_vs_autograd")(records)}

    def explain(self, frame: pd.DataFrame, config: Config) -> Explanation:
        records = Records(frame)
        chain = look.chain_sentence(records, *path_of(config))
        if chain is not None and config.path_unit > config.hidden:  # the slider reaches 6 whatever `hidden` is
            chain = Sentence(chain.text + f" (hidden unit {config.path_unit} was asked for; TinyNet has "
                                          f"{config.hidden}, so the path runs through unit {config.hidden})", chain.claims)
        details = [look.module_sentence(records), look.checks_sentence(records)]
        pretrained = records.last_step(PRETRAIN, "test_accuracy")
        if pretrained is not None:
            details.append(say("Pretraining on task A: held-out accuracy {} (chance 0.1)", Final(
                PRETRAIN, "test_accuracy", pretrained, records.last(PRETRAIN, "test_accuracy"))))
        tuned = [say("{}: task B test accuracy {}", arm, trajectory(records, arm, "test_accuracy"))
                 for arm in look.arms_end(records, TUNED)]
        if not chain and not tuned:
            return Explanation(waiting="Run to record one forward pass, walk its graph, and train the transfer arms.")
        takeaway = join(*tuned) if tuned else chain
        details = ([chain] if tuned and chain else []) + details
        return Explanation(takeaway, tuple(d for d in details if d is not None))

    # --- figures ----------------------------------------------------------------------
    def figures(self, frame: pd.DataFrame, config: Config) -> Figures:
        records = Records(frame)
        colors = arm_colors([*TUNED, PRETRAIN], self.arm_universe())
        curves = functools.partial(curves_figure, records, colors, arms=TUNED, log_y=False)
        return Figures({
            "graph": lambda: look.graph_figure(records),
            "chain": lambda: look.chain_figure(records, *path_of(config)),
            "module": lambda: look.module_figure(records),
            "forward": lambda: look.forward_figure(records),
            "checks": lambda: look.checks_figure(records),
            "transfer_accuracy": lambda: look.chance_line(look.as_percent(curves(
                        "test_accuracy", title="Task B: held-out accuracy", y_title="test accuracy")), CLASSES_B),
            "transfer_loss": lambda: curves("test_loss", title="Task B: held-out cross-entropy", y_title="nats"),
            "pretrain": lambda: look.chance_line(look.as_percent(curves_figure(
                        records, colors, "test_accuracy", arms=[PRETRAIN], log_y=False, title="Task A: held-out accuracy while pretraining",
                        y_title="test accuracy")), CLASSES_A),
        })
