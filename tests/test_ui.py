"""The staff UI through Django's test client: who may see it, the
server-rendered search (the page without JavaScript), escaping, errors,
record pages and the dashboard. tests/test_ui_browser.py drives the same
pages in Chromium.

The people: Alice is on the QA staff. Bob has an account but is not staff.
A visitor is not logged in at all.

The corpus is the Tramline story of conftest.py, plus a near-duplicate of
BUG-12, a run of receipt bugs (enough to page through), a Ledgerly bug,
and Mallory's bug, whose title and text are HTML.
"""

import re
from html import unescape
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.template import Context, Template
from django.test import Client

from backlog.imports import import_records
from search import service
from search.indexing.vectors import embed_pending

from .conftest import TRAMLINE, jsonl, seeing_all_products

XSS_TITLE = "<img src=x onerror=alert(1)>"

MORE = [
    {
        "kind": "bug",
        "key": "BUG-20",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renewal button unresponsive on Android 14 devices",
        "description": "Tapping Renew on an expiring season pass does nothing; a spinner shows forever.",
        "severity": "high",
        "status": "open",
        "created_at": "2026-02-03T09:00:00+00:00",
        "raw_data": {"environment": "Samsung S23, Android 14", "actual_result": "Spinner forever"},
    },
    *[
        {
            "kind": "bug",
            "key": f"BUG-{30 + n}",
            "product": "PRD-1",
            "feature": "FEAT-7",
            "title": f"Receipt email missing after renewal ({city})",
            "description": f"Riders in {city} renewed a pass and got no receipt email.",
            "severity": ["low", "medium"][n % 2],
            "status": ["open", "fixed"][n % 2],
            "created_at": f"2026-{1 + n % 6:02d}-{10 + n:02d}T08:00:00+00:00",
        }
        for n, city in enumerate(
            ["Lyon", "Porto", "Graz", "Turku", "Gent", "Brno", "Cork", "Bergen", "Split", "Malmo", "Lille", "Basel"]
        )
    ],
    {
        "kind": "bug",
        "key": "BUG-50",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "PDF export cuts off the last invoice line",
        "severity": "critical",
        "status": "open",
        "created_at": "2026-03-05T08:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-66",
        "product": "PRD-2",
        "title": XSS_TITLE,
        "description": "<script>alert(2)</script> appears in the PDF export footer",
        "severity": "low",
        "created_at": "2026-03-06T08:00:00+00:00",
        "raw_data": {"reporter": "<b>mallory</b>", "notes": "</pre><script>alert(3)</script>"},
    },
]


def load_corpus(embed: bool = True):
    report = import_records(jsonl(*TRAMLINE, *MORE).splitlines())
    assert report.written and not report.problems, report.problems
    if embed:
        embed_pending()


@pytest.fixture
def corpus(db):
    load_corpus()


@pytest.fixture
def alice(db):
    return seeing_all_products(User.objects.create_user("alice", password="correct horse battery", is_staff=True))


@pytest.fixture
def bob(db):
    return seeing_all_products(User.objects.create_user("bob", password="correct horse battery"))


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def result_keys(html: str) -> list[str]:
    return re.findall(r'<li class="result" data-key="([^"]+)"', html)


# -- who may see it -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/search/?query=renewal&entities=bug", "/records/BUG-12/", "/dashboard/"])
def test_a_visitor_is_sent_to_the_login_page(client, db, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?" + urlencode({"next": path}, safe="/")


def test_the_home_page_leads_to_search(client):
    assert client.get("/")["Location"] == "/search/"


def test_bob_is_not_staff_and_is_sent_to_the_login_page(client, bob):
    client.force_login(bob)

    response = client.get("/search/?query=renewal", follow=True)

    assert response.redirect_chain == [("/accounts/login/?next=/search/%3Fquery%3Drenewal", 302)]
    assert "You are logged in as bob, who is not a staff member" in response.content.decode()


def test_bob_cannot_log_in_here(client, bob):
    response = client.post("/accounts/login/", {"username": "bob", "password": "correct horse battery"})

    assert response.status_code == 200
    assert "for a staff account" in response.content.decode()
    assert client.get("/search/").status_code == 302


def test_alice_logs_in_and_lands_where_she_was_going(client, alice):
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "correct horse battery", "next": "/search/?query=renewal"},
    )

    assert response["Location"] == "/search/?query=renewal"
    assert client.get("/search/").status_code == 200
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"


