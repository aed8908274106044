"""Compositional generalization, drawn: exact match over training per split, exact match by
construction and token accuracy by action at the last log, and the training loss."""
import plotly.graph_objects as go

from scenarios.plotting import add_curve, curves_figure, layout
from scenarios.records import Records

RANDOM, ADD_JUMP, JUMP_PLUS, LENGTH = "random split", "add jump", "add jump + compositions", "length split"
ARMS = [RANDOM, ADD_JUMP, JUMP_PLUS, LENGTH]
CONSTRUCTIONS = ("bare", "direction", "opposite", "twice", "thrice", "and", "after")  # engines.sequence.scan's, no "around"
ACTIONS = ("JUMP", "WALK", "RUN", "LOOK", "LTURN", "RTURN", "eos")
SYMBOLS = ("circle", "square", "diamond", "x")  # one per arm of ARMS, on the test lines


def exact_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Solid: the test commands exactly right (a seeded sample, every test command at the last log);
    dotted: the training commands (a seeded sample)."""
    fig = go.Figure()
    # add jump (the result) and the length split both sit near 0: add jump is drawn first and wide, each test
    # line has its own markers, so a line on top of another still shows both
    for arm in [ADD_JUMP] + [arm for arm in ARMS if arm != ADD_JUMP]:
        drawn = len(fig.data)
        add_curve(fig, records, arm, "test_exact", arm, colors[arm], label=f"{arm}, test", legendgroup=arm,
                  legendrank=ARMS.index(arm))
        for trace in fig.data[drawn:]:
            wide = arm == ADD_JUMP
            trace.update(mode="lines+markers", line_width=6 if wide else 2,
                         marker=dict(symbol=SYMBOLS[ARMS.index(arm)], size=12 if wide else 7))
        add_curve(fig, records, arm, "train_exact", f"{arm} (train)", colors[arm], dash="dot", legendgroup=arm,
                  showlegend=False, label=f"{arm}, training commands")
    for trace in fig.data:
        trace.y = [100 * v for v in trace.y]
    fig.update_yaxes(range=[-3, 103])
    return layout(fig, "Commands exactly right, greedy decoding (solid: test, dotted: training; a sample of each, "
                       "every test command at the last point)", "step", "% exactly right")


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
    found = {arm: values for arm in ARMS if (values := last_values(records, arm, prefix, names))}
    crowded = sum(len(values) for values in found.values()) > 16  # then only add jump's bars carry their number
    for arm, values in found.items():
        labelled = not crowded or arm == ADD_JUMP
        name = f"{arm} (the numbers on the bars)" if crowded and labelled else arm
        # upright, a number is wider than a narrow bar and sat on its neighbours: turned, it stays in its own
        # column, inside the bar's top where it fits, above a short bar
        fig.add_bar(x=list(values), y=[100 * v for v in values.values()], name=name, marker_color=colors[arm],
                    texttemplate="%{y:.0f}" if labelled else None, textposition="auto", textangle=-90,
                    insidetextanchor="end", textfont_size=10, cliponaxis=False,
                    hovertemplate=f"{arm}<br>%{{x}}: %{{y:.1f}}%<extra></extra>")
    fig.update_yaxes(range=[0, 110])
    layout(fig, title, x_title, y_title)
    fig.update_layout(barmode="group", legend=dict(title_text="", orientation="h", yanchor="top", y=-0.28, x=0),
                      margin=dict(b=90), uniformtext=dict(minsize=10, mode="show"))  # a number wider than its bar
    # kept at 10 px (plotly shrank "100" to fit a narrow bar)
    return fig


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
