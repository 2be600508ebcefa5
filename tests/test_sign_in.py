"""Signing in with the company's identity provider (accounts/oidc.py), against a
loopback OpenID Connect provider that signs real RS256 tokens (tests/upstream/oidc.py).

The story: Nina signs in through the provider; her groups decide her teams
and so the products she sees, anew at each sign-in. Everything the provider
(or someone in the middle) can get wrong is refused with a message and
creates nothing.
"""

import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, User
from django.db import connections, transaction

from accounts import oidc
from accounts.models import Identity
from backlog.models import Product
from tests.upstream.oidc import FakeOIDC

pytestmark = pytest.mark.django_db
CALLBACK = "http://testserver/accounts/oidc/callback"


@pytest.fixture
def idp(settings):
    fake = FakeOIDC().start()
    fake.redirect_uris.add(CALLBACK)
    settings.OIDC_ISSUER = fake.issuer
    settings.OIDC_CLIENT_ID = fake.client_id
    settings.OIDC_CLIENT_SECRET = fake.client_secret
    settings.OIDC_PROVIDER_NAME = "Okta"
    yield fake
    fake.stop()


@pytest.fixture
def teams(db):
    mobile, web = Group.objects.create(name="Mobile"), Group.objects.create(name="Web")
    for key, team in (("TRAMLINE", mobile), ("LEDGERLY", web)):
        Product.objects.create(key=key, name=key.title()).teams.add(team)
    return mobile, web


def to_provider(client, next_: str = "/search/"):
    """The sign-in button's request: a redirect to the provider's authorize endpoint."""
    answer = client.get("/accounts/oidc/login", {"next": next_})
    assert answer.status_code == 302, answer.content[:300]
    return answer["Location"]


def back_from(authorize_url: str) -> str:
    """What the provider sends the browser back to (its callback URL, as a path)."""
    answer = requests.get(authorize_url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["Location"])
    return f"{back.path}?{back.query}"


def sign_in(client, next_: str = "/search/"):
    return client.get(back_from(to_provider(client, next_)))


def test_a_person_signs_in_and_their_groups_decide_their_products(client, idp, teams):
    authorize = to_provider(client, "/dashboard/")
    asked = parse_qs(urlsplit(authorize).query)
    # The authorization code flow with PKCE (S256), state and nonce.
    assert asked["response_type"] == ["code"] and asked["code_challenge_method"] == ["S256"]
    assert len(asked["state"][0]) >= 20 and len(asked["nonce"][0]) >= 32 and asked["redirect_uri"] == [CALLBACK]

    answer = client.get(back_from(authorize))

    assert answer.status_code == 302 and answer["Location"] == "/dashboard/"
    nina = User.objects.get(username="nina")
    assert (nina.email, nina.first_name, nina.is_staff, nina.has_usable_password()) == (
        "nina@example.com",
        "Nina",
        True,
        False,
    )
    assert list(nina.groups.values_list("name", flat=True)) == []  # "qa-mobile" names no team: none
    page = client.get("/search/", {"q": "crash"})
    assert page.status_code == 200


def test_groups_are_mapped_to_teams_and_applied_at_every_sign_in(client, idp, teams, settings):
    settings.OIDC_TEAMS = {"qa-mobile": "Mobile", "qa-web": "Web", "qa-payments": "Payments"}
    sign_in(client)
    nina = User.objects.get(username="nina")
    assert list(nina.groups.values_list("name", flat=True)) == ["Mobile"]

    # Moved from mobile to web (and payments, whose team does not exist here) at the provider.
    idp.person.groups = ["qa-web", "qa-payments", "all-staff"]
    client.logout()
    answer = sign_in(client)

    nina.refresh_from_db()
    assert list(nina.groups.values_list("name", flat=True)) == ["Web"]
    assert not Group.objects.filter(name="Payments").exists()  # nothing is made for an unknown team
    page = client.get(answer["Location"])
    assert "qa-payments name no team here" in page.content.decode()
    assert "all-staff" not in page.content.decode()  # groups the mapping does not name mean nothing here
    assert Identity.objects.get(user=nina).groups == ["all-staff", "qa-payments", "qa-web"]
    assert User.objects.count() == 1


def test_a_session_ends_after_its_time_and_the_next_sign_in_applies_the_groups_then(client, idp, teams, settings):
    settings.OIDC_TEAMS = {"qa-mobile": "Mobile", "qa-web": "Web"}
    sign_in(client)
    assert client.get("/search/").status_code == 200
    settings.OIDC_SESSION_SECONDS = 0
    answer = client.get("/search/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize(
    "what, spoil, said",
    [
        ("a wrong issuer", lambda idp: idp.claims.update(iss="https://evil.example"), "iss"),
        ("a wrong audience", lambda idp: idp.claims.update(aud="another-app"), "claim"),
        ("an expired token", lambda idp: idp.claims.update(exp=1_700_000_000, iat=1_699_999_000), "expired"),
        ("a replayed nonce", lambda idp: idp.claims.update(nonce="the-nonce-of-an-old-sign-in"), "nonce"),
        ("a bad signature", lambda idp: idp.forge(), "signature"),
    ],
)
def test_a_token_that_does_not_verify_is_refused_and_creates_nothing(client, idp, teams, what, spoil, said):
    authorize = to_provider(client)
    spoil(idp)
    answer = client.get(back_from(authorize))

    assert answer.status_code == 400, what
    message = answer.content.decode()
    assert "could not be verified" in message and said in message.lower(), (what, message[-600:])
    assert not User.objects.exists() and not Identity.objects.exists()
    assert "_auth_user_id" not in client.session


