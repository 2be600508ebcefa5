"""Filters that turn the contract's JSON into escaped HTML."""

import json
import re

from django import template
from django.utils.dateparse import parse_datetime
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from search.indexing.health import coverage_text

register = template.Library()


@register.filter
def highlight(snippet: dict | None) -> str:
    """The snippet's text with its highlight offsets wrapped in <mark>.

    The text is sliced at the offsets and every slice escaped on its own, so
    record text can never become markup, whatever it contains.
    """
    if not snippet:
        return ""
    text, parts, position = snippet["text"], [], 0
    for span in sorted(snippet["highlights"], key=lambda h: h["start"]):
        start, end = max(span["start"], position), min(span["end"], len(text))
        if start >= end:
            continue
        parts.append(conditional_escape(text[position:start]))
        parts.append(f"<mark>{conditional_escape(text[start:end])}</mark>")
        position = end
    parts.append(conditional_escape(text[position:]))
    return mark_safe("".join(parts))


@register.filter
def when(value: str | None):
    """The contract's ISO 8601 text as a datetime, for the |date filter."""
    return parse_datetime(value) if value else None


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def humanize_field(name: str) -> str:
    return name.replace("_", " ").capitalize()


@register.filter
def percent(value: float) -> str:
    """A coverage (0-1) as /readyz writes it."""
    return coverage_text(value)


@register.filter
def is_list(value) -> bool:
    return isinstance(value, list)


_STEP_MARKER = re.compile(r"^\s*(?:(?:step\s*)?\d+\s*[.):-]|[-*\u2022])\s+", re.IGNORECASE)


@register.filter
def as_steps(value) -> list[str]:
    """A bug's steps, written as text, one step a line: the lines without the
    numbers or bullets they were typed with (the page numbers them again).
    Blank lines are dropped; one line is one step."""
    if isinstance(value, list):
        return [str(item) for item in value]
    return [_STEP_MARKER.sub("", line).strip() for line in str(value).splitlines() if line.strip()]
