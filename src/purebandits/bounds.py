"""Confidence bounds for pure exploration: the one place the math lives.

Every bound has a scalar, Numba-compiled form (suffix ``_s``, called by the learners' hot
paths and the compiled simulation kernels) and a public vectorised form (NumPy broadcasting
over arrays). Formulas and constants follow ``ALGORITHMS.md`` section 0 and the papers cited
in each docstring; radii are one-sided (one tail) unless the docstring says otherwise.

Where a radius is undefined (the iterated logarithm of something below one), it is returned as
``+inf``: an infinite radius is always a valid (if useless) confidence bound.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, vectorize
from numpy.typing import ArrayLike

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

#: what the vectorised forms return: an array, or a float for scalar input
ArrayOrFloat = np.ndarray | float

__all__ = [
    "c_epsilon",
    "lil_radius",
    "lil_ucb_index",
    "ls_radius",
    "ls_delta",
    "lil_stopping_arm",
    "hoeffding_radius",
    "lucb_radius",
    "lucb_rate",
    "kl_bernoulli",
    "kl_upper",
    "kl_lower",
    "kl_lucb_rate",
    "lil_kl_kappa",
    "lil_kl_c",
    "lil_kl_level",
    "lil_kl_bounds",
    "sg1_radius",
    "sg2_radius",
    "chernoff_information",
    "edmm_radius",
    "glr_pair_cost",
    "glr_statistic",
    "glr_threshold",
]

_LOG2 = math.log(2.0)


# --------------------------------------------------------------------------- finite LIL
def c_epsilon(epsilon: float) -> float:
    """``c_eps = (2+eps)/eps * (1/log(1+eps))^(1+eps)`` (JMNB14 Lemma 1; JLQ17 Lemma 2.1).

    c_0.01 = 21153.4, c_0.1 = 278.72, c_0.5 = 19.366.
    """
    if not 0.0 < epsilon:
        raise ValueError(f"epsilon must be > 0 for c_epsilon, got {epsilon}")
    return (2.0 + epsilon) / epsilon * (1.0 / math.log1p(epsilon)) ** (1.0 + epsilon)


@njit(cache=True)
def lil_radius_s(t: float, w: float, eps: float, sigma: float, offset: float) -> float:
    """Scalar finite-LIL radius U(t, w); ``offset`` is 0 (Lemma 2.1) or 2 (the "+2" variant)."""
    if t <= 0.0:
        return math.inf
    inner = math.log((1.0 + eps) * t + offset)
    if inner <= 0.0:
        return math.inf
    # clamp log(inner / w) below at 1: only enlarges the radius (still valid), keeps it defined
    ll = math.log(inner / w) if inner > w * math.e else 1.0
    return (1.0 + math.sqrt(eps)) * math.sqrt(2.0 * sigma * sigma * (1.0 + eps) * ll / t)


@vectorize(nopython=True, cache=True)
def _lil_radius_v(t, w, eps, sigma, offset):  # pragma: no cover - thin ufunc shell
    return lil_radius_s(t, w, eps, sigma, offset)


def lil_radius(t: ArrayLike, w: ArrayLike,
               epsilon: float = 0.01, sigma: float = 0.5, plus2: bool = False) -> ArrayOrFloat:
    """Finite-LIL anytime radius ``U(t, w)`` (JLQ17 Lemma 2.1, from JMNB14 Lemma 1).

    ``U(t,w) = (1+sqrt(eps)) sqrt(2 sigma^2 (1+eps)/t * log(log((1+eps) t)/w))``. With
    probability at least ``1 - c_eps w^(1+eps)``, ``mean_t - mu <= U(t, w)`` for all t >= 1
    (eps in (0, 1), w in (0, log(1+eps)/e)). ``plus2=True`` uses ``log((1+eps) t + 2)``
    (JLQ17 Sec. 5, JMNB14 footnote 1), which is defined for every t >= 1 and allows eps = 0.
    The inner ``log(.../w)`` is clamped below at 1, which only enlarges the radius.
    """
    return _lil_radius_v(np.asarray(t, dtype=float), w, epsilon, sigma, 2.0 if plus2 else 0.0)


@njit(cache=True)
def lil_ucb_index_s(mean: float, t: float, delta: float, eps: float, beta: float, sigma: float) -> float:
    """Scalar lil'UCB index ``mean + (1+beta) U(t, delta)`` (JMNB14 Fig. 1)."""
    return mean + (1.0 + beta) * lil_radius_s(t, delta, eps, sigma, 0.0)


def lil_ucb_index(mean: ArrayLike, t: ArrayLike, delta: float,
                  epsilon: float = 0.01, beta: float = 1.0, sigma: float = 0.5) -> ArrayOrFloat:
    """lil'UCB sampling index ``mean + (1+beta) U(t, delta)`` (JMNB14 Fig. 1, eq. for I_t).

    At eps = 0 and t = 1 the iterated log is undefined and the index is ``+inf`` (each arm is
    then sampled at least twice), as in banditpylib's heuristic lil'UCB.
    """
    return np.asarray(mean, dtype=float) + (1.0 + beta) * lil_radius(t, delta, epsilon, sigma)


@njit(cache=True)
def ls_radius_s(T: float, d_ls: float, n: float, eps: float, sigma: float) -> float:
    """Scalar LIL stopping radius B(T) (see :func:`ls_radius`)."""
    if T <= 0.0:
        return math.inf
    arg = 2.0 * math.log((1.0 + eps) * T + 2.0) / (d_ls / n)
    return (1.0 + math.sqrt(eps)) * math.sqrt(2.0 * sigma * sigma * (1.0 + eps) * math.log(arg) / T)


@vectorize(nopython=True, cache=True)
def _ls_radius_v(T, d_ls, n, eps, sigma):  # pragma: no cover
    return ls_radius_s(T, d_ls, n, eps, sigma)


def ls_radius(T: ArrayLike, d_ls: float, n: int, epsilon: float = 0.01, sigma: float = 0.5) -> ArrayOrFloat:
    """Radius ``B(T)`` of the LIL stopping rule LS (JMNB14 Sec. 5; ALGORITHMS.md 0.2).

    ``B(T) = (1+sqrt(eps)) sqrt(2 sigma^2 (1+eps) log(2 log((1+eps) T + 2)/(d_LS/n)) / T)``:
    Lemma 1 per arm and per tail with ``w = d_LS/(2n)``; all arms are inside their
    intervals for all times with probability ``>= 1 - c_eps d_LS^(1+eps)``.
    """
    return _ls_radius_v(np.asarray(T, dtype=float), d_ls, float(n), epsilon, sigma)


