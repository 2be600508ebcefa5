"""Relevance evaluation: the metrics by hand, the judged-set loader, the
runner with a stand-in ranking, and once the real command on a real database.

The story: Tramline's season pass renewal is broken on Android. BUG-1 is the
report; BUG-2 is its duplicate, filed by someone else; BUG-3 is about the map,
and BUG-4 about prices. Someone searching for the renewal problem should find
BUG-1 and BUG-2 first.
"""

import io
import json
import math
import re
import tempfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from search.evaluation.metrics import average_precision, hit_at_k, ndcg_at_k, recall_at_k, reciprocal_rank_at_k
from search.evaluation.runner import evaluate
from search.evaluation.sets import JudgedSet, JudgedSetError, Query, QueryFailed, load_judged_set

from .conftest import jsonl

RECORDS = [
    {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"},
    {"kind": "bug", "key": "BUG-1", "product": "PRD-1", "title": "Renewal button does nothing on Android 14"},
    {"kind": "bug", "key": "BUG-2", "product": "PRD-1", "title": "Season pass cannot be renewed, tap is ignored"},
    {"kind": "bug", "key": "BUG-3", "product": "PRD-1", "title": "Map tiles load slowly on the metro"},
    {"kind": "bug", "key": "BUG-4", "product": "PRD-1", "title": "Season pass price shown twice at checkout"},
]
QUERIES = [
    {"id": "verbatim", "query": "Renewal button does nothing on Android 14"},
    {"id": "duplicate", "query": "renew pass broken", "entities": ["bug"], "exclude": ["BUG-1"]},
    {"id": "like-bug-1", "similar_to": "BUG-1"},
    {"id": "unjudged", "query": "dark mode"},
]
QRELS = "verbatim\tBUG-1\t3\nverbatim\tBUG-2\t2\nduplicate\tBUG-2\t3\nlike-bug-1\tBUG-2\t3\nlike-bug-1\tBUG-4\t1\n"
TYPES = "verbatim\ttitle\nduplicate\tparaphrase\nlike-bug-1\tsimilar\nunjudged\tparaphrase\n"


def write_set(folder, records=RECORDS, queries=QUERIES, qrels=QRELS, types=TYPES):
    folder.mkdir(exist_ok=True)
    (folder / "records.jsonl").write_text(jsonl(*records))
    (folder / "queries.jsonl").write_text(jsonl(*queries))
    (folder / "qrels.tsv").write_text(qrels)
    if types is not None:
        (folder / "query_types.tsv").write_text(types)
    return folder


def canned(rankings: dict[str, dict[str, list[str]]]):
    """A stand-in ranking: mode -> query id -> keys; a missing query fails."""

    def rank(query: Query, mode: str) -> list[str]:
        if query.id not in rankings[mode]:
            raise QueryFailed("the stand-in has no answer")
        return rankings[mode][query.id]

    return rank


# The metrics, by hand.


def test_ndcg_at_10_with_graded_gains():
    ranked = ["A", "B", "C"]  # grades 3, 0, 2
    grades = {"A": 3, "C": 2}
    # DCG  = 3/log2(2) + 0/log2(3) + 2/log2(4) = 3 + 0 + 1 = 4
    # IDCG = 3/log2(2) + 2/log2(3) = 3 + 1.26186 = 4.26186 (ideal order 3, 2)
    # nDCG = 4 / 4.26186 = 0.93856
    assert ndcg_at_k(ranked, grades, 10) == pytest.approx(0.93856, abs=1e-5)


def test_ndcg_is_one_in_the_ideal_order_and_blind_after_rank_10():
    assert ndcg_at_k(["A", "C", "B"], {"A": 3, "C": 2}) == pytest.approx(1.0)
    # C at rank 11 gains nothing: 3 / (3 + 2/log2(3))
    assert ndcg_at_k(["A", *"0123456789", "C"], {"A": 3, "C": 2}) == pytest.approx(3 / (3 + 2 / math.log2(3)))
    # The ideal ranks every judgment, found or not: grades 3, 3, 1 give
    # IDCG = 3 + 3/log2(3) + 1/log2(4) = 5.39279; X alone at rank 1 gives DCG 1.
    assert ndcg_at_k(["X"], {"X": 1, "Y": 3, "Z": 3}) == pytest.approx(1 / 5.39279, abs=1e-5)
    assert ndcg_at_k([], {"A": 3}) == 0.0


def test_recall_at_100():
    grades = {"A": 3, "B": 1, "N": 0}  # N was judged and found not relevant
    assert recall_at_k(["X", "Y"], grades) == 0.0
    assert recall_at_k(["N", "B"], grades) == 0.5
    assert recall_at_k([*(f"X{i}" for i in range(99)), "A", "B"], grades) == 0.5  # B is at rank 101
    assert recall_at_k(["B", "A"], grades) == 1.0


def test_mrr_at_10():
    grades = {"R": 1, "N": 0}
    assert reciprocal_rank_at_k(["X", "N", "R"], grades) == pytest.approx(1 / 3)
    assert reciprocal_rank_at_k([*"0123456789", "R"], grades) == 0.0  # rank 11
    assert reciprocal_rank_at_k([*"012345678", "R"], grades) == pytest.approx(0.1)  # rank 10
    assert reciprocal_rank_at_k([], grades) == 0.0


# The runner, with a stand-in ranking.


def in_memory_set(queries: list[Query], grades: dict, types: dict | None = None) -> JudgedSet:
    return JudgedSet("memory", records=[], queries=queries, grades=grades, types=types or {})


def test_excluded_keys_are_removed_before_cutting_at_10_and_100():
    fillers = [f"X{i}" for i in range(200)]
    judged_set = in_memory_set(
        [Query("top10", "q", exclude=frozenset({"SELF"})), Query("top100", "q", exclude=frozenset({"SELF"}))],
        {"top10": {"R": 1, "SELF": 3}, "top100": {"R": 1}},
    )
    # With SELF dropped, R moves from rank 11 to 10, and from 101 to 100.
    rank = canned({"keyword": {"top10": ["SELF", *fillers[:9], "R"], "top100": ["SELF", *fillers[:99], "R", "SELF"]}})

    report = evaluate(judged_set, rank, ["keyword"])

    top10, top100 = report.runs["keyword"].scores["top10"], report.runs["keyword"].scores["top100"]
    assert top10["mrr@10"] == pytest.approx(0.1)
    # The excluded SELF still counts in the ideal: (1/log2(11)) / (3/log2(2) + 1/log2(3))
    assert top10["ndcg@10"] == pytest.approx((1 / math.log2(11)) / (3 + 1 / math.log2(3)))
    assert top100["recall@100"] == 1.0
    assert top100["mrr@10"] == 0.0


def test_repeated_keys_count_once():
    judged_set = in_memory_set([Query("q", "text")], {"q": {"A": 3}})
    report = evaluate(judged_set, canned({"keyword": {"q": ["A", "A", "A"]}}), ["keyword"])
    assert report.runs["keyword"].scores["q"]["ndcg@10"] == pytest.approx(1.0)


def test_queries_without_a_relevant_judgment_are_skipped_and_never_ranked():
    asked = []

    def rank(query, mode):
        asked.append(query.id)
        return ["A"]

    judged_set = in_memory_set(
        [Query("found", "a"), Query("only-grade-0", "b"), Query("no-lines", "c")],
        {"found": {"A": 2}, "only-grade-0": {"A": 0}},
    )
    report = evaluate(judged_set, rank, ["keyword"])

    assert asked == ["found"]
    assert report.skipped == ["only-grade-0", "no-lines"]
    assert report.mean("keyword") == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}


