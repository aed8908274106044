"""Autodiff, drawn and said: the module's tensors, the recorded graph, the chain rule along one
path, the gradient checks, and the transfer-learning curves — all from the records of the run."""
import re

import plotly.graph_objects as go

from scenarios.claims import Computed
from scenarios.explanation import Sentence, say
from scenarios.plotting import category_color, full_width, layout
from scenarios.records import Records

PASS = "one forward and backward pass"
STEPS = (("MseLossBackward0", "2(ŷ − y)", "∂L/∂ŷ"), ("AddmmBackward0 (out)", "v_j", "∂L/∂h_j"),
         ("TanhBackward0", "1 − h_j²", "∂L/∂z_j"), ("AddmmBackward0 (hidden) → W", "x̃_i", "∂L/∂W[j, i]"))
STAGES = ("x_norm", "z", "h", "yhat", "y", "loss")


def path_key(unit: int, input_: int) -> str:
    return f"chain/u{unit}_i{input_}"


# --- the module -------------------------------------------------------------------------------------
def tensors(records: Records) -> list[str]:
    """Parameter and buffer names, in recorded order (parameters first)."""
    return list(dict.fromkeys(m.split("/")[1] for m in records.metrics(PASS) if m.startswith("module/")))


def fact(records: Records, name: str, what: str) -> float | None:
    return records.at(PASS, f"module/{name}/{what}", 0)


def shape(records: Records, name: str) -> str:
    rows, cols = fact(records, name, "rows"), fact(records, name, "cols")
    return f"({rows:.0f},)" if fact(records, name, "dims") == 1 else f"({rows:.0f}, {cols:.0f})"


def module_figure(records: Records) -> go.Figure:
    """One bar per tensor the module owns (its numel), parameters and buffers apart, shape and dtype written on it."""
    fig = go.Figure()
    for i, (kind, buffers) in enumerate((("parameters (requires_grad)", 0.0), ("buffers (no gradient)", 1.0))):
        names = [n for n in tensors(records) if fact(records, n, "is_buffer") == buffers]
        text = [f"{shape(records, n)}, float{fact(records, n, 'bits'):.0f}" for n in names]
        fig.add_bar(y=names, x=[fact(records, n, "numel") for n in names], orientation="h", name=kind, text=text,
                    textposition="auto", marker_color=category_color(6 if buffers else 0),
                    hovertemplate="%{y}: %{text}, %{x} numbers<extra></extra>")
    fig = layout(fig, "TinyNet's parameters and buffers", "numel", "tensor")
    fig.update_yaxes(type="category", autorange="reversed")  # layout() types y as linear
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0), legend_title_text="")
    return fig


# --- the graph ------------------------------------------------------------------------------------
def graph_nodes(records: Records) -> dict[int, dict]:
    nodes: dict[int, dict] = {}
    for metric in records.metrics(PASS):
        match = re.fullmatch(r"graph/node_(\d+)/(.+)", metric)
        if match:
            node = nodes.setdefault(int(match[1]), {})
            if match[2] in ("backward_order", "grad_norm"):
                node[match[2]] = records.at(PASS, metric, 0)
            else:
                node.update(label=match[2], depth=int(records.at(PASS, metric, 0)))
    return {i: node for i, node in sorted(nodes.items()) if "label" in node}


def graph_edges(records: Records) -> list[tuple[int, int]]:
    count = sum(1 for m in records.metrics(PASS) if re.fullmatch(r"graph/edge_\d+/from", m))
    return [(int(records.at(PASS, f"graph/edge_{k:02d}/from", 0)), int(records.at(PASS, f"graph/edge_{k:02d}/to", 0)))
            for k in range(count)]


