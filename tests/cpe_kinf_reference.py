"""An upper bound of the K_inf pair cost independent of the code under test, for the references of
``tests/test_kinf_stop.py`` and ``tests/test_kinf_glr.py``: they skip the exact cost only where this bound rules a
crossing out (``test_the_reference_upper_bound_is_above_the_exact_cost`` checks it is an upper bound)."""

from __future__ import annotations

import numpy as np

V3 = np.array([0.0, 0.5, 1.0])


def _tilt_kl_upper(P, v, x, steps=8):
    """An upper bound of ``K_inf^+(F, x)`` per row (F = rows of ``P`` on the support ``v``, x above F's mean): by the
    definition, K_inf^+(F, x) <= KL(F, G) for any G on [0, 1] with mean >= x; G the exponential tilt
    ``F e^{l X} / E_F e^{l X}`` (KL = log E_F e^{l X} - l mu_F), l from Newton steps on the tilted mean, the smallest
    KL of a tilt whose mean reaches x; inf where none does (e.g. no mass above x)."""
    mu = P @ v
    var = np.maximum(P @ v ** 2 - mu ** 2, 1e-12)
    lam = (x - mu) / var
    best = np.full(x.shape, np.inf)
    logp = np.log(np.where(P > 0.0, P, 1.0))
    for _ in range(steps):
        a = np.where(P > 0.0, logp + lam[:, None] * v, -np.inf)
        amax = a.max(axis=1, keepdims=True)
        w = np.exp(a - amax)
        z = w.sum(axis=1)
        m = (w @ v) / z
        s2 = (w @ v ** 2) / z - m * m
        kl = np.log(z) + amax[:, 0] - lam * mu
        best = np.where((m >= x) & (lam >= 0.0), np.minimum(best, np.maximum(kl, 0.0)), best)
        lam = np.maximum(lam + (x - m) / np.maximum(s2, 1e-12), 0.0)
    return best


def _pair_cost_upper(Ca, Cb, v):
    """An upper bound of ``Z_ab`` (:func:`kinf_pair_cost`) per row, from its definition as an infimum over the level x:
    ``N_a K^-(F_a, x) + N_b K^+(F_b, x)`` at the crossing of the Gaussian approximation, each K_inf bounded by a tilt
    (K^-(F, x) = K^+ of F mirrored on 1 - v at 1 - x). Only to skip the exact Z where a pair surely fails its test."""
    Na, Nb = Ca.sum(axis=1), Cb.sum(axis=1)
    Pa, Pb = Ca / Na[:, None], Cb / Nb[:, None]
    ma, mb = Pa @ v, Pb @ v
    va, vb = np.maximum(Pa @ v ** 2 - ma ** 2, 1e-12), np.maximum(Pb @ v ** 2 - mb ** 2, 1e-12)
    wa, wb = Na / va, Nb / vb
    x = (wa * ma + wb * mb) / (wa + wb)
    with np.errstate(over="ignore", invalid="ignore"):
        up = Na * _tilt_kl_upper(Pa, 1.0 - v, 1.0 - x) + Nb * _tilt_kl_upper(Pb, v, x)
    return np.where(ma > mb, up, 0.0)
