"""QA records: products, their features, test cases and bugs.

The shape follows the interchange format (shared FORMAT.md). Every record has
a `key` that people and agents use (`PRD-3`, `BUG-1043`), unique across all
four kinds and regardless of case (`bug-1043` is BUG-1043, as every lookup
reads it); relations point at rows but are imported and exported by key.

A bug's `actual_result`, `expected_result`, `steps` and `environment` are
stored generated columns computed by PostgreSQL from `raw_data` (see
`backlog.db.raw_text`). The database, not Python, keeps them in sync, so every
write path (save, bulk_create, queryset.update, raw SQL, import) is covered.

A bug may name the report it repeats in `duplicate_of` (Bugzilla's dup_id,
Jira's "Duplicates" link): at most one, in the same product, never in a
circle. A cluster of duplicates is an original and every bug whose chain of
`duplicate_of` links ends at it (docs/format.md says why a column, not a
link table).
"""

import pghistory
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Upper
from django.utils import timezone

from . import bulk
from .db import RawText

KEY_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
key_validator = RegexValidator(
    KEY_PATTERN,
    "A key is 1 to 64 letters, digits, '-', '_' or '.', like BUG-1043.",
)
TITLE_MAX_LENGTH = 500


def key_taken_message(key: str) -> str:
    """What a write with a key another record holds is told: never which record
    (nor its kind or product), which the writer may not be allowed to see."""
    return f"{key} is taken: a key names one record among all products and kinds, whatever its case; choose another."


def unique_key(table: str) -> models.UniqueConstraint:
    """One key per record, case aside, enforced by the database (within a
    kind; Record.clean and import check across kinds)."""
    return models.UniqueConstraint(Upper("key"), name=f"{table}_key_upper_unique")


class Severity(models.TextChoices):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class BugStatus(models.TextChoices):
    OPEN = "open"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FIXED = "fixed"
    DUPLICATE = "duplicate"


class TestStatus(models.TextChoices):
    __test__ = False  # an enum, not a pytest test class

    DRAFT = "draft"
    ACTIVE = "active"
    ARCHIVED = "archived"


def title_trigram_index(field: str, name: str) -> GinIndex:
    # Django's admin search runs UPPER(col) LIKE UPPER('%term%'); a trigram
    # index on that exact expression keeps it fast on a million rows.
    return GinIndex(OpClass(Upper(field), name="gin_trgm_ops"), name=name)


# A bug's raw_data keys kept as stored columns, searchable and shown (FORMAT.md).
DERIVED_FIELDS = ("actual_result", "expected_result", "steps", "environment")


def derived_from_raw_data(key: str) -> models.GeneratedField:
    """A stored column the database computes from raw_data[key], on every write path."""
    return models.GeneratedField(
        expression=RawText("raw_data", key), output_field=models.TextField(null=True), db_persist=True
    )


class Record(models.Model):
    """Fields every kind shares."""

    # Unique through unique_key (upper(key)), the one unique index import's
    # upsert names as its arbiter; this index serves exact lookups.
    key = models.CharField(max_length=64, db_index=True, validators=[key_validator])
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    KIND: str  # the `kind` of the interchange format

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.key} {self.display_title}"

    def save(self, *args, **kwargs):
        # An edit (admin, shell, API) records its time; a new record keeps the
        # times it was given. Import writes in bulk and keeps the file's times.
        if not self._state.adding:
            self.updated_at = timezone.now()
            update_fields = kwargs.get("update_fields")
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "updated_at"}
        super().save(*args, **kwargs)

    def validate_unique(self, exclude=None):
        # The key is checked by clean(), across kinds and in one wording.
        super().validate_unique(exclude={*(exclude or ()), "key"})

    def validate_constraints(self, exclude=None):
        super().validate_constraints(exclude={*(exclude or ()), "key"})

    def clean(self):
        """Checks that span models, shared by the admin's forms and the REST API
        (import has its own, for a whole file): keys unique across all kinds
        and regardless of case, and a feature or test inside the record's product."""
        errors = {}
        if self.key and key_holder(self.key, besides=self) is not None:
            errors["key"] = key_taken_message(self.key)
        product = self.product if getattr(self, "product_id", None) else None
        for relation in ("feature", "test", "duplicate_of"):
            target = getattr(self, relation, None)
            if product and target and target.product_id != product.pk:
                errors[relation] = f"{target.key} belongs to {target.product.key}, not {product.key}."
        if errors:
            raise ValidationError(errors)

    @property
    def display_title(self) -> str:
        return getattr(self, "title", None) or getattr(self, "name", "")


class NamedRecord(Record):
    """A product or a feature: a thing with a name and a description, listed by key."""

    name = models.CharField(max_length=TITLE_MAX_LENGTH)
    description = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["key"]
        indexes = [title_trigram_index("name", "%(class)s_name_trgm")]
        constraints = [unique_key("%(class)s")]


# The audit trail (backlog/audit.py, docs/access.md): every insert, change and
# deletion of a record, by a trigger (so the importer's bulk upserts too), with
# who, through which surface and when; the event tables refuse UPDATE and
# DELETE (append_only), to everyone until the tables' owner drops the trigger.
# A bug's fields derived from raw_data are left out: raw_data holds them.
def audited(*exclude: str):
    return pghistory.track(
        pghistory.InsertEvent(),
        pghistory.UpdateEvent(),
        pghistory.DeleteEvent(),
        exclude=list(exclude) or None,
        append_only=True,
    )


