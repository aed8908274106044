"""`run`: read the config (`--config FILE`, then `--set`), check `--out`, serve or train, write.

Everything that can be wrong with the command line is found before torch is imported and
before training starts: the formats, the `--out` folder (not a file, writable), the config
file, each `--set`, the scenario and its Config, the run store. Ctrl-C stops the run after
its current step through the sink's `stop_requested` (a second Ctrl-C quits at once); the
stopped run is stored as such and the command exits 130.
"""
import argparse
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from explorer.cli.config_file import ConfigFileError, read_config_file
from explorer.plaintext import cut, one_line, terminal_text

USAGE_ERROR, RUN_FAILED, INTERRUPTED = 2, 1, 130
FIGURE_FORMATS = ("html", "png", "svg")


class UsageError(ValueError):
    """A bad command line: one line, exit code 2."""


class WriteError(OSError):
    """The results could not be written after the run: one line, exit code 1."""


class ProgressBar:
    """A sink that draws `[#####-----] 50%` on stderr, in place, on a terminal; elsewhere (a log
    file, a pipe) only the final line, when the run ends; nothing with `quiet`. It asks the run to
    stop once Ctrl-C was pressed."""

    def __init__(self, label: str, stream=None, width: int = 30, quiet: bool = False) -> None:
        self.label, self.stream, self.width, self.quiet = label, stream or sys.stderr, width, quiet
        self.tty = self.stream.isatty()
        self._shown, self._fraction = -1, None
        self.stop = False  # set by the Ctrl-C handler

    def add(self, rows) -> None:
        pass

    def event(self, event) -> None:
        if not self.quiet:
            self.stream.write(f"\n{one_line(event.arm)}: {terminal_text(one_line(event.message))}\n")

    def note(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(f"{terminal_text(one_line(text))}\n")

    def bar(self, fraction: float) -> str:
        filled = int(fraction * self.width)
        return f"{self.label} [{'#' * filled}{'-' * (self.width - filled)}] {int(fraction * 100):3d}%"

    def progress(self, fraction: float) -> None:
        self._fraction = fraction
        percent = int(fraction * 100)
        if self.quiet or not self.tty or percent == self._shown:
            return
        self._shown = percent
        self.stream.write("\r" + self.bar(fraction))
        self.stream.flush()

    def stop_requested(self) -> bool:
        return self.stop

    def close(self) -> None:
        if self.quiet or self._fraction is None:
            return
        self.stream.write("\n" if self.tty else self.bar(self._fraction) + "\n")


class CtrlC:
    """While training: the first Ctrl-C asks the run to stop after this step, a second quits now. Once
    the run has ended (`storing`), a Ctrl-C waits for the store: the command ends by itself in a moment."""

    def __init__(self, bar: ProgressBar) -> None:
        self.bar, self.previous = bar, None
        self.storing = False

    def __enter__(self) -> "CtrlC":
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.storing:
            self.bar.stream.write("\nstoring the run; the command ends in a moment\n")
            return
        if self.bar.stop:
            raise KeyboardInterrupt
        self.bar.stop = True
        self.bar.stream.write("\nstopping after this step (Ctrl-C again to quit without saving)\n")

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def parse_sets(pairs: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes key=value, got {cut(pair)!r}")
        values[key.strip()] = value.strip()
    return values


def check_formats(text: str) -> tuple[str, ...]:
    formats = tuple(part.strip() for part in text.split(","))
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad:
        raise UsageError(f"--format {cut(bad[0])!r} is not allowed; choose from {', '.join(FIGURE_FORMATS)}")
    return formats


def checked_out(text: str | None) -> Path | None:
    """The `--out` folder, refused before training when it cannot be written."""
    if text is None:
        return None
    if not text.strip():
        raise UsageError("--out needs a folder; it was given an empty path")
    out = Path(text).expanduser()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {cut(text)!r} is a file, not a folder")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(f"--out {cut(text)!r} is inside {str(existing)!r}, which is a file")
    try:  # the one honest test of writability (a read-only file system, permissions, quotas)
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise UsageError(f"--out {cut(text)!r} is not writable: {error.strerror or error}") from None
    return out


def scenario_named(scenario_id: str, runnable: bool = True):
    """The registered scenario, or a usage error naming the known ones. `runnable`: one a person picks
    and runs (not `watched`, whose runs come from a person's own script)."""
    from scenarios import all_scenarios, get_scenario
    try:
        scenario = get_scenario(scenario_id)
    except KeyError:
        known = ", ".join(s.id for s in all_scenarios())
        raise UsageError(f"unknown scenario {scenario_id!r}; known: {known}") from None
    if runnable and not scenario.listed:
        raise UsageError(f"{scenario_id!r} runs come from your own training script (from explorer import watch), "
                         f"not from here; list them with: runs --scenario {scenario_id}")
    return scenario


def settings_of(args: argparse.Namespace, scenario_id: str) -> dict[str, Any]:
    """`--config`'s settings, then `--set`'s. A config.json that `--out` wrote names its scenario:
    another scenario's is refused, not half-applied."""
    try:
        values = read_config_file(args.config) if args.config else {}
    except ConfigFileError as error:
        raise UsageError(str(error)) from None
    named = values.pop("scenario", scenario_id)
    if named != scenario_id:
        raise UsageError(f"--config {cut(args.config)!r} holds the settings of {cut(str(named))!r}, not of {scenario_id!r}")
    return {**values, **parse_sets(args.set)}


def say(args: argparse.Namespace, text: str) -> None:
    """A line for the person at the terminal (stderr), unless `--quiet`."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    formats = check_formats(args.format)
    out = checked_out(args.out)
    values = settings_of(args, args.scenario)
    from explorer.runs.backend import ray_address
    from explorer.runs.serving import save_result, stored_result
    from explorer.runs.store import RunStore
    address = ray_address(getattr(args, "ray", None))
    from scenarios.base import ConfigError
    scenario = scenario_named(args.scenario)
    config = scenario.validate(values)
    store = None if args.no_store else RunStore()
    stored = None if store is None else stored_result(store, scenario, config, fresh=args.fresh)
    if stored is not None:
        say(args, f"served from the run store: run {stored.run_id} (use --fresh to train again)")
        frame, summary, run_id, status = store.frame(stored.run_id), stored.summary, stored.run_id, stored.status
    elif address:  # trained on Ray; the records come back here and the handle stores them
        bar = ProgressBar(scenario.id, quiet=args.quiet)
        frame, status, run_id, error = train_on_ray(address, scenario, config, store, bar)
        if status not in ("finished", "diverged", "stopped"):
            print(one_line(f"error: the run failed: {error}"), file=sys.stderr)
            return RUN_FAILED
        summary = {**scenario.summarize(frame, config), "status": status}
        if status == "stopped":
            print(f"stopped by Ctrl-C after {len(frame)} records: " + (f"stored as run {run_id}" if run_id else "not stored"),
                  file=sys.stderr)
            return INTERRUPTED
    else:
        from engines.loop.runtime import configure  # torch loads only now: the arguments are known to be good
        configure()
        bar = ProgressBar(scenario.id, quiet=args.quiet)
        started = time.perf_counter()
        with CtrlC(bar) as ctrl_c:
            try:
                from explorer.runs.points import points_of
                result = scenario.run(config, sink=bar, points=None if args.fresh else points_of(store))
            except Exception as error:  # e.g. a rank of a distributed run raised: its message, not a traceback
                if bar.stop:  # Ctrl-C reached the run's own processes too: it was stopped, not broken
                    raise KeyboardInterrupt from None
                if isinstance(error, ConfigError):  # input refused once the run reads it (a result_dir): exit 2
                    raise
                print(one_line(f"error: the run failed: {type(error).__name__}: {error}"), file=sys.stderr)
                return RUN_FAILED
            finally:
                bar.close()
            ctrl_c.storing = True  # the run has ended: what it did is stored whatever is pressed now
            frame, summary, status = result.frame, result.summary, result.status
            run_id = save_result(store, scenario, config, status, frame, summary, [vars(e) for e in result.events],
                                 time.perf_counter() - started) if store else None
            if status == "stopped":
                where = f"stored as run {run_id}" if run_id else "not stored (--no-store)"
                print(f"stopped by Ctrl-C after {len(frame)} records: {where}" +
                      ("; nothing written to --out" if out else ""), file=sys.stderr)
                return INTERRUPTED
    files = write_outputs(args, out, scenario.id, config.model_dump(mode="json"), frame, summary,
                          scenario.figures(frame, config), formats, run_id) if out else []
    explanation = scenario.explain(frame, config)
    if args.json:
        from explorer.cli.output import explanation_json, print_json
        print_json({"scenario": scenario.id, "status": status, "run_id": run_id, "served_from_store": stored is not None,
                    "backend": "ray" if address and stored is None else "local",
                    "config": config.model_dump(mode="json"), "summary": summary,
                    "explanation": explanation_json(explanation), "files": [str(p) for p in files]})
    else:
        print(f"{scenario.id}: {status}" + (f", run {run_id}" if run_id else ""))
        print(terminal_text(explanation.markdown()))
    return 0


def train_on_ray(address: str, scenario, config, store, bar: ProgressBar):
    """The run on the Ray cluster at `address` (`local`: a private one, started for it): frame, status, run id, error."""
    from explorer.runs.backend import run_through
    from explorer.runs.ray_backend import RayBackend
    backend = RayBackend(address)
    try:
        with CtrlC(bar):
            snap = run_through(backend, scenario, config, store, bar).snapshot()
    finally:
        bar.close()
        backend.shutdown()
    return snap.frame, snap.status, snap.run_id, snap.error


def write_outputs(args: argparse.Namespace, out: Path, scenario_id: str, config: dict, frame, summary: dict,
                  figures: Mapping, formats: tuple[str, ...], run_id: str | None) -> list[Path]:
    from explorer.exports.files import write_run
    try:
        paths = write_run(out, scenario_id, config, frame, summary, figures, formats, args.plotlyjs, run_id)
    except Exception as error:  # a full disk, a folder removed meanwhile, no Chromium for PNG: the run is kept
        reason = error.strerror if isinstance(error, OSError) and error.strerror else f"{type(error).__name__}: {error}"
        kept = f"; the run is stored as run {run_id}" if run_id else ""
        raise WriteError(f"could not write the results to {str(out)!r}: {reason}{kept}") from None
    for path in paths:
        say(args, str(path))
    return paths
