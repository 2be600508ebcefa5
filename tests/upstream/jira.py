"""Jira Cloud (REST v3) and Jira Data Center (REST v2) on loopback.

Issues are stored as Jira sends them: `id`, `key`, `self` and `fields`
(ADF descriptions on Cloud, wiki markup on Data Center; times with the
account's own offset, like 2026-03-01T14:30:00.000+0530). Search reads the
JQL the connector writes (project, a bounded extra clause on issuetype,
`updated >=` as epoch milliseconds or as a zone-less time in the account's
zone at minute precision, ORDER BY) and answers anything else with Jira's
400. Cloud pages by `nextPageToken`/`isLast` and answers the removed
`/rest/api/3/search` with 410; Data Center pages by `startAt`/`total`.
"""

import base64
import json
import lzma
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from .server import Request, Response, Upstream

# The first 200 bugs of the shared gitbugs-hadoop set: Apache Hadoop's own Jira, from the
# GitBugs data set (Avinash Patil, arXiv:2504.09651, CC BY 4.0), kept with the tests.
GITBUGS = Path(__file__).resolve().parents[1] / "fixtures" / "gitbugs-hadoop-200.jsonl.xz"
UNAUTHORIZED = "Client must be authenticated to access this resource."
REMOVED = {
    "errorMessages": [
        "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full migration "
        "guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
    ],
    "errors": {},
}
PRIORITIES = {"Blocker": "1", "Critical": "2", "Major": "3", "Minor": "4", "Trivial": "5"}
CATEGORIES = {"new": (2, "To Do"), "indeterminate": (4, "In Progress"), "done": (3, "Done")}
DUPLICATE = {"id": "10002", "name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"}


def adf(text: str) -> dict:
    """Plain text as ADF: paragraphs at blank lines, stack frames as a code block."""
    content = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()):
        lines = block.split("\n")
        if any(line.lstrip().startswith("at ") for line in lines[1:]):
            content.append(
                {"type": "codeBlock", "attrs": {"language": "java"}, "content": [{"type": "text", "text": block}]}
            )
        elif block:
            inline = []
            for number, line in enumerate(lines):
                if number:
                    inline.append({"type": "hardBreak"})
                inline.append({"type": "text", "text": line})
            content.append({"type": "paragraph", "content": inline})
    return {"version": 1, "type": "doc", "content": content}


def wiki(text: str) -> str:
    blocks = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()):
        if any(line.lstrip().startswith("at ") for line in block.split("\n")[1:]):
            blocks.append("{noformat}\n" + block + "\n{noformat}")
        else:
            blocks.append(block)
    return "\n\n".join(blocks)


