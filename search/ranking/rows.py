"""What an arm returns: ranked rows, with what fusion needs of each.

Every ranked row comes back with its RowInfo, read in the arm's own pass
over the row: fusion, the boosts and sort=recent never visit the candidates
a second time.
"""

from dataclasses import dataclass, field

from search import db
from search.indexing.embeddings import active_model_id
from search.ranking import facets, layout


@dataclass(frozen=True)
class RowInfo:
    updated: float  # epoch seconds
    created: float
    has_vector: bool  # a vector of the active embedding model
    title: str


@dataclass
class ArmResult:
    ranked: list[tuple[int, float]]  # (document id, score), best first
    total: int
    exact: bool
    facets: dict[str, dict[str, int]]
    query: str = ""  # the tsquery the match set was defined by
    info: dict[int, RowInfo] = field(default_factory=dict)  # of the ranked rows
    # Semantic arm in hybrid: its rows outside the keyword match set, by id:
    # (kind, product id, status, severity), for the total and the facets.
    outside_rows: dict[int, tuple] = field(default_factory=dict)
    vector: object = None  # semantic arm: the query's vector
    # Keyword arm: how it widened a query few records match in full (contract.Relaxed.how),
    # and how many do.
    relaxed: str | None = None
    matched_all: int | None = None


def info_columns(alias: str) -> str:
    """RowInfo's columns of search_document `alias`, for a ranked row's SELECT;
    its one parameter comes from `info_params()`."""
    return (
        f"extract(epoch FROM {alias}.updated_at)::float8 AS info_updated, "
        f"extract(epoch FROM {alias}.created_at)::float8 AS info_created, "
        f"({alias}.embedding IS NOT NULL AND {alias}.embedding_model = %(active_model)s) AS info_vector, "
        f"{alias}.title AS info_title"
    )


def info_params() -> dict:
    return {"active_model": active_model_id()}


def ranked_json(alias: str) -> str:
    """The rows of `alias` (id, score and info_columns) as one JSON array, best first."""
    return (
        f"json_agg(json_build_array({alias}.id, {alias}.score, {alias}.info_updated, {alias}.info_created, "
        f"{alias}.info_vector, {alias}.info_title) ORDER BY {alias}.score DESC, {alias}.id)"
    )


def best_rows_json(source: str) -> str:
    """ranked_json of the best %(depth)s rows of `source` (columns id, tid, score).
    RowInfo is read for those rows only, through their ctid (a TID join:
    the same snapshot, the same tuples): carrying it for every match
    through the ranking costs more. The id is checked too: a ctid names a
    tuple of one table, and on Citus each shard is a table of its own, so
    the same ctid names a row in every shard."""
    return (
        f"SELECT {ranked_json('r')} FROM (SELECT t.id, t.score, {info_columns('d')} "
        f"FROM (SELECT * FROM {source} ORDER BY score DESC, id LIMIT %(depth)s) t "
        "JOIN search_document d ON d.ctid = t.tid AND d.id = t.id) r"
    )


# What `gather` reads of each row of `d`, before its info_columns: the facet columns and the score.
GATHERED_COLUMNS = "d.id, d.kind, d.product_id, d.status, d.severity"


def gather(sql: str, params: dict, depth: int) -> tuple[int, list, list[tuple[int, float]], dict[int, RowInfo]]:
    """Run `sql` (rows of GATHERED_COLUMNS, a score, then info_columns) and
    do here what one statement does on one server over a match set: (how
    many rows, their FACETS_SQL rows, the best `depth` of them as (id, score)
    best first, their RowInfo). For a distributed table: Citus runs such a
    statement as a string of subplans, each a round trip, and the join back
    to the rows by ctid as one more to every shard; the rows themselves
    come in one, each with what the page needs of it."""
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    best = sorted(rows, key=lambda row: (-row[5], row[0]))[:depth]
    ranked = [(int(row[0]), float(row[5])) for row in best]
    info = {int(row[0]): RowInfo(float(row[6]), float(row[7]), row[8], row[9]) for row in best}
    return len(rows), facets.grouped(row[1:5] for row in rows), ranked, info


def match_set(
    score: str, matches: str, params: dict, depth: int, over_cap: str | None = None
) -> tuple[int, list | None, list[tuple[int, float]], dict[int, RowInfo], object]:
    """The rows of `matches` ("FROM search_document d WHERE ..."), at most
    %(cap)s + 1, each scored by `score` (SQL over `d`): (how many, their
    FACETS_SQL rows, the best %(depth)s as (id, score) best first, their
    RowInfo, `over_cap`'s value). One statement; the facets and the best rows
    only mean something when there are at most %(cap)s, and `over_cap` (SQL
    over the match set `m`, read when there are more) is None on a distributed
    table, where `gather` reads the rows themselves."""
    if layout.distributed():
        sql = f"SELECT {GATHERED_COLUMNS}, {score} AS score, {info_columns('d')} {matches} LIMIT %(cap)s::int + 1"
        return (*gather(sql, params, depth), None)
    extra = f", CASE WHEN (SELECT c FROM n) > %(cap)s THEN ({over_cap}) END" if over_cap else ""
    with db.cursor() as cursor:
        cursor.execute(
            f"""
            WITH m AS MATERIALIZED (
                SELECT d.id, d.ctid AS tid, d.kind, d.product_id, d.status, d.severity, {score} AS score
                {matches}
                LIMIT %(cap)s::int + 1
            ), n AS (SELECT count(*) AS c FROM m)
            SELECT
                (SELECT c FROM n),
                CASE WHEN (SELECT c FROM n) <= %(cap)s THEN ({facets.FACETS_SQL.format(source="m")}) END,
                CASE WHEN (SELECT c FROM n) <= %(cap)s THEN ({best_rows_json("m")}) END
                {extra}
            """,
            params,
        )
        count, facet_rows, rows, *over = cursor.fetchone()
    return (count, facet_rows, *parse_ranked(rows), over[0] if over else None)


def parse_ranked(rows) -> tuple[list[tuple[int, float]], dict[int, RowInfo]]:
    """(id, score) pairs and RowInfo from ranked_json's array."""
    pairs, info = [], {}
    for pk, score, updated, created, has_vector, title in rows or []:
        pairs.append((int(pk), float(score)))
        info[int(pk)] = RowInfo(float(updated), float(created), has_vector, title)
    return pairs, info


def row_info(ids) -> dict[int, RowInfo]:
    """RowInfo of rows no arm ranked (a key match, a typo fallback's titles)."""
    if not ids:
        return {}
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT {ranked_json('r')} FROM (SELECT d.id, 0 AS score, {info_columns('d')} "
            "FROM search_document d WHERE d.id = ANY(%(ids)s)) r",
            {"ids": list(ids), **info_params()},
        )
        return parse_ranked(cursor.fetchone()[0])[1]
