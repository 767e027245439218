"""Behaviour specific to the LUCB family (purebandits.algorithms.lucb)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numba import njit
from scipy.stats import binom

from bisection_reference import plain_exact
from purebandits import bounds as B
from purebandits.algorithms.kernels.lucb_rules import (
    _bisect_start,
    _bisect_step,
    _bisect_until,
    family_select,
    family_time_term,
)
from purebandits.algorithms.lucb import (
    KLLUCB,
    LUCB1,
    KLRandLUCB,
    LilKLUCB,
    LilLUCB,
    LilRandLUCB,
    LUCBPlusPlus,
)
from purebandits.base import top_k_by
from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian
from purebandits.testing.checks import binomial_tolerance, run_learner

PAIR = [LUCB1, KLLUCB, LilLUCB, LUCBPlusPlus, LilKLUCB]
RANDOM = [LilRandLUCB, KLRandLUCB]
ALL = PAIR + RANDOM


def _critical_pair(learner):
    """(TOP, h, l) recomputed independently with NumPy from the learner's own intervals."""
    lo, hi = learner.intervals()
    top = top_k_by(learner.means(), learner.k_)
    rest = [i for i in range(learner.n_arms_) if i not in top]
    h = min(top, key=lambda i: (lo[i], i))
    el = max(rest, key=lambda i: (hi[i], -i))
    return top, h, el


@pytest.mark.parametrize("cls", ALL)
def test_each_arm_once_first(cls):
    n = 7
    learner = cls(k=2).start(n, seed=0)
    stream = Bernoulli(np.linspace(0.9, 0.1, n)).stream(1)
    asked = []
    for _ in range(n):
        (arm,) = learner.ask(1)
        asked.append(arm)
        learner.tell(arm, stream.draw(arm))
    assert asked == list(range(n))


@pytest.mark.parametrize("cls", PAIR)
def test_pair_rule_pulls_h_then_l(cls):
    """Each round pulls the TOP arm with the lowest lcb, then the other arm with the highest ucb."""
    n, k = 8, 3
    learner = cls(k=k).start(n, seed=1)
    stream = Bernoulli([0.8, 0.75, 0.7, 0.5, 0.45, 0.4, 0.3, 0.2]).stream(2)
    for arm in range(n):
        learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    rounds = 0
    while not learner.done and rounds < 300:
        # in sequential mode the bounds for sampling (counts + pending) are the answered ones
        top, h, el = _critical_pair(learner)
        before = learner.rounds_
        assert learner.ask(1) == [h]
        assert learner.queued_ == el and learner.rounds_ == before + 1
        learner.tell(h, stream.draw(h))
        if learner.done:
            break
        assert learner.ask(1) == [el]
        assert learner.queued_ == -1 and learner.rounds_ == before + 1
        assert h in top and el not in top
        learner.tell(el, stream.draw(el))
        rounds += 1
    assert rounds > 5


@pytest.mark.parametrize("cls", PAIR)
def test_concurrent_asks_return_pairs(cls):
    """ask(4) gives two pairs; the second uses the first as virtual pulls (radius only)."""
    n = 6
    learner = cls(k=2).start(n, seed=3)
    stream = Bernoulli([0.9, 0.8, 0.5, 0.4, 0.3, 0.2]).stream(4)
    for _ in range(3 * n):
        for arm in learner.ask(1):
            learner.tell(arm, stream.draw(arm))
    lo0, hi0 = learner.intervals()
    means0 = learner.means()
    top = set(top_k_by(means0, 2))
    arms = learner.ask(4)
    assert len(arms) == 4
    assert arms[0] in top and arms[1] not in top and arms[2] in top and arms[3] not in top
    lo1, hi1 = learner.intervals()  # pending pulls change neither the means nor the honest intervals
    np.testing.assert_array_equal(means0, learner.means())
    if cls in (LUCB1, KLLUCB):  # ...but two more rounds started: round-dependent bounds widen
        assert np.all(lo1 <= lo0) and np.all(hi1 >= hi0)
    else:
        np.testing.assert_array_equal(lo0, lo1)
        np.testing.assert_array_equal(hi0, hi1)


