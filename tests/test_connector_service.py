"""Sources as the service shows them: the schedule, the dashboard's history,
readyz's check, and the admin, where only those who see every product set
sources up.

The story: the Hadoop team's Jira project syncs every 30 minutes. One day the
site is down and the syncs fail; the dashboard says so to the team, readyz
counts the source as late, and Carol, who sees only another product, sees
none of it.
"""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from backlog.models import Bug
from connectors.models import RunStatus, Source, SyncRun
from tests.upstream.jira import FakeJira

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]


@pytest.fixture
def jira(monkeypatch):
    fake = FakeJira.from_gitbugs(30).start()
    monkeypatch.setenv("HADOOP_JIRA_EMAIL", fake.email)
    monkeypatch.setenv("HADOOP_JIRA_TOKEN", fake.token)
    yield fake
    fake.stop()


@pytest.fixture
def source(jira):
    team = Group.objects.create(name="Hadoop QA")
    source = Source.objects.create(
        name="Hadoop Jira",
        kind="jira",
        url=jira.url,
        project="HADOOP",
        user_env="HADOOP_JIRA_EMAIL",
        token_env="HADOOP_JIRA_TOKEN",
        schedule_minutes=30,
    )
    source.teams.add(team)
    return source


def staff(django_user_model, name, *groups, superuser=False):
    make = django_user_model.objects.create_superuser if superuser else django_user_model.objects.create_user
    user = make(name, password="a-long-passphrase", **({"email": f"{name}@x"} if superuser else {}))
    user.is_staff = True
    user.save()
    user.groups.add(*groups)
    client = Client()
    client.force_login(user)
    return client


def test_a_configured_source_syncs_when_due_by_its_name_and_not_before(source, jira):
    assert source.due()
    call_command("sync", "--due", "--no-progress", stdout=io.StringIO())
    assert Bug.objects.count() == 30 and not Source.objects.get().due()
    assert Source.objects.get().product_key == "HADOOP"

    out = io.StringIO()
    call_command("sync", "Hadoop Jira", "--no-progress", stdout=out)  # by name, whenever asked
    assert out.getvalue().startswith("Hadoop Jira: created 0, updated 0, deleted 0, unchanged")
    with pytest.raises(CommandError, match="no source 'Hadoop'.*Hadoop Jira"):
        call_command("sync", "Hadoop", "--no-progress")


@pytest.mark.usefixtures("no_back_off")
def test_failed_syncs_show_on_the_dashboard_to_the_team_and_in_readyz(source, jira, django_user_model):
    call_command("sync", "Hadoop Jira", "--no-progress", stdout=io.StringIO())
    jira.stop()  # the site goes down
    with pytest.raises(CommandError, match="could not be reached"):
        call_command("sync", "Hadoop Jira", "--no-progress")
    run = SyncRun.objects.order_by("-started_at").first()
    assert run.status == RunStatus.FAILED and "could not be reached" in run.errors[0]

    team = staff(django_user_model, "dana", Group.objects.get(name="Hadoop QA"))
    page = team.get("/dashboard/").content.decode()
    assert 'data-source="Hadoop Jira"' in page and "could not be reached" in page
    outsider = staff(django_user_model, "carol", Group.objects.create(name="Ledgerly QA"))
    assert "Hadoop Jira" not in outsider.get("/dashboard/").content.decode()

    assert Client().get("/readyz").json()["checks"]["sources"] == "ok"  # late only after two periods
    SyncRun.objects.update(
        started_at=timezone.now() - timedelta(hours=2), finished_at=timezone.now() - timedelta(hours=2)
    )
    ready = Client().get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"]["sources"] == "1 of 1 scheduled source(s) not synced within their schedule"
    assert "Hadoop" not in ready.content.decode()


def test_only_those_who_see_every_product_set_up_sources(source, django_user_model):
    admin = staff(django_user_model, "root", superuser=True)
    page = admin.get(f"/admin/connectors/source/{source.pk}/change/")
    assert page.status_code == 200 and "HADOOP_JIRA_TOKEN" in page.content.decode()
    curator = staff(django_user_model, "dana", Group.objects.get(name="Hadoop QA"))
    from django.contrib.auth.models import Permission

    django_user_model.objects.get(username="dana").user_permissions.add(
        *Permission.objects.filter(content_type__app_label="connectors")
    )
    assert curator.get(f"/admin/connectors/source/{source.pk}/change/").status_code == 403


@pytest.mark.parametrize(
    "field, name, said",
    [
        ("token_env", "SECRET_KEY", "the service's own secret"),  # sent to the source's URL as its token
        ("user_env", "DATABASE_URL", "the service's own secret"),
        ("token_env", "GITHUB_WEBHOOK_SECRET", "the service's own secret"),
        ("hook_secret_env", "HOME", "ends in SECRET"),  # a secret anybody can guess
        ("token_env", "jira token", "no environment variable's name"),
    ],
)
def test_a_source_names_only_its_upstreams_credentials(source, field, name, said):
    source.full_clean()  # the fixture's own names (HADOOP_JIRA_TOKEN) are fine
    setattr(source, field, name)
    with pytest.raises(ValidationError) as refused:
        source.full_clean()
    assert said in refused.value.message_dict[field][0]


def test_two_syncs_of_one_source_never_run_at_once(source):
    """serve's scheduled sync and a sync by hand: the second is told to wait."""
    import threading

    from django.db import connection

    from connectors import sync
    from connectors.base import SyncError

    refused = []

    def second_process():  # another thread: another database session
        try:
            with sync._exclusive(source):
                refused.append(None)
        except SyncError as exc:
            refused.append(str(exc))
        finally:
            connection.close()

    with sync._exclusive(source):
        thread = threading.Thread(target=second_process)
        thread.start()
        thread.join()
    assert refused == ["Hadoop Jira is being synced by another process; wait for it to finish"]
