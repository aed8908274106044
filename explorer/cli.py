"""The command line: `python -m explorer list | run | show`.

    python -m explorer run vanishing-gradients --set depth=30 --set activation=relu --out DIR

Bad input (unknown scenario, unknown key, a value out of range) exits with code 2 and one
line naming the key and what is allowed. Progress goes to stderr, results to stdout.
"""
import argparse
import json
import sys
import time
from pathlib import Path

from explorer.exports import write_run
from explorer.serving import save_result, stored_result
from explorer.store import RunStore
from scenarios import all_scenarios, get_scenario
from scenarios.base import ConfigError, Event, Scenario

USAGE_ERROR = 2
RUN_FAILED = 1


class ProgressBar:
    """A sink that draws `[#####-----] 50%` on stderr (a line per 10% when not a terminal)."""

    def __init__(self, label: str, stream=sys.stderr, width: int = 30) -> None:
        self.label, self.stream, self.width = label, stream, width
        self.tty = stream.isatty()
        self._shown = -1

    def add(self, rows) -> None:
        pass

    def event(self, event: Event) -> None:
        self.stream.write(f"\n{event.arm}: {event.message}\n")

    def progress(self, fraction: float) -> None:
        percent = int(fraction * 100)
        if percent == self._shown or (not self.tty and percent // 10 == self._shown // 10 and percent != 100):
            return
        self._shown = percent
        filled = int(fraction * self.width)
        bar = f"{self.label} [{'#' * filled}{'-' * (self.width - filled)}] {percent:3d}%"
        self.stream.write(("\r" + bar) if self.tty else bar + "\n")
        self.stream.flush()

    def stop_requested(self) -> bool:
        return False

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def parse_sets(pairs: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set takes key=value, got {pair!r}")
        values[key.strip()] = value.strip()
    return values


def cmd_list(args: argparse.Namespace) -> int:
    for scenario in all_scenarios():
        print(f"{scenario.id:24s} {scenario.question}")
        for name, spec in scenario.field_specs().items():
            allowed = (", ".join(map(str, spec["choices"])) if spec["kind"] == "choice"
                       else f"{spec.get('ge')}..{spec.get('le')}" if "ge" in spec else spec["kind"])
            print(f"    {name:14s} default {spec['default']!s:16s} {allowed}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    scenario = get_scenario(args.scenario)
    config = scenario.validate(parse_sets(args.set))
    store = None if args.no_store else RunStore()
    config_json = config.model_dump(mode="json")
    stored = None if store is None else stored_result(store, scenario, config, fresh=args.fresh)
    if stored is not None:
        print(f"served from the run store: run {stored.run_id} (use --fresh to train again)", file=sys.stderr)
        frame, summary, run_id, status = store.frame(stored.run_id), stored.summary, stored.run_id, stored.status
    else:
        from engines.runtime import configure  # torch loads once the arguments are known to be good
        configure()
        bar = ProgressBar(scenario.id)
        started = time.perf_counter()
        try:
            result = scenario.run(config, sink=bar)
        except ConfigError:
            raise  # refused before it started: a usage error
        except Exception as error:  # e.g. a rank of a distributed run raised: its message, not a traceback
            print(f"error: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
            return RUN_FAILED
        finally:
            bar.close()
        frame, summary, status = result.frame, result.summary, result.status
        events = [vars(e) for e in result.events]
        run_id = save_result(store, scenario, config, status, frame, summary, events,
                             time.perf_counter() - started) if store else None
    print(f"{scenario.id}: {status}" + (f", run {run_id}" if run_id else ""))
    print(scenario.explain(frame, config).markdown())
    if args.out:
        formats = tuple(args.format.split(","))
        for path in write_run(Path(args.out), config_json, frame, summary, scenario.figures(frame, config), formats):
            print(path, file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store = RunStore()
    stored = store.get(args.run_id)
    if stored is None:
        raise LookupError(f"no run {args.run_id!r} in {store.path}")
    scenario: Scenario = get_scenario(stored.scenario)
    config = scenario.validate(stored.config)
    print(f"run {stored.run_id}: {stored.scenario}, {stored.status}, {stored.duration_s:.1f} s, "
          f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(stored.created_at))}, code {stored.code_version}")
    print("config: " + json.dumps(stored.config, sort_keys=True))
    if stored.error:
        print(f"error: {stored.error}")
    print(scenario.explain(store.frame(stored.run_id), config).markdown())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m explorer", description="Training Dynamics Explorer")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list scenarios and their settings").set_defaults(func=cmd_list)
    run = commands.add_parser("run", help="run a scenario and write its results")
    run.add_argument("scenario")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config value (repeatable)")
    run.add_argument("--out", help="directory for config.json, metrics.csv, summary.json and the figures")
    run.add_argument("--format", default="html,png", help="figure formats, comma-separated: html, png, svg")
    run.add_argument("--fresh", action="store_true", help="train even if the run store has this config")
    run.add_argument("--no-store", action="store_true", help="neither read nor write the run store")
    run.set_defaults(func=cmd_run)
    show = commands.add_parser("show", help="print a stored run")
    show.add_argument("run_id")
    show.set_defaults(func=cmd_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        bad = [f for f in args.format.split(",") if f not in ("html", "png", "svg")]
        if bad:
            print(f"error: --format {bad[0]!r} is not allowed; choose from html, png, svg", file=sys.stderr)
            return USAGE_ERROR
    try:
        return args.func(args)
    except (ConfigError, KeyError, LookupError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"error: {message}", file=sys.stderr)
        return USAGE_ERROR
