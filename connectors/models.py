"""Where records come from: a source (a Jira project, a GitHub repository, a
TestRail project, a TestIO product), each sync of it, and which record each
upstream item became.

A source never holds a secret: it names the environment variables that hold
them (`user_env`, `token_env`), read only when a sync runs. Its state is its
checkpoint (the high-water mark of upstream `updated` already written), the
duplicate links still waiting for their original, and what the deletion
sweep last saw. `SyncedRecord` ties an upstream id to the record key it was
written under: the sweep deletes what upstream no longer lists, and a moved
issue (a new key for the same id) replaces its old record. A `Tombstone`
keeps an upstream item whose record was deleted here, however it was.
"""

import re
from datetime import timedelta
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Upper
from django.utils import timezone

ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
#: What the service reads for itself (docs/settings.md): never a source's credentials.
SERVICE_SECRETS = {
    "SECRET_KEY",
    "DATABASE_URL",
    "DATABASE_REPLICA_URLS",
    "ADMIN_PASSWORD",
    "OIDC_CLIENT_SECRET",
    "EMBEDDING_API_KEY",
    "SEARCH_RERANK_API_KEY",
}

#: A source that keeps failing waits longer before its next scheduled try,
#: doubling from its schedule up to this: a broken upstream is asked less, not more.
BACKOFF_MAX = timedelta(hours=24)


def no_credentials(url: str) -> None:
    """A source's URL holds no user or password: they belong in the environment
    variables the source names, not in a field every admin and page shows."""
    if "@" in urlsplit(url).netloc:
        raise ValidationError(
            "take the user and password out of the URL: put them in the environment variables "
            "this source names (user_env, token_env)"
        )


class Kind(models.TextChoices):
    JIRA = "jira", "Jira"
    GITHUB = "github", "GitHub Issues"
    TESTRAIL = "testrail", "TestRail"
    TESTIO = "testio", "TestIO"


