"""Positional encodings, drawn and told: accuracy against evaluation length, the attention maps
of each scheme, RoPE's ⟨R_m q, R_n k⟩ against m − n, the permutation test, and the claims."""
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Computed, fmt, raised
from scenarios.explanation import Sentence, say
from scenarios.plotting import full_width, layout
from scenarios.recorded import listed, percent, recorded, snapshot
from scenarios.records import Records

NONE, LEARNED, SINUSOIDAL, ROPE = "no positions", "learned absolute", "sinusoidal", "RoPE"
SCHEMES = {NONE: "none", LEARNED: "learned", SINUSOIDAL: "sinusoidal", ROPE: "rope"}
ORDER_FREE = "order-free guess"
ROTATION = "RoPE on random q, k"
LENGTH_PREFIX = "eval_accuracy/len_"


def lengths(records: Records, arm: str) -> list[int]:
    return sorted(int(m[len(LENGTH_PREFIX):]) for m in records.metrics(arm) if m.startswith(LENGTH_PREFIX))


def at_length(records: Records, arm: str, length: int, text: str = "{}") -> Computed | None:
    """The arm's held-out accuracy at `length`, at its latest evaluation."""
    return recorded(records, arm, f"{LENGTH_PREFIX}{length:02d}", text=text, shown=percent)


# --- figures ------------------------------------------------------------------------------------
def length_figure(records: Records, colors: dict[str, str], train_length: int) -> go.Figure:
    fig = go.Figure()
    for arm in [*SCHEMES, ORDER_FREE]:
        found = lengths(records, arm)
        if not found:
            continue
        step = records.last_step(arm, f"{LENGTH_PREFIX}{found[0]:02d}")
        values = [100 * records.at(arm, f"{LENGTH_PREFIX}{n:02d}", step) for n in found]
        guess = arm == ORDER_FREE
        fig.add_scatter(x=found, y=values, name=arm if guess else f"{arm} (step {step})", mode="lines+markers",
                        line=dict(color="gray" if guess else colors.get(arm), dash="dash" if guess else "solid"),
                        hovertemplate=f"{arm}<br>length %{{x}}<br>held-out accuracy %{{y:.1f}}%<extra></extra>")
    fig.add_vline(x=train_length, line_dash="dot", line_color="gray", annotation_text=f"trained at length {train_length}",
                  annotation_position="bottom right")  # at the top the 100% lines ran through it
    layout(fig, "Held-out accuracy vs sequence length",
           "evaluation length (tokens)", "held-out accuracy (%)")
    return fig.update_yaxes(range=[0, 105]).update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))


def maps_figure(records: Records, arms: list[str], head: int) -> go.Figure:
    """Each scheme's attention weights (mean over the held-out batch) at its latest snapshot, one head."""
    shown = [(arm, *snapshot(records, arm, "attn/")) for arm in arms]
    shown = [(arm, step, {tuple(int(p[1:]) for p in m.split("/")[1:]): v for m, v in weights.items()})
             for arm, step, weights in shown if weights]
    if not shown:
        return layout(go.Figure(), "Attention maps (waiting for the first snapshot)", "key position", "query position")
    layers = max(k[0] for _, _, grid in shown for k in grid)
    head = min(head, max(k[1] for _, _, grid in shown for k in grid))
    titles = [f"{arm} · layer {l}" for l in range(1, layers + 1) for arm, _, _ in shown]
    fig = make_subplots(rows=layers, cols=len(shown), subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.15)
    for col, (arm, step, grid) in enumerate(shown, start=1):
        size = max(k[2] for k in grid) + 1
        for layer in range(1, layers + 1):
            z = np.array([[grid.get((layer, head, q, p), np.nan) for p in range(size)] for q in range(size)])
            fig.add_heatmap(z=z, zmin=0, zmax=1, colorscale="Blues", showscale=col == 1 and layer == 1,
                            colorbar=dict(title="weight"), row=layer, col=col,
                            hovertemplate=f"{arm} (step {step})<br>query %{{y}} → key %{{x}}<br>weight %{{z:.3f}}<extra></extra>")
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="query position", col=1)
    fig.update_xaxes(title_text="key position", row=layers)
    fig.update_layout(title=f"Attention weights, head {head}, mean over held-out sequences", height=240 + 230 * layers,
                      margin=dict(l=70, r=20, t=80, b=50))
    return full_width(fig)


def rope_pairs(records: Records) -> list[tuple[int, int, float]]:
    _, dots = snapshot(records, ROTATION, "rope_dot/")
    return [(int(m.split("/")[1][2:]), int(m.split("/")[2][2:]), v) for m, v in dots.items()]


