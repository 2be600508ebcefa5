"""The security headers through Django's test client: every page of the
staff UI, the admin and Swagger UI carries the same Content-Security-Policy
(this site's files only, nothing inline), and their HTML holds nothing that
policy would refuse. tests/test_ui_browser.py loads the same pages in
Chromium and checks that it reports no violation.

The people: Alice is on the QA staff and curates records in the admin. A
visitor is not logged in at all.
"""

import re

import pytest
from django.contrib.auth.models import User

from backlog.models import Bug

POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}

# What a policy without 'unsafe-inline' refuses: a <script> with no src that
# is not inert data (<script type="application/json"> never runs), a <style>
# element, a style="" attribute, an on...="" handler. Only inside tags: a
# record's escaped text may read "&lt;img onerror=...&gt;".
INLINE = re.compile(
    r"<script(?![^>]*\ssrc=)(?![^>]*\stype=\"application/json\")[^>]*>"
    r"|<style[\s>]"
    r"|<[a-z][^>]*\s(?:style|on[a-z]+)="
)

UI_PAGES = ["/search/?query=renewal", "/records/BUG-12/", "/records/FEAT-7/", "/dashboard/"]
ADMIN_PAGES = [
    "/admin/",
    "/admin/backlog/bug/",
    "/admin/backlog/bug/?q=renewal&severity__exact=high",
    "/admin/backlog/bug/add/",
    "/admin/backlog/bug/{bug}/change/",
    "/admin/backlog/feature/{feature}/change/",
    "/admin/backlog/qatest/add/",
]


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password="correct horse battery", is_staff=True, is_superuser=True)


@pytest.fixture
def as_alice(client, alice, tramline):
    client.force_login(alice)
    return client


def admin_path(path: str) -> str:
    bug = Bug.objects.get(key="BUG-12")
    return path.format(bug=bug.pk, feature=bug.feature_id)


def policy(response) -> dict[str, list[str]]:
    directives = (part.split() for part in response["Content-Security-Policy"].split(";") if part.strip())
    return {name: sources for name, *sources in directives}


@pytest.mark.parametrize("path", UI_PAGES + ADMIN_PAGES)
def test_alices_pages_carry_the_policy_and_nothing_inline(as_alice, path):
    response = as_alice.get(admin_path(path))

    assert response.status_code == 200
    assert policy(response) == POLICY
    assert INLINE.findall(response.content.decode()) == []


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/", "/api/docs"])
def test_a_visitors_pages_carry_the_policy_and_nothing_inline(client, db, path):
    response = client.get(path)

    assert response.status_code == 200
    assert policy(response) == POLICY
    assert INLINE.findall(response.content.decode()) == []


def test_swagger_ui_starts_from_a_script_of_this_site(client, db):
    page = client.get("/api/docs").content.decode()

    assert '<script src="/api/docs?script="></script>' in page
    script = client.get("/api/docs?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert 'url: "/api/schema"' in script.content.decode()


def test_the_other_security_headers_are_on(as_alice):
    response = as_alice.get("/search/")

    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_the_inline_pattern_catches_what_the_policy_refuses():
    refused = [
        "<script>alert(1)</script>",
        '<script type="module">go()</script>',
        "<style>p { color: red }</style>",
        '<span style="color:red">',
        '<button type="button" onclick="go()">',
    ]
    allowed = [
        '<script src="/static/ui/ui.js" defer></script>',
        '<script type="application/json" id="data">{}</script>',
        "<p>&lt;img src=x onerror=alert(1)&gt;</p>",
        '<li class="result" data-style="x">',
    ]

    assert [bool(INLINE.search(html)) for html in refused] == [True] * len(refused)
    assert [bool(INLINE.search(html)) for html in allowed] == [False] * len(allowed)