def test_virtual_pulls_shrink_the_sampling_radius():
    learner = LilLUCB(k=1).start(4, seed=0)
    stream = Gaussian([0.5, 0.4, 0.3, 0.2]).stream(1)
    for _ in range(40):
        for arm in learner.ask(1):
            learner.tell(arm, stream.draw(arm))
    lo, hi = learner.intervals()
    learner.pending_[:] = 5
    lcb, ucb = np.empty(4), np.empty(4)
    family_select(learner._code, learner._bparams, 1, learner.sums_, learner.sumsq_, learner.counts_,
                  learner.counts_ + learner.pending_, 0.0, True, np.zeros(4, bool), lcb, ucb)
    assert np.all(ucb - lcb < hi - lo)
    np.testing.assert_allclose((ucb + lcb) / 2, learner.means())
    learner.pending_[:] = 0


@pytest.mark.parametrize("n,k", [(6, 3), (10, 5)])
def test_lucbpp_equals_lil_lucb_at_half(n, k):
    """JLQ17 Sec. 5.1: LUCB++ coincides with lil'LUCB when K = n/2 (delta/(2(n-k)) = delta/(2k) = delta/n)."""
    means = np.linspace(0.8, 0.2, n)
    for seed in range(3):
        a = run_learner(LUCBPlusPlus(k=k).start(n, seed=seed), Bernoulli(means), 100 + seed)
        b = run_learner(LilLUCB(k=k).start(n, seed=seed), Bernoulli(means), 100 + seed)
        assert a.state_json().replace("lucb_plus_plus", "X") == b.state_json().replace("lil_lucb", "X")
    a, b = LUCBPlusPlus(k=k).start(n, seed=0), LilLUCB(k=k).start(n, seed=0)
    np.testing.assert_array_equal(a._bparams, b._bparams)


def test_lucbpp_split_differs_from_lil_lucb_otherwise():
    n, k = 10, 1
    a, b = LUCBPlusPlus(k=k, delta=0.1).start(n, seed=0), LilLUCB(k=k, delta=0.1).start(n, seed=0)
    assert a._bparams[0] == pytest.approx(0.1 / (2 * 9)) and a._bparams[1] == pytest.approx(0.1 / 2)
    assert b._bparams[0] == pytest.approx(0.01) and b._bparams[1] == pytest.approx(0.01)
    means = np.linspace(0.8, 0.2, n)
    ra = run_learner(LUCBPlusPlus(k=k).start(n, seed=0), Bernoulli(means), 5)
    rb = run_learner(LilLUCB(k=k).start(n, seed=0), Bernoulli(means), 5)
    assert ra.n_pulls != rb.n_pulls


@pytest.mark.parametrize("cls", RANDOM)
@pytest.mark.parametrize("th,tl", [(30, 10), (7, 21), (12, 12)])
def test_rand_lucb_pull_probabilities(cls, th, tl):
    """JLQ17 Alg. 1: h with probability T_l/(T_h+T_l) (seeded frequency test, two-sided)."""
    n = 4
    learner = cls(k=1).start(n, seed=42)
    # arm 0 is the only TOP arm (h); arm 1 the best challenger (l); arms 2, 3 are far below
    counts = np.array([th, tl, 500, 500])
    learner.counts_[:] = counts
    learner.sums_[:] = counts * np.array([0.6, 0.5, 0.0, 0.0])
    learner.sumsq_[:] = learner.sums_
    learner.t_ = int(counts.sum())
    _, h, el = _critical_pair(learner)
    assert (h, el) == (0, 1)
    draws = 20000
    hits = 0
    for _ in range(draws):
        (arm,) = learner.ask(1)
        assert arm in (h, el)
        hits += arm == h
        learner.cancel(arm)  # back to the same state: the next ask is a fresh coin
    p = tl / (th + tl)
    lo, hi = binom.ppf(5e-4, draws, p), binom.ppf(1 - 5e-4, draws, p)
    assert lo <= hits <= hi, (hits, draws * p)


@pytest.mark.parametrize("cls", ALL)
def test_top_k_correct(cls):
    n, k = 10, 3
    means = np.array([0.9, 0.85, 0.8, 0.5, 0.45, 0.4, 0.35, 0.3, 0.2, 0.1])
    for seed in range(5):
        learner = run_learner(cls(k=k, delta=0.05).start(n, seed=seed), Bernoulli(means), 50 + seed,
                              compiled=True, max_pulls=2_000_000)
        assert learner.done
        assert sorted(learner.recommend()) == [0, 1, 2]


