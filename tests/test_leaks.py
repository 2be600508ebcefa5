"""No surface tells a restricted user anything of a product they cannot see.

Carol is on the Tramline team: she sees and changes Tramline Mobile (PRD-1)
only. Two products are hidden from her: Ledgerly (PRD-2), and Quokka Vault,
whose records are full of marker words ("quokka", "marmalade", keys QV-…)
and of the very words Carol searches for ("renewal", "spinner", "Android"),
so that any leak would show.

Every surface (REST, MCP over a real client session, the staff UI, the
admin, import) is asked the same questions twice: with Quokka Vault as it
is, then after more of its records were added and one was changed. Three
checks, each a count in the closing note:
- no answer to a question that names nothing hidden holds a marker;
- a question naming a hidden record or product gets the answer a key that
  exists nowhere gets (ZZ-…), word for word;
- every answer is the same before and after the hidden product changed:
  no total, facet, score, snippet, correction or count moved.
The one answer that must differ from a free key's is a write that tries to
take a hidden record's key: it is refused as "taken", naming nothing else
(docs/access.md says why a key unique across products cannot do better).
"""

import difflib
import json
import re
import sys
from datetime import UTC, datetime

import anyio
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test import Client as DjangoClient
from django.test import override_settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from accounts.models import ApiToken
from accounts.oidc import sign_in
from backlog.imports import import_records
from backlog.models import Bug, Feature, Product, QATest, key_taken_message
from saved.models import SavedSearch
from search.indexing.vectors import embed_pending

from .conftest import ROOT, TRAMLINE, client_with_token, jsonl
from .test_mcp import server_env

# Every test, even one run alone, gets the test database (the module's data is committed there).
pytestmark = pytest.mark.django_db

OLD = datetime(2000, 1, 1, tzinfo=UTC)
MARKERS = ("quokka", "marmalade", "qv-", "vault", "ledgerly", "prd-2", "feat-9")


def hidden_bug(key: str, title: str, **fields) -> dict:
    return {
        "kind": "bug",
        "key": key,
        "product": "QV-P",
        "feature": "QV-F1",
        "title": title,
        "severity": "high",
        "status": "open",
        "created_at": "2026-02-03T10:00:00+00:00",
        "raw_data": {"actual_result": "The quokka spinner turns forever", "environment": "Pixel 7, Android 14"},
        **fields,
    }


QUOKKA_VAULT = [
    {"kind": "product", "key": "QV-P", "name": "Quokka Vault", "description": "Marmalade renewal for quokka keepers"},
    {"kind": "feature", "key": "QV-F1", "product": "QV-P", "name": "Quokka season pass renewal"},
    {
        "kind": "test",
        "key": "QV-T1",
        "product": "QV-P",
        "feature": "QV-F1",
        "title": "Renew a quokka pass with marmalade",
        "steps": ["Open Passes", "Tap Renew"],
    },
    hidden_bug("QV-1", "Renewal button does nothing on Android 14 (quokka)"),
    hidden_bug("QV-2", "Quokka marmalade renewal spinner", severity="critical"),
]
# What changes behind Carol's back between the two rounds.
MORE_QUOKKA = [
    *(hidden_bug(f"QV-{n}", f"Renewal spinner on Android {n} with marmalade") for n in range(10, 40)),
    hidden_bug("QV-2", "Season pass renewal button does nothing", severity="low", status="fixed"),
]


# -- the questions ------------------------------------------------------------------------
# (name, method, path, params or body): `clean` ones name nothing hidden;
# `named` ones name a hidden thing, each with the same question about ZZ-….

