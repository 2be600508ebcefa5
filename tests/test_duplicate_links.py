"""Curators link duplicates: `Bug.duplicate_of`, from the model to every surface.

The story: Tramline's BUG-12 (the renewal button that does nothing) is the
original. BUG-13 (a spinner that never stops) repeats it, and BUG-14 (the
same again, on a tablet) was linked to BUG-13 before anyone saw BUG-12: a
chain, whose cluster is still BUG-12's. Ledgerly's BUG-20 is another
product's bug, which no Tramline bug may point at.
"""

import io
import json
import re

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from backlog.exports import export_records
from backlog.imports import import_records
from backlog.models import Bug, BugStatus, Product

from .conftest import TRAMLINE, VAT_BUG, client_with_token, jsonl, run_import

pytestmark = pytest.mark.django_db


def bug(key: str, **fields) -> dict:
    return {"kind": "bug", "key": key, "product": "PRD-1", "title": f"Renewal trouble {key}", **fields}


SPINNER = bug("BUG-13", title="Renewal spinner never stops", status="duplicate", duplicate_of="BUG-12")
# Listed before the bug it names: a file may be in any order.
TABLET = bug("BUG-14", title="Renewal spinner on a tablet", status="duplicate", duplicate_of="BUG-13")


def links() -> dict[str, str | None]:
    return dict(Bug.objects.values_list("key", "duplicate_of__key"))


def snapshot() -> list[tuple]:
    return sorted(Bug.objects.values_list("key", "duplicate_of_id", "status", "updated_at"))


@pytest.fixture
def cluster(tramline):
    """BUG-12 <- BUG-13 <- BUG-14, stored; and Ledgerly's BUG-20."""
    report = import_records(jsonl(TABLET, SPINNER, VAT_BUG).splitlines())
    assert report.written and not report.problems, report.problems


# -- the model ------------------------------------------------------------------------------------


def test_a_bug_cannot_be_a_duplicate_of_itself(cluster):
    original = Bug.objects.get(key="BUG-12")
    original.duplicate_of = original

    with pytest.raises(ValidationError) as caught:
        original.full_clean()

    assert caught.value.message_dict["duplicate_of"] == ["BUG-12 cannot be a duplicate of itself."]


def test_a_link_that_would_close_a_circle_names_the_chain(cluster):
    original = Bug.objects.get(key="BUG-12")
    original.duplicate_of = Bug.objects.get(key="BUG-14")

    with pytest.raises(ValidationError) as caught:
        original.full_clean()

    [message] = caught.value.message_dict["duplicate_of"]
    assert message.startswith("BUG-14 is already a duplicate of BUG-12 (BUG-14 → BUG-13 → BUG-12)")
    assert "Link BUG-12 to another bug, or unlink BUG-14 first." in message


def test_a_chain_that_ends_elsewhere_is_allowed_and_so_is_a_duplicate_without_a_link(cluster):
    newcomer = Bug.objects.create(key="BUG-15", product=Bug.objects.get(key="BUG-12").product, title="Spinner")
    newcomer.duplicate_of = Bug.objects.get(key="BUG-14")
    newcomer.full_clean()  # a chain: BUG-15 -> BUG-14 -> BUG-13 -> BUG-12

    legacy = Bug(key="BUG-16", product=newcomer.product, title="Old duplicate", status=BugStatus.DUPLICATE)
    legacy.full_clean()  # status duplicate, no link: as trackers send them


def test_the_original_must_be_a_bug_of_the_same_product(cluster):
    spinner = Bug.objects.get(key="BUG-13")
    spinner.duplicate_of = Bug.objects.get(key="BUG-20")

    with pytest.raises(ValidationError) as caught:
        spinner.full_clean()

    assert caught.value.message_dict["duplicate_of"] == ["BUG-20 belongs to PRD-2, not PRD-1."]


def test_a_bug_with_duplicates_stays_in_its_product(cluster):
    original = Bug.objects.get(key="BUG-12")
    original.product = Bug.objects.get(key="BUG-20").product
    original.feature = original.test = None

    with pytest.raises(ValidationError) as caught:
        original.full_clean()

    [message] = caught.value.message_dict["product"]
    assert message == "BUG-12 has duplicates in PRD-1 (BUG-13); unlink or move them first."


