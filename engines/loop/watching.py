"""Watching a person's own training loop: per-module statistics by hooks, on logged steps only.

`ModuleWatch(model, optimizer, every, record)` needs nothing from the loop it watches. It measures
every module that owns trainable parameters (engines/loop/model_parts.py), through hooks:

- the optimizer's step post-hook is the clock: it counts optimizer steps, and after the step
  before a logged one it arms the measuring hooks; that one Python call is all that runs
  between logged steps;
- forward hooks keep each module's output of the last forward pass run with gradients on (an
  evaluation pass under `no_grad` is not taken for training);
- the optimizer's step pre-hook reads every weight gradient as the step will use it: after
  gradient accumulation, after DDP's all-reduce, after `GradScaler.unscale_` (gradients still
  scaled — a fused optimizer unscales inside its step — have their norms divided by the scale):
  one fused `torch._foreach_norm` in float32 (float64 where a weight is float64; a norm that comes
  out ≤ `TINY`, where squares may have underflowed, is summed again in float64 before it is
  recorded); and it copies the weights
  (one fused `_foreach_mul`, or `_foreach_copy_` into the copy kept between logged steps, `_keeps`);
- the step post-hook of a logged step measures every parameter's ‖ΔW‖ (norms fused), and of the
  outputs (same-shaped ones stacked, grouped as planned once per set of shapes) the std, the count
  of units ≤ 0 on the whole batch and, per unit, whether it was ever > 0 on a logged batch; all of
  it, with everything the loop handed to `scalar` since the last transfer (its loss at every
  step), goes to the host in one `.tolist()`. There, in float64 Python arithmetic, each module's
  norms are summed over its own parameters (√Σ‖p‖²), and ‖ΔW‖/‖W‖ and the fractions are formed:
  a few dozen small tensor operations fewer than doing it on the device.

Between logged steps no forward or pre-step hook exists, so the model runs its plain path. A
model compiled with `torch.compile` runs its own graph, where forward hooks added later never
run (dynamo does not guard on them): activation statistics are then left out, and `notes` says
so; gradients and updates are read outside the graph and still measured.
"""
import math
from collections.abc import Callable

import torch
from torch import nn

from engines.loop.model_parts import Layer, WatchError, checked_every, first_tensor, is_compiled, trainable_modules
from engines.loop.output_stats import OutputStats
from engines.loop.probes import layer_name

Record = Callable[[int, dict[str, float]], None]  # (step, metrics) for each step with values
TINY = 1e-18    # a float32 norm this small may have underflowed (squares below ~1e-38): redone in float64
KEEP_COPY = 2   # at every ≤ this, the weights' copy and the stacked outputs are kept between logged steps…
KEEP_BYTES = 256 * 2**20  # …and at any `every` while the weights take less (one allocation a run, not a logged step)


