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
- the step post-hook of a logged step measures ‖ΔW‖/‖W‖ per module (norms fused; every kind summed
  per module in float64 at once), the
  outputs' std, the fraction of output units ≤ 0 on the whole batch and, per unit, whether it
  was ever > 0 on a logged batch; all of it, with everything the loop handed to `scalar` since
  the last transfer (its loss at every step), goes to the host in one `.tolist()`.

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
from engines.loop.probes import layer_name

Record = Callable[[int, dict[str, float]], None]  # (step, metrics) for each step with values
TINY = 1e-18    # a float32 norm this small may have underflowed (squares below ~1e-38): redone in float64
KEEP_COPY = 2   # at every ≤ this, the weights' copy and the stacked outputs are kept between logged steps…
KEEP_BYTES = 256 * 2**20  # …and at any `every` while the weights take less (one allocation a run, not a logged step)


def _units_last(output: torch.Tensor, conv: bool) -> torch.Tensor:
    """(rows, units): channels are the units of a convolution's output, the last dim otherwise."""
    if output.dim() < 2:
        return output.reshape(1, -1)
    if conv:
        output = output.movedim(1, -1)
    return output.reshape(-1, output.shape[-1])


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
        self._membership = torch.zeros(len(self.params), len(modules), dtype=torch.float64, device=self.device)
        self._membership[torch.arange(len(self.params)), torch.tensor(self._owners)] = 1.0  # parameter -> its module
        self.compiled = is_compiled(model)
        self.activations = activations and not self.compiled
        self.notes = [] if activations == self.activations else [
            "torch.compile: activation statistics are not measured (forward hooks added to a compiled model do "
            "not run inside its graph); gradient norms and update ratios are read outside it"]
        self.optimizer, self.scaler, self.step = optimizer, scaler, 0
        self._outputs: list[torch.Tensor | None] = [None] * len(modules)
        self._alive: dict[tuple, torch.Tensor] = {}  # (modules, units) -> per unit: > 0 on some logged batch
        self._stacked: dict[tuple, torch.Tensor] = {}  # buffers for the stacked outputs, by (shape, dtype, count)
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
        self._transfer(None, {})

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
            grads, weights, moved = self._per_module(
                self._norms + torch._foreach_norm(self._before, 2, dtype=self._norm_dtype))
            if self._scale is not None:  # the gradients are still scaled: the norms as the step will use them
                grads = grads / self._scale.double().to(grads.device)
            if not self._keeps:
                self._before = None
            self._measured = False
            if self.scaler is not None and self.scaler.is_enabled() and self.scaler._scale is not None:
                self.scalar(step, "loss_scale", self.scaler._scale)
            self._transfer(step, {"grad_norm": grads, "weight_norm": weights, "update_ratio": moved / weights,
                                  **self._activation_stats()})
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
    def _per_module(self, norms: list[torch.Tensor]) -> torch.Tensor:
        """Per-parameter norms (k lists of every parameter's, concatenated) -> (k, modules): √Σ‖p‖² over
        each module's own parameters, summed in float64."""
        squares = torch.stack(norms).to(self.device, torch.float64).view(-1, len(self.params)).square_()
        return (squares @ self._membership).sqrt_()  # (k, params) @ (params, modules): the sums per module

    def _activation_stats(self) -> dict[str, tuple[torch.Tensor, list[int]]]:
        """Of the modules whose forward hook ran, with the modules each value covers: the output's std, the
        share of its units ≤ 0 on every row of the batch, and the share never > 0 on any logged batch
        (kept per unit). Same-shaped outputs are stacked and measured at once."""
        outputs, self._outputs = self._outputs, [None] * len(self._outputs)  # none held between logged steps
        flat = {i: _units_last(out, self._conv[i]) for i, out in enumerate(outputs) if out is not None}
        groups: dict[tuple, list[int]] = {}
        for i, out in flat.items():
            groups.setdefault((tuple(out.shape), out.dtype), []).append(i)
        order, parts, kept = [], {"act_std": [], "frac_dead": [], "frac_dead_always": []}, {}
        for (shape, dtype), members in groups.items():
            stacked = self._stacked.get((shape, dtype, len(members)))
            if stacked is None:
                stacked = torch.empty((len(members), *shape), dtype=dtype, device=self.device)
            torch.stack([flat[i] for i in members], out=stacked)  # (modules, rows, units): our own copy
            kept[(shape, dtype, len(members))] = stacked
            values = stacked.float()
            top = values.amax(dim=1)  # (modules, units): each unit's largest output on the batch
            values -= values.mean(dim=(1, 2), keepdim=True)  # centred in place
            # std as ‖x − mean‖/√(n−1): the value of .std(), ~14x faster than its kernel (engines/loop/probes.py)
            spread = torch.linalg.vector_norm(values.flatten(1), dim=1)
            parts["act_std"].append(spread / max(1, values[0].numel() - 1) ** 0.5)
            history = (tuple(members), shape[-1])  # the same modules and units: their per-unit record goes on
            alive = self._alive.get(history)
            alive = self._alive[history] = (top > 0) if alive is None else alive.logical_or_(top > 0)
            parts["frac_dead"].append((top <= 0).float().mean(dim=1))
            parts["frac_dead_always"].append((~alive).float().mean(dim=1))
            order += members
        self._stacked = kept if self._keeps else {}  # reused at the next logged step: no allocation then
        return {kind: (torch.cat(values), order) for kind, values in parts.items() if values}

    def _transfer(self, step: int | None, per_module: dict) -> None:
        """One host transfer: the buffered scalars and this step's per-module values (a tensor, or a
        tensor and the modules it covers); then `record` once per step that has values."""
        scalars, self._scalars = self._scalars, []
        tensors = [value for _, _, value in scalars if isinstance(value, torch.Tensor)]
        kinds = {kind: value if isinstance(value, tuple) else (value, range(len(self.layers)))
                 for kind, value in per_module.items()}
        parts = [tensor.to(self.device, torch.float64) for tensor, _ in kinds.values()]
        alike = all(t.dim() == 0 and (t.dtype, t.device) == (tensors[0].dtype, tensors[0].device) for t in tensors)
        if tensors and alike:
            parts.append(torch.stack(tensors).to(self.device, torch.float64))  # the usual: a loss a step
        elif tensors:
            parts.append(torch.stack([t.to(self.device, torch.float64).mean() for t in tensors]))
        numbers = torch.cat(parts).tolist() if parts else []
        rows: dict[int, dict[str, float]] = {step: {}} if step is not None else {}
        weights: dict[int, float] = {}
        taken = 0
        for kind, (_, modules) in kinds.items():
            names = self._metric_names.get(kind) or self._metric_names.setdefault(
                kind, [f"{kind}/{name}" for name in self._names])
            values, taken = numbers[taken:taken + len(modules)], taken + len(modules)
            if kind == "grad_norm" and any(0 <= v <= TINY for v in values):
                tiny = [i for i, v in zip(modules, values) if 0 <= v <= TINY]
                values = [dict(zip(tiny, self._refined(tiny))).get(i, v) for i, v in zip(modules, values)]
            if kind == "weight_norm":
                weights = dict(zip(modules, values))
            if kind == "update_ratio" and 0.0 in weights.values():  # a step from all-zero weights has no ratio
                rows[step].update((names[i], v) for i, v in zip(modules, values) if weights.get(i) != 0.0)
            else:
                rows[step].update(zip(names if isinstance(modules, range) else [names[i] for i in modules], values))
        if step is not None:
            rows.setdefault(step, {})["lr"] = float(self.optimizer.param_groups[0]["lr"])
        numbers = iter(numbers[taken:])
        logged: dict[tuple[int, str], list[float]] = {}
        for at, name, value in scalars:
            logged.setdefault((at, name), []).append(next(numbers) if isinstance(value, torch.Tensor) else value)
        for (at, name), values in logged.items():  # several micro-batches of one step: their mean
            rows.setdefault(at, {})[name] = math.fsum(values) / len(values) if all(map(math.isfinite, values)) \
                else next(v for v in values if not math.isfinite(v))
        for at in sorted(rows):
            self.record(at, rows[at])
