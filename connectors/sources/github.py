"""GitHub Issues (REST), on github.com or GitHub Enterprise (`--url https://HOST/api/v3`).

`GET /repos/{owner}/{repo}/issues?state=all&since=...&sort=updated&direction=asc`,
paged by the `Link` header. Pull requests come in the same list (they carry
a `pull_request` key) and are dropped. An issue closed as a duplicate
(`state_reason: duplicate`, or a `duplicate` label) gets its original from
the "Duplicate of #N" comment GitHub itself reads (one request for its
comments). Labels give severity and feature through a mapping. A deleted,
transferred or hidden issue leaves the listing; the sweep confirms each
one (410 deleted, 301 transferred, 404 gone from view) before it deletes.
"""

import re
from collections.abc import Iterator
from datetime import UTC, datetime

from ..base import Connector, FeatureRef, HookEvent, Mapped, Page, ProductInfo, SyncError, product_key
from ..http import Client, UpstreamError, next_link
from . import common
from .github_write import GitHubWriting, _get, _number

PAGE_SIZE = 100
API = "https://api.github.com"

SEVERITY = {
    label: value
    for value, labels in [
        ("critical", ["critical", "blocker", "p0"]),
        ("high", ["high", "major", "p1"]),
        ("medium", ["medium", "p2"]),
        ("low", ["low", "minor", "trivial", "p3"]),
    ]
    for label in [*labels, f"severity: {value}", f"priority: {value}"]
}
FEATURE_PREFIXES = ["area:", "area/", "component:", "component/", "comp:", "module:", "feature:", "feature/"]
REJECTED_LABELS = {"wontfix", "won't fix", "invalid", "not a bug", "cannot reproduce"}
DUPLICATE_OF = re.compile(r"(?i)\bduplicate\s+of\s+#(\d+)\b")
_COMMENT = r"<!--(?:(?!-->).)*-->"
TEMPLATE_COMMENTS = re.compile(rf"^[ \t]*{_COMMENT}[ \t]*(?:\n|$)|{_COMMENT}", re.S | re.M)  # whole lines first


