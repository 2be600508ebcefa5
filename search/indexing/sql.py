"""The triggers that keep `search_document` in step with the record tables.

For each kind, statement-level AFTER triggers with transition tables upsert
(or delete) the changed rows' index entries in one statement, whatever wrote
them: the ORM, bulk_create, queryset.update(), raw SQL or the importer's
INSERT ... ON CONFLICT. TRUNCATE empties that kind's entries.

The weighted text follows the search design: A = title or name; B =
descriptions, acceptance criteria, steps, actual and expected results; D =
environment. `body` is the non-title text, kept for the embedding worker and
for snippets; `content_hash` is the md5 of the text that gets embedded, so a
row whose embedding is stale is one comparison away.
"""

from search import citus

TEXT_SEARCH_CONFIG = "english"

# Each kind's table and the index row's columns, as SQL over the record `r`.
# `fields` are its text fields after the title, in the order a snippet
# prefers them, each with its tsvector weight (the title is A): the index
# text, the embedded body and the snippets are all made of these.
KINDS = {
    "product": {
        "table": "backlog_product",
        "product_id": "r.id",
        "feature_id": "NULL::bigint",
        "title": "r.name",
        "status": "NULL",
        "severity": "NULL",
        "fields": {"description": ("r.description", "B")},
    },
    "feature": {
        "table": "backlog_feature",
        "product_id": "r.product_id",
        "feature_id": "r.id",
        "title": "r.name",
        "status": "NULL",
        "severity": "NULL",
        "fields": {"description": ("r.description", "B"), "acceptance_criteria": ("r.acceptance_criteria", "B")},
    },
    "test": {
        "table": "backlog_test",
        "product_id": "r.product_id",
        "feature_id": "r.feature_id",
        "title": "r.title",
        "status": "r.status",
        "severity": "NULL",
        "fields": {"description": ("r.description", "B"), "steps": ("array_to_string(r.steps, E'\\n')", "B")},
    },
    "bug": {
        "table": "backlog_bug",
        "product_id": "r.product_id",
        "feature_id": "r.feature_id",
        "title": "r.title",
        "status": "r.status",
        "severity": "r.severity",
        "fields": {
            "description": ("r.description", "B"),
            "actual_result": ("r.actual_result", "B"),
            "expected_result": ("r.expected_result", "B"),
            "steps": ("r.steps", "B"),
            "environment": ("r.environment", "D"),
        },
    },
}


def weighted_columns(kind: str) -> dict[str, list[str]]:
    """The kind's text by tsvector weight: {"A": [title], "B": [...], "D": [...]}."""
    spec = KINDS[kind]
    weights = {"A": [spec["title"]]}
    for expression, weight in spec["fields"].values():
        weights.setdefault(weight, []).append(expression)
    return weights


def body_columns(kind: str) -> list[str]:
    """The non-title text (for the embedding and snippets), a blank field as NULL."""
    return [f"nullif({expression}, '')" for expression, _ in KINDS[kind]["fields"].values()]


COLUMNS = (
    "kind, record_id, key, product_id, feature_id, title, body, status, severity, "
    "created_at, updated_at, search_vector, content_hash"
)


# What the parser sees. PostgreSQL's default parser keeps compounds whole:
# org.apache.hadoop.fs.FileSystem and v2.0 as one `host` / `file` token,
# hadoop-aws as a hyphenated word, and it reads CVE-2022-40149 as `cve`,
# -2022, -40149 (signed integers). search_words() cuts text into runs of
# letters and digits first, as SQLite's unicode61 or Lucene's standard
# tokenizer do, with two exceptions: a dot between digits stays, so a
# version number (9.4.48, 1.1.1) is one token, which tells releases apart;
# a hyphen before a letter stays, so hadoop-aws is indexed whole and as
# its parts, and the exact compound ranks first.
# search_word_parts() adds the parts of camel-case words
# (BouncyCastle: bouncy castle; S3AInputStream: s3ainput stream), so a
# class name and the words it is made of find each other; the whole word
# stays indexed, so ZooKeeper still finds Zookeeper.
SEARCH_WORDS_SQL = r"""
CREATE OR REPLACE FUNCTION search_words(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT regexp_replace(
    coalesce(body, ''), '[^[:alnum:].-]+|\.(?![0-9])|(?<![0-9])\.|-(?![[:alpha:]])|(?<![[:alnum:]])-', ' ', 'g'
  )
$$;

CREATE OR REPLACE FUNCTION search_word_parts(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(regexp_replace(m[1], '([[:lower:]])([[:upper:]])', '\1 \2', 'g'), ' '), '')
  FROM regexp_matches(coalesce(body, ''), '([[:alnum:]]*[[:lower:]][[:upper:]][[:alnum:]]*)', 'g') AS m
$$;
"""


