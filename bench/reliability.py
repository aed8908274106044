"""Rerun the reliability pass and print its figures: bad input, Stop at the slider maxima, faults.

    python bench/reliability.py [--tries 3000] [--skip stop]

- fuzz: seeded random settings (real keys with values aimed at them, unknown and empty keys,
  10,000-character values) through the API (`validate`), the URL (`parse_query`) and the command
  line (`run --set`, training replaced by a sentinel), and hostile `--config` files; counts
  crashes (anything but a one-line refusal) and the longest message;
- stop: every scenario at its slider maxima (each number at its upper bound, reverted to its default
  where the Config or this machine refuses the combination), started in the warm pool as the page
  does, stopped once its first record arrives (or after 60 s): the seconds from Stop to ended;
- faults: hostile result folders, broken run stores (each must be one line, at once), a worker and
  a rank killed by SIGKILL mid-run (the run must end failed, with the signal named, never finished).

Prints one table per part (paste the figures into README's reliability table, dated). Not a test.
"""
import argparse
import contextlib
import io
import os
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("EXPLORER_STORE", str(Path(tempfile.mkdtemp()) / "reliability.sqlite3"))

from explorer.cli.main import main  # noqa: E402
from explorer.page.url import parse_query  # noqa: E402
from explorer.runs.handle import RunHandle  # noqa: E402
from explorer.runs.pool import WorkerPool  # noqa: E402
from explorer.runs.processes import cpu_seconds, descendants  # noqa: E402
from explorer.runs.store import RunStore, StoreError  # noqa: E402
from scenarios import all_scenarios, get_scenario  # noqa: E402
from scenarios.base import ConfigError, Scenario  # noqa: E402

ODD = ["", " ", "\n", "nan", "-inf", "1e309", "-0.0", "0x10", "١٢", "true", "[1]", "{}", "\x00", "🙂",
       "[x](https://evil.example)", "<b>", "=", "9" * 40, "x" * 10_000]


class WouldTrain(Exception):
    """Raised in place of training: the command line was good."""


def odd_value(spec: dict, rng: random.Random):
    bounds = [spec.get(k) for k in ("ge", "le") if spec.get(k) is not None]
    near = [b + d for b in bounds for d in (-1, 0, 1)] + list(spec.get("choices", []))
    return rng.choice([rng.choice(ODD), rng.choice(near or ODD), rng.uniform(-1e6, 1e6), rng.randint(-10**9, 10**9),
                       None, [1, 2], {"a": 1}, rng.random() < 0.5])


def odd_settings(scenario: Scenario, rng: random.Random) -> dict:
    specs = scenario.field_specs()
    settings = {}
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(list(specs)) if rng.random() < 0.8 else rng.choice(ODD + ["", "config", "colour"])
        settings[key] = odd_value(specs.get(key, {}), rng)
    return settings


def fuzz(tries: int) -> None:
    rng, crashes, longest, counts = random.Random(0), [], 0, {"api": 0, "url": 0, "cli": 0, "config file": 0}
    started = time.perf_counter()
    for i in range(tries):
        scenario = all_scenarios()[i % len(all_scenarios())]
        values = odd_settings(scenario, rng)
        try:  # the API
            scenario.validate(values)
        except ConfigError as error:
            longest = max(longest, len(str(error)))
            if "\n" in str(error):
                crashes.append(("api", values))
        except Exception as error:  # noqa: BLE001 (what this counts)
            crashes.append(("api", f"{type(error).__name__}: {error}"[:200]))
        counts["api"] += 1
        try:  # the URL
            warnings = parse_query(scenario, {str(k): str(v) for k, v in values.items()}).warnings
            longest = max([longest, *map(len, warnings)])
        except Exception as error:  # noqa: BLE001
            crashes.append(("url", f"{type(error).__name__}: {error}"[:200]))
        counts["url"] += 1
        if i % 4 == 0:  # the command line (four times rarer: it parses more)
            argv = ["run", scenario.id, "--no-store"] + [a for k, v in values.items() for a in ("--set", f"{k}={v}")]
            err = io.StringIO()
            try:
                with mock.patch.object(Scenario, "run", side_effect=WouldTrain), contextlib.redirect_stderr(err), \
                        contextlib.redirect_stdout(io.StringIO()):
                    code = main(argv)
                lines = err.getvalue().strip().splitlines()
                if code not in (1, 2) or (code == 2 and len(lines) != 1):
                    crashes.append(("cli", argv[:6], code, lines[-1:]))
                longest = max([longest, *map(len, lines)])
            except BaseException as error:  # noqa: BLE001
                crashes.append(("cli", f"{type(error).__name__}: {error}"[:200]))
            counts["cli"] += 1
    with tempfile.TemporaryDirectory() as folder:
        files = hostile_configs(Path(folder))
        for path in files:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                code = main(["run", "vanishing-gradients", "--config", str(path), "--no-store"])
            if code != 2 or len(err.getvalue().strip().splitlines()) != 1:
                crashes.append(("config file", path.name, code))
            counts["config file"] += 1
    print(f"\nfuzz: {sum(counts.values()):,} bad-input tries ({', '.join(f'{k} {v:,}' for k, v in counts.items())}) "
          f"in {time.perf_counter() - started:.0f} s: {len(crashes)} crashes; longest message {longest} characters")
    for crash in crashes[:10]:
        print("   ", crash)


