"""Pasted stack traces and log excerpts are queries too (search.query.traces).

The story: Hadoop's SequenceFile reader dies on a corrupt file with
NegativeArraySizeException: -4096 (BUG-1). Erin, a tester, pastes the
trace from her console into search, from a build where the code has moved
since BUG-1 was filed. BUG-2, an unrelated crash of the same job, was
pasted with the whole trace, down to the runner frames every job shares.
Tramline's renewal bug stands for the records that hold no trace at all.

On Android, Tramline's renewal screen crashes with a NullPointerException
(BUG-41), filed with the frames of Tramline's own code. Wayfinder, another
team's map app, has a crash in its MapView (BUG-51) whose trace runs through
the same framework frames (android.view.View's click handling, the main
looper), as every tap in every Android app does. Dana pastes the renewal
crash from her phone's log: Tramline's frame on top, Android's below.
"""

from urllib.parse import urlencode

import pytest
from pydantic import ValidationError

from backlog.imports import import_records
from mcp_bridge import server
from saved.models import SavedSearch
from search import service
from search.contract import SearchError, SearchRequest
from search.indexing.vectors import embed_pending
from search.operations.search import search
from search.query import traces
from search.ranking import fusion

from .conftest import TRAMLINE, jsonl

pytestmark = pytest.mark.django_db

RUNNER = """\tat org.apache.hadoop.mapred.MapTask$TrackedRecordReader.moveToNext(MapTask.java:213)
\tat org.apache.hadoop.mapred.MapTask$TrackedRecordReader.next(MapTask.java:199)
\tat org.apache.hadoop.mapred.MapRunner.run(MapRunner.java:54)
\tat org.apache.hadoop.mapred.MapTask.runOldMapper(MapTask.java:465)
\tat org.apache.hadoop.mapred.MapTask.run(MapTask.java:349)
\tat org.apache.hadoop.mapred.YarnChild$2.run(YarnChild.java:174)
\tat java.security.AccessController.doPrivileged(Native Method)
\tat javax.security.auth.Subject.doAs(Subject.java:422)
\tat org.apache.hadoop.security.UserGroupInformation.doAs(UserGroupInformation.java:1893)
\tat org.apache.hadoop.mapred.YarnChild.main(YarnChild.java:168)"""

CORRUPT_FILE = """java.lang.NegativeArraySizeException: -4096
\tat org.apache.hadoop.io.Text.readString(Text.java:470)
\tat org.apache.hadoop.io.SequenceFile$Reader.readRecordLength(SequenceFile.java:2571)
\tat org.apache.hadoop.io.SequenceFile$Reader.next(SequenceFile.java:2602)
\tat org.apache.hadoop.mapred.SequenceFileRecordReader.next(SequenceFileRecordReader.java:80)
"""

# Erin's console: the same fault seven lines further down every file, her log line before it, and the runner below.
ERINS_TRACE = (
    '2026-05-04 10:12:09,481 WARN [main] mapred.YarnChild: Exception running child : "corrupt" or truncated input\n'
    + CORRUPT_FILE.replace("470)", "477)").replace("2571)", "2578)").replace("2602)", "2609)").replace("80)", "87)")
    + RUNNER
)

HADOOP = [
    {"kind": "product", "key": "HDP", "name": "Hadoop"},
    {
        "kind": "bug",
        "key": "BUG-1",
        "product": "HDP",
        "title": "Reading a corrupt sequence file fails",
        "description": "The job dies on the first bad record:\n" + CORRUPT_FILE,
    },
    {
        "kind": "bug",
        "key": "BUG-2",
        "product": "HDP",
        "title": "Shuffle fails when a map output is missing",
        "description": "java.io.FileNotFoundException: output/file.out.index does not exist, 477 of 2578 maps\n"
        "\tat org.apache.hadoop.mapred.ShuffleHandler.getMapOutputInfo(ShuffleHandler.java:87)\n"
        "\tat org.apache.hadoop.mapred.ShuffleHandler.sendMapOutput(ShuffleHandler.java:2609)\n" + RUNNER,
    },
]


