"""FlashAttention, drawn: HBM traffic by the IO model against the SRAM size, measured peak memory
against N, the float64 differences from the explicit form, where each float format's naive softmax
overflows, and (on CUDA) SDPA's kernels (said in claims.py).

Ticks at the values measured: a log axis ticked at them (the N of the memory sweep, the M of the IO grid)
sets `tickvals` and leaves `ticktext` to plotly.js, which writes them in full ("128", "1024"); with a
`ticktext` equal to the numbers written out, the page's finishing (explorer/view/look.py) takes the axis for
its own 1-2-5 log ticks and relabels it 200, 500, 1000."""
import numpy as np
import plotly.graph_objects as go

from scenarios.plotting import category_color, layout, log_ticks
from scenarios.records import Records

IO, EXACT, STANDARD, TILED, CUDA = "IO model (per head)", "exactness (float64)", "standard attention", "tiled attention", "SDPA on CUDA"
DTYPES = ("float16", "bfloat16", "float32", "float64")
IO_LINES = {"standard": "standard", "standard_mask_dropout": "standard + mask + dropout", "tiled": "tiled (FlashAttention)"}
ERRORS = {"out_vs_explicit": "O vs<br>explicit", "out_vs_sdpa": "O vs<br>SDPA", "lse": "L vs<br>logsumexp",
          "grad_q": "dQ", "grad_k": "dK", "grad_v": "dV"}  # two short lines each: six side by side in half a page
IO_HEIGHT_PX = 500      # the HBM chart: 430 and up to four legend rows below it
NO_CUDA_HEIGHT_PX = 170  # the no-CUDA note: a title and two lines, not a whole empty chart
BACKENDS = ("flash", "memory_efficient", "math")
MIB = 2 ** 20
FLOOR = 1e-17  # a difference of exactly 0, drawn on the log axis


def io_bytes(records: Records, line: str) -> tuple[np.ndarray, np.ndarray]:
    series = records.series(IO, f"hbm_bytes/{line}")
    return series.index.to_numpy(), series.to_numpy()


def io_figure(records: Records, sram_kib: int, n: int, d: int) -> go.Figure:
    fig = go.Figure()
    cols = records.by_step(IO, "block_cols")
    for i, (line, name) in enumerate(IO_LINES.items()):
        kib, values = io_bytes(records, line)
        fig.add_scatter(x=kib, y=values / MIB, mode="lines+markers", name=name, line=dict(color=category_color(i), width=3),
                        customdata=[cols.get(k, 0) for k in kib],
                        hovertemplate="M = %{x} KiB (B_c = %{customdata}): %{y:.3g} MiB<extra></extra>")
    mark_setting(fig, records, sram_kib, [records.at(IO, f"hbm_bytes/{line}", sram_kib) for line in IO_LINES], MIB)
    fig.update_xaxes(type="log", tickvals=ticks_apart(cols, sram_kib))  # the grid's own M (no ticktext: the docstring)
    fig = layout(fig, f"HBM traffic, forward + backward, one head (N = {n}, d = {d}, fp16)",
                 "SRAM M (KiB; blocks of B_c = ⌈M/4d⌉ keys, M counted in fp16 values)", "MiB read + written (IO model)",
                 log_y=True)
    # below the plot (inside, any corner is crossed by the tiled line or the flat standard ones), untitled, in columns
    # 200 px wide: two a row where the chart is wide enough, else one; the chart grows by the rows
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.24, xanchor="left", yanchor="top", entrywidth=200),
                      legend_title_text="", height=IO_HEIGHT_PX)
    return fig


def ticks_apart(values, kept: float, ratio: float = 1.45) -> list:
    """The grid's M for a log axis's ticks, less those closer than `ratio` to the M set (`kept`), whose
    label would touch its label (192 beside 256 at half a page)."""
    return [v for v in sorted(values) if v == kept or not 1 / ratio < v / kept < ratio]


def mark_setting(fig: go.Figure, records: Records, sram_kib: int, values: list, unit: float) -> None:
    """Rings on the curves at the SRAM size set (a data-space marker: shapes on log axes take log units)."""
    shown = [v / unit for v in values if v is not None]
    if shown:
        fig.add_scatter(x=[sram_kib] * len(shown), y=shown, mode="markers", name=f"M = {sram_kib} KiB (as set)",
                        marker=dict(symbol="circle-open", size=16, color="black", line=dict(width=2)),
                        hovertemplate="M = %{x} KiB: %{y:.3g}<extra></extra>")


