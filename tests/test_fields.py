"""Fields in a simple query (search.query.fields): `severity:critical status:open product:PRD-1 updated:<7d crash`.

The story: Dana triages Tramline Mobile (transit tickets) and Ledgerly
(invoicing) and types her filters into the query. Erin is on Tramline's
team only: Ledgerly's name and records never reach her, not even in an
error message.
"""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from backlog.imports import import_records
from backlog.models import Product
from search.contract import SearchError, SearchRequest
from search.operations.search import search
from search.query.fields import read

from .conftest import jsonl

NOW = datetime(2026, 3, 10, 12, 30, 45, tzinfo=UTC)
SEVERITIES = "'critical', 'high', 'medium' or 'low'"


def filters(query: str, match_mode: str = "simple") -> list[tuple]:
    fielded = read(query, match_mode, None, now=NOW)
    return [(f.token, f.param, f.values, f.exclude) for f in fielded.filters]


def words(query: str) -> str:
    return read(query, "simple", None, now=NOW).text


# -- reading the fields (no database) ------------------------------------------------------


def test_fields_are_taken_out_and_the_words_stay():
    query = 'severity:critical status:open,accepted kind:bugs crash "payment sheet" -android -status:fixed'

    assert words(query) == 'crash "payment sheet" -android'
    assert filters(query) == [
        ("severity:critical", "severity", ["critical"], False),
        ("status:open,accepted", "status", ["open", "accepted"], False),
        ("kind:bugs", "entities", ["bug"], False),
        ("-status:fixed", "status", ["fixed"], True),
    ]


def test_names_and_values_are_read_in_any_case_and_kinds_by_their_aliases():
    assert filters("Severity:CRITICAL KIND:TestCases kind:Feature") == [
        ("Severity:CRITICAL", "severity", ["critical"], False),
        ("KIND:TestCases", "entities", ["test"], False),
        ("kind:Feature", "entities", ["feature"], False),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "foo:bar crash",
        "see http://example.com/renew",
        "login at 10:30",
        '"a severity:critical phrase" stays',
        "severity: alone",
        'severity:"" empty',
    ],
)
def test_anything_else_with_a_colon_stays_words(query):
    fielded = read(query, "simple", None, now=NOW)

    assert fielded.filters == [] and fielded.text == query


def test_raw_mode_reads_no_fields():
    assert read("severity:critical & crash", "raw", None).text == "severity:critical & crash"
    assert filters("severity:critical & crash", "raw") == []


