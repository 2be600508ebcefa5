"""Syncing GitHub Issues: SeaMonkey's tracker served as GitHub's REST API on loopback
(tests/upstream/github.py).

The story: the QA team points the service at mozilla/seamonkey. The first
sync brings every issue (and none of the pull requests listed among them);
then upstream a maintainer edits an issue, deletes a spam-like one,
transfers a ChatZilla report to ChatZilla's own repository, someone files a
new bug, and a triager closes a report as a duplicate; the next sync asks
only for what changed since the last one and leaves the index in step.
GitHub's refusals (a bad token, an unknown repository, spent rate limits)
and an outage in the middle of a sync are met the way GitHub documents.
"""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backlog.models import Bug, Feature, Product
from connectors.models import RunStatus, Source, SyncedRecord, SyncRun
from search import service
from tests.upstream.github import FakeGitHub, add_crash_reports, parsed, seamonkey

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

LISTING = "/repos/mozilla/seamonkey/issues"


@pytest.fixture
def github(monkeypatch):
    fake = seamonkey().start()
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    yield fake
    fake.stop()


def sync(github: FakeGitHub, *args: str, repo: str = "mozilla/seamonkey") -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("sync", "github", "--repo", repo, "--url", github.url, "--no-progress", *args, stdout=out, stderr=err)
    return out.getvalue()


def listings(github: FakeGitHub, since: int = 0) -> list[dict]:
    """The query of each request for a page of the issue listing, from request `since` on."""
    return [r.query for r in github.requests[since:] if r.path.endswith("/issues")]


def issues(github: FakeGitHub) -> list[dict]:
    """The repository's issues, pull requests left out."""
    return [i for i in github.repos[github.main]["issues"].values() if "pull_request" not in i]


def test_a_first_sync_brings_every_issue_and_no_pull_request(github):
    out = sync(github)

    # 44 issues and the 11 areas their labels name; the 3 pull requests are read and dropped.
    assert out.startswith("github:mozilla/seamonkey: created 55, updated 0, deleted 0, unchanged 0 in ")
    assert Bug.objects.filter(product__key="SEAMONKEY").count() == 44 == len(issues(github))
    product = Product.objects.get(key="SEAMONKEY")
    assert (product.name, product.description) == ("mozilla/seamonkey", "SeaMonkey: the all-in-one internet suite")
    assert not Bug.objects.filter(key__in=["SEAMONKEY-8", "SEAMONKEY-17", "SEAMONKEY-30"]).exists()
    assert SyncRun.objects.get().fetched == 47

    hang = Bug.objects.get(key="SEAMONKEY-1")
    assert hang.title == "Mail window hangs when compacting a 4 GB Inbox on a network drive"
    assert (hang.severity, hang.status, hang.feature.key, hang.feature.name) == (
        "high",
        "fixed",
        "SEAMONKEY.mail",
        "mail",
    )
    # The issue form's HTML comments are gone, and the web form's CRLF is plain newlines.
    assert hang.description == (
        "### Steps to reproduce\n\n"
        "1. Keep the profile's Mail folder on an SMB share\n2. Let Inbox grow past 4 GB\n3. File > Compact Folders\n\n"
        "### Expected behavior\n\nInbox is compacted in the background.\n\n"
        "### Actual behavior\n\n"
        "The 3-pane window stops responding for several minutes; Task Manager shows seamonkey.exe at 100% CPU.\n\n"
        "### SeaMonkey version and platform\n\nSeaMonkey 2.53.18.2, Windows 10 22H2"
    )
    assert hang.created_at == parsed(github.issue(1)["created_at"])
    assert hang.raw_data["labels"] == ["bug", "area: mail", "severity: high"]
    assert hang.raw_data["user"] == "ratty-reporter" and hang.raw_data["state_reason"] == "completed"
    assert "reactions" not in hang.raw_data and "comments_url" not in hang.raw_data

    # state and state_reason, and the labels, as the team triages.
    found = {b.key: (b.status, b.severity, b.feature.name if b.feature else None) for b in Bug.objects.all()}
    assert found["SEAMONKEY-3"] == ("open", "medium", "composer")
    assert found["SEAMONKEY-7"] == ("rejected", "medium", "mail")  # closed as not planned
    assert found["SEAMONKEY-16"] == ("open", "medium", "browser")  # P2
    assert found["SEAMONKEY-27"] == ("open", None, "themes")  # an enhancement: no severity
    assert found["SEAMONKEY-36"] == ("duplicate", "low", "composer")  # closed as a duplicate of nothing named
    assert found["SEAMONKEY-41"] == ("fixed", None, "build")
    assert Bug.objects.get(key="SEAMONKEY-41").description == ""  # a null body
    assert Bug.objects.get(key="SEAMONKEY-36").duplicate_of is None
    assert sorted(Feature.objects.values_list("name", flat=True)) == [
        "address book",
        "browser",
        "build",
        "calendar",
        "chatzilla",
        "composer",
        "devtools",
        "mail",
        "news",
        "preferences",
        "themes",
    ]

    # One listing, all states, oldest change first, and the token as a bearer.
    assert listings(github) == [
        {"per_page": "100", "state": "all", "sort": "updated", "direction": "asc"},
        {"per_page": "100", "state": "all", "sort": "created", "direction": "asc"},
    ]
    assert {r.headers["authorization"] for r in github.requests} == {f"Bearer {github.token}"}
    assert {r.headers["x-github-api-version"] for r in github.requests} == {"2022-11-28"}
    assert not github.paths("/repos/mozilla/seamonkey/issues/")  # no duplicate to look up, nothing gone
    assert Source.objects.get().checkpoint == parsed(github.issue(46)["updated_at"])  # the latest change

    hits = service.call("search", {"query": "compacting Inbox hangs", "mode": "keyword"})["results"]
    assert hits[0]["key"] in ("SEAMONKEY-1", "SEAMONKEY-33")


