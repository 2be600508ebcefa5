"""The suite as `make test` runs it: in several processes (pytest-xdist), which hand
tests out by id and share one embedded server (tests/conftest.py)."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_test_has_an_id_of_its_own():
    """Two tests of one id are one test to pytest-xdist: it ran one of them and dropped
    the other unreported (37 of test_fuzz's operations, under Schemathesis 4.32 and pytest 9)."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ids = Counter(line for line in collected.stdout.splitlines() if "::" in line)
    assert sum(ids.values()) > 1000
    assert [nodeid for nodeid, count in ids.items() if count > 1] == []
    # --dist loadgroup hands out the tests whose ids end in @citus as one, in order, to one worker.
    layout = [nodeid for nodeid in ids if nodeid.startswith("tests/test_citus_layout.py::")]
    assert len(layout) > 5 and all(nodeid.endswith("@citus") for nodeid in layout), layout