def ls_delta(nu: float, epsilon: float = 0.01) -> float:
    """The LS confidence ``d_LS`` with ``c_eps d_LS^(1+eps) = nu``.

    Callers that split an error budget (host algorithm nu/2, LS nu/2) pass ``nu/2``.
    ``ls_delta(0.05, 0.01) = 2.69e-6`` (the ALGORITHMS.md example for nu = 0.1).
    """
    return (nu / c_epsilon(epsilon)) ** (1.0 / (1.0 + epsilon))


@njit(cache=True)
def lil_stopping_arm(sums: np.ndarray, counts: np.ndarray, d_ls: float, eps: float, sigma: float) -> int:
    """LIL stopping rule LS (JMNB14 Sec. 5): the arm to output, or -1 to continue.

    Stop when the empirical best arm's lower bound ``mu_hat - B(T)`` is at least every other
    arm's upper bound ``mu_hat_j + B(T_j)``. Arms never pulled have infinite radius.
    """
    n = counts.shape[0]
    best = -1
    best_mean = -math.inf
    for i in range(n):
        if counts[i] == 0:
            return -1
        m = sums[i] / counts[i]
        if m > best_mean:
            best_mean = m
            best = i
    lcb = best_mean - ls_radius_s(counts[best], d_ls, n, eps, sigma)
    for j in range(n):
        if j != best:
            if sums[j] / counts[j] + ls_radius_s(counts[j], d_ls, n, eps, sigma) > lcb:
                return -1
    return best


# --------------------------------------------------------------------------- Hoeffding / LUCB
@njit(cache=True)
def hoeffding_radius_s(t: float, delta: float, sigma: float) -> float:
    if t <= 0.0:
        return math.inf
    return math.sqrt(2.0 * sigma * sigma * math.log(1.0 / delta) / t)


def hoeffding_radius(t: ArrayLike, delta: float, sigma: float = 0.5) -> ArrayOrFloat:
    """Fixed-time one-sided Hoeffding radius ``sqrt(2 sigma^2 log(1/delta)/t)`` ([0,1]: sigma=1/2)."""
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, np.sqrt(2.0 * sigma**2 * math.log(1.0 / delta) / np.maximum(t, 1e-300)), np.inf)


@njit(cache=True)
def lucb_radius_s(u: float, t: float, n: float, delta: float, k1: float, sigma: float) -> float:
    if u <= 0.0:
        return math.inf
    return math.sqrt(2.0 * sigma * sigma * math.log(k1 * n * t**4 / delta) / u)


def lucb_radius(u: ArrayLike, t: ArrayLike, n: int, delta: float, k1: float = 1.25, sigma: float = 0.5) -> ArrayOrFloat:
    """LUCB1 exploration radius ``beta(u,t) = sqrt(log(k1 n t^4/delta)/(2u))`` (KTAS12, k1=5/4).

    ``u`` is the arm's pull count and ``t`` the round index; for sigma-sub-Gaussian rewards
    the radius is ``sqrt(2 sigma^2 log(k1 n t^4/delta)/u)`` (sigma = 1/2 recovers KTAS12).
    """
    u = np.asarray(u, dtype=float)
    val = 2.0 * sigma**2 * np.log(k1 * n * np.asarray(t, dtype=float) ** 4 / delta)
    with np.errstate(divide="ignore"):
        return np.where(u > 0, np.sqrt(val / np.maximum(u, 1e-300)), np.inf)


@njit(cache=True)
def lucb_rate_s(t: float, n: float, delta: float, k1: float, sigma: float) -> float:
    """Scalar ``2 sigma^2 log(k1 n t^4/delta)``: ``lucb_radius_s(u, ...) == sqrt(lucb_rate_s(...)/u)``.

    The round-dependent part of the LUCB1 radius, computed once per round so that a learner
    evaluating all n arms pays one logarithm, not n (the arithmetic is the same as in
    :func:`lucb_radius_s`, so the two agree bit for bit).
    """
    return 2.0 * sigma * sigma * math.log(k1 * n * t**4 / delta)


def lucb_rate(t: ArrayLike, n: int, delta: float, k1: float = 1.25, sigma: float = 0.5) -> ArrayOrFloat:
    """Vectorised :func:`lucb_rate_s`; ``lucb_radius(u, t, ...) = sqrt(lucb_rate(t, ...)/u)``."""
    return 2.0 * sigma**2 * np.log(k1 * n * np.asarray(t, dtype=float) ** 4 / delta)


# --------------------------------------------------------------------------- Bernoulli KL
@njit(cache=True)
def kl_bernoulli_s(p: float, q: float) -> float:
    """d(p, q) with 0 log 0 = 0; +inf when q hits 0 or 1 with p strictly inside."""
    res = 0.0
    if p > 0.0:
        if q <= 0.0:
            return math.inf
        res += p * math.log(p / q)
    if p < 1.0:
        if q >= 1.0:
            return math.inf
        res += (1.0 - p) * math.log((1.0 - p) / (1.0 - q))
    return max(res, 0.0)


@vectorize(nopython=True, cache=True)
def kl_bernoulli(p: ArrayLike, q: ArrayLike) -> ArrayOrFloat:  # noqa: D401
    """Bernoulli KL divergence ``d(p,q) = p log(p/q) + (1-p) log((1-p)/(1-q))``."""
    return kl_bernoulli_s(p, q)


_KL_ITERS = 60  # bisection halves the Pinsker bracket (width <= 0.71) 60 times: < 1e-18


# The KL inversions below are, by definition, 60 bisection steps on the Pinsker bracket; their
# results (every learner's decisions and the reproduction numbers depend on them) are those of
# that bisection. Most of its steps are decided far from the root, though, so we skip their
# logarithms: Newton's method (d(p, .) is convex) finds the root r, and around it a zone
# [a, b] is certified, by two evaluations, outside which the computed comparison
# "d(p, mid) <= level" cannot differ from its exact value (the margin exceeds the rounding error
# of kl_bernoulli_s by a factor of about 4). Only the steps whose midpoint falls inside [a, b]
# (about log2(width / ulp), 5 to 15) evaluate d, and the loop ends once lo and hi are adjacent
# floats (a midpoint equal to lo or hi was decided before). If Newton or the certificate fails,
# nothing is skipped. tests/test_bounds.py checks the result is the plain bisection's, bit for bit.


