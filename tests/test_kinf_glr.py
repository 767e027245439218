"""The K_inf GLR statistic for ratings on a known finite support: against independent computations, its relation to
the Bernoulli statistic, the betting proof's numerical steps, the top-k form, and simulated validity.

Validity (as in ``tests/test_glr_thresholds.py``): two arms with equal means, round-robin answers, the statistic
checked after every answer up to T = 3000 with ``kinf_portfolio_threshold`` at delta = 0.1, R seeded runs; the
count of runs that ever stop must not exceed the (1 - 1e-3)-quantile of Binomial(R, delta). The decision is exact
at every answer, but the statistic is not computed at every answer: after a check at time t with upper bound
U >= Z_ab evaluated at level x, the next s answers raise both Z_ab and Z_ba by at most s c(x)
(``kinf_pair_upper``), so no stop is possible before ``U + s c(x)`` exceeds ``beta(t) <= beta(t + s)``; the run
is next checked then. Run this file as a script for the counts quoted in ``docs/glr_stopping.md``.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

from cpe_kinf_reference import _pair_cost_upper
from purebandits.bounds import glr_pair_cost
from purebandits.glr_thresholds import kinf_kt_pair_threshold, kinf_kt_threshold, kinf_portfolio_threshold, kt_regret
from purebandits.kinf_glr import (
    empirical_top,
    kinf_glr_statistic,
    kinf_glr_stop,
    kinf_pair_cost,
    kinf_pair_exceeds,
    kinf_pair_upper,
)
from purebandits.lower_bound import kinf

V3 = np.array([0.0, 0.5, 1.0])
V2 = np.array([0.0, 1.0])
R_RUNS = 2000
T_MAX = 3000
DELTA = 0.1
ALPHA = 1e-3


def _reference_cost(ca, cb, v):
    """Z_ab by scipy's bounded scalar minimisation of N_a K^-(F_a, x) + N_b K^+(F_b, x) on [mu_b, mu_a]."""
    ca, cb = np.asarray(ca, float), np.asarray(cb, float)
    na, nb = ca.sum(), cb.sum()
    if na == 0 or nb == 0:
        return 0.0
    pa, pb = ca / na, cb / nb
    ma, mb = pa @ v, pb @ v
    if ma <= mb:
        return 0.0
    f = lambda x: na * kinf(pa, v, x, side="lower") + nb * kinf(pb, v, x, side="upper")
    res = optimize.minimize_scalar(f, bounds=(mb, ma), method="bounded", options={"xatol": 1e-13})
    return float(min(res.fun, f(ma), f(mb)))


counts3 = st.lists(st.integers(0, 400), min_size=3, max_size=3).filter(lambda c: sum(c) > 0)
counts2 = st.lists(st.integers(0, 400), min_size=2, max_size=2).filter(lambda c: sum(c) > 0)


# --------------------------------------------------------------------------- the statistic
@settings(max_examples=80, derandomize=True, deadline=None)
@given(ca=counts3, cb=counts3)
def test_pair_cost_matches_scalar_minimisation(ca, cb):
    z = float(kinf_pair_cost([ca], [cb], V3)[0])
    ref = _reference_cost(ca, cb, V3)
    assert z == pytest.approx(ref, rel=1e-7, abs=1e-9)
    assert z <= ref + 1e-9 * max(1.0, ref)  # the solver's minimum is never above another method's


@pytest.mark.parametrize("ca,cb", [([0, 0, 5], [5, 0, 0]), ([0, 0, 7], [0, 3, 0]), ([0, 4, 0], [9, 0, 0]),
                                   ([1, 0, 0], [2, 0, 0]), ([0, 0, 3], [1, 1, 1]), ([1000, 0, 1], [1001, 0, 0]),
                                   ([1, 1, 1], [0, 0, 0]), ([3, 3, 3], [3, 3, 3])])
def test_pair_cost_degenerate_rows(ca, cb):
    z = float(kinf_pair_cost([ca], [cb], V3)[0])
    assert z == pytest.approx(_reference_cost(ca, cb, V3), rel=1e-7, abs=1e-9)


