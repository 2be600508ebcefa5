"""Sign-in with the company's identity provider: OpenID Connect, by Authlib.

The authorization code flow with PKCE (S256), `state` and `nonce`, from the
provider's discovery document (OIDC_ISSUER). Authlib does the protocol: it
keeps state, nonce and the code verifier in the session, exchanges the code,
and checks the ID token (RS256 and the provider's other algorithms against
its JWKS, fetched again when a token names a key it has not seen: a rotated
key; issuer, audience, expiry, nonce). Chosen over mozilla-django-oidc,
which wants each endpoint configured by hand (no discovery), and
django-allauth, which brings sign-up, e-mail and account flows the service
does not want.

What is ours (`sign_in`): the user an (issuer, subject) pair is, made on the
first sign-in, staff (the search pages are for staff), and the teams their
groups name (OIDC_GROUPS_CLAIM, mapped by OIDC_TEAMS), set anew at every
sign-in. A group naming no team here creates nothing; the user is told.
A session lasts OIDC_SESSION_SECONDS at most, then signs in again (so a
person removed from a group loses that product by then: `SessionRefresh`).
"""

import logging
import secrets
import time

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from joserfc.errors import JoseError

from backlog import access

from .models import Identity

logger = logging.getLogger(__name__)

SESSION_AT = "oidc_signed_in_at"
SESSION_NEXT = "oidc_next"
_LOCK_CLASS = 0x4F49  # "OI": the advisory lock first sign-ins take turns on (connectors.sync's is "SY")
_clients: dict[tuple, object] = {}


class SignInRefused(Exception):
    """The provider's answer was not a sign-in this service takes; the message says why."""


def configured() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_CLIENT_ID)


def client():
    """The provider's Authlib client, one per configuration (its discovery document and keys cached in it)."""
    issuer = settings.OIDC_ISSUER.rstrip("/")
    key = (issuer, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET, settings.OIDC_SCOPES)
    if key not in _clients:
        oauth = OAuth()
        oauth.register(
            "oidc",
            client_id=settings.OIDC_CLIENT_ID,
            client_secret=settings.OIDC_CLIENT_SECRET or None,
            server_metadata_url=f"{issuer}/.well-known/openid-configuration",
            client_kwargs={"scope": settings.OIDC_SCOPES, "code_challenge_method": "S256", "timeout": 10},
        )
        _clients[key] = oauth.create_client("oidc")
    return _clients[key]


def start(request):
    """Send the browser to the provider, with `next` kept for the way back (this site's paths only)."""
    if not configured():
        return _refused(
            request, "single sign-on is not set up here (OIDC_ISSUER, OIDC_CLIENT_ID): sign in with a password"
        )
    wanted = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    request.session[SESSION_NEXT] = wanted if wanted and safe else settings.LOGIN_REDIRECT_URL
    try:
        provider = client()
        _check_issuer(provider)
        # The nonce is Authlib's to check; it is made here so it is one a sign-in, and long.
        return provider.authorize_redirect(
            request, request.build_absolute_uri(reverse("accounts:oidc_callback")), nonce=secrets.token_urlsafe(32)
        )
    except (requests.RequestException, ValueError, RuntimeError, SignInRefused) as exc:
        logger.warning("OIDC discovery at %s failed: %s", settings.OIDC_ISSUER, exc)
        return _refused(request, f"the identity provider at {settings.OIDC_ISSUER} did not answer as one: {_said(exc)}")


def callback(request):
    """The provider's answer: checked by Authlib, then the user signed in and sent where they were going."""
    if not configured():
        return _refused(request, "single sign-on is not set up here")
    if "error" in request.GET:
        said = request.GET.get("error_description") or request.GET["error"]
        return _refused(request, f"the identity provider refused the sign-in: {said[:200]}")
    try:
        provider = client()
        _check_issuer(provider)
        token = provider.authorize_access_token(request)
        claims = token.get("userinfo")
        if not claims:
            raise SignInRefused("the provider sent no ID token")
        user, notice = sign_in(claims)
    except (AuthlibBaseError, JoseError) as exc:
        logger.warning("OIDC sign-in refused: %s", exc)
        return _refused(request, f"the sign-in could not be verified ({_said(exc)}); nothing was changed. Try again")
    except (requests.RequestException, ValueError, KeyError, SignInRefused) as exc:
        logger.warning("OIDC sign-in failed: %s", exc)
        return _refused(request, f"the sign-in failed ({_said(exc)}); nothing was changed. Try again")
    if not user.is_active:
        return _refused(request, "this account is deactivated here; ask an administrator")
    wanted = request.session.pop(SESSION_NEXT, settings.LOGIN_REDIRECT_URL)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_AT] = time.time()
    if notice:
        messages.warning(request, notice)
    return HttpResponseRedirect(wanted)


