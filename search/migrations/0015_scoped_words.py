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

from pathlib import Path

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
FUNCTIONS = (Path(__file__).parent / "sql" / "0015_scoped_words.sql").read_text()


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
