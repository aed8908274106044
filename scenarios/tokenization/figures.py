"""Tokenization, drawn from the records: bytes per token against vocabulary size, the first merges, one
sentence at three sizes, token lengths, what the pre-split prevents, and the LMs at one compute budget.
Strings travel as recorded bytes and are decoded here."""
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import add_curve, category_color, full_width, layout
from scenarios.recorded import snapshot
from scenarios.records import Records

PRE, RAW = "BPE · GPT-2 pre-split", "BPE · no pre-split"
LM_PREFIX = "LM · "
BYTES = 256


def lm_label(size: int) -> str:
    return f"{LM_PREFIX}{size} tokens"


def lm_arms(records: Records) -> list[str]:
    """The LM arms, smallest vocabulary first."""
    arms = [a for a in records.arms() if a.startswith(LM_PREFIX)]
    return sorted(arms, key=lambda a: int(a[len(LM_PREFIX):].split()[0]))


def lm_size(arm: str) -> int:
    return int(arm[len(LM_PREFIX):].split()[0])


def recorded_bytes(values: dict[str, float], prefix: str) -> bytes:
    found = sorted((int(m.rsplit("_", 1)[1]), int(v)) for m, v in values.items() if m.startswith(prefix + "/byte_"))
    return bytes(v for _, v in found)


def shown_text(data: bytes) -> str:
    """A token as text, its spaces and newlines visible."""
    return data.decode("utf-8", errors="replace").replace(" ", "␣").replace("\n", "↵")


def merge_table(records: Records, arm: str) -> list[tuple[int, bytes, bytes, float]]:
    """The first merges: (rank, left bytes, right bytes, count), ids resolved through the earlier merges."""
    _, values = snapshot(records, arm, "merge/")
    table = {b: bytes([b]) for b in range(BYTES)}
    rows = []
    for rank in range(len(values) // 3):
        left, right = int(values[f"merge/rank_{rank:02d}/left"]), int(values[f"merge/rank_{rank:02d}/right"])
        if left not in table or right not in table:
            break
        table[BYTES + rank] = table[left] + table[right]
        rows.append((rank, table[left], table[right], values[f"merge/rank_{rank:02d}/count"]))
    return rows


def spanning_examples(records: Records, arm: str) -> list[tuple[int, bytes, float]]:
    """The first merged tokens across a word boundary: (merge rank, bytes, times the pair occurred)."""
    _, values = snapshot(records, arm, "spanning/")
    count = len({m.split("/")[1] for m in values})
    return [(int(values[f"spanning/ex_{i:02d}/rank"]), recorded_bytes(values, f"spanning/ex_{i:02d}"),
             values[f"spanning/ex_{i:02d}/count"]) for i in range(count)]


# --- figures ----------------------------------------------------------------------------------------
def bytes_per_token_figure(records: Records, colors: dict[str, str], vocab_size: int) -> go.Figure:
    fig = go.Figure()
    for arm in (PRE, RAW):
        add_curve(fig, records, arm, "bytes_per_token", arm, colors[arm])
    fig.add_vline(x=vocab_size, line_dash="dot", line_color="gray", annotation_text=f"your vocabulary {vocab_size}",
                  annotation_position="top left")  # right of the line, its text stretched the axis a third past the data
    layout(fig, "Held-out bytes per token against vocabulary size", "vocabulary size (tokens)", "bytes per token")
    fig.update_traces(mode="lines+markers", marker=dict(size=4),
                      hovertemplate="%{fullData.name}<br>%{x} tokens<br>%{y:.3f} bytes per token<extra></extra>")
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))


def first_merges_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    rows = merge_table(records, PRE)
    labels = [f"{BYTES + r}: {shown_text(a)} + {shown_text(b)} → {shown_text(a + b)}" for r, a, b, _ in rows]
    fig = go.Figure(go.Bar(x=[c for *_, c in rows], y=labels, orientation="h", marker_color=colors[PRE],
                           hovertemplate="%{y}<br>occurred %{x:,.0f} times when merged<extra></extra>"))
    layout(fig, "The first merges (pre-split): the most frequent pair, joined", "times the pair occurred", "new token")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig.update_layout(height=140 + 22 * max(len(rows), 4), showlegend=False, margin=dict(l=200))


def sentence_figure(records: Records) -> go.Figure:
    """The held-out sentence cut into tokens at three vocabulary sizes: one row each, a box per token."""
    _, values = snapshot(records, PRE, "sentence/")
    text = recorded_bytes(values, "sentence")
    sizes = sorted({int(m.split("/")[1][2:]) for m in values if m.startswith("sentence/v_")})
    fig = go.Figure()
    for size in sizes:
        lengths = [int(v) for m, v in sorted(values.items()) if m.startswith(f"sentence/v_{size:04d}/len_")]
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        pieces = [shown_text(text[s:s + n]) for s, n in zip(starts, lengths)]
        fig.add_bar(x=lengths, base=starts, y=[f"{size} tokens: {len(lengths)}"] * len(lengths), orientation="h",
                    text=pieces, textposition="inside", insidetextanchor="middle", showlegend=False,
                    marker=dict(color=[category_color(i) for i in range(len(lengths))], line=dict(color="white", width=1)),
                    customdata=pieces, hovertemplate="%{customdata}<br>%{x} bytes<extra></extra>")
    layout(fig, f"One held-out sentence at three vocabulary sizes: “{text.decode('utf-8', 'replace')}”",
           "byte offset in the sentence", "vocabulary: tokens used")
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_xaxes(type="linear", dtick=10)
    fig.update_layout(barmode="overlay", height=300, title_font_size=13)
    return full_width(fig)


