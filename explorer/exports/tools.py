"""A stored run's long-format frame (`arm, step, metric, value`) in the formats other tools read.

- TensorBoard: one run (a folder of event files) per arm, every metric a scalar series tagged
  with its name (`grad_norm/layer_01` groups under `grad_norm`), written through torch's
  `SummaryWriter` (it needs the `tensorboard` package, which the app itself does not).
- Parquet: the frame as it is, with the scenario, run id and config in its metadata (pandas keeps
  `DataFrame.attrs` there), so `pd.read_parquet` gives them back.
- CSV: the same four columns as the `metrics.csv` that `run --out` writes.
"""
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.exports.files import safe_name

COLUMNS = ["arm", "step", "metric", "value"]


class MissingTool(RuntimeError):
    """A format needs a package that is not installed: one line, naming it."""


def arm_folders(arms: list[str]) -> dict[str, str]:
    """Arm -> its run folder's name: file-name safe, and two arms that escape alike never share one."""
    folders: dict[str, str] = {}
    for arm in arms:
        folder, n = safe_name(arm), 2
        while folder in folders.values():
            folder, n = f"{safe_name(arm)}-{n}", n + 1
        folders[arm] = folder
    return folders


def write_tensorboard(frame: pd.DataFrame, out: Path) -> list[Path]:
    """Event files under `out`, a folder per arm; returns the arms' folders."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise MissingTool(f"--tensorboard needs the tensorboard package ({error}): pip install tensorboard") from None
    folders = arm_folders(list(dict.fromkeys(frame["arm"].astype(str))))
    written = []
    for arm, rows in frame.groupby(frame["arm"].astype(str), sort=False):
        path = out / folders[arm]
        with SummaryWriter(log_dir=str(path)) as writer:
            for metric, step, value in zip(rows["metric"].astype(str), rows["step"].astype(int), rows["value"].astype(float)):
                writer.add_scalar(metric, value, int(step))
        written.append(path)
    return written


def write_parquet(frame: pd.DataFrame, path: Path, about: dict[str, Any]) -> Path:
    """The frame as Parquet; `about` (scenario, run id, config) in its metadata."""
    table = frame[COLUMNS].copy()
    table.attrs = dict(about)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, index=False)
    return path


def write_csv(frame: pd.DataFrame, target: str) -> str:
    """The frame as CSV at `target` (`-`: standard output)."""
    if target != "-":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    frame[COLUMNS].to_csv(sys.stdout if target == "-" else target, index=False)
    return target
