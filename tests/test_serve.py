"""`manage.py serve` prepares everything and says how to connect."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from backlog.models import Bug


@pytest.mark.django_db
def test_serve_migrates_loads_demo_data_creates_the_admin_and_prints_how_to_connect(monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "a-long-test-passphrase")
    out = io.StringIO()

    call_command("serve", "127.0.0.1:8123", demo_records=120, no_serve=True, stdout=out)
    call_command("serve", "127.0.0.1:8123", demo_records=120, no_serve=True, stdout=out)

    text = out.getvalue()
    assert "Admin:     http://127.0.0.1:8123/admin/   (user admin, password from ADMIN_PASSWORD)" in text
    assert "Search:    http://127.0.0.1:8123/search/" in text
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user__username="admin").key
    assert f"Authorization: Bearer {token}" in text and "manage.py mcp --transport http" in text
    assert "The database already holds records; no demo data loaded." in text  # second run
    assert "0 of 120 records embedded" in text
    assert Bug.objects.count() > 0
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password("a-long-test-passphrase")
