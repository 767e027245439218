"""Property tests of every confidence bound in purebandits.bounds (ALGORITHMS.md section 0, 3, 4, 9).

For each bound: lower <= mean <= upper; the width does not grow with the sample count (where the
math says so) nor as delta grows; the vectorised form equals the scalar Numba form; known
constants; and an anytime coverage test on seeded Bernoulli streams: the fraction of streams
whose interval *ever* misses the mean stays within the bound's guarantee plus a binomial
tolerance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from bisection_reference import plain_exact
from purebandits import bounds as B
from purebandits.testing.checks import binomial_tolerance

REL = 1e-12  # rounding slack for monotonicity comparisons of mathematically monotone functions

means_st = st.floats(0.0, 1.0)
t_st = st.integers(1, 10**7)
dt_st = st.integers(1, 10**6)
delta_st = st.floats(1e-9, 0.3)
eps_st = st.floats(0.0, 0.99)
sigma_st = st.floats(0.05, 2.0)
level_st = st.floats(0.0, 50.0)


def _leq(a: float, b: float) -> bool:
    """a <= b up to rounding (relative REL)."""
    return a <= b + REL * abs(b) or a <= b


# ------------------------------------------------------------------------------ constants
def test_known_constants():
    assert B.c_epsilon(0.01) == pytest.approx(21153.4, abs=0.05)
    assert B.c_epsilon(0.1) == pytest.approx(278.72, abs=0.005)
    assert B.c_epsilon(0.5) == pytest.approx(19.366, abs=0.0005)
    assert B.lil_kl_kappa(8, 0.01) == pytest.approx(22.049, abs=5e-4)
    assert B.lil_kl_kappa(8, 0.1) == pytest.approx(28.478, abs=5e-4)
    assert B.lil_kl_c(8) == pytest.approx(1.5510, abs=5e-5)
    assert B.lil_kl_c(4) == pytest.approx(2.0916, abs=5e-5)
    assert B.lil_kl_c(16) == pytest.approx(1.2911, abs=5e-5)
    assert B.ls_delta(0.05, 0.01) == pytest.approx(2.69e-6, rel=2e-3)
    assert 4.73e-7 == pytest.approx(0.01 / B.c_epsilon(0.01), rel=1e-3)  # JLQ17 faithful delta'


def test_lil_kl_c_is_the_smallest_valid_constant():
    """c(N) = sup d(p, m) / d((N p + m)/(N+1), m): L', U' contain L, U; a smaller c does not."""
    N = 8
    grid = np.linspace(1e-4, 1 - 1e-4, 301)
    p, m = np.meshgrid(grid, grid)
    mask = np.abs(p - m) > 1e-9
    ratio = B.kl_bernoulli(p[mask], m[mask]) / B.kl_bernoulli((N * p[mask] + m[mask]) / (N + 1), m[mask])
    assert ratio.max() <= B.lil_kl_c(N) * (1 + 1e-9)
    assert ratio.max() >= 0.97 * B.lil_kl_c(N)  # the sup is approached near the corners


# ------------------------------------------------------------------------------ finite LIL
@given(t=t_st, dt=dt_st, w=delta_st, eps=eps_st, sigma=sigma_st)
def test_lil_radius_plus2_monotone(t, dt, w, eps, sigma):
    r = B.lil_radius_s(float(t), w, eps, sigma, 2.0)
    assert 0 < r < math.inf
    assert _leq(B.lil_radius_s(float(t + dt), w, eps, sigma, 2.0), r)
    assert _leq(B.lil_radius_s(float(t), min(2 * w, 0.9), eps, sigma, 2.0), r)


@given(t=t_st, dt=dt_st, w=delta_st, eps=st.floats(0.001, 0.99), sigma=sigma_st)
def test_lil_radius_plain_monotone(t, dt, w, eps, sigma):
    """Lemma 2.1's U(t, w): non-increasing in t once (1+eps) t >= e (below, log log is < 0)."""
    t = max(t, math.ceil(math.e / (1 + eps)))
    r = B.lil_radius_s(float(t), w, eps, sigma, 0.0)
    assert _leq(B.lil_radius_s(float(t + dt), w, eps, sigma, 0.0), r)
    assert _leq(B.lil_radius_s(float(t), min(2 * w, 0.3), eps, sigma, 0.0), r)
    # the "+2" variant is never smaller than the plain one
    assert _leq(r, B.lil_radius_s(float(t), w, eps, sigma, 2.0))


def test_lil_radius_undefined_is_infinite():
    assert B.lil_radius_s(1.0, 0.01, 0.0, 0.5, 0.0) == math.inf  # log log 1
    assert B.lil_radius_s(0.0, 0.01, 0.0, 0.5, 2.0) == math.inf
    assert math.isfinite(B.lil_radius_s(1.0, 0.01, 0.0, 0.5, 2.0))


