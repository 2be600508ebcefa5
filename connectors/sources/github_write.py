"""GitHub's side of writing back (writeback/): file an issue, mark a duplicate, comment.

Every write is one request sent once (`Connector.send_once`) carrying a
hidden line with the write's marker (MARKER), so that the sender, when an
answer was lost, finds what an earlier attempt made instead of making it
again: an issue by its body (`find_marked`), a comment among the issue's
comments (`find_marked_comment`). An answer naming an issue of another
repository is not believed (`_ours`).
"""

from datetime import UTC, datetime

from .. import base
from ..http import UpstreamError, server_words
from . import common

#: The hidden line a written issue's body, or comment, carries (map() reads the body without it).
MARKER = "<!-- qa-search:write:{} -->"


class GitHubWriting:
    """The writing half of `GitHub` (connectors.sources.github): `self.repo`, `self.client`,
    `self._pages`, `self.fetch` and `self.SEVERITY` are the reading half's."""

    files_issues = True

    def create_issue(self, draft: dict, marker: str) -> dict:
        """POST the issue: a Markdown body (the description, headed sections, who filed
        it, the marker's hidden line) and labels that map() reads back as the draft
        says (severity through the mapping, the source's own labels so its syncs keep it)."""
        parts = [
            draft.get("description") or "",
            *(f"### {head}\n\n{text}" for head, text in base.draft_sections(draft)),
        ]
        parts += [f"Filed by {draft['filed_by']} through QA Search", MARKER.format(marker)]
        labels = [label.strip() for label in self.source.query.split(",") if label.strip()]
        labels += draft.get("labels") or []
        if draft.get("severity"):
            severities = self.mapping("severity", self.SEVERITY)
            named = [label for label, value in severities.items() if value == draft["severity"]]
            labels.append(
                next((n for n in named if n.startswith("severity:")), named[0] if named else draft["severity"])
            )
        body = {"title": draft["title"], "body": "\n\n".join(p.strip() for p in parts if p.strip())}
        response = self.send_once(
            "POST", f"repos/{self.repo}/issues", json={**body, "labels": list(dict.fromkeys(labels))}
        )
        try:
            return self._ours(self.client.json(response))
        except UpstreamError as exc:  # made, perhaps, but its answer unreadable: the marker settles it
            raise base.WriteInDoubt(str(exc)) from None

    def find_marked(self, marker: str, since: datetime | None = None) -> dict | None:
        """The issue whose body holds `marker`, made at or after `since`: from the
        repository's listing, newest first, which GitHub answers from the issues
        themselves (its search API reads an index that follows a create by seconds
        or more: a lost answer asked about at once would not be found there)."""
        line = MARKER.format(marker)
        params = {"state": "all", "sort": "created", "direction": "desc"}
        if since is not None:
            params["since"] = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for page in self._pages(f"repos/{self.repo}/issues", params):
            found = next((i for i in page if isinstance(i, dict) and line in str(i.get("body") or "")), None)
            if found is not None:
                return self._ours(found)
            oldest = common.utc_or_none(_get(page[-1], "created_at")) if page else None
            if since is None or oldest is None or oldest < since:
                return None
        return None

    marks_duplicates = True

    def mark_duplicate(self, number: str, original: str, marker: str, filed_by: str, commented: bool) -> dict:
        """GitHub's own mark, the comment "Duplicate of #N" (map() reads it), with who asked and the marker,
        unless an earlier attempt's was found; closed as a duplicate (twice is harmless); read again."""
        where = f"repos/{self.repo}/issues/{number}"
        if not commented:
            body = f"Duplicate of #{original}\n\nMarked by {filed_by} through QA Search\n\n{MARKER.format(marker)}"
            self.send_once("POST", f"{where}/comments", json={"body": body})
        self.send_once("PATCH", where, json={"state": "closed", "state_reason": "duplicate"})
        issue = self.fetch([number]).get(number)
        if issue is None:
            raise base.WriteRefused(f"{self.repo}#{number} is gone from GitHub since (deleted, moved or hidden)")
        return self._ours(issue)

    def find_marked_comment(self, number: str, marker: str) -> dict | None:
        line = MARKER.format(marker)
        try:
            pages = list(self._pages(f"repos/{self.repo}/issues/{number}/comments"))
        except UpstreamError as exc:
            if exc.status in (404, 410):  # the issue gone, or issues off: nothing to mark
                raise base.WriteRefused(server_words(exc.body) if exc.body else str(exc), exc.status) from None
            raise
        return next((c for page in pages for c in page if line in str(_get(c, "body") or "")), None)

    def comment(self, number: str, body: str, marker: str) -> dict:
        """One comment on issue `number`, carrying the marker's hidden line; GitHub's answer
        with `url`, the comment's own link (`html_url`)."""
        text = f"{body.strip()}\n\n{MARKER.format(marker)}"
        response = self.send_once("POST", f"repos/{self.repo}/issues/{number}/comments", json={"body": text})
        try:
            answer = self.client.json(response)
        except UpstreamError as exc:  # made, perhaps: the marker settles it
            raise base.WriteInDoubt(str(exc)) from None
        if not isinstance(answer, dict) or _number(answer.get("id")) is None:
            raise base.WriteInDoubt(f"GitHub answered a comment with no id ({str(answer)[:80]!r})")
        return {**answer, "url": str(answer.get("html_url") or "")}

    def _ours(self, issue) -> dict:
        """An issue GitHub answered for a write, believed only when it is one of this repository's."""
        where = str(_get(issue, "repository_url") or "")
        if _number(_get(issue, "number")) is None or not where.lower().endswith(f"/repos/{self.repo}".lower()):
            raise base.WriteRefused(f"GitHub answered with an issue that is not one of {self.repo}'s ({where[:100]!r})")
        return issue


def _get(item, name: str):
    """A field of an upstream item that may not be an object at all."""
    return item.get(name) if isinstance(item, dict) else None


def _number(value) -> int | None:
    """An issue number: a positive integer, as GitHub sends it (or its digits)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isdigit() and len(value) <= 18:
        return int(value)
    return None
