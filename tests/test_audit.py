"""The audit trail: every change of a record, with who made it, through which surface and when.

The story: BUG-12 is imported from a file, a curator corrects its severity in
the admin, a script with a token changes its title over REST, the team's Jira
sync and then a webhook rewrite it, and someone deletes a test. The bug's page
shows each change, before and after, with who and how; the admin filters
the whole trail; nobody can rewrite it.
"""

import io

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from pghistory.models import Events

from backlog import audit
from backlog.imports import import_records
from backlog.models import Bug, QATest

from .conftest import TRAMLINE, client_with_token, jsonl, seeing_all_products

pytestmark = pytest.mark.django_db


@pytest.fixture
def story(tmp_path):
    path = tmp_path / "tramline.jsonl"
    path.write_text(jsonl(*TRAMLINE))
    call_command("import_records", str(path), "--no-progress", stdout=io.StringIO())
    return Bug.objects.get(key="BUG-12")


def curator(name: str) -> User:
    user = seeing_all_products(User.objects.create_user(name, password="a-long-passphrase", is_staff=True))
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_bug", "view_bug", "delete_qatest"]))
    return user


def test_each_change_says_who_through_which_surface_and_what_changed(story, client):
    rosa = curator("rosa")
    client.force_login(rosa)
    form = client.get(f"/admin/backlog/bug/{story.pk}/change/").context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update({"severity": "critical", "product": story.product_id, "raw_data": '{"steps": "Open a pass"}'})
    for name in ("feature", "test", "duplicate_of"):
        data[name] = data.get(name) or ""
    saved = client.post(f"/admin/backlog/bug/{story.pk}/change/", data)
    assert saved.status_code == 302, saved.context["adminform"].errors if saved.context else saved
    script = client_with_token(curator("sam"))
    assert script.patch("/api/bugs/BUG-12", {"title": "Renewal spins forever"}, format="json").status_code == 200

    history = audit.history(Bug.objects.get(key="BUG-12"))

    assert [(e["what"], e["surface"]) for e in history] == [
        ("insert", "import"),
        ("update", "admin"),
        ("update", "REST"),
    ]
    imported, by_admin, by_rest = history
    assert imported["who"] == "import_records"
    assert by_admin["who"] == "rosa" and by_admin["changed"]["severity"] == (story.severity, "critical")
    assert by_rest["who"] == "sam" and by_rest["token"].startswith("a test's token (qas_")
    assert by_rest["changed"]["title"] == (story.title, "Renewal spins forever")

    page = client.get("/records/BUG-12/").content.decode()
    section = page.split('id="history"')[1].split("</section>")[0]
    assert section.index("through REST") < section.index("through admin") < section.index("through import")
    assert "Renewal spins forever" in section and "critical" in section and "by sam" in section


def test_a_reimport_of_the_same_records_writes_no_event(story, tmp_path):
    before = Events.objects.tracks(story).count()
    assert not import_records(jsonl(*TRAMLINE).splitlines()).problems
    assert Events.objects.tracks(Bug.objects.get(key="BUG-12")).count() == before


def test_a_deletion_is_kept_with_the_record_as_it_was_and_the_trail_is_append_only(story, client):
    test = QATest.objects.get(key="TEST-3")
    client.force_login(curator("dora"))
    client.post(f"/admin/backlog/qatest/{test.pk}/delete/", {"post": "yes"})

    gone = Events.objects.filter(pgh_obj_model="backlog.QATest", pgh_obj_id=str(test.pk), pgh_label="delete").get()
    assert gone.pgh_data["key"] == "TEST-3" and gone.pgh_context["user"] == User.objects.get(username="dora").pk

    for statement in ("UPDATE backlog_bugevent SET title = 'rewritten'", "DELETE FROM backlog_bugevent"):
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert Events.objects.tracks(story).filter(pgh_label="insert").exists()