def test_pair_cost_closed_form_point_masses():
    # a: N_a answers all 1, b: N_b answers all 0: Z = inf_x -N_a log x - N_b log(1 - x), at x = N_a / (N_a + N_b)
    na, nb = 7, 3
    x = na / (na + nb)
    expected = -na * math.log(x) - nb * math.log(1 - x)
    assert float(kinf_pair_cost([[0, 0, na]], [[nb, 0, 0]], V3)[0]) == pytest.approx(expected, rel=1e-9)


@settings(max_examples=80, derandomize=True, deadline=None)
@given(ca=counts2, cb=counts2)
def test_equals_bernoulli_glr_on_support_0_1(ca, cb):
    z = float(kinf_pair_cost([ca], [cb], V2)[0])
    na, nb = sum(ca), sum(cb)
    ref = float(glr_pair_cost(ca[1] / na, na, cb[1] / nb, nb)) if na and nb else 0.0
    assert z == pytest.approx(ref, rel=1e-8, abs=1e-9)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(ca=counts3, cb=counts3)
def test_at_least_the_bernoulli_statistic_on_three_ratings(ca, cb):
    z = float(kinf_pair_cost([ca], [cb], V3)[0])
    na, nb = sum(ca), sum(cb)
    zb = float(glr_pair_cost((np.array(ca) @ V3) / na, na, (np.array(cb) @ V3) / nb, nb)) if na and nb else 0.0
    assert z >= zb - 1e-9 * max(1.0, zb)


def test_kinf_at_least_bernoulli_kl_pointwise():
    """The chord inequality behind it: K_inf^+(F, x) >= d(mu_F, x) (and below), random F on {0, 1/2, 1}."""
    rng = np.random.default_rng(0)
    P = rng.dirichlet([0.5, 0.5, 0.5], size=400)
    mu = P @ V3
    for side, x in (("upper", mu + (1 - mu) * rng.random(400) * 0.99), ("lower", mu * rng.random(400))):
        k = kinf(P, V3, x, side=side)
        d = mu * np.log(mu / x) + (1 - mu) * np.log((1 - mu) / (1 - x))
        assert np.all(k >= d - 1e-10)


def test_upper_bound_and_exceeds_are_exact():
    rng = np.random.default_rng(1)
    R = 3000
    n = rng.integers(1, 2000, size=(2, R))
    Ca = np.array([rng.multinomial(k, p) for k, p in zip(n[0], rng.dirichlet([0.4] * 3, R), strict=True)])
    Cb = np.array([rng.multinomial(k, p) for k, p in zip(n[1], rng.dirichlet([0.4] * 3, R), strict=True)])
    z = kinf_pair_cost(Ca, Cb, V3)
    U, x = kinf_pair_upper(Ca, Cb, V3)
    assert np.all(U >= z - 1e-9 * np.maximum(1.0, z))
    pos = z > 0
    assert np.all(np.isnan(x) == ~pos)
    assert np.all(np.isfinite(U))
    near = pos & (z < 20)  # where screening matters (a threshold is ~10-30): tight to second order in the gap
    assert np.median(U[near] / z[near]) < 1.05
    for thr in (0.5, 3.0, 10.0, 40.0, np.linspace(0, 50, R)):
        np.testing.assert_array_equal(kinf_pair_exceeds(Ca, Cb, V3, thr), z > thr)


def test_growth_bound_after_more_answers():
    """After s more answers to the pair, Z_ab and Z_ba are at most U + s c(x)."""
    rng = np.random.default_rng(2)
    rows, bound = [], []
    for _ in range(300):
        p = rng.dirichlet([1, 1, 1], 2)
        Ca, Cb = rng.multinomial(rng.integers(1, 60), p[0]), rng.multinomial(rng.integers(1, 60), p[1])
        if Ca @ V3 / Ca.sum() < Cb @ V3 / Cb.sum():
            Ca, Cb = Cb, Ca
        U, x = kinf_pair_upper([Ca], [Cb], V3)
        if not (np.isfinite(U[0]) and U[0] > 0):
            continue
        c = max(-math.log(x[0]), -math.log1p(-x[0]))
        s = int(rng.integers(1, 8))
        to_a = rng.random(s) < 0.5
        A, B = Ca.copy(), Cb.copy()
        for lab, ta in zip(rng.integers(0, 3, s), to_a, strict=True):
            (A if ta else B)[lab] += 1
        rows.append((A, B))
        bound.append(U[0] + s * c + 1e-9)
    # Z_ab and Z_ba of every case in one vectorised solve, not two per case (the solver works row by row: the same
    # values up to rounding far below the 1e-9 slack)
    A, B = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    both = np.maximum(kinf_pair_cost(A, B, V3), kinf_pair_cost(B, A, V3))
    assert len(rows) > 200
    assert np.all(both <= np.array(bound)), np.flatnonzero(both > np.array(bound))


