"""The ranking's constants: one validated object, overridden only through
SEARCH_RANKING, and refused at start when a value is wrong."""

import re
from pathlib import Path

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from backlog.imports import import_records
from config.settings import envjson
from search.contract import SearchRequest
from search.operations.search import search
from search.ranking import config
from search.ranking.config import RankingConfig

from .conftest import jsonl
from .test_search import bug, t

SETTINGS_DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def test_the_system_check_is_registered_and_quiet_on_the_defaults():
    assert config.check in checks.registry.registry.get_checks()
    assert config.check() == []
    assert config.current() == RankingConfig()


@pytest.mark.parametrize(
    "overrides, said",
    [
        ({"rank_weights": "a,b"}, "rank_weights to 'a,b'; it must be 4 numbers, each from 0 to 1"),
        ({"rank_weights": [0.1, 0.2, 0.6, 1.5]}, "rank_weights to [0.1, 0.2, 0.6, 1.5]; it must be 4 numbers"),
        ({"arm_depth": -1}, "arm_depth to -1; it must be a whole number of at least 1 (default 200)"),
        ({"hnsw_ef_search": 5000}, "hnsw_ef_search to 5000; it must be a whole number from 1 to 1000"),
        ({"recency_half_life": 0}, "recency_half_life to 0; it must be a number above 0"),
        ({"rrfk": 10}, "names 'rrfk', which is not a ranking constant; they are: fusion, zscore_depth, rrf_k, "),
        ({"fusion": "combsum"}, "fusion to 'combsum'; it must be one of zscore, rrf (default \"zscore\")"),
    ],
)
def test_a_bad_value_fails_the_system_check_naming_the_field(overrides, said):
    with override_settings(SEARCH_RANKING=overrides):
        problems = config.check()
        with pytest.raises(ImproperlyConfigured, match=re.escape(said)):
            config.current()  # a search that came before any check would not run on it either

    assert [(p.id, p.level) for p in problems] == [("search.E001", checks.ERROR)]
    assert said in problems[0].msg


def test_each_bad_field_is_its_own_error():
    with override_settings(SEARCH_RANKING={"arm_depth": 0, "title_boost": -1, "rrf_k": 10}):
        problems = config.check()

    assert [p.msg.split(" to ")[0] for p in problems] == [
        "SEARCH_RANKING sets title_boost",
        "SEARCH_RANKING sets arm_depth",
    ]


def test_a_variable_that_used_to_set_a_constant_is_named_as_ignored(monkeypatch):
    monkeypatch.setenv("SEARCH_ARM_DEPTH", "300")

    problems = config.check()

    assert [(p.id, p.level) for p in problems] == [("search.W001", checks.WARNING)]
    assert problems[0].msg.startswith("SEARCH_ARM_DEPTH is set but no longer read: arm_depth is a ranking constant")
    assert """SEARCH_RANKING='{"arm_depth": ...}'""" in problems[0].hint


def test_the_environment_variable_holds_json(monkeypatch):
    monkeypatch.setenv("SEARCH_RANKING", '{"rrf_k": 10, "rank_weights": "0.1,0.2,0.6,0.9"}')
    overrides = envjson("SEARCH_RANKING", {})

    assert config.build(overrides).rrf_k == 10
    assert config.build(overrides).rank_weights == (0.1, 0.2, 0.6, 0.9)
    monkeypatch.setenv("SEARCH_RANKING", "rrf_k=10")
    with pytest.raises(ImproperlyConfigured, match="SEARCH_RANKING='rrf_k=10': use JSON"):
        envjson("SEARCH_RANKING", {})


def test_the_object_is_built_once_and_again_when_the_setting_changes():
    assert config.current() is config.current()
    with override_settings(SEARCH_RANKING={"rrf_k": 10}):
        assert config.current().rrf_k == 10
    assert config.current().rrf_k == 20


def test_docs_give_each_field_one_line_with_its_default():
    """docs/settings.md, "Ranking constants": | `name` | `default as JSON` | what it does |."""
    text = SETTINGS_DOC.read_text(encoding="utf-8").split("## Ranking constants", 1)[1]
    documented = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", text, flags=re.MULTILINE))

    assert documented == {name: config.default_json(name) for name in RankingConfig.model_fields}


# -- an override changes what a search returns ------------------------------------------------


@pytest.mark.django_db
def test_without_the_title_boost_an_exact_title_is_no_longer_first(settings):
    # Carol's report is titled as the query, and its long story is about something else;
    # Dave's title says the query's words and little more.
    story = (
        "The app was updated this morning and the screen on my phone stayed grey "
        "while I waited at the station for the tram to arrive, then it closed."
    )
    records = [
        {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"},
        bug("BUG-1", "Payment spinner", day=3, description=story),
        bug("BUG-2", "Payment spinner stuck", day=3),
    ]
    assert import_records(jsonl(*records).splitlines()).written

    def order():
        response = search(SearchRequest(query="payment spinner", mode="keyword", include_scores=True))
        return [hit.key for hit in response.results]

    assert order() == ["BUG-1", "BUG-2"]  # the exact title, boosted by title_boost / k
    settings.SEARCH_RANKING = {"title_boost": 0}
    assert order() == ["BUG-2", "BUG-1"]  # the words alone prefer Dave's shorter report


@pytest.mark.django_db
def test_recency_is_off_by_default_and_puts_the_newer_of_two_equal_reports_first_when_on(settings):
    records = [
        {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"},
        bug("BUG-1", "Payment spinner stuck", day=1, updated_at=t(1)),
        bug("BUG-2", "Payment spinner stuck", day=20, updated_at=t(20)),
    ]
    assert import_records(jsonl(*records).splitlines()).written

    def hits():
        return search(SearchRequest(query="payment spinner", mode="keyword", include_scores=True)).results

    off = hits()
    assert [hit.key for hit in off] == ["BUG-1", "BUG-2"]  # equal scores: the older id first
    assert off[0].score == off[1].score and not any("recency" in hit.scores.boosts for hit in off)
    settings.SEARCH_RANKING = {"recency_weight": 0.02}
    on = hits()
    assert [hit.key for hit in on] == ["BUG-2", "BUG-1"]
    assert 1 < on[1].scores.boosts["recency"] < on[0].scores.boosts["recency"] <= 1.02
