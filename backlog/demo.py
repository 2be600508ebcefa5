"""Realistic, deterministic demo data for the QA knowledge search service.

``generate(records, seed)`` yields products, features, test cases and bugs as
plain dicts in the JSON-Lines interchange format (FORMAT.md), ready for
``backlog.interchange.dumps``. It feeds ``manage.py seed_demo``, the demo
database behind the UI and the import benchmarks.

The text is built from hand-written vocabularies: eight fictional products of
different types (mobile app, web apps, point of sale, maps SDK, TV app, hub
firmware, payroll API), each with its own features, screens, platforms and
environments, combined with failure modes, contexts and many sentence
templates, so that searching it feels like searching a real tracker. About 8%
of bugs are paraphrased duplicates of an earlier bug of the same feature,
linked to it by ``duplicate_of`` as a curator would (``raw_data["duplicate_of"]``
names it too, as the tracker sent it), for duplicate detection.

Output depends only on ``(records, seed)``: one ``random.Random(seed)`` drives
everything; no clock, ``hash()`` or set order is involved. It is a generator
with flat memory and runs at well over 40,000 records/s on one core.
"""

import copy
import json
import random
from bisect import bisect
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path

__all__ = ["generate"]

# --------------------------------------------------------------------------
# Time window
# --------------------------------------------------------------------------
_UTC = UTC
START = int(datetime(2024, 11, 1, tzinfo=_UTC).timestamp())
END = int(datetime(2026, 11, 15, tzinfo=_UTC).timestamp())
DAY = 86400

SEVERITIES = ("critical", "high", "medium", "low")

# --------------------------------------------------------------------------
# The vocabulary: hand-written data in demo_vocabulary.json
# --------------------------------------------------------------------------
# products: each with its features. A feature is [name, component, where,
#   object, tags, description, "act|act ~ outcome|act ~ outcome",
#   "step|step|...", expected outcome]. `where` is the screen, page or
#   endpoint; acts are imperative phrases that fit "When I {act}": the first
#   one goes with the steps and the expected outcome, the others carry their
#   own outcome after "~". Tags (money, time, list, form, sync, notify,
#   media) decide which failure modes make sense.
# contexts, platform_words and the device, browser and client lists: per
#   platform, contexts are (title phrase, reproduction step); platform_words'
#   app is what crashes or restarts, goto how the condensed steps reach
#   `where`, nav how focus moves.
# modes: the failure modes, each [name, platforms, needs one of these tags,
#   label, weight, severity weights (critical, high, medium, low), detail
#   kind, problems, expected results]. A problem is [titles, actual results]:
#   any of its titles fits any of its actual results, and a duplicate
#   re-tells the same problem in other words. Slots: act, ctx (" on a slow
#   3G connection" or ""), where, obj, objs, comp, app, nav, endpoint, cur,
#   a, b, a1, d, n, code, lang, tz, t1, t2, i18n, expect, Expect.
# The rest are description building blocks: openers, problems, expect lines,
# frequency, impact, traces and log lines by failure mode, error code prefixes.
_VOCABULARY = json.loads((Path(__file__).with_name("demo_vocabulary.json")).read_text(encoding="utf-8"))
PRODUCTS = _VOCABULARY["products"]
CONTEXTS = _VOCABULARY["contexts"]
PLATFORM_WORDS = _VOCABULARY["platform_words"]
ANDROID_DEVICES = _VOCABULARY["android_devices"]
ANDROID_VERSIONS = _VOCABULARY["android_versions"]
IOS_DEVICES = _VOCABULARY["ios_devices"]
IOS_VERSIONS = _VOCABULARY["ios_versions"]
BROWSERS = _VOCABULARY["browsers"]
WEB_ENVS = _VOCABULARY["web_envs"]
TILL_HARDWARE = _VOCABULARY["till_hardware"]
CARD_READERS = _VOCABULARY["card_readers"]
TV_DEVICES = _VOCABULARY["tv_devices"]
HUB_RADIOS = _VOCABULARY["hub_radios"]
API_CLIENTS = _VOCABULARY["api_clients"]
API_VERSIONS = _VOCABULARY["api_versions"]
REPORTERS = _VOCABULARY["reporters"]
LANGUAGES = _VOCABULARY["languages"]
TIMEZONES = _VOCABULARY["timezones"]
SLACK_CHANNELS = _VOCABULARY["slack_channels"]
MODES = _VOCABULARY["modes"]
NO_CONTEXT = _VOCABULARY["no_context"]
DETAIL_PROBLEMS = _VOCABULARY["detail_problems"]
HTTP_DETAIL = _VOCABULARY["http_detail"]
OPENERS = _VOCABULARY["openers"]
PROBLEMS = _VOCABULARY["problems"]
EXPECT_LINES = _VOCABULARY["expect_lines"]
FREQUENCY = _VOCABULARY["frequency"]
IMPACT = _VOCABULARY["impact"]
TRACES = _VOCABULARY["traces"]
LOG_LINES = _VOCABULARY["log_lines"]
CODE_PREFIX = _VOCABULARY["code_prefix"]