# search_scoped: the record's words again, each lexeme led by its product
# ("12~crash", with its positions and weights), in a GIN index of its own
# (search_markers beside it). A user who sees only some products asks it for
# their products' lexemes alone ('12~crash' | '14~crash'), so no posting list
# of another product's records is read. On search_vector, a condition on the
# product (product_id, or a product token in search_markers) still walked
# every hidden match of the word: a search took longer the more hidden
# records held its words (bench/timing_bench.py), and PostgreSQL's estimates,
# counted over every record, chose its plans by them. A stored generated
# column (search.models.Document), so every write path fills it.
SCOPED_WORDS_SQL = r"""
CREATE OR REPLACE FUNCTION search_scoped(product bigint, words tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
    '''' || replace(replace(product || '~' || w.lexeme, '\', '\\'), '''', '''''') || ''''
      || coalesce(':' || (SELECT string_agg(x.p || x.weight, ',')
                          FROM unnest(w.positions, w.weights) x(p, weight)), ''),
    ' '), '')::tsvector
  FROM unnest(words) w
$$;

-- `q` for search_scoped over the records of `products`: each lexeme becomes
-- the OR of those products' lexemes, with its prefix mark and weights. Of no
-- product: a lexeme no record has.
CREATE OR REPLACE FUNCTION search_scoped_query(q tsquery, products bigint[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT regexp_replace(
    q::text, '''((?:[^'']|'''')*)''((?::[*A-D]+)?)',
    '(' || coalesce((SELECT string_agg('''' || p || '~\1''\2', ' | ' ORDER BY p) FROM unnest(products) p), '''~''')
        || ')',
    'g'
  )::tsquery
$$;
"""

# search_markers: two tokens a record carries beside its words, in a
# tsvector of their own that shares the GIN index with search_vector (a
# two-column GIN index answers `search_vector @@ q AND search_markers @@ m`
# inside the index), so that the index itself can narrow a broad match set,
# visiting only the rows it keeps, while ranking never sees them:
# - a sample bucket, a hash of the record id into SAMPLE_BUCKETS: "the
#   matches in buckets 0..b-1" is a uniform sample of about b /
#   SAMPLE_BUCKETS of them, for every kind and however few records a kind
#   has, so totals and facets are estimated from a few hundred rows however
#   many match (search.ranking.sampling.sample_matches);
# - the month of updated_at (UTC): "the matches of the last few months"
#   finds the most recent matches without visiting the others
#   (search.ranking.statistics.recent_months);
# - the record's kind, status and severity (FILTER_PREFIXES): a filter on
#   them is one more condition on the same index (search.query.scope), so the
#   index hands over only the matches the filters keep. As a B-tree beside
#   it, PostgreSQL read the whole filter's entries to AND the two bitmaps
#   (730,000 for "bugs" at a million records, 56 ms of a 70 ms query), and
#   the filters' share of the records comes from the same column statistics
#   as the words' (search.ranking.statistics.filter_share).
SAMPLE_BUCKETS = 256  # a power of two: the bucket is the hash's low bits
SAMPLE_PREFIX = "~s"
MONTH_PREFIX = "~m"
# The filter tokens: prefix + the column's value, as stored (no stemming, no case folding).
FILTER_PREFIXES = {"kind": "~k", "status": "~t", "severity": "~v"}


