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

from cpe_kinf_reference import V3, _pair_cost_upper
from purebandits.algorithms.lucb import KLRandLUCB, LilKLUCB
from purebandits.algorithms.top_two import TopTwo
from purebandits.algorithms.track_and_stop import TrackAndStop
from purebandits.bounds import glr_pair_cost
from purebandits.instances.rewards import Categorical
from purebandits.kinf_glr import KinfGLRStop, empirical_top, kinf_glr_stop, kinf_pair_cost, label_counts_from_moments
from purebandits.simulate import simulate
from purebandits.testing.checks import curtailed_error_count


def _loose(t, n, d, k=1):
    return 0.5 + 0.2 * math.log(t)


def _trajectory(P, T, seed):
    rng = np.random.default_rng(seed)
    arms = rng.integers(0, P.shape[0], T)
    labels = np.array([rng.choice(3, p=P[a]) for a in arms])
    return arms, labels


def _screens(Cs, thresholds, k):
    """Per answer (label counts ``Cs[i]``, each arm with some, and its threshold): (Z surely <= threshold, Z surely >
    threshold), Z = min over (a in the empirical top k, b outside) of Z_ab; all answers' pairs in one vectorised call.

    Surely below: some pair's upper bound (:func:`_pair_cost_upper`, independent of the code under test) is below the
    threshold by a 1e-9 relative margin against rounding (it cannot stop). Surely above: every pair's Bernoulli GLR
    cost of the means (:func:`purebandits.bounds.glr_pair_cost`) is above it by a 1e-9 relative margin (the exact Z is
    ~1e-10 relative). That cost is a lower bound of Z_ab: X -> Bernoulli(X) is a channel, so by data processing
    KL(F, G) >= d(mu_F, mu_G), whence K_inf^+(F, x) >= d(mu_F, x) (and K_inf^- likewise), and Z_ab >=
    inf_x N_a d(mu_a, x) + N_b d(mu_b, x), the Bernoulli cost (test_kinf_glr checks Z >= it): it stops, on the
    empirical top k. The reference statistic need not be computed in either case."""
    n = Cs.shape[1]
    N = Cs.sum(axis=2)
    means = (Cs @ V3) / N
    ia, ib = [], []
    for m in means:
        top = np.sort(np.lexsort((np.arange(n), -m))[:k])  # ties to the lower index
        rest = np.setdiff1d(np.arange(n), top)
        ia.append(np.repeat(top, rest.size))
        ib.append(np.tile(rest, top.size))
    per = k * (n - k)  # pairs per answer
    owner = np.repeat(np.arange(len(Cs)), per)
    ia, ib = np.concatenate(ia), np.concatenate(ib)
    thr = np.repeat(thresholds, per)
    upper = _pair_cost_upper(Cs[owner, ia], Cs[owner, ib], V3).reshape(-1, per)
    lower = glr_pair_cost(means[owner, ia], N[owner, ia], means[owner, ib], N[owner, ib]).reshape(-1, per)
    below = np.any(upper < (thr * (1 - 1e-9) - 1e-9).reshape(-1, per), axis=1)
    above = np.all(lower > (thr * (1 + 1e-9) + 1e-9).reshape(-1, per), axis=1)
    return below, above


def test_the_reference_upper_bound_is_above_the_exact_cost():
    """The references below skip the exact Z only where :func:`_pair_cost_upper` rules a crossing out: it must be an
    upper bound of kinf_pair_cost (random label counts, small and large, every shape of distribution), and tight
    where thresholds lie (else the skipping saves nothing)."""
    rng = np.random.default_rng(17)
    R = 2000
    n = rng.integers(1, 3000, size=(2, R))
    Ca = np.array([rng.multinomial(m, p) for m, p in zip(n[0], rng.dirichlet([0.4] * 3, R), strict=True)], float)
    Cb = np.array([rng.multinomial(m, p) for m, p in zip(n[1], rng.dirichlet([0.4] * 3, R), strict=True)], float)
    z = kinf_pair_cost(Ca, Cb, V3)
    U = _pair_cost_upper(Ca, Cb, V3)
    assert not np.any(np.isnan(U))
    assert np.all(U >= z * (1 - 1e-9) - 1e-9)
    near = (z > 0) & (z < 30)
    assert np.median(U[near] / z[near]) < 1.05