def graph_figure(records: Records) -> go.Figure:
    """Nodes top (the loss) to bottom (the parameters) by depth; the number is backward's order."""
    nodes, edges, fig = graph_nodes(records), graph_edges(records), go.Figure()
    lanes: dict[int, int] = {}
    for node in nodes.values():
        node["lane"] = lanes[node["depth"]] = lanes.get(node["depth"], -1) + 1
    for parent, child in edges:
        if parent in nodes and child in nodes:
            fig.add_scatter(x=[nodes[parent]["lane"], nodes[child]["lane"]], y=[-nodes[parent]["depth"], -nodes[child]["depth"]],
                            mode="lines", line=dict(color="gray", width=1.5), hoverinfo="skip", showlegend=False)
    for leaf in (False, True):
        chosen = [n for n in nodes.values() if n["label"].startswith("AccumulateGrad") == leaf]
        fig.add_scatter(x=[n["lane"] for n in chosen], y=[-n["depth"] for n in chosen], mode="markers+text",
                        name="AccumulateGrad: adds into a parameter's .grad" if leaf else "backward node (grad_fn)",
                        marker=dict(size=16, color=category_color(1 if leaf else 0), line=dict(width=1, color="black")),
                        text=[f"  {n.get('backward_order', 0):.0f}. {n['label'].replace('AccumulateGrad:', 'AccumulateGrad ')}"
                              for n in chosen], textposition="middle right", customdata=[n.get("grad_norm") for n in chosen],
                        hovertemplate="%{text}<br>‖incoming gradient‖ %{customdata:.4g}<extra></extra>")
    fig.update_xaxes(showticklabels=False, zeroline=False, showgrid=False, range=[-0.3, max(lanes.values(), default=0) + 1.2])
    fig.update_yaxes(zeroline=False, dtick=1, tickvals=[-d for d in lanes], ticktext=[str(d) for d in lanes])
    fig = layout(fig, "Autograd graph (n. = the order backward ran it)", "", "depth from loss.grad_fn")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.05, x=0), legend_title_text="", height=520)
    return full_width(fig)


# --- the chain rule -------------------------------------------------------------------------------
def chain_values(records: Records, unit: int, input_: int) -> dict[str, list[float | None]]:
    key = path_key(unit, input_)
    return {kind: [records.at(PASS, f"{key}/{kind}_{s}", 0) for s in range(1, 5)] for kind in ("factor", "product", "autograd")}


def chain_figure(records: Records, unit: int, input_: int) -> go.Figure:
    values, fig = chain_values(records, unit, input_), go.Figure()
    labels = [f"{node}<br>× {local}" for node, local, _ in STEPS]
    if None not in values["factor"]:
        fig.add_bar(x=labels, y=values["factor"], name="local derivative (by hand)", marker_color=category_color(4))
        fig.add_scatter(x=labels, y=values["product"], mode="lines+markers", name="running product", marker=dict(size=12),
                        line=dict(color=category_color(0), width=3))
        fig.add_scatter(x=labels, y=values["autograd"], mode="markers", name="torch.autograd.grad",
                        marker=dict(symbol="x", size=12, color="black"),
                        text=[quantity for _, _, quantity in STEPS], hovertemplate="%{text} = %{y:.6g}<extra></extra>")
        fd = records.at(PASS, f"{path_key(unit, input_)}/finite_diff", 0)
        fig.add_scatter(x=labels[-1:], y=[fd], mode="markers", name="finite differences (float64)",
                        marker=dict(symbol="circle-open", size=20, color="black", line=dict(width=2)))
    fig = layout(fig, f"Backward step by step: the chain rule to W[{unit},{input_}]", "backward node", "value")
    fig.update_layout(legend_title_text="")
    return full_width(fig)


def checks_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    names = [n for n in tensors(records) if not fact(records, n, "is_buffer")]
    for i, (kind, words) in enumerate((("hand_vs_autograd", "|chain rule by hand − autograd|"),
                                       ("autograd_vs_fd", "|autograd − finite differences|"))):
        values = [records.at(PASS, f"check/{kind}/{n}", 0) for n in names]
        if names and None not in values:
            fig.add_bar(x=names, y=[max(v, 1e-20) for v in values], name=words, marker_color=category_color(i + 2))
    verdict = records.at(PASS, "check/gradcheck", 0)
    title = "Gradient checks, float64" + (f" (gradcheck {'passed' if verdict else 'failed'})" if verdict is not None else "")
    fig = layout(fig, title, "parameter", "largest |difference| (0 drawn at 1e-20)", log_y=True)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0), legend_title_text="")
    return fig


