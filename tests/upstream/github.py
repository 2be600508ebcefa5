"""GitHub's REST API (version 2022-11-28) on loopback, for the Issues connector.

Repositories hold issues and pull requests in one numbering, stored as
GitHub sends them (`number`, `title`, `body` in Markdown with the `\\r\\n`
the web form leaves, `labels` as objects, `state` and `state_reason`,
`comments` as a count, times as `2026-03-01T09:00:00Z`); a pull request
is an issue with a `pull_request` key. The listing
`GET /repos/{owner}/{repo}/issues` reads `state`, `since` (inclusive, at
second precision), `labels`, `sort`, `direction`, `per_page` (at most 100)
and `page`, and pages by a `link` header of absolute URLs in GitHub's
`/repositories/{id}/...` form. A deleted issue answers 410, a transferred
one 301 to its new place; an unknown repository 404. A wrong token is
401 "Bad credentials"; a spent rate limit is GitHub's 403 with
`x-ratelimit-remaining: 0` until `x-ratelimit-reset`, a secondary limit
its 403 with `retry-after`, for as long as either lasts. Writes: an issue
created (POST), updated (PATCH: `state`, `state_reason`), commented on
(POST .../comments), each 401 without a token, 403 for one that may not
write, 410 when issues are off, 422 for what GitHub would not take.
"""

import math
import re
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from .server import Request, Response, Upstream