def test_a_set_with_no_relevant_judgment_at_all_is_an_error():
    with pytest.raises(JudgedSetError, match="no query has a relevant judgment"):
        evaluate(in_memory_set([Query("q", "text")], {}), canned({"keyword": {}}), ["keyword"])


def test_metrics_are_averaged_per_query_type():
    judged_set = in_memory_set(
        [Query("t1", "a"), Query("t2", "b"), Query("p1", "c"), Query("untyped", "d")],
        {qid: {"R": 1} for qid in ("t1", "t2", "p1", "untyped")},
        types={"t1": "title", "t2": "title", "p1": "paraphrase"},
    )
    hit, miss = ["R"], ["X"]
    report = evaluate(judged_set, canned({"keyword": {"t1": hit, "t2": miss, "p1": hit, "untyped": miss}}), ["keyword"])

    assert report.by_type() == {"title": ["t1", "t2"], "paraphrase": ["p1"]}
    by_type = report.to_json()["by_type"]
    assert by_type["title"]["keyword"]["mrr@10"] == 0.5
    assert by_type["paraphrase"]["keyword"]["mrr@10"] == 1.0
    assert report.mean("keyword")["mrr@10"] == 0.5  # all four, typed or not


def test_evaluate_a_judged_set_from_files_end_to_end(tmp_path):
    judged_set = load_judged_set(write_set(tmp_path / "tramline"))
    rank = canned(
        {
            # keyword gets the verbatim title right and the paraphrase wrong;
            # "like-bug-1" has no answer (think: SearchError) and scores 0.
            "keyword": {"verbatim": ["BUG-1", "BUG-2"], "duplicate": ["BUG-1", "BUG-3", "BUG-4"]},
            # semantic: BUG-2 ahead of BUG-1, and the excluded BUG-1 ahead of BUG-2.
            "semantic": {
                "verbatim": ["BUG-2", "BUG-1"],
                "duplicate": ["BUG-1", "BUG-2"],
                "like-bug-1": ["BUG-4", "BUG-3", "BUG-2"],
            },
        }
    )

    report = evaluate(judged_set, rank, ["keyword", "semantic"])
    result = report.to_json()

    assert set(result) == {"modes", "by_type", "meta"}
    assert set(result["modes"]) == {"keyword", "semantic"}
    assert set(result["by_type"]) == {"title", "paraphrase", "similar"}
    assert set(result["by_type"]["title"]) == {"keyword", "semantic"}
    assert set(result["modes"]["keyword"]) == {"ndcg@10", "recall@100", "mrr@10"}

    keyword, semantic = result["modes"]["keyword"], result["modes"]["semantic"]
    # keyword: verbatim 1, duplicate 0 (BUG-1 excluded, BUG-2 missing), like-bug-1 failed: 0.
    assert keyword["mrr@10"] == pytest.approx(1 / 3)
    assert keyword["recall@100"] == pytest.approx(1 / 3)
    assert keyword["ndcg@10"] == pytest.approx(1 / 3)
    # semantic: verbatim ranks 2 then 3: DCG 2 + 3/log2(3) against IDCG 3 + 2/log2(3);
    # duplicate: BUG-2 first once BUG-1 is gone (1.0); like-bug-1: BUG-4 (1) then
    # BUG-3 (0) then BUG-2 (3): DCG 1 + 3/2 = 2.5 against IDCG 3 + 1/log2(3).
    verbatim = (2 + 3 / math.log2(3)) / (3 + 2 / math.log2(3))
    like_bug_1 = 2.5 / (3 + 1 / math.log2(3))
    assert semantic["ndcg@10"] == pytest.approx((verbatim + 1.0 + like_bug_1) / 3)
    assert semantic["recall@100"] == 1.0
    assert semantic["mrr@10"] == 1.0
    assert result["by_type"]["similar"]["semantic"]["ndcg@10"] == pytest.approx(like_bug_1)

    assert report.runs["keyword"].failures == {"like-bug-1": "the stand-in has no answer"}
    assert result["meta"]["skipped_without_relevant"] == 1  # "unjudged"
    assert result["meta"]["queries_by_type"] == {"title": 1, "paraphrase": 1, "similar": 1}