@given(m=st.floats(-5, 5), t=t_st, w=delta_st, eps=eps_st, beta=st.floats(0.0, 3.0))
def test_lil_ucb_index_above_mean(m, t, w, eps, beta):
    idx = float(B.lil_ucb_index(m, t, w, epsilon=eps, beta=beta))
    assert idx >= m
    assert idx == pytest.approx(B.lil_ucb_index_s(m, float(t), w, eps, beta, 0.5), rel=1e-12)


@given(T=t_st, dt=dt_st, d=st.floats(1e-12, 0.5), n=st.integers(1, 10**5), eps=eps_st)
def test_ls_radius_monotone(T, dt, d, n, eps):
    r = B.ls_radius_s(float(T), d, float(n), eps, 0.5)
    assert 0 < r < math.inf
    assert _leq(B.ls_radius_s(float(T + dt), d, float(n), eps, 0.5), r)
    assert _leq(B.ls_radius_s(float(T), 2 * d, float(n), eps, 0.5), r)
    # more arms -> smaller per-arm confidence -> larger radius
    assert _leq(r, B.ls_radius_s(float(T), d, float(2 * n), eps, 0.5))


# ------------------------------------------------------------------------------ Hoeffding / LUCB1
@given(u=t_st, du=dt_st, d=delta_st, sigma=sigma_st)
def test_hoeffding_monotone(u, du, d, sigma):
    r = B.hoeffding_radius_s(float(u), d, sigma)
    assert _leq(B.hoeffding_radius_s(float(u + du), d, sigma), r)
    assert _leq(B.hoeffding_radius_s(float(u), 2 * d, sigma), r)


@given(u=st.integers(1, 10**6), t=st.integers(1, 10**6), dt=dt_st, n=st.integers(2, 10**4), d=delta_st,
       sigma=sigma_st)
def test_lucb_radius_monotone(u, t, dt, n, d, sigma):
    """beta(u, t): non-increasing in the pulls u and in delta, non-decreasing in the round t."""
    t = max(t, u)
    r = B.lucb_radius_s(float(u), float(t), float(n), d, 1.25, sigma)
    assert _leq(B.lucb_radius_s(float(u + 1), float(t), float(n), d, 1.25, sigma), r)
    assert _leq(r, B.lucb_radius_s(float(u), float(t + dt), float(n), d, 1.25, sigma))
    assert _leq(B.lucb_radius_s(float(u), float(t), float(n), 2 * d, 1.25, sigma), r)
    # the hoisted round term gives the same radius bit for bit
    assert math.sqrt(B.lucb_rate_s(float(t), float(n), d, 1.25, sigma) / u) == r


# ------------------------------------------------------------------------------ Bernoulli KL
@given(p=means_st, level=level_st)
def test_kl_inversions_bracket_mean(p, level):
    up, lo = B.kl_upper_s(p, level), B.kl_lower_s(p, level)
    assert 0.0 <= lo <= p <= up <= 1.0
    # wider level -> wider interval
    assert B.kl_upper_s(p, level * 2 + 1e-3) >= up
    assert B.kl_lower_s(p, level * 2 + 1e-3) <= lo


@given(p=st.floats(1e-6, 1 - 1e-6), level=st.floats(1e-6, 20.0))
def test_kl_inversions_hit_the_level(p, level):
    """Interior p: d(p, q) == level at the returned q, unless q is clipped at 0 or 1."""
    up = B.kl_upper_s(p, level)
    lo = B.kl_lower_s(p, level)
    assert B.kl_bernoulli_s(p, up) >= level * (1 - 1e-9) or up == 1.0
    assert B.kl_bernoulli_s(p, lo) >= level * (1 - 1e-9) or lo == 0.0
    # conservative end of a bisection bracket narrower than 1e-15: the value just inside is <= level
    if up < 1.0:
        assert B.kl_bernoulli_s(p, max(p, up - 1e-12)) <= level * (1 + 1e-9)
    if lo > 0.0:
        assert B.kl_bernoulli_s(p, min(p, lo + 1e-12)) <= level * (1 + 1e-9)


@njit(cache=True)
def _plain_kl_upper(p, level):
    """The definition: 60 bisection steps on the Pinsker bracket, every step evaluated."""
    lo = p
    hi = min(1.0, p + math.sqrt(level / 2.0))
    if B.kl_bernoulli_s(p, hi) <= level:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if B.kl_bernoulli_s(p, mid) <= level:
            lo = mid
        else:
            hi = mid
    return hi


