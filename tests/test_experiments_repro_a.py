"""Reproduction modules of issue 5 (JMNB14 Figs. 2-3, JLQ17 Figs. 1-2, caption contests)."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.experiments import caption_extra, jlq17, jlq17_fig1, jmnb14_fig2
from purebandits.instances import caption


@pytest.mark.slow  # a reproduction run twice, with one and two processes
def test_caption_extra_csv_identical_for_jobs_1_and_2(tmp_path):
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        assert main(["reproduce", "caption_extra", "--scale", "quick", "--out", str(out), "--no-progress",
                     "--jobs", jobs]) == 0
        outs.append((out / "caption_extra.csv").read_bytes())
    assert outs[0] == outs[1]


def test_top_m_contest_keeps_the_best_captions_with_their_vote_distributions():
    full = caption("512")
    sub = caption_extra.top_m_contest("512", 8, 3)
    best = np.sort(full.means)[::-1][:8]
    np.testing.assert_allclose(np.sort(sub.means)[::-1], best)
    assert sub.k == 3 and sub.n_arms == 8
    # k > 1 drops the learners without top-K support, keeps the others with k set
    assert caption_extra.learner("Track-and-Stop", 5) is None
    assert caption_extra.learner("lil-KLUCB", 5).k == 5



def _caption_row(algorithm: str, pulls: float, capped: int, errors_stopped: int, errors_capped: int = 0) -> dict:
    return {"contest": "559", "k": 1, "algorithm": algorithm, "arms": 50, "reps": 100, "pulls_mean": pulls,
            "capped": capped, "errors": errors_stopped + errors_capped, "errors_stopped": errors_stopped,
            "error_rate": (errors_stopped + errors_capped) / 100}


def test_caption_extra_fastest_learner_must_be_uncapped_and_delta_consistent():
    # 3/100 wrong stops: Wilson lower bound ~0.010 (> delta); 2/100: ~0.0055 (<= delta); a capped
    # run's wrong recommendation never claimed delta-correctness and does not count
    df = pd.DataFrame([
        _caption_row("lil'UCB (heur.)", 1e4, capped=0, errors_stopped=3),
        _caption_row("LUCB++ (heur.)", 2e4, capped=0, errors_stopped=2),
        _caption_row("Track-and-Stop", 1e3, capped=1, errors_stopped=0),
        _caption_row("KL-RandLUCB", 5e4, capped=0, errors_stopped=0),
        _caption_row("Top-two (TC)", 3e4, capped=0, errors_stopped=0, errors_capped=0),
    ])
    row = caption_extra.assess(df).table.iloc[0]
    assert row["fastest (uncapped, delta-consistent)"] == "LUCB++ (heur.)"
    assert row["error rate above delta"] == "lil'UCB (heur.)"
    assert row["best modern"] == "Top-two (TC)"  # Track-and-Stop has a capped run
    assert row["seed/modern"] == round(2e4 / 3e4, 2)
    # wrong recommendations at the cap do not make a learner "above delta"
    df.loc[2, ["errors", "error_rate"]] = [40, 0.4]
    assert caption_extra.assess(df).table.iloc[0]["error rate above delta"] == "lil'UCB (heur.)"

def _fig2_table(expgap_ratio: float, heuristic_errors: int) -> pd.DataFrame:
    rows = []
    for sc in jmnb14_fig2.SCENARIOS:
        for n in (100, 1000):
            means = {"Nonadaptive + LS": 100.0, "ExpGap + LS": 100.0 * expgap_ratio, "Successive Elimination": 60.0,
                     "lil'UCB + LS": 30.0, "lil'UCB Heuristic": 10.0, "UCB1 + LS": 33.0}
            for lab, m in means.items():
                err = heuristic_errors if lab == "lil'UCB Heuristic" else 0
                rows.append({"scenario": sc, "n": n, "algorithm": lab, "pulls_mean": m, "reps": 40, "errors": err,
                             "error_rate": err / 40, "capped": 0})
    return pd.DataFrame(rows)


def test_fig2_criteria_follow_the_claims():
    assert jmnb14_fig2.assess(_fig2_table(0.9, 0)).status == "holds"
    v = jmnb14_fig2.assess(_fig2_table(0.4, 1))  # ExpGap far better, and the heuristic failed once
    assert v.status == "partly"
    assert list(v.table["holds"]).count("no") == 2


def test_best_k_learners_use_the_papers_presets():
    faithful = jlq17.learner_for("lil'RandLUCB", "faithful", 2)
    assert faithful.get_params()["preset"] == "faithful" and faithful.k == 2 and faithful.delta == jlq17.NU
    assert jlq17.learner_for("LUCB", "heuristic", 2) is None  # LUCB has one version only
    assert jlq17.learner_for("lil'CLUCB", "heuristic", 5).k == 5


REPRODUCTION = Path(__file__).resolve().parents[1] / "docs" / "reproduction"


def test_jlq17_fig1_growth_takes_the_smallest_rival_with_a_row():
    """LUCB has one version only: it is a rival of the heuristic series too, and a rival without a row is
    skipped (Python's min() over a NaN first returned NaN, and both heuristic series failed 'lead grows')."""
    rows = pd.DataFrame([
        {"algorithm": "LUCB", "version": "faithful", "pulls_mean": 300.0},
        {"algorithm": "LUCB++", "version": "heuristic", "pulls_mean": 500.0},
        {"algorithm": "lil'RandLUCB", "version": "heuristic", "pulls_mean": 100.0},
    ])
    rivals = ["LUCB", "lil'LUCB", "LUCB++"]  # lil'LUCB has no row here
    assert jlq17_fig1.smallest_rival_ratio(rows, rivals, "heuristic") == 3.0
    assert math.isnan(jlq17_fig1.smallest_rival_ratio(rows, ["lil'LUCB"], "heuristic"))


def test_jlq17_fig1_paper_scale_run_is_judged_again_from_its_csv(tmp_path, capsys):
    """The paper-scale run in docs/reproduction, judged again without running (``reproduce --rejudge``): every
    (instance, version) series' lead grows with N, as the audit found once the NaN was handled."""
    for suffix in ("csv", "json", "png"):
        shutil.copy(REPRODUCTION / f"jlq17_fig1.{suffix}", tmp_path)
    verdict = jlq17_fig1.assess(pd.read_csv(tmp_path / "jlq17_fig1.csv"))
    assert "in 4/4 (instance, version) series" in verdict.summary and verdict.status == "holds"
    assert main(["reproduce", "jlq17_fig1", "--rejudge", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "jlq17_fig1.json").read_text())
    assert rec["status"] == "holds" and rec["scale"] == "paper" and "rejudged" in rec
    md = (tmp_path / "jlq17_fig1.md").read_text()
    assert "**Verdict: holds.**" in md and "--scale paper --seed 20170000" in md
    assert "jlq17_fig1" in (tmp_path / "REPORT.md").read_text()


def test_jmnb14_fig3_a_comparison_the_window_cannot_tell_is_not_judged():
    """A curve that does not reach the level inside the window is later than the window: that decides some
    comparisons and leaves others open (neither a success nor a failure)."""
    from purebandits.experiments.jmnb14_fig3 import at_least, within

    nan = math.nan
    assert at_least(300.0, 100.0, 1000.0, 2) is True and at_least(150.0, 100.0, 1000.0, 2) is False
    assert at_least(nan, 100.0, 1000.0, 2) is True  # SE later than 1000 >= 2 x 100
    assert at_least(nan, 600.0, 1000.0, 2) is None  # SE later than 1000, but maybe before 1200
    assert at_least(nan, nan, 1000.0, 2) is None and at_least(100.0, nan, 1000.0, 2) is False
    assert within(100.0, 150.0, 1000.0, 2) is True and within(100.0, 300.0, 1000.0, 2) is False
    assert within(nan, nan, 1000.0, 2) is None
    assert within(nan, 400.0, 1000.0, 2) is False  # the other is later than 1000 > 2 x 400
    assert within(nan, 700.0, 1000.0, 2) is None


def test_jmnb14_fig3_paper_scale_run_counts_panels_it_cannot_judge_apart():
    from purebandits.experiments import jmnb14_fig3

    verdict = jmnb14_fig3.assess(pd.read_csv(REPRODUCTION / "jmnb14_fig3.csv"))
    # the three panels where neither Nonadaptive nor ExpGap reaches 0.1 inside the window are not failures
    assert "in 9/9 judged panels (3 panel(s) not judged" in verdict.summary
    assert "in 9/12 judged panels;" in verdict.summary  # n = 10: SE within 2x of the best UCB method (real)
    assert verdict.status == "partly"