SEARCHES = [
    # Facets and the index's counts too (an agent's concise search leaves them out unless asked).
    {"query": query, "mode": mode, "include_scores": "true", "include_facets": "true", "include_index": "true"}
    for query in ("renewal", "renewal button android", "spinner", "season pass", "renew", "quoka", "BUG")
    for mode in ("keyword", "semantic", "hybrid")
] + [
    {"query": "renewal", "sort": "recent"},
    {"query": "renewal", "entities": "bug", "severity": "high,critical", "status": "open"},
    {"query": "android spinner", "match_mode": "all", "detail": "full"},
    # Fields in the query, and fields alone (a listing, counted and faceted over what Carol sees).
    {"query": "renewal severity:high,critical kind:bug -status:fixed", "detail": "full"},
    {"query": "kind:bug status:open"},
    {"query": "severity:critical,high updated:>=2016-01-01", "sort": "recent"},  # no age: the minute moves
]
REST_CLEAN = [
    *(("GET", "/api/search", params) for params in SEARCHES),
    ("GET", "/api/similar/BUG-12", {"include_scores": "true"}),
    ("GET", "/api/similar/BUG-12", {"mode": "keyword"}),
    ("GET", "/api/timeline/BUG-12", {}),
    ("GET", "/api/records", {"keys": "BUG-12,FEAT-7,PRD-1,TEST-3"}),
    ("GET", "/api/products", {}),
    ("GET", "/api/features", {}),
    ("GET", "/api/tests", {}),
    ("GET", "/api/bugs", {}),
    ("GET", "/api/bugs", {"severity": "critical", "ordering": "-updated_at"}),
    ("GET", "/api/bugs/BUG-12", {}),
    ("GET", "/api/products/PRD-1", {}),
    # Exports (search.operations.export): the same searches as files.
    ("GET", "/api/search", {"query": "renewal", "format": "csv"}),
    ("GET", "/api/search", {"query": "spinner android", "mode": "keyword", "format": "jsonl"}),
    # A draft's likely duplicates (search.operations.duplicates): candidates, shared words, similarity, confidence.
    ("POST", "/api/bugs/check-duplicates", {"title": "Renewal button does nothing", "include_scores": True}),
    ("POST", "/api/bugs/check-duplicates", {"title": "Spinner on Android", "description": "renewal quoka"}),
]
REST_NAMED = [
    ("GET", "/api/search", {"query": "QV-1", "mode": "keyword"}),
    ("GET", "/api/search", {"query": "quokka", "mode": "keyword"}),
    ("GET", "/api/search", {"query": "renewal", "products": "QV-P"}),
    ("GET", "/api/search", {"query": "renewal", "feature": "QV-F1"}),
    ("GET", "/api/search", {"query": "renewal product:QV-P"}),
    ("GET", "/api/search", {"query": "product:qv-p kind:bug"}),
    ("GET", "/api/search", {"query": 'renewal -product:"quokka vault"'}),
    ("GET", "/api/search", {"query": "renewal feature:QV-F1"}),
    ("GET", "/api/search", {"query": "renewal", "products": "QV-P", "format": "csv"}),
    ("GET", "/api/search", {"query": "quokka", "mode": "keyword", "format": "jsonl"}),
    ("GET", "/api/similar/QV-1", {}),
    ("POST", "/api/bugs/check-duplicates", {"title": "renewal", "product": "QV-P"}),
    ("GET", "/api/timeline/QV-1", {}),
    ("GET", "/api/records", {"keys": "QV-1,BUG-12,QV-T1"}),
    ("GET", "/api/bugs/QV-1", {}),
    ("GET", "/api/products/QV-P", {}),
    ("GET", "/api/features/QV-F1", {}),
    ("GET", "/api/tests/QV-T1", {}),
    ("GET", "/api/features", {"products": "QV-P"}),
    ("GET", "/api/bugs", {"feature": "QV-F1"}),
    ("POST", "/api/bugs", {"key": "BUG-77", "product": "QV-P", "title": "Sneaked in"}),
    ("POST", "/api/bugs", {"key": "BUG-77", "product": "PRD-1", "feature": "QV-F1", "title": "Sneaked in"}),
    ("POST", "/api/features", {"key": "FEAT-77", "product": "QV-P", "name": "Sneaked in"}),
    ("PATCH", "/api/bugs/BUG-12", {"test": "QV-T1"}),
    ("PATCH", "/api/features/FEAT-7", {"product": "QV-P"}),
    ("PATCH", "/api/bugs/QV-1", {"title": "Mine now"}),
    ("DELETE", "/api/bugs/QV-1", None),
    ("DELETE", "/api/products/QV-P", None),
]
IMPORTS_NAMED = [
    [{"kind": "bug", "key": "BUG-78", "product": "QV-P", "title": "Sneaked in"}],
    [{"kind": "bug", "key": "BUG-78", "product": "PRD-1", "feature": "QV-F1", "title": "Sneaked in"}],
    [{"kind": "product", "key": "QV-P", "name": "Taken over"}],
    [{"kind": "feature", "key": "FEAT-78", "product": "QV-P", "name": "Sneaked in"}],
]
# Carol's writes that take a hidden record's key: refused, naming only the key.
TAKING = [
    ("POST", "/api/bugs", {"key": "QV-1", "product": "PRD-1", "title": "Mine now"}),
    ("POST", "/api/bugs", {"key": "qv-1", "product": "PRD-1", "title": "Mine now"}),
    ("PATCH", "/api/bugs/BUG-12", {"key": "QV-2"}),
]
IMPORT_TAKING = [{"kind": "bug", "key": "QV-1", "product": "PRD-1", "title": "Mine now"}]