DOCS = "https://docs.github.com/rest"
NOT_FOUND = {"message": "Not Found", "documentation_url": f"{DOCS}/repos/repos#get-a-repository", "status": "404"}
BAD_CREDENTIALS = {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}
SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID 0C01:2B3A:1F2E3D:4C5B6A:65E1F00D."
)
LABEL_COLORS = {"severity": "b60205", "area": "1d76db", "P": "fbca04"}
STATES = ("open", "closed", "all")
STATE_REASONS = (None, "completed", "not_planned", "duplicate", "reopened")
BOTS = {"seamonkey-crash-bot": 149012398}


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parsed(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


class FakeGitHub(Upstream):
    def __init__(
        self,
        *,
        token: str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        owner: str = "mozilla",
        repo: str = "seamonkey",
        description: str = "SeaMonkey: the all-in-one internet suite",
    ):
        super().__init__()
        self.token = token
        self.users: dict[str, int] = dict(BOTS)
        self.repos: dict[str, dict] = {}
        self.main = self.add_repo(f"{owner}/{repo}", description)
        self.next_issue_id = 2140000000
        self.next_comment_id = 1980000000
        self.limit, self.remaining = 5000, 5000
        self.reset_at = int(time.time()) + 3600
        self.spent_until: float | None = None  # epoch seconds: primary limit spent until then
        self.spend_after: int | None = None  # requests before the primary limit is spent
        self.spend_seconds = 0
        self.blocked_until: float | None = None  # epoch seconds: secondary limit until then
        self.secondary_after: int | None = None  # requests before a secondary limit starts
        self.secondary_seconds = 0
        self.login = "qa-search-bot"  # whose token it is: the author of the issues it files
        self.may_write = True  # False: the token may read issues, not create them (403)
        self.answer_delay = 0.0  # seconds a create waits, made already, before it answers
        self.lost_answers = 0  # creates made but whose answer never arrives in time

    # -- data ------------------------------------------------------------------------------------------

    def add_repo(self, full_name: str, description: str = "") -> str:
        repo_id = 1300000 + 17 * len(self.repos) + 11
        owner, name = full_name.split("/")
        self.repos[full_name] = {
            "meta": {
                "id": repo_id,
                "node_id": f"R_kgDO{repo_id:08d}",
                "name": name,
                "full_name": full_name,
                "private": False,
                "owner": self.user(owner, kind="Organization"),
                "html_url": f"https://github.com/{full_name}",
                "description": description,
                "fork": False,
                "url": f"https://api.github.com/repos/{full_name}",
                "has_issues": True,
                "open_issues_count": 0,
                "default_branch": "main",
                "visibility": "public",
                "archived": False,
                "disabled": False,
                "created_at": "2019-10-29T16:03:41Z",
                "updated_at": "2026-02-27T10:12:05Z",
                "pushed_at": "2026-02-28T21:40:17Z",
            },
            "issues": {},  # by number: issues and pull requests
            "comments": {},  # by number
            "gone": {},  # by number: 410, or the 301's Location of a transferred issue
            "hooks": {},  # by id: the repository's webhooks, as GET .../hooks/{id} shows them
        }
        return full_name

    def user(self, login: str, kind: str = "User") -> dict:
        user_id = self.users.setdefault(login, 4000000 + 7919 * len(self.users))
        return {
            "login": login,
            "id": user_id,
            "node_id": f"MDQ6VXNlcj{user_id}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
            "gravatar_id": "",
            "url": f"https://api.github.com/users/{login}",
            "html_url": f"https://github.com/{login}",
            "type": "Bot" if login in BOTS else kind,
            "user_view_type": "public",
            "site_admin": False,
        }

    def label(self, name: str) -> dict:
        label_id = 5100000000 + sum(ord(c) * 31**i for i, c in enumerate(name)) % 99999989
        prefix = name.split(":")[0] if ":" in name else name[:1]
        return {
            "id": label_id,
            "node_id": f"LA_kwDOA{label_id}",
            "name": name,
            "url": f"https://api.github.com/repos/{self.main}/labels/{name.replace(' ', '%20')}",
            "color": LABEL_COLORS.get(prefix, "ededed"),
            "default": name in ("bug", "duplicate", "wontfix"),
            "description": None,
        }

    def add(
        self,
        title: str,
        body: str | None = "",
        *,
        labels: list[str] = (),
        state: str = "open",
        state_reason: str | None = None,
        user: str = "ratty-reporter",
        created: datetime | None = None,
        updated: datetime | None = None,
        closed: datetime | None = None,
        pull_request: bool = False,
        repo: str | None = None,
    ) -> dict:
        """File an issue (or open a pull request) as GitHub stores it; its number is the repository's next."""
        repo = repo or self.main
        meta, issues = self.repos[repo]["meta"], self.repos[repo]["issues"]
        number = max([*issues, *self.repos[repo]["gone"], 0]) + 1
        created = created or self.tick()
        updated = updated or created
        if state == "closed" and closed is None:
            closed = updated
        self.next_issue_id += 1
        api = f"https://api.github.com/repos/{repo}/issues/{number}"
        issue = {
            "url": api,
            "repository_url": f"https://api.github.com/repos/{repo}",
            "labels_url": f"{api}/labels{{/name}}",
            "comments_url": f"{api}/comments",
            "events_url": f"{api}/events",
            "html_url": f"https://github.com/{repo}/{'pull' if pull_request else 'issues'}/{number}",
            "id": self.next_issue_id,
            "node_id": f"I_kwDOA{meta['id']}{number:05d}",
            "number": number,
            "title": title,
            "user": self.user(user),
            "labels": [self.label(name) for name in labels],
            "state": state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": 0,
            "created_at": stamp(created),
            "updated_at": stamp(updated),
            "closed_at": stamp(closed) if closed else None,
            "author_association": "NONE",
            "type": None,
            "active_lock_reason": None,
            "sub_issues_summary": {"total": 0, "completed": 0, "percent_completed": 0},
            "body": body,
            "closed_by": self.user("frg") if state == "closed" else None,
            "reactions": {
                "url": f"{api}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
            "timeline_url": f"{api}/timeline",
            "performed_via_github_app": None,
            "state_reason": state_reason if state == "closed" or state_reason == "reopened" else None,
        }
        if pull_request:
            pr = f"https://api.github.com/repos/{repo}/pulls/{number}"
            issue["draft"] = False
            issue["pull_request"] = {
                "url": pr,
                "html_url": issue["html_url"],
                "diff_url": f"{issue['html_url']}.diff",
                "patch_url": f"{issue['html_url']}.patch",
                "merged_at": issue["closed_at"],
            }
            issue["state_reason"] = None
        issues[number] = issue
        self.repos[repo]["comments"][number] = []
        return issue

    def issue(self, number: int, repo: str | None = None) -> dict:
        return self.repos[repo or self.main]["issues"][number]

    def edit(self, number: int, repo: str | None = None, by: str = "frg", **fields) -> dict:
        """Change an issue's fields now (labels by name), as the web UI would: `updated_at` moves on."""
        issue = self.issue(number, repo)
        now = self.tick()
        for name, value in fields.items():
            issue[name] = [self.label(label) for label in value] if name == "labels" else value
        if fields.get("state") == "closed":
            issue["closed_at"], issue["closed_by"] = stamp(now), self.user(by)
        elif fields.get("state") == "open":
            issue["closed_at"], issue["closed_by"] = None, None
        issue["updated_at"] = stamp(now)
        return issue

    def comment(self, number: int, body: str, user: str = "frg", repo: str | None = None) -> dict:
        """A new comment: the issue's count and `updated_at` move with it."""
        repo = repo or self.main
        issue = self.issue(number, repo)
        now = self.tick()
        self.next_comment_id += 1
        comment = {
            "url": f"https://api.github.com/repos/{repo}/issues/comments/{self.next_comment_id}",
            "html_url": f"{issue['html_url']}#issuecomment-{self.next_comment_id}",
            "issue_url": issue["url"],
            "id": self.next_comment_id,
            "node_id": f"IC_kwDOA{self.next_comment_id}",
            "user": self.user(user),
            "created_at": stamp(now),
            "updated_at": stamp(now),
            "body": body,
            "author_association": "MEMBER",
            "performed_via_github_app": None,
        }
        self.repos[repo]["comments"][issue["number"]].append(comment)
        issue["comments"] += 1
        issue["updated_at"] = stamp(now)
        return comment

    def close_as_duplicate(self, number: int, original: int) -> dict:
        """What the web UI does: a "Duplicate of #N" comment, then closed as a duplicate."""
        self.comment(number, f"Duplicate of #{original}")
        return self.edit(number, state="closed", state_reason="duplicate")

    def delete(self, number: int) -> None:
        """An admin deletes the issue: gone from listings, 410 to whoever could read it."""
        repo = self.repos[self.main]
        del repo["issues"][number]
        repo["gone"][number] = 410

    def transfer(self, number: int, to: str) -> dict:
        """Move an open issue to another repository of the owner: a new number and id there, 301 here."""
        if to not in self.repos:
            self.add_repo(to)
        old = self.repos[self.main]["issues"].pop(number)
        moved = self.add(
            old["title"],
            old["body"],
            labels=[label["name"] for label in old["labels"]],
            user=old["user"]["login"],
            created=parsed(old["created_at"]),
            repo=to,
        )
        moved["updated_at"] = stamp(self.tick())
        target = self.repos[to]["meta"]["id"]
        self.repos[self.main]["gone"][number] = f"{self.url}/repositories/{target}/issues/{moved['number']}"
        return moved

    # -- rate limits ---------------------------------------------------------------------------------

    def spend_rate_limit(self, seconds: int = 1, after: int = 0) -> None:
        """After `after` more requests the hour's are spent: 403 until the reset, `seconds` after
        the first refusal (rounded up to a whole second, as x-ratelimit-reset is)."""
        self.spend_after, self.spend_seconds = after, seconds

    def reset_rate_limit(self) -> None:
        """The hour turns over: the full allowance again."""
        self.spent_until, self.spend_after, self.remaining = None, None, self.limit

    def secondary_limit(self, retry_after: int = 1, after: int = 0) -> None:
        """After `after` more requests, too many too fast: 403 with retry-after for `retry_after` seconds."""
        self.secondary_after, self.secondary_seconds = after, retry_after

    def rate_headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-reset": str(self.reset_at),
            "x-ratelimit-used": str(self.limit - self.remaining),
            "x-ratelimit-resource": "core",
        }

    def limited(self) -> Response | None:
        now = time.time()
        if self.secondary_after is not None:
            if self.secondary_after <= 0:
                self.blocked_until, self.secondary_after = now + self.secondary_seconds, None
            else:
                self.secondary_after -= 1
        if self.blocked_until is not None and now < self.blocked_until:
            return Response(
                403,
                {
                    "message": SECONDARY,
                    "documentation_url": "https://docs.github.com/free-pro-team"
                    "@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
                    "status": "403",
                },
                {**self.rate_headers(), "retry-after": str(self.secondary_seconds)},
            )
        if self.spend_after is not None:
            if self.spend_after <= 0:
                self.spent_until, self.spend_after = math.ceil(now + self.spend_seconds), None
            else:
                self.spend_after -= 1
        if self.spent_until is not None:
            if now < self.spent_until:
                headers = {
                    **self.rate_headers(),
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-used": str(self.limit),
                    "x-ratelimit-reset": str(int(self.spent_until)),
                }
                return Response(
                    403,
                    {
                        "message": "API rate limit exceeded for user ID 1698243.",
                        "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api",
                        "status": "403",
                    },
                    headers,
                )
            self.spent_until, self.remaining = None, self.limit
        self.remaining = max(self.remaining - 1, 1)
        return None

    # -- the API ----------------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        answer = self.route(request)
        answer.headers = {
            "x-github-api-version-selected": "2022-11-28",
            "x-github-media-type": "github.v3; format=json",
            **answer.headers,
        }
        return answer

    def route(self, request: Request) -> Response:
        token = request.bearer()
        if "authorization" in request.headers and token != self.token:
            return Response(401, BAD_CREDENTIALS)
        if token is None:
            self.limit = 60  # unauthenticated: 60 requests an hour, by address
        if (limited := self.limited()) is not None:
            return limited
        path = request.path
        if m := re.fullmatch(r"/repositories/(\d+)(/.*)?", path):
            full_name = next((n for n, r in self.repos.items() if str(r["meta"]["id"]) == m.group(1)), None)
            if full_name is None:
                return Response(404, {**NOT_FOUND, "documentation_url": DOCS})
            path = f"/repos/{full_name}{m.group(2) or ''}"
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/hooks(?:/(\d+))?", path):
            return self.hooks(request, m.group(1), m.group(2))
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/issues(?:/(\d+)(/comments)?)?)?/?", path)
        if m is None:
            return Response(
                404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, self.rate_headers()
            )
        repo = self.repos.get(m.group(1)) or next(
            (r for n, r in self.repos.items() if n.lower() == m.group(1).lower()), None
        )
        if repo is None:
            return Response(404, NOT_FOUND, self.rate_headers())
        if not m.group(2):
            meta = {**repo["meta"], "open_issues_count": sum(i["state"] == "open" for i in repo["issues"].values())}
            return Response(200, meta, self.rate_headers())
        if not m.group(3) and m.group(2) and request.method == "POST":
            return self.create(request, repo)
        if not m.group(3):
            return self.listing(request, repo)
        number = int(m.group(3))
        if number in repo["gone"]:
            gone = repo["gone"][number]
            if gone == 410:
                return Response(
                    410,
                    {
                        "message": "This issue was deleted",
                        "documentation_url": f"{DOCS}/issues/issues#get-an-issue",
                        "status": "410",
                    },
                    self.rate_headers(),
                )
            return Response(
                301,
                {
                    "message": "Moved Permanently",
                    "url": gone,
                    "documentation_url": "https://docs.github.com/rest/guides/best-practices-for-using"
                    "-the-rest-api#follow-redirects",
                },
                {**self.rate_headers(), "Location": gone},
            )
        if number not in repo["issues"]:
            return Response(
                404,
                {"message": "Not Found", "documentation_url": f"{DOCS}/issues/issues#get-an-issue", "status": "404"},
                self.rate_headers(),
            )
        if request.method == "PATCH" and not m.group(4):
            return self.update(request, repo, number)
        if request.method == "POST" and m.group(4):
            return self.post_comment(request, repo, number)
        if not m.group(4):
            return Response(200, repo["issues"][number], self.rate_headers())
        return self.paged(request, repo["comments"][number], default_size=30)

    # -- creating issues (docs: "Create an issue") -------------------------------------------------------

    def disable_issues(self, repo: str | None = None) -> None:
        """Settings › Features › Issues unticked: creates answer 410."""
        self.repos[repo or self.main]["meta"]["has_issues"] = False

    def lose_answers(self, times: int = 1, delay: float = 2.0) -> None:
        """The next `times` creates (issues, comments) are made, then answered only after `delay` seconds:
        past the client's deadline, its answer is lost on the way (the client gives up)."""
        self.lost_answers, self.answer_delay = times, delay
        self.httpd.handle_error = lambda request, address: None  # the late answer's broken pipe is expected

    def create(self, request: Request, repo: dict) -> Response:
        """POST /repos/{owner}/{repo}/issues: 201 with the issue as GET shows it; 401 without
        a token (GitHub: "Requires authentication"), 403 for a token that may not write, 410
        when issues are off, 422 with GitHub's validation errors for a missing or long title."""
        docs = f"{DOCS}/issues/issues#create-an-issue"
        if (refused := self.refused(request, repo, docs)) is not None:
            return refused
        body = request.json()
        title = body.get("title") if isinstance(body, dict) else None
        if not isinstance(title, str) or not title.strip():
            error = {"resource": "Issue", "code": "missing_field", "field": "title"}
            return Response(422, {"message": "Validation Failed", "errors": [error], "documentation_url": docs})
        if len(title) > 256:
            error = {
                "resource": "Issue",
                "code": "custom",
                "field": "title",
                "message": "title is too long (maximum is 256 characters)",
            }
            return Response(422, {"message": "Validation Failed", "errors": [error], "documentation_url": docs})
        labels = [str(label) for label in body.get("labels") or []]
        made = datetime.now(UTC).replace(microsecond=0)  # GitHub's clock: the real one, not the story's
        self.clock = max(self.clock, made)  # and what happens to the issue after, happens after it
        issue = self.add(
            title, body.get("body"), labels=labels, user=self.login, created=made, repo=repo["meta"]["full_name"]
        )
        issue["author_association"] = "MEMBER"
        if self.lost_answers > 0:
            self.lost_answers -= 1
            time.sleep(self.answer_delay)
        return Response(201, issue, {**self.rate_headers(), "Location": issue["url"]})

    def refused(self, request: Request, repo: dict, docs: str) -> Response | None:
        """Why a write is refused before its body is read: 401 without a token, 403 for a token
        that may not write, 410 when the repository's issues are off; None: it may go on."""
        if request.bearer() is None:
            return Response(401, {"message": "Requires authentication", "documentation_url": docs, "status": "401"})
        if not self.may_write:
            message = "Resource not accessible by personal access token"
            return Response(403, {"message": message, "documentation_url": docs, "status": "403"})
        if not repo["meta"]["has_issues"]:
            return Response(410, {"message": "Issues are disabled for this repo", "documentation_url": docs})
        return None

    def update(self, request: Request, repo: dict, number: int) -> Response:
        """PATCH /repos/{owner}/{repo}/issues/{number} ("Update an issue"): `state` and
        `state_reason` (completed, not_planned, duplicate, reopened), `title`, `body`; 200 with
        the issue; closing a closed issue again is answered as any other update. 422 for a
        state or state_reason GitHub does not know."""
        docs = f"{DOCS}/issues/issues#update-an-issue"
        if (refused := self.refused(request, repo, docs)) is not None:
            return refused
        body = request.json() if request.body else {}
        body = body if isinstance(body, dict) else {}
        if body.get("state", "open") not in ("open", "closed"):
            return invalid("Issue", "state")
        if body.get("state_reason") not in STATE_REASONS:
            return invalid("Issue", "state_reason")
        issue = repo["issues"][number]
        fields = {name: body[name] for name in ("title", "body", "state", "state_reason") if name in body}
        if fields.get("state") == "closed" and "state_reason" not in fields:
            fields["state_reason"] = "completed"
        if fields.get("state") == "closed" and issue["state"] == "closed":
            fields.pop("state")  # already closed: closed_at stays
        self.edit(number, repo=repo["meta"]["full_name"], by=self.login, **fields)
        return Response(200, issue, self.rate_headers())

    def post_comment(self, request: Request, repo: dict, number: int) -> Response:
        """POST /repos/{owner}/{repo}/issues/{number}/comments ("Create an issue comment"):
        201 with the comment; 422 without a body. A lost answer (lose_answers) is made, then late."""
        docs = f"{DOCS}/issues/comments#create-an-issue-comment"
        if (refused := self.refused(request, repo, docs)) is not None:
            return refused
        body = request.json() if request.body else {}
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            error = {"resource": "IssueComment", "code": "missing_field", "field": "body"}
            return Response(422, {"message": "Validation Failed", "errors": [error], "documentation_url": docs})
        comment = self.comment(number, text, user=self.login, repo=repo["meta"]["full_name"])
        if self.lost_answers > 0:
            self.lost_answers -= 1
            time.sleep(self.answer_delay)
        return Response(201, comment, {**self.rate_headers(), "Location": comment["url"]})

    def hooks(self, request: Request, full_name: str, hook_id: str | None) -> Response:
        """A repository's webhooks: list, create, update; the secret is never shown back."""
        repo = self.repos.get(full_name)
        if repo is None or request.bearer() != self.token:  # admin only: not even readable without a token
            return Response(404, NOT_FOUND, self.rate_headers())
        hooks = repo["hooks"]
        if hook_id is None and request.method == "GET":
            return Response(200, [self.hook_shown(hook) for hook in hooks.values()], self.rate_headers())
        body = request.json() if request.body else {}
        if hook_id is None and request.method == "POST":
            if not isinstance(body.get("config"), dict) or not body["config"].get("url"):
                return Response(
                    422, {"message": "Validation Failed", "errors": [{"field": "config", "code": "missing"}]}
                )
            hook_id = str(len(hooks) + 500000001)
            hooks[hook_id] = {"id": int(hook_id), "name": "web", "active": True, "events": ["push"], "config": {}}
        elif hook_id not in hooks or request.method != "PATCH":
            return Response(404, NOT_FOUND, self.rate_headers())
        hook = hooks[hook_id]
        for name in ("active", "events"):
            if name in body:
                hook[name] = body[name]
        hook["config"].update(body.get("config") or {})
        return Response(201 if request.method == "POST" else 200, self.hook_shown(hook), self.rate_headers())

    @staticmethod
    def hook_shown(hook: dict) -> dict:
        config = {k: ("********" if k == "secret" else v) for k, v in hook["config"].items()}
        return {**hook, "config": config, "type": "Repository"}

    def listing(self, request: Request, repo: dict) -> Response:
        query = request.query
        state = query.get("state", "open")
        sort, direction = query.get("sort", "created"), query.get("direction", "desc")
        if state not in STATES or sort not in ("created", "updated", "comments") or direction not in ("asc", "desc"):
            return invalid(
                "Issue",
                "state"
                if state not in STATES
                else "sort"
                if sort not in ("created", "updated", "comments")
                else "direction",
            )
        issues = [i for i in repo["issues"].values() if state == "all" or i["state"] == state]
        if "since" in query:
            try:
                since = parsed(query["since"]).replace(microsecond=0)
            except ValueError:
                return invalid("Issue", "since")
            issues = [i for i in issues if parsed(i["updated_at"]) >= since]
        if query.get("labels"):
            wanted = {name.strip().lower() for name in query["labels"].split(",")}
            issues = [i for i in issues if wanted <= {label["name"].lower() for label in i["labels"]}]
        field = {"created": "created_at", "updated": "updated_at", "comments": "comments"}[sort]
        issues.sort(key=lambda i: (i[field], i["number"]), reverse=direction == "desc")
        return self.paged(request, issues, default_size=30)

    def paged(self, request: Request, items: list[dict], default_size: int) -> Response:
        """One page of `items` by `per_page` (at most 100) and `page`, with GitHub's link header."""
        try:
            size = max(1, min(int(request.query.get("per_page", default_size)), 100))
            page = max(1, int(request.query.get("page", 1)))
        except ValueError:
            return invalid("Issue", "per_page")
        last = max(1, math.ceil(len(items) / size))
        headers = self.rate_headers()
        if last > 1:
            repo_id = next(
                r["meta"]["id"]
                for r in self.repos.values()
                if request.path.startswith((f"/repos/{r['meta']['full_name']}", f"/repositories/{r['meta']['id']}"))
            )
            tail = re.sub(r"^/repos/[^/]+/[^/]+|^/repositories/\d+", "", request.path)

            def link(number: int, rel: str) -> str:
                query = urlencode({**request.query, "per_page": size, "page": number})
                return f'<{self.url}/repositories/{repo_id}{tail}?{query}>; rel="{rel}"'

            rels = []
            if page > 1:
                rels.append(link(page - 1, "prev"))
            if page < last:
                rels += [link(page + 1, "next"), link(last, "last")]
            if page > 1:
                rels.append(link(1, "first"))
            headers["Link"] = ", ".join(rels)
        return Response(200, items[(page - 1) * size : page * size], headers)


