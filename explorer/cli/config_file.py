"""`--config FILE`: the settings of a run in a JSON file (the `config.json` that `run --out` writes),
read with bounds: a regular file of at most CONFIG_MAX_BYTES, UTF-8, a JSON object."""
import json
import os
import stat
from typing import Any

from explorer.plaintext import cut

CONFIG_MAX_BYTES = 1_000_000  # a config.json is a few hundred bytes; a file past this is not one


class ConfigFileError(ValueError):
    """A `--config` that cannot be a config (the command line says it as a usage error)."""


def config_bytes(text: str) -> bytes:
    """A regular file's bytes, at most CONFIG_MAX_BYTES. Opened without blocking and checked before
    reading: a FIFO would wait for a writer for ever, /dev/zero never ends, a folder has no bytes."""
    try:
        descriptor = os.open(text, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigFileError(f"--config {cut(text)!r} cannot be read: {error.strerror or error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"
            raise ConfigFileError(f"--config {cut(text)!r} is {kind}, not a file; give the config.json that run --out writes")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            data = file.read(CONFIG_MAX_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > CONFIG_MAX_BYTES:
        raise ConfigFileError(f"--config {cut(text)!r} is larger than {CONFIG_MAX_BYTES:,} bytes; a config is a few hundred")
    return data


def read_config_file(text: str) -> dict[str, Any]:
    """The settings in a JSON file: the `config.json` that `run --out` writes (an object)."""
    try:
        data = json.loads(config_bytes(text).decode("utf-8"))
    except OSError as error:
        raise ConfigFileError(f"--config {cut(text)!r} cannot be read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(f"--config {cut(text)!r} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise ConfigFileError(f"--config {cut(text)!r} is not JSON: {error.msg} at line {error.lineno}") from None
    except RecursionError:
        raise ConfigFileError(f"--config {cut(text)!r} is nested too deeply to be a config") from None
    if not isinstance(data, dict):
        raise ConfigFileError(f"--config {cut(text)!r} holds a JSON {type(data).__name__}; a config is an object of "
                         "settings (the config.json that run --out writes)")
    return data
