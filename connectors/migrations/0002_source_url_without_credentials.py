from urllib.parse import urlsplit

from django.db import migrations, models

import connectors.models


def strip_credentials_from_names(apps, schema_editor):
    """A source made from a URL with a user and password in it was named after
    that URL: the dashboard showed the password. The name loses them; the URL
    keeps them until an operator moves them to the environment (a sync refuses
    such a URL, saying so)."""
    Source = apps.get_model("connectors", "Source")
    for source in Source.objects.filter(url__contains="@"):
        netloc = urlsplit(source.url).netloc
        if "@" in netloc:
            name = source.name.replace(netloc.rsplit("@", 1)[0] + "@", "")[:190]
            if Source.objects.filter(name=name).exclude(pk=source.pk).exists():
                name = f"{name} ({source.pk})"
            source.name = name
            source.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [
        ("connectors", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="source",
            name="url",
            field=models.URLField(
                help_text="the site or API base, like https://example.atlassian.net (no user or password in it)",
                max_length=500,
                validators=[connectors.models.no_credentials],
            ),
        ),
        migrations.RunPython(strip_credentials_from_names, migrations.RunPython.noop),
    ]
