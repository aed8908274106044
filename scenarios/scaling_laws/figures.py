"""Scaling laws, drawn: the measured grid with the fitted surface, isoFLOP curves with their optima, the
optimal N and D against compute, and the fitted exponents beside Chinchilla's and Kaplan's."""
import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from engines.sequence.scaling_law import CHINCHILLA_A, CHINCHILLA_B, FIELDS, KAPLAN_A, Law
from scenarios.claims import raised
from scenarios.plotting import layout, tick_text
from scenarios.records import Records
from scenarios.scaling_laws.grid import COUNTS, FIT, OPTIMUM, SOURCE, grid_table

REFERENCE = "gray"
LABEL_ROOM = 1.3  # the exponents' axis runs to this × the longest bar, so the label past its end fits


def law_of(records: Records, count: str) -> Law | None:
    if not records.has("alpha", FIT[count]):
        return None
    return Law(*(records.first(FIT[count], name) for name in FIELDS))


def _shades(count: int, scale: str = "Viridis") -> list[str]:
    return sample_colorscale(scale, [0.1 + 0.75 * i / max(1, count - 1) for i in range(count)])


def grid_figure(records: Records, count: str) -> go.Figure:
    """Held-out loss against N, one line per token budget; the fitted law dashed; the floor H dotted."""
    fig, table, law = go.Figure(), grid_table(records), law_of(records, count)
    column = COUNTS[count]
    budgets = sorted(table["tokens"].unique()) if not table.empty else []
    for tokens, shade in zip(budgets, _shades(len(budgets))):
        row = table[table["tokens"] == tokens].sort_values(column)
        fig.add_scatter(x=row[column], y=row["heldout_loss"], mode="lines+markers", name=f"D = {tokens:,.0f} tokens",
                        line=dict(color=shade), legendgroup=str(tokens),
                        hovertemplate=f"D = {tokens:,.0f} tokens<br>N = %{{x:,.0f}}<br>held-out loss %{{y:.4f}}<extra></extra>")
        if law is not None:
            n = np.geomspace(table[column].min(), table[column].max(), 40)
            fig.add_scatter(x=n, y=law.loss(n, tokens), mode="lines", line=dict(color=shade, dash="dash", width=1),
                            name=f"fit, D = {tokens:,.0f}", legendgroup=str(tokens), showlegend=False,
                            hovertemplate=f"fitted L(N, {tokens:,.0f})<br>N = %{{x:,.0f}}<br>%{{y:.4f}}<extra></extra>")
    if records.has("entropy_rate", SOURCE):
        fig.add_hline(y=records.first(SOURCE, "entropy_rate"), line_dash="dot", line_color=REFERENCE,
                      annotation_text="entropy rate H: no model goes below", annotation_position="bottom right")
    fig.update_xaxes(type="log")
    layout(fig, "Held-out loss against model size, one line per token budget (dashed: the fitted law)",
           f"N: parameters {count} (log scale)", "held-out loss (nats per word)")
    return fig.update_layout(legend_title_text="token budget")


def isoflop_figure(records: Records, count: str) -> go.Figure:
    """L(N, C/6N) from the fitted law at each compute budget, its minimum starred; the measured sizes shaded."""
    fig, table, law = go.Figure(), grid_table(records), law_of(records, count)
    column, optima = COUNTS[count], OPTIMUM[count]
    computes = records.series(optima, "compute")
    if law is not None and not computes.empty:
        low, high = table[column].min(), table[column].max()
        # said in the title: a rectangle's own label on a log axis is placed at 10^x (plotly.js) and never shows
        fig.add_vrect(x0=low, x1=high, fillcolor="lightgray", opacity=0.25, line_width=0)
        n = np.geomspace(low / 4, high * 4, 80)
        for (k, compute), shade in zip(computes.items(), _shades(len(computes), "Plasma")):
            name = f"C = {tick_text(compute)} FLOPs"  # 5×10⁸, as the next chart's axis writes it
            fig.add_scatter(x=n, y=law.isoflop(compute, n), mode="lines", line=dict(color=shade), name=name,
                            legendgroup=name, hovertemplate=f"{name}<br>N = %{{x:,.0f}}<br>fitted loss %{{y:.4f}}<extra></extra>")
            n_opt, loss_opt = records.at(optima, "n_opt", k), records.at(optima, "loss_opt", k)
            fig.add_scatter(x=[n_opt], y=[loss_opt], mode="markers", marker=dict(symbol="star", size=14, color=shade),
                            name=f"optimum at {name}", legendgroup=name, showlegend=False,
                            hovertemplate=f"{name}<br>N_opt = %{{x:,.0f}}<br>loss %{{y:.4f}}<extra></extra>")
    fig.update_xaxes(type="log")
    layout(fig, "IsoFLOP curves L(N, C/6N) of the fitted law; stars: the compute-optimal N; shaded: the sizes measured",
           f"N: parameters {count} (log scale)", "fitted held-out loss (nats per word)")
    return fig.update_layout(legend_title_text="compute budget")


