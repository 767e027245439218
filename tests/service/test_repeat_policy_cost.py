"""benchmarks/repeat_policy_cost.py at a tiny size, so the script cannot rot.

Full-size numbers: ``docs/repeat_policy_cost.md``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "repeat_policy_cost.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("repeat_policy_cost", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("repeat_policy_cost", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def contest(bench):
    return bench.load_contest("512", 3)


def test_contest_subset(bench, contest):
    assert contest.n == 3 and contest.n_total > 1000
    assert contest.best == {0}  # the 0.625 caption, first in contest order
    assert abs(contest.probs.sum(axis=1) - 1).max() < 1e-12


def test_label_streams_are_paired(bench, contest):
    a, b = bench.LabelStreams(contest.probs, 7), bench.LabelStreams(contest.probs, 7)
    # interleaving other captions does not change caption 0's j-th label
    first = [a.draw(0) for _ in range(300)]
    second = []
    for _ in range(300):
        b.draw(1)
        second.append(b.draw(0))
    assert first == second


@pytest.mark.parametrize("repeats", ["never", "not_consecutive"])
def test_service_run_invariants(bench, contest, tmp_path, repeats):
    cap = 300
    r = bench.run_service(contest, repeats, 10, 0, cap, tmp_path / "run.sqlite")
    assert r["answers"] == r["n_answers_service"]
    assert 0 < r["answers"] <= cap
    assert r["consecutive_repeats"] == 0 and r["never_repeats"] == 0
    assert r["per_caption_mismatches"] == 0  # the service's per-item counts are the crowd's, by caption
    assert r["participants"] == 10 + r["exhausted"]  # every "exhausted" participant was replaced
    assert not r["stalled"] and not r["deadlocked"]
    base = bench.run_baseline(contest, 0, cap)
    assert base["answers"] <= cap and base["participants"] == 0


def test_closed_crowd(bench, contest, tmp_path):
    cap = 400
    r = bench.run_service(contest, "never", 3, 0, cap, tmp_path / "closed.sqlite", crowd="closed")
    assert r["answers"] == r["n_answers_service"] and r["per_caption_mismatches"] == 0
    assert r["consecutive_repeats"] == 0 and r["never_repeats"] == 0
    assert r["participants"] == 3  # nobody new in a closed crowd
    # the run ends by the learner stopping, the cap, or every member refused since the last answer
    assert r["stopped"] or r["answers"] == cap or r["deadlocked"]
    if r["deadlocked"]:
        assert not r["stopped"] and r["answers"] < cap and r["exhausted"] >= 3


def test_baseline_maps_the_learners_order_back_to_captions(bench, contest):
    # the service shuffles the items by seed; results are by caption: on 3 captions with a clear
    # best (0.625 against 0.5), the default learner finds caption 0
    r = bench.run_baseline(contest, 0, 200_000)
    assert r["stopped"] and r["recommended"] == 0 and not r["error"]
    assert r["on_best"] <= r["on_top2"] <= r["answers"]


def test_summary_and_page(bench, contest, tmp_path):
    runs = [bench.run_baseline(contest, s, 200) for s in (0, 1)]
    runs += [bench.run_service(contest, "never", 4, s, 200, tmp_path / f"s{s}.sqlite") for s in (0, 1)]
    rows = bench.summarize(runs, ["baseline", "never, P=4"])
    assert rows[0]["ratio"] == 1.0 and rows[1]["runs"] == 2
    text = bench.table(rows)
    assert text.count("\n") == 3 and "never, P=4" in text
    assert "participants" in bench.conclusion(rows, [], [4])