# -- search without JavaScript ------------------------------------------------------------------


def test_results_are_in_the_page_in_the_contracts_order(as_alice, corpus):
    response = as_alice.get("/search/?query=renewal&entities=bug")
    html = response.content.decode()

    expected = service.call("search", QueryDict("query=renewal&entities=bug&include_facets=true"))
    assert response.status_code == 200
    assert result_keys(html) == [hit["key"] for hit in expected["results"]]
    assert len(result_keys(html)) > 5
    assert f"{expected['total']} results" in html
    # The chosen facet is a checked checkbox; every facet value shows its count.
    assert re.search(r'name="entities"\s+value="bug" checked', html)
    for facet in expected["facets"]["severity"]:
        assert re.search(
            rf'value="{facet["value"]}">\s*<label[^>]*>\s*{facet["value"]} <span class="count">'
            rf"{facet['count']}</span>",
            html,
        )


def test_the_title_match_ranks_first(as_alice, corpus):
    keys = result_keys(as_alice.get("/search/?query=season+pass+renewal").content.decode())

    assert keys[0] == "FEAT-7"


def test_the_next_page_continues_the_ranking(as_alice, corpus):
    first = as_alice.get("/search/?query=receipt&limit=5&mode=keyword").content.decode()
    next_link = unescape(re.search(r'<a rel="next" href="([^"]+)"', first).group(1))
    second = as_alice.get("/search/" + next_link).content.decode()

    everything = service.call("search", {"query": "receipt", "limit": 10, "mode": "keyword"})
    assert result_keys(first) + result_keys(second) == [hit["key"] for hit in everything["results"]]
    assert '<ol class="result-list" start="6"' in second
    assert "First page" in second


def test_parameters_without_a_control_are_carried_by_the_form(as_alice, corpus):
    html = as_alice.get("/search/?query=renewal&feature=FEAT-7&limit=5&cursor=abc").content.decode()

    assert '<input type="hidden" name="feature" value="FEAT-7">' in html
    assert '<input type="hidden" name="limit" value="5">' in html
    assert 'name="cursor"' not in html


def test_the_fragment_is_the_results_region_only(as_alice, corpus):
    response = as_alice.get("/search/?query=renewal", headers={"X-UI-Fragment": "results"})
    html = response.content.decode()

    assert html.lstrip().startswith('<div id="results-region"')
    assert "<html" not in html
    assert "X-UI-Fragment" in response["Vary"]


def test_fields_of_the_query_are_chips_whose_links_take_them_out(as_alice, corpus):
    query = 'renewal severity:high,critical product:"tramline mobile" created:>=2026-02'
    html = as_alice.get("/search/?" + urlencode({"query": query, "mode": "keyword"})).content.decode()

    expected = service.call("search", {"query": query, "mode": "keyword"})
    assert result_keys(html) == [hit["key"] for hit in expected["results"]] and result_keys(html)
    chips = re.findall(r'<a class="chip" href="([^"]+)" data-chip-query="([^"]*)"\s+aria-label="([^"]+)"', html)
    assert [(unescape(label), unescape(without)) for _, without, label in chips] == [
        ("Remove filter severity:high,critical", 'renewal product:"tramline mobile" created:>=2026-02'),
        ('Remove filter product:"tramline mobile" PRD-1', "renewal severity:high,critical created:>=2026-02"),
        (
            "Remove filter created:>=2026-02 after 2026-02-01 00:00:00 UTC",
            'renewal severity:high,critical product:"tramline mobile"',
        ),
    ]
    # Without JavaScript the link is the search without the field.
    first = QueryDict(unescape(chips[0][0]).lstrip("?"))
    assert (first["query"], first["mode"]) == ('renewal product:"tramline mobile" created:>=2026-02', "keyword")
    assert 'class="chips"' not in as_alice.get("/search/?query=renewal").content.decode()