# --------------------------------------------------------------------------
# Preparation (once, at import)
# --------------------------------------------------------------------------
def _pick(rng, seq):
    """rng.choice, without its overhead (called about ten times a record)."""
    return seq[int(rng.random() * len(seq))]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _plural(noun: str) -> str:
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _slug(text: str, sep: str) -> str:
    return sep.join("".join(c for c in word if c.isalnum()) for word in text.lower().split())


class _Base:
    """One hand-written feature with everything derived from it."""

    def __init__(self, product: dict, spec: tuple):
        (self.name, self.comp, self.where, self.obj, tags, self.desc, acts, steps, expect) = spec
        self.tags = tags.split(",")
        pairs = [act.split(" ~ ") for act in acts.split("|")]
        self.acts = [pair[0] for pair in pairs]
        self.expects = [expect] + [pair[1] for pair in pairs[1:]]
        self.Expects = [_cap(text) for text in self.expects]
        steps = steps.split("|")
        # the written steps reproduce the first act; the others start the same way
        self.act_steps = [steps] + [steps[:1] + [_cap(act)] for act in self.acts[1:]]
        self.objs = _plural(self.obj)
        self.mod = _slug(self.obj, "_")
        self.slug = _slug(self.obj, "-")
        self.cls = "".join(word[:1].upper() + word[1:] for word in _slug(self.obj, " ").split())
        if product["plat"] == "api":
            self.endpoint, self.where = self.where, self.where.split(" ", 1)[1] + " endpoint"
        else:
            self.endpoint = f"POST /api/v2/{_plural(self.slug)}"
        weighted = []
        for i, (_, plats, needs, _, weight, *_rest) in enumerate(MODES):
            if product["plat"] in plats.split() and (not needs or any(t in self.tags for t in needs.split())):
                weighted += [i] * (weight + (2 if needs else 0))
        self.modes = tuple(weighted)
        persona = product["persona"]
        scenario = "\n\n".join(
            f"Scenario: {_cap(act)}\n  Given I am signed in as {persona}\n  When I {act}\n  Then {outcome}"
            for act, outcome in zip(self.acts[:2], self.expects[:2], strict=True)
        )
        pairs = zip(self.acts, self.expects, strict=True)
        bullets = "\n".join(
            [f"- {_cap(act)}: {outcome}" for act, outcome in pairs]
            + [
                "- Errors are shown inline and nothing is saved or charged twice",
                f"- Analytics event `{self.mod}_completed` is sent once per success",
            ]
        )
        self.criteria = (scenario, bullets)


