"""The MCP server: five read-only tools and a resource template over search.service, triage_run, file_bug and
mark_duplicate.

Every tool hands its arguments to `service.call` as the client sent them (with
its DEFAULTS where they are not given) and returns the dict it gets back, as
structuredContent and as the same JSON in a text block: an agent gets exactly
what the REST API returns for the same parameters. The SDK validates nothing itself (each tool's argument model
accepts anything), so a bad value is refused by the contract, with the same
message REST shows; the published input schemas come from the contract's
request models (mcp_bridge.schema), so clients also see the enums and bounds.

Errors the caller can fix (`SearchError`) become tool errors: isError, the
error's text as the content, and REST's error body as structuredContent.
Anything else is logged to stderr and reported without its details.
"""

import json
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from backlog.access import active_user
from backlog.db import database_unavailable
from runtime.postgres import deadline
from search import ratelimit, service
from search.contract import (
    DuplicateCheckResponse,
    GetResponse,
    SearchError,
    SearchResponse,
    TimelineResponse,
    error_body,
    unavailable,
)
from triage import service as triage
from triage.contract import TriageRequest, TriageResponse
from writeback import links
from writeback import service as writeback
from writeback.contract import DuplicateRequest, FileRequest, LinkRequest, LinkResponse, ReadOnly, WriteResponse
from writeback.models import Surface

from .auth import DrfTokenVerifier
from .schema import input_schemas, output_schema

logger = logging.getLogger(__name__)

INSTRUCTIONS = """\
QA knowledge: products, features, test cases and bugs, each with a key like BUG-12.
Has a bug been reported? check_duplicates with its draft, then get the one candidate you need.
What broke around a record? timeline. A failed test run? triage_run with its JUnit report.
Otherwise search finds candidates (concise hits) and get reads them, many keys a call.
Errors say what to change. A record is also the resource backlog://bug/BUG-12."""

# name: (what it does, the contract's response model)
TOOLS = {
    "search": (
        "Find records by words and meaning: concise hits (detail=full: + dates, snippets, facets); "
        "then get the ones to read.",
        SearchResponse,
    ),
    "get": (
        "Records by key. Concise by default: fields, links, texts cut (cut says which); "
        "fields=[...] or detail=full for more.",
        GetResponse,
    ),
    "similar": ("Records most like a stored record, never itself.", SearchResponse),
    "timeline": ("What broke around a record: records filed just before and after it.", TimelineResponse),
    "check_duplicates": (
        "Has this bug been reported? Send its draft; candidates likeliest first, with a band and why.",
        DuplicateCheckResponse,
    ),
}
# Where a tool's default is not the contract's (REST's): an agent reads a record concise.
DEFAULTS = {"get": {"detail": "concise"}}
# Tools over another module than search.service: name -> (what it does, request, response, call).
# triage_run stores the run it triages (docs/triage.md); file_bug, mark_duplicate and link_failure write to a tracker:
# none is read-only.
OTHER_TOOLS = {
    "triage_run": (
        "A failed test run: its JUnit report (junit, product) or a stored run; each failure's known bug, or new.",
        TriageRequest,
        TriageResponse,
        lambda arguments, user: triage.call(arguments, user, default_tokens=triage.AGENT_TOKENS),
    ),
    "file_bug": (
        "File a bug in its product's tracker after check_duplicates found none; idempotency_key makes retries safe.",
        FileRequest,
        WriteResponse,
        lambda arguments, user: writeback.file(arguments, user, Surface.MCP).write,
    ),
    "mark_duplicate": (
        "Mark bug key a duplicate of bug of in their tracker, exactly once; idempotency_key as file_bug.",
        DuplicateRequest,
        WriteResponse,
        lambda arguments, user: writeback.duplicate(arguments, user, Surface.MCP).write,
    ),
    "link_failure": (
        "Confirm or reject a triage_run group's suggested bug; confirmed, the bug's tracker gets one comment.",
        LinkRequest,
        LinkResponse,
        lambda arguments, user: links.link(arguments, user, Surface.MCP),
    ),
}
#: Tools that change a team's tracker: a read-only token is refused them, as REST refuses it.
WRITES = {"file_bug", "mark_duplicate", "link_failure"}
READ_ONLY = ToolAnnotations(read_only_hint=True)
INTERNAL_ERROR = (
    "the search service failed on the server (the error is logged there); nothing in the request caused it. "
    "Try again; if it keeps failing, tell the service's operator."
)


