"""Per-arm K_inf bounds (purebandits.kinf_bounds): the divergence, the inversion, and the anytime coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from purebandits.bounds import kl_bernoulli_s, kl_lower_s, kl_upper_s, kt_kl_level_s, kt_regret_binary_s, kt_regret_s
from purebandits.kinf_bounds import (
    arm_probabilities_s,
    kinf_lower,
    kinf_lower_s,
    kinf_plus_s,
    kinf_upper,
    kinf_upper_s,
)
from purebandits.lower_bound import kinf
from purebandits.testing.checks import binomial_tolerance

V3 = np.array([0.0, 0.5, 1.0])


def _laws(seed: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet([1.0, 1.0, 1.0], size=size)
    P[::5, 2] = 0.0  # no atom at the top: the bet may sit at its end
    P[1::5, 0] = 0.0
    return P / P.sum(axis=1, keepdims=True)


def test_kinf_matches_the_lower_bound_solver():
    """The dual's optimum equals lower_bound.kinf (an independent solver) on random laws and points."""
    rng = np.random.default_rng(1)
    for p in _laws(2, 400):
        mu = float(p @ V3)
        x = mu + (1.0 - mu) * rng.uniform(0.01, 0.99)
        assert kinf_plus_s(p, V3, x) == pytest.approx(float(kinf(p, V3, x, side="upper")), rel=1e-7, abs=1e-12)
    assert kinf_plus_s(np.array([0.5, 0.0, 0.5]), V3, 0.4) == 0.0  # at or below the mean


def test_upper_bound_is_the_root_from_above_and_inside_the_kl_bound():
    rng = np.random.default_rng(3)
    for p in _laws(4, 600):
        level = 10.0 ** rng.uniform(-6, 0.5)
        mu = float(p @ V3)
        u = kinf_upper_s(p, V3, level)
        assert mu <= u <= kl_upper_s(mu, level) + 1e-9  # K_inf^+ >= d(mu, .)
        if u < 1.0:
            k = kinf_plus_s(p, V3, u)
            assert k >= level * (1 - 1e-9)  # never narrower than the true bound
            if u < 0.999:
                assert k <= level * (1 + 1e-6) + 1e-12  # and tight
        lo = kinf_lower_s(p, V3, level)
        assert kl_lower_s(mu, level) - 1e-9 <= lo <= mu
        # the lower bound of F is 1 - the upper bound of the reflected law
        assert lo == pytest.approx(1.0 - kinf_upper_s(p[::-1].copy(), 1.0 - V3[::-1], level), abs=1e-15)


def test_bernoulli_support_gives_the_kl_bound():
    """On {0, 1} K_inf is the Bernoulli KL, so the bound is the KL bound (to the inversion's margin)."""
    for q, level in [(0.3, 0.01), (0.7, 0.2), (0.05, 1e-4), (0.5, 2.0)]:
        p = np.array([1.0 - q, q])
        assert kinf_upper_s(p, np.array([0.0, 1.0]), level) == pytest.approx(kl_upper_s(q, level), rel=1e-9)
        assert kinf_lower_s(p, np.array([0.0, 1.0]), level) == pytest.approx(kl_lower_s(q, level), rel=1e-9)


def test_narrower_than_kl_when_ratings_vary_less():
    """All mass on 1/2: variance 0 against 1/4 for a Bernoulli of the same mean, so a much narrower bound."""
    p = np.array([0.1, 0.8, 0.1])
    u, lo = kinf_upper(p, V3, 0.01)[0], kinf_lower(p, V3, 0.01)[0]
    assert u - lo < 0.6 * (kl_upper_s(0.5, 0.01) - kl_lower_s(0.5, 0.01))
    with pytest.raises(ValueError, match="support"):
        kinf_upper([[0.5, 0.5]], V3, 0.1)


