"""Report a bug from the staff UI, checking for duplicates as it is written.

The page is a form. While the reporter types, ui/static/ui/report.js posts
the form to the same URL with `X-UI-Fragment: duplicates` and swaps in the
panel the server renders: the draft's likely duplicates, from the same
`check_duplicates` call REST and MCP make (nothing is written to answer
it). Without the script, "Check for duplicates" does the same with a page
load.

"File bug" files in the product's own tracker where its source writes back
(ui/filing.py, over writeback.service: the write pending, sent or failed, at
`?write=<id>`), and here only, as a local BUG-<n>, where none does: the page
says which beside the button.

Each candidate has a button "Duplicate of BUG-x": it files the report as a
closed duplicate linked to that bug (status `duplicate`, `duplicate_of`
BUG-x) and opens BUG-x, so the reporter's words and environment are kept on
the original's list of duplicates instead of becoming a second open bug.
"""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db import IntegrityError, connection, transaction
from django.shortcuts import redirect, render
from django.urls import reverse

from accounts.decorators import staff_required
from backlog import access
from backlog.models import Bug, BugStatus, Feature, Product, Severity, key_holder
from search import service
from search.contract import SearchError

from . import filing

DRAFT_FIELDS = ("description", "steps", "actual_result", "expected_result", "environment")
RAW_FIELDS = ("steps", "actual_result", "expected_result", "environment")  # kept in raw_data, as a tracker sends them
PANEL_LIMIT = 5


class ReportForm(forms.Form):
    product = forms.ModelChoiceField(Product.objects.none(), to_field_name="key")
    feature = forms.ModelChoiceField(Feature.objects.none(), to_field_name="key", required=False)
    title = forms.CharField(max_length=500)
    severity = forms.ChoiceField(choices=[("", "—"), *Severity.choices], required=False)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    steps = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, help_text="One step a line.")
    actual_result = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    expected_result = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    environment = forms.CharField(required=False, help_text="Device, OS, build.")
    # Made when the form is rendered and sent with it: a double click, or the form sent again, is one write.
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=255)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        products = access.visible(Product.objects.order_by("name"), user)
        self.fields["product"].queryset = products
        features = Feature.objects.filter(product__in=products).select_related("product")
        features = features.order_by("product__name", "name", "key")
        self.fields["feature"].queryset = features  # what may be chosen: clean() says when it is another product's
        # What is offered follows the product: its own features once it is chosen (a page load
        # without script, after "Check for duplicates"; report.js as it changes), each
        # product's under its name before. report.js reads them all from the page.
        self.features_by_product = {}
        for feature in features:
            self.features_by_product.setdefault(feature.product.key, []).append([feature.key, feature.name])
        names = {product.key: str(product) for product in products}
        chosen = self.data.get("product") or self.initial.get("product")
        offered = (
            self.features_by_product.get(chosen, [])
            if chosen in names
            else [(names[key], listed) for key, listed in self.features_by_product.items()]
        )
        self.fields["feature"].choices = [("", "---------"), *offered]
        self.destinations = filing.destinations(products)
        self.destination = self.destinations.get(chosen) if chosen in names else None

    def clean(self):
        data = super().clean()
        product, feature = data.get("product"), data.get("feature")
        if product and feature and feature.product_id != product.id:
            self.add_error("feature", f"{feature.key} belongs to {feature.product.key}, not {product.key}.")
        return data

    def draft(self) -> dict | None:
        """The check_duplicates parameters of what is typed so far; None
        before there is a title to check. Read from the raw input, so a
        half-filled form is checked too."""
        title = (self.data.get("title") or "").strip()
        if len(title) < 2:
            return None
        draft = {"title": title[:500], "limit": PANEL_LIMIT}
        draft.update({name: self.data[name] for name in DRAFT_FIELDS if (self.data.get(name) or "").strip()})
        product = self.data.get("product")
        if product and self.fields["product"].queryset.filter(key=product).exists():
            draft["product"] = product
        feature = self.data.get("feature")
        if feature and self.fields["feature"].queryset.filter(key=feature).exists():
            draft["draft_feature"] = feature  # the bugs of every feature stay; another's is never high
        return draft


