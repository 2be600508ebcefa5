from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError


class PasswordSignInForm(AdminAuthenticationForm):
    """The staff login (UI and admin): a staff user's password, unless
    LOCAL_PASSWORDS is off, when only the identity provider signs anyone in."""

    def clean(self):
        if not settings.LOCAL_PASSWORDS:
            raise ValidationError(
                f"Password sign-in is off here: sign in with {settings.OIDC_PROVIDER_NAME}.", code="passwords_off"
            )
        return super().clean()