class AnyArguments(ArgModelBase):
    """Takes the arguments as sent: the contract validates them, as it does for REST."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def build_server(user=None, http_url: str | None = None) -> MCPServer:
    """The server. Over stdio the tools act as `user`; served at `http_url`, every
    request needs a bearer token (a REST API token) and acts as its user."""
    requests = {name: service.OPERATIONS[name].request for name in TOOLS}
    inputs = input_schemas(requests | {name: tool[1] for name, tool in OTHER_TOOLS.items()}, DEFAULTS)
    tools = [_tool(name, description, inputs[name], response, user) for name, (description, response) in TOOLS.items()]
    tools += [
        _tool(name, description, inputs[name], response, user, ToolAnnotations(read_only_hint=False))
        for name, (description, _, response, _) in OTHER_TOOLS.items()
    ]
    auth = {}
    if http_url:
        # resource_server_url=None: no OAuth metadata; the tokens are issued in the admin.
        auth = {
            "token_verifier": DrfTokenVerifier(),
            "auth": AuthSettings(issuer_url=http_url, resource_server_url=None),
        }
    server = MCPServer("qa-search", instructions=INSTRUCTIONS, tools=tools, log_level="WARNING", **auth)

    @server.resource(
        "backlog://{kind}/{key}",
        name="record",
        description="One record as the get tool returns it, e.g. backlog://bug/BUG-12",
        mime_type="application/json",
    )
    def record(kind: str, key: str, ctx: Context) -> str:
        body, failed = answer("get", {"keys": [key]}, lambda: _acting_user(ctx, user))
        if failed:
            # A key that cannot be one is a not-found too (-32602), as is a record the user may not see.
            invalid = body["error"]["code"] in ("invalid_request", "not_found")
            raise (ResourceNotFoundError if invalid else ResourceError)(body["error"]["message"])
        found = [r for r in body["records"] if r["kind"] == kind.lower()]
        if not found:
            raise ResourceNotFoundError(
                f"no {kind} with key {key!r}; check the kind (product, feature, test, bug) and the key, "
                "or find it with the search tool."
            )
        return json.dumps(found[0], ensure_ascii=False, separators=(",", ":"))

    return server


def _tool(name: str, description: str, parameters: dict, response, user, annotations=READ_ONLY) -> Tool:
    def run(ctx: Context, **arguments) -> CallToolResult:
        for parameter, value in DEFAULTS.get(name, {}).items():
            if arguments.get(parameter) is None:
                arguments[parameter] = value
        if name in WRITES and not _may_write(ctx):
            body, failed = ReadOnly(ReadOnly.MESSAGE).body(), True
        else:
            body, failed = answer(name, arguments, lambda: _acting_user(ctx, user))
        # An error's text is its message (what was wrong and what to send); a result's is its JSON.
        text = body["error"]["message"] if failed else json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body, is_error=failed)

    return Tool(
        fn=run,
        name=name,
        description=description,
        parameters=parameters,
        # Published, not validated again here: the result is the contract model's own dump.
        fn_metadata=FuncMetadata(arg_model=AnyArguments, output_schema=output_schema(response)),
        is_async=False,
        context_kwarg="ctx",
        annotations=annotations,
    )


def answer(operation: str, arguments: dict, acting_user: Callable[[], Any]) -> tuple[dict, bool]:
    """(service.call's dict, False), or (REST's error body, True). Runs in a worker thread.

    `acting_user` is called here, after the stale connections are closed and
    inside the error handling, because finding the user reads the database too.
    A call waits on the database as long as a REST request may (runtime.postgres.deadline)."""
    with deadline.within(settings.DATABASE_REQUEST_TIMEOUT):
        close_old_connections()
        try:
            user = acting_user()
            ratelimit.charge(user)  # the budget REST searches count against too
            if operation in OTHER_TOOLS:
                return OTHER_TOOLS[operation][3](arguments, user), False
            return service.call(operation, arguments, user), False
        except SearchError as error:
            return error.body(), True
        except Exception as error:
            if database_unavailable(error):
                return unavailable(error).body(), True
            logger.exception("MCP %s failed", operation)
            return error_body("internal_error", INTERNAL_ERROR), True
        finally:
            close_old_connections()


def _acting_user(ctx: Context, default):
    """Over HTTP, the bearer token's user, read with the token at this request's
    start (mcp_bridge.auth); over stdio, `default` (`mcp --user`) read again, so
    that a change of teams or a deactivation holds from the next call on."""
    request = ctx.request_context.request
    access = getattr(request.scope.get("user"), "access_token", None) if request is not None else None
    if access is not None:
        return access.user
    if default is None:
        return None  # no --user: the operator's own view
    user = active_user(default.pk)  # with their access, in one statement
    if user is None:
        raise AccountGone("This account is no longer active; ask an admin, or start the server with another --user.")
    return user


def _may_write(ctx: Context) -> bool:
    """Over HTTP, whether the bearer token may write; over stdio (`mcp --user`), yes, as a session may."""
    request = ctx.request_context.request
    access = getattr(request.scope.get("user"), "access_token", None) if request is not None else None
    return access is None or access.may_write


class AccountGone(SearchError):
    status = 403
    code = "forbidden"