def token_lengths_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in (PRE, RAW):
        for prefix, name, pattern in (("vocab_length", "in the vocabulary", ""), ("usage_length", "in held-out text", "/")):
            _, values = snapshot(records, arm, prefix + "/")
            if not values:
                continue
            total = sum(values.values()) or 1.0
            lengths = [int(m.rsplit("_", 1)[1]) for m in sorted(values)]
            fig.add_bar(x=lengths, y=[values[m] / total for m in sorted(values)], name=f"{arm}: {name}",
                        marker=dict(color=colors[arm], pattern_shape=pattern), opacity=0.85,
                        hovertemplate=f"{arm}<br>{name}<br>%{{x}} bytes: %{{y:.1%}}<extra></extra>")
    layout(fig, "Token lengths: in the vocabulary, and as used on held-out text", "token length (bytes; 16 = 16 or more)",
           "share of tokens")
    # alone in its row (the sentence above and the pre-split figure below take the page's width); the legend
    # far enough below that its first row clears the x axis's title
    fig.update_layout(barmode="group", legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return full_width(fig)


def pre_split_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """The no-split tokenizer's first merges across a word boundary; the count of such tokens in each."""
    examples = spanning_examples(records, RAW)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.35, 0.65], horizontal_spacing=0.25,
                        subplot_titles=["tokens across a word boundary", "the first of them without the pre-split"])
    for arm in (PRE, RAW):
        count = records.last(arm, "spanning_tokens")
        if count is not None:
            fig.add_bar(x=[arm.replace("BPE · ", "")], y=[count], marker_color=colors[arm], showlegend=False, row=1, col=1,
                        text=[f"{count:.0f}"], textposition="outside", hovertemplate=f"{arm}<br>%{{y:.0f}} tokens<extra></extra>")
    fig.add_bar(x=[count for *_, count in examples], y=[f"{BYTES + rank}: “{shown_text(t)}”" for rank, t, _ in examples],
                orientation="h", marker_color=colors[RAW], showlegend=False, row=1, col=2,
                hovertemplate="token %{y}<br>the pair occurred %{x:,.0f} times when merged<extra></extra>")
    fig.update_yaxes(type="category", autorange="reversed", row=1, col=2)
    fig.update_xaxes(title_text="times the pair occurred when merged", row=1, col=2)
    fig.update_yaxes(title_text="merged tokens", row=1, col=1)
    fig.update_layout(title="What the pre-split prevents: merges across words", height=380)
    return full_width(fig)


def lm_curves_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in lm_arms(records):
        points = records.series(arm, "heldout_bpb")
        flops = records.series(arm, "flops")
        if len(points) and len(flops):
            shared = points.index.intersection(flops.index)
            fig.add_scatter(x=flops[shared].to_numpy(), y=points[shared].to_numpy(), mode="lines+markers", name=arm,
                            line=dict(color=colors.get(arm)), marker=dict(size=4),
                            hovertemplate=f"{arm}<br>%{{x:.3g}} FLOPs<br>%{{y:.3f}} bits per byte<extra></extra>")
    layout(fig, "Tiny LMs at one compute budget: held-out bits per byte", "training FLOPs so far (6·N·tokens)",
           "held-out bits per byte")
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))


def vocab_cost_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    arms = lm_arms(records)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    sizes = [lm_size(a) for a in arms]
    embedding = [records.first(a, "embedding_params") for a in arms]
    if arms and None not in embedding:
        fig.add_bar(x=[str(s) for s in sizes], y=embedding, name="embedding parameters (table + read-out)", opacity=0.35,
                    marker_color="gray", hovertemplate="%{x} tokens<br>%{y:,.0f} embedding parameters<extra></extra>")
    finals = [(str(lm_size(a)), records.last(a, "heldout_bpb"), a) for a in arms if records.last(a, "heldout_bpb") is not None]
    if finals:
        fig.add_scatter(x=[s for s, _, _ in finals], y=[v for _, v, _ in finals], mode="lines+markers", secondary_y=True,
                        name="held-out bits per byte (end)", marker=dict(size=10, color=[colors.get(a) for *_, a in finals]),
                        line=dict(color="black"), hovertemplate="%{x} tokens<br>%{y:.3f} bits per byte<extra></extra>")
    layout(fig, "What a bigger vocabulary costs, and buys, at one compute budget", "vocabulary size (tokens)",
           "embedding parameters")
    fig.update_xaxes(type="category")
    # its own round ticks (plotly would sync them to the left axis's grid lines: 2.328, 2.666, …)
    fig.update_yaxes(title_text="held-out bits per byte", secondary_y=True, tickmode="auto", showgrid=False)
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