@njit(cache=True)
def _kl_newton(p: float, level: float, q: float):  # pragma: no cover - compiled
    """Newton's method for d(p, q) = level from ``q``: (root, margin, |slope|), or root = nan on failure.

    ``margin`` bounds, with a factor of about 3 to spare, the rounding error of
    :func:`kl_bernoulli_s` near the root (about 2.2e-16 per unit of p, 1 - p and each term).
    """
    pp = 1.0 - p
    for _ in range(30):
        if not (1e-300 < q < 1.0):  # (below 1e-300, p / q could overflow; the bisection then decides alone)
            break
        t1 = p * math.log(p / q)
        t2 = pp * math.log(pp / (1.0 - q))
        d = pp / (1.0 - q) - p / q
        if d == 0.0:
            break
        step = (t1 + t2 - level) / d
        q -= step
        margin = 1.5e-15 * (1.0 + abs(t1) + abs(t2))
        if abs(step) <= margin / abs(d):  # converged to within the rounding noise
            if 1e-300 < q < 1.0:
                return q, margin, abs(d)
            break
    return math.nan, 0.0, 0.0


@njit(cache=True)
def _kl_zone(p: float, level: float, upper: bool):  # pragma: no cover - compiled
    """(a, b) around the root of d(p, .) = level on the side ``upper``; (-inf, inf) if not certified.

    Newton starts at the second-order approximation ``p +- sqrt(2 level p (1-p))`` and, if
    that fails, at a point beyond the root where d(p, q) >= -H(p) - p log q - (1-p) log(1-q)
    (one term dropped) reaches the level; d(p, .) is convex, so from there the iterates
    approach the root monotonically.
    """
    if not (p > 1e-300 and level < 1e200):  # (no overflow in the starts below; the bisection decides alone)
        return -math.inf, math.inf
    pp = 1.0 - p
    r = math.sqrt(2.0 * level * p * pp)
    q, margin, slope = _kl_newton(p, level, min(p + r, 0.5 + 0.5 * p) if upper else max(p - r, 0.5 * p))
    if q != q:
        h = -p * math.log(p) - pp * math.log(pp)
        start = 1.0 - math.exp(-(level + h) / pp) if upper else math.exp(-(level + h) / p)
        q, margin, slope = _kl_newton(p, level, start)
        if q != q:
            return -math.inf, math.inf
    width = 2.0 * margin / slope + 1e-15 * q
    a = q - width
    b = q + width
    inside, outside = (a, b) if upper else (b, a)  # where d(p, .) is below / above the level
    if kl_bernoulli_s(p, inside) <= level - margin and kl_bernoulli_s(p, outside) >= level + margin:
        return a, b
    return -math.inf, math.inf


@njit(cache=True)
def kl_upper_s(p: float, level: float) -> float:
    """sup{q in [p, 1] : d(p, q) <= level}; the returned value never undershoots."""
    p = min(max(p, 0.0), 1.0)
    if level <= 0.0:
        return p
    if p >= 1.0:
        return 1.0
    if p <= 0.0:
        return -math.expm1(-level)  # exact: d(0, q) = -log(1-q)
    lo = p
    hi = min(1.0, p + math.sqrt(level / 2.0))  # Pinsker bracket
    if kl_bernoulli_s(p, hi) <= level:
        return hi
    a, b = _kl_zone(p, level, True)
    for _ in range(_KL_ITERS):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            break  # lo, hi adjacent: every later step repeats this one, whose outcome is known
        if mid <= a:
            below = True
        elif mid >= b:
            below = False
        else:
            below = kl_bernoulli_s(p, mid) <= level
        if below:
            lo = mid
        else:
            hi = mid
    return hi


@njit(cache=True)
def kl_lower_s(p: float, level: float) -> float:
    """inf{q in [0, p] : d(p, q) <= level}; the returned value never overshoots."""
    p = min(max(p, 0.0), 1.0)
    if level <= 0.0:
        return p
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return math.exp(-level)  # exact: d(1, q) = -log q
    hi = p
    lo = max(0.0, p - math.sqrt(level / 2.0))
    if kl_bernoulli_s(p, lo) <= level:
        return lo
    a, b = _kl_zone(p, level, False)
    for _ in range(_KL_ITERS):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            break  # as in kl_upper_s
        if mid >= b:
            below = True
        elif mid <= a:
            below = False
        else:
            below = kl_bernoulli_s(p, mid) <= level
        if below:
            hi = mid
        else:
            lo = mid
    return lo


@njit(cache=True)
def _kl_certified_below(p: float, level: float, q: float) -> bool:
    """True if every q' between ``q`` and ``p`` has a computed d(p, q') <= level (one evaluation).

    d(p, .) decreases towards p, so it suffices that d(p, q) is below the level by more than
    twice its rounding error (the margin of :func:`_kl_newton`).
    """
    pp = 1.0 - p
    t1 = p * math.log(p / q)
    t2 = pp * math.log(pp / (1.0 - q))
    return t1 + t2 <= level - 1.5e-15 * (1.0 + abs(t1) + abs(t2))


@njit(cache=True)
def kl_upper_bracket_s(p: float, level: float):
    """(lo, hi) with lo <= kl_upper_s(p, level) <= hi, from at most one evaluation of d.

    ``hi`` is the Pinsker end of the bisection bracket (the result never exceeds it); ``lo`` is
    p, or the second-order guess ``p + 0.98 sqrt(2 level p (1-p))`` when d(p, .) is certified
    below the level there (every bisection step up to it then moves ``lo``, so the result is
    above it). Exact cases return lo == hi. Lets a kernel decide a comparison without inverting.
    """
    p = min(max(p, 0.0), 1.0)
    if level <= 0.0:
        return p, p
    if p >= 1.0:
        return 1.0, 1.0
    if p <= 0.0:
        v = -math.expm1(-level)
        return v, v
    hi = min(1.0, p + math.sqrt(level / 2.0))
    y = p + 0.98 * math.sqrt(2.0 * level * p * (1.0 - p))
    if p < y < hi and _kl_certified_below(p, level, y):
        return y, hi
    return p, hi


