"""Compositional generalization, drawn: exact match over training per split, exact match by
construction and token accuracy by action at the last log, and the training loss."""
import plotly.graph_objects as go

from scenarios.plotting import add_curve, curves_figure, layout
from scenarios.records import Records

RANDOM, ADD_JUMP, JUMP_PLUS, LENGTH = "random split", "add jump", "add jump + compositions", "length split"
ARMS = [RANDOM, ADD_JUMP, JUMP_PLUS, LENGTH]
CONSTRUCTIONS = ("bare", "direction", "opposite", "twice", "thrice", "and", "after")  # engines.sequence.scan's, no "around"
ACTIONS = ("JUMP", "WALK", "RUN", "LOOK", "LTURN", "RTURN", "eos")


def exact_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Solid: the test commands exactly right (seeded sample); dotted: the training commands."""
    fig = go.Figure()
    for arm in ARMS:
        add_curve(fig, records, arm, "test_exact", arm, colors[arm], label=f"{arm}, test", legendgroup=arm)
        add_curve(fig, records, arm, "train_exact", f"{arm} (train)", colors[arm], dash="dot", legendgroup=arm,
                  showlegend=False, label=f"{arm}, training commands")
    for trace in fig.data:
        trace.y = [100 * v for v in trace.y]
    fig.update_yaxes(range=[-3, 103])
    return layout(fig, "Commands exactly right, greedy decoding (solid: test, dotted: training)", "step",
                  "% exactly right")


def last_values(records: Records, arm: str, prefix: str, names: tuple[str, ...]) -> dict[str, float]:
    """`prefix + name` of `arm` at its latest logged step, for the names recorded there."""
    step = records.last_step(arm, "test_exact")
    if step is None:
        return {}
    values = {name: records.at(arm, f"{prefix}{name}", step) for name in names}
    return {name: value for name, value in values.items() if value is not None}


def bars_figure(records: Records, colors: dict[str, str], prefix: str, names: tuple[str, ...], title: str,
                x_title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    for arm in ARMS:
        values = last_values(records, arm, prefix, names)
        if values:
            fig.add_bar(x=list(values), y=[100 * v for v in values.values()], name=arm, marker_color=colors[arm],
                        texttemplate="%{y:.0f}", textposition="outside", textfont_size=9, cliponaxis=False,
                        hovertemplate=f"{arm}<br>%{{x}}: %{{y:.1f}}%<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 110])
    return layout(fig, title, x_title, y_title)


def construction_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    return bars_figure(records, colors, "test_exact/", CONSTRUCTIONS,
                       "Test commands exactly right, by the constructions they use (last log)",
                       "construction (a command counts under each it uses)", "% exactly right")


def action_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    return bars_figure(records, colors, "test_token/", ACTIONS,
                       "Fed the true prefix: each target action predicted right (test commands, last log)",
                       "target token", "% predicted right (teacher forcing)")


def loss_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    return curves_figure(records, colors, "loss", arms=ARMS, title="Training loss (cross-entropy on the actions and EOS)",
                         y_title="nats per token")
