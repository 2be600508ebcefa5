"""Jira Cloud (REST v3) and Jira Data Center (REST v2).

Cloud: `GET /rest/api/3/search/jql`, paged by `nextPageToken` until
`isLast` (the old `/rest/api/3/search` answers 410 there), basic auth with
the account's e-mail and an API token, descriptions in Atlassian Document
Format. Data Center: `GET /rest/api/2/search`, paged by `startAt` against
`total`, a personal access token as Bearer, descriptions in wiki markup.
Which one is read from the credentials: an e-mail means Cloud
(`mapping.api_version` overrides).

The checkpoint goes into JQL as epoch milliseconds, never as a zone-less
"yyyy/MM/dd HH:mm": Jira reads those in the searching account's own time
zone, which is how connectors skip issues (airbyte #48492).
"""

import re
from collections.abc import Iterator
from datetime import datetime

from ..base import Connector, FeatureRef, HookEvent, Mapped, Page, ProductInfo, product_key
from ..http import Client, UpstreamError
from ..text import adf_to_text, wiki_to_text
from . import common
from .jira_write import JiraWriting

PAGE_SIZE = 100
#: A Jira issue key as Jira makes them: the project key (a letter, then letters,
#: digits or underscores), a dash and the number; within our keys' 64 characters.
ISSUE_KEY = re.compile(r"(?=.{3,64}$)[A-Za-z][A-Za-z0-9_]*-[1-9][0-9]{0,17}")
IDS_PAGE_SIZE = 5000  # ids only: Cloud serves up to 5,000 a page
FIELDS = [
    "summary",
    "description",
    "environment",
    "priority",
    "status",
    "resolution",
    "resolutiondate",
    "components",
    "issuetype",
    "project",
    "labels",
    "issuelinks",
    "versions",
    "fixVersions",
    "reporter",
    "assignee",
    "created",
    "updated",
]

SEVERITY = {
    "blocker": "critical",
    "highest": "critical",
    "critical": "critical",
    "high": "high",
    "major": "high",
    "medium": "medium",
    "normal": "medium",
    "low": "low",
    "minor": "low",
    "lowest": "low",
    "trivial": "low",
}
# Resolution names first (a resolved issue says how), then status categories.
STATUS = {
    "duplicate": "duplicate",
    "fixed": "fixed",
    "done": "fixed",
    "resolved": "fixed",
    "won't fix": "rejected",
    "won't do": "rejected",
    "invalid": "rejected",
    "incomplete": "rejected",
    "cannot reproduce": "rejected",
    "not a bug": "rejected",
    "declined": "rejected",
    "works as designed": "rejected",
    "category:new": "open",
    "category:indeterminate": "accepted",
    "category:done": "fixed",
}


