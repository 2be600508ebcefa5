"""TestRail (API v2), Cloud or self-hosted: a project's test cases become tests.

Every call is `GET {site}/index.php?/api/v2/<method>&<params>` (the route sits
in the query string, so parameters follow with `&`), with basic auth (the
user's e-mail and an API key from My Settings) and the `Content-Type:
application/json` TestRail wants even on a GET.

- `get_project/{id}` checks the credentials and the project and names the
  product; its `suite_mode` says whether cases live in one suite (1) or in
  several (2 with baselines, 3), which `get_suites` lists (baselines are
  copies of the master and are left out).
- `get_cases/{id}&suite_id=..&updated_after=..&limit=250&offset=..` lists
  what changed, suite by suite, following `_links.next` (TestRail 6.7+) or
  taking the bare array older servers answer with everything in it.
- A case's section becomes its feature, named from `get_sections` (read
  once a sync for each suite).

The listing is not sorted by `updated_on`, so no page proves that everything
updated before its latest time was read: the checkpoint moves only once a
whole listing was read, and then held back by the time the listing took
(an edit made meanwhile to a case already read carries a time from then,
which may be earlier than the latest time read afterwards). A sync that
dies keeps the pages it wrote and reads again from the old checkpoint.

Deleted cases leave the listing and nothing else says so: the sweep is a
full listing (TestRail has no field selection, so it costs what a full read
costs), or, after a full read, that read itself.
"""

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from time import monotonic
from urllib.parse import parse_qsl

from ..base import OVERLAP, Connector, FeatureRef, HookEvent, Mapped, Page, ProductInfo, SyncError, product_key
from ..http import Client, UpstreamError
from . import common

PAGE_SIZE = 250  # the most TestRail serves a page
SINGLE_SUITE = 1
LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*+•])\s+")


