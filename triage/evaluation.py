"""Curators' triage decisions as labels (issue 50): how the ranking does on them.

Each decision was taken on a run's cause: a confirmed one names the bug the
cause is, a rejected one a bug it is not. The cause is read again from the
run's stored answer (its draft holds the failure as printed), and ranked as
triage ranks it, without any decision applied, among the bugs of its product
filed before the run (never the future). `search_eval --from-links` prints it
(search.evaluation.labels).
"""

from search.evaluation import labels
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
    for decision in chosen:
        reading = _reading(decision)
        if reading is None:
            unread += 1
            continue
        filters = Filters(entities=("bug",), products=(decision.product.key,), created_before=decision.run.created_at)
        ranked = matching.match({reading.signature: reading}, build_scope(filters, None))[reading.signature]
        keys = [match.key for match in ranked][:DEPTH]
        rank = keys.index(decision.bug.key) + 1 if decision.bug.key in keys else None
        (confirmed if decision.decision == Decision.CONFIRMED else rejected).append(rank)
    if not confirmed and not rejected:
        return None
    data = {
        "confirmed": len(confirmed),
        f"recall@{TOP}": _share(confirmed, lambda rank: rank is not None and rank <= TOP),
        f"mrr@{DEPTH}": sum(1 / rank for rank in confirmed if rank) / len(confirmed) if confirmed else None,
        "rejected": len(rejected),
        "rejected_first": _share(rejected, lambda rank: rank == 1),
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


def _share(ranks: list, hit) -> float | None:
    return sum(1 for rank in ranks if hit(rank)) / len(ranks) if ranks else None


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
