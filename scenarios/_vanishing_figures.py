"""Vanishing gradients: the layer × step heatmap, the gradient claims read from a profile, and a run's cost."""
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Computed
from scenarios.records import Records


def heatmap_figure(records: Records, arms: list[str]) -> go.Figure:
    """log10 of each layer's weight-gradient norm, layer × step, one panel per arm, one colour scale."""
    grads = records.layer_table("grad_norm")
    fig = make_subplots(rows=1, cols=max(1, len(arms)), shared_yaxes=True, subplot_titles=arms,
                        horizontal_spacing=0.06)
    positive = grads["value"][grads["value"] > 0]
    zmin = float(np.log10(positive.min())) if len(positive) else -8
    zmax = float(np.log10(positive.max())) if len(positive) else 0
    for col, arm in enumerate(arms, start=1):
        table = records.layers(arm, "grad_norm").T  # (layer, step)
        if table.empty:
            continue
        fig.add_heatmap(x=table.columns, y=table.index, z=np.log10(table.clip(lower=1e-30).to_numpy()), zmin=zmin,
                        zmax=zmax, colorscale="Viridis", showscale=col == 1, row=1, col=col,
                        colorbar=dict(title="log10 ‖∂L/∂W‖"),
                        hovertemplate=f"{arm}<br>step %{{x}}<br>layer %{{y}}<br>log10 norm %{{z:.2f}}<extra></extra>")
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.update_yaxes(title_text="layer (1 = next to the input)", row=1, col=1)
    fig.update_layout(title="log10 weight-gradient norm, layer × step", margin=dict(l=60, r=20, t=70, b=50))
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


def gradient_claims(records: Records, arm: str, depth: int) -> list[Computed]:
    """At step 0: layer 1's weight gradient as a power of ten of layer `depth`'s, and the
    back-propagated gradient's factor per layer."""
    claims = []
    ratio = first_over_last("grad_norm", arm)(records)
    if ratio is not None and ratio > 0:
        claims.append(Computed(f"at step 0 layer 1's weight gradient is $10^{{{{{{}}}}}}$ of layer {depth}'s",
                               ratio, first_over_last("grad_norm", arm), rel=1e-9, shown=f"{np.log10(ratio):.1f}"))
    factor = per_layer_factor("out_grad", arm)(records)
    if factor is not None:
        claims.append(Computed("the back-propagated gradient changes ×{} per layer", factor,
                               per_layer_factor("out_grad", arm), rel=1e-9, shown=f"{factor:.3f}"))
    return claims


# Seconds per step of one arm: k0 + k1·depth + k2·depth·width² (batch 256), plus k3·depth per
# logged step (the probes). Fitted by bench/calibrate.py on the 2-core machine, one intra-op
# thread (2026-12-01; within ~30% on runs of 10 s and more, an overestimate on small ones).
STEP_S, DEPTH_S, WORK_S, PROBE_S = 1.25e-3, 1.6e-5, 2.27e-8, 4.46e-4


def arm_seconds(depth: int, width: int, steps: int) -> float:
    logs = -(-steps // max(1, -(-steps // 100)))  # the arm logs every ceil(steps / 100) steps
    return steps * (STEP_S + DEPTH_S * depth + WORK_S * depth * width ** 2) + logs * PROBE_S * depth


# The chain rule through L layers, and the linear-regime factor per layer.
FORMULA = (r"\begin{aligned}\frac{\partial L}{\partial h_{1}} &= \Big(\prod_{l=2}^{L} W_l^{\top}\,"
           r"\mathrm{diag}\,f'(z_l)\Big)\frac{\partial L}{\partial h_{L}}\\"
           r"\text{factor per layer} &\approx f'(0)\sqrt{n\,\mathrm{Var}(W)}"
           r" = \tfrac14\sqrt{\tfrac13}\approx 0.144\quad\text{(sigmoid, PyTorch default init)}\end{aligned}")