def test_deleting_the_original_leaves_its_duplicates_unlinked(cluster):
    Bug.objects.get(key="BUG-13").delete()

    assert links()["BUG-14"] is None
    assert Bug.objects.get(key="BUG-14").status == "duplicate"


def test_a_circle_stored_by_racing_writes_still_ends_the_walk(cluster):
    # Two saves that each passed clean() can store a circle; a later check must not loop.
    Bug.objects.filter(key="BUG-12").update(duplicate_of=Bug.objects.get(key="BUG-14"))
    newcomer = Bug.objects.create(key="BUG-15", product=Bug.objects.get(key="BUG-12").product, title="Spinner")

    newcomer.duplicate_of = Bug.objects.get(key="BUG-13")
    newcomer.full_clean()  # the circle does not come back to BUG-15: no error, and no endless walk


# -- import ---------------------------------------------------------------------------------------


def test_links_may_name_a_bug_later_in_the_file_or_already_stored(tramline):
    # BUG-14 names BUG-13 three lines before it; BUG-13 names BUG-12, stored already.
    code, out, err = run_import(jsonl(TABLET, bug("BUG-30"), bug("BUG-31"), SPINNER))

    assert code == 0, err
    assert "created 4 (4 bug)" in out
    assert links() == {"BUG-12": None, "BUG-13": "BUG-12", "BUG-14": "BUG-13", "BUG-30": None, "BUG-31": None}


def test_a_whole_cluster_arrives_in_one_file_in_any_order(db):
    records = [TABLET, SPINNER, *reversed(TRAMLINE)]

    code, out, err = run_import(jsonl(*records))

    assert code == 0, err
    assert links()["BUG-14"] == "BUG-13" and links()["BUG-13"] == "BUG-12"


@pytest.mark.parametrize(
    "record, message",
    [
        pytest.param(
            bug("BUG-40", duplicate_of="BUG-404"),
            "line 1: BUG-40: duplicate_of BUG-404 is neither in the file nor stored; import it first or fix the key",
            id="unknown key",
        ),
        pytest.param(
            bug("BUG-40", duplicate_of="FEAT-7"),
            "line 1: BUG-40: duplicate_of FEAT-7 is a feature, not a bug",
            id="not a bug",
        ),
        pytest.param(
            bug("BUG-40", duplicate_of="BUG-20"),
            "line 1: BUG-40: duplicate_of BUG-20 belongs to product PRD-2, not PRD-1",
            id="another product",
        ),
        pytest.param(
            bug("BUG-40", duplicate_of="BUG-40"),
            "line 1: BUG-40: duplicate_of BUG-40 is the bug itself; a bug cannot be its own duplicate",
            id="itself",
        ),
        pytest.param(
            bug("BUG-40", duplicate_of="not a key"),
            "line 1: BUG-40: 'duplicate_of' 'not a key' is not a valid key",
            id="not a key",
        ),
    ],
)
def test_a_bad_link_is_reported_with_its_line_and_nothing_is_written(cluster, record, message):
    before = snapshot()

    code, _, err = run_import(jsonl(record, bug("BUG-41")))

    assert code == 1
    assert message in err, err
    assert snapshot() == before


def test_a_circle_in_the_file_is_refused_on_every_line_of_it(cluster):
    # BUG-50 -> BUG-51 -> BUG-52 -> BUG-50; BUG-53 only points into the circle.
    records = [
        bug("BUG-50", duplicate_of="BUG-51"),
        bug("BUG-51", duplicate_of="BUG-52"),
        bug("BUG-52", duplicate_of="BUG-50"),
        bug("BUG-53", duplicate_of="BUG-52"),
    ]

    code, _, err = run_import(jsonl(*records))

    assert code == 1
    assert (
        "line 1: BUG-50: duplicate_of BUG-51 makes a circle (BUG-50 → BUG-51 → BUG-52 → BUG-50); "
        "a chain of duplicates must end at a bug that is no duplicate"
    ) in err
    assert "line 3: BUG-52: duplicate_of BUG-50 makes a circle (BUG-52 → BUG-50 → BUG-51 → BUG-52)" in err
    assert "line 4: BUG-53: it names BUG-52, which was rejected (line 3)" in err
    assert not Bug.objects.filter(key__in=["BUG-50", "BUG-51", "BUG-52", "BUG-53"]).exists()