class FakeJira(Upstream):
    def __init__(
        self,
        *,
        cloud: bool = True,
        project: str = "HADOOP",
        project_name: str = "Apache Hadoop",
        email: str = "bot@example.com",
        token: str = "jira-token",
        time_zone: str = "Asia/Kolkata",
    ):
        super().__init__()
        self.cloud = cloud
        self.api = "3" if cloud else "2"
        self.projects = {
            project: {"id": "10010", "key": project, "name": project_name, "description": f"{project_name} issues"}
        }
        self.email, self.token = email, token
        self.zone = ZoneInfo(time_zone)
        self.issues: dict[str, dict] = {}  # by id
        self.next_id = 100000
        self.numbers: dict[str, int] = {}
        self.page_cap = 100
        self.get_allowed = True

    # -- data ------------------------------------------------------------------------------------------

    def stamp(self, when: datetime) -> str:
        local = when.astimezone(self.zone)
        return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{local.microsecond // 1000:03d}" + local.strftime("%z")

    def add(
        self,
        summary: str,
        description: str = "",
        *,
        project: str | None = None,
        priority: str = "Major",
        category: str = "new",
        status: str | None = None,
        resolution: str | None = None,
        components: list[str] = (),
        issuetype: str = "Bug",
        created: datetime | None = None,
        updated: datetime | None = None,
    ) -> dict:
        project = project or next(iter(self.projects))
        self.numbers[project] = self.numbers.get(project, 0) + 1
        self.next_id += 1
        created = created or self.tick()
        issue_id = str(self.next_id)
        category_id, category_name = CATEGORIES[category]
        info = self.projects[project]
        issue = {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations",
            "id": issue_id,
            "self": f"{self.url}/rest/api/{self.api}/issue/{issue_id}",
            "key": f"{project}-{self.numbers[project]}",
            "fields": {
                "summary": summary,
                "description": (adf(description) if self.cloud else wiki(description)) if description else None,
                "priority": {
                    "self": f"{self.url}/rest/api/{self.api}/priority/{PRIORITIES.get(priority, '3')}",
                    "iconUrl": f"{self.url}/images/icons/priorities/{priority.lower()}.svg",
                    "name": priority,
                    "id": PRIORITIES.get(priority, "3"),
                },
                "status": {
                    "self": f"{self.url}/rest/api/{self.api}/status/1",
                    "name": status or category_name,
                    "iconUrl": f"{self.url}/images/icons/status.png",
                    "id": "1",
                    "statusCategory": {
                        "self": f"{self.url}/rest/api/{self.api}/statuscategory/{category_id}",
                        "id": category_id,
                        "key": category,
                        "colorName": "blue-gray",
                        "name": category_name,
                    },
                },
                "resolution": {
                    "self": f"{self.url}/rest/api/{self.api}/resolution/1",
                    "id": "1",
                    "description": "",
                    "name": resolution,
                }
                if resolution
                else None,
                "components": [
                    {
                        "self": f"{self.url}/rest/api/{self.api}/component/{20000 + sum(map(ord, c))}",
                        "id": str(20000 + sum(map(ord, c))),
                        "name": c,
                    }
                    for c in components
                ],
                "issuetype": {
                    "self": f"{self.url}/rest/api/{self.api}/issuetype/1",
                    "id": "1",
                    "name": issuetype,
                    "subtask": False,
                    "iconUrl": f"{self.url}/images/icons/bug.svg",
                    "avatarId": 10303,
                },
                "project": {
                    "self": f"{self.url}/rest/api/{self.api}/project/{info['id']}",
                    "id": info["id"],
                    "key": project,
                    "name": info["name"],
                    "projectTypeKey": "software",
                    "avatarUrls": {"48x48": f"{self.url}/avatar/48", "16x16": f"{self.url}/avatar/16"},
                },
                "labels": [],
                "issuelinks": [],
                "reporter": {
                    "self": f"{self.url}/rest/api/{self.api}/user?accountId=abc123",
                    "accountId": "abc123",
                    "displayName": "QA Bot",
                    "active": True,
                    "timeZone": str(self.zone),
                    "avatarUrls": {"48x48": f"{self.url}/avatar/48"},
                },
                "created": self.stamp(created),
                "updated": self.stamp(updated or created),
            },
        }
        self.issues[issue_id] = issue
        return issue

    def by_key(self, key: str) -> dict:
        return next(issue for issue in self.issues.values() if issue["key"] == key)

    def edit(self, key: str, **fields) -> dict:
        issue = self.by_key(key)
        for name, value in fields.items():
            if name == "description" and isinstance(value, str):
                value = adf(value) if self.cloud else wiki(value)
            issue["fields"][name] = value
        issue["fields"]["updated"] = self.stamp(self.tick())
        return issue

    def delete(self, key: str) -> None:
        del self.issues[self.by_key(key)["id"]]

    def move(self, key: str, project: str) -> dict:
        """Move an issue to another project: a new key, the same id."""
        issue = self.by_key(key)
        self.numbers[project] = self.numbers.get(project, 0) + 1
        issue["key"] = f"{project}-{self.numbers[project]}"
        issue["fields"]["project"] = {**issue["fields"]["project"], "key": project}
        issue["fields"]["updated"] = self.stamp(self.tick())
        return issue

    def link_duplicate(self, duplicate: str, original: str, type_: dict = DUPLICATE, touch: bool = True) -> None:
        """`duplicate` duplicates `original`: an outward link on the duplicate, an inward one on the original."""
        dup, orig = self.by_key(duplicate), self.by_key(original)

        def ref(issue):
            return {
                "id": issue["id"],
                "key": issue["key"],
                "self": issue["self"],
                "fields": {"summary": issue["fields"]["summary"]},
            }

        dup["fields"]["issuelinks"].append({"id": str(len(self.issues)), "type": type_, "outwardIssue": ref(orig)})
        orig["fields"]["issuelinks"].append({"id": str(len(self.issues)), "type": type_, "inwardIssue": ref(dup)})
        if touch:
            dup["fields"]["updated"] = self.stamp(self.tick())

    @classmethod
    def from_gitbugs(cls, count: int, **options) -> "FakeJira":
        """The first `count` bugs of the shared gitbugs-hadoop set (Apache's own Jira) as issues."""
        jira = cls(**options)
        with lzma.open(GITBUGS, "rt") as lines:
            bugs = [r for r in map(json.loads, lines) if r["kind"] == "bug"][:count]
        for bug in bugs:
            raw = bug["raw_data"]
            resolution = raw.get("Resolution")
            category = (
                "done"
                if raw.get("Status") in ("Resolved", "Closed")
                else ("indeterminate" if raw.get("Status") in ("In Progress", "Patch Available") else "new")
            )
            created = datetime.fromisoformat(bug["created_at"])
            jira.add(
                bug["title"],
                bug.get("description", ""),
                priority=raw.get("Priority", "Major"),
                category=category,
                status=raw.get("Status"),
                resolution=resolution if resolution and resolution != "Unresolved" else None,
                created=created,
                updated=created + timedelta(hours=1),
            )
        return jira

    @classmethod
    def busy_site(cls, issues: int) -> "FakeJira":
        """A site of `issues` issues for the benchmarks: gitbugs-hadoop's first 200
        bugs over and over, with components and about 1% duplicate links."""
        base = cls.from_gitbugs(200)
        jira = cls()
        templates = list(base.issues.values())
        components = ["hdfs", "yarn", "mapreduce", "common", "security", "build", None]
        for number in range(issues):
            fields = templates[number % len(templates)]["fields"]
            component = components[number % len(components)]
            jira.add(
                fields["summary"], "", priority=fields["priority"]["name"], components=[component] if component else []
            )
            jira.issues[max(jira.issues)]["fields"]["description"] = fields["description"]
        keys = [issue["key"] for issue in jira.issues.values()]
        for number in range(50, issues, 97):  # about 1% are duplicates of an earlier report
            jira.link_duplicate(keys[number], keys[number - 50], touch=False)
        return jira

    # -- the API ----------------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if not self.authorized(request):
            if self.cloud:
                return Response(401, UNAUTHORIZED, {"WWW-Authenticate": 'Basic realm="protected-area"'})
            return Response(
                401,
                "<html><body>Unauthorized</body></html>",
                {"X-Seraph-LoginReason": "AUTHENTICATED_FAILED", "Content-Type": "text/html"},
            )
        path = request.path
        if self.cloud and path in ("/rest/api/3/search", "/rest/api/2/search"):
            return Response(410, REMOVED)
        if path == f"/rest/api/{self.api}/search/jql" and self.cloud:
            if request.method == "POST":  # the same search, its parameters in a JSON body
                body = request.json()
                fields = body.get("fields") or ["id"]
                request.query = {**{k: str(v) for k, v in body.items()}, "fields": ",".join(fields)}
            elif not self.get_allowed:
                return Response(405, {"errorMessages": ["Method Not Allowed"], "errors": {}})
            return self.search(request, token_paging=True)
        if path == "/rest/api/2/search" and not self.cloud:
            return self.search(request, token_paging=False)
        if match := re.fullmatch(rf"/rest/api/{self.api}/project/([^/]+)", path):
            project = self.projects.get(match.group(1))
            if project is None:
                return Response(
                    404, {"errorMessages": [f"No project could be found with key '{match.group(1)}'."], "errors": {}}
                )
            return Response(200, {"self": f"{self.url}{path}", **project})
        if match := re.fullmatch(rf"/rest/api/{self.api}/issue/(\d+)", path):  # by id, as webhooks name issues
            issue = self.issues.get(match.group(1))
            if issue is None:
                return Response(
                    404,
                    {"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}},
                )
            fields = [f for f in request.query.get("fields", "*all").split(",") if f]
            return Response(200, self.shaped(issue, fields))
        if path == f"/rest/api/{self.api}/myself":
            return Response(200, {"accountId": "abc123", "emailAddress": self.email, "timeZone": str(self.zone)})
        return Response(404, {"errorMessages": ["Not found"], "errors": {}})

    def authorized(self, request: Request) -> bool:
        if self.cloud:
            return request.basic_auth() == (self.email, self.token)
        return request.bearer() == self.token

    def search(self, request: Request, token_paging: bool) -> Response:
        jql = request.query.get("jql", "")
        try:
            matches = self.run_jql(jql)
        except ValueError as exc:
            return Response(400, {"errorMessages": [str(exc)], "errors": {}})
        fields = [f for f in request.query.get("fields", "id" if token_paging else "*navigable").split(",") if f]
        ids_only = set(fields) <= {"id", "key"}
        cap = 5000 if ids_only else self.page_cap
        size = min(int(request.query.get("maxResults", 50)), cap)
        if token_paging:
            start = int(base64.b64decode(request.query["nextPageToken"])) if "nextPageToken" in request.query else 0
        else:
            start = int(request.query.get("startAt", 0))
        page = matches[start : start + size]
        issues = [self.shaped(issue, fields) for issue in page]
        if token_paging:
            last = start + size >= len(matches)
            body = {"issues": issues, "isLast": last}
            if not last:
                body["nextPageToken"] = base64.b64encode(str(start + size).encode()).decode()
            return Response(200, body)
        return Response(
            200,
            {"expand": "names,schema", "startAt": start, "maxResults": size, "total": len(matches), "issues": issues},
        )

    def shaped(self, issue: dict, fields: list[str]) -> dict:
        shaped = {k: v for k, v in issue.items() if k != "fields"}
        if fields == ["id"]:
            return {"id": issue["id"]}
        if "*navigable" in fields or "*all" in fields:
            shaped["fields"] = issue["fields"]
        else:
            shaped["fields"] = {name: issue["fields"][name] for name in fields if name in issue["fields"]}
        return shaped

    def run_jql(self, jql: str) -> list[dict]:
        """Jira's search, for the JQL a connector writes."""
        query, order = (jql.split(" ORDER BY ", 1) + [""])[:2]
        matches = list(self.issues.values())
        for clause in re.split(r"\s+AND\s+", query.strip(), flags=re.I):
            clause = clause.strip().strip("()").strip()
            if m := re.fullmatch(r'project\s*=\s*"?([A-Za-z0-9_]+)"?', clause):
                if m.group(1) not in self.projects:
                    raise ValueError(f"The value '{m.group(1)}' does not exist for the field 'project'.")
                matches = [i for i in matches if i["fields"]["project"]["key"] == m.group(1)]
            elif m := re.fullmatch(r"updated\s*>=\s*(\d+)", clause):
                since = datetime.fromtimestamp(int(m.group(1)) / 1000, UTC)
                matches = [i for i in matches if self.updated(i) >= since]
            elif m := re.fullmatch(r'updated\s*>=\s*"(\d{4}[/-]\d\d[/-]\d\d \d\d:\d\d)"', clause):
                # A zone-less time is read in the account's zone, at minute precision.
                local = datetime.strptime(m.group(1).replace("-", "/"), "%Y/%m/%d %H:%M").replace(tzinfo=self.zone)
                matches = [i for i in matches if self.updated(i).replace(second=0, microsecond=0) >= local]
            elif m := re.fullmatch(r"id\s*=\s*(\d+)", clause):
                if m.group(1) not in self.issues:  # as Jira: naming an issue that is not there is an error
                    raise ValueError(f"An issue with key '{m.group(1)}' does not exist for field 'id'.")
                matches = [i for i in matches if i["id"] == m.group(1)]
            elif m := re.fullmatch(r'issuetype\s*=\s*"?(\w+)"?', clause):
                matches = [i for i in matches if i["fields"]["issuetype"]["name"].lower() == m.group(1).lower()]
            else:
                raise ValueError(f"Error in the JQL Query: the clause '{clause}' is not understood here.")
        if re.match(r"updated\s+ASC", order.strip(), flags=re.I):
            matches.sort(key=lambda i: (self.updated(i), int(i["id"])))
        else:
            matches.sort(key=lambda i: (i["fields"]["project"]["key"], int(i["key"].rsplit("-", 1)[1])))
        return matches

    @staticmethod
    def updated(issue: dict) -> datetime:
        return datetime.fromisoformat(issue["fields"]["updated"])
