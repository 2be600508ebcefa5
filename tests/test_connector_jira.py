"""Syncing Jira: Apache Hadoop's bugs (the shared gitbugs-hadoop set) served as a Jira
Cloud site, and as a Data Center one, on loopback (tests/upstream/jira.py).

The story: the QA team points the service at its Jira project HADOOP. The
first sync brings every bug; then upstream someone edits a bug, deletes one,
files one, closes one as a duplicate, and moves one to another project; the
second sync fetches only what changed and leaves the index in step.
"""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from backlog import access
from backlog.models import Bug, Feature, Product
from connectors.models import RunStatus, Source, SyncedRecord, SyncRun
from connectors.text import adf_to_text, wiki_to_text
from search import service
from tests.conftest import client_with_token, seeing_all_products
from tests.upstream.jira import FakeJira

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

TRACE = (
    "Job fails when the input is empty\n\n"
    "java.lang.NegativeArraySizeException: -4096\n"
    "\tat org.apache.hadoop.io.Text.readFields(Text.java:291)\n"
    "\tat org.apache.hadoop.mapred.Task.run(Task.java:88)"
)


def serve(monkeypatch, jira: FakeJira) -> FakeJira:
    jira.start()
    if jira.cloud:
        monkeypatch.setenv("JIRA_EMAIL", jira.email)
    else:
        monkeypatch.delenv("JIRA_EMAIL", raising=False)
    monkeypatch.setenv("JIRA_API_TOKEN", jira.token)
    return jira


@pytest.fixture
def jira(monkeypatch):
    fake = serve(monkeypatch, FakeJira.from_gitbugs(120))
    yield fake
    fake.stop()


def sync(jira: FakeJira, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "sync", "jira", "--url", jira.url, "--project", "HADOOP", "--no-progress", *args, stdout=out, stderr=err
    )
    return out.getvalue(), err.getvalue()


def searched_jql(jira: FakeJira, since: int = 0) -> list[str]:
    return [
        r.query["jql"] for r in jira.requests[since:] if r.path.endswith("/search/jql") or r.path.endswith("/search")
    ]


def test_a_first_sync_brings_every_bug_as_the_tracker_has_it(jira):
    trace = jira.add(
        "NegativeArraySizeException reading an empty Text",
        TRACE,
        priority="Blocker",
        components=["io"],
        category="done",
        resolution="Fixed",
    )

    out, _ = sync(jira)

    assert out.startswith(f"jira:HADOOP@127.0.0.1:{jira.url.rsplit(':', 1)[1]}: created 122, updated 0, deleted 0")
    assert Bug.objects.filter(product__key="HADOOP").count() == 121
    assert Product.objects.get(key="HADOOP").name == "Apache Hadoop"
    bug = Bug.objects.get(key=trace["key"])
    # The stack trace stays one frame a line, as people paste and search it.
    assert (
        "java.lang.NegativeArraySizeException: -4096\n\tat org.apache.hadoop.io.Text.readFields(Text.java:291)\n"
        in bug.description
    )
    assert (bug.severity, bug.status, bug.feature.name, bug.feature.key) == ("critical", "fixed", "io", "HADOOP.io")
    assert bug.created_at == jira.updated(trace)  # the +0530 stamp, the same instant
    assert bug.raw_data["priority"] == {"name": "Blocker", "id": "1"}  # self links and icons trimmed
    assert "avatarUrls" not in bug.raw_data["project"] and "self" not in bug.raw_data["status"]
    # Resolutions and priorities of Apache's own bugs, mapped.
    by_resolution = {b.raw_data["resolution"]["name"]: b.status for b in Bug.objects.exclude(raw_data__resolution=None)}
    assert by_resolution["Duplicate"] == "duplicate" and by_resolution["Fixed"] == "fixed"
    assert by_resolution["Won't Fix"] == "rejected"
    assert not jira.paths("/rest/api/3/search/") == [] and "/rest/api/3/search" not in jira.paths()  # never the 410
    # Found by search like any imported record.
    hits = service.call("search", {"query": "NegativeArraySizeException", "mode": "keyword"})["results"]
    assert hits[0]["key"] == trace["key"]