def test_a_circle_through_stored_links_is_refused(cluster):
    # Stored: BUG-14 -> BUG-13 -> BUG-12. The file would make BUG-12 a duplicate of BUG-14.
    original = next(r for r in TRAMLINE if r["key"] == "BUG-12")
    before = snapshot()

    code, _, err = run_import(jsonl(dict(original, duplicate_of="BUG-14")))

    assert code == 1
    assert "line 1: BUG-12: duplicate_of BUG-14 makes a circle (BUG-12 → BUG-14 → BUG-13 → BUG-12)" in err
    assert snapshot() == before


def test_a_file_may_turn_a_chain_around(cluster):
    # The file replaces stored links: BUG-12 becomes the duplicate, BUG-14 the original.
    original = next(r for r in TRAMLINE if r["key"] == "BUG-12")
    records = [
        dict(original, duplicate_of="BUG-13"),
        dict(SPINNER, duplicate_of="BUG-14"),
        {k: v for k, v in TABLET.items() if k != "duplicate_of"},
    ]

    code, out, err = run_import(jsonl(*records))

    assert code == 0, err
    assert "updated 3 (3 bug)" in out
    assert links() == {"BUG-12": "BUG-13", "BUG-13": "BUG-14", "BUG-14": None, "BUG-20": None}


def to_ledgerly(record: dict) -> dict:
    moved = {k: v for k, v in record.items() if k not in ("feature", "test")}
    return moved | {"product": "PRD-2"}


def test_a_bug_moves_to_another_product_only_with_its_duplicates(cluster):
    original = next(r for r in TRAMLINE if r["key"] == "BUG-12")
    before = snapshot()

    code, _, err = run_import(jsonl(to_ledgerly(original)))

    assert code == 1
    assert (
        "line 1: BUG-12: it moves to product PRD-2, but its duplicates BUG-13 stay in PRD-1; "
        "move them in the same file, or unlink them first"
    ) in err
    assert snapshot() == before

    code, out, err = run_import(jsonl(to_ledgerly(original), to_ledgerly(SPINNER), to_ledgerly(TABLET)))

    assert code == 0, err
    assert "updated 3 (3 bug)" in out
    assert set(Bug.objects.filter(product__key="PRD-2").values_list("key", flat=True)) == {
        "BUG-12",
        "BUG-13",
        "BUG-14",
        "BUG-20",
    }


def test_skip_invalid_writes_the_rest_but_nothing_that_points_into_a_circle(cluster):
    records = [bug("BUG-60", duplicate_of="BUG-60"), bug("BUG-61", duplicate_of="BUG-60"), bug("BUG-62")]

    code, out, err = run_import(jsonl(*records), "--skip-invalid")

    assert code == 1
    assert "created 1 (1 bug)" in out
    assert "line 2: BUG-61: it names BUG-60, which was rejected (line 1)" in err
    assert not Bug.objects.filter(key__in=["BUG-60", "BUG-61"]).exists()


def test_a_bad_line_after_a_long_chain_leaves_the_database_as_it_was(cluster):
    # 500 new bugs, each a duplicate of the next one in the file, the last of BUG-12; then a bad line.
    records = [bug(f"BUG-{n}", duplicate_of=f"BUG-{n + 1}") for n in range(1000, 1499)]
    records += [bug("BUG-1499", duplicate_of="BUG-12"), bug("BUG-1500", severity="blocker")]
    before = snapshot()

    code, _, err = run_import(jsonl(*records))

    assert code == 1
    assert "line 501: BUG-1500: 'severity' 'blocker' is not allowed" in err
    assert snapshot() == before