# Android's frames under every tap's handler, in any app.
ANDROID_CLICK = """\tat android.view.View.performClick(View.java:7448)
\tat android.view.View.performClickInternal(View.java:7425)
\tat android.view.View.access$3600(View.java:810)
\tat android.view.View$PerformClick.run(View.java:28305)
\tat android.os.Handler.handleCallback(Handler.java:938)
\tat android.os.Handler.dispatchMessage(Handler.java:99)
\tat android.os.Looper.loop(Looper.java:223)
\tat android.app.ActivityThread.main(ActivityThread.java:7656)
\tat java.lang.reflect.Method.invoke(Native Method)
\tat com.android.internal.os.ZygoteInit.main(ZygoteInit.java:947)"""

TWO_APPS = [
    {
        "kind": "bug",
        "key": "BUG-41",
        "product": "PRD-1",
        "title": "Renew closes the app when no card is saved",
        "description": "Tapping Renew with no saved card crashes:\njava.lang.NullPointerException\n"
        "\tat com.tramline.renewal.RenewalActivity.onRenewClicked(RenewalActivity.kt:81)\n"
        "\tat com.tramline.renewal.RenewalActivity.access$onRenewClicked(RenewalActivity.kt:24)",
    },
    {"kind": "product", "key": "PRD-3", "name": "Wayfinder", "description": "Maps for hikers"},
    {
        "kind": "bug",
        "key": "BUG-51",
        "product": "PRD-3",
        "title": "MapView throws IllegalStateException when a pin is tapped twice",
        "description": "java.lang.IllegalStateException: marker already removed\n"
        "\tat com.wayfinder.map.MapView.onPinTapped(MapView.kt:212)\n" + ANDROID_CLICK,
    },
]

# Dana's log: Tramline's renewal crash, Tramline's frame on top and Android's under it.
RENEWAL_CRASH = (
    "java.lang.NullPointerException\n"
    "\tat com.tramline.renewal.RenewalActivity.onRenewClicked(RenewalActivity.kt:88)\n" + ANDROID_CLICK
)


@pytest.fixture
def hadoop(db):
    report = import_records(jsonl(*TRAMLINE, *HADOOP).splitlines())
    assert report.written and not report.problems, report.problems
    embed_pending()


def keys(response) -> list[str]:
    return [hit.key for hit in response.results]


# -- what is a trace ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pasted, words",
    [
        (
            "java.lang.IllegalStateException: pool closed\n"
            "\tat org.a.Pool.take(Pool.java:12)\n\tat org.a.Worker.run(Worker.java:40)\n"
            "Caused by: java.io.IOException: Broken pipe\n\tat org.a.Conn.write(Conn.java:7)",
            "java.lang.IllegalStateException java.io.IOException pool closed Broken pipe "
            "Pool take Worker run Conn write",
        ),
        (
            "ENOENT: No such file or directory at org.a.NativeIO$POSIX.chmodImpl(Native Method) "
            "at org.a.NativeIO$POSIX.chmod(NativeIO.java:382)",  # flattened onto one line, as Jira shows it
            "ENOENT No such file or directory NativeIO$POSIX chmodImpl chmod",
        ),
        (
            'Traceback (most recent call last):\n  File "/app/shop/views.py", line 3, in checkout\n'
            '    total = cart.total()\n  File "/app/shop/cart.py", line 40, in total\n'
            "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
            "TypeError unsupported operand type s for int and NoneType cart total views checkout",
        ),
        (
            'Checkout crashed: Traceback (most recent call last): File "/app/shop/views.py", line 3, in checkout '
            'total = cart.total() File "/app/shop/cart.py", line 40, in total '
            "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",  # flattened, as Jira shows it
            "TypeError unsupported operand type s for int and NoneType cart total views checkout",
        ),
        (
            "TypeError: Cannot read properties of undefined (reading 'map')\n"
            "    at renderList (webpack:///src/components/List.jsx:12:15)\n"
            "    at Object.<anonymous> (/app/index.js:5:1)",
            "TypeError Cannot read properties of undefined reading map List renderList index Object",
        ),
        (
            "renderList@http://localhost:3000/static/js/List.js:12:15\nApp@http://localhost:3000/static/js/App.js:5:1",
            "List renderList App",
        ),
        (
            "System.NullReferenceException: Object reference not set to an instance of an object.\n"
            "   at Shop.Cart.Total() in C:\\src\\Shop\\Cart.cs:line 40\n"
            "   at Shop.Checkout.Run(Int32 id) in C:\\src\\Shop\\Checkout.cs:line 12",
            "System.NullReferenceException Object reference not set to an instance of object Cart Total Checkout Run",
        ),
        (
            "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\n"
            "main.(*Server).handle(0xc000010000, {0x0, 0x0})\n\t/home/u/app/server.go:12 +0x1d\n"
            "main.main()\n\t/home/u/app/main.go:8 +0x25",
            "runtime error index out of range 5 with length 3 Server handle main",
        ),
        (
            'java.lang.NegativeArraySizeException: -4096 "corrupt or truncated at 0x7f3a',  # no frame: all message
            "java.lang.NegativeArraySizeException 4096 corrupt or truncated at",
        ),
    ],
    ids=[
        "java",
        "java-flattened",
        "python",
        "python-flattened",
        "javascript-v8",
        "javascript-gecko",
        "dotnet",
        "go",
        "exception-alone",
    ],
)
def test_a_trace_is_read_as_its_exception_message_and_top_frames(pasted, words):
    """Line numbers, files' folders, offsets and addresses are gone; Python's top frames are its last;
    an exception pasted with its message and without frames is read as one too."""
    assert traces.read(pasted).text == words


