"""The search budget: SEARCH_RATE_LIMIT per user, REST and MCP together.

SEARCH_RATE_LIMIT ("600/min" by default; "off" for none) is read on every
call, so it can be changed without a restart of the code that reads it. A
search costs one; an import costs one per record, since each record's key
is looked up (docs/access.md says why). Every surface charges through
`charge()` before it runs anything: the REST views (api/throttles.py), the
import (api/views.py) and MCP's tools (mcp_bridge/server.py).

The counts live in `search_ratecount` on the primary, one row per user and
fixed window of the rate's period, so every worker and app server counts
against the same budget. One statement (CHARGE) reads the previous window
and adds to the current one, as long as the sliding-window estimate

    current + previous × the share of the previous window still inside the last period

stays within the limit. (A plain fixed window would let a caller send
twice the rate around a window's edge.) ON CONFLICT DO UPDATE locks the
user's row and checks its latest count, so two concurrent charges never
both take the last search. A refused charge counts nothing, as DRF's
throttle before it: a caller who keeps trying is not shut out for longer.
"""

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection  # "default", the primary, wherever the search itself reads

from search.contract import SearchError

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}  # by first letter, as DRF read them: 600/min, 10/second


@dataclass(frozen=True)
class Rate:
    limit: int
    period_ms: int


@cache
def parse(rate: str) -> Rate | None:
    """SEARCH_RATE_LIMIT read: "600/min" is Rate(600, 60_000); "off" (or nothing) is None."""
    if not rate or rate == "off":
        return None
    number, _, period = rate.partition("/")
    if not number.isdigit() or period[:1] not in PERIODS:
        raise ImproperlyConfigured(f"SEARCH_RATE_LIMIT={rate!r}: write it like 600/min (per s, min, hour, day) or off.")
    return Rate(int(number), PERIODS[period[0]] * 1000)


class RateLimited(SearchError):
    status = 429
    code = "throttled"

    def __init__(self, message: str, retry_after: int | None):
        super().__init__(message)
        self.retry_after = retry_after


# The previous window's share is counted in whole searches, rounded down, so
# that the sum is exact (bigint: a count times milliseconds).
CHARGE = """
WITH previous AS (
    SELECT count::bigint * %(remaining)s / %(period)s AS spent
    FROM search_ratecount WHERE user_id = %(user)s AND window_start = %(previous)s
)
INSERT INTO search_ratecount AS c (user_id, window_start, count)
SELECT %(user)s, %(window)s, %(cost)s
WHERE %(cost)s + coalesce((SELECT spent FROM previous), 0) <= %(limit)s
ON CONFLICT (user_id, window_start) DO UPDATE SET count = c.count + excluded.count
WHERE c.count + excluded.count + coalesce((SELECT spent FROM previous), 0) <= %(limit)s
RETURNING count
"""

COUNTS = """
SELECT coalesce(sum(count) FILTER (WHERE window_start = %(window)s), 0),
       coalesce(sum(count) FILTER (WHERE window_start = %(previous)s), 0)
FROM search_ratecount WHERE user_id = %(user)s AND window_start IN (%(window)s, %(previous)s)
"""

clock = time.time  # Unix seconds; tests set their own, to be anywhere in a window
_swept_before = 0  # ms: this process has deleted the windows older than this


def charge(user, cost: int = 1, *, per: str | None = None) -> None:
    """Count `cost` searches of `user` (None: the operator, never limited); past
    SEARCH_RATE_LIMIT, count nothing and raise RateLimited, saying when to ask
    again. `per`: what one search pays for, when a request pays for many
    ("record").

    Call it outside a transaction: the user's row stays locked until the
    transaction ends, and every other search of theirs waits for it."""
    rate = parse(settings.SEARCH_RATE_LIMIT)
    if user is None or rate is None or cost <= 0:
        return
    at = round(clock() * 1000)
    window = at - at % rate.period_ms
    params = {
        "user": user.pk,
        "window": _timestamp(window),
        "previous": _timestamp(window - rate.period_ms),
        "remaining": window + rate.period_ms - at,
        "period": rate.period_ms,
        "cost": cost,
        "limit": rate.limit,
    }
    with connection.cursor() as cursor:
        _sweep(cursor, window - rate.period_ms)
        cursor.execute(CHARGE, params)
        if cursor.fetchone() is not None:
            return
        # Refused: the counts as they are now (a charge that won a race is
        # in), to say when this one would fit.
        cursor.execute(COUNTS, params)
        current, previous = cursor.fetchone()
    wait = _wait_ms(params["remaining"], rate, rate.limit - cost, current, previous)
    seconds = None if wait is None else max(1, math.ceil(wait / 1000))
    raise RateLimited(_too_many(cost, per, rate, seconds), seconds)


def _wait_ms(remaining: int, rate: Rate, room: int, current: int, previous: int) -> int | None:
    """How long until the estimate leaves `room` for the charge (None: never,
    it is larger than the limit). CHARGE's sum, solved for the time left."""
    period = rate.period_ms
    if room < 0:
        return None
    if current <= room:  # later in this window, as the previous one slides out
        # (max: the previous window swept meanwhile by a server whose clock runs a period ahead)
        return remaining - ((room - current + 1) * period - 1) // max(previous, 1)
    # In the next window, where this one is the previous.
    return remaining + period - ((room + 1) * period - 1) // current


def _too_many(cost: int, per: str | None, rate: Rate, seconds: int | None) -> str:
    """What a caller over the limit is told, on every surface."""
    message = f"Too many searches: {settings.SEARCH_RATE_LIMIT} per user (SEARCH_RATE_LIMIT)."
    if cost > 1:
        message += f" This request counts as {cost}" + (f", one per {per}." if per else ".")
    if seconds is None:
        unit = f"{per}s" if per else "searches"
        return message + f" That is more than the whole budget: send at most {rate.limit} {unit} a request."
    return message + f" Try again in {seconds} s."


def _sweep(cursor, before: int) -> None:
    """Now and then (once a window per process), delete the windows older than
    the previous one: no estimate reads them again."""
    global _swept_before
    if before > _swept_before:
        _swept_before = before
        cursor.execute("DELETE FROM search_ratecount WHERE window_start < %s", [_timestamp(before)])


def _timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