def test_the_second_sync_fetches_only_what_changed_and_follows_edits_deletions_moves_and_duplicates(jira):
    jira.projects["HDFS"] = {"id": "10020", "key": "HDFS", "name": "HDFS", "description": ""}
    sync(jira)
    source = Source.objects.get()
    first_checkpoint = source.checkpoint
    keys = sorted(Bug.objects.values_list("key", flat=True), key=lambda k: int(k.split("-")[1]))
    edited, deleted, moved, duplicate, original = keys[3], keys[4], keys[5], keys[6], keys[7]
    sent = len(jira.requests)

    jira.edit(edited, summary="Balancer hangs when a datanode is decommissioned")
    jira.delete(deleted)
    jira.move(moved, "HDFS")
    added = jira.add("Checksum error after an upgrade to 3.4", "Reading any file fails after the upgrade.")
    jira.link_duplicate(duplicate, original)
    jira.edit(duplicate, resolution={"name": "Duplicate", "id": "3"})
    out, _ = sync(jira)

    assert "created 1, updated 2, deleted 2" in out
    # Only the changes were fetched: JQL from the checkpoint (less the overlap), in epoch milliseconds.
    first_jql = searched_jql(jira, sent)[1]
    since = int((first_checkpoint - timedelta(minutes=2)).timestamp() * 1000)
    assert first_jql == f"project = HADOOP AND updated >= {since} ORDER BY updated ASC"
    assert SyncRun.objects.order_by("-started_at").first().fetched == 4  # edited, moved, added, duplicate
    assert Bug.objects.get(key=edited).title == "Balancer hangs when a datanode is decommissioned"
    assert not Bug.objects.filter(key__in=[deleted, moved]).exists()
    assert Bug.objects.get(key=added["key"]).title == "Checksum error after an upgrade to 3.4"
    dup = Bug.objects.get(key=duplicate)
    assert (dup.status, dup.duplicate_of.key) == ("duplicate", original)
    assert not SyncedRecord.objects.filter(key__in=[deleted, moved]).exists()
    # Deleted upstream: gone from the API and from search too.
    client = client_with_token(seeing_all_products(Group.objects.create(name="x") and _user("carol")))
    assert client.get(f"/api/bugs/{deleted}").status_code == 404
    assert deleted not in [h["key"] for h in service.call("search", {"query": "hadoop", "limit": 100})["results"]]

    # A third sync with nothing new writes nothing.
    out, _ = sync(jira)
    assert "created 0, updated 0, deleted 0" in out


def _user(name):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(name, password="a-long-passphrase")


def test_times_in_the_accounts_zone_are_read_as_instants(jira):
    """The site's account is in Asia/Kolkata (+05:30): an edit a minute after the
    checkpoint is found, which a zone-less "yyyy/MM/dd HH:mm" in UTC would miss by 5.5 hours."""
    sync(jira)
    checkpoint = Source.objects.get().checkpoint
    latest = max(jira.updated(issue) for issue in jira.issues.values())
    assert checkpoint == latest and latest.utcoffset() == timedelta(hours=5, minutes=30)

    key = next(iter(jira.issues.values()))["key"]
    jira.edit(key, summary="Edited a minute later")
    sync(jira)

    assert Bug.objects.get(key=key).title == "Edited a minute later"


def test_a_duplicate_whose_original_comes_on_a_later_page_is_linked_once_it_arrives(jira):
    jira.page_cap = 10
    keys = [issue["key"] for issue in jira.issues.values()]
    # The duplicate was updated early (first page), its original last.
    jira.link_duplicate(keys[0], keys[-1], touch=False)
    jira.edit(keys[-1], summary="The original report")

    sync(jira)

    assert Bug.objects.get(key=keys[0]).duplicate_of.key == keys[-1]
    assert Source.objects.get().pending_links == {}


def test_a_renamed_duplicate_link_type_is_still_found_by_its_name():
    jira = FakeJira()
    renamed = {"id": "10002", "name": "Duplicate", "inward": "is cloned as", "outward": "repeats"}
    jira.add("Original")
    jira.add("Copy")
    jira.link_duplicate("HADOOP-2", "HADOOP-1", type_=renamed)
    relates = {"id": "10003", "name": "Relates", "inward": "duplicates", "outward": "duplicates"}
    jira.add("Related")
    jira.link_duplicate("HADOOP-3", "HADOOP-1", type_=relates)
    source = Source(kind="jira", url="http://unused", project="HADOOP", token_env="JIRA_API_TOKEN")
    from connectors.sources.jira import Jira

    connector = Jira(source, "bot@example.com", "t")
    mapped = {i["key"]: connector.map(i).duplicate_of for i in jira.issues.values()}
    assert mapped == {"HADOOP-1": None, "HADOOP-2": "HADOOP-1", "HADOOP-3": None}


def test_bad_credentials_and_an_unknown_project_write_nothing(jira, monkeypatch):
    monkeypatch.setenv("JIRA_API_TOKEN", "wrong")
    with pytest.raises(CommandError, match="Jira refused the credentials .*401.*check JIRA_EMAIL and JIRA_API_TOKEN"):
        sync(jira)
    monkeypatch.setenv("JIRA_API_TOKEN", jira.token)
    with pytest.raises(CommandError, match="Jira has no project 'NOPE'.*does not exist.*nothing was written"):
        call_command("sync", "jira", "--url", jira.url, "--project", "NOPE", "--no-progress")
    monkeypatch.delenv("JIRA_API_TOKEN")
    with pytest.raises(CommandError, match="JIRA_API_TOKEN is not set"):
        sync(jira)
    assert not Source.objects.exists() and not Bug.objects.exists() and not Product.objects.exists()


