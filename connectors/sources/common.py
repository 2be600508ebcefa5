"""What the sources share: error wording, ordering checks, record helpers."""

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
    GitHub's ...Z, TestIO's +02:00) as the same instant in UTC."""
    return datetime.fromisoformat(value).astimezone(UTC) if value else None


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