@pytest.mark.parametrize("cls", ALL)
def test_stop_certificate_holds_on_own_intervals(cls):
    """At the stop, every TOP arm's lcb clears every other arm's ucb (minus epsilon) by the learner's bounds."""
    n, k = 8, 2
    means = np.array([0.9, 0.8, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1])
    learner = run_learner(cls(k=k).start(n, seed=7), Bernoulli(means), 8)
    assert learner.done
    lo, hi = learner.intervals()
    top = learner.recommend()
    rest = [i for i in range(n) if i not in top]
    if cls._strict:
        assert lo[top].min() > hi[rest].max()
    else:
        assert lo[top].min() >= hi[rest].max()


def test_lucb1_epsilon_stops_earlier():
    means = np.array([0.6, 0.58, 0.3, 0.2])
    exact = run_learner(LUCB1(delta=0.1).start(4, seed=0), Bernoulli(means), 1, compiled=True, max_pulls=10**7)
    pac = run_learner(LUCB1(delta=0.1, epsilon=0.1).start(4, seed=0), Bernoulli(means), 1, compiled=True,
                      max_pulls=10**7)
    assert pac.done and exact.done and pac.n_pulls < exact.n_pulls / 2


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB, LilLUCB, LUCBPlusPlus, LilRandLUCB, LilKLUCB, KLRandLUCB])
def test_intervals_match_public_bounds(cls):
    """The dispatcher reproduces the public vectorised bounds of purebandits.bounds."""
    n, k = 6, 2
    learner = run_learner(cls(k=k, delta=0.05).start(n, seed=0), Bernoulli([0.7, 0.6, 0.5, 0.4, 0.3, 0.2]), 1,
                          max_pulls=300)
    lo, hi = learner.intervals()
    m, u = learner.means(), learner.counts_.astype(float)
    top = np.zeros(n, bool)
    top[top_k_by(m, k)] = True
    t = learner.rounds_ + 1
    if cls is LUCB1:
        r = B.lucb_radius(u, t, n, 0.05)
        exp_lo, exp_hi = m - r, m + r
    elif cls is KLLUCB:
        lev = B.kl_lucb_rate(t, n, 0.05) / u
        exp_lo, exp_hi = B.kl_lower(m, lev), B.kl_upper(m, lev)
    elif cls in (LilLUCB, LUCBPlusPlus, LilRandLUCB):
        w = np.full(n, 0.05 / n) if cls is LilLUCB else np.where(top, 0.05 / (2 * (n - k)), 0.05 / (2 * k))
        r = np.array([float(B.lil_radius(u[i], w[i], epsilon=0.0, sigma=0.5, plus2=True)) for i in range(n)])
        exp_lo, exp_hi = m - r, m + r
    else:
        w = np.where(top, 0.05 / (n - k), 0.05 / k)
        pairs = [B.lil_kl_bounds(m[i], u[i], w[i], 8, cls().form) for i in range(n)]
        exp_lo, exp_hi = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    np.testing.assert_allclose(lo, exp_lo, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hi, exp_hi, rtol=1e-9, atol=1e-12)


def test_lil_kl_ucb_k1_is_tnm17_split():
    learner = LilKLUCB(delta=0.01).start(50, seed=0)
    bp = learner._bparams
    assert bp[0] == pytest.approx(0.01 / 49) and bp[1] == pytest.approx(0.01)
    assert bp[8] == pytest.approx(B.lil_kl_kappa(8, 0.01 / 49)) and bp[9] == pytest.approx(22.049, abs=1e-3)
    assert bp[10] == pytest.approx(1.5510, abs=1e-4)


def _mean_pulls(cls, means, seeds, **params):
    total = 0
    for s in seeds:
        learner = run_learner(cls(**params).start(len(means), seed=s), Bernoulli(means), 900 + s, compiled=True,
                              max_pulls=10**7)
        assert learner.done and learner.recommend() == [0]
        total += learner.n_pulls
    return total / len(seeds)