UI_CLEAN = [
    *(
        ("/search/", {"query": query, "mode": mode})
        for query in ("renewal", "spinner android", "quoka")
        for mode in ("keyword", "hybrid")
    ),
    ("/search/", {"query": "renewal", "sort": "recent"}),
    ("/dashboard/", {}),
    ("/records/BUG-12/", {}),
    ("/records/FEAT-7/", {}),
    ("/records/PRD-1/", {}),
    ("/search/export", {"query": "renewal", "format": "csv"}),
    ("/search/export", {"query": "renewal", "format": "jsonl"}),
]
UI_NAMED = [
    ("/records/QV-1/", {}),
    ("/records/QV-P/", {}),
    ("/search/", {"query": "QV-2", "mode": "keyword"}),
    ("/search/", {"query": "renewal", "products": "QV-P"}),
]
ADMIN_CLEAN = [
    *(f"/admin/backlog/{model}/" for model in ("product", "feature", "qatest", "bug")),
    *(f"/admin/backlog/{model}/?q=renewal" for model in ("product", "feature", "qatest", "bug")),
    "/admin/backlog/bug/?q=quoka",
    "/admin/backlog/bug/?severity__exact=critical",
    "/admin/backlog/bug/add/",
    "/admin/backlog/feature/add/",
    "/admin/",
    *(
        f"/admin/autocomplete/?app_label=backlog&model_name={model}&field_name={field}&term={term}"
        for model, field in (("bug", "product"), ("bug", "feature"), ("bug", "test"), ("feature", "product"))
        for term in ("", "r", "q")
    ),
]


# -- asking -------------------------------------------------------------------------------


def difference(one: str, other: str) -> str:
    """The lines where two answers part, to read in a failure."""
    lines = difflib.unified_diff(one.splitlines(), other.splitlines(), lineterm="", n=1)
    return "\n".join(list(lines)[:40])


def normalized(text: str) -> str:
    """A page without what changes on every render: CSRF tokens, and the
    read-only times of an add form (now, to the minute)."""
    text = re.sub(r'(csrfmiddlewaretoken" value=|csrf-token" content=)"[^"]*"', r"\1", text)
    return re.sub(r'<div class="readonly">[^<]*\d{4}, [^<]*</div>', '<div class="readonly">(a time)</div>', text)


def content(response) -> str:
    """The body, also of a streamed one (an export)."""
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def ask_rest(client, method: str, path: str, params) -> str:
    if method == "GET":
        response = client.get(path, params)
    elif method == "DELETE":
        response = client.delete(path)
    else:
        response = getattr(client, method.lower())(path, params, format="json")
    return f"{response.status_code} {content(response)}"


def ask_import(client, records: list[dict], dry_run: bool) -> str:
    response = client.post(
        f"/api/import?dry_run={str(dry_run).lower()}", jsonl(*records), content_type="application/x-ndjson"
    )
    return f"{response.status_code} {response.content.decode()}"


def free(value):
    """The same question about things that exist nowhere: QV-… becomes ZZ-…, quokka zyzzyva."""
    text = json.dumps(value).replace("QV-", "ZZ-").replace("qv-", "zz-").replace("quokka", "zyzzyva")
    return json.loads(text)


