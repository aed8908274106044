"""Where the run store lives: `EXPLORER_STORE` when it is set, else the platform's user data
folder (platformdirs: ~/.local/share/training-dynamics-explorer on Linux, or under $XDG_DATA_HOME;
~/Library/Application Support/… on macOS; %LOCALAPPDATA%\\… on Windows).

Named runs are the user's data, not a cache: the store used to sit in ~/.cache, which cache
cleaners empty. A store found there, with none yet at the new place, is copied over once (SQLite's
backup: a consistent copy even while an older server still writes to it), and one line says so.
The old file is left as it was, for whoever still has it open.
"""
import os
import sqlite3
import sys
import uuid
from contextlib import closing
from pathlib import Path

import platformdirs

APP = "training-dynamics-explorer"
FILE = "runs.sqlite3"


def old_path() -> Path:
    """Where stores were kept before: ~/.cache/…, whatever XDG_CACHE_HOME said."""
    return Path.home() / ".cache" / APP / FILE


def default_path() -> Path:
    return Path(platformdirs.user_data_dir(APP, appauthor=False)) / FILE


def store_path(explicit: str | Path | None = None) -> Path:
    """The store to open: `explicit`, else EXPLORER_STORE, else the default place (an old store
    copied there first, once)."""
    chosen = explicit or os.environ.get("EXPLORER_STORE")
    if chosen:
        return Path(chosen)
    path = default_path()
    migrate(old_path(), path)
    return path


def migrate(old: Path, new: Path) -> bool:
    """Copy the store at `old` to `new` when only the old one exists; True when it was copied."""
    if new.exists() or not old.is_file():
        return False
    partial = new.with_name(f".{new.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        new.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(f"file:{old}?mode=ro", uri=True)) as source, \
                closing(sqlite3.connect(partial)) as target:
            source.backup(target)
        if new.exists():  # another process copied it meanwhile
            return False
        os.replace(partial, new)
    except (OSError, sqlite3.Error) as error:
        print(f"the run store at {old} could not be copied to {new} ({error}); a new store starts there",
              file=sys.stderr)
        return False
    finally:
        partial.unlink(missing_ok=True)
    print(f"the run store moved to {new} (a data folder; it was copied from {old}, "
          "a cache folder, which may now be deleted)", file=sys.stderr)
    return True