@njit(cache=True)
def _plain_kl_lower(p, level):
    hi = p
    lo = max(0.0, p - math.sqrt(level / 2.0))
    if B.kl_bernoulli_s(p, lo) <= level:
        return lo
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if B.kl_bernoulli_s(p, mid) <= level:
            hi = mid
        else:
            lo = mid
    return lo


@njit(cache=True)
def _kl_mismatches(ps, levels):  # pragma: no cover - compiled
    bad = 0
    for i in range(ps.shape[0]):
        p, level = ps[i], levels[i]
        bad += B.kl_upper_s(p, level) != _plain_kl_upper(p, level)
        bad += B.kl_lower_s(p, level) != _plain_kl_lower(p, level)
    return bad


@pytest.mark.slow  # every inversion against a plain bisection
def test_kl_inversions_equal_the_plain_bisection():
    """The skipped steps (Newton zone, adjacent-float exit) change no result, bit for bit.

    Interior means of every scale (random, near 0 and 1, ratios of small integers as vote
    counts give) against levels from 1e-9 to 30; 800,000 pairs, each inversion both ways.
    """
    rng = np.random.default_rng(20261124)
    m = 200_000
    ps = np.concatenate([rng.random(m), 10 ** rng.uniform(-12, -0.3, m), 1 - 10 ** rng.uniform(-12, -0.3, m),
                         rng.integers(1, 400, m) / rng.integers(400, 800, m)])
    ps = ps[(ps > 0) & (ps < 1)]
    levels = 10 ** rng.uniform(-9, 1.5, ps.shape[0])
    assert _kl_mismatches(ps, levels) == 0


@njit(cache=True)
def _bracket_misses(ps, levels):  # pragma: no cover - compiled
    """Brackets that do not hold the inversion."""
    miss = 0
    for i in range(ps.shape[0]):
        p, level = ps[i], levels[i]
        for upper in (True, False):
            v = B.kl_upper_s(p, level) if upper else B.kl_lower_s(p, level)
            lo, hi = B.kl_upper_bracket_s(p, level) if upper else B.kl_lower_bracket_s(p, level)
            miss += not (lo <= v <= hi)
    return miss


def test_kl_brackets_contain_the_inversion():
    """The lazy kernels' brackets always hold the exact inversion (the second-order guess included)."""
    rng = np.random.default_rng(7)
    m = 100_000
    ps = np.concatenate([rng.random(m), 10 ** rng.uniform(-12, -0.3, m), 1 - 10 ** rng.uniform(-12, -0.3, m),
                         rng.integers(1, 400, m) / rng.integers(400, 800, m), [0.0, 1.0]])
    levels = np.concatenate([10 ** rng.uniform(-9, 1.5, ps.shape[0] - 2), [0.3, 0.3]])
    assert _bracket_misses(ps, levels) == 0


@given(level=st.floats(0.0, 50.0))
def test_kl_inversions_exact_at_edges(level):
    assert B.kl_upper_s(1.0, level) == 1.0
    assert B.kl_lower_s(0.0, level) == 0.0
    assert B.kl_upper_s(0.0, level) == -math.expm1(-level)
    assert B.kl_lower_s(1.0, level) == math.exp(-level)
    assert B.kl_upper_s(0.3, 0.0) == 0.3 and B.kl_lower_s(0.3, 0.0) == 0.3


@given(t=st.integers(1, 10**7), dt=dt_st, n=st.integers(2, 10**4), d=delta_st, u=st.integers(1, 10**6),
       p=means_st)
def test_kl_lucb_rate_monotone(t, dt, n, d, u, p):
    rate = B.kl_lucb_rate_s(float(t), float(n), d, 1.1, 405.5)
    assert rate > 0
    assert rate <= B.kl_lucb_rate_s(float(t + dt), float(n), d, 1.1, 405.5)
    assert B.kl_lucb_rate_s(float(t), float(n), 2 * d, 1.1, 405.5) <= rate
    # the KL-LUCB interval shrinks with the pulls u
    assert B.kl_upper_s(p, rate / (u + 1)) <= B.kl_upper_s(p, rate / u)
    assert B.kl_lower_s(p, rate / (u + 1)) >= B.kl_lower_s(p, rate / u)


# ------------------------------------------------------------------------------ lil-KLUCB bounds
@pytest.mark.parametrize("form", ["simplified", "exact", "kt"])
@settings(max_examples=60, deadline=None)
@given(p=means_st, T=st.integers(1, 10**6), dT=dt_st, d=st.floats(1e-9, 0.5))
def test_lil_kl_bounds_properties(form, p, T, dT, d):
    lo, up = (float(x) for x in B.lil_kl_bounds(p, T, d, 8, form))
    assert 0.0 <= lo <= p <= up <= 1.0
    lo2, up2 = (float(x) for x in B.lil_kl_bounds(p, T + dT, d, 8, form))
    assert up2 <= up and lo2 >= lo
    lo3, up3 = (float(x) for x in B.lil_kl_bounds(p, T, min(2 * d, 0.9), 8, form))
    assert up3 <= up and lo3 >= lo


