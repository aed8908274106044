"""The command line: `python -m explorer` (or `tdx`) `list | run | show | runs | export | app`.

    python -m explorer run vanishing-gradients --set depth=30 --set activation=relu --out DIR
    python -m explorer run vanishing-gradients --config DIR/config.json --set seed=1
    python -m explorer runs --scenario vanishing-gradients --status finished --json

Bad input (an unknown scenario or key, a value out of range, an `--out` that cannot be
written, a config file that is not one, a run store that cannot be opened) exits with code
2 and one line naming what is wrong and what is allowed — found before torch is imported
and before anything trains. A run that fails exits 1 with its message; Ctrl-C stops a run
after its step, stores it as stopped and exits 130. Progress goes to stderr, results to
stdout (`--json` makes them machine-readable). A closed pipe (`| head`) ends quietly.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading

from explorer import __version__
from explorer.cli.fit import add_fit_command
from explorer.cli.run import (FIGURE_FORMATS, INTERRUPTED, RUN_FAILED, USAGE_ERROR, UsageError, WriteError, cmd_run,
                              parse_sets, scenario_named)
from explorer.plaintext import cut, one_line, terminal_text

__all__ = ["build_parser", "main", "parse_sets"]
# scenarios.base.STATUSES, written out: importing the registry would cost every command ~1 s (a test keeps them equal)
STATUSES = ("finished", "diverged", "stopped", "failed")
LIVE_STATUSES = ("running", "incomplete")  # scenarios.base.LIVE_STATUSES: a watched run going on, or killed
CLOSED_PIPE = 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2), like every other bad input."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, one_line(f"error: {message} (see {self.prog} --help)") + "\n")


class RunHelp(argparse.Action):
    """`run --help`: the usage, then every scenario (and, after a scenario id, its keys)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show this help and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from explorer.cli.output import print_settings
        from scenarios import all_scenarios
        parser.print_help()
        print("\nscenarios:")
        for scenario in all_scenarios():
            print(f"  {scenario.id:26s} {scenario.question}")
        chosen = getattr(namespace, "scenario", None)
        try:
            scenario = scenario_named(chosen) if chosen else None
        except UsageError:
            scenario = None
        print()
        if scenario is not None:
            print_settings(scenario)
        else:
            print(f"A scenario's keys: {parser.prog.rsplit(' ', 1)[0]} list SCENARIO (or run SCENARIO --help).")
        parser.exit()