@pytest.mark.parametrize("k,seed", [(1, 0), (1, 1), (2, 2)])
@pytest.mark.slow  # long runs against the full statistic
def test_skipping_makes_the_decisions_of_the_full_statistic(k, seed):
    """Every answer's decision of KinfGLRStop equals the full statistic's; the reference computes the full statistic
    at every answer where an independent upper bound does not rule a stop out and a proven lower bound does not rule
    it in (:func:`_screens`: most answers where it stops)."""
    P = np.array([[0.2, 0.3, 0.5], [0.4, 0.3, 0.3], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.3, 0.3, 0.4]])
    arms, labels = _trajectory(P, 800, seed)
    n = P.shape[0]
    counts, sums, sumsq = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n)
    stop = KinfGLRStop(counts, sums, sumsq, V3, 0.1, k=k, threshold=_loose)
    C = np.zeros((n, 3))
    fast, full = [], []
    Cs = np.zeros((len(arms), n, 3))  # the label counts after each answer
    for t, (a, lab) in enumerate(zip(arms, labels, strict=True), 1):
        r = V3[lab]
        counts[a] += 1
        sums[a] += r
        sumsq[a] += r * r
        C[a, lab] += 1
        Cs[t - 1] = C
        if (rec := stop.check(t)) is not None:
            fast.append((t, tuple(rec)))
    ts = np.flatnonzero(Cs.sum(axis=2).min(axis=1) > 0) + 1  # the answers after which every arm has one
    below, above = _screens(Cs[ts - 1], np.array([_loose(t, n, 0.1, k) for t in ts]), k)
    exact = 0  # answers where the reference computes the exact statistic
    for t, no, yes in zip(ts, below, above, strict=True):
        C = Cs[t - 1]
        if no:
            continue
        if yes:  # it stops, on kinf_glr_stop's empirical top k
            full.append((int(t), tuple(int(i) for i in empirical_top(C @ V3 / C.sum(axis=1), k))))
            continue
        exact += 1
        rec2, _, _, s = kinf_glr_stop(C, V3, int(t), 0.1, k, _loose)
        if s:
            full.append((int(t), (rec2,) if k == 1 else rec2))
    assert len(full) > 20  # the loose threshold is crossed often: the comparison has something to compare
    assert exact > 0, exact
    assert fast == full


@pytest.mark.slow  # long runs against the full statistic
def test_per_pair_threshold_makes_the_decisions_of_the_full_statistic():
    """threshold="kinf-kt-pairs": stop iff every (best, rival) pair passes its own kinf_kt_pair_threshold."""
    from purebandits.glr_thresholds import kinf_kt_pair_threshold

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
            # kinf_glr_statistic(C, V3)[0], the empirical best arm, without the statistic it also computes (two exact
            # pair costs at every answer, unused here: ~80 % of this test's CPU)
            top = empirical_top(C @ V3 / C.sum(axis=1), 1)
            rest = [b for b in range(n) if b != top[0]]
            beta = kinf_kt_pair_threshold(C[top[0]].sum(), C[rest].sum(axis=1), n, delta)
            Ca, Cb = C[[top[0]] * 2], C[rest]
            if np.all(_pair_cost_upper(Ca, Cb, V3) >= beta * (1 - 1e-9) - 1e-9):  # else a pair surely fails
                # the exact Z of the pairs that the Bernoulli lower bound of Z_ab (_screens) does not surely pass
                N, mu = C.sum(axis=1), C @ V3 / C.sum(axis=1)
                sure = glr_pair_cost(mu[top[0]], N[top[0]], mu[rest], N[rest]) > beta * (1 + 1e-9) + 1e-9
                if np.all(kinf_pair_cost(Ca[~sure], Cb[~sure], V3) > beta[~sure]):
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


@pytest.mark.parametrize("cls", [TrackAndStop, TopTwo, KLRandLUCB, LilKLUCB])
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


# The simulations here run with jobs=1, in this process: results never depend on the jobs (test_simulate checks it),
# and a process pool's start-up costs more CPU than these few short runs.
def _clear_instance():
    return Categorical([[0.2, 0.2, 0.6], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1]])