class TestRail(Connector):
    __test__ = False  # not a pytest class

    kind = "testrail"
    user_env = "TESTRAIL_USER"
    token_env = "TESTRAIL_API_KEY"
    token_required = True
    sweep_minutes = 24 * 60  # the sweep reads every item again: daily
    sweep_is_cheap = False
    item_kind = "test"  # cases

    def __init__(self, source, user, token):
        self._project: dict | None = None
        self._product: ProductInfo | None = None
        self._suites: list[int | None] | None = None
        self._sections: dict[int, dict] = {}
        self._sections_read: dict[int | None, int] = {}  # suite -> times read this sync
        self._listed: set[str] | None = None  # ids of a full listing read this sync
        super().__init__(source, user, token)

    def make_client(self, user, token) -> Client:
        if not user:
            raise SyncError(
                f"{self.source.user_env or self.user_env} is not set: put the TestRail user's e-mail in it "
                f"(and their API key, from My Settings, in {self.source.token_env or self.token_env})"
            )
        site = re.split(r"/index\.php", self.source.url.strip(), maxsplit=1)[0].rstrip("/")
        self.api = f"{site}/index.php?/api/v2/"
        # TestRail Cloud answers 409 while it is in maintenance: tried again like a 503.
        return Client(
            site, auth=(user, token), headers={"Content-Type": "application/json"}, also_retried=frozenset({409})
        )

    @property
    def project_id(self) -> str:
        match = re.fullmatch(r"[Pp]?(\d+)", self.source.project.strip())
        if match is None:
            raise SyncError(
                f"TestRail project ids are numbers, not {self.source.project!r}: the project's page is "
                "index.php?/projects/overview/ID"
            )
        return match.group(1)

    def _get(self, method: str, params: dict | None = None, expect: type | tuple = dict):
        return self.client.get_json(self.api + method, params, expect)

    def _listing(self, method: str, key: str, params: dict | None = None) -> Iterator[list[dict]]:
        """Pages of a bulk method: the wrapper of TestRail 6.7+ (`key` holds the
        items, `_links.next` the next page), or the bare array of older servers."""
        params = {name: str(value) for name, value in (params or {}).items()}
        asked = common.Asked("TestRail")
        while True:
            asked.once((method, sorted(params.items())))
            body = self._get(method, params, (dict, list))
            if isinstance(body, list):  # before 6.7 (get_suites before 9.3.1): everything at once
                yield body
                return
            items = body.get(key) or []
            if not isinstance(items, list):
                raise UpstreamError(f"TestRail's {method.split('/')[0]} sent {key} as {type(items).__name__}")
            yield items
            links = body.get("_links")
            link = links.get("next") if isinstance(links, dict) else None
            if not link or not items:
                return
            if not isinstance(link, str):
                raise UpstreamError(f"TestRail's {method.split('/')[0]} sent a next link that is not a string")
            # "/api/v2/get_cases/3&suite_id=1&limit=250&offset=250": its route and
            # parameters, over ours (a server that drops a filter from it does not lose it).
            route, _, query = link.split("/api/v2/", 1)[-1].partition("&")
            following = {**params, **dict(parse_qsl(query, keep_blank_values=True))}
            method, params = route, following  # a link back to a page read before: Asked stops it

    # -- the interface --------------------------------------------------------------------------

    def check(self) -> ProductInfo:
        try:
            project = self._get(f"get_project/{self.project_id}")
        except UpstreamError as exc:
            hint = (
                f"check {self.source.user_env or self.user_env} (the user's e-mail) and "
                f"{self.source.token_env or self.token_env} (an API key from My Settings), and that the API "
                "is enabled under Administration > Site Settings > API"
            )
            raise common.explain(_project_missing(exc), "TestRail", self.source.project, hint) from None
        self._project = project
        name = str(project.get("name") or f"TestRail project {self.project_id}")
        key = product_key(self.source.product_key or name)  # sync.run keeps it once set: a rename keeps it
        self._product = ProductInfo(key, name, str(project.get("announcement") or ""))
        return self._product

    @property
    def product(self) -> ProductInfo:
        return self._product or self.check()

    def suites(self) -> list[int | None]:
        """The suites to read: None (no suite_id) for a single-suite project."""
        if self._suites is None:
            if self._project is None:
                self.check()
            if self._project.get("suite_mode") == SINGLE_SUITE:
                self._suites = [None]
            else:
                self._suites = [
                    int(suite["id"])
                    for page in self._listing(f"get_suites/{self.project_id}", "suites")
                    for suite in page
                    if not suite.get("is_baseline")
                ]
        return self._suites

    def _cases(self, params: dict) -> Iterator[list[dict]]:
        for suite in self.suites():
            scope = {"suite_id": suite} if suite is not None else {}
            yield from self._listing(
                f"get_cases/{self.project_id}", "cases", {**scope, **params, "limit": PAGE_SIZE, "offset": 0}
            )

    def changed(self, since: datetime | None) -> Iterator[Page]:
        started = monotonic()
        params = {}
        if since is not None:  # epoch seconds; one less, as "after" may be strict
            params["updated_after"] = int(since.timestamp()) - 1
        latest: datetime | None = None
        listed: set[str] = set()
        for cases in self._cases(params):
            for case in cases:
                if not isinstance(case, dict):
                    continue  # skipped and reported when mapped
                if not case.get("is_deleted") and case.get("id") is not None:
                    listed.add(str(case["id"]))
                try:
                    updated = _time(case.get("updated_on"))
                except ValueError:
                    updated = None
                if updated is not None and (latest is None or updated > latest):
                    latest = updated
            yield Page(cases)
        if since is None:
            self._listed = listed
        if latest is not None:
            # An edit made while the listing ran, to a case already read, carries a time
            # after the listing began: ask the next sync from there (OVERLAP covers the first minutes).
            took = timedelta(seconds=monotonic() - started)
            yield Page([], latest - max(timedelta(0), took - OVERLAP))

    def all_ids(self) -> set[tuple[str, str]]:
        if self._listed is not None:
            return {("test", case_id) for case_id in self._listed}
        return {
            ("test", str(case["id"]))
            for cases in self._cases({})
            for case in cases
            if isinstance(case, dict) and not case.get("is_deleted") and case.get("id") is not None
        }

    # -- webhooks: a case event names the case; it is read again ----------------------------

    def hook_event(self, event: str, payload: dict) -> HookEvent:
        """TestRail's payload is the template its admin wrote (docs/connectors.md
        gives ours): the event (`case_created`, `case_updated`, `case_deleted`;
        "Case Updated" too) and the case's id, at the top or in `data`."""
        name = re.sub(r"[^a-z]+", "_", str(event).lower()).strip("_")
        data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
        ids = (common.numeric_id(v) for v in (payload.get("case_id"), data.get("case_id"), data.get("id")))
        case_id = next((i for i in ids if i), None)
        if case_id is None or not name.startswith("case_"):
            return HookEvent()
        if name == "case_deleted":
            return HookEvent(gone=[case_id])
        return HookEvent(fetch=[case_id])

    def fetch(self, upstream_ids: list[str]) -> dict[str, dict | None]:
        found: dict[str, dict | None] = {}
        for case_id in upstream_ids:
            try:
                case = self._get(f"get_case/{case_id}")
            except UpstreamError as exc:
                if exc.status in (400, 403, 404):  # "not a valid test case": deleted, or not this user's
                    found[case_id] = None
                    continue
                raise
            suites = self.suites()
            in_project = not case.get("is_deleted") and (suites == [None] or case.get("suite_id") in suites)
            found[case_id] = case if in_project else None
        return found

    def map(self, case: dict) -> Mapped | None:
        if case.get("is_deleted"):
            return None
        product = self.product.key
        if not re.fullmatch(r"[1-9][0-9]{0,17}", str(case.get("id"))):
            raise ValueError(f"its id {str(case.get('id'))[:40]!r} is not a TestRail case id")
        key = f"{product}-C{case['id']}"
        created, updated = _time(case.get("created_on")), _time(case.get("updated_on"))
        record = {
            "kind": "test",
            "key": key,
            "product": product,
            "title": common.title(case.get("title"), key),
            "description": common.clip(_description(case)),
            "steps": [common.clip(step) for step in _steps(case)],
            "status": "active",
            "created_at": common.iso(created),
            "updated_at": common.iso(updated),
        }
        section = self._section(case)
        feature = None
        if section is not None:
            feature = FeatureRef(
                f"section:{section['id']}", str(section.get("name") or "section"), str(section.get("description") or "")
            )
        return Mapped(
            kind="test", upstream_id=str(case["id"]), record=common.drop_none(record), updated=updated, feature=feature
        )

    def _section(self, case: dict) -> dict | None:
        """The case's section, from get_sections read once a sync for each suite
        (twice when a section was made meanwhile)."""
        section_id = case.get("section_id")
        if section_id is None:
            return None
        suite = case.get("suite_id")
        if int(section_id) not in self._sections and self._sections_read.get(suite, 0) < 2:
            self._sections_read[suite] = self._sections_read.get(suite, 0) + 1
            scope = {"suite_id": suite} if suite is not None else {}
            for sections in self._listing(f"get_sections/{self.project_id}", "sections", scope):
                self._sections.update({int(section["id"]): section for section in sections})
        return self._sections.get(int(section_id))


