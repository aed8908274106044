"""`export RUN`: a stored run's records for the tools people already use.

    tdx export RUN --tensorboard DIR   # event files, a run per arm: tensorboard --logdir DIR
    tdx export RUN --parquet FILE      # the long frame (arm, step, metric, value) + scenario, config
    tdx export RUN --csv FILE          # the same as run --out's metrics.csv (`-`: stdout)

Everything is checked before anything is written (the run exists, each target can be written);
a bad target exits 2 in one line.
"""
import argparse
import sys
from pathlib import Path

from explorer.cli.run import UsageError, WriteError, checked_out


def checked_file(option: str, text: str) -> Path:
    """A file to write: its folder must be one (created when missing) and writable."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise UsageError(f"{option} {text!r} is a folder; give a file name")
    checked_out(str(path.parent))
    return path


def cmd_export(args: argparse.Namespace) -> int:
    if not (args.tensorboard or args.parquet or args.csv):
        raise UsageError("export needs at least one of --tensorboard DIR, --parquet FILE, --csv FILE")
    if args.csv == "-" and args.json:
        raise UsageError("--csv - and --json would both write to standard output; give --csv a file")
    tensorboard = checked_out(args.tensorboard) if args.tensorboard else None
    parquet = checked_file("--parquet", args.parquet) if args.parquet else None
    csv = args.csv if args.csv in (None, "-") else str(checked_file("--csv", args.csv))
    from explorer.exports.tools import MissingTool, write_csv, write_parquet, write_tensorboard
    from explorer.runs.store import RunStore
    store = RunStore()
    stored = store.get(args.run_id)
    if stored is None:
        raise UsageError(f"no run {args.run_id!r} in {store.path} (list them with: {args.prog} runs)")
    frame = store.frame(stored.run_id)
    written: list[str] = []
    try:
        if tensorboard:
            written += map(str, write_tensorboard(frame, tensorboard))
        if parquet:
            about = {"scenario": stored.scenario, "run_id": stored.run_id, "status": stored.status,
                     "code_version": stored.code_version, "config": stored.config}
            written.append(str(write_parquet(frame, parquet, about)))
        if csv:
            written.append(write_csv(frame, csv))
    except MissingTool as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise WriteError(f"could not export run {stored.run_id}: {error.strerror or error}") from None
    if args.json:
        from explorer.cli.output import print_json
        print_json({"run_id": stored.run_id, "scenario": stored.scenario, "records": len(frame), "files": written})
    else:
        for path in written:
            if path != "-":
                print(path, file=sys.stderr if csv == "-" else sys.stdout)
    return 0


def add_parser(commands) -> argparse.ArgumentParser:
    export = commands.add_parser("export", help="a stored run's records for TensorBoard, Parquet or CSV")
    export.add_argument("run_id")
    export.add_argument("--tensorboard", metavar="DIR", help="event files, one run per arm (tensorboard --logdir DIR)")
    export.add_argument("--parquet", metavar="FILE", help="the records (arm, step, metric, value) as Parquet")
    export.add_argument("--csv", metavar="FILE", help="the records as CSV, as run --out's metrics.csv (- for stdout)")
    export.set_defaults(func=cmd_export)
    return export
