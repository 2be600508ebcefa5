"""Product tokens in search_markers: '~p' and the record's product id.

The access rule of a user who sees only some products becomes a condition
on the GIN index the words use (search.indexing.sql, search.query.scope), so
the index never hands over a match in a product they cannot see, and a
search costs the same however many hidden records hold its words. The
triggers are replaced, and the stored rows gain their token in one UPDATE
of search_markers, from the row's own product_id: no text is parsed again
and embeddings stay valid (content_hash does not change). ANALYZE gives
the planner the tokens' frequencies.
"""

from pathlib import Path

from django.db import migrations

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
SQL = Path(__file__).parent / "sql"

# The token of a stored row, from its own column, as the triggers make it.
TOKENS = "ARRAY['~p' || product_id]"


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0014_rate_count"),
    ]

    operations = [
        # Back: the triggers as 0013 installed them.
        migrations.RunSQL((SQL / "0015_triggers.sql").read_text(), (SQL / "0013_triggers.sql").read_text()),
        migrations.RunSQL(
            f"UPDATE search_document SET search_markers = coalesce(search_markers, ''::tsvector) "
            f"|| array_to_tsvector({TOKENS})",
            f"UPDATE search_document SET search_markers = ts_delete(search_markers, {TOKENS})",
        ),
        migrations.RunSQL("ANALYZE search_document", migrations.RunSQL.noop),
    ]