def test_a_rotated_key_is_fetched_and_a_state_that_does_not_match_is_refused(client, idp, teams):
    sign_in(client)  # the service now holds key-1
    client.logout()
    idp.rotate()  # the provider signs with key-2, which the JWKS now lists
    answer = sign_in(client)
    assert answer.status_code == 302 and User.objects.count() == 1
    assert [r.path for r in idp.requests].count("/jwks") == 2

    client.logout()
    callback = back_from(to_provider(client))
    forged = callback.replace("state=", "state=x")
    assert client.get(forged).status_code == 400 and "_auth_user_id" not in client.session
    assert client.get(callback).status_code == 302  # the genuine answer still signs in, once
    client.logout()
    replayed = client.get(callback)  # its state and code are spent: a replay is refused
    assert replayed.status_code == 400 and "_auth_user_id" not in client.session


def test_next_never_leaves_the_site(client, idp, teams):
    for wanted in ("https://evil.example/phish", "//evil.example", "/\\evil.example"):
        client.logout()
        answer = sign_in(client, wanted)
        assert answer["Location"] == "/search/", wanted


def test_local_passwords_can_be_turned_off_and_the_admin_sends_to_the_one_sign_in_page(client, idp, settings):
    User.objects.create_user("local", password="a-long-local-password", is_staff=True)
    page = client.get("/accounts/login/").content.decode()
    assert 'id="sso"' in page and "Sign in with Okta" in page and 'name="password"' in page
    client.post("/accounts/login/", {"username": "local", "password": "a-long-local-password"})
    assert "_auth_user_id" in client.session  # a password's session, from before they are turned off

    settings.LOCAL_PASSWORDS = False
    page = client.get("/accounts/login/").content.decode()
    assert "_auth_user_id" not in client.session  # ended at its next request
    assert 'name="password"' not in page
    refused = client.post("/accounts/login/", {"username": "local", "password": "a-long-local-password"})
    assert refused.status_code == 200 and "Password sign-in is off here: sign in with Okta" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    admin = client.get("/admin/login/?next=/admin/backlog/bug/")
    assert admin.status_code == 302 and admin["Location"] == "/accounts/login/?next=%2Fadmin%2Fbacklog%2Fbug%2F"


@pytest.mark.parametrize("other", ["https://login.example.com/", 42])  # another issuer, or none a string names
def test_a_provider_that_names_another_issuer_or_is_down_is_a_clear_message(client, idp, settings, other):
    idp.issuer_override = other
    answer = client.get("/accounts/oidc/login")
    said = answer.content.decode()
    assert answer.status_code == 400 and "names issuer" in said and str(other) in said

    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens
    answer = client.get("/accounts/oidc/login")
    assert answer.status_code == 400 and "did not answer as one" in answer.content.decode()


@pytest.mark.django_db(transaction=True)
def test_two_first_sign_ins_at_once_make_one_person():
    """Two tabs signing in at once for the first time: the second waits for the
    first's transaction and finds the person it made (it was an IntegrityError)."""
    claims = {"iss": "https://login.example.com", "sub": "00u-erin", "preferred_username": "erin"}
    made, release, found = threading.Event(), threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                found["first"] = oidc.sign_in(claims)[0].pk
                made.set()
                release.wait(10)
        finally:
            connections.close_all()

    def second():
        try:
            found["second"] = oidc.sign_in(claims)[0].pk
        except Exception as exc:  # what the test is about: no error
            found["second"] = exc
        finally:
            connections.close_all()

    one = threading.Thread(target=first)
    one.start()
    assert made.wait(10)
    two = threading.Thread(target=second)
    two.start()
    time.sleep(0.5)  # the second is inside sign_in, waiting on the first's transaction
    release.set()
    one.join(10)
    two.join(10)

    assert found["second"] == found["first"], found
    assert list(User.objects.filter(username__startswith="erin").values_list("username", flat=True)) == ["erin"]


@pytest.mark.parametrize("groups", [["all-staff", "qa-payments-eu"], []], ids=["groups-mapped-to-none", "no-groups"])
def test_a_person_whose_groups_map_to_no_team_is_told_at_sign_in_and_on_every_search(
    client, idp, teams, settings, groups
):
    """With a mapping that names none of her groups (or a provider that sends none), Nina
    used to get an empty search and no word of why (docs/access.md promises one)."""
    settings.OIDC_TEAMS = {"qa-mobile": "Mobile", "qa-web": "Web"}
    idp.person.groups = groups

    answer = sign_in(client)
    first = client.get(answer["Location"]).content.decode()
    later = client.get("/search/", {"query": "crash"}).content.decode()

    assert list(User.objects.get(username="nina").groups.all()) == []
    assert "You are signed in, but on no team" in first
    assert ("mapped to a team here (OIDC_TEAMS)" if groups else "sent no groups") in first
    assert 'id="no-team"' in later and "Ask an administrator to put you on a team" in later