@audited()
class Product(NamedRecord):
    """A product, and the teams that work on it (backlog.access: a user sees and
    changes the records of their teams' products). A team is a Django group,
    so the admin's user page already says who is on which team."""

    KIND = "product"

    teams = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="products",
        help_text="Members of these groups see and change this product's records.",
    )

    class Meta(NamedRecord.Meta):
        permissions = [("access_all_products", "Can see and change the records of every product")]


@audited()
class Feature(NamedRecord):
    KIND = "feature"

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="features")
    acceptance_criteria = models.TextField(blank=True)

    def clean(self):
        """A feature with tests or bugs stays in its product: moving it alone
        would leave them pointing across products (the rule import keeps, as
        every record's feature is inside the record's product)."""
        super().clean()
        if self.pk is None or not self.product_id:
            return
        stored = Feature.objects.filter(pk=self.pk).values_list("product_id", "product__key").first()
        if stored and stored[0] != self.product_id and (self.tests.exists() or self.bugs.exists()):
            raise ValidationError(
                {
                    "product": f"{self.key} has tests or bugs in {stored[1]}; move or detach them first, "
                    "or add a new feature to the other product."
                }
            )


@audited()
class QATest(Record):
    """A test case. Not called `Test` so that pytest never collects it."""

    KIND = "test"

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="tests")
    feature = models.ForeignKey(Feature, on_delete=models.SET_NULL, null=True, blank=True, related_name="tests")
    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    description = models.TextField(blank=True)
    steps = ArrayField(models.TextField(), default=list, blank=True)
    status = models.CharField(max_length=16, choices=TestStatus, default=TestStatus.ACTIVE)

    class Meta:
        db_table = "backlog_test"
        verbose_name = "test"
        ordering = ["key"]
        constraints = [unique_key("test")]
        indexes = [title_trigram_index("title", "test_title_trgm")]


@audited("actual_result", "expected_result", "steps", "environment")
class Bug(Record):
    KIND = "bug"

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="bugs")
    feature = models.ForeignKey(Feature, on_delete=models.SET_NULL, null=True, blank=True, related_name="bugs")
    test = models.ForeignKey(QATest, on_delete=models.SET_NULL, null=True, blank=True, related_name="bugs")
    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    description = models.TextField(blank=True)
    severity = models.CharField(max_length=16, choices=Severity, null=True, blank=True)
    status = models.CharField(max_length=16, choices=BugStatus, default=BugStatus.OPEN)
    raw_data = models.JSONField(default=dict, blank=True)

    actual_result = derived_from_raw_data("actual_result")
    expected_result = derived_from_raw_data("expected_result")
    steps = derived_from_raw_data("steps")
    environment = derived_from_raw_data("environment")
    # Status `duplicate` and this link are set together by the admin's form,
    # but neither requires the other: trackers send duplicates without the
    # link (legacy data) and links to reports still being triaged.
    duplicate_of = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="duplicates",
        help_text="The earlier report of the same problem, in the same product. Its key, like BUG-1043.",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [unique_key("bug")]
        indexes = [
            title_trigram_index("title", "bug_title_trgm"),
            models.Index(fields=["product", "status", "severity"], name="bug_triage_idx"),
        ]

    def clean(self):
        """Besides Record's checks (the original is in the same product):
        a bug is no duplicate of itself, and a link never closes a circle.
        A bug moved to another product takes no duplicates along: they would
        point across products."""
        super().clean()
        if self.duplicate_of_id is not None:
            if self.pk is not None and self.duplicate_of_id == self.pk:
                raise ValidationError({"duplicate_of": f"{self.key} cannot be a duplicate of itself."})
            if self.pk is not None and (circle := self.duplicate_of.chain_to(self.pk)):
                path = " → ".join(circle)
                raise ValidationError(
                    {
                        "duplicate_of": f"{self.duplicate_of.key} is already a duplicate of {self.key} ({path}): "
                        f"the link would make a circle. Link {self.key} to another bug, or unlink "
                        f"{self.duplicate_of.key} first."
                    }
                )
        if self.pk is not None and self.product_id:
            stored = Bug.objects.filter(pk=self.pk).values_list("product_id", "product__key").first()
            if stored and stored[0] != self.product_id:
                keys = list(self.duplicates.order_by("key").values_list("key", flat=True)[:4])
                if keys:
                    listed = ", ".join(keys[:3]) + (" and more" if len(keys) > 3 else "")
                    raise ValidationError(
                        {"product": f"{self.key} has duplicates in {stored[1]} ({listed}); unlink or move them first."}
                    )

    def chain_to(self, pk: int) -> list[str]:
        """The keys from this bug along its duplicate_of links to the bug `pk`
        (both included), or [] when the chain ends elsewhere. One query, which
        ends even on a circle already stored (two saves that raced)."""
        links = bulk.duplicate_chains([self.pk])
        path, at = [], self.pk
        while at is not None and at in links and len(path) <= len(links):
            key, target = links[at]
            path.append(key)
            if at == pk:
                return path
            at = target
        return []


RECORD_MODELS: dict[str, type[Record]] = {model.KIND: model for model in (Product, Feature, QATest, Bug)}


def key_holder(key: str, besides: Record | None = None) -> Record | None:
    """The record of any kind whose key is `key`, case aside (other than `besides`)."""
    for model in RECORD_MODELS.values():
        records = model.objects.filter(key__iexact=key)
        if besides is not None and besides.pk is not None and model is type(besides):
            records = records.exclude(pk=besides.pk)
        if holder := records.first():
            return holder
    return None
