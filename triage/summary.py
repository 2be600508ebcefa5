"""A triage as Markdown, fit for a pull request's comment or a CI job's summary.

Made from the answer itself (TriageResponse's JSON), so it says what every
surface says: the counts, then one row a cause, new ones first, each with
its verdict, its likeliest bug linked to its page and how sure, and its
failing tests; a link to the run's page. Text from the report (a cause, a
test's name) is shown as code, so no Markdown or HTML in it is rendered.
"""

from urllib.parse import quote, urlencode

from . import flaky

SHOWN_TESTS = 3  # a row names this many failing tests, then "and N more"


def markdown(answer: dict, site: str) -> str:
    """`answer` (a run's triage) as Markdown; `site`: the absolute URL links start with."""
    site = site.rstrip("/")
    counts = answer["counts"]
    groups = sorted(answer["groups"], key=lambda g: (g["verdict"] != "new", -len(g["failures"])))
    new = sum(g["verdict"] == "new" for g in groups)
    flaky_ones = sum(g["verdict"] == "flaky" for g in groups)
    run = f"{site}/triage/?{urlencode({'run': answer['run']})}"
    name = f" of {_code(answer['name'])}" if answer.get("name") else ""
    lines = [
        f"### Triage{name} for {_code(answer['product'])}: "
        f"{new} new {'cause' if new == 1 else 'causes'}, {len(groups) - new - flaky_ones} known"
        + (f", {flaky_ones} flaky" if flaky_ones else ""),
        "",
        f"{counts['failed']} of {counts['tests']} tests failed ({counts['passed']} passed, "
        f"{counts['skipped']} skipped, {counts['flaky']} flaky). [Run {answer['run']}]({run})",
        "",
    ]
    if not groups:
        return "\n".join([*lines, "No test failed."]) + "\n"
    lines += ["| verdict | cause | likeliest bug | failing tests |", "|---|---|---|---|"]
    for group in groups:
        lines.append(f"| {_verdict(group)} | {_code(group['cause'])} | {_bug(group, site)} | {_tests(group)} |")
    if answer.get("omitted"):
        lines += ["", f"{answer['omitted']} more causes left out (max_tokens); the run's page has them all."]
    return "\n".join(lines) + "\n"


def _verdict(group: dict) -> str:
    if group["verdict"] == "flaky":
        recent = next((f["recent"] for f in group["failures"] if f.get("recent")), None)
        return f"flaky ({flaky.said(recent)})" if recent else "flaky"
    return "**new**" if group["verdict"] == "new" else "known"


def _bug(group: dict, site: str) -> str:
    if not group.get("bug"):
        return "none likely"
    top = group["suggestions"][0] if group["suggestions"] else {}
    link = f"[{group['bug']}]({site}/records/{quote(group['bug'], safe='')}/)"
    if top.get("key") == group["bug"]:
        return f"{link} ({top['band']}, {top['confidence']:.2f})"
    return link


def _tests(group: dict) -> str:
    failures = group["failures"]
    shown = ", ".join(_code(f["test"]) for f in failures[:SHOWN_TESTS])
    return shown + (f" and {len(failures) - SHOWN_TESTS} more" if len(failures) > SHOWN_TESTS else "")


def _code(text: str) -> str:
    """`text` as inline code on one table row: backticks long enough, pipes escaped."""
    text = " ".join(str(text).split())[:200]
    fence = "`"
    while fence in text:
        fence += "`"
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}".replace("|", "\\|")