@pytest.mark.parametrize(
    ("query_string", "status", "message"),
    [
        ("query=r", 400, "query: must be 2 to 500 characters"),
        ("query=renewal+severity:urgent", 400, "query: severity:urgent: &quot;urgent&quot; is not one of"),
        ("query=renewal&severity=urgent", 400, "severity"),
        ("query=renewal&colour=red", 400, "unknown parameter &#x27;colour&#x27;"),
        ("query=renewal&cursor=not-a-cursor", 400, "cursor"),
    ],
)
def test_a_bad_parameter_is_explained_in_the_page(as_alice, corpus, query_string, status, message):
    response = as_alice.get("/search/?" + query_string)

    assert response.status_code == status
    html = response.content.decode()
    assert "This search could not run" in html
    assert message in html
    assert "Traceback" not in html


@pytest.mark.parametrize("path", ["/search/?query=ab%00cd", "/search/?query=renewal&products=%00", "/records/A%00B/"])
def test_a_nul_character_is_a_400_page_that_says_so(as_alice, corpus, path):
    response = as_alice.get(path)

    assert response.status_code == 400
    assert "contains a NUL character" in response.content.decode()


def test_an_empty_search_page_invites_a_query(as_alice):
    html = as_alice.get("/search/").content.decode()

    assert "Find anything in the QA backlog" in html
    assert 'id="query"' in html


# -- escaping -------------------------------------------------------------------------------------


def test_record_text_is_escaped_in_results_and_on_the_record_page(as_alice, corpus):
    results = as_alice.get("/search/?query=export+footer").content.decode()
    record = as_alice.get("/records/BUG-66/").content.decode()

    assert "BUG-66" in result_keys(results)
    for html in (results, record):
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
        assert "<img" not in html
        assert "<script>alert" not in html and "<b>mallory" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt; appears in the PDF export footer" in record
    assert "&lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in record


def test_snippets_show_the_contracts_text_with_its_highlights(as_alice, corpus):
    html = as_alice.get("/search/?query=renewal+android").content.decode()

    expected = service.call("search", {"query": "renewal android", "detail": "full"})["results"]
    shown = re.findall(r'<p class="snippet"><span class="snippet-field">[^<]*</span> (.*?)</p>', html)
    with_snippets = [hit["snippet"] for hit in expected if hit["snippet"]["field"] != "title"]
    assert shown and len(shown) == len(with_snippets)
    for snippet, markup in zip(with_snippets, shown, strict=True):
        assert unescape(re.sub("</?mark>", "", markup)) == snippet["text"]
        marked = [unescape(text) for text in re.findall("<mark>(.*?)</mark>", markup)]
        assert marked == [snippet["text"][h["start"] : h["end"]] for h in snippet["highlights"]]


@pytest.mark.parametrize(
    ("text", "highlights", "html"),
    [
        ("renew <b>now</b>", [(0, 5)], "<mark>renew</mark> &lt;b&gt;now&lt;/b&gt;"),
        ("a <script> b", [(2, 10)], "a <mark>&lt;script&gt;</mark> b"),
        ("abc", [(1, 2), (0, 2), (2, 99)], "<mark>ab</mark><mark>c</mark>"),  # overlaps and overruns are clipped
        ("abc", [], "abc"),
    ],
)
def test_highlights_slice_the_text_and_escape_every_slice(text, highlights, html):
    snippet = {"text": text, "highlights": [{"start": s, "end": e} for s, e in highlights]}

    assert Template("{% load ui %}{{ snippet|highlight }}").render(Context({"snippet": snippet})) == html


# -- records and the dashboard --------------------------------------------------------------------


def test_a_bug_page_shows_its_raw_data_relations_and_likely_duplicates(as_alice, corpus):
    html = as_alice.get("/records/BUG-12/").content.decode()

    assert "Renewal button does nothing on Android 14" in html
    assert "&quot;reporter&quot;: &quot;dana&quot;" in html  # raw_data, pretty and escaped
    for link in ("/records/PRD-1/", "/records/FEAT-7/", "/records/TEST-3/"):
        assert f'href="{link}"' in html
    duplicates = html.split('id="duplicates-heading">Likely duplicates</h2>')[1].split("</section>")[0]
    assert re.findall(r'href="/records/([^/]+)/"', duplicates)[0] == "BUG-20"


def test_a_feature_page_lists_its_tests_and_bugs(as_alice, corpus):
    html = as_alice.get("/records/FEAT-7/").content.decode()

    assert 'id="related-tests">Tests <span class="count">1</span>' in html
    assert 'id="related-bugs">Bugs <span class="count">14</span>' in html
    assert 'href="/records/TEST-3/"' in html