@pytest.mark.parametrize(
    "query, message",
    [
        ("severity:blocker crash", f'query: severity:blocker: "blocker" is not one of {SEVERITIES}.'),
        ("severity:high,urgent", f'query: severity:high,urgent: "urgent" is not one of {SEVERITIES}.'),
        (
            "status:closed",
            "query: status:closed: \"closed\" is not one of 'open', 'accepted', 'rejected', 'fixed', 'duplicate', "
            "'draft', 'active' or 'archived'.",
        ),
        ("kind:epic", "query: kind:epic: \"epic\" is not one of 'product', 'feature', 'test' or 'bug'."),
        ("-created:>2025-01-01", "query: -created:>2025-01-01: a date cannot be excluded; turn it round"),
        ("created:yesterday", 'query: created:yesterday: "yesterday" is not a date; give a day (2025-01-31)'),
        ("created:2025-02-30", 'query: created:2025-02-30: "2025-02-30" is not a date'),
        ("updated:7x", 'query: updated:7x: "7x" is not a date'),
        ("created:2025-03..2025-01", "query: created:2025-03..2025-01: the range starts after it ends"),
        ("created:2025-01,2025-02", "query: created:2025-01,2025-02: give one date or a range"),
        ("created:>9999-12-31", "query: created:>9999-12-31: the date is out of range"),
        ("created:<0001-01-01", "query: created:<0001-01-01: the date is out of range"),
        ("updated:<99999y", 'query: updated:<99999y: "99999y" reaches back before year 1'),
        ("created:2025-01-01T10:00+25:00", 'query: created:2025-01-01T10:00+25:00: "2025-01-01T10:00+25:00" is'),
    ],
)
def test_a_value_a_field_cannot_take_is_refused_naming_the_values_it_can(query, message):
    with pytest.raises(SearchError) as refused:
        read(query, "simple", None, now=NOW)

    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(
    "field, params",
    [
        ("created:>2025-01-01", {"created_after": ["2025-01-02T00:00:00Z"]}),
        ("created:>=2025-01-01", {"created_after": ["2025-01-01T00:00:00Z"]}),
        ("created:<2025-01-01", {"created_before": ["2024-12-31T23:59:59.999999Z"]}),
        ("created:<=2025-01", {"created_before": ["2025-01-31T23:59:59.999999Z"]}),
        (
            "created:2024",
            {"created_after": ["2024-01-01T00:00:00Z"], "created_before": ["2024-12-31T23:59:59.999999Z"]},
        ),
        (
            "created:2025-01-01..2025-02",
            {"created_after": ["2025-01-01T00:00:00Z"], "created_before": ["2025-02-28T23:59:59.999999Z"]},
        ),
        ("created:2025-06-01..*", {"created_after": ["2025-06-01T00:00:00Z"]}),
        ("created:>2025-01-01T10:00:00+02:00", {"created_after": ["2025-01-01T08:00:00.000001Z"]}),
        # An age compares how old: <7d is "less than 7 days old", counted from this minute.
        ("updated:<7d", {"updated_after": ["2026-03-03T12:30:00Z"]}),
        ("updated:7d", {"updated_after": ["2026-03-03T12:30:00Z"]}),
        ("updated:>2w", {"updated_before": ["2026-02-24T12:30:00Z"]}),
        ("updated:<=3m", {"updated_after": ["2025-12-10T12:30:00Z"]}),
        ("updated:>=1y", {"updated_before": ["2025-03-10T12:30:00Z"]}),
        ("updated:<12h", {"updated_after": ["2026-03-10T00:30:00Z"]}),
        (
            "updated:30d..7d",
            {"updated_after": ["2026-02-08T12:30:00Z"], "updated_before": ["2026-03-03T12:30:00Z"]},
        ),
    ],
)
def test_dates_days_months_years_comparisons_ranges_and_ages(field, params):
    assert {param: values for _, param, values, _ in filters(f"{field} crash")} == params
    assert words(f"{field} crash") == "crash"


def test_a_corrected_query_keeps_its_fields_after_the_words():
    fielded = read("renwal severity:high kind:bug", "simple", None)

    assert fielded.with_words("renewal") == "renewal severity:high kind:bug"


# -- searching with them (the real database) ---------------------------------------------------


def bug(key, title, day, product="PRD-1", **fields):
    return {
        "kind": "bug",
        "key": key,
        "product": product,
        "title": title,
        "created_at": datetime(2026, 1, day, 9, 0, tzinfo=UTC).isoformat(),
        "updated_at": datetime(2026, 1, day, 9, 0, tzinfo=UTC).isoformat(),
        **fields,
    }


