"""What K arms trained as one batched model hold, said before Run (torch-free: the page reads it).

A batched model (engines/loop/batched.py) keeps every arm's weights, gradients and optimizer
state at once: K× one arm's, where K sequential arms held one arm's at a time. Its passes
carry K arms' activations at once too. So a sweep that is cheap in time can be large in
memory, and a K too large for the machine is refused at the control, with the estimate:

    bytes ≈ K · value_bytes · (weights · (2 + optimizer slots) + activations of the largest pass)

(weights and their gradients, plus Adam's two moments or SGD's one momentum buffer per weight).
"""
FILL = 0.5  # a run may plan on half of the host's memory (as the distributed scenarios' refusals allow)


def batched_bytes(arms: int, weights: int, optimizer_slots: int, activations: int, value_bytes: int = 4) -> float:
    """Bytes of K arms as one batched model: weights, gradients, optimizer state and one pass's activations."""
    return float(arms * value_bytes * (weights * (2 + optimizer_slots) + activations))


def linear_weights(*widths: int) -> int:
    """Weights and biases of a chain of Linears through `widths` (16, 64, 64, 4: three layers)."""
    return sum(n_in * n_out + n_out for n_in, n_out in zip(widths, widths[1:]))


def refusal(what: str, arms: int, need_bytes: float, limit_bytes: int, basis: str) -> str | None:
    """A plain sentence when the batched model would not fit in the memory a run may plan on (`limit_bytes`:
    the host's memory a run may plan on, 0 when unknown: nothing to refuse on; `basis` says that limit in
    words, scenarios.base.Machine.memory_basis); None when it fits."""
    limit = FILL * limit_bytes
    if not limit or need_bytes <= limit:
        return None
    return (f"{what}: {arms} arms trained as one batched model need about {_mb(need_bytes)} (K× weights, gradients "
            f"and optimizer state, and one pass's activations), more than {basis}; choose fewer arms or smaller sizes")


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"
