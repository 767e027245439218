"""The CPE sampling and stopping rule's compiled pieces (CLUCB, lil'CLUCB) and the O(n) top-K kernel.

Shared by the learners of :mod:`purebandits.algorithms.cpe` and the incremental top-K state of
:mod:`purebandits.algorithms.kernels.cpe_incremental`. :func:`_cpe_topk_kernel` is the O(n)-per-pull
reference driver (both oracle calls are :func:`~purebandits.ranking.topk_mask`); the learners'
``run_compiled`` uses the incremental kernel, and the tests hold the two to the same decisions.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.bounds import lil_radius_s
from purebandits.instances.rewards import stream_draw
from purebandits.ranking import topk_mask

#: radius modes: lil'CLUCB's finite-LIL radius (count only), CLUCB's (count and round)
LIL, CLUCB_RAD = 0, 1


@njit(cache=True)
def _clucb_scale(t, conf, n):  # pragma: no cover - compiled
    """``2 log(4 n t^3/conf)``: the part of CLUCB's radius shared by every arm of a round."""
    return 2.0 * math.log(4.0 * n * t**3 / conf)


@njit(cache=True)
def cpe_radius_s(u, t, mode, conf, eps, sigma, n):  # pragma: no cover - compiled
    """lil'CLUCB: ``U(u, conf)`` (finite LIL, "+2"); CLUCB: ``sigma sqrt(2 log(4 n t^3/conf)/u)``."""
    if u <= 0.0:
        return math.inf
    if mode == LIL:
        return lil_radius_s(u, conf, eps, sigma, 2.0)
    return sigma * math.sqrt(_clucb_scale(t, conf, n) / u)


@njit(cache=True)
def cpe_radii(u, t, mode, conf, eps, sigma):  # pragma: no cover - compiled
    """:func:`cpe_radius_s` of every arm (counts ``u``) at round ``t``.

    CLUCB's logarithm depends on the round only: it is taken once (:func:`_clucb_scale`), and each
    arm does the rest of :func:`cpe_radius_s`'s arithmetic (so the same values).
    """
    n = u.shape[0]
    out = np.empty(n)
    if mode == LIL:
        for i in range(n):
            out[i] = cpe_radius_s(u[i], t, mode, conf, eps, sigma, n)
        return out
    c = _clucb_scale(t, conf, n)
    for i in range(n):
        out[i] = sigma * math.sqrt(c / u[i]) if u[i] > 0.0 else math.inf
    return out


@njit(cache=True)
def cpe_tilde(mu, rad, m):  # pragma: no cover - compiled
    """Adjusted means: ``mu - rad`` inside M_t, ``mu + rad`` outside."""
    out = np.empty(mu.shape[0])
    for i in range(mu.shape[0]):
        out[i] = mu[i] - rad[i] if m[i] else mu[i] + rad[i]
    return out


@njit(cache=True)
def cpe_weights(m, mt, tilde):  # pragma: no cover - compiled
    """``(w~(M), w~(M~))``: the adjusted weights of the two decisions, summed in arm order."""
    wm, wt = 0.0, 0.0
    for i in range(m.shape[0]):
        if m[i]:
            wm += tilde[i]
        if mt[i]:
            wt += tilde[i]
    return wm, wt


@njit(cache=True)
def cpe_differ(m, mt):  # pragma: no cover - compiled
    """``|M symdiff M~|``: arms in exactly one of the two decisions."""
    c = 0
    for i in range(m.shape[0]):
        if m[i] != mt[i]:
            c += 1
    return c


@njit(cache=True)
def cpe_stops(m, mt, tilde, sets_equal):  # pragma: no cover - compiled
    """lil'CLUCB: M~ == M. CLUCB: w~(M~) == w~(M) (M already maximises the adjusted weight)."""
    if sets_equal:
        return cpe_differ(m, mt) == 0
    wm, wt = cpe_weights(m, mt, tilde)
    return wt <= wm


@njit(cache=True)
def cpe_pick(m, mt, rad):  # pragma: no cover - compiled
    """The arm of ``M symdiff M~`` with the largest radius (ties to the lower index); -1 if none."""
    best, arm = -1.0, -1
    for i in range(m.shape[0]):
        if m[i] != mt[i] and (arm < 0 or rad[i] > best):
            best, arm = rad[i], i
    return arm


@njit(cache=True)
def _cpe_topk_kernel(counts, sums, sumsq, k, mode, conf, eps, sigma, sets_equal, max_pulls,
                     kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    mu = np.zeros(n)
    n_zero = 0
    for i in range(n):
        if counts[i] > 0:
            mu[i] = sums[i] / counts[i]
        else:
            n_zero += 1
    m = np.zeros(n, dtype=np.bool_)
    mt = np.zeros(n, dtype=np.bool_)
    rad = np.zeros(n)
    full = False  # rad holds every arm's radius
    if n_zero == 0:
        rad = cpe_radii(counts.astype(np.float64), float(total + 1), mode, conf, eps, sigma)
        full = True
        m = topk_mask(mu, k)
        mt = topk_mask(cpe_tilde(mu, rad, m), k)
    while total < max_pulls:
        arm = -1
        if n_zero > 0:
            for i in range(n):
                if counts[i] == 0:
                    arm = i
                    break
        else:
            arm = cpe_pick(m, mt, rad)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        mu[arm] = sums[arm] / counts[arm]
        total += 1
        if n_zero == 0:
            if mode == LIL and full:  # lil'CLUCB's radii depend on the count only: one changed
                rad[arm] = cpe_radius_s(float(counts[arm]), float(total + 1), mode, conf, eps, sigma, n)
            else:
                rad = cpe_radii(counts.astype(np.float64), float(total + 1), mode, conf, eps, sigma)
                full = True
            m = topk_mask(mu, k)
            tilde = cpe_tilde(mu, rad, m)
            mt = topk_mask(tilde, k)
            if cpe_stops(m, mt, tilde, sets_equal):
                return True, total
    return False, total
