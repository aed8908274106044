"""Attention, drawn and told: the d_k sweep (variance, entropy, score gradient, one query's
weights), held-out accuracy against the number of heads, the attention maps of the drawn
example, and the claims the explanation is built from. Everything reads `Records`."""
import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Computed, fmt
from scenarios.explanation import Sentence, say
from scenarios.plotting import category_color, full_width, layout
from scenarios.recorded import percent, recorded, snapshot
from scenarios.records import Records
from scenarios.words import count

SWEEP = "random q, k"  # the arm of the d_k sweep: its step is d_k
UNIFORM = "uniform scores"
KINDS = ("unscaled", "scaled")  # q·k, and q·k/√d_k
KIND_NAMES = {"unscaled": "q·k (unscaled)", "scaled": "q·k/√d_k (scaled)"}
VALUES = 16  # values a lookup chooses from: chance is 1/16


def heads_label(heads: int, layers: int) -> str:
    return count(heads, "head") + (f" · {count(layers, 'layer')}" if layers > 1 else "")


def uniform_label(layers: int) -> str:
    return UNIFORM + (f" · {count(layers, 'layer')}" if layers > 1 else "")


def heads_of(arm: str) -> int | None:
    match = re.match(r"(\d+) head", arm)
    return int(match.group(1)) if match else None


# --- the d_k sweep -----------------------------------------------------------------------------
def dims(records: Records) -> list[int]:
    return [int(d) for d in records.series(SWEEP, "var_qk").index]


def variance_ratio_range(records: Records) -> tuple[float, float] | None:
    """min and max over the sweep of Var(q·k)/d_k."""
    series = records.series(SWEEP, "var_qk")
    if series.empty:
        return None
    ratios = series.to_numpy() / series.index.to_numpy()
    return float(ratios.min()), float(ratios.max())


def saturation_sentence(records: Records, keys: int, d_k: int) -> Sentence | None:
    """At the swept d_k nearest the chosen one (said which), and at the sweep's largest: the unscaled
    softmax's entropy and largest weight, and the scaled entropy."""
    found = dims(records)
    if not found:
        return None
    shown, top, three = nearest_dim(records, d_k), found[-1], lambda v: f"{v:.3g}"
    parts = [recorded(records, SWEEP, m, shown, shown=three) for m in ("entropy/unscaled", "max_weight/unscaled", "entropy/scaled")]
    if None in parts:
        return None
    which = f"d_k = {shown}" if shown == d_k else f"d_k = {shown} (the swept d_k nearest the chosen {d_k})"
    text = (f"At {which} the softmax of unscaled q·k over {keys} keys has entropy {{}} nats and a largest weight "
            f"of {{}}, each averaged over the queries (the one query drawn below is one of them); of q·k/√d_k, "
            f"entropy {{}} nats (ln {keys} = {math.log(keys):.2f})")
    if shown != top:
        more = [recorded(records, SWEEP, m, top, shown=three) for m in ("entropy/unscaled", "max_weight/unscaled")]
        if None not in more:
            text += f"; at the sweep's largest, d_k = {top}, unscaled: entropy {{}} nats, largest weight {{}}"
            parts += more
    return say(text, *parts)


def gradient_sentence(records: Records) -> Sentence | None:
    """‖∂L/∂scores‖ at both ends of the sweep, unscaled and scaled."""
    found = dims(records)
    if len(found) < 2:
        return None
    low, high = found[0], found[-1]
    parts = [recorded(records, SWEEP, f"grad_scores/{kind}", d, shown=lambda v: f"{v:.3g}") for kind in KINDS
             for d in (low, high)]
    return say(f"The gradient reaching the scores, ‖∂L/∂s‖ (L = Σ p_j g_j, random g), from d_k = {low} to {high}: "
               "unscaled {} → {}, scaled {} → {}.", *parts) if None not in parts else None


def variance_sentence(records: Records) -> Sentence | None:
    span = variance_ratio_range(records)
    if span is None:
        return None
    low = Computed("{}", span[0], lambda r: (variance_ratio_range(r) or (None,))[0], shown=f"{span[0]:.3f}")
    high = Computed("{}", span[1], lambda r: (variance_ratio_range(r) or (None, None))[1], shown=f"{span[1]:.3f}")
    return say(f"Var(q·k)/d_k over the sweep's {len(dims(records))} values of d_k lies between {{}} and {{}}.", low, high)


