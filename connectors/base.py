"""The one small interface every source implements.

A connector reads; it never writes. `sync.run` asks it, in this order:

- `check()`: are the credentials good and the project there? The product
  the source feeds, or `UpstreamError` (nothing is written then);
- `changed(since)`: pages of items updated at or after `since` (None: all),
  in the order of their `updated` when the API can sort, each page with the
  checkpoint it is safe to store once the page is written (None when the
  listing has no order and only its end proves everything before it read);
- `map(item)`: one upstream item as records of the interchange format
  (FORMAT.md), or None for an item that is not ours (a pull request);
- `all_ids()`: every upstream id the source holds now, for the deletion
  sweep (as few fields as the API allows), and `confirm_gone(ids)` where
  the API can say why one is missing.

Webhooks (connectors.hooks) ask two more: `hook_event(event, payload)`,
what a verified delivery says (items to write as they came, ids to read
again, ids gone), and `fetch(ids)`, the items as upstream holds them now
within the source's project and query (None: gone from it).

Keys: a record key is the product key and the upstream number
(`HADOOP-1234`, `SEAMONKEY-77`); features come back as `FeatureRef`s and
are given keys by the sync, which knows what is already stored.
"""

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from .http import Client, UpstreamError, _Retryable, server_words
from .models import Source

#: A sync asks for what changed since its checkpoint less this: trackers keep
#: times at a precision (and in a zone) of their own, and an item updated
#: while a page was read must not fall between two syncs.
OVERLAP = timedelta(minutes=2)


@dataclass(frozen=True)
class FeatureRef:
    """A component, label or section: its upstream id and name."""

    upstream_id: str
    name: str
    description: str = ""


@dataclass
class Mapped:
    """What one upstream item becomes."""

    kind: str  # "bug" or "test"
    upstream_id: str
    record: dict  # the interchange record, without feature and duplicate_of
    updated: datetime | None = None
    feature: FeatureRef | None = None
    duplicate_of: str | None = None  # the original's record key
    extra: list["Mapped"] = field(default_factory=list)  # records it brings along (TestIO: a bug's test)


@dataclass
class Page:
    items: list[dict]
    checkpoint: datetime | None = None


@dataclass
class ProductInfo:
    key: str
    name: str
    description: str = ""

    def __post_init__(self):  # upstream words: any JSON may come where a name belongs
        self.name = " ".join(str(self.name or "").split())[:500] or self.key
        self.description = self.description if isinstance(self.description, str) else ""


@dataclass
class HookEvent:
    """What a webhook delivery asks: `items` to write as the payload holds them
    (upstream's whole item, with its `updated`), `fetch`: ids whose item must
    be read again (a partial payload), `gone`: ids deleted or moved out."""

    items: list[dict] = field(default_factory=list)
    fetch: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    #: The items are new upstream (opened, created): none of them can have been seen before.
    new: bool = False


class SyncError(Exception):
    """A sync that could not run or finish; the message says why and what to do."""