def _log_wealth(b, X, m):
    """``log W_n(b) = sum_i log(1 - b (X_i - m)/(1 - m))`` for every bet b: the answers take the few support values,
    so the sum runs over the values seen, each term times its count (one log per value and bet, not per answer)."""
    vals, counts = np.unique(X, return_counts=True)
    return np.log1p(-np.outer(b, vals - m) / (1 - m)) @ counts


def test_universal_portfolio_step_of_the_proof():
    """n K_inf^+(F_n, m) <= log(int_0^1 prod_i (1 - b (X_i - m)/(1 - m)) db) + log(n + 1) (kinf_portfolio_threshold)."""
    rng = np.random.default_rng(3)
    b = np.linspace(0.0, 1.0, 20001)
    for _ in range(200):
        n = int(rng.integers(1, 80))
        X = rng.choice(V3, size=n, p=rng.dirichlet([1, 1, 1]))
        m = float(rng.uniform(0.01, 0.99))
        with np.errstate(divide="ignore"):  # W_n(1) = 0 when an answer is 1
            logw = _log_wealth(b, X, m)  # log W_n(b) for every b on the grid
        # trapezoid in log space; log W is concave in b, so the trapezoid underestimates the integral:
        log_mix = special.logsumexp(logw, b=np.r_[0.5, np.ones(b.size - 2), 0.5]) + math.log(b[1] - b[0])
        counts = np.array([(X == v).sum() for v in V3])
        lhs = n * kinf(counts / n, V3, m, side="upper")
        assert lhs <= log_mix + math.log(n + 1) + 1e-9
        assert lhs == pytest.approx(max(logw.max(), 0.0), abs=1e-3 * max(1.0, lhs))  # the dual form: best bet


def _kt_log_mixture(X, m):
    """log of the Dirichlet(1/2, 1/2) mixture of the constant bets ``prod_i (1 - b (X_i - m)/(1 - m))`` over b.

    With b = sin^2(theta) the Beta(1/2, 1/2) density times db is (2/pi) dtheta, a smooth integrand on [0, pi/2]:
    a fine trapezoid in log space (which underestimates, log W being concave in b and the map monotone)."""
    theta = np.linspace(0.0, math.pi / 2, 40001)
    b = np.sin(theta) ** 2
    with np.errstate(divide="ignore"):
        logw = _log_wealth(b, X, m)
    w = np.r_[0.5, np.ones(b.size - 2), 0.5] * (theta[1] - theta[0]) * 2 / math.pi
    return special.logsumexp(logw, b=w), logw


