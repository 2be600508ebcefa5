"""The staff UI: thin views over search.service, the same call REST and MCP make.

Every page is rendered on the server, so it works without JavaScript. The
search page also answers its own URL with just the part that changes when
asked with the `X-UI-Fragment` header; ui/static/ui/ui.js swaps that
in as the user types. Record text is escaped once, by the templates, for
both paths.
"""

from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.cache import patch_vary_headers

from accounts.decorators import staff_required
from backlog import access, audit
from backlog.access import sees_all_products
from backlog.models import RECORD_MODELS
from connectors.models import history as sync_history
from search import service
from search.contract import NotFound, SearchError
from search.service import health as index_health

from . import dashboard as figures
from . import writing
from .duplicates import likely_duplicates, related
from .search_form import carried, chips, facet_groups

FRAGMENTS = {"results": "ui/_results.html", "spotlight": "ui/_spotlight.html"}
SIMILAR_LIMIT = 10
TIMELINE_SIDE = 5


@staff_required
def search(request):
    response, error, status = None, None, 200
    if request.GET.get("query", "").strip():
        params = request.GET.copy()
        params.setdefault("detail", "full")  # the page shows snippets; concise hits are for agents
        try:
            response = service.call("search", params, request.user)
        except SearchError as exc:
            error, status = str(exc), exc.status
    context = {
        "query": request.GET.get("query", ""),
        "sort": request.GET.get("sort", "relevant"),
        "mode": request.GET.get("mode", "hybrid"),
        "response": response,
        "error": error,
        "facet_groups": facet_groups(request.GET, response and response["facets"], request.user),
        "carried": carried(request.GET),
        "chips": chips(request.GET.get("query", ""), response and response.get("filters")),
        # Said on every search while it holds, not only at sign-in: an empty search is no answer.
        "on_no_team": access.visible_product_ids(request.user) == [],
    }
    template = FRAGMENTS.get(request.headers.get("X-UI-Fragment"), "ui/search.html")
    page = render(request, template, context, status=status)
    patch_vary_headers(page, ["X-UI-Fragment"])
    return page


@staff_required
def search_export(request):
    """The search of the page's URL as a file (`format=csv` or `jsonl`), as GET /api/search?format= gives it."""
    try:
        link = lambda key: request.build_absolute_uri(reverse("ui:record", args=[key]))  # noqa: E731
        return service.export(request.GET, request.user, link=link).response()
    except SearchError as exc:
        params = request.GET.copy()
        params.pop("format", None)
        back = reverse("ui:search") + "?" + params.urlencode()
        context = {"error": str(exc), "heading": "This export could not run", "back": back}
        return render(request, "ui/error.html", context, status=exc.status)


@staff_required
def record(request, key):
    try:
        found = service.call("get", {"keys": [key]}, request.user)
        if not found["records"]:
            raise NotFound(f"No record has the key {key!r}; search for it, or check the key (like BUG-12).")
        record = found["records"][0]
        if record["key"] != key:  # keys match case-insensitively; show one address per record
            return redirect("ui:record", record["key"])
        similar = duplicates = None
        if record["kind"] == "bug":
            duplicates = likely_duplicates(record, request.user)
        if record["kind"] != "product":
            params = {"key": key, "entities": [record["kind"]], "limit": SIMILAR_LIMIT}
            similar = related(service.call("similar", params, request.user), duplicates)
        timeline = None
        if record["kind"] in ("bug", "test"):
            params = {"key": key, "before": TIMELINE_SIDE, "after": TIMELINE_SIDE}
            timeline = service.call("timeline", params, request.user)
    except SearchError as exc:
        return render(request, "ui/error.html", {"error": str(exc), "key": key}, status=exc.status)
    shown = RECORD_MODELS[record["kind"]].objects.get(key=record["key"])
    context = {
        "record": record,
        "duplicates": duplicates,
        "similar": similar,
        "timeline": timeline,
        # Its changes from the audit trail: the record is one this user sees (`get` answered it).
        "history": audit.history(shown, request.user),
        **split_related(record["related"]),
    }
    if record["kind"] == "bug":  # "Duplicate of", marked in its tracker, and that write at ?write=
        context |= writing.on_record_page(shown, request.user, request.GET.get("write"))
    return render(request, "ui/record.html", context)


# Relations that name one record: shown among the details ("Duplicate of BUG-12").
ONE_RECORD = ("product", "feature", "test", "duplicate_of")


def split_related(related: dict) -> dict:
    """A record's relations as links (its product, feature, test) and lists (its tests, bugs, ...)."""
    links = {name: rel["items"][0] for name, rel in related.items() if name in ONE_RECORD and rel["items"]}
    lists = {name: rel for name, rel in related.items() if name not in ONE_RECORD}
    if "bugs" in lists:
        lists.pop("open_bugs", None)  # the bug list shows each status already
    if "duplicates" in lists and not lists["duplicates"]["total"]:
        lists.pop("duplicates")  # most bugs have none: an empty section would only say so
    return {"links": links, "lists": lists}


@staff_required
def dashboard(request):
    products, totals = figures.counts_per_product(request.user)
    context = {
        "products": products,
        "totals": totals,
        "health": index_health(request.user),
        "recent_bugs": figures.recent_bugs(request.user),
        "chart": figures.severity_chart(request.user),
        "saved_searches": figures.saved_searches(request.user),
        "sources": sync_history(request.user),
        # A sync writes as the operator: its errors may name records of any product.
        "sync_errors_shown": sees_all_products(request.user),
    }
    return render(request, "ui/dashboard.html", context)


def favicon(request):
    """/favicon.ico: the icon the pages link to (an SVG), for clients that ask here."""
    return redirect(static("ui/favicon.svg"), permanent=True)
