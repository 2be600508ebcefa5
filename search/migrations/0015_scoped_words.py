"""Product-scoped words: search_scoped, each record's lexemes led by its product ("12~crash").

A user who sees only some products matches words on this column's GIN index
(search.indexing.sql, search.query.scope.words_match), which holds no entry
of another product's records for them to walk: a search costs the same
however many hidden records hold its words. The two functions come first
(the generated column calls one); adding the column computes it for every
stored row from its own product_id and search_vector (no text is parsed
again, embeddings stay valid). ANALYZE gives the planner the new column's
statistics.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
FUNCTIONS = r"""
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


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0014_rate_count"),
    ]

    operations = [
        migrations.RunSQL(
            FUNCTIONS,
            "DROP FUNCTION search_scoped_query(tsquery, bigint[]); DROP FUNCTION search_scoped(bigint, tsvector);",
        ),
        migrations.AddField(
            model_name="document",
            name="search_scoped",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    models.F("product_id"), models.F("search_vector"), function="search_scoped"
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="document",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_scoped", "search_markers"], name="search_document_scoped"
            ),
        ),
        migrations.RunSQL("ANALYZE search_document", migrations.RunSQL.noop),
    ]
