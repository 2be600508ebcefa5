"""What the sources share: error wording, ordering checks, record helpers."""

import re
from datetime import UTC, datetime

from backlog.interchange import MAX_TEXT_CHARS
from backlog.models import TITLE_MAX_LENGTH

from ..base import SyncError
from ..http import UpstreamError

#: Keys of upstream JSON that only point at other resources or pictures.
NOISE = ("self", "avatarUrls", "iconUrl", "avatarId", "expand", "avatar_url", "gravatar_id", "reactions")


def explain(exc: UpstreamError, vendor: str, project: str, credentials_hint: str) -> SyncError:
    """A failed first request, in words that say what to fix."""
    text = str(exc).lower()
    if exc.status in (403, 429) and "rate limit" in text:
        return SyncError(f"{vendor}: {exc}")
    missing = ("does not exist", "not a valid or accessible project", "no project could be found")
    if exc.status in (404, 410) or (exc.status in (400, 403) and any(words in text for words in missing)):
        return SyncError(f"{vendor} has no project {project!r}, or the token cannot see it ({exc})")
    if exc.status in (401, 403):
        return SyncError(f"{vendor} refused the credentials ({exc}); {credentials_hint}")
    return SyncError(f"{vendor}: {exc}")


class Ascending:
    """The checkpoint of each page of a listing sorted by `updated`, ascending:
    the page's latest time, while every time so far came in order. Once one
    does not (a server that ignores the sort), no page moves the checkpoint,
    and the end of the listing does (`at_end`): only a whole listing proves
    that everything before its latest time was read."""

    def __init__(self):
        self.latest: datetime | None = None
        self.ordered = True

    def checkpoint(self, times: list[datetime | None]) -> datetime | None:
        for time in times:
            if time is None or (self.latest is not None and time < self.latest):
                self.ordered = False
            if time is not None and (self.latest is None or time > self.latest):
                self.latest = time
        return self.latest if self.ordered else None

    def at_end(self) -> datetime | None:
        return None if self.ordered else self.latest


def title(value, key: str) -> str:
    text = " ".join(str(value or "").split())
    return (text or f"{key} (no title)")[:TITLE_MAX_LENGTH]


def clip(text: str | None) -> str:
    return (text or "")[:MAX_TEXT_CHARS]


def utc(value: str | None) -> datetime | None:
    """An upstream ISO 8601 time with its offset (Jira's 2021-12-16T05:44:40.825-0500,
    GitHub's ...Z, TestIO's +02:00) as the same instant in UTC. ValueError, in
    words, for what is no such time (`yesterday-ish`, a number, an instant
    before year 1 or after 9999 in UTC): the item is skipped and reported."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"the time {str(value)[:40]!r} is not an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError("no offset")
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        why = "is out of range in UTC" if isinstance(exc, OverflowError) else "is not an ISO 8601 time with an offset"
        raise ValueError(f"the time {value[:40]!r} {why}") from None


def utc_or_none(value) -> datetime | None:
    """`utc`, or None for what is not a time: for ordering a listing, where an
    unreadable time only stops the checkpoint from moving (the item itself is
    skipped and reported when it is mapped)."""
    try:
        return utc(value)
    except ValueError:
        return None


class Asked:
    """The page tokens or URLs one listing has asked for: a listing that hands
    back one it already gave (`nextPageToken: SAME`, a next link to itself)
    would never end, and is stopped with a clear error."""

    def __init__(self, vendor: str):
        self.vendor = vendor
        self.seen: set[str] = set()

    def once(self, position) -> None:
        mark = str(position)
        if mark in self.seen:
            raise UpstreamError(
                f"{self.vendor} sent a page it had sent before ({mark[:120]}) as the next one: the listing "
                "would never end, so it was stopped; nothing past the pages written is lost"
            )
        self.seen.add(mark)


def numeric_id(value) -> str | None:
    """An item's id as a webhook's payload gives it (a string or a number), or None for what is no id."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    return text if re.fullmatch(r"[1-9][0-9]{0,17}", text) else None


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def drop_none(record: dict) -> dict:
    return {name: value for name, value in record.items() if value is not None}


def trimmed(value):
    """Upstream JSON without self links, avatars and icons, and with no NUL (PostgreSQL stores none)."""
    if isinstance(value, dict):
        return {
            k: trimmed(v) for k, v in value.items() if k not in NOISE and (k == "html_url" or not k.endswith("_url"))
        }
    if isinstance(value, list):
        return [trimmed(v) for v in value]
    if isinstance(value, str):
        return value.replace("\x00", "")
    return value