def test_the_next_sync_asks_only_for_what_changed_and_follows_edits_deletions_and_transfers(github):
    sync(github)
    checkpoint = Source.objects.get().checkpoint
    sent = len(github.requests)

    github.edit(13, title="Message filters stop after the first matching rule when the second one moves")
    github.delete(24)
    moved = github.transfer(4, to="mozilla/chatzilla")
    added = github.add(
        "Mail: the unread count of a virtual folder is wrong after a restart",
        "<!-- Please fill in the template -->\r\nA saved search over three accounts shows 12 unread; it holds none.",
        labels=["bug", "area: mail", "severity: low"],
        user="gmailgreta",
    )
    out = sync(github)

    # #46 (the last change of the first sync) is read again by the overlap, with its area: unchanged.
    assert "created 1, updated 1, deleted 2, unchanged 3" in out
    # From the checkpoint less two minutes, GitHub's own format: only the edited and the new issue came, and #46.
    first, sweep = listings(github, sent)
    assert first == {
        "per_page": "100",
        "state": "all",
        "sort": "updated",
        "direction": "asc",
        "since": (checkpoint - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert first["since"] == "2026-01-20T19:26:00Z" and "since" not in sweep
    assert SyncRun.objects.order_by("-started_at").first().fetched == 3
    assert Bug.objects.get(key="SEAMONKEY-13").title == (
        "Message filters stop after the first matching rule when the second one moves"
    )
    new = Bug.objects.get(key=f"SEAMONKEY-{added['number']}")
    assert added["number"] == 48 and new.description == (
        "A saved search over three accounts shows 12 unread; it holds none."
    )
    # Deleted (410) and transferred (301 to mozilla/chatzilla) are gone from the index, and asked about once each.
    for gone in ("SEAMONKEY-24", "SEAMONKEY-4"):
        with pytest.raises(Bug.DoesNotExist):
            Bug.objects.get(key=gone)
    assert not SyncedRecord.objects.filter(key__in=["SEAMONKEY-24", "SEAMONKEY-4"]).exists()
    assert github.paths("/repos/mozilla/seamonkey/issues/") == [
        "/repos/mozilla/seamonkey/issues/4",
        "/repos/mozilla/seamonkey/issues/24",
    ]
    assert moved["number"] == 1 and moved["repository_url"].endswith("/repos/mozilla/chatzilla")
    assert not Bug.objects.filter(title=moved["title"]).exists()
    assert Bug.objects.count() == 43

    # Nothing new since: what the overlap reads again (#13, #48 and their area) is unchanged.
    out = sync(github)
    assert "created 0, updated 0, deleted 0, unchanged 3" in out
    assert listings(github)[-2]["since"] == "2026-03-01T09:01:00Z" and SyncRun.objects.latest("started_at").fetched == 2


def test_an_issue_closed_as_a_duplicate_links_to_the_one_its_comment_names(github):
    github.comment(33, "Possibly a duplicate of #1? Same NAS setup.", user="ratty-reporter")
    sync(github)
    assert Bug.objects.get(key="SEAMONKEY-33").duplicate_of is None  # a guess in a comment of an open issue

    github.comment(47, "Which version? Does it happen with a new profile too?")
    github.comment(47, "2.53.18.2, and yes, with a new profile as well.", user="nasnancy")
    github.close_as_duplicate(47, 12)
    sync(github)

    duplicate = Bug.objects.get(key="SEAMONKEY-47")
    assert (duplicate.status, duplicate.duplicate_of.key) == ("duplicate", "SEAMONKEY-12")
    assert github.issue(47)["state_reason"] == "duplicate" and github.issue(47)["comments"] == 3
    # Its comments were read, once, and no one else's.
    assert github.paths("/repos/mozilla/seamonkey/issues/") == ["/repos/mozilla/seamonkey/issues/47/comments"]
    assert Bug.objects.get(key="SEAMONKEY-12").duplicates.get() == duplicate


def test_bad_credentials_and_an_unknown_repository_write_nothing(github, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_revoked0000000000000000000000000000")
    with pytest.raises(
        CommandError,
        match=r"GitHub refused the credentials \(401 from .*: Bad credentials\); "
        r"check the token in GITHUB_TOKEN.*nothing was written",
    ):
        sync(github)
    monkeypatch.setenv("GITHUB_TOKEN", github.token)
    with pytest.raises(
        CommandError,
        match=r"GitHub has no project 'mozilla/seamonkey-classic', or the token "
        r"cannot see it \(404 .*: Not Found\); nothing was written",
    ):
        sync(github, repo="mozilla/seamonkey-classic")

    assert not Source.objects.exists() and not Bug.objects.exists() and not Product.objects.exists()
    # The repository, then its issue list (which a token limited to issues could read): both 404.
    assert [r.path for r in github.requests] == [
        "/repos/mozilla/seamonkey",
        "/repos/mozilla/seamonkey-classic",
        "/repos/mozilla/seamonkey-classic/issues",
    ]


def test_a_spent_rate_limit_is_waited_out_until_its_reset(github):
    github.spend_rate_limit(seconds=1)  # another job spent the hour's 5,000 requests

    out = sync(github)

    assert "created 55" in out
    first, retry = [r.at for r in github.requests if r.path == "/repos/mozilla/seamonkey"]
    assert retry - first >= 0.95  # not before x-ratelimit-reset
    assert SyncRun.objects.get().requests == 4  # the check twice, then the listing and the sweep's


def test_a_secondary_rate_limit_is_waited_out_for_its_retry_after(github):
    github.secondary_limit(retry_after=1, after=1)  # the check passes, the listing is too fast

    out = sync(github)

    assert "created 55" in out
    arrivals = [r.at for r in github.requests if r.path == LISTING and r.query["sort"] == "updated"]
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 0.95


def test_a_rate_limit_that_outlasts_the_retries_fails_cleanly_and_keeps_what_was_written(github, settings):
    settings.SYNC_HTTP_MAX_WAIT = 0.5  # each wait is cut to this; the hour is what the tries cannot outlast
    github.spend_rate_limit(seconds=3600)
    with pytest.raises(
        CommandError,
        match=r"GitHub: 127\.0\.0\.1:\d+: rate limit reached \(3 tries\).*sync again "
        "later; nothing was written",
    ) as refused:
        sync(github)
    assert "credentials" not in str(refused.value)  # spent, not refused: the token is fine
    assert not Source.objects.exists()

    github.reset_rate_limit()
    github.spend_rate_limit(seconds=3600, after=1)  # the check passes, the listing meets the limit
    github.edit(5, title="Address book search ignores the Nickname and Display Name fields")
    with pytest.raises(CommandError, match="rate limit reached .*3 tries.*sync again later"):
        sync(github)

    run = SyncRun.objects.get()
    assert run.status == RunStatus.FAILED and run.errors and not Bug.objects.exists()
    assert len(listings(github)) == 3  # the listing, tried three times


@pytest.mark.usefixtures("no_back_off")
def test_a_server_that_dies_mid_sync_loses_nothing_and_the_next_sync_resumes(github):
    crashes = add_crash_reports(github, 200)  # the crash-stats bot's week: three pages of a hundred
    github.die_after(2)  # the check and the first page

    with pytest.raises(CommandError, match="could not be reached.*connection refused"):
        sync(github)

    ordered = sorted(github.repos[github.main]["issues"].values(), key=lambda i: (i["updated_at"], i["number"]))
    first_page = ordered[:100]
    assert Bug.objects.count() == len([i for i in first_page if "pull_request" not in i]) == 97
    source = Source.objects.get()
    assert source.checkpoint == parsed(first_page[-1]["updated_at"])  # never past what was written
    assert first_page[-1] is crashes[52]
    assert SyncRun.objects.get().status == RunStatus.FAILED

    github.revive()
    sent = len(github.requests)
    out = sync(github)

    assert Bug.objects.count() == 244 and f"created {200 - 53}" in out
    # It asked from the checkpoint (less the overlap), then from the last change of each page read.
    resumed = [r.query for r in github.requests[sent:] if r.path == LISTING and r.query["sort"] == "updated"]
    assert [(q["since"], q.get("page")) for q in resumed] == [
        ("2026-03-01T09:51:00Z", None),
        (crashes[149]["updated_at"], None),
    ]
    assert "unchanged 3" in out  # the last three minutes before the checkpoint, read again


def test_an_issue_edited_while_the_listing_is_read_pushes_no_other_out_of_it(github):
    """Paged by page number, the edit would move #2 from page 1 to the end, and page 2
    would start one issue later: the hundred-and-first, never read, and older than
    the checkpoint, so never read by the next sync either."""
    add_crash_reports(github, 200)
    edit_when_page_two_is_asked(github, 2, title="Crash deleting an IMAP folder with subfolders")

    out = sync(github)

    assert Bug.objects.count() == 244 and "created 255" in out
    assert Bug.objects.get(key="SEAMONKEY-2").title == "Crash deleting an IMAP folder with subfolders"


def edit_when_page_two_is_asked(github: FakeGitHub, number: int, **fields) -> None:
    original = github.handle

    def handle(request):
        if request.path == LISTING and request.query.get("sort") == "updated" and "since" in request.query:
            github.handle = original
            github.edit(number, **fields)
        return original(request)

    github.handle = handle


def test_a_bulk_edit_of_more_issues_than_a_page_in_one_second_is_read_by_the_link(github):
    crashes = add_crash_reports(github, 150)
    for crash in crashes:  # a maintainer relabels them all at once
        crash["labels"].append(github.label("area: mail"))
        crash["updated_at"] = "2026-03-01T12:00:00Z"

    out = sync(github)

    mail = [i for i in issues(github) if "area: mail" in {label["name"] for label in i["labels"]}]
    assert Bug.objects.count() == 194 and Bug.objects.filter(feature__name="mail").count() == len(mail) == 150 + 13
    assert "created 205" in out
    repo_id = github.repos[github.main]["meta"]["id"]
    assert [
        (r.path, r.query.get("since"), r.query.get("page")) for r in github.requests if r.query.get("sort") == "updated"
    ] == [
        (LISTING, None, None),
        (LISTING, "2026-03-01T12:00:00Z", None),  # from the last change of page one: all of that second
        (f"/repositories/{repo_id}/issues", "2026-03-01T12:00:00Z", "2"),  # so on by the link
    ]


def test_a_repository_that_cannot_be_read_itself_is_known_by_its_issues(github):
    """A token limited to issues (or a proxy that serves only them): the
    repository's own page is a 404, its issue list is there."""
    from tests.upstream.server import Response

    handle = github.handle

    def no_repository_page(request):
        if request.path == "/repos/mozilla/seamonkey":
            return Response(404, {"message": "Not Found", "status": "404"})
        return handle(request)

    github.handle = no_repository_page
    out = sync(github)

    assert out.startswith("github:mozilla/seamonkey: created")
    assert Product.objects.get(key="SEAMONKEY").name == "mozilla/seamonkey"
    assert Bug.objects.filter(product__key="SEAMONKEY").exists()
