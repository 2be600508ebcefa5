from pathlib import Path

from django.db import migrations

# The SQL as it was when this migration was written (search.indexing.sql changes; history must not).
SQL = Path(__file__).parent / "sql"


class Migration(migrations.Migration):
    """Index the parts of compound identifiers too; re-indexes every row."""

    dependencies = [
        ("search", "0002_key_upper_index"),
    ]

    operations = [
        migrations.RunSQL(
            (SQL / "reinstall_without_markers.sql").read_text(), migrations.RunSQL.noop
        ),  # search_markers arrives in 0009
    ]
