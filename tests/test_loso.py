"""bench/loso.py: a setting is chosen on the other sets and judged on the one left out."""

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import loso  # noqa: E402


def lab(tmp_path, name, scores):
    """A set folder and ranking_lab's --json for it: variant -> query -> nDCG@10 (hybrid)."""
    folder = tmp_path / name
    folder.mkdir()
    results = tmp_path / f"{name}.json"
    results.write_text(json.dumps({variant: {"hybrid": queries} for variant, queries in scores.items()}))
    return f"{folder}={results}"


def test_the_held_out_choice_comes_from_the_other_sets(tmp_path):
    sets = loso.load(
        [
            lab(tmp_path, "a", {"base": {"q1": 0.5, "q2": 0.5}, "x": {"q1": 0.6, "q2": 0.6}}),
            lab(tmp_path, "b", {"base": {"q1": 0.5}, "x": {"q1": 0.7}}),
            lab(tmp_path, "c", {"base": {"q1": 0.5}, "x": {"q1": 0.4}}),
        ],
        "hybrid",
    )
    report = loso.leave_one_out(sets)
    assert report["c"] == {"baseline": "base", "held_out": "x", "fitted": "base"}  # x wins on a and b
    assert report["a"]["held_out"] == "x"  # b's +0.2 outweighs c's -0.1


def test_a_set_the_setting_cannot_act_on_is_reported_and_not_counted(tmp_path, monkeypatch, capsys):
    pairs = [
        lab(tmp_path, "dated", {"base": {"q1": 0.5}, "x": {"q1": 0.6}}),
        lab(tmp_path, "undated", {"base": {"q1": 0.3}, "x": {"q1": 0.3}}),
    ]
    monkeypatch.setattr(sys, "argv", ["loso.py", "--grid", "base,x", *pairs])
    loso.main()
    out = capsys.readouterr().out
    assert "undated: every variant ranks every query alike" in out
    assert out.rstrip().endswith("kept: held-out gain positive on every set it acts on")

    pairs[1] = lab(tmp_path, "worse", {"base": {"q1": 0.3}, "x": {"q1": 0.2}})
    monkeypatch.setattr(sys, "argv", ["loso.py", "--grid", "base,x", *pairs])
    loso.main()
    assert capsys.readouterr().out.rstrip().endswith("not kept: a held-out gain is not positive")