def as_hidden(answer: str) -> str:
    """An answer about ZZ-… written back as if about QV-…, to compare word for word."""
    return answer.replace("ZZ-", "QV-").replace("zz-", "qv-").replace("zyzzyva", "quokka")


def ask_rest_all(client) -> dict:
    answers = {}
    for method, path, params in REST_CLEAN:
        answers[("clean", method, path, json.dumps(params))] = ask_rest(client, method, path, params)
    for method, path, params in REST_NAMED:
        name = ("named", method, path, json.dumps(params))
        answers[name] = ask_rest(client, method, path, params)
        answers[("free", *name[1:])] = as_hidden(ask_rest(client, method, free(path), free(params)))
    for records in IMPORTS_NAMED:
        for dry_run in (True, False):
            name = ("named", "IMPORT", str(dry_run), json.dumps(records))
            answers[name] = ask_import(client, records, dry_run)
            answers[("free", *name[1:])] = as_hidden(ask_import(client, free(records), dry_run))
    for method, path, params in TAKING:
        answers[("taking", method, path, json.dumps(params))] = ask_rest(client, method, path, params)
    for dry_run in (True, False):
        answers[("taking", "IMPORT", str(dry_run), "")] = ask_import(client, IMPORT_TAKING, dry_run)
    return answers


