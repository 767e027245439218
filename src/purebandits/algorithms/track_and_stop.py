"""Track-and-Stop (Garivier and Kaufmann, COLT 2016) for Bernoulli arms: D-tracking + GLR stopping."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from purebandits.base import Learner, check_param
from purebandits.bounds import glr_statistic_s, glr_threshold_s, kl_bernoulli_s
from purebandits.instances.rewards import stream_draw

__all__ = ["TrackAndStop", "optimal_weights", "TAS_CLIP"]

#: means are clipped to [TAS_CLIP, 1 - TAS_CLIP] inside w*(mu) so every KL is finite
TAS_CLIP = 1e-9
_ITERS = 200  # cap on bisection steps; the loops stop earlier at a relative width of 1e-12
_RTOL = 1e-12


@njit(cache=True)
def _g(x, m1, ma):  # pragma: no cover - compiled
    """g_a(x) = d(mu_1, m) + x d(mu_a, m), m = (mu_1 + x mu_a)/(1 + x); increasing from 0 to d(mu_1, mu_a)."""
    m = (m1 + x * ma) / (1.0 + x)
    return kl_bernoulli_s(m1, m) + x * kl_bernoulli_s(ma, m)


@njit(cache=True)
def _x_of_y(y, m1, ma):  # pragma: no cover - compiled
    """x_a(y) = g_a^{-1}(y) for y in [0, d(mu_1, mu_a)), by doubling then bisection."""
    if y <= 0.0:
        return 0.0
    hi = 1.0
    k = 0
    while _g(hi, m1, ma) < y and k < 200:
        hi *= 2.0
        k += 1
    lo = 0.0
    for _ in range(_ITERS):
        mid = 0.5 * (lo + hi)
        if _g(mid, m1, ma) < y:
            lo = mid
        else:
            hi = mid
        if hi - lo <= _RTOL * hi:
            break
    return 0.5 * (lo + hi)


@njit(cache=True)
def _ratio_sum(y, mu, best):  # pragma: no cover - compiled
    """F(y) = sum_{a != best} d(mu_1, m_a)/d(mu_a, m_a) with m_a at x_a(y); increasing in y."""
    m1 = mu[best]
    s = 0.0
    for a in range(mu.shape[0]):
        if a != best:
            x = _x_of_y(y, m1, mu[a])
            m = (m1 + x * mu[a]) / (1.0 + x)
            den = kl_bernoulli_s(mu[a], m)
            if den <= 0.0:
                return math.inf
            s += kl_bernoulli_s(m1, m) / den
    return s


@njit(cache=True)
def optimal_weights_s(mu_in, w):  # pragma: no cover - compiled
    """Write the Bernoulli optimal proportions w*(mu) into ``w`` (GK16 Thm 5; ALGORITHMS.md 13.1).

    Means are clipped to [TAS_CLIP, 1 - TAS_CLIP]. If several arms share the largest (clipped)
    mean, w* is uniform over them (any w has value 0 there; GK16's code does the same).
    Otherwise solve ``F(y) = 1`` for y in (0, d(mu_1, mu_2)) by bisection, then
    ``w_1 = 1/(1 + sum_a x_a(y))`` and ``w_a = x_a(y) w_1``.
    """
    n = mu_in.shape[0]
    mu = np.empty(n)
    for i in range(n):
        mu[i] = min(max(mu_in[i], TAS_CLIP), 1.0 - TAS_CLIP)
    best = 0
    for i in range(n):
        if mu[i] > mu[best]:
            best = i
    n_best = 0
    second = -math.inf
    for i in range(n):
        if mu[i] == mu[best]:
            n_best += 1
        elif mu[i] > second:
            second = mu[i]
    if n_best > 1:
        for i in range(n):
            w[i] = 1.0 / n_best if mu[i] == mu[best] else 0.0
        return
    lo = 0.0
    hi = kl_bernoulli_s(mu[best], second)
    for _ in range(_ITERS):
        mid = 0.5 * (lo + hi)
        if _ratio_sum(mid, mu, best) < 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= _RTOL * hi:
            break
    y = 0.5 * (lo + hi)
    total = 1.0
    for a in range(n):
        if a != best:
            w[a] = _x_of_y(y, mu[best], mu[a])
            total += w[a]
    w[best] = 1.0
    for a in range(n):
        w[a] /= total


def optimal_weights(mu) -> np.ndarray:
    """Optimal sampling proportions ``w*(mu)`` of Bernoulli best-arm identification (GK16 Thm 5).

    ``w* = argmax_w min_{a != 1} [w_1 d(mu_1, x_a) + w_a d(mu_a, x_a)]`` with
    ``x_a = (w_1 mu_1 + w_a mu_a)/(w_1 + w_a)``, found by the scalar root-finding of GK16
    (see :func:`optimal_weights_s`). Sums to 1.
    """
    mu = np.asarray(mu, dtype=np.float64)
    w = np.empty(mu.shape[0])
    optimal_weights_s(mu, w)
    return w


@njit(cache=True)
def tas_pick(sums, counts, pending, w):  # pragma: no cover - compiled
    """D-tracking (GK16 Sec. 3.1) on virtual counts ``N = counts + pending``.

    If ``min_a N_a <= max(sqrt(t) - n/2, 0)`` (t = sum N) pull ``argmin N`` (forced
    exploration), otherwise ``argmax_a t w*_a(mu_hat) - N_a``; ties to the lower index.
    Means use answered pulls (0 for an arm with none). ``w`` is scratch space.
    """
    n = counts.shape[0]
    t = 0
    lo = 0
    for i in range(n):
        t += counts[i] + pending[i]
        if counts[i] + pending[i] < counts[lo] + pending[lo]:
            lo = i
    if counts[lo] + pending[lo] <= max(math.sqrt(t) - n / 2.0, 0.0):
        return lo
    mu = np.empty(n)
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
    optimal_weights_s(mu, w)
    best = 0
    best_v = -math.inf
    for i in range(n):
        v = t * w[i] - (counts[i] + pending[i])
        if v > best_v:
            best_v = v
            best = i
    return best


class TrackAndStop(Learner):
    """Track-and-Stop for Bernoulli arms: D-tracking of w*(mu_hat) and the Chernoff (GLR) stop.

    GK16 (ALGORITHMS.md 13.1): sample by D-tracking (:func:`tas_pick`) the optimal proportions
    :func:`optimal_weights` at the empirical means; stop when the GLR statistic
    ``Z(t) = min_{b != a_hat} [N_a d(mu_a, mu_ab) + N_b d(mu_b, mu_ab)]`` exceeds
    ``beta(t, delta)`` and output ``a_hat``. Asymptotically optimal:
    ``E[tau]/log(1/delta) -> T*(mu)``.

    Parameters
    ----------
    delta : float, default=0.1
        Error probability.
    threshold : {"practical", "theory"}, default="practical"
        ``beta(t, delta) = log((log t + 1)/delta)`` (GK16's experiments; not proven
        delta-correct, but conservative in practice) or ``log(2 t (n-1)/delta)`` (GK16 Prop. 12).

    Notes
    -----
    Needs rewards in [0, 1] (Bernoulli KL). Empirical means of 0 or 1 and ties are handled
    by clipping the means to [1e-9, 1 - 1e-9] inside w* and by uniform weights over tied
    best arms (see :func:`optimal_weights_s`); the GLR statistic uses the unclipped means.
    Pending pulls count in the tracking (virtual pulls), not in the means or the stop.
    Each pull outside forced exploration solves for w* (nested bisection, O(n) root finds).

    References
    ----------
    A. Garivier, E. Kaufmann. Optimal best arm identification with fixed confidence.
    COLT 2016. Code: jsfunc/best-arm-identification (BAIalgos.jl, mainBAI.jl).
    """

    name = "track_and_stop"
    kind = "fixed_confidence"
    tags = {"top_k": False, "bounded_rewards": True}
    paper = "Garivier, Kaufmann, COLT 2016 (Track-and-Stop: D-tracking, Thm 5 weights, Chernoff stop)"
    invalid_params = [("threshold", "loose")]

    def __init__(self, delta: float = 0.1, *, threshold: str = "practical") -> None:
        self.delta = delta
        self.threshold = threshold

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("threshold", self.threshold, allowed=("practical", "theory"))

    def _restore(self) -> None:
        self._w = np.empty(self.n_arms_)

    def _ask_one(self) -> int:
        return int(tas_pick(self.sums_, self.counts_, self.pending_, self._w))

    def _check_stop(self) -> None:
        best, z = glr_statistic_s(self.sums_, self.counts_, False, 0.5)
        if z > glr_threshold_s(float(self.t_), float(self.n_arms_), float(self.delta), self.threshold == "theory"):
            self._finish([int(best)])

    def run_compiled(self, stream, max_pulls: int) -> None:
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        stop, t = _tas_kernel(self.counts_, self.sums_, self.sumsq_, self.pending_, float(self.delta),
                              self.threshold == "theory", int(max_pulls), *stream.args())
        self.t_ = int(t)
        if stop >= 0:
            self._finish([int(stop)])


@njit(cache=True)
def _tas_kernel(counts, sums, sumsq, pending, delta, theory, max_pulls,
                kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    n = counts.shape[0]
    w = np.empty(n)
    total = 0
    for i in range(n):
        total += counts[i]
    while total < max_pulls:
        arm = tas_pick(sums, counts, pending, w)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        best, z = glr_statistic_s(sums, counts, False, 0.5)
        if z > glr_threshold_s(float(total), float(n), delta, theory):
            return best, total
    return -1, total
