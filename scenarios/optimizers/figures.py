"""Optimizers, drawn and said: trajectories on the surface's contours, loss curves, per-layer
update-to-weight ratios on the MLP, the untouched weight under AdamW and Adam + L2; and the
claims about the stability edge, Adam's first step and the decay identity."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from scenarios.base import COLUMNS
from scenarios.claims import Claim, Computed, Final, Peak, Value, fmt, three_digits
from scenarios.explanation import Sentence, say, trajectory
from scenarios.plotting import curves_figure, full_width, layout
from scenarios.records import Records

SURFACE_ARMS = {"SGD": "sgd", "SGD + momentum": "momentum", "Nesterov": "nesterov", "Adam": "adam", "AdamW": "adamw"}
NET = " · MLP"
IDLE = " · untouched weight"
IDLE_ARMS = {"AdamW" + IDLE: "adamw", "Adam + L2" + IDLE: "adam_l2"}
NET_ARMS = {label + NET: kind for label, kind in SURFACE_ARMS.items()}
OPTIMIZERS = [*SURFACE_ARMS, "Adam + L2"]  # one colour per optimizer, in every view
SGD_FAMILY = ("SGD", "SGD + momentum", "Nesterov")


def optimizer_of(arm: str) -> str:
    return arm.split(" · ")[0]


# --- the surface, in numpy (tests check it against the engine's torch version) -----------------
def surface_values(surface: str, kappa: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if surface == "quadratic":
        return 0.5 * (x ** 2 + kappa * y ** 2)
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def view_box(surface: str, kappa: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """x and y ranges: the start, the minimum and the overshoots momentum makes."""
    if surface == "quadratic":
        half = 2.0 / kappa ** 0.5
        return (-2.6, 2.6), (-1.6 * half, 1.6 * half)
    return (-2.0, 2.0), (-1.0, 3.0)


def trajectories_figure(records: Records, colors: dict[str, str], arms: list[str], surface: str,
                        kappa: float) -> go.Figure:
    (x0, x1), (y0, y1) = view_box(surface, kappa)
    xs, ys = np.linspace(x0, x1, 121), np.linspace(y0, y1, 121)
    grid_x, grid_y = np.meshgrid(xs, ys)
    fig = go.Figure()
    fig.add_contour(x=xs, y=ys, z=np.log10(surface_values(surface, kappa, grid_x, grid_y) + 1e-3),
                    colorscale="Greys", showscale=False, opacity=0.25, ncontours=20, line=dict(width=0.5),
                    contours=dict(coloring="fill"), name="log10 loss", hoverinfo="skip", showlegend=False)
    for i, arm in enumerate(arms):
        x, y = records.series(arm, "x"), records.series(arm, "y")
        if x.empty:
            continue
        fig.add_scatter(x=x.to_numpy(), y=y.to_numpy(), name=arm, mode="lines+markers",
                        line=dict(color=colors.get(arm), width=max(1.5, 6.0 - 1.5 * i)), marker=dict(size=3),
                        hovertemplate=f"{arm}<br>x %{{x:.4g}}<br>y %{{y:.4g}}<extra></extra>")
    start = next(((records.first(a, "x"), records.first(a, "y")) for a in arms if records.has("x", a)), None)
    if start is not None:
        fig.add_scatter(x=[start[0]], y=[start[1]], mode="markers", name="start",
                        marker=dict(symbol="x", size=12, color="black"))
    minimum = (0.0, 0.0) if surface == "quadratic" else (1.0, 1.0)
    fig.add_scatter(x=[minimum[0]], y=[minimum[1]], mode="markers", name="minimum",
                    marker=dict(symbol="star", size=14, color="gold", line=dict(color="black", width=1)))
    name = f"½(x² + κy²), κ = {kappa:g}" if surface == "quadratic" else "Rosenbrock (1 − x)² + 100(y − x²)²"
    fig = layout(fig, f"Trajectories on {name} (shading: log10 loss; wider lines drawn first)", "x", "y")
    fig.update_xaxes(range=[x0, x1])
    fig.update_yaxes(range=[y0, y1])
    return full_width(fig)


def mean_over_layers(records: Records, arms: list[str], prefix: str = "update_ratio") -> Records:
    """A records view with one `prefix` value per arm and step: the mean over layers."""
    rows = [(arm, int(step), prefix, float(value)) for arm in arms
            for step, value in records.layers(arm, prefix).mean(axis=1).items()]
    return Records(pd.DataFrame(rows, columns=COLUMNS))


def update_profile_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """Each layer's update-to-weight ratio, averaged over the logged steps, one line per optimizer."""
    fig = go.Figure()
    for arm in arms:
        table = records.layers(arm, "update_ratio")
        if table.empty:
            continue
        mean = table.mean(axis=0)
        fig.add_scatter(x=list(mean.index), y=mean.to_numpy(), name=arm, mode="lines+markers",
                        line=dict(color=colors.get(arm)),
                        hovertemplate=f"{arm}<br>layer %{{x}}<br>mean ‖ΔW‖/‖W‖ %{{y:.3g}}<extra></extra>")
    fig.update_xaxes(dtick=1)
    return layout(fig, "MLP: update-to-weight ratio by layer (mean over logged steps)",
                  "layer (1 = next to the input; last = the head)", "‖ΔW‖/‖W‖ per step (log scale)", log_y=True)