class _Product:
    def __init__(self, index: int, spec: dict):
        self.__dict__.update(spec)
        self.key = f"PRD-{index + 1}"
        self.index = index
        self.bases = [_Base(spec, f) for f in spec["features"]]
        words = PLATFORM_WORDS[self.plat]
        for b in self.bases:  # the template slots that never change for a feature
            b.slots = {
                "where": b.where,
                "obj": b.obj,
                "objs": b.objs,
                "comp": b.comp,
                "endpoint": b.endpoint,
                "app": words["app"],
                "nav": words["nav"],
                "cur": self.cur,
                "i18n": f"{b.mod}.cta_title",
            }
        self.contexts = CONTEXTS[self.plat]
        self.goto = words["goto"]
        self.impacts = IMPACT[self.plat]
        self.pkg = _slug(self.name.split()[0], "")
        self.app_bin = self.name.replace(" ", "")
        self.code_prefix = CODE_PREFIX[self.plat]

    def fork(self) -> "_Product":
        """A copy with fresh per-run state, so that generators never share any."""
        run = copy.copy(self)
        run.created = START
        run.feats = []  # features of this product in this run
        run.core = []  # the hand-written ones, picked more often
        run.tracker_no = 1000 + 337 * self.index  # upstream tracker numbering
        run.variant_no = 0
        return run


_PRODUCTS = [_Product(i, spec) for i, spec in enumerate(PRODUCTS)]
# Mode weights, tempered towards a realistic tracker: few critical, mostly medium.
_SEV_CUM = [
    tuple(accumulate((crit * 0.8, high * 0.6, medium, low * 1.4)))
    for crit, high, medium, low in (mode[5] for mode in MODES)
]


class _Feature:
    __slots__ = ("key", "product", "base", "created", "tests", "bugs")

    def __init__(self, key, product, base, created):
        self.key, self.product, self.base, self.created = key, product, base, created
        self.tests = []  # recent (key, title, created, act index) of this feature
        self.bugs = []  # recent bug specs, the originals for duplicates


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------
_DAYS: dict[int, str] = {}  # day number -> "2026-03-14T", at most ~750 entries


def _iso(ts: int) -> str:
    """`datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")`, cached by day."""
    day, sec = divmod(ts, DAY)
    prefix = _DAYS.get(day)
    if prefix is None:
        prefix = _DAYS[day] = datetime.fromtimestamp(day * DAY, _UTC).isoformat()[:11]
    return f"{prefix}{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}+00:00"


