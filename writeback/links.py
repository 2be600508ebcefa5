"""A curator's confirmed triage link, told to the bug in its tracker: one comment a bug a run.

`decide(run_id, params, user, surface)` is triage's decision (triage.service.decide)
and, when it confirms a bug synced from a tracker that writes back, the outbox
row of a comment on that bug naming the failing test, the run and when it
failed: one transaction, so the decision and its comment stand or fall
together. The worker sends it (writeback.worker); the confirmed suggestion in
the run's answer carries the write's id (`write`, GET /api/writes/<id>).

At most one comment a bug a run (`UpstreamWrite.once`): confirming the bug for a
second cause of the same run, or again after a rejection, comments no more.
WRITEBACK_FAILURE_COMMENTS=false turns the comments off; a bug made here, or
from a source that does not write back or cannot comment, gets none, and the
decision is kept all the same.
"""

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from backlog.models import Bug
from connectors.base import Connector
from connectors.sources import connector_class
from search.service import parse
from triage import service as triage
from triage.models import Failure, Run

from . import service, worker
from .contract import LinkRequest, LinkResponse, WriteResponse
from .models import Operation, UpstreamWrite

#: Failing tests a comment names before "and N more".
TESTS_NAMED = 5


def decide(run_id: int, params: Mapping[str, Any], user, surface: str) -> tuple[dict, UpstreamWrite | None]:
    """The decision (the run's answer, as triage.service.decide answers it) and the
    comment's write it asked for, or None when it asks for none."""
    with transaction.atomic():
        answer = triage.decide(run_id, params, user)
        if params.get("decision") != "confirmed" or not settings.WRITEBACK_FAILURE_COMMENTS:
            return answer, None
        run = Run.objects.select_related("product").get(pk=run_id)
        bug = Bug.objects.get(product=run.product, key__iexact=params["bug"])
        write = _comment(run, str(params["signature"]), bug, user, surface)
        if write is not None:  # the run is still locked by triage.decide: this transaction's
            _with_write(answer, str(params["signature"]), bug.key, write.pk)
            Run.objects.filter(pk=run_id).update(answer=answer)
    return answer, write


def link(params: Mapping[str, Any], user, surface: str) -> dict:
    """`decide` for a tool that names the run among its arguments (LinkRequest): LinkResponse's JSON."""
    request = parse(LinkRequest, params)
    asked = request.model_dump(exclude={"run"})
    _, write = decide(request.run, asked, user, surface)
    shown = WriteResponse.of(write) if write is not None else None
    return LinkResponse(run=request.run, **asked, write=shown).model_dump(mode="json")


def _comment(run: Run, signature: str, bug: Bug, user, surface: str) -> UpstreamWrite | None:
    """The comment's outbox row, or None: the bug is not upstream, its source writes nothing
    back or comments not, or this run has already commented on it."""
    synced = service.synced_from(bug)
    if synced is None or not synced.source.write_back:
        return None
    if connector_class(synced.source.kind).comment is Connector.comment:
        return None
    name = user.get_full_name() or user.get_username() if getattr(user, "pk", None) else "a curator"
    tests = _tests(run, signature)
    keyed = bug.key if synced.source.kind == "jira" else None  # a Jira issue's key is the record's
    draft = {
        "key": bug.key,
        "number": synced.upstream_id,
        "upstream": worker.name(synced.source, synced.upstream_id, keyed),
        "run": run.pk,
        "test": tests[0],
        "body": _body(run, tests, name),
    }
    try:
        with transaction.atomic():
            return UpstreamWrite.objects.create(
                source=synced.source,
                product=bug.product,
                operation=Operation.COMMENT,
                draft=draft,
                requested_by=user if getattr(user, "pk", None) else None,
                surface=surface,
                once=f"failure:{bug.key}:run:{run.pk}",
            )
    except IntegrityError:  # this run has commented on this bug already (or is about to)
        return None


def _tests(run: Run, signature: str) -> list[str]:
    tests = Failure.objects.filter(run=run, signature=signature).order_by("test").values_list("test", flat=True)
    return list(tests) or ["(a test of this run)"]


def _body(run: Run, tests: list[str], name: str) -> str:
    """The comment: the failing test(s), the run and when it failed, and who linked it."""
    named = ", ".join(f"`{test}`" for test in tests[:TESTS_NAMED])
    more = f" and {len(tests) - TESTS_NAMED} more" if len(tests) > TESTS_NAMED else ""
    when = run.created_at.strftime("%Y-%m-%d %H:%M UTC")
    report = f" ({run.name})" if run.name else ""
    lead = "Failing test" if len(tests) == 1 else "Failing tests"
    return (
        f"{lead} {named}{more} in {run.product.key} run {run.pk}{report}, failed {when}.\n\n"
        f"Linked to this bug by {name} through QA Search."
    )


def _with_write(answer: dict, signature: str, key: str, write_id: int) -> None:
    """The write's id on the run's answer's confirmed suggestion."""
    for group in answer["groups"]:
        if group["signature"] == signature:
            for suggestion in group["suggestions"]:
                if suggestion["key"] == key:
                    suggestion["write"] = write_id