# Loading a judged set.


def test_load_judged_set_reads_queries_judgments_and_types(tmp_path):
    judged_set = load_judged_set(write_set(tmp_path / "tramline"))

    assert judged_set.name == "tramline"
    assert len(judged_set.records) == 5
    assert judged_set.queries[1] == Query(
        "duplicate", "renew pass broken", entities=["bug"], exclude=frozenset({"BUG-1"})
    )
    assert judged_set.queries[2] == Query("like-bug-1", similar_to="BUG-1")
    assert judged_set.grades["like-bug-1"] == {"BUG-2": 3, "BUG-4": 1}
    assert judged_set.types["unjudged"] == "paraphrase"


def test_query_types_are_optional(tmp_path):
    assert load_judged_set(write_set(tmp_path / "untyped", types=None)).types == {}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"qrels": "verbatim\tBUG-1\t3\nverbatim BUG-2 2\n"}, r"qrels\.tsv line 2: expected query_id<TAB>record_key"),
        ({"qrels": "verbatim\tBUG-1\thigh\n"}, r"qrels\.tsv line 1: the grade must be 0, 1, 2 or 3"),
        ({"qrels": "\nverbatim\tBUG-9\t1\n"}, r"qrels\.tsv line 2: BUG-9 is not in records\.jsonl"),
        ({"qrels": "nosuch\tBUG-1\t1\n"}, r"qrels\.tsv line 1: query nosuch is not in queries\.jsonl"),
        ({"qrels": "verbatim\tBUG-1\t3\nverbatim\tBUG-1\t2\n"}, r"qrels\.tsv line 2: verbatim judges BUG-1 twice"),
        ({"types": "verbatim\n"}, r"query_types\.tsv line 1: expected query_id<TAB>type"),
        ({"queries": [{"id": "q", "query": "a", "similar_to": "BUG-1"}]}, r"queries\.jsonl line 1: give exactly one"),
        ({"queries": [{"id": "q", "similar_to": "BUG-9"}]}, r"queries\.jsonl line 1: similar_to BUG-9 is not in"),
        (
            {"queries": [{"id": "q", "query": "a", "entity": ["bug"]}]},
            r"queries\.jsonl line 1: unknown field\(s\) entity",
        ),
        ({"queries": [{"id": "q", "query": "a", "entities": ["bugs"]}]}, r"queries\.jsonl line 1: \"entities\" must"),
        ({"queries": [{"id": "q", "query": "a"}, {"id": "q", "query": "b"}]}, r"queries\.jsonl: query ids must be"),
    ],
)
def test_a_malformed_judged_set_is_refused_naming_the_file_and_line(tmp_path, change, message):
    if "queries" in change:
        change = {"qrels": "", "types": None, **change}
    with pytest.raises(JudgedSetError, match=message):
        load_judged_set(write_set(tmp_path / "broken", **change))