@staff_required
@permission_required("backlog.add_bug", raise_exception=True)
def report_bug(request):
    if "write" in request.GET:
        return _write_page(request, request.GET["write"])
    # A link may prefill the form (a triaged failure's "Report as new bug": ui/triage.py).
    prefill = {name: request.GET[name] for name in ("product", "title", "description") if request.GET.get(name)}
    form = ReportForm(request.POST or None, user=request.user, initial={**prefill, "idempotency_key": filing.new_key()})
    checked = error = draft = None
    if request.method == "POST":
        draft = form.draft()
        if draft:
            try:
                checked = service.call("check_duplicates", draft, request.user)
            except SearchError as exc:
                error = str(exc)
        if request.headers.get("X-UI-Fragment") == "duplicates":
            return render(request, "ui/_duplicates.html", {"checked": checked, "error": error, "draft": draft})
        action = "duplicate" if request.POST.get("duplicate_of") else request.POST.get("action", "")
        if action in ("file", "duplicate") and form.is_valid():
            original = request.POST.get("duplicate_of") if action == "duplicate" else None
            filed = _filed(request, form, original)
            if filed is not None:
                return filed
    context = {"form": form, "checked": checked, "error": error, "draft": draft}
    return render(request, "ui/report.html", context, status=400 if form.errors else 200)


def _filed(request, form, original: str | None):
    """Where a valid form's "File bug" or "Duplicate of" lands; None when refused (said on the form)."""
    found = _visible_bug(original, request.user) if original else None
    product = form.cleaned_data["product"]
    if original and not found:
        form.add_error(None, f"{original} is not a bug you can see; choose another or file it as new.")
    elif found and found.product_id != product.id:
        form.add_error(
            "product", f"{original} is a bug of {found.product.key}: choose that product to file a duplicate of it."
        )
    elif (write := filing.file_upstream(form, request.user, found.key if found else None)) is not None:
        return redirect(f"{reverse('ui:report_bug')}?write={write['id']}")  # a duplicate: filed, then marked
    elif found and not form.errors:  # the original is no issue of the product's tracker: here only
        bug = _file(form.cleaned_data, request.user, found)
        messages.success(request, f"Filed {bug.key} as a duplicate of {original}.")
        return redirect("ui:record", original)
        return redirect(f"{reverse('ui:report_bug')}?write={write['id']}")
    elif not form.errors:
        bug = _file(form.cleaned_data, request.user, None)
        messages.success(request, f"Filed {bug.key}.")
        return redirect("ui:record", bug.key)
    return None


def _write_page(request, write_id: str):
    """A write from this page: pending (looked at again), sent, or failed with its draft back in the form."""
    try:
        write = filing.look_up(write_id, request.user)
    except SearchError as exc:
        return render(request, "ui/report.html", {"missing": str(exc)}, status=exc.status)
    form = ReportForm(user=request.user, initial=write["draft"]) if "draft" in write else None
    context = {"form": form, "write": write, "refresh": filing.REFRESH_SECONDS}
    return render(request, "ui/report.html", context)


def _visible_bug(key: str, user) -> Bug | None:
    return access.visible(Bug.objects.filter(key=key), user).first()


def _file(data: dict, user, duplicate_of: Bug | None) -> Bug:
    """The new bug, under the next free BUG-<n> key; closed and linked when `duplicate_of` is given."""
    raw = {name: data[name].strip() for name in RAW_FIELDS if data.get(name, "").strip()}
    if "steps" in raw:
        raw["steps"] = [line.strip() for line in raw["steps"].splitlines() if line.strip()]
    fields = {
        "product": data["product"],
        "feature": data.get("feature"),
        "title": data["title"].strip(),
        "description": data.get("description", "").strip(),
        "severity": data.get("severity") or None,
        "status": BugStatus.DUPLICATE if duplicate_of else BugStatus.OPEN,
        "duplicate_of": duplicate_of,
        "raw_data": {**raw, "reported_by": user.get_username(), "reported_in": "staff UI"},
    }
    for _ in range(5):  # another report may take the same number at the same moment
        try:
            with transaction.atomic():
                return Bug.objects.create(key=_next_key(), **fields)
        except IntegrityError:
            continue
    raise IntegrityError("no free bug key after 5 tries")


def _next_key() -> str:
    with connection.cursor() as cursor:
        cursor.execute(r"SELECT max(substring(key FROM 5)::bigint) FROM backlog_bug WHERE key ~ '^BUG-[0-9]{1,18}$'")
        number = (cursor.fetchone()[0] or 0) + 1
    while key_holder(f"BUG-{number}"):
        number += 1
    return f"BUG-{number}"