@pytest.mark.parametrize(
    "query",
    [
        "org.apache.hadoop.fs.s3a.S3AFileSystem",  # a dotted name
        "HADOOP-13286285",  # a key
        "https://example.com/static/app.js:10:5",  # a URL with a position
        "at org.apache.hadoop.io.Text.readString()",  # one frame line, nothing else
        "at org.apache.hadoop.io.Text.readString(Text.java:470)",  # one real frame, no exception
        "java.lang.NullPointerException",  # an exception line, no frame
        "throws NullPointerException",  # a type, but no message
        "NullPointerException -android",
        "Error: payment failed",  # a message, but no type
        "NullPointerException in checkout",
        "see Text.java:470 and SequenceFile.java:2571",
        "at home.page (after login) the app crashes",
        'File "a.py", line 3',
        "alice@example.com",
        '-status:fixed crash or freeze "payment sheet"',
    ],
)
def test_near_misses_are_no_traces(query):
    assert traces.read(query) is None


def test_the_top_frames_are_kept_and_the_rest_left_to_the_runner():
    read = traces.read(ERINS_TRACE)

    assert read.frames == (
        "Text readString",
        "SequenceFile$Reader readRecordLength",
        "SequenceFile$Reader next",
        "SequenceFileRecordReader next",
        "MapTask$TrackedRecordReader moveToNext",
    )
    assert read.exceptions == ("java.lang.NegativeArraySizeException",) and read.message == ("4096",)
    assert "YarnChild" not in read.text and "477" not in read.text  # nor the log line, nor the line numbers


# -- searching by a trace -------------------------------------------------------------------------


def test_a_trace_with_a_negative_number_quotes_and_or_finds_its_bug(hadoop):
    """As syntax, `-4096` would leave BUG-1 out, the quote and `or` would be a phrase and
    either-word, and `status:503` a filter on a status no record can have."""
    pasted = 'java.lang.NegativeArraySizeException: -4096 status:503 "corrupt or\n' + CORRUPT_FILE

    response = search(SearchRequest(query=pasted, mode="keyword"))

    assert keys(response)[0] == "BUG-1"
    assert response.trace.startswith("java.lang.NegativeArraySizeException 4096 status 503 corrupt or Text readString")
    assert response.filters is None


def test_a_trace_from_moved_code_ranks_its_bug_over_one_sharing_only_the_runner(hadoop):
    """BUG-2 shares the eight runner frames under the fault, and line numbers that
    happen to be Erin's; BUG-1 shares the frames at the top, where the fault is."""
    for mode in ("keyword", "hybrid"):
        ranked = keys(search(SearchRequest(query=ERINS_TRACE, mode=mode)))

        assert ranked.index("BUG-1") < ranked.index("BUG-2"), mode
        assert ranked[0] == "BUG-1", mode