def test_a_missing_folder_or_file_is_refused(tmp_path):
    with pytest.raises(JudgedSetError, match="no such folder"):
        load_judged_set(tmp_path / "nowhere")
    folder = write_set(tmp_path / "no-qrels")
    (folder / "qrels.tsv").unlink()
    with pytest.raises(JudgedSetError, match=r"qrels\.tsv: no such file"):
        load_judged_set(folder)


def test_a_line_that_is_not_json_is_refused(tmp_path):
    folder = write_set(tmp_path / "broken")
    (folder / "queries.jsonl").write_text('{"id": "q", "query": "a"}\n{"id": "r", \n')
    with pytest.raises(JudgedSetError, match=r"queries\.jsonl line 2: not JSON"):
        load_judged_set(folder)


def test_the_duplicate_detection_measures():
    grades = {"BUG-2": 1, "BUG-9": 1}

    assert hit_at_k(["BUG-1", "BUG-2"], grades, 1) == 0.0
    assert hit_at_k(["BUG-1", "BUG-2"], grades, 2) == 1.0
    # Relevant at ranks 2 and 4: (1/2 + 2/4) / 2; one never found counts 0.
    assert average_precision(["BUG-1", "BUG-2", "BUG-3", "BUG-9"], grades) == pytest.approx(0.5)
    assert average_precision(["BUG-2"], grades) == pytest.approx(0.5)
    assert average_precision([], grades) == 0.0


# The real command, on a database of its own.


@pytest.mark.django_db(transaction=True)
def test_search_eval_scores_check_duplicates_on_the_title_queries(tmp_path):
    records = [
        *RECORDS,
        {
            "kind": "bug",
            "key": "BUG-5",
            "product": "PRD-1",
            "title": "Unresponsive control",
            "description": "Pressing the renewal button on Android does nothing at all",
        },
    ]
    queries = [{"id": "t5", "query": "Unresponsive control", "exclude": ["BUG-5"]}, QUERIES[2]]
    folder = write_set(
        tmp_path / "dups", records=records, queries=queries, qrels="t5\tBUG-1\t1\nlike-bug-1\tBUG-2\t3\n",
        types="t5\ttitle\nlike-bug-1\tsimilar\n",
    )  # fmt: skip
    out, stdout = tmp_path / "result.json", io.StringIO()

    call_command(
        "search_eval", str(folder), "--modes", "keyword", "--duplicates", "--json", str(out),
        "--database-name", "search_eval_pytest", "--no-progress", stdout=stdout,
    )  # fmt: skip

    duplicates = json.loads(out.read_text())["duplicates"]
    assert duplicates["meta"]["scored"] == 1  # the similar_to query is not a draft
    runs = duplicates["modes"]
    assert list(runs) == ["search:in-corpus", "search", "check:title", "check:title+text"]
    assert set(runs["check:title"]) == {"recall@5", "recall@10", "mrr@10", "rr@10", "map"}
    # The title alone shares no word with BUG-1; the report's text does.
    assert runs["check:title"]["rr@10"] == 0.0
    assert runs["check:title+text"]["mrr@10"] == 1.0
    assert re.search(r"^check:title\+text +1\.000 +1\.000 +1\.000 +1\.000 +1\.000", stdout.getvalue(), re.MULTILINE)


