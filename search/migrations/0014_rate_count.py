"""The rate limit's counts (search.ratelimit), in an unlogged table: they
are worth nothing after a crash (PostgreSQL empties the table then, and
every budget starts afresh), so a search's count waits for no WAL flush.
Standbys have the table but no rows: the counts are read on the primary."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0013_filter_tokens'),
    ]

    operations = [
        migrations.CreateModel(
            name='RateCount',
            fields=[
                ('pk', models.CompositePrimaryKey('user_id', 'window_start', blank=True, editable=False, primary_key=True, serialize=False)),
                ('user_id', models.BigIntegerField()),
                ('window_start', models.DateTimeField()),
                ('count', models.IntegerField()),
            ],
            options={
                'db_table': 'search_ratecount',
            },
        ),
        migrations.RunSQL(
            "ALTER TABLE search_ratecount SET UNLOGGED", "ALTER TABLE search_ratecount SET LOGGED"
        ),
    ]
