"""Who a user is at the company's identity provider: its issuer and subject, never a password."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Identity(models.Model):
    """A user signed in by OpenID Connect: the provider's `iss` and `sub`, which
    never change for a person (a name or an e-mail may)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="the provider's groups at the last sign-in")
    signed_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="identity_once")]

    def __str__(self):
        return f"{self.user} at {self.issuer}"


class Scope(models.TextChoices):
    READ = "read", "read only"
    WRITE = "write", "read and write"


class ApiToken(models.Model):
    """A key for programs and agents (REST, MCP over HTTP): its user's access,
    narrowed by its scope, until it expires or is revoked. Only the key's
    SHA-256 is kept (the key, 256 random bits, is shown once)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="what it is for, like 'CI triage' or 'Claude Desktop'")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="the key's first characters, to tell it apart")
    scope = models.CharField(max_length=8, choices=Scope, default=Scope.READ)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="empty: until revoked")
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self):
        return f"{self.name} ({self.prefix}…, {self.user})"

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"
