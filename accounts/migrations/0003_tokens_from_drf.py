"""The REST tokens made before scoped tokens (DRF's, kept in plain text) become
API tokens kept as their SHA-256, with the access they had (read and write,
no expiry), and the plain-text keys are deleted. Their holders keep working."""

import hashlib

from django.db import migrations


def hash_them(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    ApiToken = apps.get_model("accounts", "ApiToken")
    for token in Token.objects.all():
        ApiToken.objects.create(
            user_id=token.user_id,
            name="REST token (made before scoped tokens)",
            digest=hashlib.sha256(token.key.encode()).hexdigest(),
            prefix=token.key[:10],
            scope="write",
            created_at=token.created,
        )
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_api_tokens"), ("authtoken", "0004_alter_tokenproxy_options")]
    operations = [migrations.RunPython(hash_them, migrations.RunPython.noop)]
