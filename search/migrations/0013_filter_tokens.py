"""Filter tokens in search_markers: the record's kind, status and severity.

A filter on them becomes a condition on the GIN index the words use
(search.indexing.sql, search.query.scope), so the index hands over only the matches the
filters keep instead of ANDing its bitmap with a B-tree's. The triggers are
replaced and the stored rows gain their tokens in one UPDATE of
search_markers, from the row's own kind, status and severity columns: no
text is parsed again and embeddings stay valid (content_hash does not
change). ANALYZE gives the planner and search.ranking.statistics the tokens'
frequencies.
"""

from pathlib import Path

from django.db import migrations

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
SQL = Path(__file__).parent / "sql"

# The tokens of a stored row, from its own columns, as the triggers make them.
TOKENS = "array_remove(ARRAY['~k' || kind, '~t' || nullif(status, ''), '~v' || nullif(severity, '')], NULL)"


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0012_content_hash_index"),
    ]

    operations = [
        migrations.RunSQL((SQL / "0013_triggers.sql").read_text(), (SQL / "0013_triggers_reverse.sql").read_text()),
        migrations.RunSQL(
            f"UPDATE search_document SET search_markers = coalesce(search_markers, ''::tsvector) "
            f"|| array_to_tsvector({TOKENS})",
            f"UPDATE search_document SET search_markers = ts_delete(search_markers, {TOKENS})",
        ),
        migrations.RunSQL("ANALYZE search_document", migrations.RunSQL.noop),
    ]
