"""The audit trail: who changed which record, what changed, when, through which surface.

django-pghistory's triggers write an event for every insert, update (of a
field that changed) and delete of a product, feature, test or bug, whatever
wrote it: the ORM, the importer's bulk upserts, a sync, raw SQL. Its
context (a row per request, command or sync, joined to each event) says who
and through what:

- `AuditMiddleware`: each write request, with its user (DRF's token users
  too, once DRF sets them) and its surface from the path: admin, REST,
  import (REST), webhook, UI;
- `surface()` around a command, a sync, a webhook delivery: "import",
  "sync", "webhook", with the source's name.

The event tables refuse UPDATE and DELETE (append_only): history is never
rewritten by the app; the tables' owner may still drop that trigger.
"""

import functools

from pghistory import context
from pghistory.middleware import HistoryMiddleware

from . import access

SURFACES = [("/admin/", "admin"), ("/api/import", "import (REST)"), ("/api/", "REST"), ("/hooks/", "webhook")]
# Every surface an event can name: a request's (by its path, else the UI's), and those of `surface()`'s callers.
SURFACE_NAMES = [*dict.fromkeys(name for _, name in SURFACES), "UI", "sync", "import", "seed_demo"]


class AuditMiddleware(HistoryMiddleware):
    def get_context(self, request):
        found = next((name for prefix, name in SURFACES if request.path.startswith(prefix)), "UI")
        return {**super().get_context(request), "surface": found}


def surface(name: str, **more):
    """The context of writes made outside a request: `with surface("sync", source=...)`."""
    return context(surface=name, **more)


def in_surface(name: str, **more):
    """`surface` around each call of the function it decorates: a context made
    anew for each call (one pghistory.context used as a decorator is entered
    again and again, and loses its metadata inside another context)."""

    def decorate(function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with surface(name, **more):
                return function(*args, **kwargs)

        return wrapped

    return decorate


# A relation's column in a diff, and what the page calls it (its value shown as the record's key).
RELATIONS = {"product_id": "product", "feature_id": "feature", "test_id": "test", "duplicate_of_id": "duplicate_of"}


def _keys_of(events, visible: list[int] | None) -> dict:
    """(relation column, id) -> key of the records the relations in `events`' diffs name,
    of those the viewer sees (`visible` products; None: all)."""
    from .models import Bug, Feature, Product, QATest

    models = {"product_id": Product, "feature_id": Feature, "test_id": QATest, "duplicate_of_id": Bug}
    wanted: dict[str, set] = {}
    for event in events:
        for name, change in (event.pgh_diff or {}).items():
            if name in models:
                wanted.setdefault(name, set()).update(v for v in change if isinstance(v, int))
    found = {}
    for name, ids in wanted.items():
        records = models[name].objects.filter(pk__in=ids)
        if visible is not None:
            records = records.filter(**{"pk__in" if models[name] is Product else "product_id__in": visible})
        found.update({(name, pk): key for pk, key in records.values_list("pk", "key")})
    return found


#: What a relation shows for a record the viewer does not see (or one deleted since).
NOT_SHOWN = "(a record not shown)"


def history(record, user=None) -> list[dict]:
    """A record's events, oldest first: when, what (insert, update, delete), who, how, and the fields changed
    (before and after), as `user` may see them (None: all, as a command does). An event from
    when the record was in a product the user does not see is only its time and kind
    (`hidden`), and a relation names only records the user sees: a record moved into
    their product shows nothing of where it was before."""
    from django.contrib.auth import get_user_model
    from pghistory.models import Events

    visible = None if user is None else access.visible_product_ids(user)
    events = list(Events.objects.tracks(record).order_by("pgh_created_at", "pgh_id"))
    users = dict(
        get_user_model()
        .objects.filter(pk__in={e.pgh_context.get("user") for e in events if e.pgh_context})
        .values_list("pk", "username")
    )
    keys = _keys_of(events, visible)
    own_product = record.pk if record._meta.model_name == "product" else None
    rows = []
    for event in events:
        product = own_product or (event.pgh_data or {}).get("product_id")
        if visible is not None and product not in visible:
            rows.append({"at": event.pgh_created_at, "what": event.pgh_label, "hidden": True, "changed": {}})
            continue
        rows.append(_row(event, users, keys))
    return rows


def _row(event, users: dict, keys: dict) -> dict:
    meta = event.pgh_context or {}
    diff = {}
    for name, (before, after) in (event.pgh_diff or {}).items():
        if name == "updated_at" and len(event.pgh_diff) > 1:
            continue  # said by the event's own time
        if name in RELATIONS:
            shown = [value if value is None else keys.get((name, value), NOT_SHOWN) for value in (before, after)]
            name, (before, after) = RELATIONS[name], shown
        diff[name] = (before, after)
    return {
        "at": event.pgh_created_at,
        "what": event.pgh_label,
        "who": users.get(meta.get("user")) or meta.get("source") or meta.get("command") or "",
        "token": meta.get("token", ""),
        "surface": meta.get("surface", "a command" if not meta else ""),
        "changed": diff,
    }