def test_one_bad_link_rejects_the_chain_that_leads_to_it(cluster):
    records = [bug(f"BUG-{n}", duplicate_of=f"BUG-{n + 1}") for n in range(1000, 1500)]
    records += [bug("BUG-1500", duplicate_of="BUG-20")]

    report = import_records(jsonl(*records).splitlines())

    assert not report.written and len(report.problems) == 501
    assert str(report.problems[-1]) == "line 501: BUG-1500: duplicate_of BUG-20 belongs to product PRD-2, not PRD-1"
    assert str(report.problems[0]) == "line 1: BUG-1000: it names BUG-1001, which was rejected (line 2)"


def test_a_database_failure_while_setting_the_links_rolls_back_the_bugs(db):
    # BUG-14 and BUG-13 name bugs further down the file: their links are set by
    # a second statement, after every bug is written. It fails here.
    with connection.cursor() as cursor:
        cursor.execute(
            """CREATE FUNCTION refuse_link() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'refused'; END $$;
               CREATE TRIGGER refuse_link BEFORE UPDATE OF duplicate_of_id ON backlog_bug
               FOR EACH ROW EXECUTE FUNCTION refuse_link();"""
        )

    report = import_records(jsonl(TABLET, SPINNER, *TRAMLINE).splitlines())

    assert not report.written
    assert "the database refused the import" in str(report.problems[0])
    assert not Bug.objects.exists() and not Product.objects.exists()


def test_a_reimport_changes_nothing_and_a_changed_link_updates_only_its_bug(cluster):
    code, out, _ = run_import(jsonl(TABLET, SPINNER, dict(SPINNER, key="BUG-15", duplicate_of="bug-12")))
    assert code == 0 and "created 1 (1 bug), updated 0, unchanged 2" in out

    code, out, _ = run_import(jsonl(dict(TABLET, duplicate_of="BUG-12"), SPINNER))

    assert "updated 1 (1 bug), unchanged 1" in out
    assert links()["BUG-14"] == "BUG-12"


def test_a_dry_run_checks_the_links_and_writes_nothing(tramline):
    code, out, _ = run_import(jsonl(TABLET, SPINNER), "--dry-run")

    assert code == 0 and "Would have created 2" in out
    assert links() == {"BUG-12": None}


# -- export -------------------------------------------------------------------------------------


def test_export_writes_the_link_as_a_key_only_when_there_is_one(cluster):
    records = {record["key"]: record for record in export_records(kinds=["bug"])}

    assert records["BUG-13"]["duplicate_of"] == "BUG-12"
    assert records["BUG-14"]["duplicate_of"] == "BUG-13"
    assert "duplicate_of" not in records["BUG-12"]
    # In the order FORMAT.md's table lists the fields: after status, before raw_data.
    assert list(records["BUG-13"]).index("duplicate_of") == list(records["BUG-13"]).index("status") + 1


def test_the_command_exports_a_products_links(cluster):
    out = io.StringIO()
    call_command("export_records", "--kind", "bug", "--product", "PRD-1", stdout=out)
    exported = [json.loads(line) for line in out.getvalue().splitlines()]

    assert {r["key"]: r.get("duplicate_of") for r in exported} == {
        "BUG-12": None,
        "BUG-13": "BUG-12",
        "BUG-14": "BUG-13",
    }


# -- REST -----------------------------------------------------------------------------------------


def test_a_bug_reads_with_its_original_as_a_key(cluster, curator):
    body = curator.get("/api/bugs/BUG-14").json()
    listed = curator.get("/api/bugs", {"duplicate_of": "BUG-12"}).json()

    assert body["duplicate_of"] == "BUG-13"
    assert curator.get("/api/bugs/BUG-12").json()["duplicate_of"] is None
    assert [b["key"] for b in listed["results"]] == ["BUG-13"]


