"""Grokking, drawn: accuracy and loss on the training and held-out pairs, the weight norm, the
embedding's Fourier spectrum (at the last step and over training), and the network restricted
to its key frequencies against the same number of other ones."""
import plotly.graph_objects as go

from scenarios.plotting import add_curve, as_percent, full_width, layout
from scenarios.records import Records

DECAY, NO_DECAY = "AdamW, weight decay", "Adam, no weight decay"
ARMS = [DECAY, NO_DECAY]
SPECTRUM = "spectrum/freq_"


def accuracy_figure(records: Records, colors: dict[str, str], p: int) -> go.Figure:
    fig = go.Figure()
    for arm in ARMS:
        add_curve(fig, records, arm, "train_acc", f"{arm} · training pairs", colors[arm], dash="dot")
        add_curve(fig, records, arm, "test_acc", f"{arm} · held-out pairs", colors[arm])
    fig.add_hline(y=1 / p, line_dash="dash", line_color="gray", annotation_text=f"chance 1/p = {100 / p:.1f}%",
                  annotation_position="top right")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return as_percent(layout(fig, "Accuracy: training pairs (dotted) and held-out pairs (solid)", "step", "accuracy"))


def loss_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in ARMS:
        add_curve(fig, records, arm, "loss", f"{arm} · training pairs", colors[arm], dash="dot")
        add_curve(fig, records, arm, "test_loss", f"{arm} · held-out pairs", colors[arm])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Cross-entropy: training pairs (dotted) and held-out pairs (solid)", "step",
                  "cross-entropy (nats, log scale)", log_y=True)


def norm_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in ARMS:
        add_curve(fig, records, arm, "weight_norm", arm, colors[arm])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Weight norm ‖θ‖₂ over every parameter", "step", "‖θ‖₂")


def restricted_figure(records: Records, colors: dict[str, str], key_count: int) -> go.Figure:
    """Nanda et al.'s progress measures, per arm: the held-out loss of the full network, of the network
    with only the key frequencies of its embedding (restricted), and the training loss with them removed
    (excluded)."""
    fig = go.Figure()
    for arm in ARMS:
        add_curve(fig, records, arm, "test_loss", f"{arm} · held-out, full network", colors[arm])
        add_curve(fig, records, arm, "restricted_loss", f"{arm} · held-out, only the {key_count} key frequencies",
                  colors[arm], dash="dash")
        add_curve(fig, records, arm, "excluded_loss", f"{arm} · training, key frequencies removed", colors[arm],
                  dash="dot")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Restricted loss (dashed) and excluded loss (dotted) beside the held-out loss", "step",
                  "cross-entropy (nats, log scale)", log_y=True)


def spectrum_shares(records: Records, arm: str, step: int | None = None) -> dict[int, float]:
    """Frequency k -> its share of the embedding's squared norm at `step` (the last logged step when None)."""
    shares = {}
    for metric in records.metrics(arm):
        if metric.startswith(SPECTRUM):
            value = records.last(arm, metric) if step is None else records.at(arm, metric, step)
            if value is not None:
                shares[int(metric[len(SPECTRUM):])] = value
    return dict(sorted(shares.items()))


def spectrum_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in ARMS:
        shares = spectrum_shares(records, arm)
        if shares:
            fig.add_bar(x=list(shares), y=[100 * v for v in shares.values()], name=arm, marker_color=colors[arm],
                        hovertemplate=f"{arm}<br>frequency %{{x}}<br>%{{y:.1f}}% of the squared norm<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_xaxes(dtick=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return full_width(layout(fig, "The embedding's Fourier spectrum at the last step (the constant left out)",
                  "frequency k (cos, sin of 2πkx/p)", "% of the embedding's squared norm"))


def spectrum_over_time_figure(records: Records) -> go.Figure:
    """The weight-decay arm's spectrum at every logged step: frequency × step."""
    names = sorted(m for m in records.metrics(DECAY) if m.startswith(SPECTRUM))
    fig = go.Figure()
    if names:
        steps = records.series(DECAY, names[0]).index.tolist()
        z = [[100 * v for v in records.series(DECAY, m).reindex(steps).tolist()] for m in names]
        fig.add_heatmap(x=steps, y=[int(m[len(SPECTRUM):]) for m in names], z=z, colorscale="Viridis",
                        colorbar=dict(title="%"),
                        hovertemplate="step %{x}<br>frequency %{y}<br>%{z:.1f}% of the squared norm<extra></extra>")
    return full_width(layout(fig, f"{DECAY}: each frequency's % of the embedding's squared norm, over training",
                             "step", "frequency k"))


def distilled_figure(records: Records, colors: dict[str, str], key_count: int) -> go.Figure:
    """Accuracy at the last step: the full network, only the key frequencies, the next ones instead, and
    (on the training pairs) the key frequencies removed."""
    bars = [("full network<br>(held-out)", "test_acc"), (f"only the {key_count} key<br>frequencies (held-out)", "restricted_acc"),
            (f"the next {key_count} frequencies<br>instead (held-out)", "control_acc"),
            ("key frequencies removed<br>(training pairs)", "excluded_acc")]
    fig = go.Figure()
    for arm in ARMS:
        values = [records.last(arm, metric) for _, metric in bars]
        if all(v is None for v in values):
            continue
        fig.add_bar(x=[label for label, _ in bars], y=[100 * (v or 0) for v in values], name=arm, marker_color=colors[arm],
                    text=[f"{100 * (v or 0):.1f}%" for v in values], textposition="outside",
                    hovertemplate=f"{arm}<br>%{{x}}<br>%{{y:.1f}}% correct<extra></extra>")
    fig.update_layout(barmode="group", yaxis_range=[0, 112], legend=dict(orientation="h", y=-0.25))
    return full_width(layout(fig, "The embedding projected onto a few frequencies: accuracy at the last step",
                             "what the embedding keeps", "% correct"))