def _markers(kind: str) -> str:
    seed = list(KINDS).index(kind) + 1  # ids repeat across kinds; their buckets need not
    tokens = [
        f"'{SAMPLE_PREFIX}' || (hashint8extended(r.id, {seed}) & {SAMPLE_BUCKETS - 1})",
        f"'{MONTH_PREFIX}' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM')",
        *filter_token_sql(f"'{kind}'", KINDS[kind]["status"], KINDS[kind]["severity"]),
    ]
    # A NULL (no status yet) is no token: array_to_tsvector refuses NULLs.
    return f"array_to_tsvector(array_remove(ARRAY[{', '.join(tokens)}], NULL))"


def filter_token_sql(kind: str, status: str, severity: str) -> list[str]:
    """The filter tokens as SQL, from SQL for the three columns; a NULL or
    blank value makes a NULL, which the caller removes (no token)."""
    return [
        f"'{FILTER_PREFIXES['kind']}' || {kind}",
        f"'{FILTER_PREFIXES['status']}' || nullif({status}, '')",
        f"'{FILTER_PREFIXES['severity']}' || nullif({severity}, '')",
    ]


def tokens_for(column: str, values) -> tuple[str, ...]:
    """The tokens of the records whose `column` is one of `values`."""
    return tuple(FILTER_PREFIXES[column] + value for value in values)


def tokens_tsquery(tokens) -> str:
    """A tsquery matching any of `tokens`, each quoted as one lexeme."""
    return " | ".join("'" + token.replace("\\", "\\\\").replace("'", "''") + "'" for token in tokens)


def _vector(weights: dict[str, list[str]]) -> str:
    parts = []
    for weight, columns in weights.items():
        text = f"concat_ws(' ', {', '.join(columns)})"
        parts.append(
            f"setweight(to_tsvector('{TEXT_SEARCH_CONFIG}', search_words({text})) || "
            f"to_tsvector('{TEXT_SEARCH_CONFIG}', search_word_parts({text})), '{weight}')"
        )
    return " || ".join(parts)


#: The upsert's arbiter: a record's one index row, with the product, which
#: Citus wants in every unique constraint of a table distributed by it
#: (search/citus.py). A record moved to another product gets a new row (on
#: Citus, on another shard), so its old row is deleted first (`moved_rows_sql`).
ARBITER = "kind, record_id, product_id"


def index_rows_sql(kind: str, source: str) -> str:
    """INSERT ... ON CONFLICT that (re)indexes every row of `source` (alias r)."""
    spec = KINDS[kind]
    columns = COLUMNS + ", search_markers"
    updates = ", ".join(
        f"{column} = EXCLUDED.{column}"
        for column in columns.split(", ")
        if column not in ("kind", "record_id", "product_id")
    )
    return f"""
    INSERT INTO search_document ({columns})
    SELECT '{kind}', r.id, r.key, {spec["product_id"]}, {spec["feature_id"]}, {spec["title"]}, x.body,
           {spec["status"]}, {spec["severity"]}, r.created_at, r.updated_at,
           {_vector(weighted_columns(kind))}, md5({spec["title"]} || E'\\n' || x.body)
           , {_markers(kind)}
    FROM {source} r, LATERAL (SELECT concat_ws(E'\\n', {", ".join(body_columns(kind))}) AS body) x
    ON CONFLICT ({ARBITER}) DO UPDATE SET {updates}
    """


def moved_rows_sql(kind: str, source: str) -> str:
    """DELETE the index rows of `source`'s records (alias r) that name another product than theirs."""
    return f"""
    DELETE FROM search_document d WHERE d.kind = '{kind}' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, {KINDS[kind]["product_id"]} AS product_id FROM {source} r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = '{kind}')
    """


def unindex_rows_sql(kind: str, source: str) -> str:
    """DELETE the index rows of `source`'s records (alias r)."""
    return f"""
    DELETE FROM search_document d WHERE d.kind = '{kind}' AND d.record_id IN (SELECT r.id FROM {source} r)
    """