class WriteRefused(SyncError):
    """Upstream refused a write for good (a 4xx: invalid, forbidden, issues off):
    nothing was written there. The message is upstream's own words."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class WriteInDoubt(SyncError):
    """A write that may or may not have happened (no whole answer in time, the
    connection lost) or that upstream asked to send later (5xx, 429): ask for
    its marker before sending it again. `wait`: the seconds upstream asked for."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class Connector:
    kind: str
    token_required: bool = True
    #: Environment variables a source of this kind reads by default.
    user_env: str = ""
    token_env: str = ""
    #: Minutes between deletion sweeps for a new source of this kind, and whether
    #: `sync` by hand sweeps every time: a sweep that lists only ids (Jira, GitHub)
    #: is cheap, one that reads every item again (TestIO, TestRail) waits its turn.
    sweep_minutes: int = 360
    sweep_is_cheap: bool = True
    #: The kind of record a webhook's items become (TestIO's are of both kinds, but it sends none).
    item_kind: str = "bug"
    #: Whether `create_issue` and `find_marked` are built for this kind (writeback/).
    files_issues: bool = False
    #: Whether `mark_duplicate`, `comment` and `find_marked_comment` are (writeback/).
    marks_duplicates: bool = False
    #: What a write did beyond what it was asked, for the person (Jira: "no transition resolves as Duplicate").
    note: str = ""

    def __init__(self, source: Source, user: str | None, token: str):
        self.source = source
        self.client = self.make_client(user, token)
        # Every sync ends: its first check, its pages, its retries' waits and its sweep, together.
        self.client.deadline = time.monotonic() + settings.SYNC_RUN_DEADLINE

    def make_client(self, user: str | None, token: str) -> Client:
        raise NotImplementedError

    def check(self) -> ProductInfo:
        raise NotImplementedError

    def changed(self, since: datetime | None) -> Iterator[Page]:
        raise NotImplementedError

    def map(self, item: dict) -> Mapped | None:
        raise NotImplementedError

    def all_ids(self) -> set[tuple[str, str]]:
        """(kind, upstream id) of every item the source holds now."""
        raise NotImplementedError

    def confirm_gone(self, ids: set[str]) -> dict[str, str]:
        """Of the upstream ids the listing no longer holds, those really gone, with
        why; a source that can ask for one item checks (GitHub), others trust the listing."""
        return {upstream: "not listed" for upstream in ids}

    def hook_event(self, event: str, payload: dict) -> HookEvent:
        """What a verified webhook delivery of `event` asks (an empty HookEvent: nothing)."""
        raise SyncError(f"{self.kind} sends no webhooks this service reads")

    def fetch(self, upstream_ids: list[str]) -> dict[str, dict | None]:
        """Each id's item as upstream holds it now, or None where it is gone
        (deleted, moved to another project, or outside the source's query)."""
        raise NotImplementedError

    # -- writing back (writeback/): the one place a connector writes upstream ----------------

    def create_issue(self, draft: dict, marker: str) -> dict:
        """File `draft` (writeback.contract.FileRequest's fields, and `filed_by`) as a new
        issue carrying `marker` where `find_marked` finds it; the issue as upstream
        answers it, for `map()`. WriteRefused, or WriteInDoubt: then it may exist."""
        raise SyncError(f"filing issues in {self.kind} is not built yet (docs/connectors.md, Writing back)")

    def find_marked(self, marker: str) -> dict | None:
        """The issue an earlier `create_issue` with `marker` made, as upstream holds it now, or None."""
        raise SyncError(f"filing issues in {self.kind} is not built yet (docs/connectors.md, Writing back)")

    def mark_duplicate(self, number: str, original: str, marker: str, filed_by: str, commented: bool) -> dict:
        """Mark issue `number` a duplicate of `original` upstream, saying who asked and carrying
        `marker` where `find_marked_comment` finds it (`commented`: an earlier attempt's was
        found, send it not again); the issue as upstream holds it after, for `map()`."""
        raise SyncError(f"marking duplicates in {self.kind} is not built yet (docs/connectors.md, Writing back)")

    def find_marked_comment(self, number: str, marker: str) -> dict | None:
        """The comment on issue `number` an earlier `mark_duplicate` with `marker` made, or None."""
        raise SyncError(f"marking duplicates in {self.kind} is not built yet (docs/connectors.md, Writing back)")

    def comment(self, number: str, body: str, marker: str) -> dict:
        """One comment on issue `number` carrying `marker` where `find_marked_comment` finds it;
        the comment as upstream answers it, with `url` its own link. WriteRefused, or WriteInDoubt."""
        raise SyncError(f"commenting in {self.kind} is not built yet (docs/connectors.md, Writing back)")

    def send_once(self, method: str, path: str, **kwargs):
        """One request that writes: tried once, never retried here (a lost answer
        retried blind is a second write), bounded like every request. Its
        response, WriteRefused (a 4xx, a redirect: upstream's own words) or
        WriteInDoubt (5xx, 429, a timeout, a lost connection)."""
        try:
            response = self.client._once(method, self.client.url(path), **kwargs)
        except _Retryable as exc:
            raise WriteInDoubt(str(exc), exc.wait) from None
        except UpstreamError as exc:
            if exc.status is None or exc.status in (408, 409):  # no whole answer, or a conflict of the moment
                raise WriteInDoubt(str(exc)) from None
            raise WriteRefused(server_words(exc.body) if exc.body else str(exc), exc.status) from None
        if response.status_code >= 300:  # a redirect is not followed: the credentials stay where configured
            raise WriteRefused(f"{response.status_code}, a redirect, not followed: check the source's URL")
        return response

    def upstream_id(self, item: dict) -> str:
        """The upstream id map() gives `item`: its `id` (GitHub: its number)."""
        return str(item.get("id"))

    def label(self, item) -> str:
        """How a report names an upstream item that could not be read: its key,
        number or id as upstream gave it (TestIO's items wrap the test or bug)."""
        inner = item.get(item.get("type")) if isinstance(item, dict) and isinstance(item.get("type"), str) else None
        for value in (item, inner):
            if isinstance(value, dict):
                for name in ("key", "number", "id"):
                    if isinstance(value.get(name), (str, int)) and not isinstance(value.get(name), bool):
                        return f"{self.kind} item {name} {str(value[name])[:70]!r}"
        return f"a {self.kind} item with no id"

    def mapping(self, name: str, default):
        """A mapping table: the default, with the source's overrides (Source.mapping[name]) on top."""
        overrides = (self.source.mapping or {}).get(name)
        if isinstance(default, dict) and isinstance(overrides, dict):
            return {**default, **{str(k).lower(): v for k, v in overrides.items()}}
        return default if overrides is None else overrides


#: A draft's parts after its description, as every tracker's body heads them (writeback/).
DRAFT_SECTIONS = (
    ("steps", "Steps to reproduce"),
    ("expected_result", "Expected"),
    ("actual_result", "Actual"),
    ("environment", "Environment"),
)


def draft_sections(draft: dict) -> list[tuple[str, str]]:
    """(heading, text) of each part of `draft` that has text, in DRAFT_SECTIONS' order."""
    return [(heading, draft[name].strip()) for name, heading in DRAFT_SECTIONS if (draft.get(name) or "").strip()]


def product_key(name: str) -> str:
    """A product key from a project or repository name: SEAMONKEY for seamonkey."""
    key = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.").upper()
    return key[:48] or "PRODUCT"


def slug(name: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:limit].strip("-")