def _lower_first(text: str) -> str:
    """Lower-case a sentence's first word to continue a sentence ("...: the app closes")."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first in ("A", "An") or first[1:].islower() else text


def _version(p: _Product, ts: int) -> str:
    """The release a product was on at `ts`: a monthly train with patches."""
    major, minor = p.ver
    months = (ts - START) // (28 * DAY)
    minor += months
    major += minor // 16
    return f"{major}.{minor % 16}.{(ts // (9 * DAY)) % 4}"


def _environment(rng, p: _Product, ver: str):
    """(environment text, stack-trace flavour, platform label)."""
    r = rng.random()
    if p.plat in ("mobile", "sdk"):
        if r < 0.55:
            dev, os_ = _pick(rng, ANDROID_DEVICES), f"Android {_pick(rng, ANDROID_VERSIONS)}"
            flavour, label = "android", "android"
        else:
            dev, os_ = _pick(rng, IOS_DEVICES), f"iOS {_pick(rng, IOS_VERSIONS)}"
            flavour, label = "ios", "ios"
        if p.plat == "sdk":
            return f"Atlasline Maps SDK {ver}, {dev}, {os_}", flavour, label
        net = ("", ", Wi-Fi", ", 4G", ", 5G")[int(r * 40) % 4]
        return f"{dev}, {os_}, app {ver}{net}", flavour, label
    if p.plat == "web":
        return f"{_pick(rng, BROWSERS)}, {_pick(rng, WEB_ENVS)}, release {ver}", "py", "web"
    if p.plat == "pos":
        return (
            (f"Till {1 + int(r * 6)} ({_pick(rng, TILL_HARDWARE)}), Counterpoint {ver}, {_pick(rng, CARD_READERS)}"),
            "dotnet",
            "pos",
        )
    if p.plat == "tv":
        return f"{_pick(rng, TV_DEVICES)}, Reelhouse {ver}", "tv", "tv"
    if p.plat == "fw":
        return (
            (
                f"Nestwise Hub H2 rev {'BCD'[int(r * 3)]}, firmware {ver}, {6 + int(r * 40)} devices paired "
                f"({_pick(rng, HUB_RADIOS)})"
            ),
            "fw",
            "firmware",
        )
    where = "sandbox" if r < 0.7 else "production"
    return (
        (
            f"Paystream API v2 (Paystream-Version {_pick(rng, API_VERSIONS)}), {where}, "
            f"client {_pick(rng, API_CLIENTS)}, build {ver}"
        ),
        "go",
        "api",
    )


def _plan(n: int):
    """How many products, features, tests and bugs make `n` records."""
    products = min(len(_PRODUCTS), n)
    rest = n - products
    features = min(rest, max(round(0.02 * n), min(3 * products, rest // 2)))
    rest -= features
    tests = min(rest // 2, round(0.25 * n))  # with very few records, bugs first
    return products, features, tests, rest - tests


def _later(rng, start: int, power: float = 0.75) -> int:
    """A time after `start`, denser towards END (recent activity)."""
    return start + int((END - start) * rng.random() ** power)


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------
def _product_record(rng, p: _Product) -> dict:
    p.created = created = START + p.index * 4 * DAY + int(rng.random() * 3 * DAY)
    return {
        "kind": "product",
        "key": p.key,
        "name": p.name,
        "description": p.desc,
        "created_at": _iso(created),
        "updated_at": _iso(END - int(rng.random() * 150 * DAY)),
    }


def _feature_record(rng, f: _Feature, variant: str | None) -> dict:
    b = f.base
    name, desc, criteria = b.name, b.desc, b.criteria[int(rng.random() * 2)]
    if variant:
        name = f"{b.name} – {variant}"
        desc = f"{b.desc} Scope of this epic: {variant}."
        criteria += f"\n- Scoped to {variant}; behaviour elsewhere is unchanged"
    updated = min(END, f.created + int(rng.random() ** 2 * 200 * DAY))
    return {
        "kind": "feature",
        "key": f.key,
        "product": f.product.key,
        "name": name,
        "description": desc,
        "acceptance_criteria": criteria,
        "created_at": _iso(f.created),
        "updated_at": _iso(updated),
    }


def _pick_act(rng, b: _Base) -> int:
    """The first act (the one with written steps) half of the time."""
    return 0 if rng.random() < 0.5 else int(rng.random() * len(b.acts))


def _test_record(rng, key: str, f: _Feature, with_feature: bool) -> dict:
    p, b = f.product, f.base
    act_i = _pick_act(rng, b)
    act, expect = b.acts[act_i], b.expects[act_i]
    ctx = _pick(rng, p.contexts) if rng.random() < 0.35 else None
    where = " " + ctx[0] if ctx else ""
    r = rng.random()
    if r < 0.55:
        title = _cap(act) + where
    elif r < 0.8:
        title = f"{b.name}: {act}{where}"
    else:
        title = f"{_cap(act)} – {_pick(rng, ('happy path', 'smoke', 'regression', 'end-to-end'))}"
    steps = [p.setup[int(rng.random() * 2)]]
    if ctx:
        steps.append(ctx[1])
    steps += b.act_steps[act_i]
    steps.append(f"Verify that {expect}")
    r = rng.random()
    if r < 0.4:
        desc = f"Verifies that a user can {act}{where} and that {expect}."
    elif r < 0.7:
        desc = f"Checks that {expect} when the user tries to {act}{where}."
    else:
        desc = f"Regression test for {b.name}. Expected outcome: {expect}."
    if rng.random() < 0.5:
        desc += f"\n\nPreconditions: signed in as {p.persona}."
    created = _later(rng, f.created)
    r = rng.random()
    status = "active" if r < 0.78 else "draft" if r < 0.9 else "archived"
    record = {
        "kind": "test",
        "key": key,
        "product": p.key,
        "title": title,
        "description": desc,
        "steps": steps,
        "status": status,
        "created_at": _iso(created),
        "updated_at": _iso(min(END, created + int(rng.random() ** 2 * 120 * DAY))),
    }
    if with_feature:
        record["feature"] = f.key
    f.tests.append((key, title, created, act_i))
    if len(f.tests) > 6:
        del f.tests[0]
    return record


def _bug_status(rng, created: int, duplicate: bool) -> tuple[str, int]:
    """(status, seconds until the last update); older bugs are more often fixed."""
    if duplicate and rng.random() < 0.8:
        return "duplicate", int(rng.random() * 10 * DAY)
    age = (END - created) / (END - START)
    r = rng.random()
    fixed = 0.12 + 0.5 * age
    if r < fixed:
        return "fixed", int((0.1 + rng.random() ** 2) * 60 * DAY)
    if r < fixed + 0.07:
        return "rejected", int(rng.random() * 20 * DAY)
    if r < fixed + 0.29:
        return "accepted", int(rng.random() * 30 * DAY)
    return "open", int(rng.random() ** 3 * 14 * DAY)


def _severity(rng, mode_i: int) -> str:
    cum = _SEV_CUM[mode_i]
    return SEVERITIES[bisect(cum, rng.random() * cum[-1])]


def _bug_record(rng, key: str, f: _Feature, orig: tuple | None, with_feature: bool, truth: dict | None) -> dict:
    """One bug; with `orig` (a spec of an earlier bug) a paraphrased duplicate of it.
    Its parts are drawn in a fixed order from `rng`: the same seed, the same bug.
    `truth`, when given, gets the failure it was made as (see generate)."""
    p, b = f.product, f.base
    if orig:
        mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, test = _duplicate_problem(rng, orig)
        with_feature = orig[9]
    else:
        mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, test = _new_problem(rng, f)
    if truth is not None:
        truth[key] = (f.key, mode_i, prob_i, act_i)
    mode = MODES[mode_i]
    titles, actuals = mode[7][prob_i]
    act = b.acts[act_i]
    ctx = p.contexts[ctx_i] if ctx_i >= 0 else None
    ver = _version(p, created)
    env, flavour, os_label = _environment(rng, p, ver)
    slots = _bug_slots(rng, f, mode, act, act_i, ctx, ver)
    title = _bug_title(rng, titles[title_i].format_map(slots), os_label, ver)
    actual = _cap(actuals[actual_i].format_map(slots))
    expected = _cap(_pick(rng, mode[8]).format_map(slots))
    slots["actual"], slots["actual_l"] = actual, _lower_first(actual)
    text = _bug_description(rng, f, test, ver, slots)
    detail = mode[6] if prob_i in DETAIL_PROBLEMS.get(mode[0], (prob_i,)) else ""
    if detail and rng.random() < 0.45:
        text += _bug_detail(rng, f, mode[0], detail, slots, flavour, created)
    steps = _bug_steps(rng, f, act, act_i, ctx, orig)
    status, settle = _bug_status(rng, created, orig is not None)
    raw = _bug_raw(rng, p, b.comp, mode[3], os_label, env, ver, steps, actual, expected)
    if orig:
        raw["duplicate_of"] = orig[0]
    _drop_a_raw_field(rng, raw)
    record = {
        "kind": "bug",
        "key": key,
        "product": p.key,
        "title": title,
        "description": text,
        "severity": severity,
        "status": status,
        "raw_data": raw,
        "created_at": _iso(created),
        "updated_at": _iso(min(END, created + settle)),
    }
    if with_feature:
        record["feature"] = f.key
    if test:
        record["test"] = test[0]
    if orig:
        record["duplicate_of"] = orig[0]
    if not orig:
        f.bugs.append((key, mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, with_feature, test))
        if len(f.bugs) > 5:
            del f.bugs[0]
    return record


def _duplicate_problem(rng, orig: tuple) -> tuple:
    """A duplicate's problem: the original's, told in other words, a little later."""
    o_key, mode_i, prob_i, o_title, o_actual, act_i, ctx_i, o_created, o_sev, with_feature, o_test = orig
    titles, actuals = MODES[mode_i][7][prob_i]
    title_i = (o_title + 1 + int(rng.random() * (len(titles) - 1))) % len(titles)
    actual_i = (o_actual + 1) % len(actuals)
    created = min(END, o_created + 3600 + int(rng.random() * 20 * DAY))
    severity = o_sev if rng.random() < 0.7 else _severity(rng, mode_i)
    test = o_test if rng.random() < 0.5 else None
    return mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, test


def _new_problem(rng, f: _Feature) -> tuple:
    """A new bug's problem: a failure mode of the feature, maybe found by one of its tests."""
    p, b = f.product, f.base
    mode_i = _pick(rng, b.modes)
    mode = MODES[mode_i]
    prob_i = int(rng.random() * len(mode[7]))
    titles, actuals = mode[7][prob_i]
    title_i, actual_i = int(rng.random() * len(titles)), int(rng.random() * len(actuals))
    act_i = _pick_act(rng, b)
    ctx_i = -1
    if rng.random() < 0.5 and mode[0] not in NO_CONTEXT:
        ctx_i = int(rng.random() * len(p.contexts))
    created = _later(rng, f.created)
    severity = _severity(rng, mode_i)
    test = None
    if f.tests and rng.random() < 0.4:
        test = f.tests[int(rng.random() * len(f.tests))]
        created = min(END, max(created, test[2] + 3600))
        if rng.random() < 0.7:
            act_i = test[3]  # found by that test, so the same scenario
    return mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, test


