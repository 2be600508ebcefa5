"""`manage.py mcp` with the service's own work taken out: MCP's floor, for bench/mcp_bench.py --floor.

    python bench/mcp_floor.py mcp [manage.py mcp's arguments]

The same server as `manage.py mcp` (the SDK, mcp_bridge's stdio transport,
its HTTP app and middleware), except that each tool answers from memory
what it answered the first time it was called with the same arguments, and
over HTTP a bearer token is taken as the user of the first one checked. What
a call costs here is what MCP costs before any database work: the SDK, the
transport, the thread hops, the serialisation, and the client.
"""

import json
import sys

import django_setup  # noqa: F401  (sets Django up)
from django.core.management import execute_from_command_line

from mcp_bridge import auth, server

answers, users = {}, {}
answer, user_for_token = server.answer, auth.user_for_token


def remembered_answer(operation: str, arguments: dict, acting_user):
    key = operation, json.dumps(arguments, sort_keys=True)
    if key not in answers:
        answers[key] = answer(operation, arguments, acting_user)
    return answers[key]


def remembered_user(key: str):
    if "user" not in users:
        users["user"] = user_for_token(key)
    return users["user"]


server.answer, auth.user_for_token = remembered_answer, remembered_user

if __name__ == "__main__":
    execute_from_command_line(["manage.py", *sys.argv[1:]])
