"""Child processes of the harnesses here: `serve` and what it starts."""

import contextlib
import signal
import subprocess

import psutil


def stop_tree(process: subprocess.Popen, wait: float = 60) -> None:
    """SIGTERM to `process` (as a service manager stops it), `wait` seconds for it to end,
    then SIGKILL to it and to every process it had started that is still there."""
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(wait)
    for child in (process, *children):
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            child.kill()
