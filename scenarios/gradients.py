"""Gradients by layer, shared: the layer × step heatmap and the claims read from a per-layer profile.

Any run whose records carry per-layer metrics (`grad_norm/layer_03`, `out_grad/layer_03`) can be
drawn and read this way: the vanishing-gradients page, and a person's own watched model.
"""
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Computed
from scenarios.records import Records


def layer_heatmap_figure(records: Records, arms: list[str], prefix: str = "grad_norm", *,
                         title: str = "log10 weight-gradient norm, layer × step", z_title: str = "log10 ‖∂L/∂W‖",
                         layer_title: str = "layer (1 = next to the input)") -> go.Figure:
    """log10 of each layer's `prefix` value, layer × step, one panel per arm, one colour scale."""
    table_all = records.layer_table(prefix)
    fig = make_subplots(rows=1, cols=max(1, len(arms)), shared_yaxes=True, subplot_titles=arms,
                        horizontal_spacing=0.06)
    positive = table_all["value"][table_all["value"] > 0]
    zmin = float(np.log10(positive.min())) if len(positive) else -8
    zmax = float(np.log10(positive.max())) if len(positive) else 0
    for col, arm in enumerate(arms, start=1):
        table = records.layers(arm, prefix).T  # (layer, step)
        if table.empty:
            continue
        fig.add_heatmap(x=table.columns, y=table.index, z=np.log10(table.clip(lower=1e-30).to_numpy()), zmin=zmin,
                        zmax=zmax, colorscale="Viridis", showscale=col == 1, row=1, col=col,
                        colorbar=dict(title=z_title),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>log10 %{{z:.2f}}<extra></extra>")
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.update_yaxes(title_text=layer_title, row=1, col=1)
    fig.update_layout(title=title, margin=dict(l=60, r=20, t=70, b=50))
    return fig


def first_over_last(prefix: str, arm: str):
    """records -> layer 1's value over the last layer's at the arm's first logged step."""
    def compute(records: Records) -> float | None:
        norms = records.profile(arm, prefix)
        return float(norms[0] / norms[-1]) if len(norms) > 1 and norms[-1] > 0 else None
    return compute


def per_layer_factor(prefix: str, arm: str):
    """records -> the geometric-mean ratio between neighbouring layers, toward the input."""
    def compute(records: Records) -> float | None:
        norms = records.profile(arm, prefix)
        if len(norms) < 2 or norms[0] <= 0 or norms[-1] <= 0:
            return None
        return float((norms[0] / norms[-1]) ** (1 / (len(norms) - 1)))
    return compute


def gradient_claims(records: Records, arm: str, last_layer: str) -> list[Computed]:
    """At the first logged step: layer 1's weight gradient as a power of ten of the last layer's
    (named `last_layer`), and the back-propagated gradient's factor per layer."""
    claims = []
    ratio = first_over_last("grad_norm", arm)(records)
    if ratio is not None and ratio > 0:
        claims.append(Computed(f"at step 0 layer 1's weight gradient is $10^{{{{{{}}}}}}$ of {last_layer}'s",
                               ratio, first_over_last("grad_norm", arm), rel=1e-9, shown=f"{np.log10(ratio):.1f}"))
    factor = per_layer_factor("out_grad", arm)(records)
    if factor is not None:
        claims.append(Computed("the back-propagated gradient changes ×{} per layer", factor,
                               per_layer_factor("out_grad", arm), rel=1e-9, shown=f"{factor:.3f}"))
    return claims