def io_ratio_figure(records: Records, sram_kib: int) -> go.Figure:
    fig = go.Figure()
    kib, tiled = io_bytes(records, "tiled")
    cols = records.by_step(IO, "block_cols")
    for i, line in enumerate(("standard", "standard_mask_dropout")):
        _, values = io_bytes(records, line)
        if len(values) == len(tiled) and len(tiled):
            fig.add_scatter(x=kib, y=values / tiled, mode="lines+markers", name=f"{IO_LINES[line]} ÷ tiled",
                            line=dict(color=category_color(i), width=3), customdata=[cols.get(k, 0) for k in kib],
                            hovertemplate="M = %{x} KiB (B_c = %{customdata}): %{y:.3g}×<extra></extra>")
    fig.add_hline(y=1, line_dash="dot", line_color="gray", annotation_text="no saving", annotation_position="bottom right")
    ratios = [v / t if v is not None and t else None for v, t in
              ((records.at(IO, f"hbm_bytes/{line}", sram_kib), records.at(IO, "hbm_bytes/tiled", sram_kib))
               for line in ("standard", "standard_mask_dropout"))]
    mark_setting(fig, records, sram_kib, ratios, 1)
    fig.update_xaxes(type="log", tickvals=ticks_apart(cols, sram_kib))
    fig = layout(fig, "How many times fewer HBM bytes the tiled kernel moves", "SRAM M (KiB)", "standard ÷ tiled bytes")
    fig.update_layout(legend=dict(x=0.01, y=0.98, xanchor="left", yanchor="top"), legend_title_text="ratio")
    fig.update_yaxes(rangemode="tozero")
    return fig


def memory_figure(records: Records, block: int) -> go.Figure:
    fig = go.Figure()
    shown = []
    for i, arm in enumerate((STANDARD, TILED)):
        series = records.series(arm, "peak_bytes")
        shown += list(series.to_numpy() / MIB)
        fig.add_scatter(x=series.index, y=series.to_numpy() / MIB, mode="lines+markers", name=arm,
                        line=dict(color=category_color(i), width=3), marker=dict(size=9))
    scores = records.series(STANDARD, "score_bytes")
    if len(scores):
        shown += list(scores.to_numpy() / MIB)
        fig.add_scatter(x=scores.index, y=scores.to_numpy() / MIB, mode="lines", name="one N × N float32 matrix",
                        line=dict(color="gray", dash="dot"))
    lengths = sorted({*records.series(STANDARD, "peak_bytes").index, *records.series(TILED, "peak_bytes").index})
    fig.update_xaxes(type="log", tickvals=lengths)  # the N measured (no ticktext: the module docstring)
    fig = layout(fig, f"Peak memory of forward + backward, measured (MemTracker; tiles {block} × {block})",
                 "sequence length N", "MiB above Q, K, V, dO (float32, d as set)", log_y=True)
    fig.update_yaxes(**log_ticks(shown))
    fig.update_layout(legend=dict(x=0.01, y=0.98, xanchor="left", yanchor="top"), legend_title_text="implementation")
    return fig


