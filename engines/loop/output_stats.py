"""The watch's activation statistics (engines/loop/watching.py): each watched module's output of a logged
step, measured in groups of same-shaped outputs stacked into one buffer.

Per module: the output's std, the count of units ≤ 0 on every row of the batch, and the count never > 0 on
any logged batch so far. A unit is a convolution's channel, else the output's last dim (a 0- or 1-dim output
is one row). The groups are planned once per set of output shapes; where they change between logged steps
(a module that sat out a step), each module's per-unit record moves with it to its new group.
"""
import torch


class OutputStats:
    """`measure(outputs)` for one watch: `conv` says which modules are convolutions; `keep` keeps the stacked
    buffers between logged steps (one allocation a run, not a logged step)."""

    def __init__(self, conv: list[bool], device: torch.device, keep: bool) -> None:
        self._conv, self.device, self._keeps = conv, device, keep
        self._alive: dict[tuple, torch.Tensor] = {}  # (modules, units) -> per unit: > 0 on some logged batch
        self._holder: dict[int, tuple] = {}  # module -> the key of `_alive` whose row is its record now
        self._stacked: dict[tuple, torch.Tensor] = {}  # the stacked outputs' buffers: ((shape, dtype, conv), count)
        self._plans: dict[tuple, list] = {}  # the groups of same-shaped outputs, by every output's shape and dtype

    def measure(self, outputs: list[torch.Tensor | None]) -> list[tuple[list[int], torch.Tensor, int]]:
        """Of the modules with an output (None: its forward hook did not run), in groups of same-shaped outputs
        measured at once: the modules of each group, a (3, modules) float64 tensor of their outputs' std, the
        count of units ≤ 0 on every row of the batch and the count never > 0 on any logged batch so far (kept
        per unit), and the units each output has."""
        signature = tuple(None if out is None else (out.shape, out.dtype) for out in outputs)
        plan = self._plans.get(signature)
        if plan is None:
            plan = self._plans[signature] = self._plan(outputs)
        measured, kept = [], {}
        for key, members, units, flat in plan:
            stacked = self._stacked.get((key, len(members)))
            if stacked is None:
                stacked = torch.empty((len(members), *key[0]), dtype=key[1], device=self.device)
            torch.stack([outputs[i].reshape(1, -1) if flat else outputs[i] for i in members], out=stacked)
            kept[(key, len(members))] = stacked
            values = (stacked.movedim(2, -1) if key[2] else stacked).reshape(len(members), -1, units).float()
            top = values.amax(dim=1)  # (modules, units): each unit's largest output on the batch
            values -= values.mean(dim=(1, 2), keepdim=True)  # centred in place (a copy where it was reshaped)
            # std as ‖x − mean‖/√(n−1): the value of .std(), ~14x faster than its kernel (engines/loop/probes.py)
            spread = torch.linalg.vector_norm(values.flatten(1), dim=1) / max(1, values[0].numel() - 1) ** 0.5
            history = (tuple(members), units)  # the same modules and units: their per-unit record goes on
            alive = self._alive.get(history)
            if alive is None or any(self._holder.get(i) != history for i in members):  # the groups changed
                alive = self._alive[history] = torch.stack([self._alive_row(i, units) for i in members])
                self._holder.update(dict.fromkeys(members, history))
            alive.logical_or_(top > 0)
            counts = torch.stack((top <= 0, ~alive)).sum(dim=-1)  # (2, modules): units dead now, dead always
            measured.append((members, torch.cat((spread.double()[None], counts.double())), units))
        self._stacked = kept if self._keeps else {}  # reused at the next logged step: no allocation then
        return measured

    def _alive_row(self, module: int, units: int) -> torch.Tensor:
        """A module's per-unit record (> 0 on some logged batch) from the group it was measured in last;
        all False if it never was, or had other units then."""
        held = self._holder.get(module)
        if held is None or held[1] != units:
            return torch.zeros(units, dtype=torch.bool, device=self.device)
        return self._alive[held][held[0].index(module)]

    def _plan(self, outputs: list[torch.Tensor | None]) -> list[tuple[tuple, list[int], int, bool]]:
        """Groups of modules whose outputs have one shape, dtype and kind of unit (a convolution's channels,
        the last dim otherwise; a 0- or 1-dim output is one row): ((shape, dtype, conv), modules, units, whether
        the outputs are reshaped to that one row). The stacked copy is (modules, *shape)."""
        groups: dict[tuple, list[int]] = {}
        for i, out in enumerate(outputs):
            if out is not None:
                conv = self._conv[i] and out.dim() >= 2
                shape = out.shape if out.dim() >= 2 else torch.Size([1, out.numel()])
                groups.setdefault((shape, out.dtype, conv), []).append(i)
        return [(key, members, key[0][1] if key[2] else key[0][-1], outputs[members[0]].dim() < 2)
                for key, members in groups.items()]
