"""Jira's write endpoints on loopback, Cloud (REST v3) and Data Center (REST v2).

`FakeJiraWrites` is `FakeJira` (tests/upstream/jira.py) that also takes writes,
as Atlassian's REST reference describes them:

- createmeta: `GET /rest/api/{v}/issue/createmeta/{project}/issuetypes` and
  `.../issuetypes/{issueTypeId}`, paged by startAt (Cloud's pages hold
  `issueTypes` and `fields`, Data Center's `values`, with `isLast`); each field
  with `required`, `name`, `fieldId`, `hasDefaultValue`, `allowedValues`. Which
  fields the Bug screen offers (priority, labels, environment) and which extra
  ones it requires are the test's to set;
- `POST /rest/api/{v}/issue` with `fields` and `properties`: 201 `{id, key, self}`;
  400 `{"errorMessages": [], "errors": {field: message}}` for a required field
  left out, a field not on the screen or a validator's refusal; 403 without the
  Create issues permission;
- issue properties (`GET .../issue/{idOrKey}/properties/{key}`), the issue by key;
- `GET .../issueLinkType`, `POST .../issueLink` (inwardIssue duplicates
  outwardIssue: the inward issue gets the link with `outwardIssue`, as
  `link_duplicate` writes it), with a comment and its properties;
- `GET/POST .../issue/{id}/transitions` (`expand=transitions.fields`: a resolution
  screen where the status's workflow has one);
- `POST/GET .../issue/{id}/comment` (`expand=properties`, paged by startAt/total).

`lose_answers` makes the next creates (issues, comments) and answers them late;
`lag_index` keeps new issues out of search until `catch_up` (Jira's index).
"""

import re
import time
from datetime import UTC, datetime, timedelta

from .jira import PRIORITIES, FakeJira
from .server import Request, Response

