"""Autodiff, opened up: a small nn.Module, the graph one forward pass records, and the chain rule by hand.

`TinyNet` normalizes its input with two buffers (saved with the module, never trained), then
Linear → tanh → Linear to one output; the loss is the squared error on one example. During
the forward pass autograd records, for every op on a tensor that requires grad, a node
(`grad_fn`) that knows its local derivative and points to the nodes of its inputs
(`next_functions`); parameters end in `AccumulateGrad` nodes that add into `.grad`.
`walk_graph` follows those pointers from the loss, numbering the nodes breadth-first; hooks
on every node record the order backward runs them and the size of the gradient each receives.

The chain rule along one path, from the loss to one first-layer weight W[j, i]:

    ∂L/∂W[j,i] = 2(ŷ − y) · V[0, j] · (1 − h_j²) · x̃_i

(V the output weight, h = tanh(z), z = W x̃ + b). Each factor is one node's local derivative;
their running product is checked against `torch.autograd.grad` with respect to each
intermediate tensor, and the whole gradient against central finite differences and
`torch.autograd.gradcheck` in float64.
"""
import copy
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from engines.loop.records import StepRecord

N_INPUTS = 2
PATH_STEPS = ("MseLossBackward0", "AddmmBackward0", "TanhBackward0", "AccumulateGrad")  # ∂L/∂ŷ, ∂L/∂h_j, ∂L/∂z_j, ∂L/∂W_ji