def _bug_slots(rng, f: _Feature, mode: tuple, act: str, act_i: int, ctx, ver: str) -> dict:
    """What the bug's sentences are filled in with: the feature's words, a count, codes, amounts."""
    p, b = f.product, f.base
    n = 2 + int(rng.random() * 7)
    slots = b.slots.copy()
    slots.update(
        act=act,
        ctx=" " + ctx[0] if ctx else "",
        n=n,
        ver=ver,
        expect=b.expects[act_i],
        Expect=b.Expects[act_i],
        code=f"{p.code_prefix}{1000 + int(rng.random() * 9000)}",
        lang=LANGUAGES[n - 2],
        tz=TIMEZONES[n % len(TIMEZONES)],
        t1=f"{n + 7:02d}:30",
        t2=f"{n + 6:02d}:30",
    )
    if "money" in mode[2]:
        a = 5 + int(rng.random() * 400) + int(rng.random() * 100) / 100
        b_amount = round(a * (0.75 + n / 50), 2)
        slots.update(a=f"{a:,.2f}", b=f"{b_amount:,.2f}", a1=f"{a + 0.01:,.2f}", d=f"{a - b_amount:,.2f}")
    return slots


def _bug_title(rng, written: str, os_label: str, ver: str) -> str:
    """The title as written, sometimes tagged as a tracker's users tag one."""
    title = _cap(written)
    r = rng.random()
    if r < 0.07 and ":" not in title:
        title = "Regression: " + title
    elif r < 0.12 and os_label in ("android", "ios"):
        title = ("[Android] " if os_label == "android" else "[iOS] ") + title
    elif r < 0.15:
        title = f"[{ver}] {title}"
    return title