def test_krichevsky_trofimov_step_of_the_proof():
    """n K_inf^+(F_n, m) <= log(KT mixture) + log 2 + (1/2) log(n + 1) (kinf_kt_threshold, Cover-Ordentlich 1996).

    Random ratings, and the extreme sequences (all answers 0 or 1 in any proportion), where the bound is tightest."""
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(150):
        n = int(rng.integers(1, 120))
        cases.append((rng.choice(V3, size=n, p=rng.dirichlet([1, 1, 1])), float(rng.uniform(0.01, 0.99))))
    for n in (1, 2, 5, 20, 100, 400):
        for ones in sorted({0, n // 3, n // 2, n}):
            cases.append((np.r_[np.ones(ones), np.zeros(n - ones)], 0.5))
    worst = -math.inf
    for X, m in cases:
        n = X.size
        log_mix, logw = _kt_log_mixture(X, m)
        counts = np.array([(X == v).sum() for v in V3])
        lhs = n * kinf(counts / n, V3, m, side="upper")
        regret = lhs - log_mix
        assert regret <= kt_regret(n) + 1e-6, (n, m, regret)  # kinf_kt_pair_threshold's per-arm term
        assert kt_regret(n) <= math.log(2.0) + 0.5 * math.log(n + 1) + 1e-12  # and kinf_kt_threshold's bound of it
        worst = max(worst, regret - 0.5 * math.log(n + 1))
        if np.all(X == 1.0):  # one asset only (returns (1, 0) every answer): the worst case, attained
            assert regret == pytest.approx(kt_regret(n), abs=1e-6)
    assert worst > 0.0  # the check can fail: the extreme sequences come within log 2 of the bound


def test_kt_threshold_is_gk16_plus_a_constant():
    from purebandits.glr_thresholds import gk16_threshold

    for t in (10, 1e3, 1e6):
        assert kinf_kt_threshold(t, 20, 0.01) - gk16_threshold(t, 20, 0.01) == pytest.approx(
            math.log((4 + 2 * t) / (2 * t)), rel=1e-9)
        assert kinf_kt_threshold(t, 20, 0.01) < kinf_portfolio_threshold(t, 20, 0.01)


# --------------------------------------------------------------------------- top-k and the stopping rule
def _brute_statistic(C, v, k):
    N = C.sum(axis=1)
    means = (C @ v) / N
    top = sorted(np.lexsort((np.arange(len(means)), -means))[:k])
    z = min(_reference_cost(C[a], C[b], v) for a in top for b in range(len(C)) if b not in top)
    return top, z


@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k_statistic_against_brute_force(k):
    rng = np.random.default_rng(4 + k)
    for _ in range(8):
        C = np.array([rng.multinomial(int(rng.integers(5, 200)), p) for p in rng.dirichlet([1, 1, 1], 5)])
        top, z, (a, b) = kinf_glr_statistic(C, V3, k)
        btop, bz = _brute_statistic(C, V3, k)
        assert list(top) == btop
        assert z == pytest.approx(bz, rel=1e-7, abs=1e-9)
        assert a in top and b not in top
        assert float(kinf_pair_cost([C[a]], [C[b]], V3)[0]) == pytest.approx(z, rel=1e-12)


def test_statistic_zero_without_answers_and_ties_to_lower_index():
    C = np.array([[0, 0, 4], [0, 0, 0], [3, 0, 0]])
    top, z, pair = kinf_glr_statistic(C, V3)
    assert z == 0.0 and pair == (-1, -1) and list(top) == [0]
    assert list(empirical_top([0.5, 0.7, 0.7, 0.1], 1)) == [1]
    assert list(empirical_top([0.5, 0.7, 0.7, 0.1], 2)) == [1, 2]
    top, z, _ = kinf_glr_statistic(np.array([[2, 2, 2], [3, 0, 3], [6, 0, 0]]), V3)
    assert list(top) == [0] and z == 0.0  # arms 0 and 1 tie at 1/2


def test_stop_rule():
    C = np.array([[10, 10, 80], [60, 20, 20], [70, 10, 20]])
    rec, z, beta, stop = kinf_glr_stop(C, V3, t=300, delta=0.01)
    assert rec == 0 and beta == pytest.approx(kinf_portfolio_threshold(300, 3, 0.01))
    assert z == pytest.approx(kinf_glr_statistic(C, V3)[1]) and stop == (z > beta) and stop
    rec, z2, beta2, _ = kinf_glr_stop(C, V3, t=300, delta=0.01, k=2)
    assert rec == (0, 1) and beta2 == pytest.approx(kinf_portfolio_threshold(300, 3, 0.01, 2))
    _, _, beta3, stop3 = kinf_glr_stop(C, V3, t=300, delta=0.01, threshold=lambda t, n, d, k: 1e9)
    assert beta3 == 1e9 and not stop3
    _, _, beta4, _ = kinf_glr_stop(C, V3, t=300, delta=0.01, threshold="gk16")
    assert beta4 == pytest.approx(math.log(2 * 300 * 2 / 0.01))


@pytest.mark.parametrize("kwargs,match", [
    ({"label_counts": [[1, 2, 3]], "values": [0, 0.5]}, "label_counts"),
    ({"label_counts": [[1, -2, 3], [1, 1, 1]], "values": V3}, "nonnegative"),
    ({"label_counts": [[1, 2, 3], [1, 1, 1]], "values": [0, 0.5, 2]}, r"\[0, 1\]"),
    ({"label_counts": [[1, 2, 3], [1, 1, 1]], "values": V3, "k": 2}, "k must be"),
    ({"label_counts": [[1, 2, 3], [1, 1, 1]], "values": V3, "threshold": "nope"}, "unknown threshold"),
    ({"label_counts": [[1, 2, 3], [1, 1, 1]], "values": V3, "delta": 1.0}, "delta"),
    ({"label_counts": [[1, 2, 3], [1, 1, 1]], "values": V3, "t": 0}, "t "),
])
def test_stop_rule_bad_inputs(kwargs, match):
    args = {"t": 10, "delta": 0.1} | kwargs
    with pytest.raises(ValueError, match=match):
        kinf_glr_stop(**args)


# --------------------------------------------------------------------------- validity at equal means
def null_stop_counts(p, v, R=R_RUNS, T=T_MAX, delta=DELTA, seed=0, beta_fn=kinf_portfolio_threshold):
    """(runs that ever stop, ... recommending arm 0, ... arm 1, statistic evaluations) for two arms with the same
    label distribution p on support v; exact decision after every answer (see the module docstring).

    Each run is checked only at its own next possible crossing, so the runs are not stepped answer by answer
    together: every round evaluates all live runs at once, each at its own next check time, with its label counts
    read from per-arm running sums (the same checks, decisions and evaluation count as stepping every answer, in
    ~300 vectorised rounds instead of T = 3000 small ones: 5x less CPU)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(v), size=(R, T), p=p)
    S = len(v)
    # cum[a][r, j] = label counts of arm a after its first j answers; arm 0 answers at odd t, arm 1 at even t
    cum = []
    for a in (0, 1):
        onehot = labels[:, a::2, None] == np.arange(S)
        c = np.zeros((R, onehot.shape[1] + 1, S), dtype=np.int16)  # counts <= T / 2 = 1500
        np.cumsum(onehot, axis=1, dtype=np.int16, out=c[:, 1:])
        cum.append(c)
    beta = np.array([beta_fn(t, 2, delta) for t in range(1, T + 1)])
    stopped = np.zeros(R, dtype=bool)
    rec = np.full(R, -1)
    next_check = np.full(R, 2)  # from the second answer on both arms have one
    live = np.arange(R)
    evaluations = 0
    while live.size:
        t = next_check[live]
        C0 = cum[0][live, (t + 1) // 2].astype(np.float64)
        C1 = cum[1][live, t // 2].astype(np.float64)
        lead0 = (C0 @ v) / C0.sum(axis=1) >= (C1 @ v) / C1.sum(axis=1)  # ties to arm 0
        A = np.where(lead0[:, None], C0, C1)
        B = np.where(lead0[:, None], C1, C0)
        evaluations += live.size
        b = beta[t - 1]
        # kinf_pair_exceeds(A, B, v, b), sharing its upper bound U with the skip below: Z <= U decides where U <= b
        U, x = kinf_pair_upper(A, B, v)
        hit = np.zeros(live.size, dtype=bool)
        need = np.flatnonzero(U > b)
        if need.size:
            hit[need] = kinf_pair_cost(A[need], B[need], v) > b[need]
        stopped[live[hit]] = True
        rec[live[hit]] = np.where(lead0[hit], 0, 1)
        x = np.where(np.isnan(x), (A @ v) / A.sum(axis=1), x)  # Z = 0: any level between the (equal) means
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.maximum(-np.log(x), -np.log1p(-x))
            s = np.floor((b - U) / c)
        s = np.where(np.isfinite(s), np.maximum(s, 1), 1).astype(int)
        next_check[live] = t + s
        live = live[~hit & (t + s <= T)]
    counts = np.bincount(rec[stopped], minlength=2)
    return int(stopped.sum()), int(counts[0]), int(counts[1]), evaluations


def _limit():
    return int(stats.binom.ppf(1.0 - ALPHA, R_RUNS, DELTA))


@pytest.mark.slow  # long runs against the full statistic
def test_skipping_is_exact():
    """The skip-ahead check gives the same stops as the statistic computed after every answer (loose threshold)."""
    loose = lambda t, n, d, k=1: 1.5 + 0.3 * math.log(t)
    p = np.array([0.3, 0.3, 0.4])
    R, T = 300, 400
    skip = null_stop_counts(p, V3, R=R, T=T, seed=7, beta_fn=loose)
    labels = np.random.default_rng(7).choice(3, size=(R, T), p=p)  # the same answers
    C = np.zeros((2, R, 3))
    stopped = np.zeros(R, dtype=bool)
    for t in range(1, T + 1):
        C[(t - 1) % 2] += np.eye(3)[labels[:, t - 1]]
        if t < 2:
            continue
        lead0 = (C[0] @ V3) / C[0].sum(axis=1) >= (C[1] @ V3) / C[1].sum(axis=1)
        A, B = np.where(lead0[:, None], C[0], C[1]), np.where(lead0[:, None], C[1], C[0])
        beta = loose(t, 2, DELTA)
        # Z > beta on the runs that can still change: not those already stopped (stopped only grows), nor those
        # whose Z an upper bound independent of the code under test (_pair_cost_upper, 1e-9 relative margin) puts
        # below beta (3x less CPU than Z on every run at every answer)
        rows = np.flatnonzero(~stopped)
        rows = rows[~(_pair_cost_upper(A[rows], B[rows], V3) < beta * (1 - 1e-9) - 1e-9)]
        if rows.size:
            stopped[rows] |= kinf_pair_cost(A[rows], B[rows], V3) > beta
    assert skip[0] == int(stopped.sum()) > 10
    assert skip[3] < R * (T - 1) / 3


def _round_robin_pair_threshold(t, n, delta, k=1):
    """kinf_kt_pair_threshold under null_stop_counts' round-robin: arm 0 has ceil(t/2) answers, arm 1 floor(t/2)."""
    return kinf_kt_pair_threshold(math.ceil(t / 2), t // 2, n, delta, k)


CAT, CAT2, BERN = ("categorical (0.3, 0.3, 0.4) on {0, 1/2, 1}", [0.3, 0.3, 0.4], V3), \
    ("categorical (0.1, 0.8, 0.1) on {0, 1/2, 1}", [0.1, 0.8, 0.1], V3), ("Bernoulli(0.5) on {0, 1}", [0.5, 0.5], V2)


@pytest.mark.parametrize("case,seed,beta_fn", [
    (CAT, 3811, kinf_portfolio_threshold), (CAT2, 3812, kinf_portfolio_threshold),
    (BERN, 3813, kinf_portfolio_threshold),
    (CAT, 3821, kinf_kt_threshold), (BERN, 3823, kinf_kt_threshold),  # the sharper KT threshold
    (CAT, 3831, _round_robin_pair_threshold), (BERN, 3833, _round_robin_pair_threshold),  # each pair its own
], ids=lambda x: getattr(x, "__name__", None) if callable(x) else None)
@pytest.mark.slow  # R_RUNS seeded null runs per threshold
def test_validity_at_equal_means(case, seed, beta_fn):
    """Every proven K_inf threshold passes the ever-stop check (at most delta's binomial quantile)."""
    name, p, v = case
    ever, rec0, rec1, _ = null_stop_counts(np.array(p), v, seed=seed, beta_fn=beta_fn)
    assert ever <= _limit(), (name, ever, _limit())
    assert ever == rec0 + rec1


if __name__ == "__main__":
    print(f"R = {R_RUNS} runs, T = {T_MAX} answers, delta = {DELTA}, kinf_portfolio_threshold; "
          f"binomial limit = {_limit()}")
    for name, p, v, seed in [("categorical (0.3, 0.3, 0.4) on {0, 1/2, 1}", [0.3, 0.3, 0.4], V3, 3811),
                             ("categorical (0.1, 0.8, 0.1) on {0, 1/2, 1}", [0.1, 0.8, 0.1], V3, 3812),
                             ("Bernoulli(0.5) on {0, 1}", [0.5, 0.5], V2, 3813)]:
        ever, rec0, rec1, ev = null_stop_counts(np.array(p), v, seed=seed)
        print(f"{name}: {ever} runs stop ({ever / R_RUNS:.2%}); recommending arm 0: {rec0}, arm 1: {rec1} "
              f"({ev} statistic checks instead of {R_RUNS * (T_MAX - 1)})")