def forward_figure(records: Records) -> go.Figure:
    fig = go.Figure()
    for i, stage in enumerate(STAGES):
        values = [v for k in range(16) if (v := records.at(PASS, f"forward/{stage}/{k:02d}", 0)) is not None]
        if values:
            fig.add_scatter(x=[stage] * len(values), y=values, mode="markers+text", name=stage, text=[
                f"[{k + 1}]" for k in range(len(values))], textposition="middle right", marker=dict(size=12, color=category_color(i)))
    fig = layout(fig, "Forward pass of one example, stage by stage ([k]: the k-th value, from 1)", "stage", "value")
    fig.update_layout(showlegend=False)
    return fig


# --- claims ---------------------------------------------------------------------------------------
def chain_sentence(records: Records, unit: int, input_: int) -> Sentence | None:
    values = chain_values(records, unit, input_)
    if None in values["product"]:
        return None
    key = path_key(unit, input_)
    product = Computed("{}", values["product"][-1], lambda r: r.at(PASS, f"{key}/product_4", 0), shown=f"{values['product'][-1]:.6g}")
    autograd = Computed("{}", values["autograd"][-1], lambda r: r.at(PASS, f"{key}/autograd_4", 0), shown=f"{values['autograd'][-1]:.6g}")
    fd = records.at(PASS, f"{key}/finite_diff", 0)
    finite = Computed("{}", fd, lambda r: r.at(PASS, f"{key}/finite_diff", 0), shown=f"{fd:.6g}")
    return say(f"∂L/∂W[{unit}, {input_}] = 2(ŷ − y)·v_{unit}·(1 − h_{unit}²)·x̃_{input_} = {{}} by the chain rule, {{}} by autograd, "
               "{} by finite differences", product, autograd, finite)


def largest_check(kind: str):
    def compute(records: Records) -> float | None:
        values = [records.at(PASS, m, 0) for m in records.metrics(PASS) if m.startswith(f"check/{kind}/")]
        return float(max(values)) if values else None
    return compute


def checks_sentence(records: Records) -> Sentence | None:
    hand, fd = largest_check("hand_vs_autograd")(records), largest_check("autograd_vs_fd")(records)
    verdict = records.at(PASS, "check/gradcheck", 0)
    if hand is None or fd is None or verdict is None:
        return None
    return say("Over every parameter in float64: |by hand − autograd| ≤ {}, |autograd − finite differences| ≤ {}; {}",
               Computed("{}", hand, largest_check("hand_vs_autograd")), Computed("{}", fd, largest_check("autograd_vs_fd")),
               Computed("torch.autograd.gradcheck {}", verdict, lambda r: r.at(PASS, "check/gradcheck", 0),
                        shown="passed" if verdict else "failed"))


def module_sentence(records: Records) -> Sentence | None:
    names = tensors(records)
    if not names:
        return None

    def count(buffers: bool):
        return lambda r: float(sum(fact(r, n, "numel") for n in tensors(r) if bool(fact(r, n, "is_buffer")) == buffers))
    params, buffers = count(False)(records), count(True)(records)
    nodes = float(len(graph_nodes(records)))
    return say("TinyNet holds {} trained numbers in its parameters and {} in buffers (no gradient, no graph node); "
               "one forward pass recorded {} backward nodes", Computed("{}", params, count(False), shown=f"{params:.0f}"),
               Computed("{}", buffers, count(True), shown=f"{buffers:.0f}"),
               Computed("{}", nodes, lambda r: float(len(graph_nodes(r))), shown=f"{nodes:.0f}"))


def as_percent(fig: go.Figure) -> go.Figure:
    fig.update_yaxes(tickformat=".0%")
    return fig


def chance_line(fig: go.Figure, classes: int) -> go.Figure:
    fig.add_hline(y=1 / classes, line_dash="dash", line_color="gray", annotation_text=f"chance: 1/{classes}")
    return fig


def arms_end(records: Records, arms: list[str]) -> list[str]:
    return [arm for arm in arms if len(records.values(arm, "test_accuracy"))]