def test_arm_probabilities_from_moments():
    out = np.empty(3)
    c = np.array([7.0, 2.0, 5.0])
    n, s, q = c.sum(), float(c @ V3), float(c @ V3**2)
    arm_probabilities_s(n, s, q, V3, out)
    np.testing.assert_allclose(out, c / n, atol=1e-12)
    out2 = np.empty(2)
    arm_probabilities_s(10.0, 3.0, 3.0, np.array([0.0, 1.0]), out2)
    np.testing.assert_allclose(out2, [0.7, 0.3], atol=1e-12)


@njit(cache=True)
def _linear_tilt_kl(p: np.ndarray, v: np.ndarray, x: float) -> float:  # pragma: no cover - compiled
    """An upper bound of ``K_inf^+(F, x)`` (F = p on v): KL(F, G) for G_j = p_j (1 + l (v_j - mu)), l = (x - mu)/var,
    a law on the support with mean x, when every weight is positive (else inf; 0 when x <= mu)."""
    mu = 0.0
    var = 0.0
    for j in range(v.shape[0]):
        mu += p[j] * v[j]
    if x <= mu:
        return 0.0
    for j in range(v.shape[0]):
        var += p[j] * (v[j] - mu) ** 2
    if var <= 1e-12:
        return math.inf
    lam = (x - mu) / var
    kl = 0.0
    for j in range(v.shape[0]):
        if p[j] > 0.0:
            g = 1.0 + lam * (v[j] - mu)
            if g <= 0.0:
                return math.inf
            kl -= p[j] * math.log(g)
    return kl


@njit(cache=True)
def _missed(draws: np.ndarray, mu: float, w: float, screen: bool = True) -> int:  # pragma: no cover - compiled
    """Streams (rows of rating indices) on which some T has T K_inf(F_T, mu) above the KT level on either side.

    With ``screen``, K_inf itself (a Newton solve) is computed only where a closed-form upper bound
    (:func:`_linear_tilt_kl`) does not already put it below the level with a 1e-9 relative margin: the same
    decisions, most steps far cheaper (``screen=False`` is the reference of the screen)."""
    missed = 0
    p = np.empty(3)
    rp = np.empty(3)
    rv = np.array([0.0, 0.5, 1.0])
    for r in range(draws.shape[0]):
        c = np.zeros(3)
        for t in range(draws.shape[1]):
            c[draws[r, t]] += 1.0
            T = t + 1.0
            level = kt_kl_level_s(T, w)
            for j in range(3):
                p[j] = c[j] / T
                rp[j] = c[2 - j] / T
            sure = level * (1.0 - 1e-9)
            if screen and _linear_tilt_kl(p, rv, mu) <= sure and _linear_tilt_kl(rp, rv, 1.0 - mu) <= sure:
                continue
            if kinf_plus_s(p, rv, mu) > level or kinf_plus_s(rp, rv, 1.0 - mu) > level:
                missed += 1
                break
    return missed


@pytest.mark.slow  # every screen against the exact solve
def test_linear_tilt_screen_is_an_upper_bound_and_changes_no_decision():
    """The screen of the coverage test below: above K_inf on random laws and levels, and the same missed count as
    K_inf at every step on short streams of a bound tight enough to miss often."""
    rng = np.random.default_rng(29)
    for p in _laws(6, 600):
        mu = float(p @ V3)
        x = mu + (1.0 - mu) * rng.uniform(0.0, 0.99)
        assert _linear_tilt_kl(p, V3, x) >= kinf_plus_s(p, V3, x) * (1 - 1e-10)  # within the margin _missed keeps
    probs = np.array([0.55, 0.3, 0.15])
    draws = np.searchsorted(np.cumsum(probs), rng.random((300, 300)), side="right").astype(np.int64)
    mu = float(probs @ V3)
    for w in (0.05, 0.5, 0.95):
        assert _missed(draws, mu, w) == _missed(draws, mu, w, False)
    assert 0 < _missed(draws, mu, 0.95) < 300


