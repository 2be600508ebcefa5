"""The cache table (settings.CACHES: readyz's coverage figure, shared by every
process), made by `migrate` like every other table, so that the standard
deployment (`migrate`, then the WSGI app) has it. `createcachetable` skips a
table that exists (one made by an earlier `serve`)."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = []

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
