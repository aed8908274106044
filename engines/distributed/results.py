"""Reading a torchrun job's results: a folder of rank_NN.jsonl written by `engines.distributed.worker --out`
(the reader beside the writer: the format is the worker's).

The folder's path is a setting that a shared URL can carry, so whatever it names is read
as hostile input. Nothing in it is executed, and the reader is bounded in time and memory:

- only regular files named `rank_NN.jsonl` directly in the folder are read; a FIFO, a
  device, a socket, a folder or any symbolic link under that name is refused (opened with
  O_NOFOLLOW | O_NONBLOCK and checked again on the open descriptor, so a file swapped for
  one of those in between is refused too, and a FIFO cannot block the run);
- at most `MAX_FILES` files, `MAX_FILE_BYTES` per file and `MAX_TOTAL_BYTES` in all, lines
  of at most `MAX_LINE_BYTES`, `MAX_RECORDS` records and `MAX_VALUES` measured values in
  all; files are streamed line by line, never read whole;
- every record is validated (`RankRecord`, strict types: a `step` given as text is refused),
  and the first bad one is named by file and line, without echoing its content.

Non-finite numbers (JSON's NaN and ±Infinity tokens, or an overflowing literal like 1e400)
are never dropped silently. A non-finite *loss* is what a diverged job writes: the record
becomes that arm's divergence, by the shared rule (`engines.loop.records.divergence`), and the
page shows where it diverged. Any other non-finite value is a byte count or a count that
cannot be, and refuses the folder with a message naming the file, the line and the value; so
does a negative one (a shard dimension's −1 aside) or one past 2^60.
Every problem is a one-line `ResultDirError` (a ValueError; the page and the CLI show it as the
setting's error). Torch-free: the page checks a folder before Run.
"""
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator




class ResultDirError(ValueError):
    """A results folder that cannot be read, in one line naming the file and the line."""


def one_line(text: object) -> str:
    return " ".join(str(text).split())


MAX_FILES = 256
MAX_FILE_BYTES = 16 * 2**20
MAX_TOTAL_BYTES = 64 * 2**20
MAX_LINE_BYTES = 2**20
MAX_RECORDS = 20_000
MAX_VALUES = 500_000
NAME = re.compile(r"rank_(\d{2,5})\.jsonl")
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link"}

# Every value a rank writes but its loss is a byte count, a count or a size: never negative (a shard
# dimension is −1 for a replicated parameter), never past an exabyte. A file that says so was not measured.
LEAST = {"shard_dim": -1.0}
MOST = 2.0 ** 60
MetricName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.\-/ ]{1,200}$")]