class ModuleWatch:
    """Hooks on `model` and `optimizer` that measure each logged step (every `every`-th optimizer
    step, the first included) and hand `record(step, metrics)` plain floats."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, every: int, record: Record, *,
                 activations: bool = True, scaler=None) -> None:
        modules = self.check(model, optimizer)
        self.every, self.record = checked_every(every), record
        self.layers = [layer for layer, _, _ in modules]
        self._names = [layer_name(i) for i in range(len(modules))]  # layer_01 …: the per-layer records' names
        self._metric_names: dict[str, list[str]] = {}
        self._modules = [module for _, module, _ in modules]
        self._conv = [layer.kind.startswith("Conv") for layer in self.layers]
        self.params = [p for _, _, params in modules for p in params]
        self._values = [p.detach() for p in self.params]  # aliases: in-place optimizer steps show through
        self.device = self.params[0].device
        # norms in float32 (half and bfloat16 weights widened), in float64 where a weight is float64 (a norm may
        # not narrow its input)
        self._norm_dtype = torch.float64 if any(p.dtype == torch.float64 for p in self.params) else torch.float32
        self._owners = [i for i, (_, _, params) in enumerate(modules) for _ in params]
        self._keeps = every <= KEEP_COPY or sum(p.numel() * p.element_size() for p in self.params) < KEEP_BYTES
        self.compiled = is_compiled(model)
        self.activations = activations and not self.compiled
        self.notes = [] if activations == self.activations else [
            "torch.compile: activation statistics are not measured (forward hooks added to a compiled model do "
            "not run inside its graph); gradient norms and update ratios are read outside it"]
        self.optimizer, self.scaler, self.step = optimizer, scaler, 0
        self._outputs: list[torch.Tensor | None] = [None] * len(modules)
        self._output_stats = OutputStats(self._conv, self.device, self._keeps)
        self._scalars: list[tuple[int, str, float | torch.Tensor]] = []
        self._measured = False
        self._before: list[torch.Tensor] | None = None  # the weights before the step being measured
        self._scale: torch.Tensor | None = None
        self._armed: list = []
        self._clock = optimizer.register_step_post_hook(self._after_step)
        self._arm()

    @staticmethod
    def check(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[tuple[Layer, nn.Module, list]]:
        """The modules to watch, or a WatchError saying why there are none."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise WatchError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(model, nn.Module):
            raise WatchError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if next(iter(model.parameters()), None) is None:
            raise WatchError("the model has no parameters: there is nothing to watch")
        modules = trainable_modules(model)
        if not modules:
            raise WatchError("every parameter of the model is frozen (requires_grad=False): nothing trains, "
                             "so there is nothing to watch")
        return modules

    # --- what the loop hands over ------------------------------------------------------------------
    def scalar(self, step: int, name: str, value: float | torch.Tensor) -> None:
        """A value of `step` (the loss) to record; a tensor stays on its device until the next transfer."""
        self._scalars.append((step, name, value.detach() if isinstance(value, torch.Tensor) else float(value)))

    def flush(self) -> None:
        """Move every buffered value to the host now (the end of a run)."""
        self._transfer(None)

    def close(self) -> None:
        self._disarm()
        self._clock.remove()

    # --- the hooks --------------------------------------------------------------------------------
    def _arm(self) -> None:
        if self._armed:
            return
        self._armed.append(self.optimizer.register_step_pre_hook(self._before_step))
        if self.activations:
            self._armed += [module.register_forward_hook(self._forward_hook(i))
                            for i, module in enumerate(self._modules)]

    def _disarm(self) -> None:
        for handle in self._armed:
            handle.remove()
        self._armed = []
        self._outputs = [None] * len(self._outputs)

    def _forward_hook(self, index: int):
        def hook(module: nn.Module, inputs: tuple, output) -> None:
            if not torch.is_grad_enabled():
                return
            output = first_tensor(output)
            if output is None or not output.is_floating_point():
                return
            self._outputs[index] = output.detach()  # the last training pass before the step wins
        return hook

    def _before_step(self, optimizer, args, kwargs) -> None:
        grads = [p.grad if p.grad is not None else p.new_zeros(()) for p in self.params]
        # the gradients' and the weights' norms in one fused call (tiny gradient norms redone in float64 later)
        self._norms = torch._foreach_norm(grads + self._values, 2, dtype=self._norm_dtype)
        self._scale = self._scale_of_grads(optimizer)
        if self._before is not None:  # kept from the last logged step: refilled in place
            torch._foreach_copy_(self._before, self._values)
        else:
            self._before = torch._foreach_mul(self._values, 1.0)  # one fused copy of every weight
        self._measured = True

    def _scale_of_grads(self, optimizer) -> torch.Tensor | None:
        """The loss scale the gradients still carry: a fused optimizer that unscales inside its step is
        handed it (`optimizer.grad_scale`, set by GradScaler.step); a loop that steps without
        `unscale_` leaves the scaler's own. None: they are unscaled (GradScaler.step unscales first)."""
        scale = getattr(optimizer, "grad_scale", None)
        if isinstance(scale, torch.Tensor):
            return scale
        if self.scaler is None or not self.scaler.is_enabled():
            return None
        stage = self.scaler._per_optimizer_states[id(optimizer)].get("stage")
        return self.scaler._scale if getattr(stage, "name", "") == "READY" else None

    def _after_step(self, optimizer, args, kwargs) -> None:
        step, self.step = self.step, self.step + 1
        if step % self.every == 0 and self._measured:
            torch._foreach_sub_(self._before, self._values)  # now W_before − W_after = −ΔW, in place
            # every parameter's gradient, weight and update norms, in that order; summed per module on the host
            norms = torch.stack(self._norms + torch._foreach_norm(self._before, 2, dtype=self._norm_dtype))
            if not self._keeps:
                self._before = None
            self._measured = False
            if self.scaler is not None and self.scaler.is_enabled() and self.scaler._scale is not None:
                self.scalar(step, "loss_scale", self.scaler._scale)
            self._transfer(step, norms, self._scale, self._activation_stats())
        if self.step % self.every == 0:
            self._arm()
        elif self._armed:
            self._disarm()

    def _refined(self, modules: list[int]) -> list[float]:
        """Gradient norms of `modules` summed in float64: where a float32 norm came out ≤ TINY, its squares
        may have underflowed (a vanished gradient). A second transfer, only then."""
        norms = []
        for module in modules:
            grads = [p.grad for p, owner in zip(self.params, self._owners) if owner == module and p.grad is not None]
            total = torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float64)).pow(2).sum().sqrt() if grads \
                else torch.zeros((), dtype=torch.float64)
            norms.append(total / self._scale.double() if self._scale is not None else total)
        return torch.stack(norms).tolist()

    # --- measuring ----------------------------------------------------------------------------------
    def _activation_stats(self) -> list[tuple[list[int], torch.Tensor, int]]:
        outputs, self._outputs = self._outputs, [None] * len(self._outputs)  # none held between logged steps
        return self._output_stats.measure(outputs)

    def _transfer(self, step: int | None, norms: torch.Tensor | None = None, scale: torch.Tensor | None = None,
                  measured: list[tuple[list[int], torch.Tensor, int]] = ()) -> None:
        """One host transfer: this step's per-parameter norms (gradients, weights, updates), the scale the
        gradients carry, the activation statistics and the buffered scalars; then the sums per module on the
        host, and `record` once per step that has values."""
        scalars, self._scalars = self._scalars, []
        tensors = [value for _, _, value in scalars if isinstance(value, torch.Tensor)]
        parts = [norms.to(self.device, torch.float64)] if norms is not None else []
        if scale is not None:
            parts.append(scale.reshape(1).to(self.device, torch.float64))
        parts += [values.flatten() for _, values, _ in measured]
        alike = all(t.dim() == 0 and (t.dtype, t.device) == (tensors[0].dtype, tensors[0].device) for t in tensors)
        if tensors and alike:
            parts.append(torch.stack(tensors).to(self.device, torch.float64))  # the usual: a loss a step
        elif tensors:
            parts.append(torch.stack([t.to(self.device, torch.float64).mean() for t in tensors]))
        numbers = torch.cat(parts).tolist() if parts else []
        rows: dict[int, dict[str, float]] = {step: {}} if step is not None else {}
        taken = 0
        if norms is not None:
            taken = self._module_rows(rows[step], numbers, scale is not None)
        stats: dict[str, list[tuple[str, float]]] = {"act_std": [], "frac_dead": [], "frac_dead_always": []}
        for members, values, units in measured:
            flat, taken = numbers[taken:taken + values.numel()], taken + values.numel()
            spread, dead, never = (flat[k * len(members):(k + 1) * len(members)] for k in range(3))
            for kind, column in (("act_std", spread), ("frac_dead", [d / units for d in dead]),
                                 ("frac_dead_always", [n / units for n in never])):
                stats[kind] += zip((self._names_of(kind)[i] for i in members), column)
        if step is not None:
            for pairs in stats.values():
                rows[step].update(pairs)
            rows[step]["lr"] = float(self.optimizer.param_groups[0]["lr"])
        numbers = iter(numbers[taken:])
        logged: dict[tuple[int, str], list[float]] = {}
        for at, name, value in scalars:
            logged.setdefault((at, name), []).append(next(numbers) if isinstance(value, torch.Tensor) else value)
        for (at, name), values in logged.items():  # several micro-batches of one step: their mean
            rows.setdefault(at, {})[name] = math.fsum(values) / len(values) if all(map(math.isfinite, values)) \
                else next(v for v in values if not math.isfinite(v))
        for at in sorted(rows):
            self.record(at, rows[at])

    def _module_rows(self, row: dict[str, float], numbers: list[float], scaled: bool) -> int:
        """Per module, from every parameter's norms (gradients, weights, updates; then the scale if `scaled`):
        √Σ‖p‖² over the module's own parameters, in float64; the gradients' divided by the scale, and
        summed again in float64 where they came out ≤ TINY. Fills `row`; returns the numbers used."""
        count, modules = len(self.params), len(self.layers)
        squares = [[0.0] * modules for _ in range(3)]
        for kind in range(3):
            sums, offset = squares[kind], kind * count
            for j, owner in enumerate(self._owners):
                sums[owner] += numbers[offset + j] ** 2
        scale = numbers[3 * count] if scaled else 1.0
        grads = [math.sqrt(v) / scale for v in squares[0]]
        weights, moved = [math.sqrt(v) for v in squares[1]], [math.sqrt(v) for v in squares[2]]
        tiny = [i for i, v in enumerate(grads) if v <= TINY]
        if tiny:  # their squares may have underflowed in float32: a second transfer, only then (and once)
            for i, refined in zip(tiny, self._refined(tiny)):
                grads[i] = refined
        row.update(zip(self._names_of("grad_norm"), grads))
        row.update(zip(self._names_of("weight_norm"), weights))
        # a step from all-zero weights has no ratio
        row.update((name, d / w) for name, d, w in zip(self._names_of("update_ratio"), moved, weights) if w != 0.0)
        return 3 * count + (1 if scaled else 0)

    def _names_of(self, kind: str) -> list[str]:
        """The per-module records' names of `kind`: "grad_norm/layer_01", …"""
        return self._metric_names.get(kind) or self._metric_names.setdefault(kind, [f"{kind}/{n}" for n in self._names])