@pytest.mark.django_db(transaction=True)
def test_search_eval_command_in_keyword_mode(tmp_path):
    pytest.importorskip("search.operations.search")
    folder = write_set(tmp_path / "tramline")
    out = tmp_path / "result.json"

    stdout = io.StringIO()
    call_command(
        "search_eval", str(folder), "--modes", "keyword", "--json", str(out),
        "--database-name", "search_eval_pytest", "--no-progress", stdout=stdout,
    )  # fmt: skip

    result = json.loads(out.read_text())
    assert set(result) >= {"modes", "by_type"}
    assert list(result["modes"]) == ["keyword"]
    assert set(result["modes"]["keyword"]) == {"ndcg@10", "recall@100", "mrr@10"}
    assert set(result["by_type"]) == {"title", "paraphrase", "similar"}
    # "verbatim" is the only title query, and its text is BUG-1's title.
    assert result["by_type"]["title"]["keyword"]["mrr@10"] == 1.0
    assert re.search(r"^keyword +\d\.\d{3} +\d\.\d{3} +\d\.\d{3} ", stdout.getvalue(), re.MULTILINE)
    assert "grade(i) / log2(i + 1)" in stdout.getvalue()


def test_search_eval_refuses_a_malformed_set_without_touching_a_database(tmp_path):
    pytest.importorskip("search.operations.search")
    folder = write_set(tmp_path / "broken", qrels="verbatim BUG-1 3\n")
    with pytest.raises(CommandError, match=r"qrels\.tsv line 1"):
        call_command("search_eval", str(folder), "--modes", "keyword")


def test_the_engine_ranking_pages_on_until_enough_keys_survive_the_exclusions(monkeypatch):
    pytest.importorskip("search.operations.search")
    from types import SimpleNamespace

    from search.evaluation import runner

    pages = {None: ["SELF", "A"], "2": ["B", "C"], "3": ["D"]}
    asked = []

    def paged_search(request, user=None):
        asked.append(request.cursor)
        hits = [SimpleNamespace(key=key) for key in pages[request.cursor]]
        following = {None: "2", "2": "3"}.get(request.cursor)
        return SimpleNamespace(results=hits, next_cursor=following, mode="keyword")

    monkeypatch.setattr(runner, "search", paged_search)
    monkeypatch.setattr(runner, "DEPTH", 3)  # as if 100 were 3

    ranking = runner.EngineRanking()
    keys = ranking(Query("q", "renewal", exclude=frozenset({"SELF"})), "keyword")

    # Page one leaves one key once SELF is excluded; page two makes three: stop.
    assert keys == ["SELF", "A", "B", "C"]
    assert asked == [None, "2"]
    assert ranking.fallbacks == {}
    with pytest.raises(QueryFailed, match="2 to 500 characters"):
        ranking(Query("short", "x"), "keyword")


def filed(month: int, record: dict) -> dict:
    return {**record, "created_at": f"2026-{month:02d}-01T09:00:00Z"}


