"""The K_inf GLR stop inside learners (``stop="kinf"``), and Track-and-Stop's K_inf weights (``weights="kinf"``).

What is checked: :class:`KinfGLRStop` makes exactly the decisions of the statistic computed after every answer
(its skipping is exact), at k = 1 and k = 2; the learners validate their new parameters and rewards; they run
on the reference driver, save and load mid-run, stop on the right arm of a clear instance, and at equal means
stop (wrongly, necessarily) in no more runs than delta allows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from purebandits.algorithms.top_two import TopTwo
from purebandits.algorithms.track_and_stop import TrackAndStop
from purebandits.instances.rewards import Categorical
from purebandits.kinf_glr import KinfGLRStop, kinf_glr_stop, label_counts_from_moments
from purebandits.simulate import simulate

V3 = np.array([0.0, 0.5, 1.0])


def _loose(t, n, d, k=1):
    return 0.5 + 0.2 * math.log(t)


def _trajectory(P, T, seed):
    rng = np.random.default_rng(seed)
    arms = rng.integers(0, P.shape[0], T)
    labels = np.array([rng.choice(3, p=P[a]) for a in arms])
    return arms, labels


@pytest.mark.parametrize("k,seed", [(1, 0), (1, 1), (2, 2)])
def test_skipping_makes_the_decisions_of_the_full_statistic(k, seed):
    P = np.array([[0.2, 0.3, 0.5], [0.4, 0.3, 0.3], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.3, 0.3, 0.4]])
    arms, labels = _trajectory(P, 800, seed)
    n = P.shape[0]
    counts, sums, sumsq = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n)
    stop = KinfGLRStop(counts, sums, sumsq, V3, 0.1, k=k, threshold=_loose)
    C = np.zeros((n, 3))
    fast, full = [], []
    for t, (a, lab) in enumerate(zip(arms, labels, strict=True), 1):
        r = V3[lab]
        counts[a] += 1
        sums[a] += r
        sumsq[a] += r * r
        C[a, lab] += 1
        if (rec := stop.check(t)) is not None:
            fast.append((t, tuple(rec)))
        if C.sum(axis=1).min() > 0:
            rec2, _, _, s = kinf_glr_stop(C, V3, t, 0.1, k, _loose)
            if s:
                full.append((t, (rec2,) if k == 1 else rec2))
    assert len(full) > 20  # the loose threshold is crossed often: the comparison has something to compare
    assert fast == full


def test_per_pair_threshold_makes_the_decisions_of_the_full_statistic():
    """threshold="kinf-kt-pairs": stop iff every (best, rival) pair passes its own kinf_kt_pair_threshold."""
    from purebandits.glr_thresholds import kinf_kt_pair_threshold
    from purebandits.kinf_glr import kinf_glr_statistic, kinf_pair_cost

    P = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.7, 0.2, 0.1]])
    arms, labels = _trajectory(P, 400, 9)
    n, delta = 3, 0.3
    counts, sums, sumsq = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n)
    stop = KinfGLRStop(counts, sums, sumsq, V3, delta, threshold="kinf-kt-pairs")
    C = np.zeros((n, 3))
    fast, full = [], []
    for t, (a, lab) in enumerate(zip(arms, labels, strict=True), 1):
        counts[a] += 1
        sums[a] += V3[lab]
        sumsq[a] += V3[lab] ** 2
        C[a, lab] += 1
        if stop.check(t) is not None:
            fast.append(t)
        if C.sum(axis=1).min() > 0:
            top = kinf_glr_statistic(C, V3)[0]
            rest = [b for b in range(n) if b != top[0]]
            z = kinf_pair_cost(C[[top[0]] * 2], C[rest], V3)
            beta = kinf_kt_pair_threshold(C[top[0]].sum(), C[rest].sum(axis=1), n, delta)
            if np.all(z > beta):
                full.append(t)
    assert len(full) > 50 and fast == full


def test_label_counts_from_moments():
    C = np.array([[3, 0, 2], [0, 5, 1], [1, 1, 1]])
    N, S, Q = C.sum(axis=1), C @ V3, C @ V3 ** 2
    assert np.array_equal(label_counts_from_moments(N, S, Q, V3), C)
    B = np.array([[4, 6], [0, 3]])
    v2 = np.array([0.0, 1.0])
    assert np.array_equal(label_counts_from_moments(B.sum(1), B @ v2, B @ v2 ** 2, v2), B)
    with pytest.raises(ValueError, match="not on the support"):
        label_counts_from_moments([2], [0.7], [0.49 + 0.0], V3)  # one 0.7 and one 0: no support counts fit
    with pytest.raises(ValueError, match="increasing"):
        label_counts_from_moments([1], [1.0], [1.0], [1.0, 0.0])


@pytest.mark.parametrize("cls", [TrackAndStop, TopTwo])
def test_parameters_and_rewards_are_checked(cls):
    with pytest.raises(ValueError, match="stop"):
        cls(stop="lucb").start(3)
    with pytest.raises(ValueError, match="support"):
        cls(stop="kinf", support=(0.5,)).start(3)
    with pytest.raises(ValueError, match="support"):
        cls(stop="kinf", support=(0.0, 1.5)).start(3)
    lrn = cls(stop="kinf").start(3, seed=0)
    arm = lrn.ask(1)[0]
    with pytest.raises(ValueError, match="not on the support"):
        lrn.tell(arm, 0.3)
    lrn.tell(arm, 0.5)  # on the support
    assert lrn.t_ == 1


def _clear_instance():
    return Categorical([[0.2, 0.2, 0.6], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1]])


@pytest.mark.parametrize("lrn", [
    TrackAndStop(0.05, threshold="theory", stop="kinf"),
    TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf"),
    TopTwo(0.05, threshold="theory", stop="kinf", cost="bernoulli"),
], ids=["tas", "tas-kinf-weights", "top-two"])
def test_stops_on_the_best_arm_on_the_reference_driver(lrn):
    res = simulate(lrn, _clear_instance(), reps=6, seed=3, max_pulls=20_000)
    assert res.driver == "reference"
    assert res.stopped.all() and res.correct.all()


def test_the_kinf_statistic_stops_sooner_on_ratings():
    """Same sampling rule, same answers (common seeds), same proven error: the K_inf stop is the earlier one on
    every run where both stop, because Z_Kinf >= Z_Bernoulli and the thresholds differ by log(1 + 2/t) -> 0."""
    inst = _clear_instance()
    kinf = simulate(TrackAndStop(0.01, threshold="theory", stop="kinf"), inst, reps=8, seed=4, max_pulls=50_000)
    bern = simulate(TrackAndStop(0.01, threshold="theory"), inst, reps=8, seed=4, max_pulls=50_000)
    assert kinf.stopped.all() and bern.stopped.all()
    assert kinf.pulls.mean() < bern.pulls.mean()


def test_save_and_load_mid_run_continue_the_same():
    inst = _clear_instance()
    a = TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf").start(4, seed=7)
    stream = inst.stream(11)
    for _ in range(60):
        arm = a.ask(1)[0]
        a.tell(arm, float(stream.draw(arm)))
    b = TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf").load_state_dict(a.state_dict())
    while not a.done_:
        arm = a.ask(1)[0]
        assert b.ask(1)[0] == arm
        r = float(stream.draw(arm))
        a.tell(arm, r)
        b.tell(arm, r)
    assert b.done_ and b.final_ == a.final_ and b.t_ == a.t_
    assert a._kstop.checks < 0.5 * a.t_ * (4 - 1)  # the skipping bounds far fewer pairs than one per answer each


@pytest.mark.parametrize("cls,params", [(TrackAndStop, {}), (TopTwo, {"cost": "bernoulli"})])
def test_null_stops_within_delta(cls, params):
    """Two arms with the same ratings distribution: every stop is wrong; proven threshold, delta = 0.1, runs
    capped at 1,000 answers; at most the 0.999-quantile of Binomial(R, delta) of the R runs may stop."""
    R, delta = 150, 0.1
    inst = Categorical([[0.3, 0.3, 0.4], [0.3, 0.3, 0.4]])
    res = simulate(cls(delta, threshold="theory", stop="kinf", **params), inst, reps=R, seed=5, max_pulls=1000)
    assert int(res.stopped.sum()) <= int(stats.binom.ppf(0.999, R, delta))


def test_threshold_floor_is_the_fixed_point():
    from purebandits.experiments.proven_glr import threshold_floor_samples
    from purebandits.glr_thresholds import gk16_threshold, kt_regret

    w = np.array([0.4, 0.3, 0.2, 0.1])
    for T, n in [(400.0, 4), (11_673.0, 4), (30.0, 4)]:
        t = threshold_floor_samples(T, n, 0.01, "Bernoulli")
        assert t == pytest.approx(T * gk16_threshold(t, n, 0.01), rel=1e-6)
        t = threshold_floor_samples(T, n, 0.01, "K_inf", w)
        # the binding pair is the best arm against the rival with the most answers (kt_regret increases)
        b = math.log(3 / 0.01) + kt_regret(0.4 * t) + kt_regret(0.3 * t)
        assert t == pytest.approx(T * b, rel=1e-6)
    with pytest.raises(ValueError, match="weights"):
        threshold_floor_samples(10.0, 4, 0.01, "K_inf")


def test_proven_stopping_end_to_end(tmp_path):
    """The experiment on the smallest cells: a table, a verdict per cell, the floor below every proven ratio."""
    import json

    import pandas as pd

    from purebandits.cli import main

    rc = main(["reproduce", "proven_stopping", "--scale", "quick", "--out", str(tmp_path), "--no-progress",
               "--jobs", "1", "--set", "reps=3", "--set", "reps_kinf=2", "--set",
               'learners=["Track-and-Stop, GK16", "Track-and-Stop, K_inf stop"]'])
    assert rc == 0
    df = pd.read_csv(tmp_path / "proven_stopping.csv")
    assert set(df["algorithm"]) == {"Track-and-Stop, GK16", "Track-and-Stop, K_inf stop"}
    assert set(df["cell"]) == {"contest 512, top 8", "Bernoulli, 4 arms"}
    assert (df["capped"] == 0).all() and (df["errors"] == 0).all()
    cap = df[df["cell"].str.startswith("contest")]
    assert (cap["T_star_Bern"] > cap["T_star_Kinf"]).all()  # ratings carry more information than their means
    assert (df["ratio"] > 1.0).all()
    # the K_inf statistic's floor is below the Bernoulli one's on ratings (T*_Kinf < T*_Bern, same time term)
    fl = cap.set_index("statistic")["floor_ratio"]
    assert fl["K_inf"] < fl["Bernoulli"]
    verdict = json.loads((tmp_path / "proven_stopping.json").read_text())
    assert verdict["status"] in ("holds", "partly", "does not hold")
    assert "contest 512, top 8:" in verdict["summary"] and "Bernoulli, 4 arms:" in verdict["summary"]
    assert (tmp_path / "proven_stopping.png").stat().st_size > 0


@pytest.mark.parametrize("module", ["purebandits.kinf_glr", "purebandits.algorithms._kinf_stop",
                                    "purebandits.experiments.proven_glr"])
def test_imports_first_in_a_fresh_interpreter(module):
    """The K_inf modules sit between the learners and the thresholds: each imports alone (no import cycle)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, capture_output=True, timeout=120)