def decay_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    fig = curves_figure(records, colors, "weight", arms=arms, log_y=False, y_title="weight value",
                        title="Untouched weight: AdamW's decay vs Adam + L2")
    closed = records.series(arms[0], "closed_form") if arms else pd.Series(dtype=float)
    if len(closed):
        fig.add_scatter(x=closed.index, y=closed.to_numpy(), name="(1 − lr·λ)ᵗ", mode="lines",
                        line=dict(color="black", dash="dash", width=1.5))
    return fig


# --- claims -------------------------------------------------------------------------------------
def fate(records: Records, arm: str) -> list[Claim]:
    """`trajectory`, except that a curve whose peak is its last point (it grew to the end) is told
    by where it started and where it ended."""
    claims = trajectory(records, arm)
    if len(claims) == 2 and isinstance(claims[0], Peak) and isinstance(claims[1], Final) \
            and claims[0].step == claims[1].step:
        series = records.series(arm, "loss")
        return [Value(arm, "loss", int(series.index[0]), float(series.iloc[0]), "from"), claims[1]]
    return claims


def edge_product(arm: str):
    """records -> lr·λ_max of the arm (its step-0 rate times the Hessian's largest eigenvalue)."""
    def compute(records: Records) -> float | None:
        lr, curvature = records.at(arm, "lr", 0), records.at(arm, "lambda_max", 0)
        return lr * curvature if lr is not None and curvature is not None else None
    return compute


# Linear stability on a quadratic with curvature λ at h = lr·λ (torch's SGD: v ← μv + g;
# heavy ball w ← w − lr·v; Nesterov w ← w − lr·(g + μv)): the largest h that does not grow.
EDGES = {"SGD": ("2", lambda mu: 2.0), "SGD + momentum": ("2(1 + μ)", lambda mu: 2 * (1 + mu)),
         "Nesterov": ("2(1 + μ)/(1 + 2μ)", lambda mu: 2 * (1 + mu) / (1 + 2 * mu))}


def stability_edge(arm: str, momentum: float) -> float:
    """The largest lr·λ_max at which `arm` does not grow on a quadratic (momentum μ for the two
    momentum methods; tests/test_optimizers.py checks each against torch's SGD)."""
    return EDGES[arm][1](momentum)


def side_of(value: float, edge: float) -> str:
    """"below", "at" (within 1e-9: it neither shrinks nor grows) or "past" the edge."""
    return "at" if abs(value - edge) <= 1e-9 * edge else "below" if value < edge else "past"


def against_edge(arm: str, edge: float, side: str):
    """records -> the arm's lr·λ_max while it lies on `side` of `edge`, else None."""
    def compute(records: Records) -> float | None:
        value = edge_product(arm)(records)
        return value if value is not None and side_of(value, edge) == side else None
    return compute