def hostile_configs(folder: Path) -> list[Path]:
    os.mkfifo(folder / "fifo")
    (folder / "big.json").write_text('{"pad": "' + " " * 2_000_000 + '"}')
    (folder / "nested.json").write_text("[" * 100_000)
    (folder / "binary.json").write_bytes(bytes(range(256)) * 10)
    (folder / "array.json").write_text("[1, 2]")
    (folder / "folder").mkdir()
    os.symlink("/dev/zero", folder / "zero.json")
    return [folder / name for name in ("fifo", "big.json", "nested.json", "binary.json", "array.json", "folder",
                                       "zero.json")] + [Path("/dev/zero"), folder / "missing.json"]


def at_maxima(scenario: Scenario, machine) -> dict:
    """Every number at its upper bound, but those the Config or this machine refuse together."""
    specs = {k: s for k, s in scenario.field_specs().items() if s["kind"] in ("int", "float") and not s["view"]
             and k != "seed"}
    values = {k: s["le"] for k, s in specs.items()}
    for key in list(values):
        try:
            config = scenario.validate(values)
            if scenario.refusal(config, machine) is None:
                return values
        except ConfigError:
            pass
        values.pop(key)
    return values


def stop_at_maxima(wait_s: float) -> None:
    pool = WorkerPool()
    try:
        pool.wait_ready(300)
        machine, rows = pool.machine(wait_s=60), []
        for scenario in all_scenarios():
            values = at_maxima(scenario, machine)
            pool.wait_ready(300)  # a worker the last Stop ended has been replaced and warmed
            started = time.perf_counter()
            handle = RunHandle.start(scenario, scenario.validate(values), None, pool=pool)
            first = False
            while not first and time.perf_counter() - started < wait_s and not handle.join(0):
                first = handle.wait_for_first_record(0.5)  # (returns at once while the run is queued)
                time.sleep(0 if first else 0.05)
            first_s = time.perf_counter() - started
            pressed = time.perf_counter()
            handle.stop(keep=False)
            ended = handle.join(30)
            stop_s = time.perf_counter() - pressed
            rows.append((scenario.id, first_s if first else None, stop_s if ended else None,
                         scenario.estimate(scenario.validate(values)).seconds))
            print(f"    {scenario.id:26s} first record {'%6.1f s' % first_s if first else 'not yet':>9}  "
                  f"stopped in {'%.2f s' % stop_s if ended else 'NOT ENDED'}  (estimated {rows[-1][3] / 60:.1f} min)",
                  flush=True)
        stops = [r[2] for r in rows if r[2] is not None]
        print(f"\nstop: {len(stops)} of {len(rows)} runs at their maxima ended on Stop; slowest {max(stops):.2f} s, "
              f"median {statistics.median(stops):.2f} s")
    finally:
        pool.shutdown()


def faults() -> None:
    results = hostile_folders()
    with tempfile.TemporaryDirectory() as folder:
        for name, make in STORE_FAULTS.items():
            path = Path(folder) / f"{name.replace(' ', '_')}.sqlite3"
            make(path)
            started = time.perf_counter()
            try:
                RunStore(path)
                results.append((f"store {name}", False, "opened"))
            except StoreError as error:
                results.append((f"store {name}", "\n" not in str(error), f"{time.perf_counter() - started:.2f} s"))
    results += killed_mid_run()
    bad = [r for r in results if not r[1]]
    print(f"\nfaults: {len(results) - len(bad)} of {len(results)} handled (one line, or failed with the signal named)")
    for name, ok, detail in results:
        print(f"    {'ok ' if ok else 'BAD'} {name}: {detail}")


def _store(path: Path, change=None) -> None:
    RunStore(path).save("demo", {}, "v1", "finished", _frame(), {})
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if change:
        db.execute(change)
        db.commit()
    db.close()