def optimal_figure(records: Records, count: str) -> go.Figure:
    """N_opt and D_opt against C, with reference slopes through the first budget's point."""
    fig, optima, law = go.Figure(), OPTIMUM[count], law_of(records, count)
    computes = records.series(optima, "compute")
    if law is not None and not computes.empty:
        c = computes.to_numpy()
        for metric, label, color, fitted, references in (
                ("n_opt", "N_opt", "#1f77b4", law.a, ((CHINCHILLA_A, "Chinchilla C⁰·⁵", "dash"), (KAPLAN_A, "Kaplan C⁰·⁷³", "dot"))),
                ("d_opt", "D_opt", "#d62728", law.b, ((CHINCHILLA_B, "Chinchilla C⁰·⁵", "dash"), (1 - KAPLAN_A, "Kaplan C⁰·²⁷", "dot")))):
            values = records.series(optima, metric).to_numpy()
            fig.add_scatter(x=c, y=values, mode="lines+markers", name=f"{label} ∝ C{raised(f'{fitted:.2f}')} (fitted)",
                            line=dict(color=color), hovertemplate=f"C = %{{x:.2e}}<br>{label} = %{{y:,.0f}}<extra></extra>")
            for slope, words, dash in references:
                fig.add_scatter(x=c, y=values[0] * (c / c[0]) ** slope, mode="lines", name=f"{label}, reference: {words}",
                                line=dict(color=color, dash=dash, width=1), opacity=0.6,
                                hovertemplate=f"reference slope {slope}<br>C = %{{x:.2e}}<br>%{{y:,.0f}}<extra></extra>")
    fig.update_xaxes(type="log")
    layout(fig, f"Compute-optimal N and D against compute (N {count}); references through the first budget",
           "compute C = 6·N·D (FLOPs, log scale)", "parameters or tokens (log scale)", log_y=True)
    return fig.update_layout(legend_title_text="")


def exponents_figure(records: Records) -> go.Figure:
    """a (N_opt ∝ C^a) and b (D_opt ∝ C^b) of each count beside Chinchilla's and Kaplan's."""
    fig = go.Figure()
    rows = [(f"fitted here, N {count}", records.first(FIT[count], "a"), records.first(FIT[count], "b"))
            for count in COUNTS if records.has("a", FIT[count])]
    rows += [("Chinchilla (Hoffmann et al. 2022)", CHINCHILLA_A, CHINCHILLA_B),
             ("Kaplan et al. 2020 (non-embedding N)", KAPLAN_A, 1 - KAPLAN_A)]
    for name, exponent, color in (("a: N_opt ∝ C^a", 1, "#1f77b4"), ("b: D_opt ∝ C^b", 2, "#d62728")):
        fig.add_bar(y=[row[0] for row in rows], x=[row[exponent] for row in rows], name=name, marker_color=color,
                    orientation="h", text=[f"{row[exponent]:.2f}" for row in rows], textposition="outside",
                    cliponaxis=False, hovertemplate=f"%{{y}}<br>{name.split(':')[0]} = %{{x:.3f}}<extra></extra>")
    fig.update_layout(barmode="group")
    layout(fig, "Fitted exponents beside the published ones", "exponent", "fit or reference")
    # after `layout`, which makes the y axis linear; a standoff of its own puts the title beyond the long names
    fig.update_yaxes(type="category", autorange="reversed", title_standoff=8)
    # room for the labels: at 1.15 × the longest bar, Kaplan's "0.73" was cut at the plot's edge
    fig.update_xaxes(range=[0, LABEL_ROOM * max(max(row[1], row[2]) for row in rows)])
    return fig.update_layout(legend_title_text="", legend=dict(orientation="h", y=-0.2))