@njit(cache=True)
def kl_lower_bracket_s(p: float, level: float):
    """(lo, hi) with lo <= kl_lower_s(p, level) <= hi, from at most one evaluation of d.

    The mirror of :func:`kl_upper_bracket_s`: ``lo`` is the Pinsker end, ``hi`` is p or the
    certified guess ``p - 0.98 sqrt(2 level p (1-p))``.
    """
    p = min(max(p, 0.0), 1.0)
    if level <= 0.0:
        return p, p
    if p <= 0.0:
        return 0.0, 0.0
    if p >= 1.0:
        v = math.exp(-level)
        return v, v
    lo = max(0.0, p - math.sqrt(level / 2.0))
    y = p - 0.98 * math.sqrt(2.0 * level * p * (1.0 - p))
    if lo < y < p and _kl_certified_below(p, level, y):
        return lo, y
    return lo, p


@vectorize(nopython=True, cache=True)
def kl_upper(p: ArrayLike, level: ArrayLike) -> ArrayOrFloat:
    """Upper KL inversion ``sup{q >= p : d(p,q) <= level}`` (bisection on the Pinsker bracket).

    Exact at p = 0 (``1 - exp(-level)``) and p = 1 (``1``); otherwise 60 bisection steps,
    returning the conservative (upper) end (ALGORITHMS.md 0.3).
    """
    return kl_upper_s(p, level)


@vectorize(nopython=True, cache=True)
def kl_lower(p: ArrayLike, level: ArrayLike) -> ArrayOrFloat:
    """Lower KL inversion ``inf{q <= p : d(p,q) <= level}``; exact at p = 0 and p = 1."""
    return kl_lower_s(p, level)


@njit(cache=True)
def kl_lucb_rate_s(t: float, n: float, delta: float, alpha: float, k1: float) -> float:
    return math.log(k1 * n * t**alpha / delta)


def kl_lucb_rate(t: ArrayLike, n: int, delta: float, alpha: float = 1.1, k1: float = 405.5) -> ArrayOrFloat:
    """KL-LUCB exploration rate ``beta(t, delta) = log(k1 n t^alpha / delta)`` (KK13, alpha=1.1, k1=405.5)."""
    return np.log(k1 * n * np.asarray(t, dtype=float) ** alpha / delta)


# --------------------------------------------------------------------------- lil-KLUCB (TNM17)
def lil_kl_kappa(N: int, delta: float) -> float:
    """kappa(N) of TNM17 Theorem 2 (N = 2^l): kappa depends on delta.

    ``kappa = delta^(1/(N+1)) (1{l!=0} sum_{t=1..N} log2(2t)^-p + N sum_{k>=l} (k+1)^-p)^(N/(N+1))``
    with ``p = (N+1)/N``; the tail is ``zeta(p) - sum_{j=1..l} j^-p``.
    kappa(8, 0.01) = 22.049.
    """
    from scipy.special import zeta

    lev = int(round(math.log2(N)))
    if N < 1 or 2**lev != N:
        raise ValueError(f"N must be a power of two >= 1, got {N}")
    p = (N + 1) / N
    first = sum(math.log2(2 * t) ** (-p) for t in range(1, N + 1)) if lev != 0 else 0.0
    tail = float(zeta(p)) - sum(j ** (-p) for j in range(1, lev + 1))
    return delta ** (1.0 / (N + 1)) * (first + N * tail) ** (N / (N + 1))


def lil_kl_c(N: int) -> float:
    """c(N) for the simplified bounds L', U' of TNM17 Sec. 3: ``(N+1)/(N - log(N+1))``.

    The paper defines c(N) in a supplement we could not read (ALGORITHMS.md 9.2). This is the
    smallest constant with ``L' <= L`` and ``U' >= U`` for every (mu_hat, m) in [0,1]^2, so the
    simplified bounds are valid whenever eqs. (2)-(3) are. c(8) = 1.5510.
    """
    return (N + 1) / (N - math.log(N + 1))


@njit(cache=True)
def lil_kl_level_s(T: float, delta: float, kappa: float) -> float:
    """``log(kappa log2(2T) / delta) / T``: the right-hand side of TNM17 eqs. (1)-(3)."""
    if T <= 0.0:
        return math.inf
    return math.log(kappa * math.log(2.0 * T) / _LOG2 / delta) / T