def test_a_curator_links_and_unlinks_by_key_in_any_case(cluster, curator):
    linked = curator.patch("/api/bugs/BUG-14", {"duplicate_of": "bug-12"}, format="json")
    created = curator.post(
        "/api/bugs", {"key": "BUG-15", "product": "PRD-1", "title": "Spinner", "duplicate_of": "BUG-13"}, format="json"
    )
    unlinked = curator.patch("/api/bugs/BUG-13", {"duplicate_of": None}, format="json")

    assert linked.status_code == 200 and linked.json()["duplicate_of"] == "BUG-12"
    assert created.status_code == 201 and created.json()["duplicate_of"] == "BUG-13"
    assert unlinked.status_code == 200 and unlinked.json()["duplicate_of"] is None
    # The API writes what it is sent: the status is the caller's to set.
    assert (unlinked.json()["status"], created.json()["status"]) == ("duplicate", "open")
    assert links()["BUG-14"] == "BUG-12" and links()["BUG-13"] is None


@pytest.mark.parametrize(
    "key, change, message",
    [
        ("BUG-13", "BUG-404", "duplicate_of: no bug has the key BUG-404."),
        ("BUG-13", "FEAT-7", "duplicate_of: no bug has the key FEAT-7."),
        ("BUG-13", 12, "duplicate_of: give the bug's key as a string."),
        ("BUG-13", "BUG-20", "duplicate_of: BUG-20 belongs to PRD-2, not PRD-1."),
        ("BUG-13", "BUG-13", "duplicate_of: BUG-13 cannot be a duplicate of itself."),
        ("BUG-12", "BUG-14", "duplicate_of: BUG-14 is already a duplicate of BUG-12 (BUG-14 → BUG-13 → BUG-12)"),
    ],
)
def test_a_bad_link_is_400_naming_the_field(cluster, curator, key, change, message):
    before = snapshot()

    response = curator.patch(f"/api/bugs/{key}", {"duplicate_of": change}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["message"].startswith(message), error
    assert list(error["fields"]) == ["duplicate_of"]
    assert snapshot() == before


def test_a_bug_of_a_product_one_may_not_see_is_no_bug_at_all(cluster, django_user_model):
    from django.contrib.auth.models import Group, Permission

    # Carol is on Ledgerly's team only: Tramline's bugs do not exist for her.
    carol = django_user_model.objects.create_user("carol")
    carol.user_permissions.set(Permission.objects.filter(codename__in=["change_bug", "view_bug"]))
    team = Group.objects.create(name="ledgerly")
    team.user_set.add(carol)
    Product.objects.get(key="PRD-2").teams.add(team)

    response = client_with_token(carol).patch("/api/bugs/BUG-20", {"duplicate_of": "BUG-12"}, format="json")

    assert response.json()["error"]["message"] == "duplicate_of: no bug has the key BUG-12."


# -- the admin ------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("curator", "curator@example.com", "a-long-pass"))
    return client


def change_form(bug: Bug, **changes) -> dict:
    """The bug's change form as the browser would post it, with `changes`."""
    fields = {
        "key": bug.key,
        "title": bug.title,
        "severity": bug.severity or "",
        "status": bug.status,
        "product": bug.product_id,
        "feature": bug.feature_id or "",
        "test": bug.test_id or "",
        "duplicate_of": bug.duplicate_of_id or "",
        "description": bug.description,
        "raw_data": json.dumps(bug.raw_data),
    }
    return fields | changes


def test_linking_in_the_admin_marks_the_bug_duplicate(cluster, admin_client):
    newcomer = Bug.objects.create(key="BUG-15", product=Bug.objects.get(key="BUG-12").product, title="Spinner")
    url = reverse("admin:backlog_bug_change", args=[newcomer.pk])

    response = admin_client.post(url, change_form(newcomer, duplicate_of=Bug.objects.get(key="BUG-12").pk))

    assert response.status_code == 302, response.content.decode()[:3000]
    newcomer.refresh_from_db()
    assert (newcomer.duplicate_of.key, newcomer.status) == ("BUG-12", "duplicate")


def test_a_status_chosen_with_the_link_is_kept(cluster, admin_client):
    newcomer = Bug.objects.create(key="BUG-15", product=Bug.objects.get(key="BUG-12").product, title="Spinner")
    url = reverse("admin:backlog_bug_change", args=[newcomer.pk])
    original = Bug.objects.get(key="BUG-12").pk

    admin_client.post(url, change_form(newcomer, duplicate_of=original, status="rejected"))

    newcomer.refresh_from_db()
    assert (newcomer.duplicate_of_id, newcomer.status) == (original, "rejected")


def test_the_admin_refuses_a_circle_with_the_chain_in_the_page(cluster, admin_client):
    original = Bug.objects.get(key="BUG-12")
    url = reverse("admin:backlog_bug_change", args=[original.pk])

    response = admin_client.post(url, change_form(original, duplicate_of=Bug.objects.get(key="BUG-14").pk))

    assert response.status_code == 200  # the form again, with the error
    assert "BUG-14 is already a duplicate of BUG-12 (BUG-14 → BUG-13 → BUG-12)" in response.content.decode()
    assert links()["BUG-12"] is None


def test_a_bug_page_lists_its_duplicates_and_offers_the_link_by_search(cluster, admin_client):
    original, spinner = Bug.objects.get(key="BUG-12"), Bug.objects.get(key="BUG-13")

    page = admin_client.get(reverse("admin:backlog_bug_change", args=[original.pk])).content.decode()
    found = admin_client.get(
        reverse("admin:autocomplete"),
        {"app_label": "backlog", "model_name": "bug", "field_name": "duplicate_of", "term": "spinner"},
    ).json()

    spinner_url = reverse("admin:backlog_bug_change", args=[spinner.pk])
    assert f'<a href="{spinner_url}" title="{spinner.title}">BUG-13</a>' in page
    # An autocomplete, not a <select> of every bug: the page stays small with 100,000 of them.
    assert 'name="duplicate_of"' in page and "admin-autocomplete" in page
    assert {r["text"] for r in found["results"]} == {
        "BUG-13 Renewal spinner never stops",
        "BUG-14 Renewal spinner on a tablet",
    }


def test_the_bug_list_filters_by_having_a_link(cluster, admin_client):
    url = reverse("admin:backlog_bug_changelist")

    def listed(**params) -> set[str]:
        html = admin_client.get(url, params).content.decode()
        return set(re.findall(r'<th class="field-key"><a href="[^"]+">(BUG-\d+)</a>', html))

    assert listed(is_duplicate="yes") == {"BUG-13", "BUG-14"}
    assert listed(is_duplicate="no") == {"BUG-12", "BUG-20"}
    assert listed(duplicate_of__id__exact=Bug.objects.get(key="BUG-12").pk) == {"BUG-13"}


# -- the record page and `get` ------------------------------------------------------------------


def test_get_relates_a_bug_to_its_original_and_its_duplicates(cluster, curator):
    records = curator.get("/api/records", {"keys": "BUG-13,BUG-12"}).json()["records"]
    spinner, original = (record["related"] for record in records)

    assert [ref["key"] for ref in spinner["duplicate_of"]["items"]] == ["BUG-12"]
    assert [ref["key"] for ref in spinner["duplicates"]["items"]] == ["BUG-14"]
    assert original["duplicate_of"] == {"total": 0, "items": []}
    assert original["duplicates"]["total"] == 1


def test_the_record_page_shows_the_original_and_the_duplicates_as_links(cluster, client, alice):
    alice.is_staff = True
    alice.save()
    client.force_login(alice)

    spinner = client.get("/records/BUG-13/").content.decode()
    original = client.get("/records/BUG-12/").content.decode()
    tablet = client.get("/records/BUG-14/").content.decode()

    assert re.search(r'<dt>Duplicate of</dt>\s*<dd><a href="/records/BUG-12/"><span class="key">BUG-12</span>', spinner)
    duplicates = original[original.index('id="related-duplicates"') :]
    assert "Duplicates" in duplicates and 'href="/records/BUG-13/"' in duplicates.split("</section>")[0]
    assert 'id="related-duplicates"' not in tablet  # no duplicates: no empty section
    assert "<dt>Duplicate of</dt>" not in original
