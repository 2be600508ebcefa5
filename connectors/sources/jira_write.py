"""Jira's side of writing back (writeback/): file an issue, mark a duplicate, comment.

Cloud (REST v3, bodies in ADF) and Data Center (REST v2, wiki markup) alike.
Every write is one request sent once (`Connector.send_once`) carrying the
write's marker as an entity property, `qa-search` = `{"write": marker}`: set
in the create's or the comment's own body, so the write and its marker are
one. When an answer was lost the sender asks before sending again:

- an issue (`find_marked`): the project's issues created since the write, newest
  first, each one's `qa-search` property read. Jira's search reads an index that
  may follow a create by seconds, so the keys after the newest one the search
  knows are read one by one too (`issue/KEY`, from the database): an issue made
  a moment ago is found, not filed twice;
- a comment (`find_marked_comment`): the issue's comments with their properties;
- a duplicate: its link is looked for on the issue before any is posted (the link
  is what Jira and map() read), and an issue already resolved as Duplicate is not
  transitioned again, so a retried mark sends no second link.

An answer naming an issue of another project is not believed.
"""

import re

from .. import base
from ..http import UpstreamError, server_words

PROPERTY = "qa-search"
#: Fields a draft fills, the rest of a required field without a default stopping the write.
FILLED = {"project", "issuetype", "summary", "description", "reporter"}
PAGES = 20  # at most this many pages of createmeta or comments
#: Issues created since a write looked at for its marker: a page of them, this many pages.
CANDIDATES, CANDIDATE_PAGES = 50, 4
#: Past the newest issue the search knows, keys read one by one, and misses (deleted keys) in a row allowed.
PROBED, MISSES = 10, 3


