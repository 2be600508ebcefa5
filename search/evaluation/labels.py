"""Labels kept by other apps, judged by `search_eval --from-links` beside the duplicate links.

An app that keeps a team's judgments of the ranking (triage: curators'
confirmed and rejected links of a failure's cause to a bug) registers a
source here, as a model is registered with the admin: search imports no app
above it (tests/test_design.py). A source takes the product keys asked for
(None: every product) and answers a LabelReport, or None when it has no
labels there.
"""

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class LabelReport:
    name: str  # what was judged, as the report's heading says it
    lines: list[str]  # the table, as printed
    data: dict = field(default_factory=dict)  # the figures, for --json


Source = Callable[[list[str] | None], LabelReport | None]
SOURCES: list[Source] = []


def register(source: Source) -> Source:
    if source not in SOURCES:
        SOURCES.append(source)
    return source


def reports(products: list[str] | None) -> list[LabelReport]:
    return [report for source in SOURCES if (report := source(products)) is not None]