@pytest.mark.slow
@pytest.mark.parametrize("probs", [(0.55, 0.3, 0.15), (0.1, 0.8, 0.1), (0.7, 0.0, 0.3)])
def test_anytime_coverage_on_ratings(probs):
    """Both K_inf bounds at the KT level (bounds.kt_kl_level_s) hold for all T <= 5,000 with probability >= 1 - 2w,
    on 1,000 seeded rating streams per law: the count of streams missed is within a one-sided binomial test at
    level 1e-3 of rate 2w = 0.1."""
    w, streams, steps = 0.05, 1000, 5000
    probs = np.array(probs)
    rng = np.random.default_rng(17)
    draws = np.searchsorted(np.cumsum(probs), rng.random((streams, steps)), side="right").astype(np.int64)
    mu = float(probs @ V3)
    assert _missed(draws, mu, w) <= binomial_tolerance(streams, 2 * w)


def test_level_is_finite_and_positive():
    assert math.isfinite(kt_kl_level_s(5.0, 0.01)) and kt_kl_level_s(5.0, 0.01) > 0


def test_binary_regret_is_the_mixtures_exact_regret():
    """``T d(s/T, m) - kt_regret_binary_s(s, f)`` is the log-wealth of the Dirichlet(1/2, 1/2) mixture of the bets
    ``b X/m + (1 - b)(1 - X)/(1 - m)`` on s ones and f zeros (by quadrature); it is at most kt_regret(T), with
    equality at the extremes."""
    from scipy import integrate

    rng = np.random.default_rng(5)
    for _ in range(40):
        T = int(rng.integers(1, 400))
        s = int(rng.integers(0, T + 1))
        f = T - s
        m = float(rng.uniform(0.02, 0.98))
        # log of the mixture's wealth; b = sin^2(u) makes the Beta(1/2, 1/2) density the constant 2/pi in u, and
        # the integrand is scaled by its maximum for the quadrature
        b0 = s / T
        peak = (s * math.log(b0) if s else 0.0) + (f * math.log1p(-b0) if f else 0.0)
        u0 = math.asin(math.sqrt(b0))

        def density(u: float, s: int = s, f: int = f, peak: float = peak) -> float:
            return (2 / math.pi) * math.exp(2 * s * math.log(max(math.sin(u), 1e-300))
                                            + 2 * f * math.log(max(math.cos(u), 1e-300)) - peak)

        val, _ = integrate.quad(density, 0, math.pi / 2, points=[u0], limit=400, epsabs=0, epsrel=1e-12)
        log_w = math.log(val) + peak - s * math.log(m) - f * math.log1p(-m)
        assert log_w == pytest.approx(T * kl_bernoulli_s(s / T, m) - kt_regret_binary_s(s, f), abs=1e-7)
        assert kt_regret_binary_s(s, f) <= kt_regret_s(T) + 1e-12
    assert kt_regret_binary_s(0.0, 50.0) == pytest.approx(kt_regret_s(50.0), rel=1e-14)
    assert kt_regret_s(1e4) - kt_regret_binary_s(5e3, 5e3) == pytest.approx(0.5 * math.log(2), abs=1e-3)


@njit(cache=True)
def _missed_binary(draws: np.ndarray, mu: float, w: float) -> int:  # pragma: no cover - compiled
    """0/1 streams on which some T has T d(mu_hat, mu) above log(1/w) + the mixture's exact regret (either side)."""
    missed = 0
    for r in range(draws.shape[0]):
        s = 0.0
        for t in range(draws.shape[1]):
            s += draws[r, t]
            T = t + 1.0
            if T * kl_bernoulli_s(s / T, mu) > math.log(1.0 / w) + kt_regret_binary_s(s, T - s):
                missed += 1
                break
    return missed


@pytest.mark.parametrize("mu", [0.3, 0.7])
def test_anytime_coverage_with_the_exact_binary_regret(mu):
    """On 0/1 answers, the level with the mixture's exact regret holds for all T <= 3,000 on both sides at once
    with probability >= 1 - w (one martingale excludes both sides): on 1,000 seeded streams the count of streams
    missed is within a one-sided binomial test at level 1e-3 of rate w = 0.1."""
    w, streams, steps = 0.1, 1000, 3000
    rng = np.random.default_rng(23)
    draws = (rng.random((streams, steps)) < mu).astype(np.float64)
    assert _missed_binary(draws, mu, w) <= binomial_tolerance(streams, w)