def test_a_key_is_found_in_any_case_and_shown_at_one_address(as_alice, corpus):
    assert as_alice.get("/records/bug-12/")["Location"] == "/records/BUG-12/"


def test_an_unknown_key_is_a_404_that_says_so(as_alice, corpus):
    response = as_alice.get("/records/BUG-999/")

    assert response.status_code == 404
    assert "No record has the key &#x27;BUG-999&#x27;" in response.content.decode()


def test_the_dashboard_counts_charts_and_lists(as_alice, corpus):
    response = as_alice.get("/dashboard/")
    html = response.content.decode()

    tramline = next(p for p in response.context["products"] if p.key == "PRD-1")
    assert (tramline.feature, tramline.test, tramline.bug, tramline.open_bugs) == (1, 1, 14, 8)
    assert response.context["totals"].bug == 16
    assert response.context["health"].coverage == 1.0
    assert "100% <span>embedded</span>" in html
    chart = response.context["chart"]
    assert sum(bar.total for bar in chart.bars) == 16 and chart.bars[-1].label == "Jun 2026"
    assert '<svg class="chart"' in html and '<title id="chart-title">' in html
    recent = re.findall(r'<th scope="row"><a href="/records/(BUG-\d+)/"', html)
    assert recent[:2] == ["BUG-41", "BUG-35"]


def test_the_chart_names_the_year_under_its_first_month_and_every_january(as_alice, corpus):
    html = as_alice.get("/dashboard/").content.decode()

    ticks = re.findall(r'<text class="tick" x="[^"]+" y="[^"]+">([^<]+)</text>', html)
    year_2025, year_2026 = "Jul \u201925", "Jan \u201926"
    assert ticks == [year_2025, "Aug", "Sep", "Oct", "Nov", "Dec", year_2026, "Feb", "Mar", "Apr", "May", "Jun"]


def test_a_bugs_typed_steps_are_numbered_one_a_line(as_alice, corpus):
    steps = "1. Open Passes\n2) Tap Renew\n\n- Pay with the saved card\nstep 4: Wait 1.5 seconds"
    bug = {"kind": "bug", "key": "BUG-500", "product": "PRD-1", "title": "Renew stalls", "raw_data": {"steps": steps}}
    assert import_records(jsonl(bug).splitlines()).written

    html = as_alice.get("/records/BUG-500/").content.decode()

    listed = html.split('id="field-steps">')[1].split("</section>")[0]
    assert re.findall(r"<li>([^<]*)</li>", listed) == [
        "Open Passes",
        "Tap Renew",
        "Pay with the saved card",
        "Wait 1.5 seconds",
    ]


def test_the_pages_have_an_icon_and_favicon_ico_leads_to_it(client, as_alice, corpus):
    page = as_alice.get("/search/").content.decode()
    response = client.get("/favicon.ico")

    icon = re.search(r'<link rel="icon" href="([^"]+)"', page).group(1)
    assert response.status_code == 301 and response["Location"] == icon and icon.endswith(".svg")


def test_sync_errors_on_the_dashboard_are_shown_only_to_those_who_see_every_product(as_alice, corpus):
    """Carol is QA staff on the Tramline team only. Tramline's Jira sync writes as the
    operator, and its last run failed on keys that Ledgerly's records hold: its errors
    name them. Carol sees the source (its product is hers) and that it failed, never
    the errors; Alice, who sees every product, does."""
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from backlog.models import Product
    from connectors.models import Source, SyncRun

    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol = User.objects.create_user("carol", password="correct horse battery", is_staff=True)
    carol.groups.add(team)
    source = Source.objects.create(
        name="Tramline Jira", kind="jira", url="https://tramline.example", project="TRAM", product_key="PRD-1"
    )
    errors = ["FEAT-9: the key already belongs to a feature of Ledgerly", "bug-30 is stored as BUG-30"]
    SyncRun.objects.create(source=source, status="failed", finished_at=timezone.now(), skipped=2, errors=errors)
    as_carol = Client()
    as_carol.force_login(carol)

    hers = as_carol.get("/dashboard/").content.decode()
    alices = as_alice.get("/dashboard/").content.decode()

    row = hers.split('data-source="Tramline Jira">')[1].split("</tr>")[0]
    assert "<strong>failed</strong>" in row and "2 skipped" in row
    assert "shown to those who see every product" in row
    assert "FEAT-9" not in hers and "BUG-30" not in hers and "Ledgerly" not in hers
    assert "FEAT-9: the key already belongs to a feature of Ledgerly" in alices