def test_the_admin_filters_the_trail_by_surface_and_shows_it_only_to_those_who_see_every_product(story, client):
    admin = User.objects.create_superuser("root", "root@example.com", "a-long-passphrase")
    client.force_login(admin)
    by_import = client.get("/admin/pghistory/events/", {"surface": "import"})
    by_admin = client.get("/admin/pghistory/events/", {"surface": "admin"})
    imported = Events.objects.filter(pgh_context__surface="import").count()
    assert by_import.status_code == 200 and by_import.context["cl"].result_count == imported == len(TRAMLINE)
    assert by_admin.context["cl"].result_count == 0

    team_member = User.objects.create_user("tess", is_staff=True)
    team_member.user_permissions.add(Permission.objects.get(codename="view_events"))
    client.force_login(team_member)
    assert client.get("/admin/pghistory/events/").status_code == 403


def test_a_record_moved_into_a_product_shows_its_team_nothing_of_its_past_elsewhere(story, client):
    """A bug filed in Ledgerly (PRD-2) with a customer's name in it, scrubbed there, then
    moved to Tramline (PRD-1). Tina, on Tramline's team only, sees the bug and its
    history from the move on: not the name, not Ledgerly's key, not who scrubbed it."""
    from django.contrib.auth.models import Group

    from backlog.models import Product

    from .conftest import LEDGERLY_BUG

    assert not import_records(
        jsonl({**LEDGERLY_BUG, "description": "Invoice of ACME-SECRET-CUSTOMER"}).splitlines()
    ).problems
    bug = Bug.objects.get(key=LEDGERLY_BUG["key"])
    with audit.surface("import"):
        Bug.objects.filter(pk=bug.pk).update(description="Invoice of a customer")  # scrubbed in PRD-2
        Bug.objects.filter(pk=bug.pk).update(product=Product.objects.get(key="PRD-1"), feature=None)
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    tina = User.objects.create_user("tina", password="a-long-passphrase", is_staff=True)
    tina.groups.add(team)

    seen_by_tina = audit.history(bug, tina)
    seen_by_all = audit.history(bug)
    client.force_login(tina)
    page = client.get(f"/records/{bug.key}/").content.decode()
    section = page.split('id="history"')[1].split("</section>")[0]

    assert [e.get("hidden", False) for e in seen_by_tina] == [True, True, False]
    assert seen_by_tina[2]["changed"]["product"] == (audit.NOT_SHOWN, "PRD-1")
    assert "ACME-SECRET-CUSTOMER" not in section and "PRD-2" not in section and "Ledgerly" not in section
    assert section.count("while in a product you do not see") == 2
    assert (
        seen_by_all[1]["changed"]["description"][0] == "Invoice of ACME-SECRET-CUSTOMER"
    )  # kept, for those who see it
    assert seen_by_all[2]["changed"]["product"] == ("PRD-2", "PRD-1")


@pytest.mark.django_db(transaction=True)
def test_the_role_serve_runs_the_app_as_writes_records_and_events_but_cannot_rewrite_the_trail(story):
    """What `serve` starts connects as qa_app (runtime/postgres/roles.py). Its writes are
    audited as any; every way around the append-only trigger that the superuser has is
    closed to it."""
    import psycopg

    from runtime.postgres import roles

    roles.grant_app_role()
    params = connection.get_connection_params()
    app = psycopg.connect(host=params["host"], port=params.get("port"), dbname=params["dbname"], user=roles.APP_ROLE)
    attempts = {
        "UPDATE": "UPDATE backlog_bugevent SET title = 'rewritten'",
        "DELETE": "DELETE FROM backlog_bugevent",
        "replica role": "SET LOCAL session_replication_role = replica",
        "pgtrigger.ignore": "SET LOCAL pgtrigger.ignore = '{backlog_bugevent:pgtrigger_append_only_a47e1}';"
        " DELETE FROM backlog_bugevent",
        "TRUNCATE": "TRUNCATE backlog_bugevent",
        "no trigger": "ALTER TABLE backlog_bugevent DISABLE TRIGGER ALL",
    }
    refused = {}
    with app:
        with app.transaction():
            app.execute("UPDATE backlog_bug SET title = 'Renewal spins' WHERE key = 'BUG-12'")
        for what, statement in attempts.items():
            try:
                with app.transaction():
                    app.execute(statement)
                refused[what] = False
            except psycopg.errors.InsufficientPrivilege:
                refused[what] = True

    assert refused == dict.fromkeys(attempts, True)
    assert [e["what"] for e in audit.history(Bug.objects.get(key="BUG-12"))] == ["insert", "update"]