def sweep_figure(records: Records, metric: str, title: str, y_title: str, *, log_y: bool, marker: int | None,
                 reference: tuple[str, list[float]] | None = None) -> go.Figure:
    """`metric/unscaled` and `metric/scaled` (or the two variances) against d_k on a log axis."""
    fig = go.Figure()
    names = {"unscaled": "var_qk", "scaled": "var_qk_scaled"} if metric == "var_qk" else \
        {kind: f"{metric}/{kind}" for kind in KINDS}
    for i, kind in enumerate(KINDS):
        series = records.series(SWEEP, names[kind])
        if series.empty:
            continue
        fig.add_scatter(x=series.index, y=series.to_numpy(), name=KIND_NAMES[kind], mode="lines+markers",
                        line=dict(color=category_color(i + 1) if i else "#555555", width=3),
                        hovertemplate=f"{KIND_NAMES[kind]}<br>d_k %{{x}}<br>%{{y:.4g}}<extra></extra>")
    found = dims(records)
    if reference is not None and found:
        name, values = reference
        fig.add_scatter(x=found, y=values[:len(found)], name=name, mode="lines", line=dict(color="gray", dash="dot"),
                        hoverinfo="skip")
    marker = nearest_dim(records, marker) if marker is not None else None
    ys = [y for trace in fig.data for y in trace.y]
    if marker is not None and ys:  # a trace, not a shape: shapes on a log axis take exponents
        fig.add_scatter(x=[marker, marker], y=[min(ys), max(ys)], mode="lines", name=f"d_k = {marker} (drawn below)",
                        line=dict(color="lightgray", dash="dash"), hoverinfo="skip")
    layout(fig, title, "d_k (log scale)", y_title + (" (log scale)" if log_y else ""), log_y=log_y)
    fig.update_layout(legend_title_text="scores", legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig.update_xaxes(type="log", tickvals=found or None)


def nearest_dim(records: Records, d_k: int) -> int | None:
    found = dims(records)
    return min(found, key=lambda d: abs(math.log(d / d_k))) if found else None


def example_weights_figure(records: Records, d_k: int) -> go.Figure:
    """One random query's softmax weights over its keys, sorted, scaled and unscaled, at one d_k."""
    shown = nearest_dim(records, d_k)
    fig = go.Figure()
    for i, kind in enumerate(KINDS):
        prefix = f"example_weight/{kind}/rank_"
        ranks = sorted(m for m in records.metrics(SWEEP) if m.startswith(prefix))
        if shown is None or not ranks:
            continue
        weights = [records.at(SWEEP, m, shown) for m in ranks]
        fig.add_bar(x=list(range(1, len(ranks) + 1)), y=weights, name=KIND_NAMES[kind],
                    marker_color=category_color(i + 1) if i else "#555555",
                    hovertemplate=f"{KIND_NAMES[kind]}<br>rank %{{x}}<br>weight %{{y:.3f}}<extra></extra>")
    title = f"One query's softmax weights over its keys, largest first (d_k = {shown})" if shown else \
        "One query's softmax weights over its keys"
    layout(fig, title, "key, by weight (1 = largest)", "attention weight")
    return fig.update_layout(barmode="group", legend_title_text="scores", legend=dict(orientation="h", y=-0.2))


# --- the lookup ---------------------------------------------------------------------------------
def final_accuracy(records: Records, arm: str, last_step: int) -> float | None:
    return records.at(arm, "eval_accuracy", last_step)


def heads_figure(records: Records, colors: dict[str, str], arms: list[str], last_step: int) -> go.Figure:
    """Held-out accuracy at the last step against the number of heads; uniform scores and chance as lines."""
    fig = go.Figure()
    done = [(heads_of(arm), arm, a) for arm in arms if heads_of(arm) and (a := final_accuracy(records, arm, last_step)) is not None]
    if done:
        fig.add_scatter(x=[h for h, _, _ in done], y=[100 * a for _, _, a in done], mode="lines",
                        line=dict(color="lightgray"), showlegend=False, hoverinfo="skip")
    for heads, arm, accuracy in done:
        fig.add_scatter(x=[heads], y=[100 * accuracy], mode="markers", name=arm, marker=dict(size=12, color=colors[arm]),
                        hovertemplate=f"{arm}<br>held-out accuracy %{{y:.1f}}%<extra></extra>")
    uniform = next((arm for arm in arms if arm.startswith(UNIFORM)), None)
    value = final_accuracy(records, uniform, last_step) if uniform else None
    if value is not None:
        fig.add_hline(y=100 * value, line_dash="dash", line_color=colors[uniform],
                      annotation_text=f"{uniform}: {percent(value)}", annotation_position="top left")
    fig.add_hline(y=100 / VALUES, line_dash="dot", line_color="gray", annotation_text=f"chance 1/{VALUES}",
                  annotation_position="bottom right")
    layout(fig, f"Held-out accuracy vs number of heads (step {last_step})",
           "heads (each of d_model/heads dimensions)", "held-out accuracy (%)")
    return fig.update_xaxes(type="log", tickvals=[1, 2, 4, 8]).update_yaxes(range=[0, 105])


def token_labels(tokens: dict[str, float]) -> tuple[list[str], list[str]]:
    """Column labels (every position: `k3→v7`, then `q 3,9`) and row labels (the queries)."""
    def token(name: str) -> str:
        value = tokens.get(f"example/{name}")
        return "?" if value is None else f"{value:.0f}"
    pairs = sorted(m[len("example/key_"):] for m in tokens if m.startswith("example/key_"))
    queries = sorted({m.split("/")[1] for m in tokens if m.startswith("example/query_")})
    rows = [f"q {token(q + '/a')},{token(q + '/b')}" for q in queries]
    return [f"k{token('key_' + i)}→v{token('value_' + i)}" for i in pairs] + rows, rows


def maps_figure(records: Records, arm: str | None) -> go.Figure:
    """Each head's attention weights (rows: the queries of the drawn example; columns: every
    position), at the arm's latest snapshot; one panel per layer and head."""
    step, weights = snapshot(records, arm, "attn/") if arm else (None, {})
    if not weights:
        return layout(go.Figure(), "Attention maps of the drawn example (waiting for a trained arm)", "position", "query")
    grid = {tuple(int(part[1:]) for part in m.split("/")[1:]): v for m, v in weights.items()}  # (layer, head, q, p)
    layers, heads = max(k[0] for k in grid), max(k[1] for k in grid)
    queries, positions = max(k[2] for k in grid) + 1, max(k[3] for k in grid) + 1
    columns, rows = token_labels(snapshot(records, arm, "example/")[1])  # recorded once, at the first log
    titles = [f"layer {l} · head {h}" for l in range(1, layers + 1) for h in range(1, heads + 1)]
    fig = make_subplots(rows=layers, cols=heads, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.2)
    for (layer, head) in sorted({(k[0], k[1]) for k in grid}):
        z = np.array([[grid.get((layer, head, q, p), np.nan) for p in range(positions)] for q in range(queries)])
        fig.add_heatmap(z=z, x=columns[:positions], y=rows[:queries], zmin=0, zmax=1, colorscale="Blues",
                        showscale=(layer, head) == (1, 1), colorbar=dict(title="weight"), row=layer, col=head,
                        hovertemplate=f"layer {layer} · head {head}<br>query %{{y}}<br>position %{{x}}<br>"
                                      "weight %{z:.3f}<extra></extra>")
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=11))
    fig.update_yaxes(title_text="query (its two keys)", col=1)
    fig.update_xaxes(tickangle=-50, tickfont=dict(size=10))
    fig.update_xaxes(title_text="position: key→value pairs, then the queries", row=layers)
    fig.update_layout(title=f"{arm}: attention of each query over the drawn example (step {step})",
                      height=280 + 190 * layers, margin=dict(l=90, r=20, t=80, b=60))
    return full_width(fig)