def ask_mcp_all() -> dict:
    """The same questions as MCP tool calls and resource reads, in one stdio session acting as Carol."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--user", "carol"],
        cwd=str(ROOT),
        env=server_env(connection.settings_dict["NAME"]),
    )
    calls = [("clean", "search", {**search, "include_scores": True}) for search in SEARCHES[:21]]
    calls += [
        ("clean", "similar", {"key": "BUG-12", "include_scores": True}),
        ("clean", "timeline", {"key": "BUG-12"}),
        ("clean", "get", {"keys": ["BUG-12", "FEAT-7", "PRD-1"]}),
        ("named", "search", {"query": "QV-1", "mode": "keyword"}),
        ("named", "search", {"query": "quokka", "mode": "keyword"}),
        ("named", "search", {"query": "renewal", "products": ["QV-P"]}),
        ("named", "similar", {"key": "QV-1"}),
        ("named", "timeline", {"key": "QV-1"}),
        ("named", "get", {"keys": ["QV-1", "BUG-12"]}),
    ]
    resources = [
        ("clean", "backlog://bug/BUG-12"),
        ("named", "backlog://bug/QV-1"),
        ("named", "backlog://product/QV-P"),
    ]

    async def session():
        answers = {}
        async with Client(params) as client:
            for kind, tool, arguments in calls:
                for name, args, back in ((kind, arguments, str), ("free", free(arguments), as_hidden)):
                    if name == "free" and kind == "clean":
                        continue
                    result = await client.call_tool(tool, args)
                    answers[(name, tool, json.dumps(arguments))] = back(f"{result.is_error} {result.content[0].text}")
            for kind, uri in resources:
                for name, asked, back in ((kind, uri, str), ("free", free(uri), as_hidden)):
                    if name == "free" and kind == "clean":
                        continue
                    try:
                        read = await client.read_resource(asked)
                        text = read.contents[0].text
                    except MCPError as error:
                        text = f"error {error}"
                    answers[(name, "resource", uri)] = back(text)
        return answers

    return anyio.run(session)


def ask_ui_all(carol) -> dict:
    client = DjangoClient()
    client.force_login(carol)
    answers = {}
    for path, params in UI_CLEAN:
        response = client.get(path, params)
        answers[("clean", path, json.dumps(params))] = f"{response.status_code} {normalized(content(response))}"
    for path, params in UI_NAMED:
        response = client.get(path, params)
        answers[("named", path, json.dumps(params))] = f"{response.status_code} {normalized(response.content.decode())}"
        response = client.get(free(path), free(params))
        answers[("free", path, json.dumps(params))] = as_hidden(
            f"{response.status_code} {normalized(response.content.decode())}"
        )
    return answers


def ask_admin_all(carol) -> dict:
    client = DjangoClient()
    client.force_login(carol)
    answers = {}
    for path in ADMIN_CLEAN:
        response = client.get(path)
        answers[("clean", path)] = f"{response.status_code} {normalized(response.content.decode())}"
    hidden = {
        "bug": Bug.objects.get(key="QV-1").pk,
        "qatest": QATest.objects.get(key="QV-T1").pk,
        "feature": Feature.objects.get(key="QV-F1").pk,
        "product": Product.objects.get(key="QV-P").pk,
    }
    nowhere = 987654321
    tramline = Product.objects.get(key="PRD-1").pk

    def both(name: str, ask, models=tuple(hidden)) -> None:
        """`ask(model, id)` about a hidden record and about an id nobody holds."""
        for model, pk in hidden.items():
            if model not in models:
                continue
            answers[("named", name, model)] = normalized(ask(model, pk))
            answers[("free", name, model)] = normalized(ask(model, nowhere)).replace(str(nowhere), str(pk))

    def page(model, pk, suffix):
        response = client.get(f"/admin/backlog/{model}/{pk}/{suffix}", follow=True)
        return f"{response.status_code} {response.content.decode()}"

    both("change", lambda model, pk: page(model, pk, "change/"))
    both("history", lambda model, pk: page(model, pk, "history/"))
    both("delete", lambda model, pk: page(model, pk, "delete/"))
    both(
        "filter", lambda model, pk: page(model, "", f"?product__id__exact={pk}" if model != "product" else f"?id={pk}")
    )

    def add_bug(model, pk):
        fields = {"product": tramline, "feature": "", "test": ""}
        fields[{"product": "product", "feature": "feature", "qatest": "test"}[model]] = pk
        response = client.post(
            "/admin/backlog/bug/add/",
            {"key": "BUG-79", "title": "Sneaked in", "status": "open", "raw_data": "{}", **fields},
        )
        return f"{response.status_code} {response.content.decode()}"

    both("add bug naming it", add_bug, models=("product", "feature", "qatest"))
    return answers


def observe(carol, client) -> dict:
    return {
        "rest": ask_rest_all(client),
        "mcp": ask_mcp_all(),
        "ui": ask_ui_all(carol),
        "admin": ask_admin_all(carol),
    }


def hidden_state() -> list:
    return sorted(Bug.objects.filter(product__key="QV-P").values_list("key", "title", "status", "product__key"))


@pytest.fixture(scope="module")
def rounds(django_db_setup, django_db_blocker):
    """Carol's answers before and after Quokka Vault changed, and its records after each round."""
    with django_db_blocker.unblock():
        report = import_records(jsonl(*TRAMLINE, *QUOKKA_VAULT).splitlines())
        assert report.written and not report.problems, report.problems
        embed_pending()
        team = Group.objects.create(name="Tramline team")
        Product.objects.get(key="PRD-1").teams.add(team)
        # Carol signs in with the company's identity provider: her group there names the team (accounts/oidc.py).
        with override_settings(OIDC_TEAMS={"okta-tramline-qa": "Tramline team"}):
            carol, missing = sign_in(
                {
                    "iss": "https://login.example.com",
                    "sub": "00u-carol",
                    "preferred_username": "carol",
                    "groups": ["okta-tramline-qa", "everyone"],
                }
            )
        assert not missing and list(carol.groups.all()) == [team]
        # Her saved search: the dashboard counts its matches new since 2000 (all of them).
        SavedSearch.from_params({"query": "renewal"}, owner=carol, name="Renewals", last_seen_at=OLD).save()
        carol.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="backlog",
                codename__regex=r"^(add|change|delete|view)_(product|feature|qatest|bug)$",
            )
        )
        client = client_with_token(carol)
        before_state = hidden_state()
        before = observe(carol, client)
        after_first = hidden_state()
        report = import_records(jsonl(*MORE_QUOKKA).splitlines())
        assert report.written and not report.problems, report.problems
        embed_pending()
        changed_state = hidden_state()
        after = observe(carol, client)
        after_second = hidden_state()
        sneaked = sorted(Bug.objects.filter(key__in=["BUG-77", "BUG-78", "BUG-79"]).values_list("key", flat=True))
    yield {
        "before": before,
        "after": after,
        "states": (before_state, after_first, changed_state, after_second),
        "sneaked": sneaked,
    }
    with django_db_blocker.unblock():
        for model in (Bug, QATest, Feature, Product, ApiToken, get_user_model(), Group):
            model.objects.all().delete()