def stability_sentence(records: Records, surface: str, momentum: float) -> Sentence | None:
    arms = [a for a in SGD_FAMILY if edge_product(a)(records) is not None]
    if not arms:
        return None
    if surface != "quadratic":
        value = edge_product(arms[0])(records)
        return say("SGD, momentum and Nesterov step with {} (λ_max at the minimum; along the valley it changes)",
                   Computed("lr·λ_max = {}", value, edge_product(arms[0]), shown=f"{value:.3g}"))
    claims = []
    for arm in arms:
        formula, edge = EDGES[arm][0], stability_edge(arm, momentum)
        value = edge_product(arm)(records)
        side = side_of(value, edge)
        named = formula if formula == f"{edge:.3g}" else f"{formula} = {edge:.3g}"
        claims.append(Computed(f"{arm} {{}}, {side} its edge {named}", value,
                               against_edge(arm, edge, side), shown=f"{value:.3g}"))
    return say(f"lr·λ_max against each method's stability edge on a quadratic (μ = {momentum:g}): "
               + "; ".join(["{}"] * len(claims)), *claims)


def first_step(arm: str, coordinate: str):
    """records -> |coordinate after step 0 − before| / lr: 1 when Adam's first step is lr·sign(g)."""
    def compute(records: Records) -> float | None:
        before, after, lr = (records.at(arm, coordinate, 0), records.at(arm, coordinate, 1), records.at(arm, "lr", 0))
        return abs(after - before) / lr if None not in (before, after, lr) and lr > 0 else None
    return compute


SIGN_STEP = 0.005  # |step/lr − 1| under this: the step is lr·sign(g) to the three digits shown


def lr_times(value: float) -> str:
    """'exactly lr' or three digits, '1.00·lr': the first step is lr·|g|/(|g| + ε), 1 − 5×10⁻⁹ of lr at |g| = 2,
    which six decimals wrote as a bare 1.000000."""
    return "exactly lr" if value == 1 else f"{three_digits(value)}·lr"


def adam_sentence(records: Records) -> Sentence | None:
    claims = [Computed(f"{{}} in {c}", value, first_step("Adam", c), shown=lr_times(value))
              for c in ("x", "y") if (value := first_step("Adam", c)(records)) is not None]
    if not claims:
        return None
    why = (" (−lr·g/(|g| + ε) ≈ −lr·sign(g): the gradient's size drops out)" if all(abs(c.value - 1) < SIGN_STEP
           for c in claims) else " (−lr·g/(|g| + ε): a gradient near ε in size moves less than lr)")
    return say("Adam's first step moved the point by " + " and ".join(["{}"] * len(claims)) + why, *claims)


def relative_error(arm: str):
    """records -> |weight − (1 − lr·λ)^t| / (1 − lr·λ)^t at the arm's last logged step."""
    def compute(records: Records) -> float | None:
        step = records.last_step(arm, "weight")
        weight, closed = records.at(arm, "weight", step), records.at(arm, "closed_form", step)
        return abs(weight - closed) / abs(closed) if None not in (weight, closed) and closed != 0 else None
    return compute


def decay_sentence(records: Records) -> Sentence | None:
    adamw, l2 = IDLE_ARMS
    step = records.last_step(adamw, "weight")
    error = relative_error(adamw)(records)
    if step is None or error is None:
        return None
    closed = records.at(adamw, "closed_form", step)
    claims: list[Claim] = [Final(adamw, "weight", step, records.last(adamw, "weight")),
                           Computed("(1 − lr·λ)ᵗ = {}", closed, lambda r: r.at(adamw, "closed_form", step)),
                           Computed("relative error {}", error, relative_error(adamw), rel=1e-3, shown=fmt(error))]
    template = "The untouched weight, from 1: under AdamW it {} against {}, {}"
    if records.last_step(l2, "weight") is not None:
        claims.append(Final(l2, "weight", records.last_step(l2, "weight"), records.last(l2, "weight")))
        template += "; under Adam + L2 it {}"
    return say(template, *claims)
