"""Saved searches: save the search on the page, see on the dashboard what is
new in it since you last looked, have new matches sent to a webhook.

The people: Alice is on the QA staff and sees every product. Carol is staff
on the Tramline team only: Ledgerly (PRD-2) is hidden from her. The webhook
receiver is a real HTTP server on 127.0.0.1 that answers as each test tells it.

The corpus is the staff UI's (tests/test_ui.py). "New" records are imported
without updated_at, so they carry the time of their import.
"""

import hashlib
import hmac
import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from backlog.imports import import_records
from backlog.models import Product
from saved.addresses import WebhookRefused, check_url
from saved.models import SavedSearch

from .conftest import TRAMLINE, JSONHandler, jsonl, seeing_all_products, serving
from .test_ui import MORE


@pytest.fixture
def corpus(db):
    report = import_records(jsonl(*TRAMLINE, *MORE).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def alice(corpus):
    return seeing_all_products(User.objects.create_user("alice", is_staff=True))


@pytest.fixture
def carol(corpus):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol = User.objects.create_user("carol", is_staff=True)
    carol.groups.add(team)
    return carol


def saved_search(owner, name="Renewal bugs", **params) -> SavedSearch:
    saved = SavedSearch.from_params({"query": "renewal", "entities": "bug", **params}, owner=owner, name=name)
    saved.last_seen_at = saved.notified_until = timezone.now()
    saved.save()
    return saved


def new_bugs() -> None:
    """Three bugs written now: a Tramline renewal bug, a Ledgerly renewal bug
    (hidden from Carol), and a Tramline bug that does not match."""
    bugs = [
        ("BUG-100", "PRD-1", "Renewal fails when the card has expired"),
        ("BUG-101", "PRD-2", "Invoice renewal reminder sent twice"),
        ("BUG-102", "PRD-1", "Map tiles load slowly underground"),
    ]
    lines = [{"kind": "bug", "key": key, "product": product, "title": title} for key, product, title in bugs]
    report = import_records(jsonl(*lines).splitlines())
    assert report.created == {"bug": 3}, report.problems


def saved_rows(page: str) -> str:
    return page.split('id="saved-searches"', 1)[1].split("</section>", 1)[0]


# -- saving a search and seeing what is new ---------------------------------------------------------


def test_alice_saves_the_search_on_the_page_with_its_filters(client, alice):
    client.force_login(alice)
    page = client.get("/search/", {"query": "renewal", "entities": "bug", "severity": "high,low"}).content.decode()
    link = "/saved/new?query=renewal&amp;entities=bug&amp;severity=high%2Clow"
    assert f'href="{link}"' in page
    form = client.get(link.replace("&amp;", "&"))
    assert form.status_code == 200 and 'value="renewal"' in form.content.decode()  # the name offered
    response = client.post(link.replace("&amp;", "&"), {"name": "Loud renewal bugs", "webhook_url": ""})
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    saved = SavedSearch.objects.get(owner=alice)
    assert (saved.name, saved.query, saved.mode) == ("Loud renewal bugs", "renewal", "hybrid")
    assert saved.filters == {"entities": ["bug"], "severity": ["high", "low"]}
    dashboard = client.get("/dashboard/").content.decode()
    assert "Loud renewal bugs" in saved_rows(dashboard) and "nothing new" in saved_rows(dashboard)


def test_a_search_the_contract_refuses_cannot_be_saved(client, alice):
    client.force_login(alice)
    response = client.get("/saved/new", {"query": "renewal", "severity": "urgent"})
    assert response.status_code == 400
    assert "This search cannot be saved" in response.content.decode() and "severity" in response.content.decode()
    assert not SavedSearch.objects.exists()


def test_two_saved_searches_of_one_user_need_two_names(client, alice):
    saved_search(alice)
    client.force_login(alice)
    response = client.post("/saved/new?query=renewal", {"name": "Renewal bugs"})
    assert response.status_code == 200 and "You have a saved search with this name already" in response.content.decode()
    assert SavedSearch.objects.count() == 1


def test_the_dashboard_counts_what_is_new_as_its_owner_may_see_it(client, alice, carol):
    hers, all_of_it = saved_search(carol), saved_search(alice)
    new_bugs()
    client.force_login(carol)
    assert "<strong>1 new</strong>" in saved_rows(client.get("/dashboard/").content.decode())  # BUG-100, not BUG-101
    assert hers.new_count() == 1 and all_of_it.new_count() == 2

    # Opening it shows the search and marks it seen.
    response = client.get(f"/saved/{hers.pk}/")
    assert response.status_code == 302 and response["Location"] == "/search/?query=renewal&mode=hybrid&entities=bug"
    assert "nothing new" in saved_rows(client.get("/dashboard/").content.decode())
    assert all_of_it.new_count() == 2  # Alice has not looked


def test_an_update_makes_a_record_new_again_and_filters_still_apply(alice):
    saved = saved_search(alice, severity="high")
    assert saved.new_count() == 0
    import_records(jsonl({**MORE[0], "title": MORE[0]["title"] + " (again)"}).splitlines())
    assert MORE[0]["severity"] == "high" and saved.new_count() == 1
    import_records(jsonl({**MORE[2], "title": MORE[2]["title"] + " (again)"}).splitlines())  # a low one
    assert saved.new_count() == 1


def test_a_user_renames_renews_the_secret_of_and_deletes_only_their_own(client, alice, carol):
    hers = saved_search(carol)
    client.force_login(alice)
    assert client.get(f"/saved/{hers.pk}/edit").status_code == 404
    assert client.post(f"/saved/{hers.pk}/delete").status_code == 404
    assert client.post(f"/saved/{hers.pk}/secret").status_code == 404
    assert client.get(f"/saved/{hers.pk}/").status_code == 404
    client.force_login(carol)
    client.post(f"/saved/{hers.pk}/edit", {"name": "Tramline renewals", "webhook_url": ""})
    hers.refresh_from_db()
    assert hers.name == "Tramline renewals"
    page = client.get(f"/saved/{hers.pk}/edit").content.decode()
    assert hers.webhook_secret in page and "Make a new secret" in page
    old = hers.webhook_secret
    assert client.post(f"/saved/{hers.pk}/secret").status_code == 302
    hers.refresh_from_db()
    assert len(hers.webhook_secret) >= 40 and hers.webhook_secret != old
    assert client.post(f"/saved/{hers.pk}/delete").status_code == 302
    assert not SavedSearch.objects.exists()


# -- webhooks -----------------------------------------------------------------------------------------


class Receiver(JSONHandler):
    """Records each POST (headers and body) and answers with the next status the test gave."""

    def do_POST(self):
        server = self.server
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server.received.append((self.headers, body))  # names ignore case, as HTTP says
        status, delay = server.answers.pop(0) if server.answers else (200, 0)
        time.sleep(delay)
        self.reply(status, b"{}")


@pytest.fixture
def receiver(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.received, server.answers = [], []
    with serving(server, monkeypatch):
        yield server


def url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/hook"


def with_webhook(saved: SavedSearch, server) -> SavedSearch:
    saved.webhook_url = url(server)
    saved.save()
    return saved


QUICK = {
    "SAVED_SEARCH_WEBHOOK_PRIVATE": True,  # the receiver is on 127.0.0.1
    "SAVED_SEARCH_WEBHOOK_BACKOFF": 0.01,
    "SAVED_SEARCH_WEBHOOK_TIMEOUT": 1.0,
}


@override_settings(**QUICK)
def test_new_matches_are_posted_signed_and_only_those_the_owner_may_see(carol, receiver):
    saved = with_webhook(saved_search(carol), receiver)
    call_command("notify_saved_searches")
    assert receiver.received == []  # nothing new yet: nothing sent
    new_bugs()
    call_command("notify_saved_searches")

    ((headers, body),) = receiver.received
    expected = "sha256=" + hmac.new(saved.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-QA-Search-Signature-256"], expected)
    assert headers["Content-Type"] == "application/json"
    assert headers["X-QA-Search-Event"] == "saved_search.new_matches"
    sent = json.loads(body)
    assert [record["key"] for record in sent["records"]] == ["BUG-100"]  # not Ledgerly's BUG-101
    assert sent["total"] == 1 and sent["saved_search"]["name"] == "Renewal bugs"
    assert sent["saved_search"]["entities"] == ["bug"]
    assert set(sent["records"][0]) == {"rank", "key", "kind", "product", "feature", "title", "status", "severity",
                                       "created_at", "updated_at"}  # fmt: skip

    saved.refresh_from_db()
    assert saved.last_delivery_at and saved.failures == 0 and saved.last_error == ""
    call_command("notify_saved_searches")
    assert len(receiver.received) == 1  # sent once


@override_settings(**QUICK)
def test_a_500_is_tried_again_and_the_third_try_delivers(carol, receiver):
    with_webhook(saved_search(carol), receiver)
    new_bugs()
    receiver.answers = [(500, 0), (503, 0)]
    call_command("notify_saved_searches")
    assert len(receiver.received) == 3
    deliveries = {headers["X-QA-Search-Delivery"] for headers, _ in receiver.received}
    assert len(deliveries) == 1 and len({body for _, body in receiver.received}) == 1  # one delivery, retried


@override_settings(**{**QUICK, "SAVED_SEARCH_WEBHOOK_TIMEOUT": 0.3})
def test_a_receiver_that_does_not_answer_in_time_is_tried_again(carol, receiver):
    with_webhook(saved_search(carol), receiver)
    new_bugs()
    receiver.answers = [(200, 1.0)]  # answers after the client gave up
    call_command("notify_saved_searches")
    assert len(receiver.received) == 2
    assert SavedSearch.objects.get().failures == 0


@override_settings(**QUICK)
def test_a_webhook_that_keeps_failing_is_recorded_and_sent_the_same_records_later(client, carol, receiver):
    saved = with_webhook(saved_search(carol), receiver)
    new_bugs()
    receiver.answers = [(500, 0)] * 3
    call_command("notify_saved_searches")
    assert len(receiver.received) == 3  # and no more: bounded
    saved.refresh_from_db()
    assert saved.failures == 1 and "HTTP 500" in saved.last_error and "after 3 attempts" in saved.last_error
    client.force_login(carol)
    assert "failing: " in saved_rows(client.get("/dashboard/").content.decode())

    call_command("notify_saved_searches")  # the receiver is back
    assert len(receiver.received) == 4
    assert [record["key"] for record in json.loads(receiver.received[-1][1])["records"]] == ["BUG-100"]
    saved.refresh_from_db()
    assert saved.failures == 0 and saved.last_error == ""


@override_settings(**QUICK)
def test_a_4xx_is_not_tried_again(carol, receiver):
    saved = with_webhook(saved_search(carol), receiver)
    new_bugs()
    receiver.answers = [(404, 0)]
    call_command("notify_saved_searches")
    assert len(receiver.received) == 1
    saved.refresh_from_db()
    assert "HTTP 404" in saved.last_error and "after 1 attempt)" in saved.last_error


def test_a_webhook_at_a_private_address_is_refused_unless_allowed(client, carol, receiver):
    client.force_login(carol)
    saved = saved_search(carol)
    response = client.post(f"/saved/{saved.pk}/edit", {"name": saved.name, "webhook_url": url(receiver)})
    assert "127.0.0.1, a private or reserved address" in response.content.decode()
    for refused in ("ftp://example.com/hook", "http:///hook", "http://169.254.169.254/latest/meta-data/"):
        with pytest.raises(WebhookRefused):
            check_url(refused)

    # A URL saved while it was allowed is checked again before each send: nothing is sent.
    SavedSearch.objects.filter(pk=saved.pk).update(webhook_url=url(receiver))
    new_bugs()
    call_command("notify_saved_searches")
    assert receiver.received == []
    saved.refresh_from_db()
    assert saved.failures == 1 and "private or reserved address" in saved.last_error


@override_settings(**QUICK)
def test_the_admin_lists_everyones_saved_searches_and_their_webhooks_state(client, carol, receiver):
    saved = with_webhook(saved_search(carol), receiver)
    new_bugs()
    receiver.answers = [(500, 0)] * 3
    call_command("notify_saved_searches")
    client.force_login(User.objects.create_superuser("root", password="a long passphrase"))
    listing = client.get("/admin/saved/savedsearch/").content.decode()
    assert "Renewal bugs" in listing and "carol" in listing
    assert "Saved searches" in listing and "searchs" not in listing  # not Django's "Saved searchs"
    page = client.get(f"/admin/saved/savedsearch/{saved.pk}/change/").content.decode()
    assert "HTTP 500" in page and "after 3 attempts" in page

    # The admin validates as the pages do: a search the contract refuses is not saved.
    form = {"owner": carol.pk, "name": "Bad", "query": "renewal", "mode": "fuzzy", "filters": "{}",
            "created_at_0": "2026-03-01", "created_at_1": "10:00", "last_seen_at_0": "2026-03-01",
            "last_seen_at_1": "10:00", "notified_until_0": "2026-03-01", "notified_until_1": "10:00",
            "webhook_url": "", "webhook_secret": "s"}  # fmt: skip
    response = client.post("/admin/saved/savedsearch/add/", form)
    assert response.status_code == 200 and "mode: input should be" in response.content.decode().lower()
    assert not SavedSearch.objects.filter(name="Bad").exists()


@override_settings(**QUICK)
def test_a_saved_search_another_notifier_is_sending_is_skipped_not_sent_twice(transactional_db, receiver):
    """Two senders at once (two machines' `serve`): the one that finds a saved
    search's row locked leaves it to the one that holds it."""
    report = import_records(jsonl(*TRAMLINE, *MORE).splitlines())
    assert not report.problems
    owner = seeing_all_products(User.objects.create_user("alice", is_staff=True))
    saved = with_webhook(saved_search(owner), receiver)
    new_bugs()
    locked, release = threading.Event(), threading.Event()

    def other_sender():
        with transaction.atomic():
            SavedSearch.objects.select_for_update().get(pk=saved.pk)
            locked.set()
            release.wait(10)
        connection.close()

    other = threading.Thread(target=other_sender)
    other.start()
    try:
        assert locked.wait(10)
        call_command("notify_saved_searches")
        assert receiver.received == []
    finally:
        release.set()
        other.join()
    call_command("notify_saved_searches")
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    "address, carried",
    [
        ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64
        ("2002:7f00:1::", "127.0.0.1"),  # 6to4
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),  # a cloud's metadata service, through NAT64
        ("64:ff9b::a00:1", "10.0.0.1"),
        ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible
        ("::ffff:10.1.2.3", "10.1.2.3"),  # IPv4-mapped
        ("64:ff9b:1::a00:1", "local-use NAT64"),
    ],
)
def test_an_ipv6_address_carrying_an_inside_ipv4_one_is_refused(address, carried):
    with pytest.raises(WebhookRefused, match=rf"is at .*\({'IPv4 ' if '.' in carried else ''}{carried}\)"):
        check_url(f"http://[{address}]/hook")


def test_an_ipv6_address_carrying_a_public_ipv4_one_is_allowed():
    check_url("http://[64:ff9b::5db8:d822]/hook")  # NAT64 of 93.184.216.34


def resolving(monkeypatch, name: str, *answers: str) -> list[str]:
    """`name` resolves to each of `answers` in turn (the last one from then on); the names asked."""
    import socket

    real, asked, left = socket.getaddrinfo, [], list(answers)

    def getaddrinfo(host, port, *args, **kwargs):
        if host != name:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = left.pop(0) if len(left) > 1 else left[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


@override_settings(SAVED_SEARCH_WEBHOOK_BACKOFF=0.01, SAVED_SEARCH_WEBHOOK_TIMEOUT=1.0)
def test_a_host_that_resolves_inside_once_checked_gets_nothing(carol, receiver, monkeypatch):
    """DNS rebinding: public for the check, 127.0.0.1 for the connection."""
    asked = resolving(monkeypatch, "rebind.example", "93.184.216.34", "127.0.0.1")
    saved = saved_search(carol)
    SavedSearch.objects.filter(pk=saved.pk).update(webhook_url=f"http://rebind.example:{receiver.server_address[1]}/h")
    new_bugs()

    call_command("notify_saved_searches")

    assert len(asked) >= 2 and receiver.received == []
    saved.refresh_from_db()
    assert "connection went to 127.0.0.1, a private or reserved address; nothing was sent" in saved.last_error


@override_settings(SAVED_SEARCH_WEBHOOK_BACKOFF=0.01, SAVED_SEARCH_WEBHOOK_TIMEOUT=1.0, SAVED_SEARCH_WEBHOOK_ATTEMPTS=1)
def test_a_webhook_ignores_the_environments_proxy(carol, receiver, monkeypatch):
    """HTTP_PROXY would carry the records to wherever it points, unchecked."""
    resolving(monkeypatch, "hooks.example", "192.0.2.10")  # TEST-NET-1: unroutable, taken as public here
    monkeypatch.setattr("saved.webhooks.refused_address", lambda address: None)
    monkeypatch.setattr("saved.addresses.refused_address", lambda address: None)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{receiver.server_address[1]}")
    saved = saved_search(carol)
    SavedSearch.objects.filter(pk=saved.pk).update(webhook_url="http://hooks.example/hook")
    new_bugs()

    call_command("notify_saved_searches")

    assert receiver.received == []  # the "proxy" was never asked
