"""The staff UI's pages for saved searches: save the search in the URL, open
one (which marks it seen), rename it or set its webhook, delete it. The
dashboard lists them with their new matches (ui/dashboard.py). A user sees
and changes only their own."""

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.decorators import staff_required
from search.contract import SearchError

from .forms import SavedSearchForm
from .models import SavedSearch
from .models import new_secret as secret


def search_url(saved: SavedSearch) -> str:
    return reverse("ui:search") + "?" + urlencode(saved.query_string())


@staff_required
def create(request):
    """GET /saved/new?<a search's parameters>: name it; POST: save it."""
    try:
        saved = SavedSearch.from_params(request.GET, owner=request.user, name=request.GET.get("query", "")[:200])
    except SearchError as exc:
        context = {"error": str(exc), "heading": "This search cannot be saved", "back": reverse("ui:search")}
        return render(request, "ui/error.html", context, status=exc.status)
    return _form(request, saved, ": the dashboard shows what is new in it")


@staff_required
def edit(request, pk: int):
    saved = get_object_or_404(SavedSearch, pk=pk, owner=request.user)
    return _form(request, saved)


def _form(request, saved: SavedSearch, saved_note: str = ""):
    """The name-and-webhook form of `saved`; saved on a valid POST, then the dashboard."""
    form = SavedSearchForm(request.POST or None, instance=saved)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved “{saved.name}”{saved_note}.")
        return redirect("ui:dashboard")
    return render(request, "saved/form.html", {"form": form, "saved": saved, "search_url": search_url(saved)})


@staff_required
def open_search(request, pk: int):
    """The saved search's results page; what was new is now seen."""
    saved = get_object_or_404(SavedSearch, pk=pk, owner=request.user)
    saved.mark_seen()
    return redirect(search_url(saved))


@staff_required
@require_POST
def new_secret(request, pk: int):
    """A new webhook secret: the old one no longer signs anything."""
    saved = get_object_or_404(SavedSearch, pk=pk, owner=request.user)
    saved.webhook_secret = secret()
    saved.save(update_fields=["webhook_secret"])
    messages.success(request, "A new secret signs the webhook from now on; give it to the receiver.")
    return redirect("saved:edit", saved.pk)


@staff_required
@require_POST
def delete(request, pk: int):
    saved = get_object_or_404(SavedSearch, pk=pk, owner=request.user)
    saved.delete()
    messages.success(request, f"Deleted the saved search “{saved.name}”.")
    return redirect("ui:dashboard")
