"""A write that went wrong is retried or dropped, over REST and in the admin, by who may.

The story (tests/test_writeback.py's): Wanda files in SeaMonkey's GitHub. A
repository with issues turned off fails her write with GitHub's words; once
they are on again she retries it, and one issue is made. A write she no
longer wants is dropped and never sent. Nate, on another team, cannot touch
her writes; a read-only token changes nothing.
"""

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from tests.upstream.github import FakeGitHub
from writeback import worker
from writeback.models import Status, UpstreamWrite

from . import test_writeback as story
from .conftest import client_with_token

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]
github, wanda, nate, due_now = story.github, story.wanda, story.nate, story.due_now  # its fixtures, and a helper


def turn_issues(github: FakeGitHub, on: bool) -> None:
    github.repos[github.main]["meta"]["has_issues"] = on


def test_a_failed_write_retried_is_sent_once_and_finds_an_issue_an_earlier_try_made(github, wanda, settings):
    client = client_with_token(wanda)
    turn_issues(github, False)
    failed = story.file(client).json()
    assert failed["status"] == "failed" and failed["error"], failed

    turn_issues(github, True)
    retried = client.post(f"/api/writes/{failed['id']}/retry")

    assert retried.status_code == 200, retried.json()
    assert retried.json()["status"] == "sent" and retried.json()["note"] == "retried by Wanda through rest"
    (issue,) = story.created(github)
    assert retried.json()["upstream_key"] == f"mozilla/seamonkey#{issue['number']}"
    again = client.post(f"/api/writes/{failed['id']}/retry")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"

    # Made upstream, its answer lost, then failed by hand: a retry finds it by its marker.
    settings.SYNC_HTTP_DEADLINE = 1
    github.lose_answers(1, delay=2.5)
    lost = story.file(client, {**story.DRAFT, "title": "Address book forgets a contact's second e-mail"}).json()
    UpstreamWrite.objects.filter(pk=lost["id"]).update(status=Status.FAILED, error="failed by hand")
    settings.SYNC_HTTP_DEADLINE = 30
    found = client.post(f"/api/writes/{lost['id']}/retry").json()
    assert found["status"] == "sent", found
    # POSTs: the one refused (410), the retry's, the lost one's; none for this retry: the marker was found.
    assert len(story.created(github)) == 2 and story.posts(github) == 3


def test_a_dropped_write_is_never_sent_and_a_sent_one_cannot_be_dropped(github, wanda, settings):
    settings.WRITEBACK_WAIT_SECONDS = 0  # left for the worker
    client = client_with_token(wanda)
    pending = story.file(client).json()
    assert pending["status"] == "pending"

    dropped = client.post(f"/api/writes/{pending['id']}/drop")

    assert dropped.status_code == 200 and dropped.json()["status"] == "dropped"
    assert dropped.json()["note"] == "dropped by Wanda through rest"
    due_now()
    assert worker.send_due() == 0 and story.posts(github) == 0

    settings.WRITEBACK_WAIT_SECONDS = 5
    sent = story.file(client, {**story.DRAFT, "title": "Junk filter marks a reply to my own message"}).json()
    assert sent["status"] == "sent"
    refused = client.post(f"/api/writes/{sent['id']}/drop")
    assert refused.status_code == 409 and "upstream's now" in refused.json()["error"]["message"]


def test_only_who_asked_or_staff_who_see_the_product_may_and_a_read_only_token_may_not(github, wanda, nate):
    turn_issues(github, False)
    failed = story.file(client_with_token(wanda)).json()

    other_team = client_with_token(nate).post(f"/api/writes/{failed['id']}/retry")
    read_only = client_with_token(wanda, scope="read").post(f"/api/writes/{failed['id']}/drop")

    assert other_team.status_code == 404 and other_team.json()["error"]["code"] == "not_found"
    assert read_only.status_code == 403
    assert UpstreamWrite.objects.get().status == Status.FAILED


def test_the_audit_trail_keeps_each_change_of_a_write_and_who_made_it_through_what(github, wanda):
    turn_issues(github, False)
    failed = story.file(client_with_token(wanda)).json()
    turn_issues(github, True)
    assert client_with_token(wanda).post(f"/api/writes/{failed['id']}/retry").json()["status"] == "sent"

    events = UpstreamWrite.objects.get(pk=failed["id"]).events.order_by("pgh_id")
    # One context a request (pghistory's), so the events of the retry's POST share its url and user.
    seen = [(e.pgh_label, e.status, e.attempts, e.pgh_context.metadata["url"]) for e in events]
    filed, retry = "/api/bugs/file", f"/api/writes/{failed['id']}/retry"
    assert seen == [
        ("insert", "pending", 0, filed),  # asked for
        ("update", "pending", 1, filed),  # its first send begun, within the POST's wait
        ("update", "failed", 1, filed),  # GitHub's 410
        ("update", "pending", 1, retry),  # retried
        ("update", "pending", 2, retry),  # sent again, the marker asked for first
        ("update", "sent", 2, retry),
    ]
    retried = events[3]
    assert retried.pgh_context.metadata["user"] == wanda.pk and retried.note == "retried by Wanda through rest"
    assert events[2].error == failed["error"] and retried.error == ""  # GitHub's words, kept in the trail


def test_a_curator_s_admin_lists_the_writes_and_retries_or_drops_the_selected(github, wanda, django_user_model):
    turn_issues(github, False)
    first = story.file(client_with_token(wanda)).json()
    second = story.file(client_with_token(wanda), {**story.DRAFT, "title": "Tabs reopen in the wrong window"}).json()
    turn_issues(github, True)
    curator = django_user_model.objects.create_user("ada", password="a-long-passphrase", is_staff=True)
    curator.groups.add(Group.objects.get(name="seamonkey-qa"))
    curator.user_permissions.add(Permission.objects.get(codename="view_upstreamwrite"))
    page = Client()
    page.force_login(curator)

    listing = page.get("/admin/writeback/upstreamwrite/?status__exact=failed").content.decode()
    assert listing.count('class="action-select"') == 2 and "Retry the selected failed writes" in listing

    page.post(
        "/admin/writeback/upstreamwrite/",
        {"action": "retry", "_selected_action": [first["id"]]},
    )
    page.post(
        "/admin/writeback/upstreamwrite/",
        {"action": "drop", "_selected_action": [second["id"]]},
    )

    states = dict(UpstreamWrite.objects.values_list("id", "status"))
    assert states == {first["id"]: Status.SENT, second["id"]: Status.DROPPED}
    assert [issue["title"] for issue in story.created(github)] == [story.DRAFT["title"]]
    assert UpstreamWrite.objects.get(pk=first["id"]).note == "retried by ada through admin"
    retried = UpstreamWrite.objects.get(pk=first["id"]).events.exclude(note="").order_by("pgh_id").first()
    assert retried.pgh_context.metadata["url"] == "/admin/writeback/upstreamwrite/"
    assert retried.pgh_context.metadata["user"] == curator.pk
    trail = page.get(f"/admin/writeback/upstreamwrite/{first['id']}/change/").content.decode()
    assert trail.index(": failed, 1 sends begun.") < trail.index(
        ": pending, 1 sends begun. retried by ada through admin"
    )
