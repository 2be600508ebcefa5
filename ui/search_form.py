"""The search form's state, from the URL and the contract's response.

The URL is the state: its parameters are the contract's own (the REST API's
and the MCP tools' names), so a search is a link. The form shows the facets
as checkboxes named like those parameters and carries every other contract
parameter it has no control for (feature, dates, limit, ...) as hidden
inputs, so a refined search keeps them. `cursor` is never carried: any
change starts again at the first page.
"""

import re
from dataclasses import dataclass, field

from backlog.access import visible
from backlog.models import Product
from search.contract import SearchRequest

# facet name in the response -> parameter name in the request, and its label
FACETS = {
    "kind": ("entities", "Kind"),
    "product": ("products", "Product"),
    "status": ("status", "Status"),
    "severity": ("severity", "Severity"),
}
FACET_OPTIONS_MAX = 12
# correct=false ("search instead for") is for the words it was offered on: the form's next change drops it.
CONTROLLED = {"query", "sort", "mode", "cursor", "correct", *(param for param, _ in FACETS.values())}


@dataclass
class Option:
    value: str
    label: str
    count: int | None
    checked: bool


@dataclass
class FacetGroup:
    param: str
    label: str
    options: list[Option] = field(default_factory=list)


def selected(params, name: str) -> list[str]:
    """A list parameter's values, given repeated or comma-separated (as the service reads them)."""
    return [part.strip() for value in params.getlist(name) for part in value.split(",") if part.strip()]


def facet_groups(params, facets: dict | None, user) -> list[FacetGroup]:
    """Each facet's values with their counts; chosen values stay listed even when nothing matches them.
    Products are named only when the user may see them."""
    names = dict(visible(Product.objects.all(), user).values_list("key", "name"))
    groups = []
    for facet, (param, label) in FACETS.items():
        chosen = selected(params, param)
        counts = {item["value"]: item["count"] for item in (facets or {}).get(facet, [])[:FACET_OPTIONS_MAX]}
        values = list(counts) + [value for value in chosen if value not in counts]
        group = FacetGroup(param, label)
        for value in values:
            text = f"{names[value]} ({value})" if facet == "product" and value in names else value
            group.options.append(Option(value, text, counts.get(value, 0 if facets else None), value in chosen))
        if group.options:
            groups.append(group)
    return groups


@dataclass
class Chip:
    """A field the query holds (severity:critical): shown as a filter, removed by taking it out of the query."""

    token: str
    query: str  # the query without it
    detail: str  # what it resolved to, when that says more than the token (a product's key, a date)


def chips(query: str, filters: list[dict] | None) -> list[Chip]:
    """One chip a field of the query (the response's `filters`; a date's two bounds make one chip)."""
    found: dict[str, list[dict]] = {}
    for item in filters or []:
        found.setdefault(item["token"], []).append(item)
    shown = []
    for token, items in found.items():
        without = re.sub(rf"(?<!\S){re.escape(token)}(?!\S)", " ", query)
        shown.append(Chip(token, " ".join(without.split()), _detail(token, items)))
    return shown


def _detail(token: str, items: list[dict]) -> str:
    parts = []
    for item in items:
        values = ", ".join(item["values"])
        if item["param"].endswith(("_after", "_before")):
            parts.append(f"{item['param'].split('_')[1]} {values.replace('T', ' ').removesuffix('Z')} UTC")
        elif not all(value.lower() in token.lower() for value in item["values"]):
            parts.append(values)
    return "; ".join(parts)


def carried(params) -> list[tuple[str, str]]:
    """Contract parameters the form has no control for, as (name, value) pairs for hidden inputs."""
    return [
        (name, value)
        for name, values in params.lists()
        if name in SearchRequest.model_fields and name not in CONTROLLED
        for value in values
    ]