def invalid(resource: str, name: str) -> Response:
    return Response(
        422,
        {
            "message": "Validation Failed",
            "errors": [{"resource": resource, "field": name, "code": "invalid"}],
            "documentation_url": "https://docs.github.com/rest/issues/issues#list-repository-issues",
            "status": "422",
        },
    )


# -- SeaMonkey's tracker, as a test finds it ---------------------------------------------------------------

TEMPLATE = (
    "<!--\r\nThanks for reporting a bug in SeaMonkey! Please search the existing issues first.\r\n"
    "Crashes: include the crash ID from about:crashes.\r\n-->\r\n\r\n"
    "### Steps to reproduce\r\n\r\n{steps}\r\n\r\n"
    "### Expected behavior\r\n\r\n<!-- What did you expect to happen? -->\r\n{expected}\r\n\r\n"
    "### Actual behavior\r\n\r\n{actual}\r\n\r\n"
    "### SeaMonkey version and platform\r\n\r\n{version}"
)


def templated(steps: str, expected: str, actual: str, version: str) -> str:
    """A body written through the repository's issue form, HTML comments and all."""
    return TEMPLATE.format(steps=steps.replace("\n", "\r\n"), expected=expected, actual=actual, version=version)


#: (title, body, labels, state, state_reason, reporter); the number is the position, from 1.
SEAMONKEY = [
    (
        "Mail window hangs when compacting a 4 GB Inbox on a network drive",
        templated(
            "1. Keep the profile's Mail folder on an SMB share\n2. Let Inbox grow past 4 GB\n3. File > Compact Folders",
            "Inbox is compacted in the background.",
            "The 3-pane window stops responding for several minutes; Task Manager shows seamonkey.exe at 100% CPU.",
            "SeaMonkey 2.53.18.2, Windows 10 22H2",
        ),
        ["bug", "area: mail", "severity: high"],
        "closed",
        "completed",
        "ratty-reporter",
    ),
    (
        "Crash in [@ nsMsgDBFolder::GetMsgDatabase] when deleting an IMAP folder",
        templated(
            "1. Subscribe to an IMAP account with nested folders\n2. Delete a folder that has subfolders",
            "The folder moves to Trash.",
            "SeaMonkey crashes. bp-8e2f41c7-3a1b-4a4e-9d6f-2a3e50260114",
            "SeaMonkey 2.53.18, Linux x86_64",
        ),
        ["bug", "area: mail", "severity: critical", "crash"],
        "closed",
        "completed",
        "imap-ian",
    ),
    (
        "Composer drops the table border attribute when switching to Source view",
        templated(
            "1. Insert a table with border=1 in Composer\n2. Switch to the <HTML> Source tab and back",
            "The border stays.",
            "The border attribute is gone from the markup.",
            "SeaMonkey 2.53.17, macOS 13.6",
        ),
        ["bug", "area: composer", "severity: medium"],
        "open",
        None,
        "htmlhelen",
    ),
    (
        "ChatZilla: /join to a channel with a key fails on Libera.Chat",
        "`/join #seamonkey-dev secret` answers *Cannot join channel (+k)* although the key is right.\r\n\r\n"
        "The key is sent as a second JOIN parameter only when the channel name has no uppercase letters.",
        ["bug", "area: chatzilla", "severity: low"],
        "open",
        None,
        "ircfan",
    ),
    (
        "Address book search ignores the Nickname field",
        templated(
            '1. Give a card the nickname "Bobby"\n2. Type Bobby in the address book\'s search box',
            "The card is found.",
            "No results.",
            "SeaMonkey 2.53.18.1, Windows 11",
        ),
        ["bug", "area: address book", "severity: low"],
        "open",
        None,
        "ratty-reporter",
    ),
    (
        "Browser: pages from a site with HSTS load over http after restoring a session",
        "Restore a session with tabs on an HSTS site: the restored tabs are loaded with http:// and the padlock is "
        "missing until reload. Reproduced with a fresh profile.",
        ["bug", "area: browser", "severity: high", "security"],
        "closed",
        "completed",
        "secnerd",
    ),
    (
        "Junk mail controls mark every message from a mailing list as junk",
        templated(
            "1. Enable adaptive junk mail controls\n2. Receive mail from a Mailman list",
            "Only spam is marked.",
            "Every list message gets the junk flag after a day of training.",
            "SeaMonkey 2.53.18.2, Windows 10",
        ),
        ["bug", "area: mail", "severity: medium"],
        "closed",
        "not_planned",
        "listlover",
    ),
    (
        "Tab bar overflows instead of scrolling when 80+ tabs are open",
        "With more than about 80 tabs the tab strip grows past the window edge instead of showing the scroll "
        "arrows. The all-tabs menu still lists them.",
        ["bug", "area: browser", "severity: low"],
        "open",
        None,
        "tabhoarder",
    ),
    (
        "Newsgroup download stalls at 'Downloading message headers' on large groups",
        templated(
            "1. Subscribe to a group with 500,000 headers\n2. Choose Download All Headers",
            "The headers arrive.",
            "The status bar stays at 'Downloading message headers 12000 of 500000'.",
            "SeaMonkey 2.53.17, Linux",
        ),
        ["bug", "area: news", "severity: medium"],
        "open",
        None,
        "usenet-ulla",
    ),
    (
        "Bookmarks toolbar folder icons are blank with the Modern theme",
        "Switch to the Modern theme: folders on the bookmarks toolbar show no icon, only their names.",
        ["bug", "area: themes", "severity: low"],
        "closed",
        "completed",
        "pixelpat",
    ),
    (
        "Password manager offers to save the password on every login to the same site",
        templated(
            "1. Log in to a site and choose Remember\n2. Log out and log in again",
            "No prompt: the password is known.",
            "The save prompt appears each time; a duplicate entry is stored.",
            "SeaMonkey 2.53.18.2, Windows 10",
        ),
        ["bug", "area: browser", "severity: medium", "privacy"],
        "open",
        None,
        "ratty-reporter",
    ),
    (
        "Message filters run on incoming mail stop after the first matching rule",
        templated(
            "1. Make two filters that both match a sender: tag, then move\n2. Get new mail",
            "Both actions run.",
            "Only the first filter runs; the message is tagged but not moved.",
            "SeaMonkey 2.53.18.1, macOS 14.2",
        ),
        ["bug", "area: mail", "severity: high"],
        "open",
        None,
        "filterfreak",
    ),
    (
        "DOM Inspector is missing from the Tools > Web Development menu",
        "After upgrading to 2.53.18 the DOM Inspector entry is gone from Tools > Web Development, although the "
        "add-on is listed as enabled.",
        ["bug", "area: devtools", "severity: medium"],
        "closed",
        "completed",
        "webdev-wes",
    ),
    (
        "Printing a message prints the previous message's headers",
        "Select a message, print it, select another and print: the second printout has the first message's From "
        "and Subject lines with the second message's body.",
        ["bug", "area: mail", "severity: medium"],
        "open",
        None,
        "printpaul",
    ),
    (
        "Startup takes 40 s with a 2 GB places.sqlite",
        templated(
            "1. Use a profile with years of history (places.sqlite 2 GB)\n2. Start SeaMonkey",
            "The window appears within a few seconds.",
            "40 s of disk activity before the first window.",
            "SeaMonkey 2.53.18.2, Windows 10 on HDD",
        ),
        ["bug", "area: browser", "P2", "performance"],
        "open",
        None,
        "slowstart",
    ),
    (
        "Calendar extension: reminders fire twice after resuming from sleep",
        "Lightning in SeaMonkey shows every reminder twice if the machine slept through its time.",
        ["bug", "area: calendar", "severity: low"],
        "closed",
        "not_planned",
        "calcarla",
    ),
    (
        "Crash when dragging an attachment from a message to the desktop",
        templated(
            "1. Open a message with a PDF attachment\n2. Drag the attachment to the desktop",
            "The file is saved there.",
            "Crash. bp-1b5d0e92-77c4-4c1d-8c0e-6f2a80260203",
            "SeaMonkey 2.53.18.2, Windows 11 23H2",
        ),
        ["bug", "area: mail", "severity: critical", "crash"],
        "open",
        None,
        "dragndrop",
    ),
    (
        "Composer: Publish fails with an FTP server that needs TLS",
        "Publishing a page to an FTPS server fails with 'The server could not be reached'. Plain FTP works.",
        ["enhancement", "area: composer"],
        "open",
        None,
        "htmlhelen",
    ),
    (
        "View > Text Zoom resets on every new tab",
        "Set the text zoom to 120% and open a new tab: it is back to 100%. The site-specific setting is off.",
        ["bug", "area: browser", "severity: low"],
        "closed",
        "completed",
        "bigtext",
    ),
    (
        "Reply to a message with an inline image sends the image twice",
        templated(
            "1. Receive an HTML message with an inline image\n2. Reply with the original quoted",
            "The image is quoted once.",
            "The sent reply carries the image inline and again as an attachment.",
            "SeaMonkey 2.53.18, Linux",
        ),
        ["bug", "area: mail", "severity: medium"],
        "open",
        None,
        "listlover",
    ),
    (
        "Popup blocker lets through window.open from a setTimeout after a click",
        "A site can open a popup 2 s after a click by calling window.open from a setTimeout; Firefox blocks it.",
        ["bug", "area: browser", "severity: high", "security"],
        "closed",
        "completed",
        "secnerd",
    ),
    (
        "Mail: message pane is blank after viewing a message with a very long line",
        "A plain-text message with a single 2 MB line leaves the message pane blank, and the next message shown "
        "is blank too until restart.",
        ["bug", "area: mail", "severity: high"],
        "open",
        None,
        "imap-ian",
    ),
    (
        "Data Manager does not delete cookies of a site's subdomains",
        "Removing example.org in Tools > Data Manager > Cookies leaves cookies of www.example.org behind.",
        ["bug", "area: browser", "severity: medium", "privacy"],
        "open",
        None,
        "cookiemonster",
    ),
    (
        "ChatZilla crashes SeaMonkey when a DCC file transfer is cancelled",
        "Start a DCC SEND and cancel it from the other side: SeaMonkey crashes. "
        "bp-0c4b2a55-9e3f-4d8a-b1f0-77aa20260111",
        ["bug", "area: chatzilla", "severity: critical", "crash"],
        "open",
        None,
        "ircfan",
    ),
    (
        "Add a dark mode to the default theme",
        "The default theme ignores the OS dark mode. A dark variant of it would help those working at night.",
        ["enhancement", "area: themes"],
        "open",
        None,
        "pixelpat",
    ),
    (
        "Spell checker underlines every word in Composer after switching dictionaries",
        "Change the dictionary from en-US to de-DE and back: every word is underlined until the document is reopened.",
        ["bug", "area: composer", "severity: low"],
        "open",
        None,
        "lexicon-lee",
    ),
    (
        "IMAP: moving 1000 messages to another folder loses some of them",
        templated(
            "1. Select 1000 messages in an IMAP folder\n2. Drag them to another folder on the same server",
            "All 1000 arrive.",
            "Around 30 are missing from both folders; they reappear after 'Repair Folder'.",
            "SeaMonkey 2.53.18.2, Windows 10",
        ),
        ["bug", "area: mail", "severity: critical", "dataloss"],
        "open",
        None,
        "imap-ian",
    ),
    (
        "Sidebar panels are empty after a profile migration",
        "After migrating a profile from 2.49 the sidebar shows the panel headers but no content.",
        ["bug", "area: browser", "severity: low"],
        "closed",
        "completed",
        "oldtimer",
    ),
    (
        "Signed S/MIME messages show 'signature invalid' after a certificate renewal",
        "Messages signed with the old certificate show the invalid signature icon once the renewed certificate "
        "is imported.",
        ["bug", "area: mail", "severity: medium", "security"],
        "open",
        None,
        "smime-sam",
    ),
    (
        "Mail window hangs when compacting a large Inbox",
        "Compacting Inbox (3.9 GB) freezes the main window. Profile on a NAS.",
        ["bug", "area: mail"],
        "open",
        None,
        "nasnancy",
    ),
    (
        "Download manager shows 0 B/s for downloads larger than 4 GB",
        "Downloading a 6 GB ISO shows 0 B/s and no time left, although the file grows.",
        ["bug", "area: browser", "severity: low"],
        "open",
        None,
        "isofan",
    ),
    (
        "Preferences: the Mail & Newsgroups > Junk panel does not save the retention days",
        "Set 'Delete junk older than 14 days', close preferences, reopen: it is back to 30.",
        ["bug", "area: preferences", "severity: low"],
        "closed",
        "completed",
        "filterfreak",
    ),
    (
        "Composer inserts <br> at the end of every paragraph on paste from a word processor",
        "Pasting text from LibreOffice Writer adds a trailing <br> to every paragraph.",
        ["bug", "area: composer", "severity: low"],
        "closed",
        "duplicate",
        "htmlhelen",
    ),
    (
        "Address book: exporting to LDIF loses the second e-mail address",
        templated(
            "1. Give a card two e-mail addresses\n2. Tools > Export to LDIF",
            "Both addresses are in the file.",
            "Only the primary one is exported (no mozillaSecondEmail).",
            "SeaMonkey 2.53.17, Linux",
        ),
        ["bug", "area: address book", "severity: medium"],
        "open",
        None,
        "ldap-lars",
    ),
    (
        "Build fails with Rust 1.76: error[E0658] in gkrust-shared",
        "```\r\nerror[E0658]: use of unstable library feature 'ptr_metadata'\r\n  --> "
        "servo/components/style/gecko_bindings/sugar/ownership.rs:112:9\r\n```\r\nBuilding comm-release with "
        "rustc 1.76.0 fails; 1.75 works.",
        ["bug", "area: build", "severity: high"],
        "closed",
        "completed",
        "buildbot-bea",
    ),
    (
        "Tabs: middle-click on a link in a framed page opens it in the current tab",
        "In a page with frames, middle-clicking a link inside a frame replaces the frame instead of opening a tab.",
        ["bug", "area: browser", "severity: medium"],
        "open",
        None,
        "tabhoarder",
    ),
    (
        "Feed reader marks all items read when the feed is refreshed",
        "Every refresh of an RSS account marks all its items as read, new ones included.",
        ["bug", "area: news", "severity: medium"],
        "closed",
        "completed",
        "usenet-ulla",
    ),
    (
        "Update 2.53.18.1 to the newest NSS for the root certificate changes",
        None,
        ["task", "area: build"],
        "closed",
        "completed",
        "buildbot-bea",
    ),
    (
        "Mail: 'Get All New Messages' skips accounts that use OAuth2",
        templated(
            "1. Set up a Gmail account with OAuth2 next to a POP account\n2. File > Get All New Messages",
            "Both accounts are checked.",
            "Only the POP account is checked; Gmail needs a click of its own.",
            "SeaMonkey 2.53.18.2, Windows 11",
        ),
        ["bug", "area: mail", "severity: medium"],
        "open",
        None,
        "gmailgreta",
    ),
    (
        "Find in page (Ctrl+F) does not find text inside a <details> element that is closed",
        "Text in a collapsed <details> is never found; Firefox opens the element and highlights it.",
        ["bug", "area: browser", "severity: low"],
        "open",
        None,
        "webdev-wes",
    ),
    (
        "Session restore brings back tabs closed before the crash",
        "After a crash, the restored session contains tabs that were closed minutes before it.",
        ["bug", "area: browser", "severity: medium"],
        "closed",
        "not_planned",
        "slowstart",
    ),
    (
        "Mail: HTML signature with an image is sent as a broken attachment",
        'An HTML signature file with <img src="file:///..."> sends a 0-byte attachment instead of the image.',
        ["bug", "area: mail", "severity: medium"],
        "open",
        None,
        "smime-sam",
    ),
    (
        "Composer: link dialog does not accept mailto: URLs with a subject",
        "Entering mailto:qa@example.org?subject=Hello in the link dialog is rejected as an invalid URL.",
        ["bug", "area: composer", "severity: low"],
        "closed",
        "completed",
        "htmlhelen",
    ),
    (
        "Save password prompt keeps coming back for a site whose password is saved",
        "Every time I log in to my bank the 'Remember password?' bar shows up again, and Password Manager now lists "
        "the site four times.",
        ["bug", "area: browser"],
        "open",
        None,
        "nasnancy",
    ),
]

