"""A staff user's saved searches: a query and its filters, what is new since
they last looked, and an optional webhook that is sent new matches.

A saved search stores the search's parameters (the contract's own names,
validated by search.contract.SearchRequest), never results: what it matches,
and how many of those are new, is asked of the search each time, as its
owner, so it shows only what the owner may see at that moment.
"""

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from search import service
from search.contract import QUERY_MAX, SearchError, SearchRequest
from search.contract.cursors import PAGING

from .addresses import WebhookRefused, check_url

# The parameters a saved search keeps besides query and mode: every filter and
# the sort, not the paging ones (a saved search is the whole list).
FILTERS = [name for name in SearchRequest.model_fields if name not in {*PAGING, "query", "mode"}]


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class SavedSearch(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_searches")
    name = models.CharField(max_length=200)
    query = models.CharField(max_length=QUERY_MAX)
    mode = models.CharField(max_length=16, default="hybrid")
    filters = models.JSONField(default=dict, blank=True, help_text="the search's other parameters, by their names")
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(
        default=timezone.now, help_text="when the owner last opened it: records updated after it are new"
    )
    webhook_url = models.URLField(
        max_length=2000, blank=True, help_text="new matches are POSTed here as signed JSON (http or https)"
    )
    webhook_secret = models.CharField(max_length=64, default=new_secret, help_text="the key of the HMAC-SHA256")
    notified_until = models.DateTimeField(
        default=timezone.now, help_text="records updated after it have not been sent to the webhook yet"
    )
    last_delivery_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0, help_text="webhook runs that failed in a row")
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name_plural = "saved searches"
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="saved_search_name_per_owner")]

    def __str__(self):
        return self.name

    @classmethod
    def from_params(cls, params, **fields) -> "SavedSearch":
        """A saved search of the search `params` (a query string's or a dict), validated
        as the search validates them (SearchError) and stored in their normal form."""
        request = service.parse(SearchRequest, {name: value for name, value in _items(params) if name not in PAGING})
        if len(request.query) > QUERY_MAX:  # a pasted stack trace may be searched, not kept whole
            raise SearchError(
                f"query: a saved search keeps at most {QUERY_MAX} characters, and this pasted stack trace has "
                f"{len(request.query):,}: save a search of its exception and top frames instead."
            )
        filters = request.model_dump(mode="json", include=set(FILTERS), exclude_defaults=True)
        return cls(query=request.query, mode=request.mode, filters=filters, **fields)

    def params(self) -> dict:
        """The search's parameters, as service.call takes them."""
        return {"query": self.query, "mode": self.mode, **self.filters}

    def query_string(self) -> dict[str, str]:
        """The parameters as the staff UI's URL writes them (lists comma-separated)."""
        return {
            name: ",".join(value) if isinstance(value, list) else str(value) for name, value in self.params().items()
        }

    def clean(self):
        errors = {}
        try:
            service.parse(SearchRequest, self.params())
        except SearchError as exc:
            errors["query"] = str(exc)
        if self.webhook_url:
            try:
                check_url(self.webhook_url)
            except WebhookRefused as exc:
                errors["webhook_url"] = str(exc)
        if errors:
            raise ValidationError(errors)

    def ranked(self):
        """What it matches now, as its owner may see it (search.operations.export.Ranked)."""
        return service.ranked(self.params(), self.owner)

    def new_count(self) -> int:
        """Its matches updated (or created) since the owner last looked."""
        return self.ranked().count(self.last_seen_at)

    def mark_seen(self) -> None:
        self.last_seen_at = timezone.now()
        self.save(update_fields=["last_seen_at"])


def _items(params):
    if hasattr(params, "lists"):
        return [(name, values if len(values) > 1 else values[0]) for name, values in params.lists()]
    return list(params.items())