def lil_kl_level(T: ArrayLike, delta: float, N: int = 8) -> ArrayOrFloat:
    """Vectorised :func:`lil_kl_level_s` with kappa = kappa(N, delta)."""
    kappa = lil_kl_kappa(N, delta)
    T = np.asarray(T, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(T > 0, np.log(kappa * np.log2(2 * np.maximum(T, 1)) / delta) / np.maximum(T, 1), np.inf)


@njit(cache=True)
def kt_regret_s(n: float) -> float:
    """``log(sqrt(pi) Gamma(n + 1) / Gamma(n + 1/2))``: scalar :func:`purebandits.glr_thresholds.kt_regret`, the
    worst-case log-wealth regret of the Dirichlet(1/2, 1/2) mixture against the best constant bet (Cover and
    Ordentlich 1996, Thm 2 with two assets)."""
    return 0.5 * math.log(math.pi) + math.lgamma(n + 1.0) - math.lgamma(n + 0.5)


@njit(cache=True)
def kt_regret_binary_s(s: float, f: float) -> float:
    """The Dirichlet(1/2, 1/2) mixture's regret on a 0/1 sequence with ``s`` ones and ``f`` zeros, exactly.

    For rewards on two points the Krichevsky-Trofimov mixture of the bets ``b X/m + (1 - b)(1 - X)/(1 - m)``
    has the closed form ``B(s + 1/2, f + 1/2) / (pi m^s (1 - m)^f)``, so its log-wealth is
    ``T d(s/T, m) - kt_regret_binary_s(s, f)`` with this term independent of m. It equals :func:`kt_regret_s` at
    s = 0 or f = 0 (the worst case) and is about 0.35 (``log(2)/2``) below it once both counts pass a few dozen.
    """
    n = s + f
    r = math.log(math.pi) + math.lgamma(n + 1.0) - math.lgamma(s + 0.5) - math.lgamma(f + 0.5)
    if s > 0.0:
        r += s * math.log(s / n)
    if f > 0.0:
        r += f * math.log(f / n)
    return r


@njit(cache=True)
def kt_kl_level_s(T: float, delta: float) -> float:
    """``(log(1/delta) + kt_regret(T)) / T``: the KL level of the Krichevsky-Trofimov confidence sequence.

    ``{m : d(mu_hat, m) <= level}`` (:func:`kl_upper_s` / :func:`kl_lower_s`) holds for all T at once with
    probability at least 1 - delta on each side, for rewards in [0, 1] whatever their law. Proof (upper side; the
    lower one mirrors it): for mean m, the wealth ``prod_s (1 + w (m - X_s)/(1 - m))`` of a constant bet w in
    [0, 1] is a nonnegative martingale of mean 1, and so is its Dirichlet(1/2, 1/2) mixture ``W_T``; Ville's
    inequality gives ``P(exists T: W_T >= 1/delta) <= delta``. The best bet's log-wealth is ``T K_inf^+(F_T, m)``
    (Honda and Takemura 2010, the dual of K_inf on [0, 1]), at most ``log W_T + kt_regret(T)`` (Cover and
    Ordentlich 1996, Thm 2), and ``K_inf^+(F, m) >= d(mean(F), m)`` (:mod:`purebandits.kinf_glr`). Hence
    ``T d(mu_hat, m) > log(1/delta) + kt_regret(T)`` implies ``W_T > 1/delta``. Against TNM17's level
    ``log(kappa log2(2T)/delta)`` (kappa(8, delta) = 13-28 for delta from 1e-4 to 0.1) the time term
    ``(1/2) log(pi T)`` is smaller up to T of about 1e4-8e4 answers and grows faster beyond; TNM17's eqs. (2)-(3)
    also shrink the mean, ``d((8 mu_hat + m)/9, m)``, which costs about (8/9)^2 = 0.79 of the divergence.
    """
    if T <= 0.0:
        return math.inf
    return (math.log(1.0 / delta) + kt_regret_s(T)) / T


@njit(cache=True)
def _g_exact(p: float, m: float, N: float) -> float:
    return kl_bernoulli_s((N * p + m) / (N + 1.0), m)


# The exact bounds are, by definition, 60 bisection steps on [mean, 1] (upper) or [0, mean]
# (lower). A step whose midpoint equals an end of the range leaves the range unchanged, and so do
# all later steps (they evaluate the same midpoint): the bisection stops there, with the same
# result. :func:`lil_kl_exact_steps_s` advances a bisection by a given number of steps from any
# intermediate state, so a kernel can keep an arm's bound as a partly refined range (which always
# contains the final result) and finish it only when a comparison needs it; finished in one go or in
# pieces, the steps and hence the bits are the same.


@njit(cache=True)
def _g_and_margin(p: float, m: float, N: float):  # pragma: no cover - compiled
    """(g(m), _g_margin(p, m, N)) from one pair of logarithms; g is :func:`_g_exact`'s value bit for bit.

    The zone's end checks need both at the same point; computing them together halves their
    logarithms. The sums follow :func:`kl_bernoulli_s` term by term (0 < x, m < 1 here).
    """
    x = (N * p + m) / (N + 1.0)
    lx = math.log(x / m)
    ly = math.log((1.0 - x) / (1.0 - m))
    res = 0.0
    res += x * lx
    res += (1.0 - x) * ly
    return max(res, 0.0), 4e-15 * (1.0 + abs(x * lx) + abs((1.0 - x) * ly)) + 1e-15 * x * (abs(lx) + abs(ly))


@njit(cache=True)
def _g_margin(p: float, m: float, N: float) -> float:  # pragma: no cover - compiled
    """The margin of :func:`lil_kl_exact_zone_s` at m: about 4 times the rounding error of g(m)."""
    x = (N * p + m) / (N + 1.0)
    lx = math.log(x / m)
    ly = math.log((1.0 - x) / (1.0 - m))
    return 4e-15 * (1.0 + abs(x * lx) + abs((1.0 - x) * ly)) + 1e-15 * x * (abs(lx) + abs(ly))


@njit(cache=True)
def _zone_newton(p: float, level: float, N: float, upper: bool, m: float, full: bool):  # pragma: no cover
    """Safeguarded Newton for g(m) = level from ``m``: (root, margin, slope), or root = nan on failure.

    The root is kept in a bracket ((p, 1) for ``upper``, else (0, p)) that every evaluation
    narrows (g is monotone on each side of p); a Newton step leaving it is replaced by the
    bracket's midpoint, so a start on the wrong side of an inflexion cannot throw the iterates out
    of (0, 1), which refused the zone for most upper bounds at low counts and most lower bounds of
    small means before. Converged when the step is within the rounding noise (``full``) or, with
    quadratic convergence, below 1e-9 of the distance to 0 and 1 (the next error is then far
    below the zone's width; the zone's end checks catch the rare miss and the caller retries
    with ``full``). Only a guess: nothing here is trusted without the end checks.
    """
    n1 = N + 1.0
    lb, rb = (p, 1.0) if upper else (0.0, p)
    if not lb < m < rb:
        m = 0.5 * (lb + rb)
    for _ in range(60):
        if not (1e-12 < m < 1.0 - 1e-6):
            break
        x = (N * p + m) / n1
        lx = math.log(x / m)
        ly = math.log((1.0 - x) / (1.0 - m))
        t1 = x * lx
        t2 = (1.0 - x) * ly
        f = t1 + t2 - level
        if (f < 0.0) == upper:  # m is on p's side of the root
            lb = m
        else:
            rb = m
        slope = (lx - ly) / n1 + (m - x) / (m * (1.0 - m))
        margin = 4e-15 * (1.0 + abs(t1) + abs(t2)) + 1e-15 * x * (abs(lx) + abs(ly))
        if slope == 0.0 or (slope > 0.0) != upper:
            m = 0.5 * (lb + rb)
            continue
        step = f / slope
        new = m - step
        if abs(step) <= margin / abs(slope) or (not full and abs(step) <= 1e-9 * min(m, 1.0 - m)):
            return new, margin, slope
        m = new if lb < new < rb else 0.5 * (lb + rb)
    return math.nan, 0.0, 0.0


@njit(cache=True)
def lil_kl_exact_zone_s(p: float, level: float, N: float, upper: bool,
                        start: float = math.nan):  # pragma: no cover - compiled
    """(a, b) around the root of g(m) = d((N p + m)/(N+1), m) = level; (-inf, inf) if not certified.

    The analogue of :func:`_kl_zone` for the exact bounds: for every m outside [a, b] on the
    side of ``p`` the computed ``g(m) <= level`` is true, on the other side false, so a bisection
    step whose midpoint falls outside needs no evaluation. Newton's method (:func:`_zone_newton`,
    from ``start`` if given, e.g. the same arm's root at its previous count, else from the
    second-order guess) finds the root; the zone's ends are then checked with one evaluation each,
    at a margin that bounds the rounding error of g by a factor of about 4: that of
    :func:`kl_bernoulli_s` (about 2.2e-16 per unit of each term) plus that of the rounded argument
    ``(N p + m)/(N+1)`` (two roundings, relative 2.2e-16, times |dd/dx| = |log(x/m)| +
    |log((1-x)/(1-m))|). True g is monotone on each side of p and the error bound shrinks towards
    p, so the end checks certify the whole side. Refused (nothing is skipped) for a mean or root
    near 1 (a lower bound's mean also near 0) and for extreme levels.
    """
    if not (0.0 <= p < 1.0 - 1e-6 and (upper or 1e-6 < p) and 1e-12 < level < 1e3):
        return -math.inf, math.inf
    n1 = N + 1.0
    if not (start > p if upper else start < p):
        r = n1 / N * math.sqrt(2.0 * level * p * (1.0 - p))
        if p == 0.0:  # g(m) = m (N - log(N+1))/(N+1) + O(m^2)
            start = level * n1 / (N - math.log(n1))
        else:
            start = min(p + r, 0.5 + 0.5 * p) if upper else max(p - r, 0.5 * p)
    for full in (False, True):
        m, margin, slope = _zone_newton(p, level, N, upper, start, full)
        if not (1e-12 < m < 1.0 - 1e-6):
            return -math.inf, math.inf
        width = 2.0 * margin / abs(slope) + 1e-15 * m
        a = m - width
        b = m + width
        if not (1e-12 < a and b < 1.0 - 1e-6 and (p < a if upper else b < p)):
            return -math.inf, math.inf
        inside, outside = (a, b) if upper else (b, a)
        g_in, e_in = _g_and_margin(p, inside, N)
        if g_in <= level - max(margin, e_in):
            g_out, e_out = _g_and_margin(p, outside, N)
            if g_out >= level + max(margin, e_out):
                return a, b
        start = m
    return -math.inf, math.inf


@njit(cache=True)
def lil_kl_exact_steps_s(p: float, level: float, N: float, upper: bool, lo: float, hi: float, it: int,
                         steps: int, za: float = -math.inf, zb: float = math.inf,
                         until: float = math.nan):  # pragma: no cover - compiled
    """Advance the bisection of eq. (3) (``upper``) or eq. (2) by up to ``steps`` steps.

    ``(lo, hi, it)`` is the state after ``it`` of the 60 steps (``it = 0``: the starting range,
    after the end test of :func:`lil_kl_upper_exact_s` / :func:`lil_kl_lower_exact_s`). Returns
    the new state and whether the bisection is finished; the final result is ``hi`` (upper) or
    ``lo`` (lower), and every intermediate range contains it. ``(za, zb)``, from
    :func:`lil_kl_exact_zone_s`, lets the steps whose midpoint falls outside it skip evaluating g.
    ``until`` stops early, before a step, once the range excludes it (a kernel comparing the bound
    with ``until`` needs no more; one call instead of one per step).
    """
    for _ in range(steps):
        if it >= _KL_ITERS:
            return lo, hi, it, True
        if until < lo or until > hi:
            return lo, hi, it, False
        mid = 0.5 * (lo + hi)
        if mid <= za:
            below = upper
        elif mid >= zb:
            below = not upper
        else:
            below = _g_exact(p, mid, N) <= level
        it += 1
        if below == upper:  # the range's lower end moves up
            if mid == lo:
                return lo, hi, _KL_ITERS, True  # no change now, none later
            lo = mid
        else:
            if mid == hi:
                return lo, hi, _KL_ITERS, True
            hi = mid
    return lo, hi, it, it >= _KL_ITERS


@njit(cache=True)
def lil_kl_upper_exact_s(p: float, level: float, N: float) -> float:
    """TNM17 eq. (3): sup{m > p : d((N p + m)/(N+1), m) <= level} (bisection; g monotone in m)."""
    if level <= 0.0 or p >= 1.0:
        return max(min(p, 1.0), 0.0) if level <= 0.0 else 1.0
    lo, hi = p, 1.0
    if _g_exact(p, hi, N) <= level:
        return 1.0
    return lil_kl_exact_steps_s(p, level, N, True, lo, hi, 0, _KL_ITERS)[1]


@njit(cache=True)
def lil_kl_lower_exact_s(p: float, level: float, N: float) -> float:
    """TNM17 eq. (2): inf{m < p : d((N p + m)/(N+1), m) <= level}."""
    if level <= 0.0 or p <= 0.0:
        return max(min(p, 1.0), 0.0) if level <= 0.0 else 0.0
    lo, hi = 0.0, p
    if _g_exact(p, lo, N) <= level:
        return 0.0
    return lil_kl_exact_steps_s(p, level, N, False, lo, hi, 0, _KL_ITERS)[0]


@vectorize(nopython=True, cache=True)
def _lil_kl_upper_exact_v(p, level, N):  # pragma: no cover
    return lil_kl_upper_exact_s(p, level, N)


@vectorize(nopython=True, cache=True)
def _lil_kl_lower_exact_v(p, level, N):  # pragma: no cover
    return lil_kl_lower_exact_s(p, level, N)


@vectorize(nopython=True, cache=True)
def _kt_kl_level_v(T, delta):  # pragma: no cover - thin ufunc shell
    return kt_kl_level_s(T, delta)


def lil_kl_bounds(mean: ArrayLike, T: ArrayLike,
                  delta: float, N: int = 8, form: str = "simplified") -> tuple[ArrayOrFloat, ArrayOrFloat]:
    """Anytime KL bounds (L, U) of lil-KLUCB (TNM17 Theorem 2).

    ``form="simplified"`` gives L', U': ``{m : d(mu_hat, m) <= c(N) log(kappa log2(2T)/delta)/T}``
    (the bounds the algorithm box uses); ``form="exact"`` gives eqs. (2)-(3); ``form="kt"`` gives
    ``{m : d(mu_hat, m) <= (log(1/delta) + kt_regret(T))/T}`` (:func:`kt_kl_level_s`, not TNM17's; N unused).
    Each side holds for all T with probability at least ``1 - delta``.
    """
    if form not in ("simplified", "exact", "kt"):
        raise ValueError(f"form must be 'simplified', 'exact' or 'kt', got {form!r}")
    mean = np.asarray(mean, dtype=float)
    if form == "kt":
        lv = _kt_kl_level_v(np.asarray(T, dtype=float), float(delta))
        return kl_lower(mean, lv), kl_upper(mean, lv)
    level = lil_kl_level(T, delta, N)
    if form == "simplified":
        lv = lil_kl_c(N) * level
        return kl_lower(mean, lv), kl_upper(mean, lv)
    return _lil_kl_lower_exact_v(mean, level, float(N)), _lil_kl_upper_exact_v(mean, level, float(N))


@njit(cache=True)
def sg1_radius_s(T: float, delta: float, N: float, sigma: float, kappa: float) -> float:
    if T <= 0.0:
        return math.inf
    return (N + 1.0) / N * math.sqrt(2.0 * sigma * sigma * math.log(kappa * math.log(2.0 * T) / _LOG2 / delta) / T)


def sg1_radius(T: ArrayLike, delta: float, N: int = 8, sigma: float = 0.5) -> ArrayOrFloat:
    """[SG1] of TNM17 Sec. 5: ``((N+1)/N) sqrt(2 sigma^2 log(kappa(N) log2(2T)/delta)/T)``.

    The lil-KLUCB proof with the sub-Gaussian rate in place of the Bernoulli KL (our
    derivation, ALGORITHMS.md 9.3; the supplement was not readable).
    """
    kappa = lil_kl_kappa(N, delta)
    T = np.asarray(T, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        Tc = np.maximum(T, 1.0)
        r = (N + 1) / N * np.sqrt(2 * sigma**2 * np.log(kappa * np.log2(2 * Tc) / delta) / Tc)
    return np.where(T > 0, r, np.inf)


@njit(cache=True)
def sg2_radius_s(T: float, delta: float, sigma: float) -> float:
    if T <= 0.0:
        return math.inf
    ld = math.log(1.0 / delta)
    x = ld + 3.0 * math.log(ld)
    return math.sqrt(2.0 * sigma * sigma * (x + 1.5 * math.log(math.log(math.e * T))) / T)


def sg2_radius(T: ArrayLike, delta: float, sigma: float = 0.5) -> ArrayOrFloat:
    """[SG2]: Kaufmann-Cappe-Garivier (JMLR 2016) Thm 8 with beta = 3/2 (ALGORITHMS.md 0.4).

    ``sqrt(2 sigma^2 (x + 1.5 log(log(e T)))/T)`` with ``x = log(1/delta) + 3 log(log(1/delta))``;
    the theorem's right-hand side is below delta for delta <~ 0.09.
    """
    if not 0.0 < delta < 1.0 / math.e:
        raise ValueError(f"delta must be in (0, 1/e) for sg2_radius, got {delta}")
    T = np.asarray(T, dtype=float)
    ld = math.log(1.0 / delta)
    x = ld + 3.0 * math.log(ld)
    Tc = np.maximum(T, 1.0)
    return np.where(T > 0, np.sqrt(2 * sigma**2 * (x + 1.5 * np.log(np.log(math.e * Tc))) / Tc), np.inf)


# --------------------------------------------------------------------------- hardness
@njit(cache=True)
def chernoff_information_s(x: float, y: float) -> float:
    """Scalar Chernoff information between Ber(x) and Ber(y) (see :func:`chernoff_information`)."""
    if x > y:
        x, y = y, x
    if x == y:
        return 0.0
    if y >= 1.0:
        return -math.log(x) if x > 0.0 else math.inf
    if x <= 0.0:
        return -math.log1p(-y)
    lo, hi = x, y
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        # on [x, y], D(z, x) increases and D(z, y) decreases in z; they cross at z*
        if kl_bernoulli_s(mid, x) < kl_bernoulli_s(mid, y):
            lo = mid
        else:
            hi = mid
    return kl_bernoulli_s(0.5 * (lo + hi), x)


@vectorize(nopython=True, cache=True)
def _chernoff_v(x, y):  # pragma: no cover
    return chernoff_information_s(x, y)


def chernoff_information(p: ArrayLike, q: ArrayLike) -> ArrayOrFloat:
    """Chernoff information ``D*(p, q) = D(z*, p) = D(z*, q)`` between Ber(p) and Ber(q) (TNM17 fn. 5).

    ``z*`` in ``[p, q]`` is where the two KL divergences cross (bisection). Closed forms at the
    boundary: ``D*(x, 1) = -log x`` and ``D*(0, y) = -log(1 - y)``; ``+inf`` for Ber(0) vs Ber(1).
    Vectorised over arrays.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if np.any((p < 0) | (p > 1)) or np.any((q < 0) | (q > 1)):
        raise ValueError("Bernoulli means must lie in [0, 1]")
    out = _chernoff_v(p, q)
    return float(out) if np.ndim(out) == 0 else out


# --------------------------------------------------------------------------- Successive Elimination
@njit(cache=True)
def edmm_radius_s(t: float, n: float, delta: float, c: float, sigma: float) -> float:
    """Scalar Successive Elimination radius (see :func:`edmm_radius`)."""
    if t <= 0.0:
        return math.inf
    return math.sqrt(4.0 * sigma * sigma * math.log(c * n * t * t / delta) / t)


def edmm_radius(t: ArrayLike, n: int, delta: float, c: float = 4.0, sigma: float = 0.5) -> ArrayOrFloat:
    """Successive Elimination radius ``alpha_t = sqrt(log(c n t^2/delta)/t)`` (EDMM02, c = 4).

    For sigma-sub-Gaussian rewards the radius is ``sqrt(4 sigma^2 log(c n t^2/delta)/t)``;
    sigma = 1/2 (rewards in [0, 1]) recovers EDMM02's ``alpha_t`` exactly.
    """
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tc = np.maximum(t, 1e-300)
        r = np.sqrt(4.0 * sigma**2 * np.log(c * n * tc * tc / delta) / tc)
    return np.where(t > 0, r, np.inf)


# --------------------------------------------------------------------------- GLR / Chernoff stopping
@njit(cache=True)
def glr_pair_cost_s(m_a: float, n_a: float, m_b: float, n_b: float, gaussian: bool, sigma: float) -> float:
    """Transportation cost ``W(a, b)`` of the GLR statistic (see :func:`glr_pair_cost`)."""
    if n_a <= 0.0 or n_b <= 0.0:
        return 0.0
    if gaussian:
        if m_a <= m_b:
            return 0.0
        d = m_a - m_b
        return d * d / (2.0 * sigma * sigma * (1.0 / n_a + 1.0 / n_b))
    pa = min(max(m_a, 0.0), 1.0)
    pb = min(max(m_b, 0.0), 1.0)
    if pa <= pb:
        return 0.0
    mid = (n_a * pa + n_b * pb) / (n_a + n_b)
    return n_a * kl_bernoulli_s(pa, mid) + n_b * kl_bernoulli_s(pb, mid)


def glr_pair_cost(m_a: ArrayLike, n_a: ArrayLike, m_b: ArrayLike,
                  n_b: ArrayLike, gaussian: bool = False, sigma: float = 0.5) -> ArrayOrFloat:
    """GLR transportation cost of arm a over arm b (Garivier and Kaufmann 2016, Sec. 3).

    ``W(a,b) = N_a d(mu_a, mu_ab) + N_b d(mu_b, mu_ab)`` with ``mu_ab = (N_a mu_a + N_b mu_b)/(N_a+N_b)``
    (Bernoulli KL, means clipped to [0, 1]) or ``(mu_a - mu_b)^2 / (2 sigma^2 (1/N_a + 1/N_b))``
    (Gaussian, ``gaussian=True``); 0 when ``mu_a <= mu_b`` or a count is 0.
    """
    f = np.vectorize(lambda a, na, b, nb: glr_pair_cost_s(float(a), float(na), float(b), float(nb),
                                                          bool(gaussian), float(sigma)))
    return f(m_a, n_a, m_b, n_b)


@njit(cache=True, inline="always")
def _glr_leader(sums, counts):  # pragma: no cover - compiled
    """(empirical best arm among the pulled ones, ties to the lower index; its mean; some count is 0)."""
    best = 0
    best_m = -math.inf
    zero = False
    for i in range(counts.shape[0]):
        if counts[i] > 0:
            m = sums[i] / counts[i]
            if m > best_m:
                best_m = m
                best = i
        else:
            zero = True
    return best, best_m, zero


@njit(cache=True)
def glr_challenge_s(sums: np.ndarray, counts: np.ndarray, gaussian: bool, sigma: float):
    """(empirical best arm, GLR statistic Z, the arm b attaining it, -1 if none); Z = 0 while a count is 0."""
    n = counts.shape[0]
    best, best_m, zero = _glr_leader(sums, counts)
    if zero:
        return best, 0.0, -1
    z = math.inf
    chal = -1
    nb = float(counts[best])
    for j in range(n):
        if j != best:
            w = glr_pair_cost_s(best_m, nb, sums[j] / counts[j], float(counts[j]), gaussian, sigma)
            if w < z:
                z = w
                chal = j
    return best, z, chal


@njit(cache=True)
def glr_statistic_s(sums: np.ndarray, counts: np.ndarray, gaussian: bool, sigma: float):
    """(empirical best arm, GLR statistic Z) of :func:`glr_statistic`; Z = 0 while a count is 0."""
    best, z, _ = glr_challenge_s(sums, counts, gaussian, sigma)
    return best, z


@njit(cache=True)
def glr_stop_s(sums: np.ndarray, counts: np.ndarray, gaussian: bool, sigma: float, threshold: float, hint: int):
    """``Z > threshold`` for the GLR statistic, usually without computing all of Z.

    Returns (empirical best arm, stop, hint for the next call). Z is a minimum over the
    challengers b, so one transportation cost ``W(a_hat, hint) <= threshold`` already shows
    that the rule does not stop; the hint is the arm that attained Z at the last full
    evaluation (between two pulls it rarely changes). Only when that test fails is Z computed
    in full (:func:`glr_challenge_s`, O(n) costs), so the decision is exactly ``Z > threshold``
    and a kernel checks the rule at O(1) costs per pull instead of n - 1. Pass ``hint = -1``
    when there is none.
    """
    if 0 <= hint < counts.shape[0]:
        best, best_m, zero = _glr_leader(sums, counts)
        if zero:  # Z = 0
            return best, 0.0 > threshold, hint
        if hint != best:
            w = glr_pair_cost_s(best_m, float(counts[best]), sums[hint] / counts[hint], float(counts[hint]),
                                gaussian, sigma)
            if w <= threshold:  # Z <= W(a_hat, hint) <= threshold
                return best, False, hint
    best, z, chal = glr_challenge_s(sums, counts, gaussian, sigma)
    return best, z > threshold, chal


def glr_statistic(sums: ArrayLike, counts: ArrayLike, gaussian: bool = False, sigma: float = 0.5) -> tuple[int, float]:
    """Chernoff/GLR statistic ``Z(t) = min_{b != a_hat} W(a_hat, b)`` (GK16 Sec. 3; ALGORITHMS.md 13.1).

    ``a_hat`` is the empirical best arm (ties to the lower index). Stop when Z exceeds the
    threshold :func:`glr_threshold`.
    """
    a, z = glr_statistic_s(np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.int64),
                           bool(gaussian), float(sigma))
    return int(a), float(z)


@njit(cache=True)
def glr_threshold_s(t: float, n: float, delta: float, theory: bool) -> float:
    """Scalar GLR threshold (see :func:`glr_threshold`)."""
    if theory:
        return math.log(2.0 * max(t, 1.0) * (n - 1.0) / delta)
    return math.log((math.log(max(t, 1.0)) + 1.0) / delta)


def glr_threshold(t: ArrayLike, n: int, delta: float, threshold: str = "practical") -> ArrayOrFloat:
    """GLR stopping threshold ``beta(t, delta)`` (GK16; ALGORITHMS.md 13.1).

    ``"practical"``: ``log((log t + 1)/delta)`` (GK16's experiments, ``mainBAI.jl``);
    ``"theory"``: ``log(2 t (n-1)/delta)`` (GK16 Prop. 12 for Bernoulli arms).
    Both take ``t`` at least 1: before the first answer, ``log 0 = -inf`` would let ``Z = 0`` stop a learner
    with no data (a query cancelled before any answer); from the first answer on nothing changes.
    """
    if threshold not in ("practical", "theory"):
        raise ValueError(f"threshold must be 'practical' or 'theory', got {threshold!r}")
    t = np.asarray(t, dtype=float)
    if threshold == "theory":
        return np.log(2.0 * np.maximum(t, 1.0) * (n - 1) / delta)
    return np.log((np.log(np.maximum(t, 1.0)) + 1.0) / delta)
