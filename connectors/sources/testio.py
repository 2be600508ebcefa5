"""TestIO Customer API v2 (`https://api.test.io/customer/v2`, `Authorization: Token ...`).

A TestIO product becomes our product; its exploratory tests become `test`
records (`{PRODUCT}-T{id}`) and its bugs `bug` records (`{PRODUCT}-{id}`)
that name their test and their feature (the product feature the bug was
filed against, `feature:{id}`).

TestIO has no change feed: no `updated` time, no `since` filter, no sort
option. What changed is found the way testio-mcp finds it:

- Tests: `GET /products/{id}/exploratory_tests?page=N&per_page=25`, newest
  first, page by page. An incremental sync stops after the first page that
  holds a test already synced and *settled* (see below), once every test we
  hold as still open (status `active`) has been seen again; a full sync
  (the first, or `--full`) reads every page. Every test read is written
  (an unchanged one costs nothing but the upsert).
- Bugs: `GET /bugs?filter_product_ids=P&filter_test_cycle_ids=...`, for the
  tests read that are new or not settled, 25 tests a request, paged by
  `page`/`per_page=500` (`meta.record_count`). A test is *settled* when it
  is archived or cancelled and ended more than REFRESH_DAYS (14) days ago:
  after that its bugs no longer move (customers triage within days, and
  TestIO auto-accepts after 10). `mapping.refresh_days` overrides the 14.
  The bugs of a settled test are read again only by a `--full` sync.
- The known tests are those with a SyncedRecord of this source; the open
  ones those whose record has status `active`. Nothing is kept in
  `Source.state`.
- Pages are written oldest test first, each with the bugs of its tests, so
  a sync that dies leaves only older tests written: the next incremental
  walk still reaches every newer one before it meets a settled known test.
  The checkpoint (the time the walk began) is stored only once every page
  is written; until a first sync completes, every sync is a full one.
- Deletions: the sweep lists every test (the same paging) and every bug of
  the product (`filter_product_ids`, 500 a page).

A server that ignores `page` (TestIO's staging host does: it answers the
newest 150 tests every time) is refused with a SyncError rather than read
as a short listing, which would make the sweep delete the older tests.

Mapping: severity critical/high/low as ours, the bug types `visual` and
`content` as low, `custom` left unset; status forwarded -> open, accepted,
rejected (a rejected bug TestIO flags `known` -> duplicate, with no link:
TestIO names no original). raw_data is the bug as sent, with `steps` a
list of lines and `environment` written from its devices.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from backlog.models import QATest

from ..base import Connector, FeatureRef, Mapped, Page, ProductInfo, SyncError, product_key
from ..http import Client, UpstreamError
from ..models import SyncedRecord
from . import common

PAGE_SIZE = 25  # tests a page: the API's default, and testio-mcp's
BUGS_PAGE_SIZE = 500  # the API's maximum
BATCH = 25  # tests whose bugs one request asks for
REFRESH_DAYS = 14
SETTLED_STATUSES = {"archived", "cancelled"}

SEVERITY = {
    "critical": "critical",
    "high": "high",
    "medium": "medium",
    "low": "low",
    "visual": "low",
    "content": "low",
}
STATUS = {
    "forwarded": "open",
    "new": "open",
    "accepted": "accepted",
    "rejected": "rejected",
    "known": "duplicate",  # a rejected bug flagged known
}


def now() -> datetime:
    return datetime.now(UTC)


class TestIO(Connector):
    __test__ = False  # a connector, not a pytest test class

    kind = "testio"
    token_env = "TESTIO_TOKEN"
    token_required = True
    sweep_minutes = 24 * 60  # the sweep reads every item again: daily
    sweep_is_cheap = False
    _key: str | None = None  # set by check()

    def make_client(self, user, token) -> Client:
        return Client(self.source.url, headers={"Authorization": f"Token {token}"})

    @property
    def product_id(self) -> str:
        return self.source.project.strip()

    @property
    def key(self) -> str:
        """Our product key: Source.product_key, else the TestIO product's name (read by check)."""
        if self._key is None:
            if not self.source.product_key:
                raise SyncError("the TestIO product was not read yet (check() first)")
            self._key = product_key(self.source.product_key)
        return self._key

    @property
    def refresh_days(self) -> float:
        return float(self.mapping("refresh_days", REFRESH_DAYS))

    # -- reading ---------------------------------------------------------------------------------------

    def check(self) -> ProductInfo:
        try:
            product = self.client.get_json(f"products/{self.product_id}").get("product") or {}
            if not isinstance(product, dict):
                raise UpstreamError(f"TestIO's products/{self.product_id} sent no product object")
        except UpstreamError as exc:
            if exc.status == 404:
                raise SyncError(
                    f"TestIO has no product {self.product_id!r}, or the token cannot see it ({exc})"
                ) from None
            hint = f"check the API token in {self.source.token_env or self.token_env} (TestIO: Integrations > API)"
            raise common.explain(exc, "TestIO", self.product_id, hint) from None
        name = product.get("name") or f"TestIO product {self.product_id}"
        self._key = product_key(self.source.product_key or name)
        return ProductInfo(self._key, name, product.get("description") or "")

    def test_pages(self) -> Iterator[list[dict]]:
        """Pages of the product's exploratory tests, newest first, to the end:
        an empty page. The listing has no count, and a page shorter than asked
        is not its end (a server may serve fewer than `per_page`): a deletion
        sweep trusts this listing."""
        seen: set[str] = set()
        page = 1
        while True:
            body = self.client.get_json(
                f"products/{self.product_id}/exploratory_tests", {"page": page, "per_page": PAGE_SIZE}
            )
            tests = _listed(body, "exploratory_tests")
            ids = {str(test["id"]) for test in tests}
            if len(tests) > PAGE_SIZE or (tests and ids <= seen):
                raise SyncError(
                    f"TestIO ignored page={page}&per_page={PAGE_SIZE} (it sent {len(tests)} tests"
                    f"{', all sent before' if ids <= seen else ''}); without paging not every test can be "
                    "listed: check the --url (a staging host does not page)"
                )
            seen |= ids
            if not tests:
                return
            yield tests
            page += 1

    def bug_pages(self, **filters) -> Iterator[list[dict]]:
        """Pages of the bugs matching `filters`, until one says it is the last."""
        seen: set[str] = set()
        page = 1
        while True:
            body = self.client.get_json("bugs", {**filters, "page": page, "per_page": BUGS_PAGE_SIZE})
            bugs = _listed(body, "bugs")
            ids = {str(bug["id"]) for bug in bugs}
            fresh = ids - seen
            seen |= ids
            if fresh:
                yield [bug for bug in bugs if str(bug["id"]) in fresh]
            meta = body.get("meta")
            total = meta.get("record_count") if isinstance(meta, dict) else None
            if not bugs:
                return  # an empty page: the end, as the API says it
            if not fresh:
                raise SyncError(
                    f"TestIO sent page {page} of its bugs with only bugs of the pages before: the listing "
                    "cannot be read to its end (check the --url: a staging host does not page)"
                )
            if isinstance(total, int) and not isinstance(total, bool) and len(seen) >= total:
                return  # all counted; a page shorter than asked alone is never taken for the end
            page += 1

    def changed(self, since: datetime | None) -> Iterator[Page]:
        started = now()
        full = since is None
        known = dict(SyncedRecord.objects.filter(source=self.source, kind="test").values_list("upstream_id", "key"))
        open_keys = set(
            QATest.objects.filter(
                product__key__iexact=self.key, key__in=list(known.values()), status="active"
            ).values_list("key", flat=True)
        )
        unseen_open = {upstream for upstream, key in known.items() if key in open_keys}
        cutoff = started - timedelta(days=self.refresh_days)

        tests: dict[str, dict] = {}  # newest first; a test met twice (pages shifting) once
        for page in self.test_pages():
            for test in page:
                tests.setdefault(str(test["id"]), test)
                unseen_open.discard(str(test["id"]))
            if (
                not full
                and not unseen_open
                and any(str(test["id"]) in known and _settled(test, cutoff) for test in page)
            ):
                break
        refresh = {tid for tid, test in tests.items() if full or tid not in known or not _settled(test, cutoff)}

        oldest_first = list(reversed(tests.values()))
        for start in range(0, len(oldest_first), BATCH):
            batch = oldest_first[start : start + BATCH]
            items = [{"type": "test", "test": test} for test in batch]
            wanted = {str(test["id"]): test for test in batch if str(test["id"]) in refresh}
            if wanted:
                filters = {"filter_product_ids": self.product_id, "filter_test_cycle_ids": ",".join(wanted)}
                for bugs in self.bug_pages(**filters):
                    for bug in bugs:
                        test = wanted.get(str((bug.get("test") or {}).get("id")))
                        if test is not None:  # a bug of a test not asked for waits for its own
                            items.append({"type": "bug", "bug": bug, "test": test})
            yield Page(items)
        yield Page([], started)

    def all_ids(self) -> set[tuple[str, str]]:
        ids = {("test", str(test["id"])) for page in self.test_pages() for test in page}
        for bugs in self.bug_pages(filter_product_ids=self.product_id):
            ids |= {("bug", str(bug["id"])) for bug in bugs}
        return ids

    # -- mapping ---------------------------------------------------------------------------------------

    def map(self, item: dict) -> Mapped | None:
        if item.get("type") == "test":
            return self._test(item["test"])
        if item.get("type") == "bug":
            return self._bug(item["bug"], item.get("test") or {})
        return None

    def _test(self, test: dict) -> Mapped:
        upstream = str(test["id"])
        key = f"{self.key}-T{upstream}"
        features = test.get("features") or []
        parts = [
            ("Goal", test.get("goal_text") or test.get("goal")),
            ("Instructions", test.get("instructions_text") or test.get("instructions")),
            ("Out of scope", test.get("out_of_scope_text") or test.get("out_of_scope")),
            ("Features", ", ".join(f.get("title") or "" for f in features if f.get("title"))),
        ]
        record = {
            "kind": "test",
            "key": key,
            "product": self.key,
            "title": common.title(test.get("title") or test.get("test_title"), key),
            "description": common.clip("\n\n".join(f"{label}: {text.strip()}" for label, text in parts if text)),
            "status": "archived" if test.get("status") in SETTLED_STATUSES else "active",
            "created_at": common.iso(common.utc(test.get("start_at"))),
        }
        feature = None
        if len(features) == 1:  # a test of several features belongs to none of them
            feature = _feature_ref(features[0], features[0].get("feature_id"))
        return Mapped(
            "test", upstream, common.drop_none(record), updated=common.utc(test.get("end_at")), feature=feature
        )

    def _bug(self, bug: dict, test: dict) -> Mapped:
        upstream = str(bug["id"])
        key = f"{self.key}-{upstream}"
        test_id = (bug.get("test") or {}).get("id") or test.get("id")
        raw = common.trimmed(bug)
        raw["steps"] = _steps(bug.get("steps"))
        if environment := _environment(bug.get("devices") or []):
            raw["environment"] = environment
        record = {
            "kind": "bug",
            "key": key,
            "product": self.key,
            "title": common.title(bug.get("title"), key),
            "status": self._status(bug),
            "test": f"{self.key}-T{test_id}" if test_id is not None else None,
            "created_at": common.iso(common.utc(bug.get("reported_at") or bug.get("created_at"))),
            "raw_data": raw,
        }
        severity = self.mapping("severity", SEVERITY).get(str(bug.get("severity") or "").lower())
        if severity is not None:
            record["severity"] = severity
        return Mapped("bug", upstream, common.drop_none(record), feature=_bug_feature(bug, test))

    def _status(self, bug: dict) -> str:
        table = self.mapping("status", STATUS)
        status = str(bug.get("status") or "").lower()
        if status == "rejected" and bug.get("known") and "known" in table:
            return table["known"]
        return table.get(status, "open")