class GitHub(GitHubWriting, Connector):
    kind = "github"
    token_env = "GITHUB_TOKEN"
    token_required = False  # public repositories read without one, at 60 requests an hour
    SEVERITY = SEVERITY

    def make_client(self, user, token) -> Client:
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return Client(self.source.url or API, headers=headers)

    @property
    def repo(self) -> str:
        return self.source.project.strip().strip("/")

    def check(self) -> ProductInfo:
        try:
            try:
                repo = self._follow(f"repos/{self.repo}")
            except UpstreamError as exc:
                # A token limited to issues (or a proxy that serves only them) may not
                # read the repository itself: its issue list proves it is there.
                if exc.status != 404:
                    raise
                self.client.get(f"repos/{self.repo}/issues", {"state": "all", "per_page": 1})
                repo = {}
        except UpstreamError as exc:
            if exc.status in (403, 429) and "rate limit" in str(exc):  # spent, not refused
                raise SyncError(f"GitHub: {exc}") from None
            hint = f"check the token in {self.source.token_env or 'GITHUB_TOKEN'} (it needs read access to issues)"
            raise common.explain(exc, "GitHub", self.repo, hint) from None
        key = product_key(self.source.product_key or self.repo.split("/")[-1])
        return ProductInfo(key, repo.get("full_name") or self.repo, repo.get("description") or "")

    def _follow(self, path: str) -> dict:
        """GET `path`, following one 301 (a renamed repository) on the same API
        host, as GitHub documents it; elsewhere the client refuses to go."""
        response = self.client.get(path)
        if response.status_code in (301, 302, 307) and response.headers.get("Location"):
            response = self.client.get(response.headers["Location"])
        return self.client.json(response)

    def _params(self, params: dict) -> dict:
        labels = ",".join(label.strip() for label in self.source.query.split(",") if label.strip())
        return {"per_page": PAGE_SIZE, "state": "all", **params, **({"labels": labels} if labels else {})}

    def _issues(self, params: dict) -> Iterator[list[dict]]:
        return self._pages(f"repos/{self.repo}/issues", self._params(params))

    def changed(self, since: datetime | None) -> Iterator[Page]:
        """Pages of what changed, by keyset: each next page is asked `since` the last
        change read (the items of that second already read left out), not by page
        number, which an issue edited while the listing is read would shift, moving
        an unread one back onto a page already read. A page all of one second, or
        out of order, is followed by its `next` link instead."""
        cursor = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if since is not None else None
        order = common.Ascending()
        seen: set[tuple[object, object]] = set()  # (number, updated_at) read at the cursor's second
        asked = common.Asked("GitHub")
        url = None
        while True:
            if url is None:
                params = {"sort": "updated", "direction": "asc", **({"since": cursor} if cursor else {})}
                asked.once(f"since={cursor}")
                response = self.client.get(f"repos/{self.repo}/issues", self._params(params))
            else:
                asked.once(url)
                response = self.client.get(url)
            issues = self.client.json(response, list)
            fresh = [issue for issue in issues if (_get(issue, "number"), _get(issue, "updated_at")) not in seen]
            yield Page(fresh, order.checkpoint([common.utc_or_none(_get(issue, "updated_at")) for issue in fresh]))
            url = next_link(response)
            if not url:
                break
            last = _get(issues[-1], "updated_at") if issues else None
            if order.ordered and isinstance(last, str) and last != cursor:
                cursor, url, seen = last, None, set()
            seen |= {(_get(issue, "number"), last) for issue in issues if last and _get(issue, "updated_at") == last}
        if (last := order.at_end()) is not None:
            yield Page([], last)

    def all_ids(self) -> set[tuple[str, str]]:
        return {
            ("bug", str(_number(issue.get("number"))))
            for page in self._issues({"sort": "created", "direction": "asc"})
            for issue in page
            if isinstance(issue, dict) and "pull_request" not in issue and _number(issue.get("number")) is not None
        }

    def confirm_gone(self, numbers: set[str]) -> dict[str, str]:
        """Why each issue the listing no longer holds is gone (deleted,
        transferred, hidden); one still there is left out (kept)."""
        ones = ((number, *self._one(number)) for number in sorted(numbers, key=lambda n: (len(n), n)))
        return {number: why for number, issue, why in ones if issue is None}

    def _one(self, number: str) -> tuple[dict | None, str]:
        """Issue `number` as GitHub holds it now, or None and why not."""
        try:
            response = self.client.get(f"repos/{self.repo}/issues/{number}")
        except UpstreamError as exc:
            if exc.status in (404, 410):
                return None, "deleted" if exc.status == 410 else "not found"
            raise
        if response.status_code in (301, 302, 307):
            return None, "transferred"
        issue = self.client.json(response)
        return (None, "a pull request") if "pull_request" in issue else (issue, "")

    # -- webhooks: `issues` and `issue_comment`, whose payload holds the whole issue -----------

    def hook_event(self, event: str, payload: dict) -> HookEvent:
        event, _, action = event.partition(".")  # as stored: X-GitHub-Event and the payload's action
        issue = payload.get("issue")
        number = _number(_get(issue, "number"))
        if event not in ("issues", "issue_comment") or number is None or "pull_request" in issue:
            return HookEvent()
        if event == "issues" and action in ("deleted", "transferred"):
            return HookEvent(gone=[str(number)])
        if not self._in_query(issue):  # a label the source asks for was taken off
            return HookEvent(gone=[str(number)])
        # A comment ("Duplicate of #N") is read from the issue's comments by map().
        return HookEvent(items=[issue], new=event == "issues" and action == "opened")

    def fetch(self, upstream_ids: list[str]) -> dict[str, dict | None]:
        found: dict[str, dict | None] = {}
        for number in upstream_ids:
            issue = self._one(number)[0] if _number(number) is not None else None
            found[number] = issue if issue is not None and self._in_query(issue) else None
        return found

    HOOK_EVENTS = ["issues", "issue_comment"]

    def register_hook(self, url: str, secret: str) -> str:
        """Create the repository's webhook to `url`, or update the one there
        (events, secret, JSON); "created" or "updated". Needs a token that may
        administer the repository's hooks (admin:repo_hook, or Webhooks: write)."""
        config = {"url": url, "content_type": "json", "secret": secret, "insecure_ssl": "0"}
        body = {"active": True, "events": self.HOOK_EVENTS, "config": config}
        try:
            hooks = [hook for page in self._pages(f"repos/{self.repo}/hooks") for hook in page]
            same = next((h for h in hooks if isinstance(h, dict) and _get(h.get("config"), "url") == url), None)
            if same is None:
                self.client.json(self.client.request("POST", f"repos/{self.repo}/hooks", json={"name": "web", **body}))
                return "created"
            self.client.json(self.client.request("PATCH", f"repos/{self.repo}/hooks/{same['id']}", json=body))
            return "updated"
        except UpstreamError as exc:
            if exc.status in (403, 404):
                raise SyncError(
                    f"GitHub refused to manage {self.repo}'s webhooks ({exc.status}): the token in "
                    f"{self.source.token_env or 'GITHUB_TOKEN'} needs admin:repo_hook (classic) or "
                    "Webhooks: read and write (fine-grained); nothing was changed"
                ) from None
            raise

    def upstream_id(self, issue: dict) -> str:
        return str(issue.get("number"))

    def _in_query(self, issue: dict) -> bool:
        """Whether the issue has every label the source's query names (as GitHub's `labels` filter reads it)."""
        wanted = {label.strip().lower() for label in self.source.query.split(",") if label.strip()}
        labels = {str(_get(label, "name") or label).lower() for label in issue.get("labels") or []}
        return wanted <= labels

    def map(self, issue: dict) -> Mapped | None:
        if "pull_request" in issue:
            return None
        number = _number(issue.get("number"))
        if number is None:
            raise ValueError(f"its number {str(issue.get('number'))[:40]!r} is not a number")
        product = product_key(self.source.product_key or self.repo.split("/")[-1])
        key = f"{product}-{number}"
        labels = [label["name"] if isinstance(label, dict) else str(label) for label in issue.get("labels") or []]
        lowered = [label.lower() for label in labels]
        severities = self.mapping("severity", SEVERITY)
        severity = next((severities[label] for label in lowered if label in severities), None)
        status = self._status(issue, lowered)
        record = {
            "kind": "bug",
            "key": key,
            "product": product,
            "title": common.title(issue.get("title"), key),
            "description": common.clip(_text(issue.get("body"))),
            "severity": severity,
            "status": status,
            "created_at": common.iso(common.utc(issue.get("created_at"))),
            "updated_at": common.iso(common.utc(issue.get("updated_at"))),
            "raw_data": self._raw(issue, labels),
        }
        return Mapped(
            kind="bug",
            upstream_id=str(number),
            record=common.drop_none(record),
            updated=common.utc(issue.get("updated_at")),
            feature=self._feature(labels),
            duplicate_of=self._original(issue, product) if status == "duplicate" else None,
        )

    def _status(self, issue: dict, labels: list[str]) -> str:
        if issue.get("state") != "closed":
            return "open"
        reason = issue.get("state_reason")
        if reason == "duplicate" or "duplicate" in labels:
            return "duplicate"
        if reason == "not_planned" or REJECTED_LABELS & set(labels):
            return "rejected"
        return "fixed"

    def _feature(self, labels: list[str]) -> FeatureRef | None:
        named = self.mapping("feature_labels", {})  # an explicit label -> feature name table
        prefixes = self.mapping("feature_prefixes", FEATURE_PREFIXES)
        for label in labels:
            if label.lower() in named:
                return FeatureRef(f"label:{label.lower()}", named[label.lower()])
            for prefix in prefixes:
                if label.lower().startswith(prefix) and label[len(prefix) :].strip():
                    return FeatureRef(f"label:{label.lower()}", label[len(prefix) :].strip())
        return None

    def _original(self, issue: dict, product: str) -> str | None:
        """The issue this one duplicates, from the last "Duplicate of #N" in its comments."""
        if not issue.get("comments"):
            return None
        found = None
        try:
            for comments in self._pages(f"repos/{self.repo}/issues/{issue['number']}/comments"):
                for comment in comments:
                    for match in DUPLICATE_OF.finditer(str(_get(comment, "body") or "")):
                        found = match.group(1)
        except UpstreamError as exc:
            if exc.status in (404, 410):  # deleted or hidden since it was listed
                return None
            raise
        return f"{product}-{found}" if found and found != str(issue["number"]) else None

    def _pages(self, path: str, params: dict | None = None) -> Iterator[list[dict]]:
        """The pages of a listing, by its Link header."""
        response = self.client.get(path, {"per_page": PAGE_SIZE, **(params or {})})
        asked = common.Asked("GitHub")
        while True:
            yield self.client.json(response, list)
            url = next_link(response)
            if not url:
                return
            asked.once(url)
            response = self.client.get(url)

    def _raw(self, issue: dict, labels: list[str]) -> dict:
        raw = common.trimmed({k: v for k, v in issue.items() if k not in ("body", "url", "labels", "user")})
        raw["labels"] = labels
        if isinstance(issue.get("user"), dict):
            raw["user"] = issue["user"].get("login")
        raw["assignees"] = [a.get("login") for a in issue.get("assignees") or [] if isinstance(a, dict)]
        raw.pop("assignee", None)
        return raw


def _text(body: str | None) -> str:
    """A Markdown body as people read it: the web form's CRLF as newlines, without
    the issue template's HTML comments (a comment alone on its line goes with the line)."""
    return TEMPLATE_COMMENTS.sub("", (body or "").replace("\r\n", "\n")).strip()
