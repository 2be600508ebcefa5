"""Fuzzing the connectors: a hostile upstream, playing Jira Cloud and GitHub.

Hypothesis draws what the upstream answers: issues whose fields hold any
JSON (keys of other products' records, far-off or unreadable times, ids
that are no ids, text with NUL and lone surrogates), and answers around
them (any status, HTML, JSON of the wrong shape, redirects and next links
to another host or back to the same page, Retry-After and rate-limit
headers that are no time). Whatever it draws, a sync:

- ends in a CommandError or a summary, never another exception;
- leaves every record it did not write as it was (Tramline's and
  Ledgerly's, in products of their own, and the products' names);
- sends nothing, and so no credential, to another host;
- ends within its bounds (SYNC_HTTP_DEADLINE, SYNC_RUN_DEADLINE).

The budget is tests/fuzzing.py's FUZZ_EXAMPLES (a fifth of it a vendor,
at least 25).
"""

import io
import json
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import given, settings
from hypothesis import strategies as st

from backlog.imports import import_records
from backlog.models import Bug, Feature, Product, QATest
from tests.conftest import TRAMLINE, VAT_BUG, jsonl
from tests.upstream.github import seamonkey
from tests.upstream.hostile import Sink
from tests.upstream.server import Response

from .fuzzing import EXAMPLES, FUZZ, HOSTILE, JSON_VALUE, SURROGATE, tally
from .test_connector_hostile import LyingJira

pytestmark = pytest.mark.django_db