def _listed(body: dict, name: str) -> list[dict]:
    """The items of a listing page, each an object with an id, or UpstreamError."""
    items = body.get(name) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("id") is not None for i in items):
        raise UpstreamError(f"TestIO sent {name} that are not a list of objects with ids")
    return items


def _settled(test: dict, cutoff: datetime) -> bool:
    """Archived or cancelled, and ended before `cutoff`: its bugs no longer change."""
    ended = common.utc(test.get("end_at"))
    return test.get("status") in SETTLED_STATUSES and ended is not None and ended < cutoff


def _feature_ref(feature: dict, upstream_id) -> FeatureRef:
    return FeatureRef(
        f"feature:{upstream_id if upstream_id is not None else feature.get('id')}",
        feature.get("title") or "feature",
        feature.get("description") or "",
    )


def _bug_feature(bug: dict, test: dict) -> FeatureRef | None:
    """The product feature of a bug: its `feature`, else its `test_feature` (a
    feature of its test, whose `feature_id` is the product feature's id)."""
    feature = bug.get("feature")
    if isinstance(feature, dict) and feature.get("id") is not None and feature.get("title"):
        return _feature_ref(feature, feature["id"])
    test_feature = (bug.get("test_feature") or {}).get("id")
    for candidate in test.get("features") or []:
        if test_feature is not None and str(candidate.get("id")) == str(test_feature):
            return _feature_ref(candidate, candidate.get("feature_id"))
    return None


def _steps(value) -> list[str]:
    """Steps as lines: testio-mcp sees a list of strings, the docs show one string."""
    if isinstance(value, list):
        return [" ".join(str(step).split()) for step in value if str(step).strip()]
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def _environment(devices: list[dict]) -> str:
    """'Samsung Galaxy S23, Android 14 (Smartphones)', one device a line."""
    lines = []
    for device in devices:
        model = device.get("device") or device.get("devices") or {}
        name = " ".join(
            part
            for part in (
                (device.get("vendor") or {}).get("name"),
                model.get("name") if isinstance(model, dict) else None,
            )
            if part
        )
        system = device.get("operating_system") or {}
        system_name = " ".join(str(p) for p in (system.get("name"), system.get("version")) if p)
        browsers = ", ".join(b.get("name") for b in device.get("browsers") or [] if b.get("name"))
        line = ", ".join(part for part in (name, system_name, browsers) if part)
        category = (device.get("category") or {}).get("name")
        if category:
            line = f"{line} ({category})" if line else category
        if line:
            lines.append(line)
    return "\n".join(lines)
