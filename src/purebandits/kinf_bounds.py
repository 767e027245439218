"""Per-arm anytime bounds with Honda and Takemura's K_inf, for rewards on a known finite support.

A rating takes a few known values (``{0, 1/2, 1}`` on the caption contests), so an arm's answers are summed up by
its count, sum and sum of squares. The upper bound at level ``c`` (a KL level per answer, as
:func:`purebandits.bounds.kl_upper_s` takes it) is

    U = sup{x >= mu_hat : K_inf^+(F_hat, x) <= c},   K_inf^+(F, x) = max_{0 <= l <= 1/(1 - x)} E_F log(1 - l (X - x)),

the dual form of the smallest KL(F, G) over the laws G on [0, 1] with mean >= x (Honda and Takemura 2010); the lower
bound mirrors it (``X -> 1 - X``). With the Krichevsky-Trofimov level ``c = (log(1/w) + kt_regret(T)) / T``
(:func:`purebandits.bounds.kt_kl_level_s`) each side holds at all T with probability >= 1 - w, for any rewards in
[0, 1]: ``T K_inf^+(F_T, m)`` is the log-wealth of the best constant bet against mean m, at most the
Dirichlet(1/2, 1/2) mixture's log-wealth plus ``kt_regret(T)``, and the mixture is a nonnegative martingale when the
mean is m (Ville's inequality). Since ``K_inf^+(F, x) >= d(mu_hat, x)``, the bound is never wider than the Bernoulli
KL bound at the same level; it is narrower when the ratings vary less than a Bernoulli variable of the same mean.
On a two-point support the learners' kernels use the mixture's exact regret on the answers in place of
``kt_regret(T)`` (:func:`purebandits.bounds.kt_regret_binary_s`, about 0.35 smaller once both values were seen a few
dozen times; ``scale_bounds_s`` in :mod:`purebandits.algorithms.kernels.lucb_rules`).

Numerics: the inversion keeps a bracket (K_inf^+ at most the level at its low end, above it at its high end),
starting from [mean, the Bernoulli KL bound], and narrows it by Newton steps from the high end (K_inf^+ is convex
and increasing in x above the mean) or bisection; it returns the high end plus a relative margin of 1e-12, so a
bound is never narrower than the true one by rounding.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.bounds import kl_upper_s

__all__ = ["kinf_upper_s", "kinf_lower_s", "kinf_upper", "kinf_lower", "kinf_plus_s", "arm_probabilities_s"]

_LAMBDA_ITERS = 60
_X_ITERS = 60
#: relative margin added to a finished bound: far above the rounding of K_inf near the root (~1e-15 relative in x)
_MARGIN = 1e-12


@njit(cache=True)
def arm_probabilities_s(n: float, s: float, q: float, v: np.ndarray, out: np.ndarray) -> None:
    """The law of an arm's answers on the support ``v`` (2 or 3 values) from its count, sum and sum of squares.

    The Vandermonde solve in Lagrange form, clipped at 0 and renormalised (exact on integer label counts up to
    rounding)."""
    m = v.shape[0]
    total = 0.0
    for j in range(m):
        if m == 2:
            o = v[1 - j]
            num = s - o * n
            den = v[j] - o
        else:
            o1, o2 = v[(j + 1) % 3], v[(j + 2) % 3]
            num = q - (o1 + o2) * s + o1 * o2 * n
            den = (v[j] - o1) * (v[j] - o2)
        out[j] = max(num / den, 0.0)
        total += out[j]
    for j in range(m):
        out[j] /= total


@njit(cache=True)
def _kinf_plus(p: np.ndarray, v: np.ndarray, x: float) -> tuple[float, float]:
    """(K_inf^+(F, x), dK/dx) for F = p on v and mean(F) < x < 1, at the bet l* found by a safeguarded Newton
    iteration on the first-order condition ``sum p a / (1 - l a) = 0``, ``a = v - x`` (increasing in l)."""
    m = v.shape[0]
    lmax = 1.0 / (1.0 - x)
    lo, hi = 0.0, lmax
    lam = 0.0
    # the condition's sign at the end: if it is still negative there, the optimum is the end itself
    g_end = 0.0
    top = False
    for j in range(m):
        if p[j] > 0.0:
            a = v[j] - x
            den = 1.0 - lmax * a
            if den <= 0.0:
                top = True  # an atom at the support's top (v = 1): the condition tends to +inf at lmax
            else:
                g_end += p[j] * a / den
    end = not top and g_end <= 0.0
    if end:
        lam = lmax
    else:
        lam = 0.5 * lmax
        for _ in range(_LAMBDA_ITERS):
            g = 0.0
            dg = 0.0
            for j in range(m):
                if p[j] > 0.0:
                    a = v[j] - x
                    r = 1.0 / (1.0 - lam * a)
                    g += p[j] * a * r
                    dg += p[j] * a * a * r * r
            if g > 0.0:
                hi = lam
            else:
                lo = lam
            nxt = lam - g / dg if dg > 0.0 else 0.5 * (lo + hi)
            if not (lo < nxt < hi):
                nxt = 0.5 * (lo + hi)
            done = abs(nxt - lam) <= 1e-13 * lam
            lam = nxt
            if done:
                break
    k = 0.0
    w = 0.0
    for j in range(m):
        if p[j] > 0.0:
            b = 1.0 - lam * (v[j] - x)
            if b <= 0.0:
                return math.inf, math.inf
            k += p[j] * math.log(b)
            w += p[j] / b
    if end:  # K = sum p log((1 - v)/(1 - x)) there, so dK/dx = 1/(1 - x) (the end moves with x)
        return max(k, 0.0), lmax
    return max(k, 0.0), lam * w  # the envelope theorem: sum p / (1 - l a) = 1 at an inner optimum


@njit(cache=True)
def kinf_plus_s(p: np.ndarray, v: np.ndarray, x: float) -> float:
    """``K_inf^+(F, x)`` for the law ``p`` on the support ``v`` (values in [0, 1]); 0 at or below the mean, inf at
    x >= 1 unless F is a point mass at 1."""
    mu = 0.0
    for j in range(v.shape[0]):
        mu += p[j] * v[j]
    if x <= mu:
        return 0.0
    if x >= 1.0:
        return math.inf
    return _kinf_plus(p, v, x)[0]


@njit(cache=True)
def kinf_upper_s(p: np.ndarray, v: np.ndarray, level: float) -> float:
    """``sup{x >= mean : K_inf^+(F, x) <= level}`` for the law ``p`` on ``v``; at most the Bernoulli KL bound
    :func:`~purebandits.bounds.kl_upper_s` of the mean at the same level, never below the true value."""
    mu = 0.0
    for j in range(v.shape[0]):
        mu += p[j] * v[j]
    mu = min(max(mu, 0.0), 1.0)
    if level <= 0.0:
        return mu
    # a bracket: K <= level at lo, K > level at hi; Newton steps from hi (K is convex), kept inside the bracket
    lo = mu
    hi = min(kl_upper_s(mu, level), 1.0 - 1e-12)  # K_inf^+ >= d(mu, .): the root is at most the KL bound
    k, dk = _kinf_plus(p, v, hi)
    if k <= level:
        return min(kl_upper_s(mu, level), 1.0)  # the KL bound itself (valid, and the root to rounding)
    for _ in range(_X_ITERS):
        nxt = hi - (k - level) / dk if dk > 0.0 else 0.5 * (lo + hi)
        if not (lo < nxt < hi):
            nxt = 0.5 * (lo + hi)
        kn, dkn = _kinf_plus(p, v, nxt)
        if kn > level:
            hi, k, dk = nxt, kn, dkn
        else:
            lo = nxt
        if k - level <= 1e-13 * level or hi - lo <= 1e-15 * hi:
            break
    # hi has K above the level (to rounding): the margin covers the rounding of K
    return min(hi + _MARGIN * max(hi, 1e-3), 1.0)


@njit(cache=True)
def kinf_lower_s(p: np.ndarray, v: np.ndarray, level: float) -> float:
    """``inf{x <= mean : K_inf^-(F, x) <= level}``: :func:`kinf_upper_s` of the reflected law (``X -> 1 - X``)."""
    m = v.shape[0]
    rp = np.empty(m)
    rv = np.empty(m)
    for j in range(m):
        rp[j] = p[m - 1 - j]
        rv[j] = 1.0 - v[m - 1 - j]
    return 1.0 - kinf_upper_s(rp, rv, level)


def _laws(probabilities: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    P = np.atleast_2d(np.asarray(probabilities, dtype=np.float64))
    v = np.asarray(values, dtype=np.float64)
    if P.shape[1] != v.shape[0] or np.any(P < 0) or np.any(v < 0) or np.any(v > 1):
        raise ValueError("probabilities must be rows over the support, and the support values in [0, 1]")
    return P / P.sum(axis=1, keepdims=True), v


def kinf_upper(probabilities: ArrayLike, values: ArrayLike, level: ArrayLike) -> np.ndarray:
    """:func:`kinf_upper_s` per row of ``probabilities`` (laws on ``values``), at ``level`` (broadcast)."""
    P, v = _laws(probabilities, values)
    lv = np.broadcast_to(np.asarray(level, dtype=np.float64), (P.shape[0],))
    return np.array([kinf_upper_s(P[i], v, float(lv[i])) for i in range(P.shape[0])])


def kinf_lower(probabilities: ArrayLike, values: ArrayLike, level: ArrayLike) -> np.ndarray:
    """:func:`kinf_lower_s` per row of ``probabilities`` (laws on ``values``), at ``level`` (broadcast)."""
    P, v = _laws(probabilities, values)
    lv = np.broadcast_to(np.asarray(level, dtype=np.float64), (P.shape[0],))
    return np.array([kinf_lower_s(P[i], v, float(lv[i])) for i in range(P.shape[0])])
