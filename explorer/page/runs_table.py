"""The Runs page's table, as data: one row per stored run, with its scenario's headline numbers.

Each scenario's `summarize` stores a `headline` of 2–4 numbers whose names do not depend on
the config ("final loss (your arm)"), so runs of one scenario share those columns; across
scenarios they are one text column. Sorting is the table's own (click a header).
"""
import datetime
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from explorer.page.url import config_query
from explorer.runs.store import StoredRun
from explorer.view.compare import differences
from scenarios.base import ConfigError, Scenario
from scenarios.claims import fmt


@dataclass(frozen=True)
class RunRow:
    run_id: str
    scenario_id: str
    title: str
    differs: str             # "depth=30, activation=relu", or "defaults"
    when: str
    status: str
    duration_s: float
    current_code: bool
    query: dict[str, str] | None  # the URL parameters that open it; None when it cannot be opened
    problem: str | None = None
    name: str = ""
    headline: dict[str, float] = field(default_factory=dict)
    records: int | None = None    # how many records it holds (None: not counted)

    @property
    def empty_stop(self) -> bool:
        """A run stopped before it recorded anything: nothing to see, hidden by default."""
        return self.status == "stopped" and self.records == 0


def run_row(stored: StoredRun, scenarios: dict[str, Scenario], records: int | None = None) -> RunRow:
    when = datetime.datetime.fromtimestamp(stored.created_at).strftime("%Y-%m-%d %H:%M")
    headline = {str(k): v for k, v in (stored.summary.get("headline") or {}).items()}
    common = dict(name=stored.name or "", headline=headline, records=records)
    scenario = scenarios.get(stored.scenario)
    if scenario is None:
        return RunRow(stored.run_id, stored.scenario, stored.scenario, _describe(stored.config), when, stored.status,
                      stored.duration_s, False, None, "no such scenario in this version", **common)
    if not scenario.listed:  # a watched run: opened by its id on "Your runs", described by the person's settings
        own = {k: v for k, v in stored.config.items() if not k.startswith("watch_") and k != "seed"}
        return RunRow(stored.run_id, scenario.id, scenario.title, _describe(own), when, stored.status,
                      stored.duration_s, stored.code_version == scenario.code_version(), {"run": stored.run_id},
                      **common)
    defaults = scenario.validate({}).model_dump(mode="json")
    diff = _describe(differences(defaults, stored.config))
    current = stored.code_version == scenario.code_version()
    try:
        query = config_query(scenario.validate(stored.config))
    except ConfigError as error:
        return RunRow(stored.run_id, scenario.id, scenario.title, diff, when, stored.status, stored.duration_s,
                      current, None, f"its settings are no longer valid: {error}", **common)
    return RunRow(stored.run_id, scenario.id, scenario.title, diff, when, stored.status, stored.duration_s,
                  current, query, **common)


def _describe(diff: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "defaults"


def visible(rows: list[RunRow], statuses: list[str], show_empty: bool) -> list[RunRow]:
    return [r for r in rows if r.status in statuses and (show_empty or not r.empty_stop)]


def headline_names(rows: list[RunRow]) -> list[str]:
    return list(dict.fromkeys(name for row in rows for name in row.headline))


def number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def table(rows: list[RunRow], one_scenario: bool) -> pd.DataFrame:
    """The rows as the page shows them: a column per headline number when all rows are of one scenario."""
    names = headline_names(rows) if one_scenario else []
    records = []
    for row in rows:
        # the short columns first: the wide ones (settings, headline) scroll off the right edge last
        record = {"name": row.name} | ({} if one_scenario else {"scenario": row.title})
        record.update({"status": row.status, "when": row.when, "duration (s)": round(row.duration_s, 1),
                       "settings that differ": row.differs})
        if one_scenario:
            record.update({name: number(row.headline.get(name)) for name in names})
        else:
            record["headline"] = " · ".join(f"{k} {fmt(v)}" for k, v in row.headline.items()  # as the pages write it
                                            if number(v) is not None)
        record.update({"code": "current" if row.current_code else "older", "run": row.run_id})
        records.append(record)
    return pd.DataFrame(records)


def compared(rows: list[RunRow]) -> tuple[RunRow, list[RunRow]] | str:
    """The run to show and the runs to overlay on it, for several selected runs; or why they cannot be.
    The shown one is the first finished or diverged run in the table's order (a link restores it
    from its config, which finds a complete run)."""
    if len(rows) < 2:
        return "Select two or more runs of one scenario to compare them."
    if len({r.scenario_id for r in rows}) > 1:
        return "The selected runs are of different scenarios: compare runs of one scenario."
    if any(r.query is None for r in rows):
        return "A selected run cannot be opened: " + next(r.problem for r in rows if r.query is None)
    base = next((r for r in rows if r.status in ("finished", "diverged")), rows[0])
    return base, [r for r in rows if r is not base]
