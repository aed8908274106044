"""The one reader of a run's records table, for figures, summaries and claims.

A frame is long-format rows `arm, step, metric, value`. `Records` groups it once by
(arm, metric) and answers the questions every scenario asks: the series of one metric,
its value at a step or at the end, the per-layer table, where an arm diverged. Series
keep the order rows were recorded in, sorted by step (stable), so a metric logged twice
at one step reads its later value last.
"""
from functools import cached_property

import numpy as np
import pandas as pd


class Records:
    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    @cached_property
    def _groups(self) -> dict[tuple[str, str], np.ndarray]:
        """(arm, metric) -> row positions in step order, first-recorded group first. Series are
        built only when asked for: a frame may hold thousands of metrics (one per class per example)."""
        if self.frame.empty:
            return {}
        ordered = self.frame.sort_values("step", kind="stable")
        self._steps, self._values = ordered["step"].to_numpy(int), ordered["value"].to_numpy(float)
        positions = ordered.groupby(["arm", "metric"], sort=False).indices
        return {(str(arm), str(metric)): rows for (arm, metric), rows in sorted(positions.items(), key=lambda kv: kv[1][0])}

    @cached_property
    def _series(self) -> dict[tuple[str, str], pd.Series]:
        return {}

    @cached_property
    def _layers(self) -> dict[tuple[str, str], pd.DataFrame]:
        return {}

    # --- what is there ------------------------------------------------------------------
    def arms(self) -> list[str]:
        """Arms in first-recorded order."""
        return [str(arm) for arm in self.frame["arm"].unique()] if not self.frame.empty else []

    def metrics(self, arm: str | None = None) -> list[str]:
        return list(dict.fromkeys(m for a, m in self._groups if arm is None or a == arm))

    def has(self, name: str, arm: str | None = None) -> bool:
        """A metric by exact name, or any metric under a prefix ending in "/"."""
        return any(m == name or (name.endswith("/") and m.startswith(name)) for m in self.metrics(arm))

    def arms_with(self, metric: str) -> list[str]:
        return [arm for arm in self.arms() if (arm, metric) in self._groups]

    # --- one metric of one arm ---------------------------------------------------------------
    def series(self, arm: str, metric: str) -> pd.Series:
        """value indexed by step, in step order (empty when never recorded)."""
        key = (arm, metric)
        if key not in self._series:
            rows = self._groups.get(key)
            self._series[key] = (pd.Series(self._values[rows], index=self._steps[rows]) if rows is not None else
                                 pd.Series([], dtype=float, index=pd.Index([], dtype=int)))
        return self._series[key]

    def values(self, arm: str, metric: str) -> np.ndarray:
        return self.series(arm, metric).to_numpy()

    def by_step(self, arm: str, metric: str) -> dict[int, float]:
        series = self.series(arm, metric)
        return {int(step): float(value) for step, value in series.items()}

    def last(self, arm: str, metric: str) -> float | None:
        series = self.series(arm, metric)
        return float(series.iloc[-1]) if len(series) else None

    def last_step(self, arm: str, metric: str) -> int | None:
        series = self.series(arm, metric)
        return int(series.index[-1]) if len(series) else None

    def first(self, arm: str, metric: str) -> float | None:
        series = self.series(arm, metric)
        return float(series.iloc[0]) if len(series) else None

    def at(self, arm: str, metric: str, step: int) -> float | None:
        """The value at `step` (the later one where it was logged twice), or None. Series are in step
        order, so this is a binary search: figures ask it ~100 times a build, and a boolean mask took
        ~170 µs a call."""
        series = self.series(arm, metric)
        steps = series.index.to_numpy()
        last = int(np.searchsorted(steps, step, side="right")) - 1
        return float(series.iloc[last]) if last >= 0 and steps[last] == step else None

    def diverged_at(self, arm: str) -> int | None:
        series = self.series(arm, "diverged")
        return int(series.index[0]) if len(series) else None

    # --- per-layer metrics (`prefix/layer_XX`) -------------------------------------------------
    def layer_table(self, prefix: str) -> pd.DataFrame:
        """Rows of `prefix/layer_XX` metrics, all arms, with an integer `layer` column (1-based)."""
        head = prefix + "/layer_"
        rows = self.frame[self.frame["metric"].str.startswith(head)] if not self.frame.empty else self.frame
        return rows.assign(layer=rows["metric"].str.slice(len(head)).astype(int) if len(rows) else [])

    def layers(self, arm: str, prefix: str) -> pd.DataFrame:
        """step × layer values of one arm (complete steps only; a step logged twice: the mean), as
        `pivot_table` gives them, from the series already grouped (a pivot of the whole frame per
        arm took most of a per-layer figure's build). Kept: a figure and its claims ask again."""
        key = (arm, prefix)
        if key not in self._layers:
            head = prefix + "/layer_"
            columns = {int(metric[len(head):]): self.series(arm, metric)
                       for metric in self.metrics(arm) if metric.startswith(head)}
            if not columns:
                self._layers[key] = pd.DataFrame()
            else:
                table = pd.DataFrame({layer: series.groupby(level=0).mean() if series.index.has_duplicates else series
                                      for layer, series in sorted(columns.items())}).sort_index().dropna()
                table.index.name, table.columns.name = "step", "layer"
                self._layers[key] = table
        return self._layers[key].copy()

    def profile(self, arm: str, prefix: str, step: int | None = None) -> np.ndarray:
        """One arm's per-layer values at a step (default: its first logged step), layer 1 first."""
        table = self.layers(arm, prefix)
        if table.empty:
            return np.array([])
        return table.loc[table.index.min() if step is None else step].to_numpy()
