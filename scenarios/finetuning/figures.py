"""Pretraining, then fine-tuning, drawn: the stages' held-out loss, classifier accuracy against labelled
examples, ULMFiT's learning rate per layer group, instruction accuracy before and after SFT, and what
fine-tuning cost the prose."""
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.plotting import UNIFORM_BYTE_BPB, UNIFORM_BYTE_LABEL, add_curve, full_width, layout, legend_line
from scenarios.records import Records

PRE, DOMAIN = "pretraining · prose", "LM fine-tuning · target domain"
SFT_RESPONSE, SFT_ALL = "SFT · loss on the response", "SFT · loss on every token"
SFT_ARMS = (SFT_RESPONSE, SFT_ALL)
STARTS = {"domain": "ULMFiT", "pretrained": "prose LM only", "scratch": "from scratch"}
GROUP_NAMES = ("embeddings", "block 1", "block 2", "top (norm + head)")
LN2 = math.log(2)  # nats per bit: the SFT records are nats per byte, the page speaks bits per byte
MEASURED = {"prose_bpb": "prose", "domain_bpb": "target domain"}


def classifier_label(start: str, labels: int) -> str:
    return f"{STARTS[start]} · {labels} labels"


def classifier_arms(records: Records, start: str) -> dict[int, str]:
    """Labelled-example count -> arm, for the arms of one start that have records."""
    found = {}
    for arm in records.arms():
        kind, _, rest = arm.partition(" · ")
        if kind == STARTS[start] and rest.endswith(" labels"):
            found[int(rest.split()[0])] = arm
    return dict(sorted(found.items()))


def groups_of(records: Records, arm: str) -> list[int]:
    return sorted(int(m.split("/")[1]) for m in records.metrics(arm) if m.startswith("group_lr/"))


# --- figures ----------------------------------------------------------------------------------------
def labels_figure(records: Records, colors: dict[str, str], chance: float, counts: list[int]) -> go.Figure:
    fig = go.Figure()
    for start, name in STARTS.items():
        arms = classifier_arms(records, start)
        points = [(n, records.last(arm, "heldout_accuracy")) for n, arm in arms.items()]
        points = [(n, a) for n, a in points if a is not None]
        if points:
            fig.add_scatter(x=[n for n, _ in points], y=[a for _, a in points], mode="lines+markers", name=name,
                            line=dict(color=colors.get(name)),
                            hovertemplate=f"{name}<br>%{{x}} labelled lines<br>held-out accuracy %{{y:.1%}}<extra></extra>")
    fig.add_hline(y=chance, line_dash="dash", line_color="gray", annotation_text=f"chance {chance:.0%}",
                  annotation_position="bottom right")
    layout(fig, "Which topic wrote a line: held-out accuracy against labelled examples", "labelled lines (log scale)",
           "held-out accuracy (last step)")
    fig.update_xaxes(type="log", range=[math.log10(min(counts) / 1.3), math.log10(max(counts) * 1.3)],
                     tickvals=counts, ticktext=[str(n) for n in counts])
    return fig.update_yaxes(tickformat=".0%", range=[0, 1.02])


def stages_figure(records: Records, colors: dict[str, str], pretrain_steps: int) -> go.Figure:
    """Held-out bits per byte of the prose and of the target domain through stage 1, then stage 2."""
    fig = go.Figure()
    for arm, offset in ((PRE, 0), (DOMAIN, pretrain_steps)):
        for metric, dash in (("prose_bpb", "solid"), ("domain_bpb", "dash")):
            series, text = records.series(arm, metric), MEASURED[metric]
            if len(series):  # "pretraining · prose — measured on the target domain"
                fig.add_scatter(x=series.index + offset, y=series.to_numpy(), mode="lines",
                                name=f"{arm} — measured on the {text}",
                                line=dict(color=colors.get(arm), dash=dash),
                                hovertemplate=f"{arm}<br>{text}<br>step %{{x}}<br>%{{y:.3f}} bits per byte<extra></extra>")
    if records.series(DOMAIN, "domain_bpb").size:
        fig.add_vline(x=pretrain_steps, line_dash="dot", line_color="gray", annotation_text="stage 2 starts")
    # named in the legend: stage 2's prose curve climbs through 8 bits per byte, and ran through a label on the line
    legend_line(fig, UNIFORM_BYTE_BPB, UNIFORM_BYTE_LABEL)
    layout(fig, "Stages 1 and 2: held-out loss of the prose and of the target domain", "step (stage 1, then stage 2)",
           "held-out bits per byte")
    # far enough below that the legend's first row clears the x axis's title
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))


def schedule_figure(records: Records, arm: str | None) -> go.Figure:
    """Each layer group's learning rate, step by step; a frozen group draws nothing (its rate is 0)."""
    fig = go.Figure()
    if arm is not None:
        for level in groups_of(records, arm):
            series = records.series(arm, f"group_lr/{level}")
            name = GROUP_NAMES[level - 1] if level <= len(GROUP_NAMES) else f"group {level}"
            fig.add_scatter(x=series.index, y=[v if v > 0 else None for v in series.to_numpy()], mode="lines+markers",
                            name=f"{level}: {name}", marker=dict(size=3),
                            hovertemplate=f"{name}<br>step %{{x}}<br>lr %{{y:.3g}}<extra></extra>")
    layout(fig, f"ULMFiT's learning rate per layer group{f' ({arm})' if arm else ''}", "classifier step",
           "learning rate (log scale; none while frozen)", log_y=True)
    return fig.update_layout(legend_title_text="layer group")


