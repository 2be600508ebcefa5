from pathlib import Path

from django.db import migrations

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
SQL = Path(__file__).parent / "sql"


class Migration(migrations.Migration):
    """Split text into words before PostgreSQL's parser (search_words) and
    index camel-case parts (search_word_parts), replacing
    search_identifier_parts; re-indexes every row. Embeddings stay valid:
    the embedded text, and so content_hash, does not change. ANALYZE
    refreshes the lexeme statistics the ranking reads."""

    dependencies = [
        ("search", "0006_search_vector_in_row"),
    ]

    operations = [
        migrations.RunSQL(
            (SQL / "reinstall_without_markers.sql").read_text(), migrations.RunSQL.noop
        ),  # search_markers arrives in 0009
        migrations.RunSQL("DROP FUNCTION IF EXISTS search_identifier_parts(text)", migrations.RunSQL.noop),
        migrations.RunSQL("ANALYZE search_document", migrations.RunSQL.noop),
    ]
