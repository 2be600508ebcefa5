"""Curators' triage decisions as labels (issue 50): how the ranking does on them.

Each decision was taken on a run's cause: a confirmed one names the bug the
cause is, a rejected one a bug it is not. The cause is read again from the
run's stored answer (its draft holds the failure as printed), and ranked as
triage ranks it, without any decision applied, among the bugs of its product
filed before the run (never the future). `search_eval --from-links` prints it
(search.evaluation.labels).
"""

from search.evaluation import labels, metrics
from search.query.scope import Filters, build_scope

from . import failures, junit, matching
from .models import Decision

TOP = 5
DEPTH = 10


def _reading(decision: Decision) -> failures.Reading | None:
    """The decision's cause as triage read it, from its run's answer; None when it cannot be read
    the same again (no run kept, or the stored failure cut short of what made its signature)."""
    if decision.run is None:
        return None
    group = next((g for g in decision.run.answer.get("groups", []) if g.get("signature") == decision.signature), None)
    if group is None:
        return None
    printed = group["draft"]["description"].partition("\n\n")[2]
    failed = group["failures"][0] if group["failures"] else {}
    case = junit.Case("", "", failed.get("test", ""), "failure", message=failed.get("message", ""), text=printed)
    reading = failures.read(case)
    return reading if reading.signature == decision.signature else None


@labels.register
def decisions(products: list[str] | None) -> labels.LabelReport | None:
    chosen = Decision.objects.select_related("run", "bug", "product").order_by("decided_at", "id")
    if products:
        chosen = chosen.filter(product__key__in=products)
    confirmed, rejected, unread = [], [], 0
    ranked: dict[tuple[int, str], list[str]] = {}  # (run, signature) -> its bugs' keys: a cause ranked once
    for decision in chosen:
        cause = (decision.run_id, decision.signature)
        if cause not in ranked:
            ranked[cause] = _ranked(decision)
        if ranked[cause] is None:
            unread += 1
            continue
        judged = {decision.bug.key: 1}
        (confirmed if decision.decision == Decision.CONFIRMED else rejected).append((ranked[cause], judged))
    if not confirmed and not rejected:
        return None
    data = {
        "confirmed": len(confirmed),
        f"recall@{TOP}": _mean(confirmed, lambda keys, judged: metrics.recall_at_k(keys, judged, TOP)),
        f"mrr@{DEPTH}": _mean(confirmed, lambda keys, judged: metrics.reciprocal_rank_at_k(keys, judged, DEPTH)),
        "rejected": len(rejected),
        "rejected_first": _mean(rejected, lambda keys, judged: metrics.hit_at_k(keys, judged, 1)),
        "unread": unread,
    }
    recall, mrr = _shown(data[f"recall@{TOP}"]), _shown(data[f"mrr@{DEPTH}"])
    lines = [
        f"Triage on curators' decisions: {len(confirmed)} confirmed, {len(rejected)} rejected"
        + (f", {unread} whose cause could not be read again" if unread else ""),
        f"  confirmed bug in the top {TOP}: {recall}; MRR@{DEPTH}: {mrr}",
        f"  a rejected bug ranked first: {_shown(data['rejected_first'])}",
    ]
    return labels.LabelReport("triage decisions", lines, data)


def _ranked(decision: Decision) -> list[str] | None:
    """The keys of the bugs triage ranks for the decision's cause, best first, among its product's
    bugs filed before the run, no decision applied; None when the cause cannot be read again."""
    reading = _reading(decision)
    if reading is None:
        return None
    filters = Filters(entities=("bug",), products=(decision.product.key,), created_before=decision.run.created_at)
    return [
        match.key
        for match in matching.match({reading.signature: reading}, build_scope(filters, None))[reading.signature]
    ]


def _mean(judged: list, metric) -> float | None:
    return sum(metric(keys, grades) for keys, grades in judged) / len(judged) if judged else None


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
