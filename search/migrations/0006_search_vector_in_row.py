"""Keep search_vector in the row (storage MAIN) and rewrite the table once.

With the default storage (EXTENDED) a row with a long body and an embedding
passes PostgreSQL's 2 kB TOAST threshold and the tsvector moves out of line:
then every `@@` recheck and every ts_rank call fetches it from the TOAST
table again (about eight buffer reads a row per ranked term). MAIN keeps it
in the heap tuple; the body and the embedding go out of line instead.
SET STORAGE affects new rows only, so VACUUM FULL rewrites the existing ones
(seconds for 100,000 rows; it locks the table meanwhile), which is why this
migration is not atomic. Measured in docs/benchmarks.md.
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("search", "0005_hnsw_ef_construction_128"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE search_document ALTER COLUMN search_vector SET STORAGE MAIN",
            reverse_sql="ALTER TABLE search_document ALTER COLUMN search_vector SET STORAGE EXTENDED",
        ),
        migrations.RunSQL("VACUUM FULL search_document", reverse_sql=migrations.RunSQL.noop),
    ]