class RankRecord(BaseModel):
    """One line of a rank's file: a loss, a step's measurements, or the step its arm diverged at."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    arm: Literal["ddp", "fsdp-zero3", "fsdp-zero2", "fsdp-zero3-bf16"]
    rank: int = Field(ge=0, le=99_999)
    world_size: int = Field(ge=1, le=100_000)
    step: int = Field(ge=0, le=1_000_000)
    device: Literal["cpu", "cuda"]
    metrics: dict[MetricName, float] | None = Field(None, min_length=1, max_length=100_000)
    diverged: str | None = Field(None, pattern=r"^diverged at step \d+: [A-Za-z0-9_./ -]{1,200} is (nan|inf|-inf)$")

    @model_validator(mode="after")
    def _one_kind(self) -> "RankRecord":
        if (self.metrics is None) == (self.diverged is None):
            raise ValueError("a record has either metrics or diverged")
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not below world_size {self.world_size}")
        return self


def read_result_dir(folder: str) -> list[RankRecord]:
    """Every record of every rank_NN.jsonl in `folder`, checked; a `ResultDirError` for the first problem."""
    where = f"result_dir={shown(folder)}"
    files = _rank_files(folder, where)
    records: list[RankRecord] = []
    budget = {"bytes": MAX_TOTAL_BYTES, "values": MAX_VALUES}
    for rank, path in files:
        for number, record in _read(path, where, budget, len(records)):
            if record.rank != rank:
                raise ResultDirError(f"{where}: {path.name} line {number}: rank {record.rank} in the file of rank {rank}")
            records.append(record)
    if not records:
        raise ResultDirError(f"{where}: its rank_NN.jsonl files hold no records")
    return records


def _rank_files(folder: str, where: str) -> list[tuple[int, Path]]:
    """(rank, path) of every rank_NN.jsonl directly in the folder, by rank; each a regular file."""
    try:
        path = Path(folder).expanduser()
        with os.scandir(path) as entries:
            found = sorted((int(match.group(1)), entry.name, entry.stat(follow_symlinks=False))
                           for entry in entries if (match := NAME.fullmatch(entry.name)))
    except (OSError, ValueError, RuntimeError) as error:  # no such folder, no permission, a NUL byte, ~nobody
        reason = one_line(getattr(error, "strerror", None) or error)
        raise ResultDirError(f"{where} cannot be read as a folder: {reason}") from None
    if not found:
        raise ResultDirError(f"{where} is not a folder with rank_NN.jsonl files from engines.distributed.worker")
    if len(found) > MAX_FILES:
        raise ResultDirError(f"{where} has {len(found)} rank files; at most {MAX_FILES} are read")
    for (rank, name, status), following in zip(found, found[1:] + [None]):
        _check_regular(status, name, where)
        if following is not None and following[0] == rank:
            raise ResultDirError(f"{where}: {name} and {following[1]} are both rank {rank}'s")
    return [(rank, path / name) for rank, name, _ in found]


def _check_regular(status: os.stat_result, name: str, where: str) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = KINDS.get(stat.S_IFMT(status.st_mode), "not a regular file")
        raise ResultDirError(f"{where}: {name} is {kind}; only regular files are read")
    if status.st_size > MAX_FILE_BYTES:
        raise ResultDirError(f"{where}: {name} has {status.st_size:,} bytes; at most {MAX_FILE_BYTES:,} are read per file")


def _read(path: Path, where: str, budget: dict[str, int], count: int):
    """(line number, record) for each non-blank line of one file, streamed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:  # a symbolic link put there since the folder was listed: ELOOP
        raise ResultDirError(f"{where}: {path.name} cannot be opened: {one_line(error.strerror)}") from None
    with os.fdopen(fd, "rb") as handle:
        _check_regular(os.fstat(handle.fileno()), path.name, where)
        size = 0
        for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            size += len(line)
            at = f"{where}: {path.name} line {number}"
            if len(line) > MAX_LINE_BYTES:
                raise ResultDirError(f"{at} is longer than {MAX_LINE_BYTES:,} bytes")
            if size > MAX_FILE_BYTES:
                raise ResultDirError(f"{where}: {path.name} has more than {MAX_FILE_BYTES:,} bytes; at most that is read")
            budget["bytes"] -= len(line)
            if budget["bytes"] < 0:
                raise ResultDirError(f"{where}: the rank files hold more than {MAX_TOTAL_BYTES:,} bytes; "
                                  "at most that is read")
            if not line.strip():
                continue
            count += 1
            if count > MAX_RECORDS:
                raise ResultDirError(f"{where}: more than {MAX_RECORDS:,} records; at most that many are read")
            record = _parse(line, at)
            budget["values"] -= len(record.metrics or ())
            if budget["values"] < 0:
                raise ResultDirError(f"{where}: more than {MAX_VALUES:,} measured values; at most that many are read")
            yield number, record


def shown(folder: str) -> str:
    """The path as a message may show it: plain path characters only (it may come from a URL)."""
    return re.sub(r"[^A-Za-z0-9_./~ -]", "?", one_line(folder))[:120]


def field_of(loc: tuple) -> str:
    """Where in a record a problem is, named by our schema only (a metric's name is never echoed)."""
    if not loc:
        return "the record"
    if loc[0] == "metrics" and len(loc) > 1:
        return "metrics (a name)" if loc[-1] == "[key]" else "metrics (a value)"
    return str(loc[0]) if loc[0] in RankRecord.model_fields else "the record"


def _parse(line: bytes, at: str) -> RankRecord:
    try:
        data = json.loads(line.decode("utf-8"), parse_constant=float)  # NaN, Infinity, -Infinity: floats, checked below
    except UnicodeDecodeError:
        raise ResultDirError(f"{at} is not UTF-8 text") from None
    except (ValueError, RecursionError) as error:
        raise ResultDirError(f"{at} is not a JSON record: {one_line(getattr(error, 'msg', 'nested too deeply'))}") from None
    try:
        record = RankRecord.model_validate(data)
    except ValidationError as error:
        problem = error.errors(include_input=False, include_url=False)[0]
        words = one_line(problem["msg"]).removeprefix("Value error, ")
        raise ResultDirError(f"{at}: {field_of(problem['loc'])}: {words}") from None
    bad = next(((name, value) for name, value in (record.metrics or {}).items()
                if not math.isfinite(value) and name != "loss"), None)
    if bad is not None:
        raise ResultDirError(f"{at}: {bad[0]} is {bad[1]}; a measurement must be a finite number")
    impossible = next(((name, value) for name, value in (record.metrics or {}).items() if name != "loss"
                       and not LEAST.get(name.rsplit("/", 1)[-1], 0.0) <= value <= MOST), None)
    if impossible is not None:
        raise ResultDirError(f"{at}: {impossible[0]} is {impossible[1]:g}; bytes, counts and sizes are never negative "
                             f"nor past 2^60 (an exabyte), so this was not measured")
    return record