SURFACES = ("rest", "mcp", "ui", "admin")


@pytest.mark.parametrize("surface", SURFACES)
def test_no_answer_to_a_clean_question_holds_a_marker(rounds, surface):
    answers = {name: text for round_ in ("before", "after") for name, text in rounds[round_][surface].items()}
    clean = {name: text for name, text in answers.items() if name[0] == "clean"}

    leaks = {name: [m for m in MARKERS if m in text.lower()] for name, text in clean.items()}

    assert len(clean) >= 10
    assert {name: found for name, found in leaks.items() if found} == {}


@pytest.mark.parametrize("surface", SURFACES)
def test_a_hidden_record_is_answered_as_one_that_exists_nowhere(rounds, surface):
    for round_ in ("before", "after"):
        answers = rounds[round_][surface]
        named = {name[1:]: text for name, text in answers.items() if name[0] == "named"}
        free = {name[1:]: text for name, text in answers.items() if name[0] == "free"}

        assert named and set(named) == set(free)
        differ = [name for name in named if named[name] != free[name]]
        assert differ == [], f"{round_}: " + difference(named[differ[0]], free[differ[0]])


@pytest.mark.parametrize("surface", SURFACES)
def test_no_answer_moves_when_a_hidden_product_changes(rounds, surface):
    before, after = rounds["before"][surface], rounds["after"][surface]

    assert set(before) == set(after)
    moved = [name for name in before if before[name] != after[name]]
    assert moved == [], difference(before[moved[0]], after[moved[0]])


def test_answers_find_carol_s_records_so_the_checks_have_something_to_miss(rounds):
    rest = rounds["before"]["rest"]
    search = rest[("clean", "GET", "/api/search", json.dumps(SEARCHES[0]))]
    body = json.loads(search.split(" ", 1)[1])

    assert search.startswith("200 ") and {hit["key"] for hit in body["results"]} == {"BUG-12", "FEAT-7", "TEST-3"}
    assert body["total"] == 3 and body["index"]["documents"] == 4  # PRD-1, FEAT-7, TEST-3, BUG-12
    assert (
        "TEST-3" in rounds["before"]["mcp"][("clean", "similar", json.dumps({"key": "BUG-12", "include_scores": True}))]
    )
    assert "BUG-12" in rounds["before"]["ui"][("clean", "/dashboard/", "{}")]
    dashboard = rounds["before"]["ui"][("clean", "/dashboard/", "{}")]
    # All four of her records: hybrid finds PRD-1 by meaning, beside the three with the word.
    assert "Renewals</a></th>" in dashboard and "<strong>4 new</strong>" in dashboard
    exported = rest[("clean", "GET", "/api/search", json.dumps({"query": "renewal", "format": "csv"}))]
    assert exported.startswith("200 ") and all(f",{key}," in exported for key in ("BUG-12", "FEAT-7", "TEST-3"))
    assert "BUG-12" in rounds["before"]["admin"][("clean", "/admin/backlog/bug/")]


def test_taking_a_hidden_key_is_refused_naming_only_the_key_and_writes_nothing(rounds):
    before_state, after_first, changed_state, after_second = rounds["states"]
    for round_ in ("before", "after"):
        taking = {name: text for name, text in rounds[round_]["rest"].items() if name[0] == "taking"}
        for name, text in taking.items():
            assert text.startswith("400 "), name
            key = "qv-1" if '"qv-1"' in name[3] else ("QV-2" if "QV-2" in name[3] else "QV-1")
            body = json.loads(text.split(" ", 1)[1])
            assert key_taken_message(key).rstrip(".") in json.dumps(body), name
            assert not any(m in text.lower().replace(key.lower(), "") for m in MARKERS), name

    assert before_state == after_first  # no write of the first round reached Quokka Vault
    assert changed_state == after_second
    assert rounds["sneaked"] == []