NO_PERMISSION = "You do not have permission to create issues in this project."
RESOLUTIONS = {"1": "Fixed", "2": "Won't Fix", "3": "Duplicate", "5": "Cannot Reproduce"}
NOT_FOUND = {"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}}


def field(fid: str, name: str, required: bool = False, default: bool = False, allowed=None) -> dict:
    shown = {"required": required, "name": name, "key": fid, "fieldId": fid, "hasDefaultValue": default}
    shown["operations"] = ["set"]
    if allowed is not None:
        shown["allowedValues"] = allowed
    return shown


class FakeJiraWrites(FakeJira):
    def __init__(self, **options):
        super().__init__(**options)
        self.issue_types = [{"id": "3", "name": "Task"}, {"id": "7", "name": "Story"}, {"id": "1", "name": "Bug"}]
        self.offers = {"priority", "labels", "environment"}  # on the Bug create screen
        self.required: dict[str, str] = {}  # extra required fields without a default: id -> name
        #: Refused at create although createmeta says optional (a workflow validator): id -> (name, message).
        self.validators: dict[str, tuple[str, str]] = {}
        self.may_create = True
        self.link_types = [
            {"id": "10000", "name": "Blocks", "inward": "is blocked by", "outward": "blocks"},
            {"id": "10002", "name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"},
            {"id": "10003", "name": "Relates", "inward": "relates to", "outward": "relates to"},
        ]
        self.without_resolution: set[str] = set()  # statuses whose transitions have no resolution screen
        self.properties: dict[str, dict] = {}  # issue id -> {key: value}
        self.comments: dict[str, list[dict]] = {}  # issue id -> comments, each with its "properties"
        self.next_comment = 10500
        self.lost_answers, self.answer_delay = 0, 0.0
        self.lagging, self.unindexed = False, set()
        self.meta_page = 2  # createmeta's page size cap: the connector must page

    # -- the test's controls ---------------------------------------------------------------------

    def lose_answers(self, times: int = 1, delay: float = 2.0) -> None:
        """The next `times` creates (issues, comments) are made, then answered only after `delay` seconds."""
        self.lost_answers, self.answer_delay = times, delay
        self.httpd.handle_error = lambda request, address: None  # the late answer's broken pipe is expected

    def lag_index(self) -> None:
        self.lagging = True

    def catch_up(self) -> None:
        self.lagging = False
        self.unindexed.clear()

    def rename_duplicate(self, name: str, outward: str = "is a copy of", inward: str = "has a copy") -> None:
        kind = next(t for t in self.link_types if t["id"] == "10002")
        kind.update(name=name, outward=outward, inward=inward)

    def made(self) -> list[dict]:
        """The issues QA Search created (they carry its property)."""
        return [self.issues[i] for i in self.properties if "qa-search" in self.properties[i]]

    def comments_on(self, key: str) -> list[dict]:
        return self.comments.get(self.by_key(key)["id"], [])

    # -- routing ---------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if not self.authorized(request):
            return super().handle(request)
        v = self.api
        path = request.path
        if m := re.fullmatch(rf"/rest/api/{v}/issue/([A-Za-z][A-Za-z0-9_]*-\d+)(/.*)?", path):
            try:
                path = request.path = f"/rest/api/{v}/issue/{self.by_key(m.group(1))['id']}{m.group(2) or ''}"
            except StopIteration:
                return Response(404, NOT_FOUND)
        routes = [
            ("GET", rf"/rest/api/{v}/issue/createmeta/([^/]+)/issuetypes", self.meta_types),
            ("GET", rf"/rest/api/{v}/issue/createmeta/([^/]+)/issuetypes/(\w+)", self.meta_fields),
            ("POST", rf"/rest/api/{v}/issue", self.create),
            ("GET", rf"/rest/api/{v}/issue/(\d+)/properties/([\w.-]+)", self.property),
            ("GET", rf"/rest/api/{v}/issueLinkType", self.link_type_list),
            ("POST", rf"/rest/api/{v}/issueLink", self.link),
            ("GET", rf"/rest/api/{v}/issue/(\d+)/transitions", self.transitions),
            ("POST", rf"/rest/api/{v}/issue/(\d+)/transitions", self.transition),
            ("GET", rf"/rest/api/{v}/issue/(\d+)/comment", self.comment_list),
            ("POST", rf"/rest/api/{v}/issue/(\d+)/comment", self.post_comment),
        ]
        for method, pattern, answer in routes:
            if request.method == method and (m := re.fullmatch(pattern, path)):
                return answer(request, *m.groups())
        return super().handle(request)

    def now(self) -> datetime:
        """The site's clock for a write: the real time (a write's lookup asks from it), never going back."""
        self.clock = max(datetime.now(UTC), self.clock + timedelta(milliseconds=1))
        return self.clock

    def late(self) -> None:
        if self.lost_answers > 0:
            self.lost_answers -= 1
            time.sleep(self.answer_delay)

    # -- createmeta ------------------------------------------------------------------------------

    def paged(self, request: Request, items: list, key: str) -> Response:
        start = int(request.query.get("startAt", 0))
        size = min(int(request.query.get("maxResults", 50)), self.meta_page)
        page = items[start : start + size]
        body = {"maxResults": size, "startAt": start, "total": len(items)}
        if self.cloud:
            return Response(200, {**body, key: page})
        return Response(200, {**body, "isLast": start + size >= len(items), "values": page})

    def meta_types(self, request: Request, project: str) -> Response:
        if project not in self.projects:
            return Response(404, {"errorMessages": [f"No project could be found with key '{project}'."], "errors": {}})
        types = [
            {**t, "subtask": False, "self": f"{self.url}/rest/api/{self.api}/issuetype/{t['id']}"}
            for t in self.issue_types
        ]
        return self.paged(request, types, "issueTypes")

    def screen(self, type_id: str) -> dict[str, dict]:
        fields = [
            field("summary", "Summary", required=True),
            field("issuetype", "Issue Type", required=True),
            field("project", "Project", required=True),
            field("description", "Description"),
            field("reporter", "Reporter", required=True, default=True),
        ]
        if "priority" in self.offers:
            allowed = [
                {"id": i, "name": n, "self": f"{self.url}/rest/api/{self.api}/priority/{i}"}
                for n, i in PRIORITIES.items()
            ]
            fields.append(field("priority", "Priority", default=True, allowed=allowed))
        if "labels" in self.offers:
            fields.append(field("labels", "Labels"))
        if "environment" in self.offers:
            fields.append(field("environment", "Environment"))
        fields.append(field("customfield_10020", "Story Points"))
        fields += [field(fid, name, required=True) for fid, name in self.required.items()]
        fields += [field(fid, name) for fid, (name, _) in self.validators.items() if fid not in self.required]
        return {f["fieldId"]: f for f in fields}

    def meta_fields(self, request: Request, project: str, type_id: str) -> Response:
        if project not in self.projects or type_id not in {t["id"] for t in self.issue_types}:
            return Response(404, {"errorMessages": ["Issue type not found for this project."], "errors": {}})
        return self.paged(request, list(self.screen(type_id).values()), "fields")

    # -- create ----------------------------------------------------------------------------------

    def create(self, request: Request) -> Response:
        if not self.may_create:
            return Response(403, {"errorMessages": [NO_PERMISSION], "errors": {}})
        body = request.json() or {}
        fields = body.get("fields") or {}
        project = (fields.get("project") or {}).get("key")
        if project not in self.projects:
            return Response(400, {"errorMessages": [], "errors": {"project": "Specify a valid project ID or key"}})
        screen = self.screen(str((fields.get("issuetype") or {}).get("id")))
        errors = {
            fid: f"Field '{fid}' cannot be set. It is not on the appropriate screen, or unknown."
            for fid in fields
            if fid not in screen
        }
        errors |= {
            fid: f"{f['name']} is required."
            for fid, f in screen.items()
            if f["required"] and not f["hasDefaultValue"] and fid not in fields
        }
        errors |= {fid: message for fid, (_, message) in self.validators.items() if fid not in errors}
        if "summary" in errors:
            errors["summary"] = "You must specify a summary of the issue."
        if errors:
            return Response(400, {"errorMessages": [], "errors": errors})
        names = {i: n for n, i in PRIORITIES.items()}
        priority = names.get(str((fields.get("priority") or {}).get("id")), "Major")
        issue = self.add(fields["summary"], project=project, priority=priority, created=self.now())
        for name in ("description", "labels", "environment"):
            if name in fields:
                issue["fields"][name] = fields[name]
        self.properties[issue["id"]] = {p["key"]: p["value"] for p in body.get("properties") or []}
        if self.lagging:
            self.unindexed.add(issue["id"])
        self.late()
        return Response(201, {"id": issue["id"], "key": issue["key"], "self": issue["self"]})

    def property(self, request: Request, issue_id: str, key: str) -> Response:
        if issue_id not in self.issues:
            return Response(404, NOT_FOUND)
        if key not in self.properties.get(issue_id, {}):
            return Response(404, {"errorMessages": [f"The property with key '{key}' does not exist."], "errors": {}})
        return Response(200, {"key": key, "value": self.properties[issue_id][key]})

    def run_jql(self, jql: str) -> list[dict]:
        """The parent's JQL, with `created >= <epoch ms>` and ORDER BY created DESC; an
        issue made while the index lags is not found until it catches up."""
        query, _, order = jql.partition(" ORDER BY ")
        since, kept = None, []
        for clause in re.split(r"\s+AND\s+", query.strip(), flags=re.I):
            if m := re.fullmatch(r"created\s*>=\s*(\d+)", clause.strip()):
                since = datetime.fromtimestamp(int(m.group(1)) / 1000, UTC)
            else:
                kept.append(clause)
        by_created = re.fullmatch(r"created\s+DESC", order.strip(), flags=re.I)
        matches = super().run_jql(" AND ".join(kept) + ("" if by_created or not order else f" ORDER BY {order}"))
        matches = [i for i in matches if i["id"] not in self.unindexed]
        if since is not None:
            matches = [i for i in matches if datetime.fromisoformat(i["fields"]["created"]) >= since]
        if by_created:
            matches.sort(key=lambda i: (datetime.fromisoformat(i["fields"]["created"]), int(i["id"])), reverse=True)
        elif re.fullmatch(r"key\s+DESC", order.strip(), flags=re.I):
            matches.sort(key=lambda i: int(i["key"].rsplit("-", 1)[1]), reverse=True)
        return matches

    # -- links -----------------------------------------------------------------------------------

    def link_type_list(self, request: Request) -> Response:
        shown = [{**t, "self": f"{self.url}/rest/api/{self.api}/issueLinkType/{t['id']}"} for t in self.link_types]
        return Response(200, {"issueLinkTypes": shown})

    def find(self, ref) -> dict | None:
        ref = ref if isinstance(ref, dict) else {}
        if ref.get("id") is not None:
            return self.issues.get(str(ref["id"]))
        return next((i for i in self.issues.values() if i["key"] == ref.get("key")), None)

    def link(self, request: Request) -> Response:
        """POST issueLink: `inwardIssue` <outward> `outwardIssue` (HADOOP-2 duplicates HADOOP-1)."""
        body = request.json() or {}
        wanted = body.get("type") or {}
        kind = next(
            (t for t in self.link_types if wanted.get("id") == t["id"] or wanted.get("name") == t["name"]), None
        )
        if kind is None:
            return Response(404, {"errorMessages": ["No issue link type with name or id given."], "errors": {}})
        inward, outward = self.find(body.get("inwardIssue")), self.find(body.get("outwardIssue"))
        if inward is None or outward is None:
            return Response(404, {"errorMessages": ["Issue Does Not Exist"], "errors": {}})
        self.link_duplicate(inward["key"], outward["key"], type_=dict(kind), touch=False)
        inward["fields"]["updated"] = self.stamp(self.now())
        if isinstance(body.get("comment"), dict):
            self.add_comment(inward["id"], body["comment"])
        return Response(201, "")

    # -- transitions -----------------------------------------------------------------------------

    def offered(self, issue: dict, with_fields: bool) -> list[dict]:
        status = issue["fields"]["status"]
        if status["statusCategory"]["key"] == "done":
            return [{"id": "3", "name": "Reopen Issue", "to": {"name": "Reopened", "id": "4"}, "hasScreen": False}]
        resolve = {"id": "5", "name": "Resolve Issue", "to": {"name": "Resolved", "id": "5"}, "hasScreen": True}
        if status["name"] in self.without_resolution:
            resolve["hasScreen"] = False
        elif with_fields:
            allowed = [
                {"id": i, "name": n, "self": f"{self.url}/rest/api/{self.api}/resolution/{i}"}
                for i, n in RESOLUTIONS.items()
            ]
            resolve["fields"] = {"resolution": {**field("resolution", "Resolution", required=True, allowed=allowed)}}
        start = {"id": "4", "name": "Start Progress", "to": {"name": "In Progress", "id": "3"}, "hasScreen": False}
        return [start, resolve] if status["name"] != "In Progress" else [resolve]

    def transitions(self, request: Request, issue_id: str) -> Response:
        issue = self.issues.get(issue_id)
        if issue is None:
            return Response(404, NOT_FOUND)
        with_fields = "transitions.fields" in request.query.get("expand", "")
        return Response(200, {"expand": "transitions", "transitions": self.offered(issue, with_fields)})

    def transition(self, request: Request, issue_id: str) -> Response:
        issue = self.issues.get(issue_id)
        if issue is None:
            return Response(404, NOT_FOUND)
        body = request.json() or {}
        wanted = str((body.get("transition") or {}).get("id"))
        chosen = next((t for t in self.offered(issue, True) if t["id"] == wanted), None)
        if chosen is None:
            return Response(
                400, {"errorMessages": [f"Transition id '{wanted}' is not valid for this issue."], "errors": {}}
            )
        resolution = (body.get("fields") or {}).get("resolution")
        if "fields" in chosen and not resolution:
            return Response(400, {"errorMessages": [], "errors": {"resolution": "Resolution is required."}})
        done = chosen["to"]["name"] == "Resolved"
        issue["fields"]["status"] = {
            **issue["fields"]["status"],
            "name": chosen["to"]["name"],
            "statusCategory": {
                **issue["fields"]["status"]["statusCategory"],
                "key": "done" if done else "indeterminate",
            },
        }
        if done and resolution:
            rid = str(resolution.get("id") or next(i for i, n in RESOLUTIONS.items() if n == resolution.get("name")))
            issue["fields"]["resolution"] = {"id": rid, "name": RESOLUTIONS[rid], "description": ""}
        issue["fields"]["updated"] = self.stamp(self.now())
        return Response(204, b"")

    # -- comments --------------------------------------------------------------------------------

    def add_comment(self, issue_id: str, body: dict) -> dict:
        self.next_comment += 1
        when = self.stamp(self.now())
        comment = {
            "self": f"{self.url}/rest/api/{self.api}/issue/{issue_id}/comment/{self.next_comment}",
            "id": str(self.next_comment),
            "author": {"accountId": "abc123", "displayName": "QA Bot"},
            "body": body.get("body"),
            "created": when,
            "updated": when,
            "properties": [{"key": p["key"], "value": p["value"]} for p in body.get("properties") or []],
        }
        self.comments.setdefault(issue_id, []).append(comment)
        return comment

    def post_comment(self, request: Request, issue_id: str) -> Response:
        if issue_id not in self.issues:
            return Response(404, NOT_FOUND)
        body = request.json() or {}
        if not body.get("body"):
            return Response(400, {"errorMessages": [], "errors": {"comment": "Comment body can not be empty!"}})
        comment = self.add_comment(issue_id, body)
        self.late()
        return Response(201, {k: v for k, v in comment.items() if k != "properties"})

    def comment_list(self, request: Request, issue_id: str) -> Response:
        if issue_id not in self.issues:
            return Response(404, NOT_FOUND)
        comments = self.comments.get(issue_id, [])
        start, size = int(request.query.get("startAt", 0)), min(int(request.query.get("maxResults", 50)), 2)
        expand = "properties" in request.query.get("expand", "")
        page = [{k: v for k, v in c.items() if expand or k != "properties"} for c in comments[start : start + size]]
        return Response(200, {"startAt": start, "maxResults": size, "total": len(comments), "comments": page})