class TinyNet(nn.Module):
    def __init__(self, hidden: int, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("input_mean", torch.randn(N_INPUTS, generator=generator))  # (inputs,)
        self.register_buffer("input_std", 0.5 + torch.rand(N_INPUTS, generator=generator))  # (inputs,)
        self.hidden = nn.Linear(N_INPUTS, hidden)
        self.out = nn.Linear(hidden, 1)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator))

    def stages(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every intermediate of one forward pass, by name."""
        x_norm = (x - self.input_mean) / self.input_std  # (batch, inputs): buffers only, no graph node
        z = self.hidden(x_norm)  # (batch, hidden)
        h = torch.tanh(z)
        return {"x_norm": x_norm, "z": z, "h": h, "yhat": self.out(h)}  # yhat: (batch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(x)["yhat"]


def module_records(model: nn.Module) -> dict[str, float]:
    """Per parameter and buffer: `module/<name>/<fact>` (is_buffer, dims, rows, cols, numel, bits, requires_grad)."""
    named = [(n, t, 0.0) for n, t in model.named_parameters()] + [(n, t, 1.0) for n, t in model.named_buffers()]
    metrics = {}
    for name, tensor, kind in named:
        shape = list(tensor.shape) + [1] * (2 - tensor.dim())
        metrics.update({f"module/{name}/is_buffer": kind,
                        f"module/{name}/dims": float(tensor.dim()), f"module/{name}/rows": float(shape[0]), f"module/{name}/cols": float(shape[1]),
                        f"module/{name}/numel": float(tensor.numel()), f"module/{name}/bits": float(tensor.element_size() * 8),
                        f"module/{name}/requires_grad": float(tensor.requires_grad)})
    return metrics


def walk_graph(loss: torch.Tensor, names: dict[int, str]) -> tuple[list, list[tuple[int, int]], list[str]]:
    """Breadth-first from `loss.grad_fn`: the nodes, the (parent, child) edges and each node's label
    (an AccumulateGrad node is labelled with its parameter's name from `names`, keyed by id)."""
    nodes, edges, queue = [], [], [loss.grad_fn]
    while queue:
        node = queue.pop(0)
        if node in nodes:
            continue
        nodes.append(node)
        queue += [child for child, _ in node.next_functions if child is not None and child not in nodes]
    index = {node: i for i, node in enumerate(nodes)}
    for node in nodes:
        edges += [(index[node], index[child]) for child, _ in node.next_functions if child is not None]
    labels = [f"AccumulateGrad:{names[id(node.variable)]}" if hasattr(node, "variable") else node.name() for node in nodes]
    return nodes, edges, labels


def depths(edges: list[tuple[int, int]], count: int) -> list[int]:
    """Each node's longest distance from the loss (node 0)."""
    depth = [0] * count
    for _ in range(count):
        for parent, child in edges:
            depth[child] = max(depth[child], depth[parent] + 1)
    return depth


def graph_records(model: TinyNet, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """The forward pass of one example, its autograd graph, and backward run once with a hook per node."""
    stages = model.stages(x)
    loss = F.mse_loss(stages["yhat"], y)
    nodes, edges, labels = walk_graph(loss, {id(p): n for n, p in model.named_parameters()})
    order: list[tuple[int, float]] = []
    handles = [node.register_hook(lambda grad_in, grad_out, i=i: order.append((i, _norm(grad_out))))
               for i, node in enumerate(nodes)]
    try:
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    metrics = {f"forward/{name}/{k:02d}": float(v) for name, t in stages.items() for k, v in enumerate(t.detach().reshape(-1))}
    metrics.update({"forward/y/00": y.item(), "forward/loss/00": loss.item()})
    for i, (label, depth) in enumerate(zip(labels, depths(edges, len(nodes)))):
        metrics[f"graph/node_{i:02d}/{label}"] = float(depth)
    for position, (i, norm) in enumerate(order):
        metrics[f"graph/node_{i:02d}/backward_order"] = float(position + 1)
        metrics[f"graph/node_{i:02d}/grad_norm"] = norm
    for k, (parent, child) in enumerate(edges):
        metrics[f"graph/edge_{k:02d}/from"], metrics[f"graph/edge_{k:02d}/to"] = float(parent), float(child)
    return metrics


def _norm(grads: tuple) -> float:
    present = [g for g in grads if g is not None]
    return float(torch.sqrt(sum((g.double() ** 2).sum() for g in present))) if present else 0.0


def chain_records(model: TinyNet, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Per path (hidden unit j, input i): each node's local derivative by hand (`factor_s`), their
    running product (`product_s`) and what torch.autograd.grad gives for the same quantity
    (`autograd_s`), plus the central finite difference of ∂L/∂W[j,i] in float64."""
    stages = model.stages(x)
    loss = F.mse_loss(stages["yhat"], y)
    wrt = [stages["yhat"], stages["h"], stages["z"], model.hidden.weight]
    grads = torch.autograd.grad(loss, wrt)  # ∂L/∂ŷ (1,1), ∂L/∂h (1,H), ∂L/∂z (1,H), ∂L/∂W (H, inputs)
    fd = finite_differences(model, x, y)["hidden.weight"]
    error, h, x_norm, v = (stages["yhat"] - y).item(), stages["h"][0], stages["x_norm"][0], model.out.weight[0]
    metrics = {}
    for j in range(len(h)):
        for i in range(N_INPUTS):
            factors = [2 * error, v[j].item(), 1 - h[j].item() ** 2, x_norm[i].item()]
            autograd = [grads[0].item(), grads[1][0, j].item(), grads[2][0, j].item(), grads[3][j, i].item()]
            product = 1.0
            for s, (factor, value) in enumerate(zip(factors, autograd), start=1):
                product *= factor
                key = f"chain/u{j + 1}_i{i + 1}"
                metrics.update({f"{key}/factor_{s}": factor, f"{key}/product_{s}": product, f"{key}/autograd_{s}": value})
            metrics[f"chain/u{j + 1}_i{i + 1}/finite_diff"] = fd[j, i].item()
    return metrics


def loss64(model: TinyNet, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The loss in float64 with the given parameters (buffers as the module holds them)."""
    buffers = {n: b.double() for n, b in model.named_buffers()}
    return F.mse_loss(functional_call(model, {**params, **buffers}, (x.double(),)), y.double())


def finite_differences(model: TinyNet, x: torch.Tensor, y: torch.Tensor, eps: float = 1e-6) -> dict[str, torch.Tensor]:
    """Central differences (L(θ + ε) − L(θ − ε)) / 2ε of every parameter entry, in float64."""
    params = {n: p.detach().double() for n, p in model.named_parameters()}
    result = {}
    with torch.no_grad():
        for name, value in params.items():
            grad = torch.zeros_like(value)
            for k in range(value.numel()):
                shifted = [value.clone(), value.clone()]
                shifted[0].view(-1)[k] += eps
                shifted[1].view(-1)[k] -= eps
                up, down = (loss64(model, {**params, name: s}, x, y) for s in shifted)
                grad.view(-1)[k] = (up - down) / (2 * eps)
            result[name] = grad
    return result


def by_hand(model: TinyNet, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """The whole gradient by the chain rule in matrix form: δ_ŷ = 2(ŷ − y), δ_h = Vᵀδ_ŷ, δ_z = δ_h ⊙ (1 − h²)."""
    with torch.no_grad():
        stages = model.stages(x)
        delta_out = 2 * (stages["yhat"] - y) / y.numel()  # (1, 1)
        delta_z = (delta_out @ model.out.weight) * (1 - stages["h"] ** 2)  # (1, H)
        return {"hidden.weight": delta_z.T @ stages["x_norm"], "hidden.bias": delta_z.sum(0),
                "out.weight": delta_out.T @ stages["h"], "out.bias": delta_out.sum(0)}


def check_records(model: TinyNet, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """In float64, per parameter: largest |by hand − autograd| and |autograd − finite differences|;
    and torch.autograd.gradcheck's verdict on the loss as a function of all parameters."""
    model = copy.deepcopy(model).double()
    x, y = x.double(), y.double()
    names = [n for n, _ in model.named_parameters()]
    autograd = dict(zip(names, torch.autograd.grad(F.mse_loss(model(x), y), list(model.parameters()))))
    hand, fd = by_hand(model, x, y), finite_differences(model, x, y)
    metrics = {}
    for name in names:
        metrics[f"check/hand_vs_autograd/{name}"] = float((hand[name] - autograd[name]).abs().max())
        metrics[f"check/autograd_vs_fd/{name}"] = float((autograd[name] - fd[name]).abs().max())
    params = tuple(p.detach().clone().requires_grad_() for p in model.parameters())
    passed = torch.autograd.gradcheck(lambda *ps: loss64(model, dict(zip(names, ps)), x, y), params, eps=1e-6, atol=1e-8)
    metrics["check/gradcheck"] = float(passed)
    return metrics


def autodiff_records(hidden: int, seed: int) -> Iterator[StepRecord]:
    """One record (step 0): the module, its graph, the chain per path and the checks, for one seeded example."""
    model = TinyNet(hidden, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(1, N_INPUTS, generator=generator), torch.randn(1, 1, generator=generator)
    yield StepRecord(0, {**module_records(model), **graph_records(model, x, y), **chain_records(model, x, y),
                         **check_records(model, x, y)})
