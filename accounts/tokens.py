"""API tokens: issued once, kept as their SHA-256, checked in one statement.

A key is `qas_` and 43 characters of a 256-bit random secret: a hash needs no
salt or slowness against guessing (GitHub's and Stripe's keys are kept the
same way), and an index finds it. A key opens nothing once it is revoked,
past its expiry, or when its user is inactive (deprovisioned): each request
checks all three, with the same one statement whether the key exists or not,
so a revoked or expired key is refused as fast as one that never existed.
A read-only key may search and read; writing (record changes, import)
takes a read-and-write key (`may_write`).
"""

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from backlog.access import read_user

from .models import ApiToken, Scope

PREFIX = "qas_"
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often a token


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def issue(user, name: str, scope: str = Scope.READ, expires_at=None) -> tuple[ApiToken, str]:
    """A new token of `user`, and its key (shown now, never again)."""
    key = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name[:100], digest=digest(key), prefix=key[:10], scope=scope, expires_at=expires_at
    )
    return token, key


def check(key: str) -> ApiToken | None:
    """The live token `key` is, its user loaded (with `holds_all_products`, backlog.access.read_user),
    or None: unknown, revoked, expired, or its user inactive."""
    now = timezone.now()
    fields = ApiToken._meta.concrete_fields
    users = get_user_model()._meta
    found = read_user(
        [f"k.{connection.ops.quote_name(field.column)}" for field in fields],
        f"FROM {ApiToken._meta.db_table} k JOIN {users.db_table} u ON u.{users.pk.column} = k.user_id"
        " WHERE k.digest = %(digest)s AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > %(now)s)"
        " AND u.is_active",
        {"digest": digest(key or ""), "now": now},
    )
    if found is None:
        return None
    values, user = found
    token = ApiToken.from_db(user._state.db, [field.attname for field in fields], values)
    token.user = user
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def may_write(token) -> bool:
    """Whether a request authenticated by `token` may change records (a session, token None: yes)."""
    return not isinstance(token, ApiToken) or token.scope == Scope.WRITE


def revoke(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