def _bug_description(rng, f: _Feature, test: tuple | None, ver: str, slots: dict) -> str:
    """The description: opener, problem, expectation, frequency, impact."""
    p, b = f.product, f.base
    opener = ""
    if test and rng.random() < 0.5:
        opener = f'Found while running the test "{test[1]}" ({test[0]}).'
    elif rng.random() < 0.8:
        opener = _pick(rng, OPENERS).format(
            ticket=40000 + int(rng.random() * 60000), ver=ver, chan=_pick(rng, SLACK_CHANNELS), where=b.where
        )
    parts = [
        opener,
        _pick(rng, PROBLEMS).format_map(slots),
        _pick(rng, EXPECT_LINES).format_map(slots),
        _pick(rng, FREQUENCY).format_map(slots),
    ]
    if rng.random() < 0.45:
        parts.append(_pick(rng, p.impacts).format_map(slots))
    return " ".join(part for part in parts if part)


def _bug_detail(rng, f: _Feature, mode: str, detail: str, slots: dict, flavour: str, created: int) -> str:
    """What a reporter pastes below the description: a stack trace, a response, a log."""
    p, b, n = f.product, f.base, slots["n"]
    line = 40 + int(rng.random() * 700)
    if detail == "trace":
        trace = _pick(rng, TRACES["tv_player" if mode == "playback" else flavour])
        return "\n\nStack trace:\n" + trace.format(
            cls=b.cls, mod=b.mod, slug=b.slug, pkg=p.pkg, line=line, app_bin=p.app_bin, code=slots["code"]
        )
    if detail == "http":
        status, body = HTTP_DETAIL[mode]
        text = f"\n\nRequest: {b.endpoint}\nResponse: {status}\n" + body.format(
            rid=f"{rng.getrandbits(48):012x}", obj=b.cls
        )
        if status[0] == "5" and p.plat in ("web", "api") and rng.random() < 0.4:
            text += "\n\nServer log:\n" + _pick(rng, TRACES["py" if p.plat == "web" else "go"]).format(
                cls=b.cls, mod=b.mod, line=line
            )
        return text
    if detail == "sql":
        return (
            f"\n\nFrom the database log:\nLOG:  duration: {n * 1113}.{line} ms  statement: "
            f"SELECT * FROM {b.mod}s WHERE account_id = $1 ORDER BY created_at DESC "
            f"OFFSET {n * 500} LIMIT 50"
        )
    return "\n\nLog excerpt:\n" + _pick(rng, LOG_LINES[mode]).format(
        ts=_iso(created - 60 - line)[:19] + "Z",
        comp=b.comp,
        mod=b.mod,
        cls=b.cls,
        n=n,
        hex=f"{rng.getrandbits(32):08x}",
    )


