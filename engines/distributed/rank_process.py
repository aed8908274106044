"""How a rank process ends: its code, then no interpreter finalization (torch-free, so a spare rank
can use it before it imports torch at a lower priority)."""
import os
import sys


def exit_process(code: int) -> None:
    """End this rank process now, skipping the interpreter's finalization.

    A rank aborted now and then *after* its work ("terminate called without an active exception",
    exit -6, about one run in 20–45 under load): faulthandler showed one thread and no Python frame,
    so C++ objects of torch.distributed were being destroyed with a thread still joinable during
    finalization. By then every record is written and flushed and the process group destroyed;
    os._exit leaves nothing undone but that teardown (the operating system frees the rest)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away, or the stream is closed: nothing to keep
            pass
    os._exit(code)


def run_as_process(entry) -> None:
    """`entry()`'s return code as the exit code; an exception's traceback on stderr and exit 1 (the
    launcher reads its last line), both without the interpreter's finalization."""
    try:
        code = entry()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001 (a rank's failure is reported, whatever it is)
        import traceback
        traceback.print_exc()
        code = 1
    exit_process(code)