# On a Citus coordinator a statement that writes the distributed index cannot
# read a trigger's transition table ("executor could not find named
# tuplestore"): the trigger copies it into a temporary table first, and reads
# that. Everywhere else it reads the transition table itself. The statements
# are the same; only where they read from differs.
ON_CITUS = citus.LOADED


def _copied(transition: str, copy: str) -> str:
    """A copy of the transition table, dropped by the trigger when it is done (at commit if it fails)."""
    return f"CREATE TEMPORARY TABLE {copy} ON COMMIT DROP AS SELECT * FROM {transition};"


def create_triggers_sql(kind: str) -> str:
    table = KINDS[kind]["table"]
    copy = f"search_rows_{kind}"
    return f"""
    CREATE OR REPLACE FUNCTION search_index_{kind}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF {ON_CITUS} THEN
        {_copied("new_rows", copy)}
        {moved_rows_sql(kind, copy)};
        {index_rows_sql(kind, copy)};
        DROP TABLE {copy};
      ELSE
        {moved_rows_sql(kind, "new_rows")};
        {index_rows_sql(kind, "new_rows")};
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_unindex_{kind}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF {ON_CITUS} THEN
        {_copied("old_rows", copy)}
        {unindex_rows_sql(kind, copy)};
        DROP TABLE {copy};
      ELSE
        {unindex_rows_sql(kind, "old_rows")};
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_truncate_{kind}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM search_document WHERE kind = '{kind}';
      RETURN NULL;
    END $$;

    CREATE TRIGGER search_index_{kind}_insert AFTER INSERT ON {table}
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_{kind}();
    CREATE TRIGGER search_index_{kind}_update AFTER UPDATE ON {table}
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_{kind}();
    CREATE TRIGGER search_index_{kind}_delete AFTER DELETE ON {table}
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_unindex_{kind}();
    CREATE TRIGGER search_index_{kind}_truncate AFTER TRUNCATE ON {table}
      FOR EACH STATEMENT EXECUTE FUNCTION search_truncate_{kind}();
    """


def drop_triggers_sql(kind: str) -> str:
    table = KINDS[kind]["table"]
    return f"""
    DROP TRIGGER IF EXISTS search_index_{kind}_insert ON {table};
    DROP TRIGGER IF EXISTS search_index_{kind}_update ON {table};
    DROP TRIGGER IF EXISTS search_index_{kind}_delete ON {table};
    DROP TRIGGER IF EXISTS search_index_{kind}_truncate ON {table};
    DROP FUNCTION IF EXISTS search_index_{kind}();
    DROP FUNCTION IF EXISTS search_unindex_{kind}();
    DROP FUNCTION IF EXISTS search_truncate_{kind}();
    """


def install_sql() -> str:
    """Triggers for every kind, and the index entries of rows already stored.

    A change to the triggers ships as a migration that carries its own copy
    of reinstall_sql()'s text (search/migrations/sql/: history must not
    change when this module does), which also re-indexes every stored row.
    """
    statements = [SEARCH_WORDS_SQL, SCOPED_WORDS_SQL] + [create_triggers_sql(kind) for kind in KINDS]
    statements += [index_rows_sql(kind, KINDS[kind]["table"]) + ";" for kind in KINDS]
    # Keep heap rows narrow: the tsvector, body and vector live in TOAST,
    # so counting and faceting a large match set reads few pages.
    statements.append("ALTER TABLE search_document SET (toast_tuple_target = 128)")
    return "\n".join(statements)


def triggers_sql() -> str:
    """The triggers alone, replaced in place (no row re-indexed): for a
    change that a migration applies to the stored rows itself."""
    return uninstall_sql() + "\n" + "\n".join(create_triggers_sql(kind) for kind in KINDS)


def uninstall_sql() -> str:
    return "\n".join(drop_triggers_sql(kind) for kind in KINDS)


def reinstall_sql() -> str:
    return uninstall_sql() + "\n" + install_sql()