def test_the_app_s_own_frame_outweighs_framework_frames_another_product_shares(db):
    """BUG-51 shares four of Android's frames with Dana's trace, BUG-41 only the exception
    and Tramline's one frame: the platform's frames are in every Android app's traces,
    Tramline's own frame is where its fault is."""
    report = import_records(jsonl(*TRAMLINE, *TWO_APPS).splitlines())
    assert report.written and not report.problems, report.problems
    embed_pending()
    read = traces.read(RENEWAL_CRASH)
    assert read.frames[0] == "RenewalActivity onRenewClicked"
    assert read.platform == read.frames[1:]

    for mode in ("keyword", "hybrid"):
        ranked = keys(search(SearchRequest(query=RENEWAL_CRASH, mode=mode)))

        assert ranked[0] == "BUG-41", (mode, ranked)
        assert ranked.index("BUG-41") < ranked.index("BUG-51"), mode


@pytest.mark.parametrize(
    "pasted, platform",
    [
        (
            RENEWAL_CRASH,
            {"View performClick", "View performClickInternal", "View access$3600", "View$PerformClick run"},
        ),
        (
            'Traceback (most recent call last):\n  File "/app/shop/views.py", line 3, in checkout\n'
            '  File "/usr/lib/python3.12/json/__init__.py", line 346, in loads\n'
            '  File "/srv/venv/lib/python3.12/site-packages/_pytest/python.py", line 9, in pytest_pyfunc_call\n'
            "json.decoder.JSONDecodeError: Expecting value",
            {"__init__ loads", "python pytest_pyfunc_call"},
        ),
        (
            "TypeError: x is undefined\n    at render (/app/src/List.js:12:15)\n"
            "    at Array.map (<anonymous>)\n    at dispatch (/app/node_modules/react-dom/index.js:5:1)\n"
            "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
            {"Array map", "index dispatch", "task_queues process processTicksAndRejections"},
        ),
        (
            "System.NullReferenceException: Object reference not set\n"
            "   at Shop.Cart.Total() in C:\\src\\Shop\\Cart.cs:line 40\n"
            "   at System.Linq.Enumerable.Sum(IEnumerable`1 source)\n"
            "   at Microsoft.AspNetCore.Mvc.Infrastructure.ActionMethodExecutor.Execute()",
            {"Enumerable Sum", "ActionMethodExecutor Execute"},
        ),
        (
            "panic: boom\n\ngoroutine 1 [running]:\nruntime.gopanic(0x1)\n\t/usr/go/src/runtime/panic.go:12 +0x1d\n"
            "github.com/acme/shop.(*Cart).Total()\n\t/src/cart.go:8 +0x25\n"
            "testing.tRunner(0xc000)\n\t/usr/go/src/testing/testing.go:1 +0x2",
            {"runtime gopanic", "testing tRunner"},
        ),
    ],
    ids=["android", "python", "javascript", "dotnet", "go"],
)
def test_the_platform_s_frames_are_told_from_the_application_s(pasted, platform):
    """Told by where a frame's code lives (its package, file or module path); a word only
    the platform's frames hold weighs less, the application's frames and the exception as before."""
    read = traces.read(pasted)

    assert set(read.platform) == platform, read.frames
    weights = read.weights(platform=0.5)
    own = [w for frame in read.frames if frame not in platform for w in frame.split()]
    assert all(weights[word] == 1.0 for word in own + [w for e in read.exceptions for w in e.split()])
    assert {word for word, weight in weights.items() if weight == 0.5} == {
        w for frame in platform for w in frame.split() if w not in own
    }


