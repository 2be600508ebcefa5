"""`manage.py mcp`: serve the search tools over MCP (mcp_bridge.server builds them).

stdio (the default) is for a client that starts this command itself; stdout
is then the protocol, so nothing here writes to it. `--transport http`
serves streamable HTTP at http://HOST:PORT/mcp, where every request needs a
REST API token as its bearer token. HTTP is stateless: the tools keep
nothing between calls, so no request depends on the process that answered
the one before, and any number of servers can stand behind a load balancer
without sticky sessions (docs/scaling.md).
"""

import uvicorn
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from mcp_bridge import stdio
from mcp_bridge.auth import http_app
from mcp_bridge.server import build_server


class Command(BaseCommand):
    help = "Serve search, get, similar and timeline over MCP: stdio, or streamable HTTP with bearer tokens."

    def add_arguments(self, parser):
        parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
        parser.add_argument("--host", default="127.0.0.1", help="http: address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8001, help="http: port (default 8001)")
        parser.add_argument("--user", help="stdio: act as this user (default: no user, the database's view)")

    def handle(self, *args, transport, host, port, user, **options):
        if transport == "stdio":
            stdio.serve(build_server(user=self.user(user) if user else None))
            return
        if user:
            raise CommandError("--user is for stdio; over HTTP each request acts as its bearer token's user.")
        url = f"http://{host}:{port}"
        app = http_app(build_server(http_url=url), host)
        self.stderr.write(f"MCP over streamable HTTP at {url}/mcp (Authorization: Bearer <API token>)")
        uvicorn.run(app, host=host, port=port, log_level="warning")

    def user(self, username: str):
        try:
            return get_user_model().objects.get(username=username, is_active=True)
        except get_user_model().DoesNotExist:
            raise CommandError(f"--user {username}: no active user by that name; create one in the admin.") from None
        finally:
            connections.close_all()  # the tools run in worker threads, each with its own connection