def rope_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Every (m, n) pair's ⟨R_m q, R_n k⟩ at x = m − n: pairs with the same offset lie on one point."""
    pairs = rope_pairs(records)
    fig = go.Figure()
    if pairs:
        m, n, dots = (np.array(column) for column in zip(*pairs))
        fig.add_scatter(x=m - n, y=dots, mode="markers", name="every (m, n)", customdata=np.stack([m, n], axis=1),
                        marker=dict(color=colors.get(ROTATION), size=7, opacity=0.5),
                        hovertemplate="m %{customdata[0]}, n %{customdata[1]}<br>m − n %{x}<br>"
                                      "⟨R_m q, R_n k⟩ %{y:.6f}<extra></extra>")
        offsets, first = np.unique(m - n, return_index=True)  # one pair per offset: the curve f(m − n)
        fig.add_scatter(x=offsets, y=dots[first], mode="lines", name="f(m − n)", line=dict(color="gray"), hoverinfo="skip")
    base = records.first(ROTATION, "log_base")
    title = "RoPE: ⟨R_m q, R_n k⟩ vs m − n" + (f" (base 10{raised(f'{base:.2g}')})" if base else "")
    return layout(fig, title, "offset m − n (random q, k in float64)", "⟨R_m q, R_n k⟩").update_layout(legend_title_text="")


def permutation_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """max |f(Px) − P f(x)| per scheme, at its last logged step."""
    fig = go.Figure()
    for arm in arms:
        value, step = records.last(arm, "equivariance_error"), records.last_step(arm, "equivariance_error")
        if value is None:
            continue
        fig.add_bar(x=[arm], y=[value], name=arm, marker_color=colors.get(arm), text=[fmt(value)], textposition="outside",
                    hovertemplate=f"{arm} (step {step})<br>max |f(Px) − P f(x)| %{{y:.3g}}<extra></extra>")
    layout(fig, "Permutation test: max |f(Px) − P f(x)|", "position encoding", "largest change over the logits")
    fig.update_traces(cliponaxis=False)
    return fig.update_layout(showlegend=False, margin=dict(t=70))


# --- claims -------------------------------------------------------------------------------------
def lengths_sentence(records: Records, arms: list[str], train_length: int) -> Sentence | None:
    """Held-out accuracy at the trained length for every arm and the order-free guess, then at the longest."""
    trained = [at_length(records, arm, train_length, f"{arm} {{}}") for arm in arms]
    guess = at_length(records, ORDER_FREE, train_length, f"{ORDER_FREE} {{}}")
    slots, present = listed([*trained, guess])
    if not [c for c in trained if c is not None]:
        return None
    longest = max((n for arm in arms for n in lengths(records, arm)), default=train_length)
    text = f"Held-out accuracy at the trained length {train_length}: " + slots
    if longest > train_length:
        far = [at_length(records, arm, longest, f"{arm} {{}}") for arm in [*arms, ORDER_FREE]]
        far_slots, far_present = listed(far)
        if far_present:
            return say(text + f"; at length {longest}: " + far_slots, *present, *far_present)
    return say(text, *present)


def permutation_sentence(records: Records, arms: list[str], train_length: int) -> Sentence | None:
    parts = [recorded(records, arm, "equivariance_error", text=f"{arm} {{}}") for arm in arms]
    slots, present = listed(parts)
    if not present:
        return None
    return say(f"Permuting the {train_length} input tokens of the held-out sequences, max |f(Px) − P f(x)| over the "
               "logits at the last logged step: " + slots, *present)


def rope_sentence(records: Records, dim: int) -> Sentence | None:
    error, norm = (recorded(records, ROTATION, m, 0) for m in ("rope_relative_error", "rope_norm_error"))
    if error is None or norm is None:
        return None
    return say(f"RoPE on random q, k (float64, d = {dim}): ⟨R_m q, R_n k⟩ differs from ⟨R_(m−n) q, k⟩ by at most {{}}; "
               "rotation changes a norm by at most {}.", error, norm)


def in_percent(fig: go.Figure) -> go.Figure:
    """A share (0–1) drawn as the percentages the sentences and the length plot give: ticks and hover in %."""
    fig.update_yaxes(tickformat=".0%")
    for trace in fig.data:
        if trace.hovertemplate:
            trace.hovertemplate = trace.hovertemplate.replace("%{y:.4g}", "%{y:.1%}")
    return fig