@pytest.mark.parametrize("lrn", [
    TrackAndStop(0.05, threshold="theory", stop="kinf"),
    TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf"),
    TopTwo(0.05, threshold="theory", stop="kinf", cost="bernoulli"),
    KLRandLUCB(delta=0.05, stop="kinf", form="simplified"),
    LilKLUCB(delta=0.05, stop="kinf"),
], ids=["tas", "tas-kinf-weights", "top-two", "kl-rand-lucb", "lil-kl-ucb"])
@pytest.mark.slow  # runs of the reference driver
def test_stops_on_the_best_arm_on_the_reference_driver(lrn):
    res = simulate(lrn, _clear_instance(), reps=6, seed=3, max_pulls=20_000, jobs=1)
    assert res.driver == "reference"
    assert res.stopped.all() and res.correct.all()


def test_the_kinf_statistic_stops_sooner_on_ratings():
    """Same sampling rule, same answers (common seeds), same proven error: the K_inf stop is the earlier one on
    every run where both stop, because Z_Kinf >= Z_Bernoulli and the thresholds differ by log(1 + 2/t) -> 0."""
    inst = _clear_instance()
    kinf = simulate(TrackAndStop(0.01, threshold="theory", stop="kinf"), inst, reps=8, seed=4, max_pulls=50_000, jobs=1)
    bern = simulate(TrackAndStop(0.01, threshold="theory"), inst, reps=8, seed=4, max_pulls=50_000, jobs=1)
    assert kinf.stopped.all() and bern.stopped.all()
    assert kinf.pulls.mean() < bern.pulls.mean()


@pytest.mark.parametrize("lrn", [TrackAndStop(0.05, threshold="theory", stop="kinf", weights="kinf"),
                                 KLRandLUCB(2, delta=0.05, stop="kinf")], ids=["tas-kinf-weights", "kl-rand-lucb-k2"])
@pytest.mark.slow  # runs of the reference driver
def test_save_and_load_mid_run_continue_the_same(lrn):
    inst = _clear_instance()
    a = lrn.clone().start(4, seed=7)
    stream = inst.stream(11)
    for _ in range(60):
        arm = a.ask(1)[0]
        a.tell(arm, float(stream.draw(arm)))
    b = lrn.clone().load_state_dict(a.state_dict())
    while not a.done_:
        arm = a.ask(1)[0]
        assert b.ask(1)[0] == arm
        r = float(stream.draw(arm))
        a.tell(arm, r)
        b.tell(arm, r)
    assert b.done_ and b.final_ == a.final_ and b.t_ == a.t_
    assert a._kstop.checks < 0.5 * a.t_ * (4 - 1)  # the skipping bounds far fewer pairs than one per answer each


@pytest.mark.parametrize("make", [lambda d: TrackAndStop(d, threshold="theory", stop="kinf"),
                                  lambda d: TopTwo(d, threshold="theory", stop="kinf", cost="bernoulli"),
                                  lambda d: KLRandLUCB(delta=d, stop="kinf")], ids=["tas", "top-two", "kl-rand-lucb"])
@pytest.mark.slow  # many seeded runs
def test_null_stops_within_delta(make):
    """Two arms with the same ratings distribution: every stop is wrong; proven threshold, delta = 0.1, runs
    capped at 1,000 answers; at most the 0.999-quantile of Binomial(R, delta) of the R runs may stop.

    Curtailed (:func:`purebandits.testing.checks.curtailed_error_count`): the same level (it fails only where the
    full test on all R runs fails), and against a stop rate of 2.5 delta the full test's power (0.973) less at most
    1e-3. Rep r's seed does not depend on ``reps``, so the runs are simulated as a prefix of 50 (where a learner
    stopping in at most one of them passes; these stop in 0 or 1) and, only if undecided, all R."""
    R, delta = 150, 0.1
    inst = Categorical([[0.3, 0.3, 0.4], [0.3, 0.3, 0.4]])
    runs = {}

    def stops(r):
        if r >= runs.get("n", 0):
            runs["n"] = 50 if r < 50 else R
            runs["stopped"] = simulate(make(delta), inst, reps=runs["n"], seed=5, max_pulls=1000, jobs=1).stopped
        return bool(runs["stopped"][r])

    errors, _, tol = curtailed_error_count(stops, R, delta)
    assert tol == int(stats.binom.ppf(0.999, R, delta))
    assert errors <= tol


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