@pytest.mark.usefixtures("no_back_off")
def test_an_unreachable_site_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("JIRA_EMAIL", "bot@example.com")
    monkeypatch.setenv("JIRA_API_TOKEN", "t")
    fake = FakeJira().start()
    url = fake.url
    fake.stop()
    with pytest.raises(CommandError, match="could not be reached.*connection refused.*nothing was written"):
        call_command("sync", "jira", "--url", url, "--project", "HADOOP", "--no-progress")
    assert not Source.objects.exists()


def test_429_is_retried_after_the_wait_the_site_asks_for(jira):
    jira.fail(
        429,
        times=2,
        headers={"Retry-After": "1"},
        path="/rest/api/3/search/jql",
        body={"errorMessages": ["Rate limit exceeded."], "errors": {}},
    )

    out, _ = sync(jira)

    assert "created 120" in out
    arrivals = [r.at for r in jira.requests if r.path == "/rest/api/3/search/jql"][:3]
    assert arrivals[1] - arrivals[0] >= 0.95 and arrivals[2] - arrivals[1] >= 0.95


def test_a_429_storm_fails_cleanly_and_the_next_sync_completes(jira):
    jira.page_cap = 30
    sync(jira, "--no-sweep")  # a first sync, then a storm in the middle of the second one
    for issue in list(jira.issues.values())[:60]:
        jira.edit(issue["key"], summary=issue["fields"]["summary"] + " (edited)")
    storm_after_pages(jira, pages=1)

    with pytest.raises(CommandError, match="rate limit reached .*3 tries.*sync again later"):
        sync(jira)

    run = SyncRun.objects.order_by("-started_at").first()
    assert run.status == RunStatus.FAILED and run.updated == 30  # the page written before the storm is kept
    assert Bug.objects.filter(title__endswith="(edited)").count() == 30
    del jira.handle  # the storm is over
    sync(jira)
    assert Bug.objects.filter(title__endswith="(edited)").count() == 60


def storm_after_pages(jira: FakeJira, pages: int) -> None:
    """429 for every search after the check and `pages` pages, until `del jira.handle`."""
    original = jira.handle
    seen = {"searches": 0}

    def handle(request):
        if request.path.endswith("/search/jql") and request.query.get("fields") != "project":
            seen["searches"] += 1
            if seen["searches"] > pages:
                from tests.upstream.server import Response

                return Response(429, {"errorMessages": ["Rate limit exceeded."]}, {"Retry-After": "0"})
        return original(request)

    jira.handle = handle


@pytest.mark.usefixtures("no_back_off")
def test_a_site_that_dies_mid_sync_loses_nothing_and_the_next_sync_resumes(jira):
    jira.page_cap = 25
    jira.die_after(4)  # the check (2 requests) and two pages of 25

    with pytest.raises(CommandError, match="could not be reached"):
        sync(jira)

    source = Source.objects.get()
    # Two pages: the second asked from the first's last time, which it holds again (read once).
    assert Bug.objects.count() == 49
    written = sorted(jira.issues.values(), key=lambda i: (jira.updated(i), int(i["id"])))[:49]
    assert source.checkpoint == jira.updated(written[-1])  # never past what was written
    jira.revive()
    sent = len(jira.requests)
    out, _ = sync(jira)
    assert Bug.objects.count() == 120 and "created 71" in out
    since = int((source.checkpoint - timedelta(minutes=2)).timestamp() * 1000)
    assert f"updated >= {since} " in searched_jql(jira, sent)[1]


def test_the_teams_of_the_source_see_the_product_and_no_one_else(jira, django_user_model):
    qa = Group.objects.create(name="Hadoop QA")
    member = django_user_model.objects.create_user("dana", password="a-long-passphrase")
    member.groups.add(qa)
    outsider = django_user_model.objects.create_user("erin", password="a-long-passphrase")

    sync(jira, "--team", "Hadoop QA")

    assert list(Product.objects.get(key="HADOOP").teams.all()) == [qa]
    assert access.visible(Bug.objects.all(), member).count() == 120
    assert access.visible(Bug.objects.all(), outsider).count() == 0
    assert service.call("search", {"query": "hadoop"}, user=outsider)["total"] == 0