def _bug_steps(rng, f: _Feature, act: str, act_i: int, ctx, orig: tuple | None) -> list[str]:
    """Steps: detailed (setup, context, the feature's steps) or condensed."""
    p, b = f.product, f.base
    if (rng.random() < 0.6) != bool(orig):  # a duplicate tends to the other style
        steps = [p.setup[int(rng.random() * len(p.setup))]]
        if ctx:
            steps.append(ctx[1])
        written = b.act_steps[act_i]
        steps += written[: 2 + int(rng.random() * (len(written) - 1))]
        if rng.random() < 0.4:
            steps.append(
                _pick(rng, ("Observe the result", f"Check the {b.where}", "Wait a few seconds and watch the screen"))
            )
        return steps
    return [
        p.setup[0],
        p.goto.format(where=b.where, endpoint=b.endpoint),
        _cap(act) + (" " + ctx[0] if ctx else ""),
    ]


def _bug_raw(rng, p, component: str, mode_label: str, os_label: str, env, ver, steps, actual, expected) -> dict:
    """raw_data as the tracker sends it."""
    p.tracker_no += 1
    labels = [os_label, mode_label]
    if rng.random() < 0.2:
        labels.append(_pick(rng, ("regression", "customer-reported", "needs-info", "flaky", "release-blocker")))
    return {
        "tracker_id": f"{p.prefix}-{p.tracker_no}",
        "reporter": _pick(rng, REPORTERS),
        "environment": env,
        "build": ver,
        "steps": steps,
        "actual_result": actual,
        "expected_result": expected,
        "labels": labels,
        "component": component,
    }


