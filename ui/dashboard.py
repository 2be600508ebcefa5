"""The dashboard's figures: records per product and kind, recent bugs, and
bugs by severity per month as a stacked bar chart drawn in inline SVG.

Counts read the search index (one row per record, one grouped query);
bugs read their own table. Every figure covers only the records the user
may see (backlog.access). The chart's geometry is computed here so the
template only places rectangles.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Max, Q
from django.db.models.functions import TruncMonth
from django.utils import timezone

from backlog.access import visible
from backlog.models import Bug, Product
from saved.models import SavedSearch
from search.contract import SearchError
from search.models import Document

SEVERITIES = ["critical", "high", "medium", "low", None]
SEVERITY_LABELS = {None: "no severity"}
CHART_MONTHS = 12
RECENT_BUGS = 10


@dataclass
class ProductCounts:
    key: str
    name: str
    feature: int = 0
    test: int = 0
    bug: int = 0
    open_bugs: int = 0


@dataclass
class SavedSummary:
    saved: SavedSearch
    new: int | None  # matches updated since the owner last opened it; None: the search failed
    error: str | None = None


def saved_searches(user) -> list[SavedSummary]:
    """The user's saved searches, each with its new matches, asked of the search as the user."""
    summaries = []
    for saved in SavedSearch.objects.filter(owner=user):
        try:
            summaries.append(SavedSummary(saved, saved.new_count()))
        except SearchError as exc:
            summaries.append(SavedSummary(saved, None, str(exc)))
    return summaries


def counts_per_product(user) -> tuple[list[ProductCounts], ProductCounts]:
    """Features, tests, bugs and open bugs of every product the user may see, and the totals."""
    products = {
        pk: ProductCounts(key, name)
        for pk, key, name in visible(Product.objects.all(), user).values_list("id", "key", "name")
    }
    total = ProductCounts("", "All products")
    rows = (
        visible(Document.objects.exclude(kind="product"), user)
        .values("product_id", "kind")
        .annotate(n=Count("id"), open=Count("id", filter=Q(status="open")))
        .order_by()
    )
    for row in rows:
        for counts in (products[row["product_id"]], total):
            setattr(counts, row["kind"], getattr(counts, row["kind"]) + row["n"])
            if row["kind"] == "bug":
                counts.open_bugs += row["open"]
    return sorted(products.values(), key=lambda p: p.key), total


def recent_bugs(user):
    return visible(Bug.objects.select_related("product"), user).order_by("-created_at", "-id")[:RECENT_BUGS]


# -- the chart ------------------------------------------------------------------------------


@dataclass
class Segment:
    severity: str
    count: int
    y: float
    height: float


@dataclass
class Bar:
    label: str
    tick: str  # under the bar: the month, with its year on the first bar and on every January
    x: float
    total: int
    segments: list[Segment] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # per severity, for the data table


@dataclass
class Chart:
    width: int
    height: int
    plot_left: int
    plot_bottom: float
    bar_width: float
    bars: list[Bar]
    ticks: list[tuple[float, int]]
    legend: list[str]
    total: int


def _month_starts(last: datetime, months: int) -> list[datetime]:
    starts = []
    year, month = last.year, last.month
    for _ in range(months):
        starts.append(last.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0))
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return starts[::-1]


def _nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5 x 10^k at or above value (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def severity_chart(user, width: int = 720, height: int = 260) -> Chart | None:
    """Bugs created per month by severity, over the CHART_MONTHS months up to the newest bug."""
    bugs = visible(Bug.objects.all(), user)
    newest = bugs.aggregate(newest=Max("created_at"))["newest"]
    if newest is None:
        return None
    months = _month_starts(timezone.localtime(newest), CHART_MONTHS)
    rows = (
        bugs.filter(created_at__gte=months[0])
        .annotate(month=TruncMonth("created_at"))
        .values("month", "severity")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {((row["month"].year, row["month"].month), row["severity"]): row["n"] for row in rows}
    totals = [sum(counts.get(((m.year, m.month), s), 0) for s in SEVERITIES) for m in months]
    step = _nice_ceiling(max(totals) / 4)  # at most five gridlines, at round numbers
    top = step * max(1, -(-max(totals) // step))
    plot_left, plot_top, plot_bottom = 48, 12, height - 28
    slot = (width - plot_left - 8) / len(months)
    scale = (plot_bottom - plot_top) / top
    bars = []
    for index, (month, total) in enumerate(zip(months, totals, strict=True)):
        tick = month.strftime("%b ’%y" if index == 0 or month.month == 1 else "%b")
        bar = Bar(month.strftime("%b %Y"), tick, x=round(plot_left + index * slot + slot * 0.15, 1), total=total)
        y = plot_bottom
        for severity in SEVERITIES:
            n = counts.get(((month.year, month.month), severity), 0)
            bar.counts.append(n)
            if n:
                y -= n * scale
                name = SEVERITY_LABELS.get(severity, severity)
                bar.segments.append(Segment(name, n, round(y, 1), round(n * scale, 1)))
        bars.append(bar)
    ticks = [(round(plot_bottom - value * scale, 1), value) for value in range(0, top + 1, step)]
    return Chart(
        width=width,
        height=height,
        plot_left=plot_left,
        plot_bottom=plot_bottom,
        bar_width=round(slot * 0.7, 1),
        bars=bars,
        ticks=ticks,
        legend=[SEVERITY_LABELS.get(s, s) for s in SEVERITIES],
        total=sum(totals),
    )