class Jira(JiraWriting, Connector):
    kind = "jira"
    user_env = "JIRA_EMAIL"
    token_env = "JIRA_API_TOKEN"
    token_required = True
    SEVERITY = SEVERITY

    def make_client(self, user, token) -> Client:
        self.api = str((self.source.mapping or {}).get("api_version") or ("3" if user else "2"))
        if user:
            return Client(self.source.url, auth=(user, token))
        return Client(self.source.url, headers={"Authorization": f"Bearer {token}"})

    @property
    def project(self) -> str:
        return self.source.project.strip()

    def jql(self, since: datetime | None = None, ordered: bool = True) -> str:
        project = self.project if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", self.project) else f'"{self.project}"'
        clauses = [f"project = {project}"]
        if self.source.query.strip():
            clauses.append(f"({self.source.query.strip()})")
        if since is not None:
            clauses.append(f"updated >= {int(since.timestamp() * 1000)}")
        return " AND ".join(clauses) + (" ORDER BY updated ASC" if ordered else " ORDER BY key ASC")

    def search(self, jql: str, fields: list[str], page_size: int) -> Iterator[list[dict]]:
        """Pages of issues matching `jql`, by the paging of the API in use."""
        position, asked = None, common.Asked("Jira")
        while True:
            issues, position = self.page(jql, fields, page_size, position)
            yield issues
            if position is None:
                return
            asked.once(position)

    def page(self, jql: str, fields: list[str], size: int, position) -> tuple[list[dict], object]:
        """One page of a search from `position` (None: the first), and the next
        position (Cloud's nextPageToken, Data Center's startAt), None after the last."""
        params = {"jql": jql, "fields": ",".join(fields), "maxResults": size}
        if self.api == "3":
            body = self._search_jql({**params, **({"nextPageToken": position} if position else {})})
            token = body.get("nextPageToken")
            if token is not None and not isinstance(token, str):
                raise UpstreamError(f"Jira sent a nextPageToken that is not a string: {str(token)[:60]}")
            return _issues(body), None if body.get("isLast") is True or not token else token
        start = position or 0
        body = self.client.get_json("rest/api/2/search", {**params, "startAt": start})
        issues = _issues(body)
        start += len(issues)
        total = body.get("total")
        if not isinstance(total, int) or isinstance(total, bool):
            raise UpstreamError(f"Jira's search sent no total (total: {str(total)[:40]}): its pages cannot be counted")
        return issues, None if not issues or start >= total else start

    def _search_jql(self, params: dict) -> dict:
        """One page of /search/jql: a GET, or a POST with the same fields where
        a site (or a proxy before it) refuses the GET."""
        if not getattr(self, "post", False):
            try:
                return self.client.get_json("rest/api/3/search/jql", params)
            except UpstreamError as exc:
                if exc.status not in (405, 414):
                    raise
                self.post = True
        body = {**params, "fields": params["fields"].split(",")}
        return self.client.json(self.client.request("POST", "rest/api/3/search/jql", json=body))

    def check(self) -> ProductInfo:
        key = product_key(self.source.product_key or self.project)
        try:
            first = next(self.search(self.jql(ordered=False), ["project"], 1), [])
        except UpstreamError as exc:
            raise common.explain(exc, "Jira", self.project, self._credentials_hint()) from None
        name, description = self.project, ""
        try:  # name and description, where the site lets us read the project
            project = self.client.get_json(f"rest/api/{self.api}/project/{self.project}")
            name, description = project.get("name") or name, project.get("description") or ""
        except UpstreamError:
            if first:
                name = _name(_fields(first[0]).get("project")) or name
        return ProductInfo(key, name, description if isinstance(description, str) else "")

    def _credentials_hint(self) -> str:
        if self.api == "3":
            return f"check {self.source.user_env or 'JIRA_EMAIL'} and {self.source.token_env or 'JIRA_API_TOKEN'}"
        return f"check the personal access token in {self.source.token_env or 'JIRA_API_TOKEN'}"

    def changed(self, since: datetime | None) -> Iterator[Page]:
        """Pages of what changed, by keyset: each next page is a new search from
        the last `updated` read (the issues of that page already read left out),
        not the next offset, which an issue edited while the listing is read
        would shift, moving an unread one back onto a page already read. A page
        that does not move the time on (all of one instant), or a listing out of
        order, goes on by the API's own paging instead."""
        order = common.Ascending()
        cursor, position = since, None
        jql = self.jql(cursor)
        asked = common.Asked("Jira")
        seen: set[tuple[str, str]] = set()  # (id, updated) of the page before
        while True:
            issues, position = self.page(jql, FIELDS, PAGE_SIZE, position)
            fresh = [i for i in issues if _mark(i) not in seen]
            yield Page(fresh, order.checkpoint([_updated(issue) for issue in fresh]))
            if position is None:
                break
            times = [_updated(issue) for issue in issues]
            last = times[-1] if times else None
            read = {_mark(i) for i in issues}
            # Asked from `last`, a page of which only the issues at `last` were read moves on.
            if order.ordered and fresh and last is not None and any(t is not None and t < last for t in times):
                cursor, position, seen = last, None, read
                jql = self.jql(cursor)
            else:
                asked.once((jql, position))
                seen |= read
        if (last := order.at_end()) is not None:
            yield Page([], last)

    def all_ids(self) -> set[tuple[str, str]]:
        return {
            ("bug", str(issue["id"]))
            for page in self.search(self.jql(ordered=False), ["id"], IDS_PAGE_SIZE)
            for issue in page
            if isinstance(issue, dict) and issue.get("id") is not None
        }

    # -- webhooks: the payload names the issue; it is read again as a sync reads it --------------

    #: Events whose payload holds the issue, and those whose link names two issues by id.
    ISSUE_EVENTS = ("jira:issue_created", "jira:issue_updated")
    LINK_EVENTS = ("issuelink_created", "issuelink_deleted")

    def hook_event(self, event: str, payload: dict) -> HookEvent:
        """The issue is read again (`fetch`), not taken from the payload: an
        admin webhook sends REST v2's representation where Cloud's sync reads
        v3's (descriptions in ADF), and a read is the truth whatever order the
        deliveries came in."""
        issue = payload.get("issue")
        issue_id = common.numeric_id(issue.get("id")) if isinstance(issue, dict) else None
        if event in self.ISSUE_EVENTS and issue_id:
            return HookEvent(fetch=[issue_id])
        if event == "jira:issue_deleted" and issue_id:
            return HookEvent(gone=[issue_id])
        if event in self.LINK_EVENTS and isinstance(link := payload.get("issueLink"), dict):
            ids = [common.numeric_id(link.get(end)) for end in ("sourceIssueId", "destinationIssueId")]
            return HookEvent(fetch=[i for i in ids if i])
        return HookEvent()

    def fetch(self, upstream_ids: list[str]) -> dict[str, dict | None]:
        found: dict[str, dict | None] = {}
        for issue_id in upstream_ids:
            try:
                issue = self.client.get_json(f"rest/api/{self.api}/issue/{issue_id}", {"fields": ",".join(FIELDS)})
            except UpstreamError as exc:
                if exc.status == 404:  # deleted, or out of the token's sight
                    found[issue_id] = None
                    continue
                raise
            project = _fields(issue).get("project")
            in_project = isinstance(project, dict) and self.project.upper() in (
                str(project.get("key")).upper(),
                str(project.get("name")).upper(),
            )
            if in_project and self.source.query.strip():
                jql = self.jql(ordered=False).replace(" ORDER BY", f" AND id = {issue_id} ORDER BY", 1)
                in_project = any(page for page in self.search(jql, ["id"], 1))
            found[issue_id] = issue if in_project else None
        return found

    def map(self, issue: dict) -> Mapped:
        fields = _fields(issue)
        key = issue.get("key")
        if not isinstance(key, str) or not ISSUE_KEY.fullmatch(key):
            raise ValueError(f"its key {str(key)[:70]!r} is not a Jira issue key (PROJECT-123)")
        if not isinstance(issue.get("id"), (str, int)) or not str(issue["id"]).isdigit():
            raise ValueError(f"its id {str(issue.get('id'))[:40]!r} is not a Jira issue id")
        text = adf_to_text if self.api == "3" else wiki_to_text
        description = text(fields.get("description"))
        severity_field = self.mapping("severity_field", "priority")
        severity = _name(fields.get(severity_field))
        status = self._status(fields)
        components = fields.get("components") or []
        record = {
            "kind": "bug",
            "key": key,
            "product": product_key(self.source.product_key or self.project),
            "title": common.title(fields.get("summary"), key),
            "description": common.clip(description),
            "status": status,
            "created_at": common.iso(common.utc(fields.get("created"))),
            "updated_at": common.iso(common.utc(fields.get("updated"))),
            "raw_data": self._raw(issue, fields, text),
        }
        if (mapped := self.mapping("severity", SEVERITY).get((severity or "").lower())) is not None:
            record["severity"] = mapped
        feature = None
        if components:
            first = components[0]
            feature = FeatureRef(
                f"component:{first.get('id') or first.get('name')}",
                first.get("name") or "component",
                first.get("description") or "",
            )
        return Mapped(
            kind="bug",
            upstream_id=str(issue["id"]),
            record=common.drop_none(record),
            updated=common.utc(fields.get("updated")),
            feature=feature,
            duplicate_of=self._original(fields.get("issuelinks") or []),
        )

    def _status(self, fields: dict) -> str:
        table = self.mapping("status", STATUS)
        resolution = (_name(fields.get("resolution")) or "").lower()
        status = fields.get("status") or {}
        category = ((status.get("statusCategory") or {}).get("key") or "new").lower()
        for name in (resolution, (status.get("name") or "").lower(), f"category:{category}"):
            if name and name in table:
                return table[name]
        return "open"

    def _original(self, links: list[dict]) -> str | None:
        """The issue this one duplicates: an outward link of the Duplicate type
        (by the type's name or id, as sites rename the inward/outward wording),
        in the same project; the oldest such issue when there are several."""
        wanted = {str(v).lower() for v in (self.mapping("duplicate_link", ["Duplicate"]) or [])}
        originals = []
        for link in links:
            kind = link.get("type") or {}
            other = link.get("outwardIssue")
            if other is None or not ({str(kind.get("name", "")).lower(), str(kind.get("id", ""))} & wanted):
                continue
            target = other.get("key", "")
            if target.upper().startswith(self.project.upper() + "-"):
                originals.append((int(other.get("id") or 0), target))
        return min(originals)[1] if originals else None

    def _raw(self, issue: dict, fields: dict, text) -> dict:
        raw = common.trimmed({name: value for name, value in fields.items() if name != "description"})
        raw["id"] = str(issue["id"])
        raw["key"] = issue["key"]
        environment = fields.get("environment")
        raw.pop("environment", None)
        if environment:
            raw["environment"] = text(environment)
        for name, field in (self.mapping("raw_fields", {}) or {}).items():  # e.g. {"steps": "customfield_10100"}
            if fields.get(field) is not None:
                raw[name] = text(fields[field]) if isinstance(fields[field], dict) else fields[field]
        return raw


def _issues(body: dict) -> list:
    issues = body.get("issues") or []
    if not isinstance(issues, list):
        raise UpstreamError(f"Jira's search sent issues as {type(issues).__name__}, not a list")
    return issues


def _fields(issue) -> dict:
    fields = issue.get("fields") if isinstance(issue, dict) else None
    return fields if isinstance(fields, dict) else {}


def _mark(issue) -> tuple[str, str]:
    """What tells a read issue: its id and its `updated`."""
    return str(issue.get("id") if isinstance(issue, dict) else issue)[:100], str(_fields(issue).get("updated"))


def _updated(issue) -> datetime | None:
    return common.utc_or_none(_fields(issue).get("updated"))


def _name(value) -> str | None:
    if isinstance(value, dict):
        return value.get("name") or value.get("value")
    return value if isinstance(value, str) else None
