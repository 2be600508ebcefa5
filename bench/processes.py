"""Child processes of the harnesses here: a served instance (`manage.py
serve` and what it starts), a free port, `manage.py` itself, and stopping
a process with everything it started."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(env: dict, *args: str, timeout: float = 900) -> str:
    """`manage.py args` with `env` as its whole environment; its stdout. Raises with its stderr's end on failure."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def get(url: str, path: str, token: str | None = None) -> tuple[int, dict]:
    """GET url + path with the API token: (status, JSON body); status 0 when nothing answered."""
    request = urllib.request.Request(url + path)
    if token:
        request.add_header("Authorization", f"Token {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"{}")
        except ValueError:
            return error.code, {}
    except OSError:
        return 0, {}


@contextlib.contextmanager
def serving(env: dict, *options: str, log: Path | None = None, ready: str = "/healthz"):
    """`manage.py serve` as an operator runs it (gunicorn, the embedding worker,
    the webhook processor, the scheduled syncs) on a free port, with `env` added
    to this process's environment and `options` after the address (by default
    no demo records and no MCP port); stderr to `log`. Yields (url, the admin's
    API token, the process) once `ready` answers 200; stops it and all it
    started at the end."""
    port = free_port()
    defaults = [o for o in ("--demo-records", "--mcp-port") if o not in options]
    command = [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", *options]
    command += [arg for option in defaults for arg in (option, "0")]
    stderr = log.open("w") if log else subprocess.DEVNULL
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    try:
        token = next(line.split()[1] for line in process.stdout if line.strip().startswith("Token:"))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while get(url, ready, token)[0] != 200:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"serve never answered {ready}{f'; {log}' if log else ''}")
            time.sleep(0.2)
        yield url, token, process
    finally:
        stop_tree(process)
        if log:
            stderr.close()