def _frame():
    import pandas as pd
    return pd.DataFrame({"arm": ["a"] * 20_000, "step": range(20_000), "metric": ["loss"] * 20_000, "value": 0.5})


def _damaged(path: Path) -> None:
    _store(path)
    data = bytearray(path.read_bytes())
    middle = len(data) // 4096 // 2
    data[middle * 4096:(middle + 1) * 4096] = b"\xde\xad" * 2048
    path.write_bytes(bytes(data))


STORE_FAULTS = {"truncated": lambda p: (_store(p), os.truncate(p, 5000)), "foreign": lambda p: p.write_text("hello"),
                "newer schema": lambda p: _store(p, "PRAGMA user_version = 99"),
                "missing column": lambda p: _store(p, "ALTER TABLE runs DROP COLUMN name"), "damaged page": _damaged}


def busiest(pids) -> int:
    """The process that used the most CPU over half a second (a training rank, not a waiting spare)."""
    pids = list(pids)
    before = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(0.5)
    return max(pids, key=lambda pid: cpu_seconds(pid) - before[pid])


def hostile_folders() -> list[tuple[str, bool, str]]:
    """Result folders a shared link could point at: each refused in one line, without a hang."""
    ddp, out = get_scenario("ddp-fsdp-memory"), []
    line = '{"arm": "ddp", "rank": 0, "world_size": 1, "step": 0, "device": "cpu", "metrics": {"%s": %s}}\n'
    with tempfile.TemporaryDirectory() as root:
        cases = {"missing": None, "a file": lambda f: f.write_text("x"), "empty": lambda f: f.mkdir(),
                 "a FIFO rank file": lambda f: (f.mkdir(), os.mkfifo(f / "rank_00.jsonl")),
                 "a symlink rank file": lambda f: (f.mkdir(), os.symlink("/dev/zero", f / "rank_00.jsonl")),
                 "a folder rank file": lambda f: (f.mkdir(), (f / "rank_00.jsonl").mkdir()),
                 "oversize": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_bytes(b" " * (17 * 2**20))),
                 "a long line": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_text("[" * (2**20 + 1))),
                 "not UTF-8": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_bytes(b"\xff\xfe" * 100)),
                 "not JSON": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_text("hello\n")),
                 "negative bytes": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_text(line % ("mem/params", -1e30))),
                 "a NaN byte count": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_text(line % ("peak/x", "NaN"))),
                 "two files, one rank": lambda f: (f.mkdir(), (f / "rank_00.jsonl").write_text(line % ("a", 1)),
                                                  (f / "rank_000.jsonl").write_text(line % ("a", 1)))}
        for name, make in cases.items():
            folder = Path(root) / name.replace(" ", "_")
            if make:
                make(folder)
            started = time.perf_counter()
            try:
                ddp.run({"result_dir": str(folder)})
                out.append((f"result folder: {name}", False, "read"))
            except ConfigError as error:
                seconds = time.perf_counter() - started
                out.append((f"result folder: {name}", "\n" not in str(error) and seconds < 5, f"{seconds:.2f} s"))
    return out


def killed_mid_run() -> list[tuple[str, bool, str]]:
    out = []
    pool = WorkerPool()
    try:
        pool.wait_ready(300)
        for what, scenario_id, values in (("worker", "vanishing-gradients", {"steps": 3000}),
                                          ("rank", "ddp-fsdp-memory", {"device": "cpu", "steps": 20, "layers": 4})):
            scenario = get_scenario(scenario_id)
            handle = RunHandle.start(scenario, scenario.validate(values), RunStore(), pool=pool)
            handle.wait_for_first_record(120)
            victim = pool.pids()[0] if what == "worker" else busiest(pid for w in pool.pids() for pid in descendants(w))
            os.kill(victim, signal.SIGKILL)
            handle.join(60)
            snap = handle.snapshot()
            stored = RunStore().get(snap.run_id) if snap.run_id else None
            ok = snap.status == "failed" and "SIGKILL" in (snap.error or "") and (stored is None or stored.status != "finished")
            out.append((f"{what} killed mid-run", ok, f"{snap.status}: {(snap.error or '')[:120]}"))
    finally:
        pool.shutdown()
    return out


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=3000)
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for a first record before Stop")
    parser.add_argument("--skip", action="append", default=[], choices=("fuzz", "stop", "faults"))
    args = parser.parse_args()
    if "fuzz" not in args.skip:
        fuzz(args.tries)
    if "stop" not in args.skip:
        stop_at_maxima(args.wait)
    if "faults" not in args.skip:
        faults()


if __name__ == "__main__":
    main_()