@settings(max_examples=60, deadline=None)
@given(p=means_st, T=st.integers(1, 10**6), d=st.floats(1e-9, 0.5))
def test_lil_kl_simplified_contains_exact(p, T, d):
    """With c(N), the simplified L', U' contain eqs. (2)-(3)'s L, U (ALGORITHMS.md 9.2)."""
    lo_s, up_s = B.lil_kl_bounds(p, T, d, 8, "simplified")
    lo_e, up_e = B.lil_kl_bounds(p, T, d, 8, "exact")
    assert lo_s <= lo_e + 1e-12 and up_s >= up_e - 1e-12


@given(T=st.integers(1, 10**7), dT=dt_st, d=st.floats(1e-9, 0.5), N=st.sampled_from([1, 2, 4, 8, 16]))
def test_lil_kl_level_monotone(T, dT, d, N):
    """f(T) = log(kappa log2(2T)/delta)/T has f'(T) = (1/ln(2T) - log(kappa log2(2T)/delta))/T^2,
    so it decreases for every T >= 1 when kappa/delta >= e^(1/ln 2) (log2(2T) >= 1 and
    1/ln(2T) <= 1/ln 2). That holds for N >= 2 at any delta <= 1/2; with N = 1 and delta near 1/2
    the formula itself rises from T = 1 to T = 2 (see the next test)."""
    kappa = B.lil_kl_kappa(N, d)
    lev = B.lil_kl_level_s(float(T), d, kappa)
    assert lev > 0
    if kappa / d >= math.exp(1 / math.log(2)):
        assert B.lil_kl_level_s(float(T + dT), d, kappa) <= lev
    d2 = min(2 * d, 0.9)
    assert B.lil_kl_level_s(float(T), d2, B.lil_kl_kappa(N, d2)) <= lev


def test_lil_kl_level_rises_at_small_kappa_over_delta():
    # N = 1, delta = 1/2: kappa/delta ~ 1.8 < e^(1/ln 2), and f(1) < f(2), as the formula says
    kappa = B.lil_kl_kappa(1, 0.5)
    assert kappa / 0.5 < math.exp(1 / math.log(2))
    assert B.lil_kl_level_s(1.0, 0.5, kappa) < B.lil_kl_level_s(2.0, 0.5, kappa)


@given(T=st.integers(1, 10**7), dT=dt_st, d=st.floats(1e-9, 0.5), sigma=sigma_st)
def test_sg1_monotone(T, dT, d, sigma):
    kappa = B.lil_kl_kappa(8, d)
    r = B.sg1_radius_s(float(T), d, 8.0, sigma, kappa)
    assert 0 < r < math.inf
    assert _leq(B.sg1_radius_s(float(T + dT), d, 8.0, sigma, kappa), r)
    d2 = min(2 * d, 0.9)
    assert _leq(B.sg1_radius_s(float(T), d2, 8.0, sigma, B.lil_kl_kappa(8, d2)), r)


@given(T=st.integers(1, 10**7), dT=dt_st, d=st.floats(1e-9, 0.2), sigma=sigma_st)
def test_sg2_monotone(T, dT, d, sigma):
    """[SG2]: non-increasing in T when x = log(1/d) + 3 log log(1/d) >= 1.5 (d <= 0.2 here)."""
    r = B.sg2_radius_s(float(T), d, sigma)
    assert 0 < r < math.inf
    assert _leq(B.sg2_radius_s(float(T + dT), d, sigma), r)
    assert _leq(B.sg2_radius_s(float(T), min(2 * d, 0.3), sigma), r)


def test_sg2_rejects_large_delta():
    with pytest.raises(ValueError, match="delta"):
        B.sg2_radius(10, 0.5)


