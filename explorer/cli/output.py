"""What the command line prints: plain tables for people, `--json` for programs.

Text written as markdown for the page (explanations, settings' help) is printed as plain terminal
text (explorer/plaintext.py `terminal_text`); JSON carries both.

JSON output is strict (RFC 8259): a non-finite number (a diverged loss) is written as null,
since NaN and Infinity are not JSON. The files `run --out` writes keep Python's spelling.
"""
import json
import math
import time
from typing import Any

from explorer.plaintext import one_line, terminal_text


def finite(value: Any) -> Any:
    """`value` with every NaN/±inf float replaced by None, containers recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def print_json(value: Any) -> None:
    print(json.dumps(finite(value), indent=2, allow_nan=False, default=str))


def explanation_json(explanation) -> dict[str, Any]:
    """The explanation's text plain (as a terminal shows it: `10⁻⁴·⁰`, no `**`), and as markdown
    (`$10^{-4.0}$`, as the page renders it): `markdown` is the whole of it, takeaway and details."""
    takeaway = explanation.takeaway.text if explanation.takeaway else None
    details = [s.text for s in explanation.details]
    return {"takeaway": terminal_text(takeaway) if takeaway else None, "details": [terminal_text(d) for d in details],
            "waiting": terminal_text(explanation.waiting), "markdown": explanation.markdown(),
            "takeaway_markdown": takeaway, "details_markdown": details}


def allowed_text(spec: dict[str, Any]) -> str:
    if spec["kind"] == "choice":
        return ", ".join(map(str, spec["choices"]))
    low, high = spec.get("ge", spec.get("gt")), spec.get("le", spec.get("lt"))
    return f"{low}..{high}" if low is not None or high is not None else spec["kind"]


def settings_json(specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every setting's spec; its description plain (`description`) and as the page's help renders it
    (`description_markdown`)."""
    return {name: {**spec, "description": terminal_text(spec["description"] or ""),
                   "description_markdown": spec["description"]} for name, spec in specs.items()}


def scenario_json(scenario, with_settings: bool) -> dict[str, Any]:
    data = {"id": scenario.id, "title": scenario.title, "question": scenario.question, "topic": scenario.topic}
    if with_settings:
        data["settings"] = settings_json(scenario.field_specs())
    return data


def print_settings(scenario) -> None:
    print(f"{scenario.id}: {scenario.question}")
    print(f"settings (--set KEY=VALUE; {len(scenario.field_specs())} keys):")
    for name, spec in scenario.field_specs().items():
        view = " (view only: redraws, never retrains)" if spec["view"] else ""
        print(f"  {name:16s} default {spec['default']!s:16s} {allowed_text(spec)}{view}")
        if spec["description"]:
            print(f"  {'':16s} {terminal_text(one_line(spec['description']))}")


def when(created_at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(created_at))


def headline_text(summary: dict[str, Any]) -> str:
    headline = summary.get("headline") or {}
    return "; ".join(f"{name} {value:.4g}" if isinstance(value, (int, float)) else f"{name} {value}"
                     for name, value in headline.items())


def run_json(stored) -> dict[str, Any]:
    return {"run_id": stored.run_id, "scenario": stored.scenario, "name": stored.name, "status": stored.status,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(stored.created_at)),
            "duration_s": stored.duration_s, "code_version": stored.code_version, "config": stored.config,
            "headline": (stored.summary or {}).get("headline", {}), "error": stored.error}


def print_runs(runs: list) -> None:
    print(f"{'run':12s}  {'created':16s}  {'scenario':24s}  {'status':10s}  {'s':>6s}  headline")
    for stored in runs:
        named = f"{one_line(stored.name)}: " if stored.name else ""
        print(f"{stored.run_id:12s}  {when(stored.created_at):16s}  {stored.scenario:24s}  {stored.status:10s}  "
              f"{stored.duration_s:6.1f}  {named}{one_line(headline_text(stored.summary))}")