class JiraWriting:
    """The writing half of `Jira` (connectors.sources.jira): `self.api`, `self.project`,
    `self.client`, `self.page`, `self.fetch` and `self.SEVERITY` are the reading half's."""

    files_issues = True
    marks_duplicates = True

    # -- filing ----------------------------------------------------------------------------------

    def create_issue(self, draft: dict, marker: str) -> dict:
        """POST the issue with the fields the project's Bug screen offers (createmeta):
        summary, a description of headed sections, priority, labels and environment
        where offered; refused, nothing sent, when a required field has no default and
        is none of those. Jira answers {id, key, self}: the issue is read back for map()."""
        type_id, type_name = self._issue_type()
        meta = self._field_meta(type_id)
        fields = self._draft_fields(draft, meta, type_id)
        missing = [
            field
            for fid, field in meta.items()
            if field.get("required") and not field.get("hasDefaultValue") and fid not in fields and fid not in FILLED
        ]
        if missing:
            names = ", ".join(str(field.get("name") or field.get("fieldId")) for field in missing)
            raise base.WriteRefused(
                f"{self.project}'s {type_name} needs {names} that QA Search cannot fill: give them a default "
                "value or make them optional for this issue type in Jira (its field configuration), then file again"
            )
        body = {"fields": fields, "properties": [{"key": PROPERTY, "value": {"write": marker}}]}
        response = self._send("POST", f"rest/api/{self.api}/issue", meta, json=body)
        try:
            answer = self.client.json(response)
        except UpstreamError as exc:  # made, perhaps, but its answer unreadable: the marker settles it
            raise base.WriteInDoubt(str(exc)) from None
        issue_id, key = str(answer.get("id") or ""), str(answer.get("key") or "")
        if not issue_id.isdigit():
            raise base.WriteInDoubt(f"Jira answered a create with no issue id ({str(answer)[:80]!r})")
        if not key.upper().startswith(self.project.upper() + "-"):
            raise base.WriteRefused(f"Jira answered with an issue that is not one of {self.project}'s ({key[:60]!r})")
        return self._ours(issue_id)

    def _issue_type(self) -> tuple[str, str]:
        """The id and name of the project's issue type a bug is filed as (mapping `issue_type`, Bug)."""
        wanted = str(self.mapping("issue_type", "Bug"))
        types = self._paged(f"rest/api/{self.api}/issue/createmeta/{self.project}/issuetypes", ("issueTypes", "values"))
        for kind in types:
            if wanted.lower() in (str(kind.get("name", "")).lower(), str(kind.get("id", ""))):
                return str(kind["id"]), str(kind.get("name") or wanted)
        offered = ", ".join(str(kind.get("name")) for kind in types) or "none"
        raise base.WriteRefused(
            f"{self.project} has no issue type {wanted!r} to file a bug as (it offers: {offered[:200]}); "
            'name one in the source\'s mapping, {"issue_type": "..."}'
        )

    def _field_meta(self, type_id: str) -> dict[str, dict]:
        """The create screen's fields by id: required, name, hasDefaultValue, allowedValues."""
        path = f"rest/api/{self.api}/issue/createmeta/{self.project}/issuetypes/{type_id}"
        fields = self._paged(path, ("fields", "results", "values"))
        return {str(field.get("fieldId") or field.get("key")): field for field in fields if isinstance(field, dict)}

    def _draft_fields(self, draft: dict, meta: dict, type_id: str) -> dict:
        """The create's `fields`: what the draft says, in the fields this screen offers."""
        environment = (draft.get("environment") or "").strip() if "environment" in meta else ""
        sections = [
            (head, text) for head, text in base.draft_sections(draft) if not (environment and head == "Environment")
        ]
        fields = {
            "project": {"key": self.project},
            "issuetype": {"id": type_id},
            "summary": draft["title"],
            "description": self._document(
                draft.get("description") or "", sections, f"Filed by {draft['filed_by']} through QA Search"
            ),
        }
        if environment:
            fields["environment"] = self._document(environment, [], "")
        if "priority" in meta and (priority := self._priority(draft.get("severity"), meta["priority"])):
            fields["priority"] = priority
        labels = ["-".join(str(label).split()) for label in draft.get("labels") or [] if str(label).strip()]
        if "labels" in meta and labels:
            fields["labels"] = list(dict.fromkeys(labels))
        return fields

    def _priority(self, severity: str | None, field: dict) -> dict | None:
        """The allowed priority map() reads back as `severity`: the one of its own name first
        (High for high), else the first the mapping turns into it (Major for high)."""
        if not severity:
            return None
        table = self.mapping("severity", self.SEVERITY)
        allowed = [v for v in field.get("allowedValues") or [] if isinstance(v, dict) and v.get("name")]
        named = [v for v in allowed if str(v["name"]).lower() == severity]
        named += [v for v in allowed if table.get(str(v["name"]).lower()) == severity]
        return _chosen(named[0]) if named else None

    def find_marked(self, marker: str, since=None) -> dict | None:
        """The issue whose `qa-search` property holds `marker`: the project's issues created
        since `since`, newest first (epoch ms in JQL, as the sync writes it), then the keys
        after the newest the search knows, read one by one (the index may lag a create)."""
        project = f"project = {_quoted(self.project)}"
        jql = " AND ".join([project] + ([f"created >= {int(since.timestamp() * 1000)}"] if since else []))
        jql += " ORDER BY created DESC"
        position, newest = None, 0
        for _ in range(CANDIDATE_PAGES):
            issues, position = self.page(jql, ["key"], CANDIDATES, position)
            for issue in issues:
                newest = max(newest, _number(issue.get("key")))
                if self._marked(f"rest/api/{self.api}/issue/{issue.get('id')}", marker):
                    return self._ours(str(issue["id"]))
            if position is None:
                break
        if not newest:  # nothing since: the highest key of the project, however old (keys grow, dates not)
            issues, _ = self.page(f"{project} ORDER BY key DESC", ["key"], 1, None)
            newest = max((_number(i.get("key")) for i in issues), default=0)
        return self._unindexed(newest, marker)

    def _unindexed(self, newest: int, marker: str) -> dict | None:
        """The marked issue among the keys after `newest`, read from Jira's database, not its index."""
        misses = 0
        for number in range(newest + 1, newest + 1 + PROBED):
            try:
                issue = self.client.get_json(
                    f"rest/api/{self.api}/issue/{self.project}-{number}", {"fields": "project"}
                )
            except UpstreamError as exc:
                if exc.status != 404:
                    raise
                misses += 1
                if misses >= MISSES:
                    return None
                continue
            misses = 0
            if self._marked(f"rest/api/{self.api}/issue/{issue.get('id')}", marker):
                return self._ours(str(issue["id"]))
        return None

    def _marked(self, where: str, marker: str) -> bool:
        """Whether the issue or comment at `where` carries `marker` in its `qa-search` property."""
        try:
            prop = self.client.get_json(f"{where}/properties/{PROPERTY}")
        except UpstreamError as exc:
            if exc.status == 404:  # no such property: not one of ours
                return False
            raise
        value = prop.get("value")
        return isinstance(value, dict) and value.get("write") == marker

    # -- marking a duplicate ---------------------------------------------------------------------

    def mark_duplicate(self, number: str, original: str, marker: str, filed_by: str, commented: bool) -> dict:
        """Link `number` as a duplicate of `original` (Jira's Duplicate link type, by the
        mapping's name or id, else the one whose outward reads "duplicates") with a comment
        saying who asked, unless the issue has that link already; then resolve it as
        Duplicate by a transition that offers that resolution, unless it is resolved so.
        Where the workflow has none, linked and left unresolved, said in `self.note`.
        `commented` is not needed: the issue's links, read first, are what keeps it once."""
        issues = self.fetch([number, original])
        duplicate, first = issues.get(number), issues.get(original)
        for issue_id, issue in ((number, duplicate), (original, first)):
            if issue is None:
                raise base.WriteRefused(f"Jira issue {issue_id} is gone from {self.project} (deleted, moved or hidden)")
        kind = self._duplicate_type()
        links = (duplicate.get("fields") or {}).get("issuelinks") or []
        if not any(_links(link, kind, original) for link in links if isinstance(link, dict)):
            text = f"Duplicate of {first['key']} — marked by {filed_by} through QA Search"
            comment = {
                "body": self._document(text, [], ""),
                "properties": [{"key": PROPERTY, "value": {"write": marker}}],
            }
            body = {"type": {"id": str(kind["id"])}, "inwardIssue": {"id": number}, "outwardIssue": {"id": original}}
            self._send("POST", f"rest/api/{self.api}/issueLink", {}, json={**body, "comment": comment})
        self._resolve(number, duplicate)
        return self._ours(number)

    def _duplicate_type(self) -> dict:
        types = self.client.get_json(f"rest/api/{self.api}/issueLinkType").get("issueLinkTypes") or []
        types = [t for t in types if isinstance(t, dict) and t.get("id") is not None]
        wanted = self.mapping("duplicate_link", ["Duplicate"]) or []
        wanted = {str(v).lower() for v in ([wanted] if isinstance(wanted, str) else wanted)}
        found = [t for t in types if {str(t.get("name", "")).lower(), str(t["id"])} & wanted]
        found = found or [t for t in types if str(t.get("outward", "")).strip().lower() == "duplicates"]
        if not found:
            raise base.WriteRefused(
                f"this Jira site has no Duplicate link type (none named {', '.join(sorted(wanted))} or reading "
                '"duplicates"): name the site\'s in the source\'s mapping, {"duplicate_link": ["..."]}'
            )
        return found[0]

    def _resolve(self, number: str, issue: dict) -> None:
        """Transition the issue with resolution Duplicate, where its workflow offers one now."""
        wanted = str(self.mapping("duplicate_resolution", "Duplicate")).lower()
        fields = issue.get("fields") or {}
        if str((fields.get("resolution") or {}).get("name", "")).lower() == wanted:
            return
        where = f"rest/api/{self.api}/issue/{number}/transitions"
        transitions = self.client.get_json(where, {"expand": "transitions.fields"}).get("transitions") or []
        for transition in transitions:
            field = ((transition.get("fields") or {}) if isinstance(transition, dict) else {}).get("resolution")
            allowed = [v for v in (field or {}).get("allowedValues") or [] if isinstance(v, dict)]
            value = next((v for v in allowed if str(v.get("name", "")).lower() == wanted), None)
            if value is not None:
                body = {"transition": {"id": str(transition["id"])}, "fields": {"resolution": _chosen(value)}}
                self.send_once("POST", where, json=body)
                return
        status = (fields.get("status") or {}).get("name") or "its status"
        self.note = (
            f"{self.project}'s workflow has no transition from {status!r} that resolves as "
            f"{self.mapping('duplicate_resolution', 'Duplicate')}: linked, left unresolved"
        )

    # -- comments --------------------------------------------------------------------------------

    def comment(self, number: str, body: str, marker: str) -> dict:
        """One comment on issue `number` with the marker as its `qa-search` property;
        Jira's answer with `url`, the comment's own link on the site."""
        issue = self.fetch([number]).get(number)
        if issue is None:
            raise base.WriteRefused(f"Jira issue {number} is gone from {self.project} (deleted, moved or hidden)")
        payload = {"body": self._document(body, [], ""), "properties": [{"key": PROPERTY, "value": {"write": marker}}]}
        response = self.send_once("POST", f"rest/api/{self.api}/issue/{number}/comment", json=payload)
        try:
            answer = self.client.json(response)
        except UpstreamError as exc:  # made, perhaps: the marker settles it
            raise base.WriteInDoubt(str(exc)) from None
        if not str(answer.get("id") or "").isdigit():
            raise base.WriteInDoubt(f"Jira answered a comment with no id ({str(answer)[:80]!r})")
        return self._comment_shown(answer, issue["key"])

    def find_marked_comment(self, number: str, marker: str) -> dict | None:
        """The comment on issue `number` whose `qa-search` property holds `marker` (a
        duplicate's link comment, or a comment's), from its comments with their properties."""
        where, start = f"rest/api/{self.api}/issue/{number}/comment", 0
        for _ in range(PAGES):
            try:
                body = self.client.get_json(where, {"expand": "properties", "startAt": start, "maxResults": 100})
            except UpstreamError as exc:
                if exc.status == 404:  # the issue gone: nothing to mark
                    raise base.WriteRefused(server_words(exc.body) if exc.body else str(exc), exc.status) from None
                raise
            comments = [c for c in body.get("comments") or [] if isinstance(c, dict)]
            for comment in comments:
                props = {p.get("key"): p.get("value") for p in comment.get("properties") or [] if isinstance(p, dict)}
                if isinstance(props.get(PROPERTY), dict) and props[PROPERTY].get("write") == marker:
                    issue = self.fetch([number]).get(number) or {}
                    return self._comment_shown(comment, str(issue.get("key") or number))
            start += len(comments)
            total = body.get("total")
            if not comments or not isinstance(total, int) or start >= total:
                return None
        return None

    # -- shared ----------------------------------------------------------------------------------

    def _document(self, text: str, sections: list[tuple[str, str]], closing: str):
        """A body as the API takes it: ADF on Cloud (a heading node a section), wiki markup on Data Center."""
        if self.api != "3":
            parts = [text.strip(), *(f"h3. {head}\n{body}" for head, body in sections), closing]
            return "\n\n".join(part for part in parts if part.strip())
        content = _paragraphs(text)
        for head, body in sections:
            content.append({"type": "heading", "attrs": {"level": 3}, "content": [{"type": "text", "text": head}]})
            content += _paragraphs(body)
        content += _paragraphs(closing)
        return {"version": 1, "type": "doc", "content": content}

    def _send(self, method: str, path: str, meta: dict, **kwargs):
        """`send_once`, a 400's field errors named by the fields' names ("Sprint: Sprint is required.")."""
        try:
            return self.send_once(method, path, **kwargs)
        except base.WriteRefused as exc:
            # send_once keeps the UpstreamError as the refusal's context: its body is Jira's answer.
            answer = getattr(exc.__context__, "body", None)
            errors = answer.get("errors") if isinstance(answer, dict) else None
            if exc.status != 400 or not isinstance(errors, dict) or not errors:
                raise
            named = [f"{(meta.get(fid) or {}).get('name') or fid}: {words}" for fid, words in errors.items()]
            messages = [str(m) for m in answer.get("errorMessages") or []]
            raise base.WriteRefused("; ".join(messages + named)[:900], 400) from None

    def _paged(self, path: str, keys: tuple[str, ...]) -> list[dict]:
        """Every item of a startAt-paged listing (createmeta), bounded; its items under the first of `keys`."""
        items: list[dict] = []
        for _ in range(PAGES):
            body = self.client.get_json(path, {"startAt": len(items), "maxResults": 50})
            page = next((body[k] for k in keys if isinstance(body.get(k), list)), [])
            items += [item for item in page if isinstance(item, dict)]
            total = body.get("total")
            if not page or body.get("isLast") is True or (isinstance(total, int) and len(items) >= total):
                break
        return items

    def _ours(self, issue_id: str) -> dict:
        """The issue read back, believed only within the project (fetch), with `html_url` its page on the site."""
        issue = self.fetch([issue_id]).get(issue_id)
        if issue is None:
            raise base.WriteRefused(f"Jira issue {issue_id} is not one of {self.project}'s (moved, hidden or deleted)")
        return {**issue, "html_url": f"{self.source.url.rstrip('/')}/browse/{issue['key']}"}

    def _comment_shown(self, comment: dict, key: str) -> dict:
        url = f"{self.source.url.rstrip('/')}/browse/{key}?focusedCommentId={comment.get('id')}"
        return {**comment, "url": url}