def test_kl_bound_beats_sub_gaussian_near_one():
    """TNM17 Sec. 5: with means near 1 the KL bound needs far fewer samples than SG1/SG2."""
    n = 20
    means = 1.0 - (np.arange(n) / n) ** 1.0 * 0.5  # mu_1 = 1, gaps (i/n)/2
    seeds = range(6)
    kl = _mean_pulls(LilKLUCB, means, seeds, bound="kl")
    kl_exact = _mean_pulls(LilKLUCB, means, seeds, bound="kl", form="exact")
    sg1 = _mean_pulls(LilKLUCB, means, seeds, bound="sg1")
    sg2 = _mean_pulls(LilKLUCB, means, seeds, bound="sg2")
    assert kl < 0.7 * sg1 and kl < 0.7 * sg2, (kl, sg1, sg2)
    assert kl_exact < 0.7 * sg1
    # the randomised rule with the KL bound also beats the LIL (sub-Gaussian) randomised rule here
    assert _mean_pulls(KLRandLUCB, means, seeds) < 0.7 * _mean_pulls(LilRandLUCB, means, seeds)


@pytest.mark.parametrize("cls", [LilLUCB, LUCBPlusPlus, LilRandLUCB])
def test_faithful_preset(cls):
    learner = cls(delta=0.01, preset="faithful").start(10, seed=0)
    assert learner._bparams[2] == 0.01  # eps
    nu_over_c = 0.01 / B.c_epsilon(0.01)
    if cls is LilRandLUCB:  # both tails of every arm (deviation from JLQ17, see LilRandLUCB's Notes)
        nu_over_c /= 2
    assert learner._bparams[0] * (10 if cls is LilLUCB else 2 * 9) == pytest.approx(nu_over_c)
    with pytest.raises(ValueError, match="epsilon"):
        cls(preset="faithful", epsilon=0.0).start(10, seed=0)
    heur = cls(delta=0.01).start(10, seed=0)
    assert heur._bparams[2] == 0.0 and heur._bparams[4] == 2.0


@pytest.mark.parametrize("params,name", [({"bound": "x"}, "bound"), ({"N": 6}, "N"), ({"N": 0}, "N"),
                                         ({"form": "y"}, "form"), ({"bound": "sg2", "delta": 0.5}, "delta")])
def test_lil_kl_ucb_invalid(params, name):
    with pytest.raises(ValueError, match=name):
        LilKLUCB(**params).start(5, seed=0)


def test_error_rate_lil_rand_lucb_gaussian_top2():
    """lil'RandLUCB heuristic, K = 2, Gaussian N(mu, 1/4): errors within delta + binomial slack."""
    means = np.array([0.5, 0.45, 0.3, 0.25, 0.2, 0.0])
    runs, errors = 150, 0
    for r in range(runs):
        learner = run_learner(LilRandLUCB(k=2, delta=0.1).start(6, seed=r), Gaussian(means), 10_000 + r,
                              compiled=True, max_pulls=5_000_000)
        errors += sorted(learner.recommend()) != [0, 1]
    assert errors <= binomial_tolerance(runs, 0.1)


def test_time_term_only_for_round_dependent_bounds():
    for cls, dep in [(LUCB1, True), (KLLUCB, True), (LilLUCB, False), (LilKLUCB, False)]:
        learner = cls().start(5, seed=0)
        val = family_time_term(learner._code, learner._bparams, 7.0)
        assert (val != 0.0) == dep


@pytest.mark.parametrize("cls,params", [(c, {}) for c in ALL] + [(KLRandLUCB, {"form": "kt"}),
                                                                    (LilKLUCB, {"form": "kt"}),
                                                                    (KLRandLUCB, {"form": "kinf"}),
                                                                    (LilKLUCB, {"form": "kinf"})],
                         ids=[c.__name__ for c in ALL] + ["KLRandLUCB-kt", "LilKLUCB-kt", "KLRandLUCB-kinf",
                                                          "LilKLUCB-kinf"])
def test_kernel_matches_reference_at_size(cls, params):
    """The compiled kernels == the ask/tell rule on 60 arms, past the bound tables' growth.

    Vote-like categorical arms (many near-ties, means strictly inside (0, 1) so the KL bounds
    invert at every pull) and top-3 identification; checkpoints resume the kernel mid-run.
    """
    rng = np.random.default_rng(5)
    probs = rng.dirichlet([2.0, 1.0, 0.6], size=60)
    model = Categorical(probs, np.array([0.0, 0.5, 1.0]))
    ref = cls(k=3, delta=0.1, **params).start(60, seed=3)
    run_learner(ref, model, 4, max_pulls=6_000)
    fast = cls(k=3, delta=0.1, **params).start(60, seed=3)
    stream = model.stream(4)
    for checkpoint in (60, 61, 1_500, 6_000):
        fast.run_compiled(stream, checkpoint)
    assert fast.counts_.max() > 256  # the kernel's per-count tables start at 256 entries
    assert fast.state_json() == ref.state_json()