BUDGET = settings(FUZZ, max_examples=max(EXAMPLES // 5, 25))
SECONDS = 12  # a sync's bound here: SYNC_RUN_DEADLINE (6 s), and one request's deadline past it

# Keys other products' records hold, and keys no record may have.
TAKEN = ["BUG-20", "bug-20", "TEST-3", "FEAT-7", "FEAT-9", "PRD-1", "PRD-2", "HOST-1"]
BAD_KEYS = ["", "-", "HOST-" + "9" * 70, "HOST-1\x00", "HOST-\ud800", "HOST 1", "HOST--1"]
TIMES = st.one_of(HOSTILE, st.sampled_from(["9999-12-31T23:59:59.000-1200", "2999-01-01T00:00:00Z", "yesterday-ish"]))
ANY = st.one_of(JSON_VALUE, SURROGATE, st.sampled_from(TAKEN + BAD_KEYS), TIMES)


@pytest.fixture
def bounded(settings, tramline):
    assert import_records(jsonl(VAT_BUG).splitlines()).written
    settings.SYNC_HTTP_ATTEMPTS = 2
    settings.SYNC_HTTP_MAX_WAIT = 0.2
    settings.SYNC_HTTP_DEADLINE = 2
    settings.SYNC_RUN_DEADLINE = 6
    settings.SYNC_SWEEP_MIN_RECORDS = 0  # a sweep that a lying listing drives is stopped early


@pytest.fixture
def sink():
    fake = Sink().start()
    yield fake
    fake.stop()


def others() -> dict:
    """Every record the syncs must not touch, as it is now."""
    rows = {}
    for model in (Product, Feature, QATest, Bug):
        fields = ["key", "name" if model in (Product, Feature) else "title", "description"]
        fields += [] if model is Product else ["product_id"]
        for row in model.objects.filter(key__in=[record["key"] for record in (*TRAMLINE, VAT_BUG)]):
            rows[(model.__name__, row.key)] = tuple(getattr(row, name) for name in fields)
    return rows


def answers(sink_url: str, self_url: str, page):
    """One answer a hostile upstream may give where a page belongs."""
    links = st.sampled_from([f"{sink_url}/next", f"{self_url}/same", "not a url", f"{self_url}/../../x"])
    headers = st.fixed_dictionaries(
        {},
        optional={
            "Link": links.map(lambda url: f'<{url}>; rel="next"'),
            "Location": links,
            "Retry-After": st.sampled_from(["soon", "-5", "0", "1e9", "Wed, 99 Foo 2026 25:61:00 GMT"]),
            "X-RateLimit-Remaining": st.sampled_from(["0", "-1", "x"]),
            "X-RateLimit-Reset": st.sampled_from(["0", "99999999999999999999", "soon"]),
            "Content-Type": st.sampled_from(["text/html", "application/json"]),
        },
    )
    status = st.sampled_from([200, 200, 200, 301, 302, 400, 401, 403, 404, 410, 429, 500, 503])
    body = st.one_of(page, JSON_VALUE, st.just("<html><body>Sign in</body></html>"), st.just("[" * 3000))
    return st.builds(Response, status, body, headers)


def jira_issue(jira: LyingJira):
    base = jira.shaped(next(iter(jira.issues.values())), ["*navigable"])

    def corrupt(changes):
        issue = json.loads(json.dumps(base))
        for name, value in changes.items():
            if name in ("key", "id"):
                issue[name] = value
            else:
                issue["fields"][name] = value
        return issue

    names = st.sampled_from(["key", "id", "updated", "created", "summary", "issuelinks", "components", "project"])
    return st.dictionaries(names, ANY, max_size=3).map(corrupt)


def github_issue(github):
    base = github.issue(1)

    def corrupt(changes):
        issue = json.loads(json.dumps(base))
        issue.update(changes)
        return issue

    names = st.sampled_from(["number", "title", "body", "labels", "state", "updated_at", "created_at", "comments"])
    return st.dictionaries(names, ANY, max_size=3).map(corrupt)


def run(args: list[str], sink: Sink, surface: str) -> None:
    before = others()
    began = time.monotonic()
    failed = None
    try:
        call_command("sync", *args, "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        failed = str(exc)
    took = time.monotonic() - began
    tally(surface, server_error=False, body=failed or "")  # an exception other than CommandError fails first
    after = others()
    changed = {key: (was, after.get(key)) for key, was in before.items() if was != after.get(key)}
    assert not changed, (failed, changed)
    assert sink.requests == [], [r.headers.get("authorization") for r in sink.requests]
    assert took < SECONDS, (took, failed)
    assert failed is None or ("Traceback" not in failed and "\n" not in failed), failed


@pytest.fixture
def jira(monkeypatch):
    fake = LyingJira(project="HOST", project_name="Host tracker")
    for n in range(3):
        fake.add(f"Host bug number {n}", "It fails.")
    fake.start()
    monkeypatch.setenv("JIRA_EMAIL", fake.email)
    monkeypatch.setenv("JIRA_API_TOKEN", fake.token)
    yield fake
    fake.stop()


@pytest.fixture
def github(monkeypatch):
    fake = seamonkey().start()
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    yield fake
    fake.stop()


@BUDGET
@given(data=st.data())
def test_a_hostile_jira_never_touches_another_products_records_nor_leaks_its_token(bounded, jira, sink, data):
    page = st.lists(jira_issue(jira), max_size=4).flatmap(
        lambda issues: st.fixed_dictionaries(
            {"issues": st.just(issues)},
            optional={"isLast": st.sampled_from([False, True, "yes", None]), "nextPageToken": ANY},
        )
    )
    jira.faults.clear()
    for _ in range(data.draw(st.integers(0, 3), label="faults")):
        answer = data.draw(answers(sink.url, jira.url, page), label="answer")
        jira.fail(answer.status, body=answer.body, headers=answer.headers, times=data.draw(st.integers(1, 3)))
    product = data.draw(st.sampled_from([[], ["--product", "PRD-2"], ["--product", "HOSTC"]]), label="product")
    sweep = data.draw(st.sampled_from([[], ["--no-sweep"], ["--full"]]), label="sweep")
    run(["jira", "--url", jira.url, "--project", "HOST", *product, *sweep], sink, "upstream-jira")


@BUDGET
@given(data=st.data())
def test_a_hostile_github_never_touches_another_products_records_nor_leaks_its_token(bounded, github, sink, data):
    page = st.lists(github_issue(github), max_size=4)
    github.faults.clear()
    for _ in range(data.draw(st.integers(0, 3), label="faults")):
        answer = data.draw(answers(sink.url, github.url, page), label="answer")
        github.fail(answer.status, body=answer.body, headers=answer.headers, times=data.draw(st.integers(1, 3)))
    product = data.draw(st.sampled_from([[], ["--product", "PRD-2"], ["--product", "SEA"]]), label="product")
    run(["github", "--repo", "mozilla/seamonkey", "--url", github.url, *product], sink, "upstream-github")
