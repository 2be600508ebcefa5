"""The outbox: each write to a team's tracker is a row before it is a call.

A row is committed with the local decision that asks for it (writeback.service),
then sent by writeback.worker, and ends `sent` (with upstream's key and link and
the record written here from upstream's answer), `failed` (with upstream's own
words: nothing was made there, nothing here) or `dropped` (by a person). Its
`marker` rides in the upstream write (for GitHub a hidden line in the issue's
body), so an answer lost in flight is settled by looking for it, not by
sending again.

Every change of a row is in the audit trail (backlog.models.audited: who, through
which surface, when): made, each send begun, sent or failed, retried or dropped
by a person. Its draft is left out (it never changes; the row holds it), and so
are the back-off's times.
"""

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from backlog.models import audited


class Operation(models.TextChoices):
    FILE = "file", "file an issue"
    DUPLICATE = "duplicate", "mark a duplicate"
    COMMENT = "comment", "comment on an issue"  # a failure linked to a bug (triage)


class Status(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    DROPPED = "dropped"


class Surface(models.TextChoices):
    REST = "rest", "REST"
    MCP = "mcp", "MCP"
    UI = "ui", "UI"
    ADMIN = "admin", "admin"


def new_marker() -> str:
    return secrets.token_hex(16)


@audited("draft", "next_try_at", "updated_at")
class UpstreamWrite(models.Model):
    source = models.ForeignKey("connectors.Source", on_delete=models.PROTECT, related_name="writes")
    product = models.ForeignKey("backlog.Product", on_delete=models.PROTECT, related_name="upstream_writes")
    operation = models.CharField(max_length=16, choices=Operation, default=Operation.FILE)
    draft = models.JSONField(help_text="the local decision: what to write (for a file: the draft bug)")
    marker = models.CharField(max_length=64, unique=True, default=new_marker, editable=False)
    status = models.CharField(max_length=16, choices=Status, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="sends begun (the next one asks for the marker)")
    next_try_at = models.DateTimeField(default=timezone.now, help_text="a pending write is not sent before this")
    upstream_key = models.CharField(max_length=200, blank=True, help_text="upstream's name for it: mozilla/x#48")
    upstream_url = models.URLField(max_length=500, blank=True)
    record_key = models.CharField(max_length=64, blank=True, help_text="the record written here from the answer")
    error = models.CharField(max_length=1000, blank=True, help_text="upstream's own words, or why it waits")
    note = models.CharField(max_length=1000, blank=True, help_text="what the write did beyond what was asked")
    once = models.CharField(
        max_length=200, blank=True, help_text="what this write is the one of: at most one write for it (a bug's run)"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="upstream_writes"
    )
    surface = models.CharField(max_length=8, choices=Surface)
    idempotency_key = models.CharField(max_length=255, blank=True, help_text="the caller's: a repeat is this write")
    request_hash = models.CharField(max_length=64, blank=True, help_text="of the request the key came with")
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="upstream_write_idempotency",
            ),
            models.UniqueConstraint(fields=["source", "once"], condition=~Q(once=""), name="upstream_write_once"),
        ]
        indexes = [
            models.Index(fields=["next_try_at", "id"], name="upstream_write_due", condition=Q(status="pending")),
        ]

    def __str__(self):
        what = self.draft.get("title") or (
            f"{self.draft.get('key')} as a duplicate of {self.draft.get('of')}"
            if self.operation == Operation.DUPLICATE
            else f"on {self.draft.get('key')}: {self.draft.get('test')}"
        )
        return f"{self.operation} {what[:60]!r} to {self.source} ({self.status})"
