"""Errors without HTTP: each has a code and a status that the surfaces map (REST a status, MCP a tool error)."""


def error_body(code: str, message: str, **extra) -> dict:
    """The one error shape of every surface: `{"error": {"code", "message", ...}}`."""
    return {"error": {"code": code, "message": message, **extra}}


class SearchError(ValueError):
    """The caller can fix it: the message says what was wrong and what to send.

    Every surface shows `str(error)` as it is: REST as `{"error": {...}}`
    with `status` as the HTTP status, MCP as a tool error's text.
    """

    status = 400
    code = "invalid_request"
    retry_after: int | None = None  # seconds, for an error that passes by itself

    def body(self) -> dict:
        return error_body(self.code, str(self))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after else {}


class NotFound(SearchError):
    status = 404
    code = "not_found"

    @classmethod
    def no_record(cls, key: str) -> "NotFound":
        return cls(f"no record with key {key!r}; check the key (like BUG-12) or search for it first.")


class DatabaseUnavailable(SearchError):
    """The database cannot be reached: stopped, restarting, recovering from
    a crash, or not answering within the request's time (runtime.postgres.deadline;
    backlog.db.database_unavailable tells). Nothing was changed; the
    same request can be sent again after `retry_after` seconds."""

    status = 503
    code = "database_unavailable"
    retry_after = 2

    def __init__(self):
        super().__init__(
            "The database is not reachable right now (it is stopped, restarting, recovering or not answering); "
            f"nothing was changed. Send the same request again in {self.retry_after} seconds."
        )


class ClusterDegraded(DatabaseUnavailable):
    """On a Citus cluster, a worker node holding some of the records cannot be
    reached (stopped, restarting, cut off): the request could not be answered
    whole. /readyz names the node; the coordinator reconnects by itself once
    the node is back, so the same request passes again then."""

    code = "cluster_degraded"
    retry_after = 5

    def __init__(self):
        SearchError.__init__(
            self,
            "Part of the database cluster is not reachable (a worker node is stopped or restarting), so this "
            f"request could not be answered whole; nothing was changed. Send the same request again in "
            f"{self.retry_after} seconds.",
        )


class RequestOverBudget(DatabaseUnavailable):
    """The request took longer than it may wait on the database (DATABASE_REQUEST_TIMEOUT,
    runtime.postgres.deadline) while the database answered: its own work, or a statement
    too slow for the time left, used it up. Nothing was changed."""

    code = "request_timeout"

    def __init__(self, budget: float):
        SearchError.__init__(
            self,
            f"This request took longer than the {budget:g} s it may take on the database "
            "(DATABASE_REQUEST_TIMEOUT) and was stopped; nothing was changed. Ask for less at a time "
            f"(a narrower search, a smaller report), or send it again in {self.retry_after} seconds.",
        )


def unavailable(error: BaseException) -> DatabaseUnavailable:
    """The 503 for an error that says the database cannot be reached: the cluster's
    when a Citus worker is the one that cannot (its words: "connection to the remote node"),
    and the request's own when its time ran out with the database answering (the deadline's
    error says so: runtime.postgres.deadline.Passed, read by its attributes)."""
    passed = error if hasattr(error, "request_budget") else error.__cause__
    if getattr(passed, "server_answered", False):
        return RequestOverBudget(passed.request_budget)
    return ClusterDegraded() if "remote node" in str(error) else DatabaseUnavailable()


class SemanticUnavailable(SearchError):
    """mode=semantic when no vector can be compared: none computed yet, or
    no embedding model can run. Not the caller's fault, and it passes once
    the index or the configuration is mended."""

    status = 503
    code = "semantic_unavailable"
    retry_after = 30
