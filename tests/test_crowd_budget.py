"""The contest at its vote budget (issue 37 items 2 and 4): ratings until the top 10 is right, the crowd_budget
reproduction's learners, goal and verdict, and its run on a user's own summary file."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.experiments import crowd_budget as cb
from purebandits.metrics import ratings_until
from purebandits.registry import get_learner_class
from purebandits.simulate import simulate


# ----------------------------------------------------------------------------- ratings until right w.p. level
def test_ratings_until_on_hand_computed_cases():
    ck = [100, 200, 300, 400]
    # shares of exact runs per checkpoint: 0, 1/2, 1, 1 -> right in 90 % from 300 on
    p = np.array([[0.9, 1.0, 1.0, 1.0], [0.5, 0.9, 1.0, 1.0]])
    assert ratings_until(p, ck, 0.9) == 300
    assert ratings_until(p, ck, 0.5) == 200
    # a dip: 1, 1/2, 1, 1 -> the first checkpoint from which on it holds is 300, not 100
    dip = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.8, 1.0, 1.0]])
    assert ratings_until(dip, ck, 0.9) == 300
    assert ratings_until(np.ones((3, 4)), ck) == 100
    # short at the last checkpoint: never within the checkpoints
    assert math.isnan(ratings_until(np.array([[1.0, 1.0, 1.0, 0.9]]), ck))
    # 9 of 10 runs right is probability 0.9
    ten = np.ones((10, 4))
    ten[0, :] = 0.9
    assert ratings_until(ten, ck, 0.9) == 100 and math.isnan(ratings_until(ten, ck, 0.95))


@pytest.mark.parametrize("bad, level, message", [(np.ones((2, 3)), 0.9, "must be"), (np.ones(4), 0.9, "must be"),
                                                 (np.ones((2, 4)), 0.0, "level"), (np.ones((2, 4)), 1.5, "level")])
def test_ratings_until_errors(bad, level, message):
    with pytest.raises(ValueError, match=message):
        ratings_until(bad, [1, 2, 3, 4], level)


def test_sim_result_ratings_until_needs_quality_measures():
    plain = simulate("lil_ucb", "caption:559", reps=2, seed=1, max_pulls=500, checkpoints=[250], jobs=1,
                     progress=False)
    assert math.isnan(plain.ratings_until())
    res = simulate("random_sampling", "custom:means=0.9/0.1", reps=4, seed=1, max_pulls=400,
                   checkpoints=[2, 200], jobs=1, progress=False, quality=True)
    # two arms: the "top 10" is both arms, right from the first checkpoint that has answered both
    assert res.ratings_until("top10_precision", 0.9) == 2


def test_cli_says_when_the_top_10_is_right(capsys):
    rc = main(["simulate", "--algorithm", "contest_ucb_2024", "--param", "k=10", "--instance",
               "custom:means=0.9/0.8/0.7/0.6/0.5/0.4/0.3/0.2/0.15/0.12/0.1/0.05", "--reps", "2", "--jobs",
               "1", "--max-pulls", "20000", "--checkpoints", "100,20000", "--crowd", "--no-progress"])
    assert rc == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("top 10 right"))
    assert "ratings on" in line or "at the last checkpoint (20,000 ratings)" in line


# ----------------------------------------------------------------------------- the reproduction's learners
def test_learners_target_the_service_error_and_the_editors_top_ten():
    for label, (name, params, _, _) in cb.LEARNERS.items():
        lrn = cb.learner(label, 10)
        cls = get_learner_class(name)
        assert lrn.delta * cls.error_factor(params) == pytest.approx(cb.TARGET_ERROR), label
        assert getattr(lrn, "k", 1) == (10 if cls.tags.get("top_k") else 1), label
    assert cb.learner(cb.SERVICE_DEFAULT, 10).delta == 0.025  # the bounds' own stop: error <= 2 delta


def test_the_service_default_is_the_one_measured():
    from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_PARAMS

    name, params, proven, system = cb.LEARNERS[cb.SERVICE_DEFAULT]
    assert (name, params, proven, system) == (DEFAULT_ALGORITHM, DEFAULT_PARAMS, True, False)


# ----------------------------------------------------------------------------- goal and verdict
def _frame(default: list[float], ucb2024: list[float], uniform: list[float], ratings=(100, 300, 900)) -> pd.DataFrame:
    rows = []
    for label, curve in ((cb.SERVICE_DEFAULT, default), (cb.REFERENCE_2024, ucb2024), (cb.UNIFORM, uniform)):
        _, _, proven, system = cb.LEARNERS[label]
        for c, v in zip(ratings, curve, strict=True):
            rows.append({"contest": "caption:x", "arms": 50, "crowd": "default", "algorithm": label, "k": 10,
                         "proven_stop": proven, "contest_system": system, "ratings": c, "reps": 4,
                         "top1_correct": 1.0, "top10_precision": v, "top25_precision": v, "kendall25": 0.5,
                         "top10_right": float(v == 1), "stopped": 0.0, "ratings_until_top10_90": math.nan,
                         "participants": 10})
    return pd.DataFrame(rows)


def test_goal_met_when_the_default_reaches_the_2024_precision_within_a_third():
    df = _frame([0.5, 0.8, 0.9], [0.3, 0.6, 0.8], [0.2, 0.4, 0.6])
    g = cb.goal(df).iloc[0]
    assert g["2024 UCB at budget"] == 0.8 and g["default reaches it at"] == 300 and g["a third of the budget"] == 300
    assert bool(g["within a third"]) and bool(g["beats uniform at every checkpoint"])
    assert cb.assess(df).status == "holds"


def test_goal_missed_when_late_or_behind_uniform():
    late = cb.goal(_frame([0.5, 0.7, 0.9], [0.3, 0.6, 0.8], [0.2, 0.4, 0.6])).iloc[0]
    assert late["default reaches it at"] == 900 and not bool(late["within a third"])
    never = _frame([0.5, 0.6, 0.7], [0.3, 0.6, 0.8], [0.6, 0.4, 0.6])
    g = cb.goal(never).iloc[0]
    assert math.isnan(g["default reaches it at"]) and not bool(g["beats uniform at every checkpoint"])
    assert cb.assess(never).status == "does not hold"
    assert "never" in cb.assess(never).summary


def test_the_goal_is_judged_under_the_default_crowd_only():
    tired = _frame([0.1, 0.2, 0.3], [0.3, 0.6, 0.8], [0.2, 0.4, 0.6]).assign(crowd="tired+careless")
    df = pd.concat([_frame([0.5, 0.8, 0.9], [0.3, 0.6, 0.8], [0.2, 0.4, 0.6]), tired], ignore_index=True)
    v = cb.assess(df)
    assert v.status == "holds" and "caption:x (tired+careless)" in v.summary and "never" in v.summary
    assert cb.assess(tired).status == "does not hold"


def test_assess_table_reads_the_precision_at_the_budget_and_the_ratings_until_right():
    df = _frame([0.5, 0.8, 1.0], [0.3, 0.6, 0.8], [0.2, 0.4, 0.6])
    df.loc[df["algorithm"] == cb.SERVICE_DEFAULT, "ratings_until_top10_90"] = 900.0
    t = cb.assess(df).table.set_index("learner")
    assert t.loc[cb.SERVICE_DEFAULT, "x @900"] == 1.0 and t.loc[cb.SERVICE_DEFAULT, "x: 90% right from"] == "900"
    assert t.loc[cb.UNIFORM, "x @900"] == 0.6 and t.loc[cb.UNIFORM, "x: 90% right from"] == "-"
    assert "x @100,000" not in t.columns


# ----------------------------------------------------------------------------- a user's own contest
def test_runs_on_a_users_summary_file(tmp_path, caption_summary):
    path = caption_summary(40)
    out = tmp_path / "out"
    rc = main(["reproduce", "crowd_budget", "--scale", "quick", "--out", str(out), "--no-progress", "--jobs", "1",
               "--set", f'contests=["caption:{path}"]', "--set", "crowds=[\"default\"]", "--set", "reps=2",
               "--set", "budget=800", "--set", "checkpoints=[400]", "--set",
               f'learners=["{cb.SERVICE_DEFAULT}", "{cb.REFERENCE_2024}", "{cb.UNIFORM}"]'])
    assert rc == 0
    df = pd.read_csv(out / "crowd_budget.csv")
    assert set(df["contest"]) == {f"caption:{path}"} and set(df["arms"]) == {40}
    assert sorted(set(df["ratings"])) == [400, 800] and len(df) == 3 * 2
    assert df["top10_precision"].between(0, 1).all() and (df["participants"] > 0).all()
    assert (out / "crowd_budget.png").stat().st_size > 0


# ----------------------------------------------------------------------------- arm order
def test_contests_run_in_a_seeded_random_arm_order():
    from purebandits.instances import Bernoulli, Gaussian, Instance, make_instance

    inst = make_instance("caption:559")
    assert np.all(np.diff(inst.means) <= 1e-12)  # the bundled file lists the captions best first
    a, b = cb.shuffled(inst, 7), cb.shuffled(inst, 7)
    np.testing.assert_array_equal(a.model.probabilities, b.model.probabilities)  # same seed, same order
    np.testing.assert_allclose(np.sort(a.means), np.sort(inst.means))  # the same captions
    assert not np.array_equal(a.means, inst.means) and not np.array_equal(a.means, cb.shuffled(inst, 8).means)
    # a caption keeps its own vote shares: find each shuffled row among the original rows
    rows = {tuple(np.round(r, 12)) for r in inst.model.probabilities}
    assert all(tuple(np.round(r, 12)) in rows for r in a.model.probabilities)
    for model in (Bernoulli([0.9, 0.5, 0.2, 0.1]), Gaussian([1.0, 0.5, 0.0, -1.0], [0.25, 1.0, 4.0, 9.0])):
        s = cb.shuffled(Instance("x", model, 1), 3)
        order = [list(model.means).index(m) for m in s.means]
        assert sorted(order) == [0, 1, 2, 3]
        if isinstance(model, Gaussian):
            np.testing.assert_allclose(s.model.b, model.b[order])