def cmd_list(args: argparse.Namespace) -> int:
    from explorer.cli.output import print_json, print_settings, scenario_json
    from scenarios import all_scenarios
    if args.scenario:
        scenario = scenario_named(args.scenario)
        if args.json:
            print_json(scenario_json(scenario, with_settings=True))
        else:
            print_settings(scenario)
        return 0
    if args.json:
        print_json([scenario_json(s, with_settings=True) for s in all_scenarios()])
        return 0
    for scenario in all_scenarios():
        print(f"{scenario.id:26s} {scenario.question}")
    print(f"\nA scenario's settings: {args.prog} list SCENARIO", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from explorer.cli.output import explanation_json, print_json, run_json, when
    from explorer.runs.store import RunStore
    store = RunStore(reading=True)
    stored = store.get(args.run_id)
    if stored is None:
        raise UsageError(f"no run {cut(args.run_id)!r} in {store.path} (list them with: {args.prog} runs)")
    scenario = scenario_named(stored.scenario, runnable=False)
    config = scenario.validate(stored.config)
    explanation = scenario.explain(store.frame(stored.run_id), config)
    if args.json:
        print_json({**run_json(stored), "summary": stored.summary, "events": store.events(stored.run_id),
                    "explanation": explanation_json(explanation)})
        return 0
    named = f" ({one_line(stored.name)})" if stored.name else ""
    print(f"run {stored.run_id}{named}: {stored.scenario}, {stored.status}, {stored.duration_s:.1f} s, "
          f"{when(stored.created_at)}, code {stored.code_version}")
    print("config: " + json.dumps(stored.config, sort_keys=True))
    if stored.error:
        print(one_line(f"error: {stored.error}"))
    print(terminal_text(explanation.markdown()))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from explorer.cli.output import print_json, print_runs, run_json
    from explorer.runs.store import RunStore
    store = RunStore(reading=True)
    if store.read_only:
        print(f"the run store {store.path} is read-only here: listed as it is", file=sys.stderr)
    runs = store.list_runs(args.scenario, limit=args.limit, status=args.status)
    if args.json:
        print_json([run_json(stored) for stored in runs])
    elif runs:
        print_runs(runs)
    else:
        print(f"no stored runs match in {store.path}", file=sys.stderr)
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    """Serve the web app (the same as `streamlit run app.py` in a checkout) until Ctrl-C."""
    from explorer.server import streamlit_command
    command = streamlit_command(args.port, args.address, args.allowed_host)
    if args.ray:
        os.environ["EXPLORER_RAY_ADDRESS"] = args.ray  # the server (execv'd below) reads it
    if os.name == "posix":  # become the server: signals, the process id and the exit code are its own
        sys.stdout.flush()
        os.execv(command[0], command)
        return 0  # not reached: execv does not return
    with subprocess.Popen(command) as server:  # elsewhere: wait on it (a Ctrl-C reaches it too)
        try:
            return server.wait()
        except KeyboardInterrupt:
            return server.wait()


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def port_number(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1..65535)")
    return int(text)


def build_parser(prog: str = "python -m explorer") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Training Dynamics Explorer: scenarios that train real PyTorch runs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{list,run,show,runs,export,fit,app}")
    listing = commands.add_parser("list", help="the scenarios; with a scenario id, its settings")
    listing.add_argument("scenario", nargs="?", help="a scenario id: print its keys, defaults and ranges")
    listing.set_defaults(func=cmd_list)
    run = commands.add_parser("run", help="run a scenario and write its results", add_help=False)
    run.add_argument("-h", "--help", action=RunHelp)
    run.add_argument("scenario", help="the scenario id (listed below)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config value (repeatable)")
    run.add_argument("--config", metavar="FILE", help="settings from a JSON file (the config.json that --out "
                                                      "writes); --set overrides them")
    run.add_argument("--out", metavar="DIR", help="folder for config.json, metrics.csv, summary.json and figures")
    run.add_argument("--format", default="html,png", help=f"figure formats, comma-separated: "
                                                          f"{', '.join(FIGURE_FORMATS)} (default html,png)")
    run.add_argument("--plotlyjs", choices=("auto", "embed", "file"), default="auto",
                     help="HTML figures: plotly.js inside each (embed) or once beside them (file); "
                          "auto = file when there is more than one figure")
    run.add_argument("--fresh", action="store_true", help="train even if the run store has this config")
    run.add_argument("--no-store", action="store_true", help="neither read nor write the run store")
    run.add_argument("--ray", metavar="ADDRESS", help="train on a Ray cluster: its address, or 'local' for a private "
                     "Ray on this machine (default: EXPLORER_RAY_ADDRESS; unset: train here)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress and no list of files written on stderr "
                                                               "(errors only)")
    run.set_defaults(func=cmd_run)
    show = commands.add_parser("show", help="print a stored run")
    show.add_argument("run_id")
    show.set_defaults(func=cmd_show)
    runs = commands.add_parser("runs", help="list the stored runs, newest first")
    runs.add_argument("--scenario", help="only this scenario's runs")
    runs.add_argument("--status", choices=(*STATUSES, *LIVE_STATUSES),
                      help="only runs that ended so (running, incomplete: runs watched in your own script)")
    runs.add_argument("--limit", type=positive, default=50, help="at most this many (default 50)")
    runs.set_defaults(func=cmd_runs)
    from explorer.cli.export import add_parser as add_export
    export = add_export(commands)
    for command in (listing, run, show, runs, export):
        command.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    add_fit_command(commands)
    app = commands.add_parser("app", help="serve the web app (localhost only) until Ctrl-C")
    app.add_argument("--port", type=port_number, help="the port to listen on (default 8501, or the next free one)")
    app.add_argument("--address", help="the address to listen on (default localhost)")
    app.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                     help="a Host name to answer besides the local ones (repeatable), e.g. the machine's LAN name")
    app.add_argument("--ray", metavar="ADDRESS", help="runs train on this Ray cluster ('local': a private Ray on this "
                     "machine); sets EXPLORER_RAY_ADDRESS for the server")
    app.set_defaults(func=cmd_app)
    return parser


def program_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m explorer" if name in ("", "__main__.py", "-c") else name


def main(argv: list[str] | None = None) -> int:
    """The exit code: 0 done, 1 the run failed, 2 bad input, 130 Ctrl-C, 141 the reader closed the pipe."""
    prog = program_name()
    try:
        code = _dispatch(prog, argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at exit
        return code
    except KeyboardInterrupt:
        print("\ninterrupted: nothing saved", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the reader left: drop the rest, quietly
        return CLOSED_PIPE
    finally:
        if argv is None and threading.current_thread() is threading.main_thread():
            # The process's own command line, its exit code decided: a Ctrl-C while the interpreter tears
            # down (torch's exit handlers take a moment) would end it by SIGINT (-2) instead of this code.
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _dispatch(prog: str, argv: list[str] | None) -> int:
    try:
        args = build_parser(prog).parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error already printed in one line
        return done.code if isinstance(done.code, int) else USAGE_ERROR
    args.prog = prog
    try:
        return args.func(args)
    except WriteError as error:
        print(one_line(f"error: {error}"), file=sys.stderr)
        return RUN_FAILED
    except Exception as error:
        if not isinstance(error, _usage_errors()):
            raise
        message = error.args[0] if error.args else str(error)
        print(one_line(f"error: {message}"), file=sys.stderr)
        return USAGE_ERROR


def _usage_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad input. ConfigError and StoreError count only once their modules
    are loaded (neither can have been raised before): reporting an argument error imports nothing."""
    kinds: list[type[Exception]] = [UsageError]
    for module, name in (("scenarios.config", "ConfigError"), ("explorer.runs.store", "StoreError")):
        if module in sys.modules:
            kinds.append(getattr(sys.modules[module], name))
    return tuple(kinds)