def _drop_a_raw_field(rng, raw: dict) -> None:
    """Now and then the tracker sent one field missing or blank."""
    if rng.random() < 0.05:
        field = ("actual_result", "expected_result", "environment")[int(rng.random() * 3)]
        if rng.random() < 0.5:
            del raw[field]
        else:
            raw[field] = ("", " ", "\n")[int(rng.random() * 3)]


# --------------------------------------------------------------------------
# The stream
# --------------------------------------------------------------------------
def generate(records: int, seed: int = 0, truth: dict | None = None) -> Iterator[dict]:
    """Yield `records` QA records (dicts in the interchange format), deterministic for `seed`.

    Products come first, then features, then tests and bugs interleaved; every
    relation names a record yielded earlier and of the same product. `truth` gets each bug's
    (feature, mode, problem, scenario): one failure, linked or not (bench/duplicate_bands.py)."""
    rng = random.Random(seed)
    n_products, n_features, n_tests, n_bugs = _plan(max(0, int(records)))
    products = [p.fork() for p in _PRODUCTS[:n_products]]
    for p in products:
        yield _product_record(rng, p)
    if not products:
        return

    # Features: the hand-written ones round-robin, then scoped variants.
    weights = list(accumulate(p.weight for p in products))
    core = [(p, p.bases[j]) for j in range(max(len(p.bases) for p in products)) for p in products if j < len(p.bases)]
    for i in range(n_features):
        if i < len(core):
            p, base = core[i]
            variant = None
            created = p.created + int(rng.random() * 120 * DAY)
        else:
            p = products[bisect(weights, rng.random() * weights[-1])]
            v = p.variant_no
            p.variant_no += 1
            base = p.bases[v % len(p.bases)]
            variant = p.scopes[(v // len(p.bases)) % len(p.scopes)]
            if v >= len(p.bases) * len(p.scopes):
                variant += f" (phase {1 + v // (len(p.bases) * len(p.scopes))})"
            created = _later(rng, p.created + 60 * DAY, 0.8) - 45 * DAY
        f = _Feature(f"FEAT-{i + 1}", p, base, created)
        p.feats.append(f)
        if variant is None:
            p.core.append(f)
        yield _feature_record(rng, f, variant)

    # Tests and bugs, interleaved in proportion to what is left of each.
    live = [p for p in products if p.feats]
    if not live:  # too few records for any feature: one per product instead
        live = products
        for p in products:
            f = _Feature(None, p, p.bases[0], p.created)
            p.feats, p.core = [f], [f]
    weights = list(accumulate(p.weight for p in live))
    tests_left, bugs_left, test_no, bug_no = n_tests, n_bugs, 0, 0
    while tests_left or bugs_left:
        p = live[bisect(weights, rng.random() * weights[-1])]
        pool = p.core if rng.random() < 0.55 else p.feats
        f = pool[int(len(pool) * rng.random() ** 1.3)]
        with_feature = f.key is not None and rng.random() < 0.94
        if rng.random() * (tests_left + bugs_left) < tests_left:
            tests_left -= 1
            test_no += 1
            yield _test_record(rng, f"TEST-{test_no}", f, with_feature)
        else:
            bugs_left -= 1
            bug_no += 1
            orig = f.bugs[int(rng.random() * len(f.bugs))] if f.bugs and rng.random() < 0.085 else None
            yield _bug_record(rng, f"BUG-{bug_no}", f, orig, with_feature, truth)