def curves_by_start(records: Records, colors: dict[str, str], labels: int) -> go.Figure:
    fig = go.Figure()
    for start, name in STARTS.items():
        add_curve(fig, records, classifier_label(start, labels), "heldout_accuracy", classifier_label(start, labels),
                  colors.get(name))
    layout(fig, f"Held-out accuracy while the classifiers train ({labels} labelled lines)", "classifier step",
           "held-out accuracy")
    return fig.update_yaxes(tickformat=".0%", range=[0, 1.02])


def tasks_of(records: Records, arm: str) -> list[str]:
    return [m.split("/", 1)[1] for m in records.metrics(arm) if m.startswith("accuracy/")]


def instructions_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Exact-match accuracy per task on held-out instructions: before SFT (step 0), then each arm after."""
    fig = go.Figure()
    tasks = next((tasks_of(records, arm) for arm in SFT_ARMS if tasks_of(records, arm)), [])
    names = [*tasks, "all"]
    metric = {**{t: f"accuracy/{t}" for t in tasks}, "all": "instruction_accuracy"}
    first = next((arm for arm in SFT_ARMS if records.series(arm, "instruction_accuracy").size), None)
    if first is not None:
        step = int(records.series(first, "instruction_accuracy").index[0])
        fig.add_bar(x=names, y=[records.at(first, metric[n], step) for n in names], name="before SFT (pretrained LM)",
                    marker_color="gray", hovertemplate="before SFT<br>%{x}: %{y:.1%}<extra></extra>")
    for arm in SFT_ARMS:
        if records.series(arm, "instruction_accuracy").size:
            fig.add_bar(x=names, y=[records.last(arm, metric[n]) for n in names], name=f"after: {arm}",
                        marker_color=colors.get(arm), hovertemplate=f"{arm}<br>%{{x}}: %{{y:.1%}}<extra></extra>")
    # every bar says its value: the pretrained LM's bars are often all 0%, and a bar of height 0 draws nothing
    fig.update_traces(texttemplate="%{y:.0%}", textposition="outside", textfont_size=11, cliponaxis=False)
    layout(fig, "Held-out instructions (inputs never trained on): exact-match accuracy", "task", "exact match")
    fig.update_layout(barmode="group").update_yaxes(tickformat=".0%", range=[0, 1.1])  # room for "100%" above a bar
    return full_width(fig)  # alone in its row (the SFT chart below takes the page's width)


def sft_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Exact match, and the held-out loss on the response and on the prompt in bits per byte (recorded in
    nats per byte: ÷ ln 2), step by step."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["held-out instruction accuracy (exact match)",
                                                         "held-out bits per byte: response solid, prompt dotted"])
    panels = ((1, "instruction_accuracy", "solid", 1.0, "exact match %{y:.1%}"),
              (2, "response_nats", "solid", LN2, "response %{y:.3g} bits per byte"),
              (2, "prompt_nats", "dot", LN2, "prompt %{y:.3g} bits per byte"))
    for arm in SFT_ARMS:
        for col, metric, dash, per, shown in panels:
            series = records.series(arm, metric)
            if len(series):
                fig.add_scatter(x=series.index, y=series.to_numpy() / per, mode="lines", name=arm, legendgroup=arm,
                                showlegend=metric == "instruction_accuracy", line=dict(color=colors.get(arm), dash=dash),
                                hovertemplate=f"{arm}<br>step %{{x}}<br>{shown}<extra></extra>", row=1, col=col)
    fig.update_xaxes(title_text="SFT step")
    fig.update_yaxes(tickformat=".0%", title_text="exact match", col=1)
    fig.update_yaxes(title_text="bits per byte", col=2)
    # far enough below that the legend clears the "SFT step" titles (at -0.2 it touched them)
    fig.update_layout(title="SFT: what each loss trains", legend=dict(orientation="h", yanchor="top", y=-0.3, x=0),
                      margin=dict(b=100))
    return full_width(fig)


FORGETTING_BARS = ("after pretraining", "after LM fine-tuning<br>on the domain", *(f"after {arm.replace(' · ', ',<br>')}"
                                                                                    for arm in SFT_ARMS))
FORGETTING_X_TITLE = "prose, held-out bits per byte"
TITLE_STANDOFF_PX = 8  # between the bar names and the y axis's title


def forgetting_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """The prose's held-out bits per byte after each stage: what fine-tuning cost the pretraining. The bar names
    on two lines and the margin left to fit them: beside one-line names (margin 260 px) the plot of a half-width
    chart was 120 px wide and its axis title was cut."""
    arms = (PRE, DOMAIN, *SFT_ARMS)
    bars = [(name, records.last(arm, "prose_bpb"), colors.get(arm)) for name, arm in zip(FORGETTING_BARS, arms)]
    bars = [b for b in bars if b[1] is not None]
    fig = go.Figure(go.Bar(x=[b[1] for b in bars], y=[b[0] for b in bars], orientation="h",
                           marker_color=[b[2] for b in bars], text=[f"{b[1]:.3g}" for b in bars], textposition="outside",
                           cliponaxis=False, hovertemplate="%{y}<br>%{x:.4g} bits per byte<extra></extra>"))
    if bars:  # a short label above the plot: "uniform guess: 8 bits per byte" ran past the chart's edge
        fig.add_vline(x=UNIFORM_BYTE_BPB, line_dash="dash", line_color="gray", annotation_position="top",
                      annotation_text=f"uniform guess: {UNIFORM_BYTE_BPB:g}")
    layout(fig, "Forgetting: the prose's held-out loss after each stage", FORGETTING_X_TITLE, "model")
    # room beyond the longest bar for its label (textposition "outside")
    fig.update_xaxes(range=[0, 1.2 * max([UNIFORM_BYTE_BPB, *(b[1] for b in bars)])])
    # a standoff of its own puts the y title beyond the bar names: without one the page drew it over them
    return fig.update_yaxes(type="category", autorange="reversed", title_standoff=TITLE_STANDOFF_PX)