@pytest.mark.parametrize("module", ["purebandits.kinf_glr", "purebandits.algorithms.kernels.kinf_stop",
                                    "purebandits.experiments.proven_glr"])
@pytest.mark.slow  # fresh interpreters
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
    KLRandLUCB(delta=0.05, stop="kinf", form="simplified"),
], ids=["tas-kinf-weights", "top-two", "kl-rand-lucb"])
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


@pytest.mark.slow  # whole runs, every pair's test checked
@pytest.mark.parametrize("k,seed", [(1, 12), (2, 13), (1, 14)])
def test_kl_rand_lucb_stops_where_every_pair_first_passes_one_test(k, seed):
    """KL-RandLUCB with stop="kinf" on its own trajectory is done exactly at the first answer where every
    (top, outside) pair passes one of its two tests: the exact Z above its proven threshold at 0.9 delta, or the
    top arm's lower bound above the other's upper bound (the bounds at 0.05 delta: a twin with stop="bounds" and
    that delta asks the same arms and has the same intervals). The skipping, the pair bound in compiled code, the
    exact-pair room, the entered/left pair rule and the settled pairs change no decision.

    The reference computes the exact Z only when no pair left open by the bounds surely fails its test: an answer
    where some open pair's Z is below its threshold by an independent upper bound (:func:`_pair_cost_upper`, with a
    1e-9 relative margin against rounding) is not the first; this skips most answers (3x less CPU)."""
    from purebandits.glr_thresholds import kinf_kt_pair_threshold
    from purebandits.kinf_glr import empirical_top, kinf_pair_cost

    P = np.array([[0.2, 0.2, 0.6], [0.3, 0.2, 0.5], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.45, 0.2, 0.35],
                  [0.9, 0.1, 0.0], [0.8, 0.15, 0.05]])
    n, delta = P.shape[0], 0.05
    lrn = KLRandLUCB(k, delta=delta, stop="kinf", form="simplified").start(n, seed=seed)
    twin = KLRandLUCB(k, delta=0.05 * delta, form="simplified").start(n, seed=seed)
    rng = np.random.default_rng(seed)
    C = np.zeros((n, 3))
    # every answer once each arm has one: (t, done, top, the open pairs' label counts and thresholds); the upper
    # bound screens all answers' pairs at once after the run (elementwise, so as per answer: 2x less CPU)
    steps = []
    while not lrn.done_:
        a = lrn.ask(1)[0]
        assert twin.ask(1)[0] == a  # the same sampling rule and bounds
        lab = int(rng.choice(3, p=P[a]))
        C[a, lab] += 1
        lrn.tell(a, float(V3[lab]))
        twin.tell(a, float(V3[lab]))
        if C.sum(axis=1).min() > 0:
            top = empirical_top(C @ V3 / C.sum(axis=1), k)
            rest = np.setdiff1d(np.arange(n), top)
            ia, ib = np.repeat(top, rest.size), np.tile(rest, top.size)
            lcb, ucb = twin.intervals()
            bounds = lcb[ia] >= ucb[ib]
            ia, ib = ia[~bounds], ib[~bounds]  # the pairs the bounds leave open: each must pass the K_inf test
            beta = kinf_kt_pair_threshold(C[ia].sum(axis=1), C[ib].sum(axis=1), n, 0.9 * delta, k)
            steps.append((lrn.t_, lrn.done_, top, C[ia], C[ib], beta))
        else:
            assert not lrn.done_, lrn.t_  # no first answer yet: an arm has none
    sizes = [len(st[5]) for st in steps]
    owner = np.repeat(np.arange(len(steps)), sizes)
    Ca, Cb, beta = (np.concatenate([st[i] for st in steps]) for i in (3, 4, 5))
    fails = np.zeros(len(steps), dtype=bool)  # some open pair surely below its threshold
    fails[owner[_pair_cost_upper(Ca, Cb, V3) < beta * (1 - 1e-9) - 1e-9]] = True
    first = None
    for (t, done, top, ca, cb, b), fail in zip(steps, fails, strict=True):
        if first is None and not fail and np.all(kinf_pair_cost(ca, cb, V3) > b):
            first = (t, [int(i) for i in top])
        assert done == (first is not None), t
    assert (lrn.t_, lrn.final_) == first
    assert lrn._kstop.checks < 0.5 * lrn.t_ * (n - k)  # far fewer pair bounds than all pairs at every answer