@pytest.mark.django_db(transaction=True)
def test_search_eval_from_links_judges_search_on_the_databases_own_duplicate_links():
    records = [
        RECORDS[0], *(filed(1, record) for record in RECORDS[1:]),
        {"kind": "product", "key": "PRD-2", "name": "Ledgerly"},
        filed(2, {"kind": "bug", "key": "BUG-5", "product": "PRD-1", "title": "Renew button ignored on Android 14",
                  "duplicate_of": "BUG-1"}),
        filed(3, {"kind": "bug", "key": "BUG-6", "product": "PRD-1", "title": "Android 14: tapping Renew does nothing",
                  "duplicate_of": "BUG-5"}),
        filed(1, {"kind": "bug", "key": "BUG-7", "product": "PRD-2", "title": "Invoice total wrong"}),
        filed(2, {"kind": "bug", "key": "BUG-8", "product": "PRD-2", "title": "Invoice totals are wrong",
                  "duplicate_of": "BUG-7"}),
    ]  # fmt: skip
    from backlog.imports import import_records

    assert import_records(jsonl(*records).splitlines()).written
    stdout, out = io.StringIO(), Path(tempfile.mkdtemp()) / "links.json"

    call_command("search_eval", "--from-links", "--modes", "keyword", "--json", str(out), stdout=stdout)
    tramline = io.StringIO()
    call_command("search_eval", "--from-links", "--product", "PRD-2", "--modes", "keyword", stdout=tramline)

    result = json.loads(out.read_text())
    # BUG-5, BUG-6 (a chain to BUG-1) and BUG-8 are queries; each one's cluster filed before it is relevant.
    assert result["meta"]["queries"] == 3 and result["duplicates"]["meta"]["scored"] == 3
    assert result["modes"]["keyword"]["recall@100"] == 1.0
    assert "duplicate links: queries scored: 3" in stdout.getvalue()
    assert "Duplicate finding: 3 queries" in stdout.getvalue()
    assert "duplicate links of PRD-2: queries scored: 1" in tramline.getvalue()


def test_a_teams_links_are_judged_as_it_met_them_never_against_the_future(db):
    """Issue 50, item 1: each linked bug is ranked among the records filed before it, and
    only its cluster's earlier bugs are relevant; one filed before all of its cluster asks nothing."""
    from backlog.imports import import_records
    from search.evaluation.runner import DuplicateRanking, EngineRanking
    from search.evaluation.sets import judged_set_from_links

    records = [
        RECORDS[0],
        filed(1, {"kind": "bug", "key": "BUG-1", "product": "PRD-1", "title": "Renew button does nothing"}),
        filed(3, {"kind": "bug", "key": "BUG-5", "product": "PRD-1", "title": "Renew button ignored",
                  "duplicate_of": "BUG-1"}),
        filed(2, {"kind": "bug", "key": "BUG-6", "product": "PRD-1", "title": "Tapping Renew button does nothing",
                  "duplicate_of": "BUG-5"}),
        filed(1, {"kind": "bug", "key": "BUG-10", "product": "PRD-1", "title": "Map tiles are blank",
                  "duplicate_of": "BUG-11"}),
        filed(4, {"kind": "bug", "key": "BUG-11", "product": "PRD-1", "title": "Blank map tiles"}),
    ]  # fmt: skip
    assert import_records(jsonl(*records).splitlines()).written

    judged = judged_set_from_links()

    assert {query.id: judged.grades[query.id] for query in judged.queries} == {
        "link-BUG-5": {"BUG-1": 1, "BUG-6": 1},  # both filed before it
        "link-BUG-6": {"BUG-1": 1},  # BUG-5, its link, came a month later
    }  # BUG-10 came before BUG-11: nothing to find then
    bug_6 = next(query for query in judged.queries if query.id == "link-BUG-6")
    for ranked in (EngineRanking()(bug_6, "keyword"), DuplicateRanking()(bug_6, "check:title+text")):
        ranked = [key for key in ranked if key not in bug_6.exclude]  # as the metrics leave it out
        assert ranked and set(ranked) <= {"BUG-1", "BUG-10"}  # nothing filed after BUG-6
        assert ranked[0] == "BUG-1"


def test_search_eval_from_links_says_what_is_missing(db):
    with pytest.raises(CommandError, match="no bug is linked as a duplicate"):
        call_command("search_eval", "--from-links")
    with pytest.raises(CommandError, match="--product NOPE: no such product"):
        call_command("search_eval", "--from-links", "--product", "NOPE")
    with pytest.raises(CommandError, match="not both"):
        call_command("search_eval", "somewhere", "--from-links")
    with pytest.raises(CommandError, match="--product goes with --from-links"):
        call_command("search_eval", "somewhere", "--product", "PRD-1")