def sign_in(claims: dict) -> tuple:
    """The user `claims` (a verified ID token) are, made or updated, with the teams
    their groups name; and what the person is told of groups that name no team here
    (nothing is made for them), or of being on no team at all (None: nothing to tell)."""
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    groups = sorted({str(g) for g in groups if isinstance(g, (str, int))})
    mapping = settings.OIDC_TEAMS or {}
    # With a mapping, the groups it names (the company's other groups mean nothing here);
    # without one, each group is a team's name.
    team_of = {g: str(mapping[g]) for g in groups if g in mapping} if mapping else {g: g for g in groups}
    teams = list(Group.objects.filter(name__in=set(team_of.values())))
    found = {team.name for team in teams}
    unknown = [g for g, team in team_of.items() if team not in found]
    with transaction.atomic():
        identity = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        if identity is None:
            # First sign-ins take turns (two tabs at once, or two people with one username):
            # each finds the other's identity and username made.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [_LOCK_CLASS])
            identity = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        if identity is None:
            user = get_user_model().objects.create_user(username=_free_username(claims), is_staff=True)
            user.set_unusable_password()
            identity = Identity(user=user, issuer=issuer, subject=subject)
        user = identity.user
        user.email = str(claims.get("email") or user.email)[:254]
        user.first_name = str(claims.get("given_name") or user.first_name)[:150]
        user.last_name = str(claims.get("family_name") or user.last_name)[:150]
        user.save()
        user.groups.set(teams)  # the provider decides a signed-in person's teams, every time
        identity.groups, identity.signed_in_at = groups, timezone.now()
        identity.save()
    return user, _notice(user, groups, teams, unknown if mapping or not teams else [])


def _notice(user, groups: list[str], teams: list, unknown: list[str]) -> str | None:
    """What a person just signed in is told: the groups that name no team here (when
    the mapping names a team that is not here, or no group gave a team at all), and
    that they see no products when no group put them on a team."""
    said = []
    if unknown:
        said.append(
            f"Your identity provider's group{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))} "
            "name no team here, so they give you no products; an administrator maps them (OIDC_TEAMS) "
            "or makes the team."
        )
    if not teams and not unknown and not access.sees_all_products(user):
        why = (
            "none of your identity provider's groups is mapped to a team here (OIDC_TEAMS)"
            if groups
            else (f"your identity provider sent no groups (the {settings.OIDC_GROUPS_CLAIM!r} claim)")
        )
        said.append(
            f"You are signed in, but on no team: {why}, so no product's records show here. "
            "Ask an administrator to put you on a team."
        )
    return " ".join(said) or None


def _free_username(claims: dict) -> str:
    users = get_user_model()
    base = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:140]
    name, n = base, 1
    while users.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _check_issuer(provider) -> None:
    """The discovery document speaks for the issuer configured, not another (a mix-up)."""
    said = provider.load_server_metadata().get("issuer", "")
    said = said if isinstance(said, str) else repr(said)  # a number or a list is no issuer either
    if said.rstrip("/") != settings.OIDC_ISSUER.rstrip("/"):
        raise SignInRefused(f"its discovery document names issuer {said[:200]!r}, not {settings.OIDC_ISSUER!r}")


def _said(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _refused(request, message: str):
    return render(request, "ui/login.html", _login_context(request, error=message), status=400)


def _login_context(request, **extra) -> dict:
    from .forms import PasswordSignInForm

    return {"form": PasswordSignInForm(request), "next": settings.LOGIN_REDIRECT_URL, **sign_in_options(), **extra}


def sign_in_options() -> dict:
    """What the sign-in page offers: the provider's button, the password form."""
    return {"oidc": configured(), "oidc_name": settings.OIDC_PROVIDER_NAME, "passwords": settings.LOCAL_PASSWORDS}


class SessionRefresh:
    """A session signed in by the provider ends after OIDC_SESSION_SECONDS: the
    next page asks the provider again, which applies the groups it has now."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        at = request.session.get(SESSION_AT) if hasattr(request, "session") else None
        if at is not None and time.time() - at > settings.OIDC_SESSION_SECONDS:
            logout(request)
        elif at is None and not settings.LOCAL_PASSWORDS and request.user.is_authenticated:
            logout(request)  # signed in with a password before passwords were turned off
        return self.get_response(request)