# SHA-256 of state_json() after these runs, recorded with the previous kernel (commit a3c2e6a, which
# bisected every exact bound to the end at each refresh): the lazy exact-form kernel decides the same
@pytest.mark.parametrize("reg,where,k,pulls,digest", [
    ("lil_kl_ucb", "558top50", 1, 60_000, "4e90e6724ea39f23008767c6215013445f50921eb77a25655980f7cc04aa06c0"),
    ("lil_kl_ucb", "512full", 5, 30_000, "b05f4f475f19bb826ba7c6b27a21b50e23440e80af351e0e9822689541644e3d"),
    ("kl_rand_lucb", "558top50", 1, 60_000, "aa7d913012b1dbc48c437831b353f382b90f898959e1fb9e87e59d26bb578b72"),
    ("kl_rand_lucb", "512full", 5, 30_000, "f223f7161ba543866e81bfe79aa57d7415c68fd0a96b61a378e91e8f0864fc18"),
    # recorded with commit 677ccc0 (before the twin table, the safeguarded zone Newton, _bisect_until)
    ("lil_kl_ucb", "558full", 1, 300_000, "44678dc8393271398df13f00711e7496045d61b5c2e19ed55d7eeff3d5421a31"),
    ("kl_rand_lucb", "558full", 5, 300_000, "b4a5c1a532ba0af7c49807b0a06b582466a0a88a425b2673dd94fa56487ec61c"),
    ("lil_kl_ucb", "512full", 1, 200_000, "c0adee70de963a1d427b3586a0b350f1372ad358987da2ac68d073805b5ed985"),
])
def test_exact_form_kernel_matches_recorded_runs(reg, where, k, pulls, digest):
    import hashlib

    from purebandits.experiments.caption_extra import top_m_contest
    from purebandits.instances import caption
    from purebandits.registry import make_learner

    inst = top_m_contest("558", 50, 1) if where == "558top50" else caption(where[:3])
    lr = make_learner(reg, delta=0.005, k=k, form="exact").start(inst.n_arms, seed=11)
    lr.run_compiled(inst.model.stream(12), pulls)
    # parameters added since the digests were recorded (the K_inf stop's, at their defaults) are left out: the
    # digest is of the decisions' state
    assert lr.get_params()["stop"] == "bounds"
    state = lr.state_dict()
    state["params"] = {key: v for key, v in state["params"].items() if key not in ("stop", "support")}
    assert hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest() == digest


# ---------------------------------- the exact bounds' pieces, as the kernel uses them, == a plain bisection
@njit(cache=True)
def _kernel_exact(p, level, N, upper, za, zb, xs, per_step):  # pragma: no cover - compiled
    """The compiled kernel's way: start, then refine against each ``x`` in turn, then finish (x = nan).

    ``(za, zb)`` is a stale zone (the kernel's warm start for Newton); ``per_step`` uses
    _bisect_step in the kernel's stop-test loop instead of _bisect_until. Returns the finished
    value and every intermediate range (nan where the state was already finished).
    """
    lo, hi, it = _bisect_start(p, level, N, upper)
    ranges = np.full((xs.shape[0], 2), math.nan)
    for r in range(xs.shape[0] + 1):
        x = xs[r] if r < xs.shape[0] else math.nan
        if per_step:
            while lo != hi and not (x < lo or x > hi):
                lo, hi, it, za, zb = _bisect_step(p, level, N, upper, lo, hi, it, za, zb)
        else:
            lo, hi, it, za, zb = _bisect_until(p, level, N, upper, lo, hi, it, za, zb, x)
        if r < xs.shape[0]:
            ranges[r, 0], ranges[r, 1] = lo, hi
    if lo != hi:
        return math.nan, ranges
    return lo, ranges