def test_an_issue_edited_while_the_listing_is_read_takes_no_other_one_with_it(jira):
    """Offsets shift when an issue read on page 1 is edited (it moves to the end):
    the next page is asked from the last time read instead, so none is skipped."""
    jira.page_cap = 20
    handle, served = jira.handle, []

    def edit_after_the_first_page(request):
        response = handle(request)
        if request.path.endswith("/search/jql") and "updated" in request.query.get("fields", ""):
            served.append(request)
            if len(served) == 1:
                first = response.body["issues"][3]["key"]
                jira.edit(first, summary="Edited while the sync read page 1")
        return response

    jira.handle = edit_after_the_first_page
    sync(jira)
    del jira.handle

    assert Bug.objects.count() == 120
    assert Bug.objects.filter(title="Edited while the sync read page 1").count() == 1


def test_issues_all_of_one_instant_are_paged_by_the_sites_own_paging(jira):
    """A bulk edit stamps every issue with one time: asking from the last time
    read would read the same page again, so the listing goes on by nextPageToken."""
    jira.page_cap = 25
    for issue in jira.issues.values():
        issue["fields"]["updated"] = jira.stamp(jira.clock)

    sync(jira)

    assert Bug.objects.count() == 120
    tokens = [r.query.get("nextPageToken") for r in jira.requests if "summary" in r.query.get("fields", "")]
    assert tokens[0] is None and all(tokens[1:]) and len(tokens) == 5


def test_a_site_that_refuses_get_is_searched_by_post(jira):
    jira.get_allowed = False
    sync(jira)
    assert Bug.objects.count() == 120
    assert {r.method for r in jira.requests if r.path == "/rest/api/3/search/jql"} == {"GET", "POST"}


def test_data_center_pages_by_start_at_with_a_personal_access_token(monkeypatch):
    jira = serve(monkeypatch, FakeJira.from_gitbugs(60, cloud=False))
    jira.page_cap = 25
    trace = jira.add("NegativeArraySizeException reading an empty Text", TRACE, components=["io"])
    try:
        sync(jira)
    finally:
        jira.stop()

    assert Bug.objects.count() == 61
    # Each page a search from the last time read (keyset), from its start.
    pages = [r.query for r in jira.requests if r.path == "/rest/api/2/search" and "summary" in r.query["fields"]]
    assert len(pages) == 3 and {page["startAt"] for page in pages} == {"0"}
    assert len({page["jql"] for page in pages}) == 3
    assert all(r.headers["authorization"] == f"Bearer {jira.token}" for r in jira.requests)
    description = Bug.objects.get(key=trace["key"]).description
    assert "{noformat}" not in description and "\tat org.apache.hadoop.mapred.Task.run(Task.java:88)" in description


def test_features_keep_their_key_when_a_component_is_renamed(jira):
    jira.add("Datanode crash", components=["hdfs"])
    sync(jira)
    issue = jira.add("Another datanode crash", components=[])
    issue["fields"]["components"] = [{**jira.by_key("HADOOP-121")["fields"]["components"][0], "name": "HDFS core"}]
    sync(jira)
    assert list(Feature.objects.values_list("key", "name")) == [("HADOOP.hdfs", "HDFS core")]


def test_markup_becomes_plain_text_with_code_kept_line_by_line():
    adf = {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "heading", "attrs": {"level": 3}, "content": [{"type": "text", "text": "Steps"}]},
            {
                "type": "orderedList",
                "content": [
                    {
                        "type": "listItem",
                        "content": [
                            {
                                "type": "paragraph",
                                "content": [
                                    {"type": "text", "text": "Open "},
                                    {"type": "text", "text": "/checkout", "marks": [{"type": "code"}]},
                                ],
                            }
                        ],
                    },
                    {
                        "type": "listItem",
                        "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Pay"}]}],
                    },
                ],
            },
            {
                "type": "paragraph",
                "content": [
                    {"type": "mention", "attrs": {"id": "1", "text": "@Jane"}},
                    {"type": "text", "text": " see "},
                    {
                        "type": "text",
                        "text": "runbook",
                        "marks": [{"type": "link", "attrs": {"href": "https://wiki/x"}}],
                    },
                ],
            },
            {"type": "codeBlock", "content": [{"type": "text", "text": "java.lang.NPE\n\tat a.B.c(B.java:1)"}]},
        ],
    }
    assert adf_to_text(adf) == (
        "Steps\n\n1. Open /checkout\n2. Pay\n\n@Jane see runbook (https://wiki/x)\n\n"
        "java.lang.NPE\n\tat a.B.c(B.java:1)"
    )
    wiki = "h3. Steps\n# Open *checkout*\n# Pay\n{code:java}\njava.lang.NPE\n\tat a.B.c(B.java:1)\n{code}\n[runbook|https://wiki/x]"
    assert (
        wiki_to_text(wiki)
        == "Steps\n- Open checkout\n- Pay\n\njava.lang.NPE\n\tat a.B.c(B.java:1)\n\nrunbook (https://wiki/x)"
    )