def test_the_weakest_of_many_tied_pairs_keeps_less_of_the_statistic():
    """One rival: the drawn statistic stays near t / T* (its noise averages out over draws); twenty rivals tied
    with each other: the smallest of twenty noisy statistics is well below it (the gap floors do not see)."""
    from purebandits.experiments.proven_glr import min_pair_shortfall
    from purebandits.lower_bound import solve_characteristic_time

    v = np.array([0.0, 1.0])
    one = np.array([[0.4, 0.6], [0.5, 0.5]])
    many = np.vstack([[0.4, 0.6]] + [[0.5, 0.5]] * 20)
    out = []
    for P in (one, many):
        sol = solve_characteristic_time(Categorical(P, v), 1)
        t = 200 * sol.T_star  # t / T* = 200: the statistic's sd, about sqrt(2 * 200) = 20, is 10 % of it
        out.append(min_pair_shortfall(P, v, sol.weights, sol.T_star, t, draws=40, seed=1))
    assert out[0] == pytest.approx(1.0, abs=0.08)  # 40 draws: the mean's sd is about 0.1 / sqrt(40)
    assert out[1] < out[0] - 0.1  # the expected minimum of 20 such statistics is about 1.9 sd below the mean


@pytest.mark.parametrize("lrn", [
    TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf"),
    TopTwo(0.05, threshold="theory", stop="kinf", cost="bernoulli"),
], ids=["tas-kinf-weights", "top-two"])
def test_restricted_asks_pick_allowed_arms_and_still_stop_right(lrn):
    """Each ask allows a random half of the arms (a participant's unseen captions): every pick is allowed, and the
    K_inf stop, valid whatever the sampling, still ends on the best arm."""
    inst = Categorical([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1], [0.6, 0.2, 0.2],
                        [0.5, 0.4, 0.1]])
    stream = inst.stream(2)
    rng = np.random.default_rng(8)
    a = lrn.clone().start(6, seed=3)
    while not a.done_ and a.t_ < 50_000:
        mask = rng.random(6) < 0.5
        if not mask.any():
            continue
        arm = a.ask(1, allowed=mask)[0]
        assert mask[arm]
        a.tell(arm, float(stream.draw(arm)))
    assert a.done_ and a.final_ == [0]