def _adversarial_exact_cases(rng, size):
    """(p, level, N): means at and next to 0 and 1, levels from 1e-300 to 1e6, N from 1 to 32."""
    edge_p = np.array([0.0, 5e-324, 1e-300, 1e-15, 1e-12, 1e-9, 1e-6 * (1 - 1e-12), 1e-6, 1e-6 * (1 + 1e-12),
                       1e-3, 0.25, 0.5, 0.75, 1 - 1e-3, 1 - 1e-6 * (1 + 1e-10), 1 - 1e-6, 1 - 1e-6 * (1 - 1e-10),
                       1 - 1e-9, 1 - 1e-12, 1 - 2.0**-52, 1 - 2.0**-53, 1.0])
    rest = size - 2 * (size // 3)
    graded = rng.integers(0, 601, rest) / (2.0 * rng.integers(1, 301, rest))  # graded answers' means
    p = np.minimum(np.concatenate([rng.choice(edge_p, size // 3), rng.uniform(0, 1, size // 3), graded]), 1.0)
    edge_level = np.array([1e-300, 1e-20, 1e-14, 1e-12 * (1 - 1e-9), 1e-12, 1e-12 * (1 + 1e-9), 1e-9, 1e-4,
                           0.1, 1.0, 8.3, 1e3 * (1 - 1e-12), 1e3, 1e3 * (1 + 1e-12), 1e6])
    kappa = B.lil_kl_kappa(8, 0.005)
    T = np.floor(10.0 ** rng.uniform(0, 9, size))
    level = np.where(rng.random(size) < 0.3, rng.choice(edge_level, size),
                     [B.lil_kl_level_s(t, 0.005, kappa) for t in T])
    N = rng.choice(np.array([1.0, 2.0, 8.0, 32.0]), size, p=[0.15, 0.15, 0.55, 0.15])
    return p, level, N


@pytest.mark.slow  # every bound against a plain bisection
def test_kernel_exact_bounds_equal_plain_bisection_adversarial():
    """Finished in pieces as the kernel does (warm-started zone, refinement against arbitrary and
    nearly tied values, twins finished at once), every exact bound equals the plain 60-step
    bisection bit for bit, and every intermediate range contains it; so does the one-go bound."""
    rng = np.random.default_rng(24)
    p, level, N = _adversarial_exact_cases(rng, 6000)
    zoned = 0
    for a, lev, nn in zip(p, level, N, strict=True):
        for upper in (True, False):
            v = plain_exact(a, lev, nn, upper)
            fn = B.lil_kl_upper_exact_s if upper else B.lil_kl_lower_exact_s
            assert fn(a, lev, nn) == v, (a, lev, nn, upper)
            za, zb = B.lil_kl_exact_zone_s(a, lev, nn, upper)
            zoned += math.isfinite(za)
            # stale zones as Newton's start: none, the right one, the other side's, far off, degenerate
            r = rng.random()
            starts = [(-math.inf, math.inf), (za, zb), (0.0, 2 * a), (0.9 * v, 0.9 * v), (r, r), (1.0, 1.0)]
            ulp = math.ulp(v) if v > 0 else 5e-324
            near = v + ulp * rng.integers(-40, 41, 6)  # forces steps inside the zone
            xs = np.concatenate([rng.uniform(0, 1, 3), near, [v, np.nextafter(v, 2.0), np.nextafter(v, -1.0)]])
            rng.shuffle(xs)
            for k, (sa, sb) in enumerate(starts):
                got, ranges = _kernel_exact(a, lev, nn, upper, sa, sb, xs, k == 1)
                assert got == v, (a, lev, nn, upper, sa, sb)
                ok = np.isnan(ranges[:, 0]) | ((ranges[:, 0] <= v) & (v <= ranges[:, 1]))
                assert ok.all(), (a, lev, nn, upper)
    assert zoned > 4000  # many cases go through a certified zone (the edge cases often cannot)


def test_exact_zone_with_any_start_certifies_its_outside():
    """Whatever Newton starts from, midpoints just outside a returned zone evaluate as it says,
    and the zone's checks see g and its margin as _g_exact and _g_margin compute them."""
    rng = np.random.default_rng(7)
    p, level, N = _adversarial_exact_cases(rng, 3000)
    used = 0
    for a, lev, nn in zip(p, level, N, strict=True):
        for upper in (True, False):
            for start in (math.nan, rng.uniform(0, 1), a + (0.01 if upper else -0.01), 1e-300):
                za, zb = B.lil_kl_exact_zone_s(a, lev, nn, upper, start)
                if not math.isfinite(za):
                    continue
                used += 1
                for m in (za, zb):
                    assert B._g_and_margin(a, m, nn) == (B._g_exact(a, m, nn), B._g_margin(a, m, nn))
                for k in range(0, 40, 3):
                    below_a = B._g_exact(a, za - k * 1e-14 * za - k * 1e-17, nn) <= lev
                    below_b = B._g_exact(a, zb + k * 1e-14 * zb + k * 1e-17, nn) <= lev
                    assert below_a == upper and below_b != upper, (a, lev, nn, upper, start, k)
    assert used > 10000


def test_kinf_bounds_need_rewards_on_the_support():
    """form="kinf" reads each arm's law on ``support`` from its moments: another reward is refused, by tell and by
    the compiled driver, and a bad support at start."""
    learner = KLRandLUCB(delta=0.05, form="kinf").start(3, seed=0)
    (arm,) = learner.ask(1)
    with pytest.raises(ValueError, match="support"):
        learner.tell(arm, 0.25)
    learner.tell(arm, 0.5)
    with pytest.raises(ValueError, match="support"):
        KLRandLUCB(delta=0.05, form="kinf").start(3, seed=0).run_compiled(Gaussian(np.array([0.2, 0.5, 0.7])).stream(1),
                                                                          100)
    with pytest.raises(ValueError, match="support"):
        KLRandLUCB(delta=0.05, form="kinf", support=(0.5, 0.2)).start(3, seed=0)
    lr = KLRandLUCB(delta=0.05, form="kinf", support=(0.0, 1.0)).start(4, seed=0)
    lr.run_compiled(Bernoulli(np.array([0.2, 0.3, 0.5, 0.9])).stream(2), 100_000)
    assert lr.done and lr.recommend() == [3]


def test_kinf_bounds_on_two_points_use_the_exact_binary_regret():
    """On the support {0, 1} the K_inf bounds are the KL bounds at ``(log(1/w) + kt_regret_binary(S, F)) / T``, the
    Krichevsky-Trofimov mixture's exact regret on the arm's answers, so inside the KT-level KL bounds; the same on
    the compiled driver, the ask/tell path and the intervals."""
    from purebandits.algorithms.lucb import _lil_kl_split
    from purebandits.bounds import kt_regret_binary_s

    model = Bernoulli(np.array([0.2, 0.35, 0.5, 0.55, 0.6]))
    a = KLRandLUCB(delta=0.05, form="kinf", support=(0.0, 1.0)).start(5, seed=3)
    b = KLRandLUCB(delta=0.05, form="kt").start(5, seed=3)
    run_learner(a, model, 4, max_pulls=2_000)
    b.counts_[:], b.sums_[:], b.sumsq_[:] = a.counts_, a.sums_, a.sumsq_
    b._restore()
    (la, ua), (lb, ub) = a.intervals(), b.intervals()
    assert np.all(la >= lb) and np.all(ua <= ub)
    inner = (a.sums_ > 0) & (a.sums_ < a.counts_)
    assert inner.sum() >= 3 and np.all(la[inner] > lb[inner]) and np.all(ua[inner] < ub[inner])
    w_top, w_bot = _lil_kl_split(a._bounds_delta(), 5, 1)
    top = int(np.argmax(a.sums_ / a.counts_))
    for i in range(5):
        T, S = float(a.counts_[i]), float(a.sums_[i])
        w = w_top if i == top else w_bot
        level = (math.log(1 / w) + kt_regret_binary_s(S, T - S)) / T
        assert ua[i] == pytest.approx(B.kl_upper_s(S / T, level), rel=1e-9)
        assert la[i] == pytest.approx(B.kl_lower_s(S / T, level), rel=1e-9)


def test_kinf_bounds_inside_the_kt_kl_bounds():
    """At the same level, the K_inf bounds of an arm's ratings lie inside its Bernoulli-KL bounds (K_inf >= d)."""
    rng = np.random.default_rng(8)
    model = Categorical(rng.dirichlet([1.0, 1.0, 1.0], size=12), np.array([0.0, 0.5, 1.0]))
    a = KLRandLUCB(delta=0.05, form="kinf").start(12, seed=1)
    b = KLRandLUCB(delta=0.05, form="kt").start(12, seed=1)
    run_learner(a, model, 3, max_pulls=3_000)
    b.counts_[:], b.sums_[:], b.sumsq_[:] = a.counts_, a.sums_, a.sumsq_  # the same answers
    b._restore()
    (la, ua), (lb, ub) = a.intervals(), b.intervals()
    assert np.all(la >= lb - 1e-12) and np.all(ua <= ub + 1e-12) and np.any(ua < ub - 1e-3)
