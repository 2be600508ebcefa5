"""The index on a Citus cluster, and triggers that can write it there.

- The upsert's arbiter is (kind, record_id, product_id) on every server
  (search.indexing.sql.ARBITER): Citus wants the distribution column in
  every unique constraint. A record moved to another product has its old
  index row deleted first.
- On a Citus coordinator (the citus extension installed), search_document
  is distributed by product_id (search/citus.py says how and why); on a
  plain server that step does nothing.
"""

from pathlib import Path

from django.db import migrations, models

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
SQL = Path(__file__).parent / "sql"


def distribute(apps, schema_editor):
    from search import citus

    with schema_editor.connection.cursor() as cursor:
        layout = citus.distribute(cursor)
    if layout.done:
        print(f"\n  Citus: {layout}", end="")


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0016_embed_without_boilerplate"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="document",
            constraint=models.UniqueConstraint(
                fields=("kind", "record_id", "product_id"), name="search_document_record_product"
            ),
        ),
        migrations.RunSQL((SQL / "0017_triggers.sql").read_text(), (SQL / "0013_triggers.sql").read_text()),
        migrations.RunPython(distribute, migrations.RunPython.noop),
    ]