RECORDS = [
    {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile", "teams": ["tramline"]},
    {"kind": "product", "key": "PRD-2", "name": "Ledgerly"},
    {"kind": "feature", "key": "FEAT-1", "product": "PRD-1", "name": "Season pass renewal"},
    {"kind": "feature", "key": "FEAT-2", "product": "PRD-2", "name": "PDF export"},
    {
        "kind": "test",
        "key": "TEST-1",
        "product": "PRD-1",
        "feature": "FEAT-1",
        "title": "Renew an expired pass",
        "status": "active",
    },
    bug("BUG-1", "Renewal fails with a saved card", 5, feature="FEAT-1", severity="high", status="open"),
    bug("BUG-2", "Renewal spinner after login", 6, severity="medium", status="fixed"),
    bug("BUG-3", "Renewal crash on Android", 7, feature="FEAT-1", severity="critical", status="open"),
    bug("BUG-4", "Invoice PDF has the wrong VAT", 8, product="PRD-2", feature="FEAT-2", severity="critical"),
    bug("BUG-5", "Renewal of invoices is slow", 9, product="PRD-2", severity="low", status="accepted"),
    bug("BUG-6", "App closes on the pass screen", 10, feature="FEAT-1", severity="critical", status="fixed"),
]


@pytest.fixture
def backlog(db):
    records = [{k: v for k, v in record.items() if k != "teams"} for record in RECORDS]
    report = import_records(jsonl(*records).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def erin(backlog, django_user_model):
    """On Tramline's team only."""
    team = Group.objects.create(name="tramline")
    Product.objects.get(key="PRD-1").teams.add(team)
    user = django_user_model.objects.create_user("erin")
    user.groups.add(team)
    return user


def keys(query, user=None, **options):
    response = search(SearchRequest(query=query, mode="keyword", **options), user)
    return [hit.key for hit in response.results]


def test_fields_narrow_what_the_words_find(backlog):
    assert set(keys("renewal kind:bug")) == {"BUG-1", "BUG-2", "BUG-3", "BUG-5"}
    assert set(keys("renewal severity:critical,high")) == {"BUG-1", "BUG-3"}
    assert set(keys("renewal -severity:critical kind:bug")) == {"BUG-1", "BUG-2", "BUG-5"}
    assert {"FEAT-1", "TEST-1"} <= set(keys("renewal -severity:critical"))  # no severity: not excluded
    assert set(keys("renewal status:open status:accepted")) == {"BUG-1", "BUG-3", "BUG-5"}
    assert set(keys("renewal -status:fixed kind:bug")) == {"BUG-1", "BUG-3", "BUG-5"}
    assert set(keys("renewal created:>=2026-01-07 created:<2026-01-09")) == {"BUG-3"}


def test_products_and_features_by_key_or_name(backlog):
    assert set(keys('renewal product:"ledgerly"')) == {"BUG-5"}
    assert set(keys("renewal product:prd-2")) == {"BUG-5"}
    assert set(keys('renewal -product:"Tramline Mobile"')) == {"BUG-5"}
    assert set(keys("renewal feature:feat-1 kind:bug")) == {"BUG-1", "BUG-3"}
    assert set(keys('renewal feature:"season pass renewal" kind:bug')) == {"BUG-1", "BUG-3"}
    assert set(keys("renewal -feature:FEAT-1 kind:bug")) == {"BUG-2", "BUG-5"}


def test_fields_and_parameters_both_narrow(backlog):
    assert set(keys("renewal severity:critical", severity=["critical", "high"])) == {"BUG-3"}
    assert keys("renewal product:PRD-2", products=["PRD-1"]) == []
    assert set(keys("renewal status:open", entities=["bug"], products=["PRD-1"])) == {"BUG-1", "BUG-3"}


def test_the_response_echoes_the_fields_it_read(backlog):
    response = search(SearchRequest(query="renewal severity:critical,high -status:fixed", mode="keyword"))
    body = response.model_dump(mode="json")

    assert body["query"] == "renewal severity:critical,high -status:fixed"
    assert body["filters"] == [
        {"token": "severity:critical,high", "param": "severity", "values": ["critical", "high"]},
        {"token": "-status:fixed", "param": "status", "values": ["fixed"], "exclude": True},
    ]
    assert "filters" not in search(SearchRequest(query="renewal", mode="keyword")).model_dump(mode="json")


def test_fields_are_never_highlighted_nor_corrected(backlog):
    response = search(SearchRequest(query="renewl severity:critical", mode="keyword", detail="full"))

    assert response.corrected_query in ("renew severity:critical", "renewal severity:critical")
    assert [hit.key for hit in response.results] == ["BUG-3"]
    snippet = response.results[0].snippet
    highlighted = [snippet.text[h.start : h.end].lower() for h in snippet.highlights]
    assert highlighted and all("sever" not in word and "critical" not in word for word in highlighted)


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
@pytest.mark.parametrize("sort", ["relevant", "recent"])
def test_a_query_of_fields_alone_lists_what_they_keep_newest_first(backlog, mode, sort):
    response = search(SearchRequest(query="severity:critical", mode=mode, sort=sort, include_facets=True))

    assert [hit.key for hit in response.results] == ["BUG-6", "BUG-4", "BUG-3"]
    assert (response.total, response.total_exact, response.mode) == (3, True, mode)
    assert {f.value: f.count for f in response.facets.product} == {"PRD-1": 2, "PRD-2": 1}
    assert response.degraded is None


def test_a_listing_leaves_out_excluded_words_and_pages_with_its_cursor(backlog):
    first = search(SearchRequest(query="kind:bug -renewal", mode="keyword", limit=1))
    second = search(SearchRequest(query="kind:bug -renewal", mode="keyword", limit=1, cursor=first.next_cursor))

    assert [hit.key for hit in first.results + second.results] == ["BUG-6", "BUG-4"]
    assert (first.total, second.next_cursor) == (2, None)


def test_a_listing_past_the_exact_limit_is_counted_from_a_sample(backlog, settings):
    settings.SEARCH_RANKING = {"exact_limit": 2}

    response = search(SearchRequest(query="kind:bug", mode="keyword", detail="full"))

    assert [hit.key for hit in response.results] == ["BUG-6", "BUG-5", "BUG-4", "BUG-3", "BUG-2", "BUG-1"]
    assert response.total == 6  # every bucket read: a corpus this small is counted whole
    assert response.results[0].snippet is not None and response.results[0].snippet.highlights == []


def test_a_product_no_one_can_see_is_not_named_nor_found(erin):
    with pytest.raises(SearchError) as refused:
        keys("renewal product:ledgerly", erin)

    message = str(refused.value)
    assert message.startswith('query: product:ledgerly: "ledgerly" is not the key or name of a product you can see')
    assert "PRD-1 (Tramline Mobile)" in message and "Ledgerly" not in message and "PRD-2" not in message
    with pytest.raises(SearchError, match="no feature you can see has the key or name"):
        keys("feature:FEAT-2", erin)
    assert set(keys("kind:bug", erin)) == {"BUG-1", "BUG-2", "BUG-3", "BUG-6"}


FIELD_NAMES = st.sampled_from(["kind", "status", "severity", "created", "updated", "Kind", "foo", ""])
VALUES = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"[<>]?=?(\d{1,6}[hdwmyx]?|\d{4}(-\d{2}(-\d{2}(T\d{2}:\d{2}(:\d{2})?([+-]\d{2}:\d{2}|Z)?)?)?)?)"),
    st.sampled_from(["open,", ",", '"', '""', "..", "*..*", "bug,tests", "2025..7d", "-", "high,,low"]),
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), FIELD_NAMES, VALUES), max_size=4), st.text(max_size=20))
def test_any_text_is_read_or_refused_with_a_message(fields, text):
    query = " ".join([text, *(f"{'-' if negated else ''}{name}:{value}" for negated, name, value in fields)])
    try:
        fielded = read(query, "simple", None, now=NOW)
    except SearchError as refused:
        assert str(refused).startswith("query: ") and str(refused).endswith(".")
        return
    for item in fielded.filters:
        assert item.token in query and item.values
        for value in item.values if item.param.startswith(("created", "updated")) else []:
            datetime.fromisoformat(value)