def accuracy_sentence(records: Records, arms: list[str], last_step: int) -> Sentence | None:
    """Every finished lookup arm's held-out accuracy at the last step."""
    parts = [c for arm in arms if (c := recorded(records, arm, "eval_accuracy", last_step, f"{arm} {{}}", percent))]
    if not parts:
        return None
    return say(f"held-out lookup accuracy at step {last_step} (chance 1/{VALUES}): " + ", ".join(["{}"] * len(parts)), *parts)


def sdpa_gap(arms: list[str], metric: str = "sdpa_max_abs_diff"):
    """records -> the largest |SDPA − written-out attention| any arm recorded (float64 inputs;
    `sdpa_max_abs_diff_fp32`: the same q, k, v in float32)."""
    def compute(records: Records) -> float | None:
        values = [v for arm in arms for v in records.values(arm, metric)]
        return float(max(values)) if values else None
    return compute


def sdpa_sentence(records: Records, arms: list[str]) -> Sentence | None:
    gaps = {m: sdpa_gap(arms, m)(records) for m in ("sdpa_max_abs_diff", "sdpa_max_abs_diff_fp32")}
    if None in gaps.values():
        return None
    return say("torch's scaled_dot_product_attention against the written-out softmax(QKᵀ/√d)V on the same q, k, v, "
               "largest difference over every check of the run: {} in float64, {} in float32.",
               *(Computed("{}", gap, sdpa_gap(arms, m), shown=fmt(gap)) for m, gap in gaps.items()))