class Source(models.Model):
    name = models.CharField(max_length=200, unique=True, help_text="how commands and the dashboard name it")
    kind = models.CharField(max_length=16, choices=Kind)
    url = models.URLField(
        max_length=500,
        validators=[no_credentials],
        help_text="the site or API base, like https://example.atlassian.net (no user or password in it)",
    )
    project = models.CharField(
        max_length=200,
        help_text="Jira project key, GitHub OWNER/NAME, TestRail project id, TestIO product id",
    )
    product_key = models.CharField(
        max_length=64,
        blank=True,
        help_text="our product's key; empty: from the project (HADOOP, SEAMONKEY), kept after the first sync",
    )
    query = models.TextField(
        blank=True,
        help_text="Jira: JQL ANDed to the project's, like issuetype = Bug; "
        "GitHub: labels an issue must have, comma-separated",
    )
    mapping = models.JSONField(
        default=dict, blank=True, help_text="overrides of the default field mapping (docs/connectors.md)"
    )
    user_env = models.CharField(
        max_length=100, blank=True, help_text="environment variable holding the user name or e-mail, if any"
    )
    token_env = models.CharField(max_length=100, help_text="environment variable holding the API token")
    teams = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="sources",
        help_text="the teams who see this source's product (a sync never gives it others)",
    )
    schedule_minutes = models.PositiveIntegerField(
        default=30, help_text="sync under `serve` every this many minutes; 0: only by hand"
    )
    sweep_minutes = models.PositiveIntegerField(
        default=360, help_text="look for deletions upstream at most this often (a listing of every id)"
    )
    enabled = models.BooleanField(default=True)
    write_back = models.BooleanField(
        default=False,
        help_text="file issues in this tracker from QA Search (writeback/), with the source's token: "
        "a new power over the team's tracker, so off until an admin turns it on (docs/connectors.md, Writing back)",
    )
    created_at = models.DateTimeField(default=timezone.now)

    checkpoint = models.DateTimeField(
        null=True, blank=True, help_text="items updated up to this time are written; the next sync asks from here"
    )
    swept_at = models.DateTimeField(null=True, blank=True)
    pending_links = models.JSONField(
        default=dict, blank=True, help_text="duplicate links whose original is not written yet: key -> key"
    )
    state = models.JSONField(default=dict, blank=True, help_text="what a source kind keeps between syncs")

    hook_secret_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="environment variable holding the webhook secret (empty: GITHUB_WEBHOOK_SECRET, "
        "JIRA_WEBHOOK_SECRET or TESTRAIL_WEBHOOK_SECRET by kind); docs/connectors.md, Webhooks",
    )
    hook_received_at = models.DateTimeField(null=True, blank=True, help_text="the last webhook delivery taken")
    hook_refused = models.PositiveIntegerField(default=0, help_text="deliveries refused: a wrong or missing signature")
    hook_refused_at = models.DateTimeField(null=True, blank=True)
    hook_ignored = models.PositiveIntegerField(
        default=0, help_text="deliveries signed for this source about a project it does not sync"
    )

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["kind", "url", "project"], name="source_once")]

    def __str__(self):
        return self.name

    def clean(self):
        """The environment variables it names are credentials for its upstream, never the
        service's own: a source sends token_env's and user_env's values to its URL, and
        a webhook secret that is not one (HOME) is one anybody can guess."""
        problems = {}
        for field in ("user_env", "token_env", "hook_secret_env"):
            name = getattr(self, field)
            if not name:
                continue
            if not ENV_NAME.fullmatch(name):
                problems[field] = f"{name[:100]!r} is no environment variable's name: like JIRA_API_TOKEN"
            elif name in SERVICE_SECRETS or (field != "hook_secret_env" and name.endswith("_WEBHOOK_SECRET")):
                problems[field] = f"{name} is the service's own secret, not one for this source's upstream"
            elif field == "hook_secret_env" and not name.endswith("SECRET"):
                problems[field] = f"{name}: a webhook secret's variable ends in SECRET, like JIRA_WEBHOOK_SECRET"
        if problems:
            raise ValidationError(problems)

    @property
    def hook_secret_variable(self) -> str:
        return self.hook_secret_env or f"{self.kind.upper()}_WEBHOOK_SECRET"

    def due(self, now=None) -> bool:
        """Whether a scheduled sync should run now: its period after the last
        run, doubled for each failure in a row since the last good one (at most
        BACKOFF_MAX), so a source that keeps failing is asked less often."""
        if not self.enabled or not self.schedule_minutes:
            return False
        latest = list(self.runs.order_by("-started_at").values_list("started_at", "status")[:8])
        if not latest:
            return True
        failures = next((n for n, (_, status) in enumerate(latest) if status != RunStatus.FAILED), len(latest))
        wait = min(timedelta(minutes=self.schedule_minutes) * 2 ** max(failures - 1, 0), BACKOFF_MAX)
        return (now or timezone.now()) - latest[0][0] >= max(wait, timedelta(minutes=self.schedule_minutes))


class RunStatus(models.TextChoices):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class SyncRun(models.Model):
    """One sync: what it did, and its first errors."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="runs")
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus, default=RunStatus.RUNNING)
    fetched = models.PositiveIntegerField(default=0, help_text="upstream items read")
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0, help_text="items that could not be written (see errors)")
    requests = models.PositiveIntegerField(default=0, help_text="HTTP requests made upstream")
    swept = models.BooleanField(default=False, help_text="whether this run looked for deletions")
    missed = models.PositiveIntegerField(
        default=0,
        help_text="of a source that takes webhooks: records this run had to write or delete that upstream "
        "changed well before it started (what the pushes missed)",
    )
    errors = models.JSONField(default=list, blank=True, help_text="the first problems, in plain words")
    cause = models.CharField(
        max_length=500,
        blank=True,
        help_text="why a failed run stopped, in one line naming hosts and paths, never records "
        "(the dashboard shows it to the source's teams; the errors, which may name records, "
        "to those who see every product)",
    )

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return f"{self.source} at {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def seconds(self) -> float | None:
        return None if self.finished_at is None else (self.finished_at - self.started_at).total_seconds()

    def summary(self) -> str:
        took = f"{self.seconds:.1f} s" if self.seconds is not None else "running"
        return (
            f"created {self.created}, updated {self.updated}, deleted {self.deleted}, "
            f"unchanged {self.unchanged}" + (f", skipped {self.skipped}" if self.skipped else "") + f" in {took}"
        )


class SyncedRecord(models.Model):
    """An upstream item and the record it was written as."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="records")
    kind = models.CharField(max_length=16)
    upstream_id = models.CharField(max_length=100)
    key = models.CharField(max_length=64)
    upstream_updated = models.DateTimeField(
        null=True, blank=True, help_text="upstream's time of the state written: an older one is never written over it"
    )
    content_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="a hash of the state written: another state of the same upstream time is in doubt "
        "(connectors.writer)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "kind", "upstream_id"], name="synced_record_once"),
        ]
        indexes = [
            models.Index(fields=["source", "kind", "key"], name="synced_record_key"),
            # The record tables' deletion trigger finds a deleted record's row by its folded key.
            models.Index(models.F("kind"), Upper("key"), name="synced_record_folded_key"),
        ]

    def __str__(self):
        return f"{self.source} {self.kind} {self.upstream_id} → {self.key}"


