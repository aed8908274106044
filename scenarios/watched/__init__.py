"""Your own model: what happened inside a training run of your own script?

`from explorer import watch; run = watch(model, optimizer, name=..., every=10)` puts hooks on your
model and optimizer (engines/loop/watching.py) and writes what they measure into the run store
as a run of this pseudo-scenario (explorer/runs/watch.py). It is registered so that a watched run
is drawn, explained, compared and exported exactly like a scenario's, but it is not listed in the
gallery and nothing trains it from here: your script does.

Records, every `every`-th optimizer step (the first included), per module that owns trainable
parameters (`name/layer_XX`, in registration order; the config's `watch_layers` names them):
the gradient norm (after accumulation, all-reduce and unscaling), the weight norm, the
update-to-weight ratio ‖ΔW‖/‖W‖ of the step, the std of the module's output, the share of its
output units ≤ 0 on the batch and on every logged batch so far; and the learning rate. The loss
(and any other value given to `run.log`) at every step.

Look at the gradient heatmap first: a colour that changes from top to bottom is a gradient that
vanishes or explodes across depth. Then the update-to-weight ratios (~10⁻³ is the usual), the
dead units, and the loss curve for spikes.
"""
from pydantic import ConfigDict, Field

from scenarios.base import Machine, Scenario, ScenarioConfig
from scenarios.explanation import Explanation
from scenarios.records import Records
from scenarios.watched.diagnosis import diagnose
from scenarios.watched.figures import watched_figures


class Config(ScenarioConfig):
    """What `watch` stored: your own settings (any JSON keys, as given in `config=`) and its own."""

    model_config = ConfigDict(extra="allow", frozen=True)

    watch_every: int = Field(1, ge=1, description="Measured every this-many optimizer steps (the first included).")
    watch_layers: tuple[str, ...] = Field((), description="The watched modules' paths, module 1 first.")
    watch_kinds: tuple[str, ...] = Field((), description="Their classes (Linear, Conv2d, Embedding…).")
    watch_after: tuple[str, ...] = Field((), description="The class of the module registered next to each "
                                                          "(\"ReLU\"; \"\" when not known): whether a unit ≤ 0 is dead.")
    watch_notes: tuple[str, ...] = Field((), description="How it was measured, where that needs saying "
                                                         "(torch.compile, distributed ranks).")


class Watched(Scenario):
    id = "watched"
    title = "Your runs"
    question = "What happened inside my own training run, layer by layer?"
    topic = "Core mechanics"
    listed = False  # not in the gallery, the CLI's list or `run`: a watched run comes from your script
    terms = {}
    formula = (r"\text{update-to-weight ratio} = \frac{\lVert W_{t+1} - W_t\rVert}{\lVert W_t\rVert}\approx 10^{-3}"
               r"\qquad \lVert \nabla_{\theta_l} L\rVert \text{ per module } l")
    Config = Config

    def execute(self, config: Config, run) -> None:
        raise NotImplementedError(self.refusal(config, Machine(cpus=1)))

    def refusal(self, config: Config, machine: Machine) -> str | None:
        return "A watched run is trained by your own script (from explorer import watch), not from here."

    def figures(self, frame, config: Config):
        return watched_figures(Records(frame), module_labels(config))

    def summarize(self, frame, config: Config) -> dict:
        records = Records(frame)
        arm = next(iter(records.arms()), None)
        loss = records.series(arm, "loss") if arm else None
        steps = int(frame["step"].max()) + 1 if len(frame) else 0
        return {"headline": {"final loss": float(loss.iloc[-1]) if loss is not None and len(loss) else None,
                             "steps": steps}}

    def explain(self, frame, config: Config) -> Explanation:
        records = Records(frame)
        arms = records.arms()
        if not arms:
            return Explanation(waiting="Nothing measured yet: the first logged optimizer step writes the first records.")
        return diagnose(records, arms[0], module_labels(config), list(config.watch_notes), list(config.watch_after))


def module_labels(config: Config) -> list[str]:
    """Each watched module's path, with its class where the path ends in a number (an nn.Sequential's children
    are `0`, `1`, …): `2: Linear`, as print(model) writes `(2): Linear(…)`. Paths alone where the classes are
    not recorded."""
    paths, kinds = list(config.watch_layers), list(config.watch_kinds)
    if len(kinds) != len(paths):
        return paths
    return [f"{path}: {kind}" if kind and path.rsplit(".", 1)[-1].isdigit() else path for path, kind in zip(paths, kinds)]