# ------------------------------------------------------------------------------ vectorised == scalar
def test_vectorised_equals_scalar():
    rng = np.random.default_rng(0)
    t = np.concatenate([np.arange(1, 200), rng.integers(1, 10**7, 300)]).astype(float)
    p = rng.random(t.size)
    p[:5] = [0.0, 1.0, 0.5, 0.0, 1.0]
    lev = rng.random(t.size) * 5
    close = dict(rtol=1e-12, atol=0.0)
    for w, eps, plus2 in [(1e-3, 0.01, False), (0.05, 0.0, True), (1e-7, 0.5, True)]:
        vec = B.lil_radius(t, w, epsilon=eps, sigma=0.5, plus2=plus2)
        sca = [B.lil_radius_s(x, w, eps, 0.5, 2.0 if plus2 else 0.0) for x in t]
        np.testing.assert_allclose(vec, sca, **close)
    np.testing.assert_allclose(B.ls_radius(t, 2.69e-6, 100), [B.ls_radius_s(x, 2.69e-6, 100.0, 0.01, 0.5) for x in t],
                               **close)
    np.testing.assert_allclose(B.hoeffding_radius(t, 0.05), [B.hoeffding_radius_s(x, 0.05, 0.5) for x in t], **close)
    np.testing.assert_allclose(B.lucb_radius(t, 2 * t, 50, 0.05),
                               [B.lucb_radius_s(x, 2 * x, 50.0, 0.05, 1.25, 0.5) for x in t], **close)
    np.testing.assert_allclose(B.lucb_rate(t, 50, 0.05), [B.lucb_rate_s(x, 50.0, 0.05, 1.25, 0.5) for x in t],
                               **close)
    np.testing.assert_allclose(B.kl_lucb_rate(t, 50, 0.05), [B.kl_lucb_rate_s(x, 50.0, 0.05, 1.1, 405.5) for x in t],
                               **close)
    np.testing.assert_array_equal(B.kl_upper(p, lev), [B.kl_upper_s(a, b) for a, b in zip(p, lev, strict=True)])
    np.testing.assert_array_equal(B.kl_lower(p, lev), [B.kl_lower_s(a, b) for a, b in zip(p, lev, strict=True)])
    kappa = B.lil_kl_kappa(8, 0.01)
    np.testing.assert_allclose(B.lil_kl_level(t, 0.01), [B.lil_kl_level_s(x, 0.01, kappa) for x in t], **close)
    lo, up = B.lil_kl_bounds(p, t, 0.01, 8, "simplified")
    c8 = B.lil_kl_c(8)
    lev_s = [c8 * B.lil_kl_level_s(x, 0.01, kappa) for x in t]
    np.testing.assert_allclose(lo, [B.kl_lower_s(a, b) for a, b in zip(p, lev_s, strict=True)], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(up, [B.kl_upper_s(a, b) for a, b in zip(p, lev_s, strict=True)], rtol=1e-9, atol=1e-12)
    lo, up = B.lil_kl_bounds(p, t, 0.01, 8, "exact")
    lev_e = [B.lil_kl_level_s(x, 0.01, kappa) for x in t]
    np.testing.assert_allclose(lo, [B.lil_kl_lower_exact_s(a, b, 8.0) for a, b in zip(p, lev_e, strict=True)],
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(up, [B.lil_kl_upper_exact_s(a, b, 8.0) for a, b in zip(p, lev_e, strict=True)],
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(B.sg1_radius(t, 0.01), [B.sg1_radius_s(x, 0.01, 8.0, 0.5, kappa) for x in t], **close)
    np.testing.assert_allclose(B.sg2_radius(t, 0.01), [B.sg2_radius_s(x, 0.01, 0.5) for x in t], **close)
    np.testing.assert_allclose(B.kl_bernoulli(p, lev / 6 + 0.01),
                               [B.kl_bernoulli_s(a, b) for a, b in zip(p, lev / 6 + 0.01, strict=True)], **close)


# ------------------------------------------------------------------------------ anytime coverage
STREAMS, STEPS, CHUNK = 2000, 20000, 250


#: below this t every count is checked exactly (the band's margin argument wants a few dozen answers)
BAND_FROM = 64


def _sure_band(miss_fn, mu: float, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per t = 1..STEPS, integers [lo_t, hi_t] of counts k (a stream's mean at t being k * scale / t) for which
    ``miss_fn`` is surely False, so that only the counts outside need evaluating (a few per stream).

    Each bound here misses on the two tails outside an interval around mu (``|m - mu| > r`` and ``d(m, mu) > level``
    are convex in m). Bisection from the count nearest mu finds the extreme counts L_t, U_t that ``miss_fn`` accepts;
    the band is one count inside them, [L_t + 1, U_t - 1]: every count there lies between two accepted ones and
    a whole step 1/t away from the last, far more (for t >= BAND_FROM) than rounding could move the comparison.
    The counts outside the band are evaluated with the same function on the same floats (k * scale / t) as
    evaluating every count, so the number of streams that ever miss is the same."""
    i = np.arange(STEPS)
    T = i + 1.0
    n = np.round(T / scale).astype(np.int64)  # the largest count at t
    miss = lambda k: np.asarray(miss_fn(k * scale / T, i))  # noqa: E731
    k0 = np.clip(np.round(mu * n), 0, n).astype(np.int64)
    inside = ~miss(k0)
    a, b = k0.copy(), n + 1  # accepted, missed (n + 1: beyond the largest count)
    while np.any(act := b - a > 1):
        mid = (a + b) // 2
        f = miss(np.where(act, mid, k0))
        a, b = np.where(act & ~f, mid, a), np.where(act & f, mid, b)
    hi = a - 1
    a, b = np.full(STEPS, -1), k0.copy()  # missed (-1: below the smallest count), accepted
    while np.any(act := b - a > 1):
        mid = (a + b) // 2
        f = miss(np.where(act, mid, k0))
        a, b = np.where(act & f, mid, a), np.where(act & ~f, mid, b)
    lo = b + 1
    empty = ~inside | (T < BAND_FROM)
    return np.where(empty, 1, lo), np.where(empty, 0, hi)


def _missed_streams(K: np.ndarray, band, miss_fn, scale: float = 1.0) -> int:
    """Streams (rows of running counts K, mean k * scale / t) whose interval misses at some t: ``miss_fn`` evaluated
    on the counts outside the sure band only (:func:`_sure_band`)."""
    lo, hi = band
    rows, cols = np.nonzero((K < lo) | (K > hi))
    hit = np.asarray(miss_fn(K[rows, cols] * scale / (cols + 1.0), cols), dtype=bool)
    return int(np.unique(rows[hit]).size)


def _ever_missed(mu: float, seed: int, miss_fn, streams: int = STREAMS) -> int:
    """Number of seeded Bernoulli(mu) streams whose interval misses mu at some t <= STEPS.

    ``miss_fn(m, i)``: does the interval at t = i + 1 miss mu when the empirical mean is m (arrays, broadcast)."""
    rng = np.random.default_rng(seed)
    band = _sure_band(miss_fn, mu)
    missed = 0
    # the draws of rng.random((CHUNK, STEPS)) and their running counts, in buffers kept across chunks (a third of
    # the CPU of allocating 40 MB of fresh pages per chunk)
    u, below, S = np.empty((CHUNK, STEPS)), np.empty((CHUNK, STEPS), dtype=bool), np.empty((CHUNK, STEPS), np.int32)
    for _ in range(streams // CHUNK):
        rng.random(out=u)
        np.less(u, mu, out=below)
        np.cumsum(below, axis=1, dtype=np.int32, out=S)
        missed += _missed_streams(S, band, miss_fn)
    return missed


def test_sure_band_evaluates_as_every_count():
    """The screen changes no count: no entry in the band misses, and the streams that miss, found from the counts
    outside it, are those of miss_fn on every entry (bounds of three shapes, each missing on some streams)."""
    rng = np.random.default_rng(3)
    r = B.lil_radius(np.arange(1, STEPS + 1), 0.05, epsilon=0.0, sigma=0.5, plus2=True)
    level = B.lil_kl_level(np.arange(1, STEPS + 1), 0.05, 8)
    for mu, miss in [(0.5, lambda m, i: np.abs(m - 0.5) > r[i]),
                     (0.05, lambda m, i: B.kl_bernoulli(m, 0.05) > level[i]),
                     (0.95, lambda m, i: B.kl_bernoulli((8 * m + 0.95) / 9, 0.95) > level[i] / 4)]:
        S = np.cumsum(rng.random((CHUNK, STEPS)) < mu, axis=1, dtype=np.int32)
        full = miss(S / np.arange(1, STEPS + 1.0), np.arange(STEPS))
        lo, hi = _sure_band(miss, mu)
        assert not full[(S >= lo) & (S <= hi)].any()  # nothing in the band misses
        assert _missed_streams(S, (lo, hi), miss) == int(full.any(axis=1).sum()) > 0


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 0.1])
def test_anytime_coverage_lil(mu):
    """JMNB14 Lemma 1 per tail: P(ever mean_t - mu > U(t, w)) <= c_eps w^(1+eps); both tails."""
    eps, w = 0.01, 2e-6
    per_tail = B.c_epsilon(eps) * w ** (1 + eps)
    r = B.lil_radius(np.arange(1, STEPS + 1), w, epsilon=eps, sigma=0.5)
    missed = _ever_missed(mu, 11, lambda m, i: np.abs(m - mu) > r[i])
    assert missed <= binomial_tolerance(STREAMS, min(1.0, 2 * per_tail))


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 0.1])
def test_anytime_coverage_lil_plus2_heuristic(mu):
    """The "+2", eps = 0 LIL radius (no theorem); at w = 0.05 it still covers in practice."""
    w = 0.05
    r = B.lil_radius(np.arange(1, STEPS + 1), w, epsilon=0.0, sigma=0.5, plus2=True)
    missed = _ever_missed(mu, 12, lambda m, i: np.abs(m - mu) > r[i])
    assert missed <= binomial_tolerance(STREAMS, 2 * w)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["simplified", "exact"])
@pytest.mark.parametrize("mu", [0.5, 0.05, 0.95])
def test_anytime_coverage_lil_kl(form, mu):
    """TNM17 Thm 2: each side holds for all T w.p. >= 1 - delta (checked as d(.,mu) > level)."""
    d, N = 0.05, 8
    level = B.lil_kl_level(np.arange(1, STEPS + 1), d, N)
    if form == "simplified":
        level = B.lil_kl_c(N) * level
        miss = lambda m, i: B.kl_bernoulli(m, mu) > level[i]  # noqa: E731 - mu outside [L', U']
    else:
        miss = lambda m, i: B.kl_bernoulli((N * m + mu) / (N + 1), mu) > level[i]  # noqa: E731 - eqs. (2)-(3)
    missed = _ever_missed(mu, 13, miss)
    assert missed <= binomial_tolerance(STREAMS, 2 * d)


def test_kt_level_matches_the_glr_regret():
    """The scalar KT level uses the same regret as the GLR thresholds, and is the stated formula."""
    from purebandits.glr_thresholds import kt_regret

    for T in (1.0, 2.0, 17.0, 1e3, 1e6, 1e9):
        assert B.kt_regret_s(T) == pytest.approx(kt_regret(T), rel=1e-12)
        assert B.kt_kl_level_s(T, 0.01) == pytest.approx((math.log(100.0) + kt_regret(T)) / T, rel=1e-12)
    assert B.kt_kl_level_s(0.0, 0.01) == math.inf
    with pytest.raises(ValueError, match="'kt'"):
        B.lil_kl_bounds(0.5, 10, 0.01, 8, "tnm")


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 0.05, 0.95])
def test_anytime_coverage_kt(mu):
    """bounds.kt_kl_level_s: each side holds for all T w.p. >= 1 - delta on Bernoulli(mu) streams."""
    d = 0.05
    level = B._kt_kl_level_v(np.arange(1, STEPS + 1, dtype=np.float64), d)
    missed = _ever_missed(mu, 14, lambda m, i: B.kl_bernoulli(m, mu) > level[i])
    assert missed <= binomial_tolerance(STREAMS, 2 * d)


@pytest.mark.slow
def test_anytime_coverage_kt_ratings():
    """The KT level holds for rewards on {0, 1/2, 1} too (any law on [0, 1]): rating streams with mean 0.3.

    The proof's betting martingale is exact for any such law, so the miss rate is at most 2 delta here as well."""
    d, probs, values = 0.05, np.array([0.55, 0.3, 0.15]), np.array([0.0, 0.5, 1.0])
    mu = float(probs @ values)
    level = B._kt_kl_level_v(np.arange(1, STEPS + 1, dtype=np.float64), d)
    rng = np.random.default_rng(15)
    miss = lambda m, i: B.kl_bernoulli(m, mu) > level[i]  # noqa: E731
    band = _sure_band(miss, mu, scale=0.5)
    missed = 0
    for _ in range(STREAMS // CHUNK):
        # the running sums of the ratings in halves: 2 x the sum (values[j] = j / 2), exact as the float sums are
        halves = np.searchsorted(np.cumsum(probs), rng.random((CHUNK, STEPS)), side="right")
        missed += _missed_streams(np.cumsum(halves, axis=1, dtype=np.int32), band, miss, scale=0.5)
    assert missed <= binomial_tolerance(STREAMS, 2 * d)


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 0.1])
def test_anytime_coverage_sg2(mu):
    """KCG16 Thm 8 (beta = 3/2) per tail below delta for delta <~ 0.09."""
    d = 0.05
    r = B.sg2_radius(np.arange(1, STEPS + 1), d)
    missed = _ever_missed(mu, 14, lambda m, i: np.abs(m - mu) > r[i])
    assert missed <= binomial_tolerance(STREAMS, 2 * d)


def test_coverage_harness_detects_a_too_narrow_bound():
    """The harness can fail: a fixed-time Hoeffding radius used at every t misses far too often."""
    d = 0.05
    r = B.hoeffding_radius(np.arange(1, STEPS + 1), d / 2)
    missed = _ever_missed(0.5, 15, lambda m, i: np.abs(m - 0.5) > r[i], streams=250)
    print("fixed-time Hoeffding: missed", missed, "of 250")
    assert missed > binomial_tolerance(250, d)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.integers(0, 2**31 - 1), st.booleans(), st.integers(-2, 9),
       st.floats(-1.0, 30.0), st.booleans())
def test_glr_stop_decides_as_the_full_statistic(n, seed, gaussian, hint, threshold, some_zero):
    """glr_stop_s, with any hint, returns the empirical best and ``Z > threshold`` of glr_statistic_s,
    and a hint that attains Z after every full evaluation."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 30, n)
    if some_zero:
        counts[rng.integers(n)] = 0
    sums = rng.binomial(counts, rng.uniform(0.2, 0.8, n)).astype(np.float64)
    if rng.random() < 0.3:  # exact ties in the means
        sums[:] = counts * 0.5
    best, z = B.glr_statistic_s(sums, counts, gaussian, 0.5)
    b2, stop, new_hint = B.glr_stop_s(sums, counts, gaussian, 0.5, threshold, hint)
    assert b2 == best
    assert stop == (z > threshold)
    if new_hint != hint and new_hint >= 0:  # a full evaluation: the new hint attains Z
        w = B.glr_pair_cost_s(sums[best] / counts[best], float(counts[best]), sums[new_hint] / counts[new_hint],
                              float(counts[new_hint]), gaussian, 0.5)
        assert w == z


def test_glr_stop_along_a_run_with_its_hint():
    """Threaded through a run (as the Track-and-Stop and top-two kernels do), the hint never changes a decision."""
    rng = np.random.default_rng(3)
    mu = np.array([0.5, 0.48, 0.3, 0.45, 0.1])
    counts = np.zeros(5, np.int64)
    sums = np.zeros(5)
    hint, shortcuts = -1, 0
    for t in range(1, 4000):
        arm = int(rng.integers(5)) if t > 5 else t - 1
        counts[arm] += 1
        sums[arm] += float(rng.random() < mu[arm])
        thr = B.glr_threshold_s(float(t), 5.0, 0.01, False)
        best, z = B.glr_statistic_s(sums, counts, False, 0.5)
        b2, stop, new = B.glr_stop_s(sums, counts, False, 0.5, thr, hint)
        assert (b2, stop) == (best, z > thr)
        shortcuts += new == hint
        hint = new
    assert shortcuts > 3000  # the O(1) test decides most pulls


# ------------------------------------------------ exact lil-KL bounds: stepped, zoned, == plain bisection
@njit(cache=True)
def _stepped_exact(p, level, N, upper, chunk):  # pragma: no cover - compiled
    """The compiled LUCB kernel's way: the zone of lil_kl_exact_zone_s, then steps in chunks."""
    lo, hi = (p, 1.0) if upper else (0.0, p)
    end = 1.0 if upper else 0.0
    if B._g_exact(p, end, N) <= level:
        return end
    za, zb = B.lil_kl_exact_zone_s(p, level, N, upper)
    it = 0
    done = False
    while not done:
        lo, hi, it, done = B.lil_kl_exact_steps_s(p, level, N, upper, lo, hi, it, chunk, za, zb)
        if not lo <= hi:
            return math.nan
    return hi if upper else lo


def _exact_cases(seed=0, size=4000):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 1, size // 2), rng.integers(0, 41, size // 4) / 40.0,
                        10.0 ** rng.uniform(-9, 0, size // 8), 1 - 10.0 ** rng.uniform(-9, 0, size // 8)])
    T = np.floor(10.0 ** rng.uniform(0, 7.5, p.size))
    kappa = B.lil_kl_kappa(8, 0.005)
    level = np.array([B.lil_kl_level_s(t, 0.005, kappa) for t in T])
    return p, level


@pytest.mark.slow  # every inversion against a plain bisection
def test_exact_lil_kl_bounds_equal_plain_bisection():
    """The early stop (a step that changes nothing) and the zone skip no outcome: same bits."""
    p, level = _exact_cases()
    for upper in (True, False):
        plain = np.array([plain_exact(a, b, 8.0, upper) for a, b in zip(p, level, strict=True)])
        fn = B.lil_kl_upper_exact_s if upper else B.lil_kl_lower_exact_s
        np.testing.assert_array_equal([fn(a, b, 8.0) for a, b in zip(p, level, strict=True)], plain)
        for chunk in (1, 3, 60):
            np.testing.assert_array_equal([_stepped_exact(a, b, 8.0, upper, chunk)
                                           for a, b in zip(p, level, strict=True)], plain)


def test_exact_zone_certifies_its_outside():
    """Midpoints just outside the zone (where steps are skipped) evaluate as the zone says."""
    p, level = _exact_cases(1, 1000)
    used = 0
    for a, b in zip(p, level, strict=True):
        for upper in (True, False):
            za, zb = B.lil_kl_exact_zone_s(a, b, 8.0, upper)
            if not math.isfinite(za):
                continue
            used += 1
            below_a, below_b = [], []
            for k in range(0, 40):
                below_a.append(B._g_exact(a, za - k * 1e-14 * max(za, 1e-300) - k * 1e-17, 8.0) <= b)
                below_b.append(B._g_exact(a, zb + k * 1e-14 * max(zb, 1e-300) + k * 1e-17, 8.0) <= b)
            assert all(x == upper for x in below_a) and all(x != upper for x in below_b)
    assert used > 1000  # the zone is found for most cases