class Tombstone(models.Model):
    """An upstream item whose record was deleted here: by a sweep, a webhook or a
    curator (the admin, the API, raw SQL). A delivery that would write it again
    is read again from upstream first (connectors.hooks.processing), for as long
    as the tombstone is kept: until upstream's own answer writes the item again
    (connectors.writer clears it), however long that takes.

    A trigger on the record tables writes them (migration 0006): a deleted bug
    or test that a SyncedRecord maps moves from SyncedRecord to here, in the
    deleting statement, whatever path it came by; connectors.sweep.bury those
    whose record was not there to delete (a webhook's deletion of an item
    never held)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="tombstones")
    kind = models.CharField(max_length=16)
    upstream_id = models.CharField(max_length=100)
    key = models.CharField(max_length=64, blank=True, help_text="the record's key when it was deleted, if it had one")
    deleted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "kind", "upstream_id"], name="tombstone_once")]

    def __str__(self):
        return f"{self.source} {self.kind} {self.upstream_id} deleted {self.deleted_at:%Y-%m-%d %H:%M}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DONE = "done"
    IGNORED = "ignored"
    FAILED = "failed"


class Delivery(models.Model):
    """A webhook delivery taken: verified and stored at once, processed after
    (connectors.hooks). The vendor's delivery id makes a repeat a no-op."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=200, help_text="the vendor's id of the delivery, or of its body")
    event = models.CharField(max_length=100, help_text="the vendor's event and action, like issues.edited")
    upstream_id = models.CharField(max_length=100, blank=True, help_text="the upstream item it is about")
    received_at = models.DateTimeField(default=timezone.now)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    processed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["received_at", "id"]
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["source", "delivery_id"], name="delivery_once")]
        indexes = [
            models.Index(fields=["received_at"], name="delivery_pending", condition=models.Q(status="pending")),
            models.Index(fields=["source", "upstream_id"], name="delivery_item"),
            models.Index(fields=["source", "received_at"], name="delivery_recent"),
        ]

    def __str__(self):
        return f"{self.source} {self.event} {self.delivery_id}"


def history(user, runs: int = 5) -> list[tuple[Source, list[SyncRun]]]:
    """The sources feeding products `user` may see, each with its latest runs
    (a source whose product is not made yet shows only to those who see every product)."""
    from backlog.access import visible_product_ids
    from backlog.models import Product

    sources = Source.objects.order_by("name")
    ids = visible_product_ids(user)
    if ids is not None:
        keys = [key.upper() for key in Product.objects.filter(id__in=ids).values_list("key", flat=True)]
        sources = [s for s in sources if s.product_key.upper() in keys]
    return [(source, list(source.runs.order_by("-started_at")[:runs])) for source in sources]


def overdue_sources(now=None) -> tuple[int, int]:
    """(overdue, scheduled): the enabled scheduled sources, and those whose last
    good sync (or, never synced, their creation) is older than two of their
    periods. One query, whatever the number of sources (readyz asks it)."""
    now = now or timezone.now()
    scheduled = Source.objects.filter(enabled=True, schedule_minutes__gt=0).annotate(
        last_ok=models.Max("runs__finished_at", filter=models.Q(runs__status=RunStatus.OK))
    )
    rows = list(scheduled.values_list("last_ok", "created_at", "schedule_minutes"))
    overdue = sum(now - (last_ok or created) > timedelta(minutes=2 * minutes) for last_ok, created, minutes in rows)
    return overdue, len(rows)
