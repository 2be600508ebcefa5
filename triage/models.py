"""What a triage keeps: runs, their failures, and curators' decisions.

A run is kept for its history ("first seen", "failing for 3 runs", "flaky")
and answered again by id (GET /api/runs/<id>, the triage_run tool); runs older
than TRIAGE_KEEP_DAYS are deleted when a new one is stored. A decision is a
curator's word on one suggested link between a cause (a failure signature,
triage.failures) and a bug: it is kept as long as the bug, since it is the
labelled data the next triage starts from.
"""

from django.conf import settings
from django.db import models

from backlog.models import Bug, Product


class Run(models.Model):
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="triage_runs")
    name = models.CharField(max_length=255, blank=True, help_text="the uploaded file's name")
    created_at = models.DateTimeField(db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    tests = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)  # failures and errors
    skipped = models.PositiveIntegerField(default=0)
    flaky = models.PositiveIntegerField(default=0)  # passed on a rerun
    commit = models.CharField(max_length=64, blank=True, default="", help_text="the commit the run tested")
    # The tests of this run that passed and had failed in a kept run of its product: with
    # the failures, what flaky across runs reads (a test that never failed is not kept).
    passed_after_failing = models.JSONField(default=list, blank=True)
    # The triage as answered (triage.contract.TriageResponse), its decisions kept current.
    answer = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["product", "-created_at"], name="triage_run_product_recent")]

    def __str__(self):
        return f"run {self.pk} of {self.product_id} ({self.failed} failed)"


class Failure(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="failures")
    test = models.CharField(max_length=1000)  # the test's full name
    signature = models.CharField(max_length=16, db_index=True)
    outcome = models.CharField(max_length=16)  # failure, error (flaky tests: the rerun's outcome)
    flaky = models.BooleanField(default=False)
    bug = models.ForeignKey(Bug, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    band = models.CharField(max_length=8, blank=True)  # the verdict's: high, medium, low; "" when new

    class Meta:
        indexes = [models.Index(fields=["test", "run"], name="triage_failure_test_run")]

    def __str__(self):
        return f"{self.test} in run {self.run_id}"


class Decision(models.Model):
    CONFIRMED, REJECTED = "confirmed", "rejected"

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="+")
    signature = models.CharField(max_length=16)
    bug = models.ForeignKey(Bug, on_delete=models.CASCADE, related_name="triage_decisions")
    decision = models.CharField(max_length=16, choices=[(CONFIRMED, CONFIRMED), (REJECTED, REJECTED)])
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField()
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["product", "signature", "bug"], name="triage_decision_once"),
        ]

    def __str__(self):
        return f"{self.decision} {self.bug_id} for {self.signature}"