def _chosen(value: dict) -> dict:
    """An allowed value as a write names it: by its id where it has one, else by its name."""
    return {"id": str(value["id"])} if value.get("id") else {"name": str(value.get("name"))}


def _links(link: dict, kind: dict, original: str) -> bool:
    """Whether `link`, on the duplicate, says it duplicates `original` by the link type `kind`."""
    other = link.get("outwardIssue") or {}
    return str((link.get("type") or {}).get("id")) == str(kind["id"]) and str(other.get("id")) == str(original)


def _paragraphs(text: str) -> list[dict]:
    """Plain text as ADF paragraphs: one at each blank line, a hard break at each newline."""
    content = []
    for block in (b.strip("\n") for b in text.replace("\r\n", "\n").strip().split("\n\n")):
        if not block.strip():
            continue
        inline: list[dict] = []
        for number, line in enumerate(block.split("\n")):
            inline += ([{"type": "hardBreak"}] if number else []) + ([{"type": "text", "text": line}] if line else [])
        content.append({"type": "paragraph", "content": inline})
    return content


def _quoted(project: str) -> str:
    """A project key as JQL takes it (a name with spaces in quotes), as the sync's JQL writes it."""
    return project if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", project) else '"' + project.replace('"', '\\"') + '"'


def _number(key) -> int:
    """The number of an issue key (HADOOP-124: 124), 0 for what is none."""
    tail = str(key or "").rpartition("-")[2]
    return int(tail) if tail.isdigit() and len(tail) <= 18 else 0
