"""Triage a test run from the staff UI: upload (or drop) a JUnit report, read its causes.

Thin over triage.service, the call REST, MCP and `manage.py triage` make:
the page posts the file and its product, and renders the answer it gets
(also embedded as JSON, #triage-json, the very dict the API returns). Each
suggestion has Confirm and Reject buttons, one click each (a form post, so
it works without JavaScript); a group says "Report as new bug", which
opens the report-a-bug page prefilled from the failure (ui/report.py).
ui/static/ui/triage.js only adds dropping a file on the page.
"""

import copy
from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from accounts.decorators import is_staff, staff_required
from backlog import access
from backlog.models import Product
from search.contract import SearchError
from triage import service
from triage.junit import refuse_declared
from triage.models import Run
from writeback import links
from writeback.models import UpstreamWrite


@staff_required
def triage_run(request):
    answer, error, status = None, None, 200
    try:
        if request.method == "POST":
            upload = request.FILES.get("file")
            if upload is None:
                raise SearchError("Choose a JUnit XML report (or drop one on the page).")
            params = {"product": request.POST.get("product", "")}
            answer = service.call(params, request.user, data=upload.read(), name=upload.name)
            return redirect(f"{reverse('ui:triage')}?run={answer['run']}")
        if run := request.GET.get("run"):
            answer = service.call({"run": run}, request.user)
    except SearchError as exc:
        error, status = str(exc), exc.status
    return _page(request, answer, error, status, (answer or {}).get("product") or request.POST.get("product", ""))


def _page(request, answer: dict | None, error: str | None, status: int, chosen: str = ""):
    products = access.visible(Product.objects.order_by("name"), request.user)
    chosen = chosen or _usual_product(request.user, products)
    context = {
        "answer": answer,
        "error": error,
        "products": products,
        "chosen": chosen,
        "groups": _with_report_links(_with_comments(answer, request.user)),
    }
    return render(request, "ui/triage.html", context, status=status)


def _usual_product(user, products) -> str:
    """The product a run is most likely of, so none is triaged against another by default:
    the one this person last triaged, else their only team's product; "" (the page then
    asks for one) when neither says."""
    last = access.visible(Run.objects.filter(created_by=user), user).order_by("-created_at")
    if key := last.values_list("product__key", flat=True).first():
        return key
    own = list(products.filter(teams__user=user).values_list("key", flat=True).distinct()[:2])
    return own[0] if len(own) == 1 else ""


def _refused(request, error: SearchError):
    """A report declared too large, refused before the CSRF check reads the form
    (config.middleware.DeclaredBodyLimitMiddleware): on this page for the staff, who may see it."""
    return _page(request, None, str(error), error.status) if is_staff(request.user) else None


triage_run.refuse_body = refuse_declared
triage_run.refused_page = _refused


@staff_required
def decide(request, run: int):
    """Confirm or reject one suggestion (a POST from its button); back to the run."""
    if request.method != "POST":
        return redirect(f"{reverse('ui:triage')}?run={run}")
    params = {name: request.POST.get(name, "") for name in ("signature", "bug", "decision")}
    try:
        write = links.decide(run, params, request.user, "ui")[1]
        verb = "Confirmed" if params["decision"] == "confirmed" else "Rejected"
        told = f" A comment goes to {write.draft['upstream']} in {write.source}." if write else ""
        messages.success(request, f"{verb} {params['bug']} for this cause; the next runs will know.{told}")
    except SearchError as exc:
        messages.error(request, str(exc))
    return redirect(f"{reverse('ui:triage')}?run={run}#group-{params['signature']}")


def _with_comments(answer: dict | None, user) -> dict | None:
    """Each confirmed suggestion that asked for a comment on its bug upstream (`write`,
    writeback.links) with that write as `comment`: pending, sent (its link) or failed
    (upstream's words). One query; a write of a product the user cannot see is not shown.
    A copy, for the page: the answer's JSON stays the one REST and MCP give."""
    if not answer:
        return answer
    answer = copy.deepcopy(answer)
    asked = [s for g in answer["groups"] for s in g["suggestions"] if s.get("write")]
    ids = [suggestion["write"] for suggestion in asked]
    writes = access.visible(UpstreamWrite.objects.filter(pk__in=ids).select_related("source"), user).in_bulk()
    for suggestion in asked:
        suggestion["comment"] = writes.get(suggestion["write"])
    return answer


def _with_report_links(answer: dict | None) -> list[tuple[dict, str]]:
    """Each group with the report-a-bug page prefilled from its draft."""
    if not answer:
        return []
    base = reverse("ui:report_bug")
    return [
        (group, f"{base}?{urlencode({'product': answer['product'], **group['draft']})}") for group in answer["groups"]
    ]
