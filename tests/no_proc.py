"""/proc hidden from the project's code, as on macOS or Windows: every read of it fails unless psutil
(which reads each platform's own source) makes it. `hide_proc(monkeypatch)` returns the list of refused
reads, which a test expects empty."""
import builtins
import os
import sys


def from_psutil(frame) -> bool:
    """Whether psutil is on the call stack (it may reach /proc through os.path, io, ...)."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("psutil"):
            return True
        frame = frame.f_back
    return False


def hide_proc(monkeypatch) -> list[str]:
    refused: list[str] = []

    def guarded(original):
        def call(path, *args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if str(path).startswith("/proc") and not from_psutil(sys._getframe(1)):
                refused.append(f"{caller}: {original.__name__}({path!r})")
                raise FileNotFoundError(2, "No such file or directory (hidden by the test)", str(path))
            return original(path, *args, **kwargs)
        return call

    monkeypatch.setattr(builtins, "open", guarded(builtins.open))
    for name in ("listdir", "scandir", "open", "stat"):
        monkeypatch.setattr(os, name, guarded(getattr(os, name)))
    return refused
