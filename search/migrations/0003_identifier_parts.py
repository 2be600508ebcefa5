from django.db import migrations

from search.sql import reinstall_sql


class Migration(migrations.Migration):
    """Index the parts of compound identifiers too; re-indexes every row."""

    dependencies = [
        ("search", "0002_key_upper_index"),
    ]

    operations = [
        migrations.RunSQL(reinstall_sql(markers=False), migrations.RunSQL.noop),  # search_markers arrives in 0009
    ]