@pytest.mark.parametrize("state, said", [("stopped", True), ("running", False)])
def test_the_dashboard_says_when_the_embedding_worker_has_stopped(as_alice, corpus, state, said):
    from django.utils import timezone

    from search.indexing.health import EMBEDDING_WORKER
    from search.models import Worker

    Worker.objects.create(name=EMBEDDING_WORKER, state=state, heartbeat_at=timezone.now())

    html = as_alice.get("/dashboard/").content.decode()

    status = " ".join(unescape(re.sub(r"<[^>]+>", " ", html.split('id="worker-status">')[1].split("</p>")[0])).split())
    assert f"Embedding worker: {state} ;" in status
    assert ("records written since then are found by keyword only" in status) is said


def test_while_the_backlog_is_embedded_readyz_and_the_search_page_say_meaning_is_partial(as_alice):
    load_corpus(embed=False)
    ready = Client().get("/readyz").json()
    assert ready["status"] == "ready"  # keyword search serves every record meanwhile
    assert ready["checks"]["embeddings"].startswith("partial: 0.0% of records have a vector")

    # No vector at all: the degraded note says so (hybrid answered by keyword).
    page = as_alice.get("/search/?query=renewal&mode=hybrid").content.decode()
    assert "Matched by keyword only: no record has an embedding of the active model yet" in page
    assert "run <code>manage.py embed</code>" in page or "run `manage.py embed`" in page

    # serve's worker is at it: the note says so, with the figure, and sends no one to run it again.
    from django.utils import timezone

    from search.indexing import health
    from search.models import Worker

    Worker.objects.create(name=health.EMBEDDING_WORKER, state="running", heartbeat_at=timezone.now())
    health.forget_coverage()
    page = unescape(as_alice.get("/search/?query=renewal&mode=hybrid").content.decode())
    documents = health.index_health().documents
    assert f"embedding is under way: 0 of {documents:,} records have a vector of the active model so far" in page
    assert "manage.py embed" not in page

    embed_pending()
    assert Client().get("/readyz").json()["checks"]["embeddings"] == "complete"
    import_records(jsonl({"kind": "bug", "key": "BUG-77", "product": "PRD-1", "title": "Renewal receipt"}).splitlines())
    page = as_alice.get("/search/?query=renewal&mode=hybrid").content.decode()
    assert 'id="partial-vectors"' in page and "of records have a vector so far" in page
    assert 'id="partial-vectors"' not in as_alice.get("/search/?query=renewal&mode=keyword").content.decode()


def test_a_widened_search_says_which_words_no_record_holds_together(as_alice, corpus):
    """No record holds every word: the page says so, naming them, as the contract does (relaxed)."""
    widened = as_alice.get("/search/?query=renewal+unresponsive+receipt&mode=keyword").content.decode()
    whole = as_alice.get("/search/?query=renewal+receipt&mode=keyword").content.decode()

    assert 'id="relaxed"' in widened
    assert "No record has all of “renewal”, “unresponsive”, “receipt”; showing records with some of them" in widened
    assert result_keys(widened)  # and the records with some of them are listed
    assert 'id="relaxed"' not in whole and result_keys(whole)
    # Some records have every word, fewer than a search wants: the note says how many.
    few = as_alice.get("/search/?query=season+pass+renewal&mode=keyword").content.decode()
    assert re.search(r"Only \d records? ha(s|ve) all of “season”, “pass”, “renewal”", few)


def test_a_hit_found_by_meaning_alone_is_marked_so(as_alice, corpus):
    """A semantic hit holds none of the query's words (why: meaning): the page says it is close in meaning."""
    from search import service

    params = {"query": "subscription will not extend", "mode": "semantic"}
    answer = service.call("search", params)
    by_meaning = [hit["key"] for hit in answer["results"] if hit["why"] == "meaning"]
    html = as_alice.get("/search/?query=subscription+will+not+extend&mode=semantic").content.decode()

    assert by_meaning, "the query was meant to share no word with its hits"
    for key in by_meaning:
        item = re.search(rf'<li class="result" data-key="{key}">.*?</li>', html, re.S).group(0)
        assert "close in meaning" in item