def test_the_first_application_frame_is_read_below_the_platform_s_top_five():
    """Where the application's code starts is where it went wrong, however deep in the platform."""
    pasted = (
        "java.lang.IllegalStateException: closed\n"
        + "".join(
            f"\tat java.util.concurrent.ThreadPoolExecutor.step{i}(ThreadPoolExecutor.java:{i})\n" for i in range(7)
        )
        + "\tat com.tramline.sync.Uploader.flush(Uploader.kt:12)\n\tat com.tramline.sync.Uploader.run(Uploader.kt:9)"
    )

    read = traces.read(pasted)

    assert read.frames[-1] == "Uploader flush" and len(read.frames) == traces.FRAMES + 1
    assert "Uploader run" not in read.frames and read.weights(platform=0.5)["Uploader"] == 1.0


def test_in_hybrid_meaning_votes_a_trace_s_semantic_weight(hadoop):
    response = search(SearchRequest(query=CORRUPT_FILE, include_scores=True))

    assert response.mode == "hybrid" and keys(response)[0] == "BUG-1"
    assert all(hit.scores.boosts["semantic_weight"] == fusion.TRACE_SEMANTIC_WEIGHT for hit in response.results)


def test_a_normal_query_keeps_its_syntax_and_its_limit(hadoop):
    response = search(SearchRequest(query="corrupt -shuffle", mode="keyword"))

    assert keys(response) == ["BUG-1"] and response.trace is None
    with pytest.raises(ValidationError, match="2 to 500 characters after trimming spaces, or up to 20,000"):
        SearchRequest(query="corrupt " * 70)


def test_a_long_trace_is_accepted_over_rest_and_mcp_alike(hadoop, reader, monkeypatch):
    assert len(ERINS_TRACE) > 500
    monkeypatch.setattr(server, "close_old_connections", lambda: None)  # the test's own transaction

    response = reader.get(f"/api/search?{urlencode({'query': ERINS_TRACE, 'mode': 'keyword'})}")
    body, failed = server.answer("search", {"query": ERINS_TRACE, "mode": "keyword"}, lambda: None)

    assert response.status_code == 200, response.json()
    assert not failed and body == response.json()
    assert body["results"][0]["key"] == "BUG-1" and body["query"] == ERINS_TRACE
    assert body["trace"] == traces.read(ERINS_TRACE).text
    too_long = ERINS_TRACE * (20_000 // len(ERINS_TRACE) + 1)
    with pytest.raises(ValidationError, match=f"up to 20,000 for a pasted stack trace; got {len(too_long):,}"):
        SearchRequest(query=too_long)


# -- a trace in a draft's text ----------------------------------------------------------------------


def test_a_draft_s_trace_is_read_as_its_top_frames_and_the_prose_stays():
    draft = "The job dies on start.\n" + ERINS_TRACE + "\nSeen since the upgrade."

    condensed = traces.condensed(draft)

    assert condensed.startswith("The job dies on start.\n2026-05-04 10:12:09,481 WARN")
    assert condensed.endswith("Seen since the upgrade.")
    assert "Text readString\nSequenceFile$Reader readRecordLength" in condensed
    assert "477" not in condensed and "YarnChild.main" not in condensed and "YarnChild$2" not in condensed
    assert traces.condensed("Renewal fails at checkout.\nat home.page") == "Renewal fails at checkout.\nat home.page"


def test_check_duplicates_with_a_pasted_trace_puts_the_bug_of_its_top_frames_first(hadoop):
    body = service.call(
        "check_duplicates",
        {"title": "Nightly import job aborted", "description": ERINS_TRACE, "mode": "keyword", "detail": "full"},
        None,
    )

    assert [hit["key"] for hit in body["results"]][:2] == ["BUG-1", "BUG-2"]
    assert "readstring" in body["results"][0]["why"]["shared_words"]


def test_a_saved_search_refuses_a_trace_longer_than_it_keeps(hadoop, bob):
    """A saved search keeps 500 characters: a longer trace is refused with a message, never cut or a server error."""
    short = SavedSearch.from_params({"query": CORRUPT_FILE}, owner=bob, name="corrupt")

    with pytest.raises(SearchError, match="keeps at most 500 characters, and this pasted stack trace has 1,"):
        SavedSearch.from_params({"query": ERINS_TRACE}, owner=bob, name="erin")
    assert short.query == CORRUPT_FILE.strip()
