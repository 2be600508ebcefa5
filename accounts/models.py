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
