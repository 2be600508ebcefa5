from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from . import oidc, tokens
from .decorators import staff_required
from .forms import PasswordSignInForm
from .models import ApiToken, Scope


class SignIn(auth_views.LoginView):
    """The one sign-in page: the identity provider's button when it is set up, the password form when allowed."""

    template_name = "ui/login.html"
    authentication_form = PasswordSignInForm

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **oidc.sign_in_options()}


def admin_login(request, extra_context=None):
    """The admin's login: the same page as the UI's once sign-on is set up or passwords are off."""
    if oidc.configured() or not settings.LOCAL_PASSWORDS:
        wanted = request.GET.get("next") or reverse("admin:index")
        return HttpResponseRedirect(f"{reverse('ui:login')}?{urlencode({'next': wanted})}")
    return admin.site.login(request, extra_context)


class NewToken(forms.Form):
    name = forms.CharField(max_length=100, help_text="what it is for, like “CI triage” or “Claude Desktop”")
    scope = forms.ChoiceField(choices=Scope.choices, initial=Scope.READ)
    expires = forms.TypedChoiceField(
        label="Expires",
        choices=[("30", "in 30 days"), ("90", "in 90 days"), ("365", "in a year"), ("0", "never")],
        initial="90",
        coerce=int,
    )


@staff_required
def tokens_page(request):
    """A person's own API tokens: make one (its key shown this once), see when each was used, revoke one."""
    form, made = NewToken(), None
    if request.method == "POST" and "revoke" in request.POST:
        wanted = request.POST["revoke"]
        token = ApiToken.objects.filter(user=request.user, pk=wanted).first() if wanted.isdigit() else None
        if token is not None:
            tokens.revoke(token)
    elif request.method == "POST":
        form = NewToken(request.POST)
        if form.is_valid():
            days = form.cleaned_data["expires"]
            expires = timezone.now() + timedelta(days=days) if days else None
            token, key = tokens.issue(request.user, form.cleaned_data["name"], form.cleaned_data["scope"], expires)
            made, form = {"token": token, "key": key}, NewToken()
    own = ApiToken.objects.filter(user=request.user)
    status = 400 if form.errors else 200
    return render(request, "ui/tokens.html", {"form": form, "made": made, "tokens": own}, status=status)