#: Pull requests among the issues, at these positions: the listing mixes them in.
PULL_REQUESTS = {
    8: ("Bug 1871234 - Fix compacting folders larger than 4 GB", ["area: mail"], "closed"),
    17: ("Update l10n changesets for 2.53.18.2", ["area: build"], "closed"),
    30: ("Make the tab strip scroll when it overflows", ["area: browser"], "open"),
}


def seamonkey() -> FakeGitHub:
    """SeaMonkey's repository: the issues above and three pull requests, one filed every few hours from
    January 2026 on, each updated a day later, closed ones two days later."""
    github = FakeGitHub()
    start = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
    entries, pulls = list(SEAMONKEY), dict(PULL_REQUESTS)
    number = 0
    while entries:
        number += 1
        created = start + timedelta(hours=7 * number, minutes=13 * number % 60)
        if number in pulls:
            title, labels, state = pulls.pop(number)
            github.add(
                title,
                "Fixes the problem described in the linked bug.\r\n\r\n- [x] Tested locally",
                labels=labels,
                state=state,
                user="frg",
                created=created,
                updated=created + timedelta(days=1),
                pull_request=True,
            )
            continue
        title, body, labels, state, reason, user = entries.pop(0)
        github.add(
            title,
            body,
            labels=labels,
            state=state,
            state_reason=reason,
            user=user,
            created=created,
            updated=created + timedelta(days=2 if state == "closed" else 1),
        )
    github.clock = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return github


