"""API tokens: named, scoped, expiring, kept hashed, made and revoked by their owner.

Bob makes a read-only token for an agent and a read-and-write one for a
script on the Tokens page, sees each key once, and revokes one. A revoked
or expired token, and any token of a deactivated user, is refused on REST
and over MCP as a token that never existed, and as fast.
"""

import statistics
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import tokens
from accounts.models import ApiToken, Scope

from .conftest import TRAMLINE, jsonl, seeing_all_products

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(db):
    from backlog.imports import import_records

    assert import_records(jsonl(*TRAMLINE).splitlines()).written
    return seeing_all_products(User.objects.create_user("bob", password="a-long-passphrase", is_staff=True))


def rest(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_bob_makes_his_tokens_on_the_tokens_page_sees_each_key_once_and_revokes_one(client, bob):
    client.force_login(bob)
    made = client.post("/tokens/", {"name": "Claude Desktop", "scope": "read", "expires": "30"}).content.decode()
    key = made.split('<code class="token-key">')[1].split("</code>")[0]
    token = ApiToken.objects.get(user=bob)

    assert key.startswith("qas_") and len(key) == 47 and key not in ApiToken.objects.values_list("digest", flat=True)
    assert token.digest == tokens.digest(key) and token.prefix == key[:10]
    assert (token.scope, token.expires_at.date()) == ("read", (timezone.now() + timedelta(days=30)).date())
    assert rest(key).get("/api/bugs/BUG-12").status_code == 200
    page = client.get("/tokens/").content.decode()
    assert key not in page and token.prefix in page and "Claude Desktop" in page  # shown once only

    client.post("/tokens/", {"revoke": token.pk})
    assert rest(key).get("/api/bugs/BUG-12").status_code == 401
    assert "revoked" in client.get("/tokens/").content.decode()


def test_someone_else_cannot_revoke_bobs_token(client, bob):
    _, key = tokens.issue(bob, "Bob's nightly export", Scope.WRITE)
    mallory = User.objects.create_user("mallory", is_staff=True)
    client.force_login(mallory)
    client.post("/tokens/", {"revoke": ApiToken.objects.get(user=bob).pk})
    assert rest(key).get("/api/bugs/BUG-12").status_code == 200
    assert "nightly export" not in client.get("/tokens/").content.decode()


def test_a_read_only_token_reads_and_cannot_write(bob):
    _, read = tokens.issue(bob, "agent", Scope.READ)
    _, write = tokens.issue(bob, "script", Scope.WRITE)
    bob.user_permissions.add(*Permission.objects.filter(codename__in=["change_bug", "add_bug"]))
    change = {"title": "Renewal fails offline"}

    assert rest(read).get("/api/search", {"query": "renewal"}).status_code == 200
    assert rest(read).post("/api/bugs/check-duplicates", {"title": "Renew fails"}, format="json").status_code == 200
    refused = rest(read).patch("/api/bugs/BUG-12", change, format="json")
    assert refused.status_code == 403 and "this token is read-only" in refused.json()["error"]["message"]
    imported = rest(read).post(
        "/api/import",
        '{"kind": "bug", "key": "BUG-900", "product": "PRD-1", "title": "x"}',
        content_type="application/x-ndjson",
    )
    assert imported.status_code == 403
    decision = {"signature": "0" * 16, "bug": "BUG-12", "decision": "confirmed"}  # steers later triage
    refused = rest(read).post("/api/runs/1/decisions", decision, format="json")
    assert refused.status_code == 403 and "this token is read-only" in refused.json()["error"]["message"]
    assert rest(write).post("/api/runs/1/decisions", decision, format="json").status_code == 404  # no run 1
    assert rest(write).patch("/api/bugs/BUG-12", change, format="json").status_code == 200


def test_expired_revoked_and_deactivated_are_refused_like_a_token_that_never_existed(bob):
    _, expired = tokens.issue(bob, "old", Scope.READ, expires_at=timezone.now() - timedelta(seconds=1))
    revoked_token, revoked = tokens.issue(bob, "gone", Scope.READ)
    tokens.revoke(revoked_token)
    carol = seeing_all_products(User.objects.create_user("carol"))
    _, deprovisioned = tokens.issue(carol, "carol's", Scope.READ)
    carol.is_active = False  # deprovisioned: her tokens' reach ends at once
    carol.save()
    never = "qas_" + "x" * 43

    answers = {key: rest(key).get("/api/bugs/BUG-12") for key in (expired, revoked, deprovisioned, never)}
    assert {a.status_code for a in answers.values()} == {401}
    assert len({a.content for a in answers.values()}) == 1  # the same words for each

    def timed(key: str) -> float:
        started = time.perf_counter()
        assert tokens.check(key) is None
        return time.perf_counter() - started

    for key in (expired, revoked, never):
        timed(key)  # warm
    medians = {
        name: statistics.median(timed(key) for _ in range(60))
        for name, key in (("expired", expired), ("revoked", revoked), ("never", never))
    }
    # One statement whatever the key: within half again of a key that never existed (the noise of a shared machine).
    for name in ("expired", "revoked"):
        assert medians[name] < 1.5 * medians["never"] + 0.0005, medians


def test_last_used_is_kept_at_most_once_a_minute(bob):
    token, key = tokens.issue(bob, "agent", Scope.READ)
    rest(key).get("/api/bugs/BUG-12")
    token.refresh_from_db()
    first = token.last_used_at
    rest(key).get("/api/bugs/BUG-12")
    token.refresh_from_db()
    assert first is not None and token.last_used_at == first