def exactness_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    for step, name in ((0, "no mask"), (1, "causal")):
        values = [records.at(EXACT, f"err/{key}", step) for key in ERRORS]
        if all(v is not None for v in values):
            fig.add_bar(x=list(ERRORS.values()), y=[max(v, FLOOR) for v in values], name=name,
                        marker_color=category_color(step), hovertemplate="%{x}: %{y:.2e}<extra></extra>")
    fig.add_scatter(x=list(ERRORS.values()), y=[1e-12] * len(ERRORS), mode="lines", name="10⁻¹², the tests' bound",
                    line=dict(color="black", dash="dash"))
    fig = layout(fig, "Tiled vs the explicit form, float64", "forward, then backward (explicit: softmax(QKᵀ/√d)V)",
                 "largest |tiled − reference| (0 drawn at 10⁻¹⁷)", log_y=True)
    fig.update_xaxes(tickangle=0)
    fig.update_layout(legend_title_text="mask", barmode="group",  # below: the six pairs of bars keep the width
                      legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return fig


OVERFLOW_ROWS = (("naive softmax", "nan/naive_softmax"), ("naive logsumexp", "inf/naive_lse"), ("shifted, both", "bad/shifted"))


def overflow_figure(records: Records) -> go.Figure:
    """One row per format and form; a marker per logit tried, green where finite, red where NaN or inf."""
    fig = go.Figure()
    labels = [f"{dtype}: {form}" for dtype in DTYPES for form, _ in OVERFLOW_ROWS]
    for status, color, symbol in (("finite", "#2ca02c", "circle"), ("NaN or inf", "#d62728", "x")):
        xs, ys, names = [], [], []
        for row, (dtype, (form, metric)) in enumerate((d, f) for d in DTYPES for f in OVERFLOW_ROWS):
            logits = records.series(dtype, "logit")
            flags = records.series(dtype, metric).reindex(logits.index)
            pick = flags.to_numpy() == (0.0 if status == "finite" else 1.0)
            xs += list(logits.to_numpy()[pick])
            ys += [row] * int(pick.sum())
            names += [labels[row]] * int(pick.sum())
        fig.add_scatter(x=xs, y=ys, mode="markers", name=status, marker=dict(color=color, symbol=symbol, size=6),
                        customdata=names, hovertemplate="%{customdata}, x = %{x:.4g}: " + status + "<extra></extra>")
    firsts = [(row, records.last(dtype, "first_nan/naive_softmax")) for row, dtype in zip(range(0, 12, 3), DTYPES)]
    firsts = [(row, x) for row, x in firsts if x is not None]
    fig.add_scatter(x=[x for _, x in firsts], y=[row for row, _ in firsts], mode="markers+text", name="first NaN (exact)",
                    text=[f"{x:.6g}" for _, x in firsts], textposition="top center",
                    marker=dict(color="black", symbol="line-ns-open", size=18, line=dict(width=3)))
    fig.update_xaxes(type="log", **log_ticks(x for trace in fig.data for x in trace.x))
    fig = layout(fig, "Where the naive softmax of [x, 0] breaks", "logit x (log scale)", "format: form")
    fig.update_yaxes(autorange="reversed", tickvals=list(range(len(labels))), ticktext=labels, zeroline=False,
                     showgrid=False)
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.15, xanchor="left", yanchor="top"), legend_title_text="",
                      height=520, margin=dict(l=190))
    return fig


def lse_error_figure(records: Records) -> go.Figure:
    """|computed − exact| / exact of logsumexp([x, 0]) per format: naive (dotted, ends where it overflows)
    and shifted (solid), against float64's x + ln(1 + e^{−x}) at the format's own x."""
    fig = go.Figure()
    for i, dtype in enumerate(DTYPES):
        logits = records.series(dtype, "logit")
        for form, dash, width in (("shifted", "solid", 3), ("naive", "dot", 2)):
            errors = records.series(dtype, f"rel_err/{form}_lse")
            x = logits.reindex(errors.index).to_numpy()
            fig.add_scatter(x=x, y=np.maximum(errors.to_numpy(), FLOOR), mode="lines", name=f"{dtype}, {form}",
                            line=dict(color=category_color(i), dash=dash, width=width))
    fig.update_xaxes(type="log", **log_ticks(x for trace in fig.data for x in trace.x))
    fig = layout(fig, "logsumexp([x, 0]): relative error, naive vs shifted", "logit x (log scale)",
                 "|computed − exact| / exact (0 drawn at 10⁻¹⁷)", log_y=True)
    fig.update_layout(legend_title_text="format, form")
    return fig


def cuda_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    for i, name in enumerate(BACKENDS):
        series = records.series(CUDA, f"cuda_ms/{name}")
        peak = records.series(CUDA, f"cuda_peak_bytes/{name}").reindex(series.index)
        fig.add_scatter(x=series.index, y=series.to_numpy(), mode="lines+markers", name=name,
                        line=dict(color=category_color(i), width=3), customdata=peak.to_numpy() / MIB,
                        hovertemplate="N = %{x}: %{y:.3g} ms, peak %{customdata:.4g} MiB<extra></extra>")
    if not len(fig.data[0].x):
        fig = go.Figure()
        fig.add_annotation(text="No CUDA device on the machine that ran this:<br>SDPA's kernels are timed only on a GPU "
                                "(bench/gpu_checks_flash.py)", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        fig = layout(fig, "SDPA's kernels on CUDA", "", "")
        return fig.update_layout(height=NO_CUDA_HEIGHT_PX, margin=dict(t=50, b=10))
    fig.update_xaxes(type="log")
    fig = layout(fig, "SDPA's kernels on CUDA, fp16, forward + backward (8 × 16 heads)", "sequence length N",
                 "ms (median of 5)", log_y=True)
    fig.update_layout(legend_title_text="backend")
    return fig