def test_kl_rand_lucb_settles_each_pair_by_either_test():
    """A rival that is no longer sampled has a pair statistic that saturates near ``N_b K_inf(F_b, mu_a)`` while the
    pair's threshold grows like (1/2) log of the best arm's answers, so the K_inf test alone may never settle it (in
    a simulation of contest 558's top 50, a run passed 3 million answers with its best arm at 427,000 and a rival at
    77, Z 17.3 against 18.3). Written-in state: the best arm with 10^12 answers (ratings 0 and 1, mean 0.5); rival 1
    with 4,000 (mean 0.45, on {0, 1}: only the bounds settle it); rival 2 with 200 ratings of 0 and 1/2 (mean 0.4,
    little spread: only the K_inf test settles it). Neither test settles both, so neither alone stops; pair by pair
    they do, on the best arm."""
    C = np.array([[5e11, 0.0, 5e11], [2200.0, 0.0, 1800.0], [40.0, 160.0, 0.0]])
    lrn = KLRandLUCB(delta=0.05, stop="kinf", form="simplified").start(3, seed=0)
    lrn.counts_[:] = C.sum(axis=1).astype(np.int64)
    lrn.sums_[:] = C @ V3
    lrn.sumsq_[:] = C @ V3 ** 2
    lrn.t_ = int(C.sum())
    lrn._restore()
    from purebandits.glr_thresholds import kinf_kt_pair_threshold
    from purebandits.kinf_glr import kinf_pair_cost

    z = kinf_pair_cost(C[[0, 0]], C[[1, 2]], V3)
    beta = kinf_kt_pair_threshold(C[0].sum(), C[1:].sum(axis=1), 3, 0.9 * 0.05)
    lo, hi = lrn.intervals()
    assert z[0] < beta[0] and lo[0] >= hi[1]  # rival 1: the bounds only
    assert z[1] > beta[1] and lo[0] < hi[2]  # rival 2: the K_inf test only
    arm = lrn.ask(1, allowed=np.array([True, False, False]))[0]
    lrn.tell(arm, 1.0)
    assert lrn.done_ and lrn.final_ == [0]


def test_kl_rand_lucb_kinf_stop_comes_before_its_bounds_stop():
    """The same sampling rule and answers (common seeds) up to the first stop: the K_inf GLR stop (error <= delta)
    comes before the lil-KL bounds' stop (error <= 2 delta) on ratings. The bounds pay a union over arms and
    times per arm and the Bernoulli KL; the GLR pays log(K - 1) once plus two (1/2) log N regrets and uses the
    ratings' K_inf, which exceeds the Bernoulli KL of the means (kinf_glr's module docstring)."""
    inst = _clear_instance()
    kinf = simulate(KLRandLUCB(delta=0.01, stop="kinf"), inst, reps=8, seed=4, max_pulls=200_000, jobs=1)
    bounds = simulate(KLRandLUCB(delta=0.01), inst, reps=8, seed=4, max_pulls=200_000, driver="reference", jobs=1)
    assert kinf.stopped.all() and bounds.stopped.all() and kinf.correct.all()
    assert np.all(kinf.pulls < bounds.pulls)


def test_kl_rand_lucb_kinf_error_factor():
    from purebandits.error_guarantee import error_guarantee

    g = error_guarantee(KLRandLUCB(delta=0.05, stop="kinf"))
    assert g.proven and g.error_per_delta == 1.0 and g.error_probability == 0.05
    assert "K_inf" in g.note
    assert error_guarantee(KLRandLUCB(delta=0.025)).error_probability == 0.05