def _project_missing(exc: UpstreamError) -> UpstreamError:
    """TestRail says "no such project" with a 400 (or a 403 to a user who may not see it)."""
    words = str(exc).lower()
    if (exc.status == 400 and "project" in words) or (exc.status == 403 and "project does not exist" in words):
        return UpstreamError(str(exc), 404, exc.body)
    return exc


def _time(value) -> datetime | None:
    """TestRail's times: epoch seconds."""
    if value in (None, ""):
        return None
    try:
        return datetime.fromtimestamp(int(value), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        raise ValueError(f"the time {str(value)[:40]!r} is not epoch seconds TestRail sends") from None


def _text(value) -> str:
    return str(value).strip() if value is not None else ""


def _description(case: dict) -> str:
    """What a case says besides its steps: preconditions, the mission and goals
    of an exploratory session, the expected result of a text case, references."""
    parts = []
    for label, name in (
        ("Preconditions", "custom_preconds"),
        ("Mission", "custom_mission"),
        ("Goals", "custom_goals"),
        ("Expected result", "custom_expected"),
    ):
        if text := _text(case.get(name)):
            parts.append(f"{label}:\n{text}")
    if refs := _text(case.get("refs")):
        parts.append(f"References: {refs}")
    return "\n\n".join(parts)


def _steps(case: dict) -> list[str]:
    """The steps of a "Test Case (Steps)" case, each with its expected result,
    or the lines of a "Test Case (Text)" case's steps without their numbers."""
    separated = case.get("custom_steps_separated")
    if separated:
        steps = []
        for step in separated:
            content, expected = _text(step.get("content")), _text(step.get("expected"))
            if content or expected:
                steps.append(f"{content} → {expected}" if content and expected else content or f"→ {expected}")
        return steps
    lines = _text(case.get("custom_steps")).splitlines()
    return [LIST_MARKER.sub("", line).strip() for line in lines if LIST_MARKER.sub("", line).strip()]
