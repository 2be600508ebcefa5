from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.http import urlencode

from . import oidc
from .forms import PasswordSignInForm


class SignIn(auth_views.LoginView):
    """The one sign-in page: the identity provider's button when it is set up, the password form when allowed."""

    template_name = "ui/login.html"
    authentication_form = PasswordSignInForm

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "oidc": oidc.configured(),
            "oidc_name": settings.OIDC_PROVIDER_NAME,
            "passwords": settings.LOCAL_PASSWORDS,
        }


def admin_login(request, extra_context=None):
    """The admin's login: the same page as the UI's once sign-on is set up or passwords are off."""
    if oidc.configured() or not settings.LOCAL_PASSWORDS:
        wanted = request.GET.get("next") or reverse("admin:index")
        return HttpResponseRedirect(f"{reverse('ui:login')}?{urlencode({'next': wanted})}")
    return admin.site.__class__.login(admin.site, request, extra_context)