def test_the_schemas_publish_the_echo(client):
    from search.contract import json_schema

    response = json_schema()["SearchResponse"]
    assert set(response["$defs"]["QueryFilter"]["properties"]) == {"token", "param", "values", "exclude"}
    openapi = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = openapi["components"]["schemas"]
    assert "filters" in components["SearchResponse"]["properties"] and "QueryFilter" in components


def test_the_products_parameter_follows_the_rule_of_product_in_the_query(backlog, erin):
    """One rule for both ways to name a product: by key or name, and one that names
    no product the user may see (none at all, or another team's) is a 400 listing those they may."""
    assert set(keys("renewal", products=["ledgerly"])) == {"BUG-5"}  # by name, any case
    assert set(keys("renewal", products=["prd-2"])) == {"BUG-5"}

    for unknown in ("PRD-999", "ledgerly"):  # one that does not exist; one Erin may not see
        with pytest.raises(SearchError) as as_parameter:
            keys("renewal", erin, products=[unknown])
        with pytest.raises(SearchError) as as_field:
            keys(f"renewal product:{unknown}", erin)
        why = str(as_field.value).removeprefix(f"query: product:{unknown}: ")
        assert str(as_parameter.value) == f"products: {why}"
        assert why.startswith(f'"{unknown}" is not the key or name of a product you can see: PRD-1 (Tramline Mobile)')


@pytest.mark.parametrize(
    "filterset, own",
    [("FeatureFilter", set()), ("QATestFilter", set()), ("BugFilter", {"test", "duplicate_of"})],
)
def test_the_record_lists_filter_by_the_search_filters_names(filterset, own):
    """One vocabulary (search.query.filters.FILTERS): a record list's filter is a search
    filter of the same name, and every search filter its records have, the list has."""
    from api import filters as list_filters
    from search.query.filters import FILTERS

    names = set(getattr(list_filters, filterset).base_filters) - own
    model = getattr(list_filters, filterset)._meta.model
    columns = {field.name for field in model._meta.get_fields()}
    applicable = {
        param
        for param, spec in FILTERS.items()
        if param != "entities" and (spec.kind not in ("token", "key") or spec.column.removesuffix("_id") in columns)
    }
    assert names <= set(FILTERS), f"{filterset} has filters search does not name: {names - set(FILTERS)}"
    assert applicable <= names, f"{filterset} lacks search filters: {applicable - names}"