CRASH_FRAMES = [
    "nsMsgDBFolder::GetMsgDatabase",
    "nsImapProtocol::ProcessCurrentURL",
    "nsMsgCompose::SendMsg",
    "mozilla::dom::Element::SetAttr",
    "nsHTMLEditor::InsertTable",
    "nsNNTPProtocol::ReadNewsList",
    "js::gc::GCRuntime::collect",
    "nsDocShell::InternalLoad",
    "nsAbCardProperty::GetPropertyAsAString",
    "nsMsgSearchTerm::MatchString",
]


def add_crash_reports(github: FakeGitHub, count: int) -> list[dict]:
    """What the crash-stats bot files: one issue a crash signature, each a minute after the last."""
    filed = []
    for n in range(count):
        frame = CRASH_FRAMES[n % len(CRASH_FRAMES)]
        filed.append(
            github.add(
                f"Crash in [@ {frame}] ({n // len(CRASH_FRAMES) + 1} of the top crashes this week)",
                f"Crash signature `{frame}` had {40 + n} crashes in SeaMonkey 2.53.18.2 this week.\r\n\r\n"
                f"Example report: bp-{n:08x}-5e1d-4c2b-9a7f-3c0d20260226\r\n\r\n"
                "<!-- filed by seamonkey-crash-bot; do not edit below this line -->",
                labels=["crash", "severity: critical"],
                user="seamonkey-crash-bot",
            )
        )
    return filed
