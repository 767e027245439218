"""Track-and-Stop (Garivier and Kaufmann, COLT 2016) for Bernoulli arms: D-tracking + GLR stopping."""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.kinf_stop import RATINGS, KinfStopMixin, check_support
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import glr_statistic_s, glr_stop_s, glr_threshold_s, kl_bernoulli_s
from purebandits.instances.rewards import Categorical, RewardStream, stream_draw
from purebandits.kinf_glr import label_counts_from_moments
from purebandits.lower_bound import solve_characteristic_time
from purebandits.stopping import statistic_progress

__all__ = ["TrackAndStop", "optimal_weights", "TAS_CLIP"]

#: means are clipped to [TAS_CLIP, 1 - TAS_CLIP] inside w*(mu) so every KL is finite
TAS_CLIP = 1e-9
#: Newton iterations stop after a step of relative size <= _TOL (in u = 1/(1 + x) for the inner
#: roots, in y for the outer one); convergence is quadratic, so the error left is O(_TOL**2)
_TOL = 1e-9
#: bound on the absolute rounding error of ``kl_bernoulli_s(p, m)``: in units of the machine
#: epsilon 2^-52 it is at most 2.25 + |log m| + |log(1 - m)| + d(p, m)/2 <= 34 for m and p in
#: [TAS_CLIP, 1 - TAS_CLIP] (where d <= 21), so 64 eps has a margin of 2
_KL_ERR = 64.0 * 2.220446049250313e-16
_MAX_INNER = 100  # caps on the iterations, reached only in degenerate cases that keep bisecting
_MAX_OUTER = 100


@njit(cache=True)
def _x_of_y(y, p, q, x):  # pragma: no cover - compiled
    """x_a(y) = g_a^{-1}(y) for an arm of mean ``q < p`` (``p`` the best mean), started at ``x``.

    ``g_a(x) = d(p, m) + x d(q, m)``, ``m = (p + x q)/(1 + x)``, increases from 0 to d(p, q)
    and is concave with ``g_a'(x) = d(q, m)`` (envelope theorem: m minimises
    ``d(p, m') + x d(q, m')`` over m', so g_a is a minimum of functions linear in x). Newton
    in x crawls when the root is large (g_a flattens like d(p, q) - c/x), so the root is found
    in ``u = 1/(1 + x)``: with ``v = 1 - u = x/(1 + x)`` and ``m = u p + v q``,
    ``h(u) = g_a(v/u)`` falls from d(p, q) at u = 0 to 0 at u = 1, nearly linearly, with
    ``h'(u) = -d(q, m)/u^2``. Newton steps are kept inside a bracket of the root (bisection
    otherwise). u and v are carried separately so that x = v/u keeps its relative precision
    when it is tiny (far arms) or huge (near-tied arms). The iteration stops after a step
    below ``_TOL u v`` or below twice the step the rounding error of h can cause (near-tied
    means, where d(q, m) is tiny and has few correct digits).

    Returns ``(x, dx/dy, r, dr/dy, err_r)``: ``dx/dy = 1/d(q, m)``; ``r = d(p, m)/d(q, m)``,
    the arm's term of F in :func:`optimal_weights_s`, first-order corrected for the last Newton
    step (which is taken but not evaluated); ``dr/dy = (dr/du)/(dh/du)``; and a bound on the
    rounding error of r.
    """
    u = 1.0 / (1.0 + x)
    v = x / (1.0 + x)
    ua, va = 0.0, 1.0  # h(ua) >= y  (x = inf)
    ub, vb = 1.0, 0.0  # h(ub) < y   (x = 0)
    ue, ve, m, dp, dq, du, err = u, v, p, 0.0, 0.0, 0.0, 0.0
    for _ in range(_MAX_INNER):
        ue, ve = u, v
        m = ue * p + ve * q
        dp = kl_bernoulli_s(p, m)
        dq = kl_bernoulli_s(q, m)
        xe = ve / ue
        res = dp + xe * dq - y
        if res >= 0.0:
            ua, va = ue, ve
        else:
            ub, vb = ue, ve
        err = _KL_ERR * (1.0 + xe + y)  # bound on the rounding error of res
        if dq > 0.0:
            du = res * ue * ue / dq  # Newton: -res/h'(u)
            u = ue + du
            v = ve - du
            inside = ua < u < ub and vb < v < va
            step = abs(du)
            if step <= _TOL * ue * ve or step <= 2.0 * err * ue * ue / dq:
                # converged, or down to the rounding noise. A step this small that leaves the
                # bracket (it may be below the spacing of doubles) stops at the bracket's end if
                # that end was evaluated (not x = 0 or x = inf), else where it is.
                if not inside:
                    u, v = (ub, vb) if u >= ub or v <= vb else (ua, va)
                    if u <= 0.0 or v <= 0.0:
                        u, v = ue, ve
                    du = u - ue
                break
            if inside:
                continue
        # the Newton step left the bracket (or d(q, m) rounded to 0): bisect
        du = 0.0
        u = 0.5 * (ua + ub)
        v = 0.5 * (va + vb)
        if not (ua < u < ub and vb < v < va):  # the bracket cannot shrink any more
            u, v = ue, ve
            break
    x = v / u
    if not dq > 0.0:  # m and q indistinguishable in double precision: r is infinite
        return x, math.inf, math.inf, 0.0, 0.0
    c = (p - q) * (p - q) * (ve * dq + ue * dp) / (m * (1.0 - m) * dq * dq)  # -dr/du at (ue, ve)
    dr = c * ue * ue / dq
    return x, 1.0 / dq, dp / dq - c * du, dr, _KL_ERR * (1.0 + dp / dq) / dq + dr * err


@njit(cache=True)
def optimal_weights_s(mu_in, w):  # pragma: no cover - compiled
    """Write the Bernoulli optimal proportions w*(mu) into ``w`` (GK16 Thm 5; ALGORITHMS.md 13.1).

    Means are clipped to [TAS_CLIP, 1 - TAS_CLIP]. If several arms share the largest (clipped)
    mean, w* is uniform over them (any w has value 0 there; GK16's code does the same). Arms
    whose KL ``d(mu_1, mu_a)`` from the best is within the rounding error of the KL (``_KL_ERR``,
    1.4e-14: mu_1 - mu_a below ~1e-7 for means near 1/2) count as tied with it, as the solution
    would be rounding noise. Otherwise all weights are > 0 and sum to 1: with mu_1 the best
    mean, GK16 Theorem 5 gives ``w_1 = 1/(1 + sum_a x_a(y*))`` and ``w_a = x_a(y*) w_1``, where
    ``x_a(y) = g_a^{-1}(y)`` (:func:`_x_of_y`) and y* in (0, d(mu_1, mu_2)) is the root of
    ``F(y) = sum_{a != 1} d(mu_1, m_a)/d(mu_a, m_a) = 1``, ``m_a = (mu_1 + x_a mu_a)/(1 + x_a)``
    at ``x_a = x_a(y)``. F increases from 0 to infinity on that interval.

    Method (it is called at every pull, so speed matters; the former nested bisection to a
    relative width of 1e-12 took ~0.9 ms on 10 arms): safeguarded Newton on ``log F(y) = 0``
    (F grows like y^2 near 0 and like (d(mu_1, mu_2) - y)^-2 near the top, so log F is far
    closer to linear than F), with the exact derivative ``F'(y) = sum_a (dr_a/du_a)/(dh_a/du_a)``
    and a bracket [lo, hi] of the root (bisection when a step leaves it). Each x_a(y) is itself a
    safeguarded Newton solve in u = 1/(1 + x_a) (:func:`_x_of_y`), started from the tangent
    prediction ``x_a + (y_new - y)/g_a'(x_a)`` made at the previous outer iterate (at the first
    one, from ``g_a(x) ~ D x/(x + D/s)``, D = d(mu_1, mu_a), s = d(mu_a, mu_1) = g_a'(0)); the
    last inner step is folded into F to first order. Typically 3 to 5 outer steps with 1 to 3
    inner ones each (measured: ~4 us on 10 arms, ~18 us on 50, against ~0.9 and ~5.2 ms).
    Each iteration stops after a step of relative size <= _TOL = 1e-9 (the error left is
    O(1e-18), convergence being quadratic) or below twice what the rounding errors of the KLs
    can cause. So the weights are as accurate as the double-precision KLs allow: to ~1e-14 when
    the means are well apart, but only to about 1e-17/d(mu_1, mu_2) when the two best nearly
    tie, since d(mu_2, m) < d(mu_1, mu_2) then has few correct digits (the nested bisection had
    the same limit; d(mu_1, mu_2) ~ 2 (mu_1 - mu_2)^2 for means near 1/2).

    A pure function of ``mu_in`` (no state is kept between calls), so the Python learner and
    the compiled kernel make identical choices. The learner and the kernel call
    :func:`_weights_ws`, the same computation with a workspace that skips work whose result is
    already known (same output bit for bit).
    """
    ws, key, iws = workspace(mu_in.shape[0])
    _weights_ws(mu_in, w, ws, key, iws)


#: rows of the float workspace of :func:`_weights_ws` (a (_WS_ROWS, n) array): the means, the
#: clipped means, dx_a/dy, the current iteration's r_a, dr_a/dy and rounding bounds, the first
#: iteration's cache (clipped mean, x_a, dx_a/dy, r_a, dr_a/dy, bound), the last output, and the
#: start's KLs d(mu_1, mu_a), d(mu_a, mu_1) with the (mu_1, mu_a) they are for
(_WS_MEAN, _WS_MU, _WS_DXDY, _WS_R, _WS_DR, _WS_E, _WS_CMU, _WS_CX, _WS_CDXDY, _WS_CR, _WS_CDR, _WS_CE,
 _WS_LAST, _WS_KP, _WS_KMU, _WS_KD, _WS_KS) = range(17)
_WS_ROWS = 17


@njit(cache=True)
def workspace(n):  # pragma: no cover - compiled
    """A cold workspace ``(ws, key, iws)`` of :func:`_weights_ws` for ``n`` arms.

    ``iws`` holds each arm's representative (n ints), then a hash table of the clipped means
    (a power of two >= 2n slots).
    """
    size = 2
    while size < 2 * n:
        size *= 2
    return np.full((_WS_ROWS, n), np.nan), np.zeros(4), np.zeros(n + size, np.int64)


@njit(cache=True)
def _weights_ws(mu_in, w, ws, key, iws):  # pragma: no cover - compiled
    """:func:`optimal_weights_s` with a workspace kept between calls; the same bits, less work.

    Two savings, neither changing an operation of the solve (GK16 Thm 5):

    - Arms with equal clipped means (equal (sum, count) ratios: common among the arms tracking
      pulls at the same low rate) have equal x_a at every iterate: same start, same Newton
      steps. Each such group solves once, at its lowest arm (its representative, found with a
      hash table of the means in ``iws``), and the others copy its results, still added to F in
      arm order, so F and everything after are bit-identical.
    - The first outer iteration is at ``y0 = d(mu_1, mu_2)/2`` and starts each x_a from
      (mu_1, y0, mu_a) only, so an arm's results there (x_a(y0), dx_a/dy, r_a, dr_a/dy, the
      rounding bound) are a function of (best arm, mu_1, d(mu_1, mu_2), mu_a). ``key`` =
      (valid, mu_1, d(mu_1, mu_2), best) of the last call that reached that iteration, whose
      per-arm results are the rows _WS_CMU.._WS_CE: an arm whose clipped mean is unchanged
      reuses them (two KLs for its start and ~1.5 Newton evaluations of two KLs each saved).
      If no mean changed, the inputs are the last call's and its output (row _WS_LAST) is
      returned. Between two pulls only the pulled arm's mean changes; the key holds when that
      arm is neither of the two best (GK16's tracking pulls those two most when they nearly
      tie, and then the key rarely holds). The start's two KLs d(mu_1, mu_a), d(mu_a, mu_1) are
      also kept with the (mu_1, mu_a) they are for: they still hold when the second best arm
      was pulled (y0 changed, mu_1 did not).

    A cold workspace (:func:`workspace`) gives :func:`optimal_weights_s`'s output.
    """
    n = mu_in.shape[0]
    mu = ws[_WS_MU]
    for i in range(n):
        mu[i] = min(max(mu_in[i], TAS_CLIP), 1.0 - TAS_CLIP)
    best = 0
    for i in range(n):
        if mu[i] > mu[best]:
            best = i
    p = mu[best]
    n_best = 0
    second = -math.inf
    for i in range(n):
        if mu[i] == p:
            n_best += 1
        elif mu[i] > second:
            second = mu[i]
    ymax = kl_bernoulli_s(p, second) if n_best == 1 else 0.0
    if ymax <= _KL_ERR:  # tied best arms, or as good as tied (their KL is rounding noise): uniform
        key[0] = 0.0
        n_best = 0
        for i in range(n):
            if kl_bernoulli_s(p, mu[i]) <= _KL_ERR:
                n_best += 1
        for i in range(n):
            w[i] = 1.0 / n_best if kl_bernoulli_s(p, mu[i]) <= _KL_ERR else 0.0
        return
    rep = iws[:n]  # each arm's representative: the lowest arm with its clipped mean
    table = iws[n:]  # open addressing on the mean; slot = arm + 1, 0 = empty
    mask = table.shape[0] - 1
    for j in range(table.shape[0]):
        table[j] = 0
    for a in range(n):
        h = int(mu[a] * 1048576.0) & mask
        while table[h] != 0 and mu[table[h] - 1] != mu[a]:
            h = (h + 1) & mask
        if table[h] == 0:
            table[h] = a + 1
        rep[a] = table[h] - 1
    dxdy = ws[_WS_DXDY]
    rr = ws[_WS_R]
    rdr = ws[_WS_DR]
    re_ = ws[_WS_E]
    cmu = ws[_WS_CMU]
    cx = ws[_WS_CX]
    cdxdy = ws[_WS_CDXDY]
    cr = ws[_WS_CR]
    cdr = ws[_WS_CDR]
    ce = ws[_WS_CE]
    last = ws[_WS_LAST]
    kp = ws[_WS_KP]
    kmu = ws[_WS_KMU]
    kd = ws[_WS_KD]
    ks = ws[_WS_KS]
    hit = key[0] == 1.0 and key[1] == p and key[2] == ymax and key[3] == best
    same = hit
    y = 0.5 * ymax
    for a in range(n):  # start the x_a at the root of D x/(x + D/s) = y, D = g_a(inf), s = g_a'(0)
        if a != best and not (hit and mu[a] == cmu[a]):
            same = False
            if rep[a] == a:
                if not (kp[a] == p and kmu[a] == mu[a]):
                    kp[a], kmu[a] = p, mu[a]
                    kd[a] = kl_bernoulli_s(p, mu[a])
                    ks[a] = kl_bernoulli_s(mu[a], p)
                dd = kd[a]
                s = ks[a]
                x0 = y * dd / (s * (dd - y)) if s > 0.0 and dd > y else 1.0
                w[a] = x0 if x0 < math.inf else 1.0
    if same:  # the last call's inputs: its output
        for i in range(n):
            w[i] = last[i]
        return
    lo, hi = 0.0, ymax
    for it in range(_MAX_OUTER):
        f = 0.0
        df = 0.0
        err = 0.0
        for a in range(n):
            if a != best:
                b = rep[a]
                if b != a:  # an earlier arm with the same mean: its results
                    xa, dxa, r, dr, e = w[b], dxdy[b], rr[b], rdr[b], re_[b]
                elif it == 0 and hit and mu[a] == cmu[a]:  # the first iteration's results, unchanged
                    xa, dxa, r, dr, e = cx[a], cdxdy[a], cr[a], cdr[a], ce[a]
                else:
                    xa, dxa, r, dr, e = _x_of_y(y, p, mu[a], w[a])
                if it == 0:
                    cmu[a], cx[a], cdxdy[a], cr[a], cdr[a], ce[a] = mu[a], xa, dxa, r, dr, e
                w[a] = xa
                dxdy[a] = dxa
                rr[a] = r
                rdr[a] = dr
                re_[a] = e
                f += r
                df += dr
                err += e
        if it == 0:
            key[0], key[1], key[2], key[3] = 1.0, p, ymax, best
        if f >= 1.0:
            hi = y
        else:
            lo = y
        done = False
        yn = math.nan
        if 0.0 < f < math.inf and df > 0.0:
            dy = -math.log(f) * f / df  # Newton on log F
            yn = y + dy
            step = abs(dy)
            done = step <= _TOL * y or step <= 2.0 * err / df  # converged, or down to the rounding noise
            if done and yn >= hi:  # such a small step that leaves the bracket stops at its end
                yn = hi
            elif done and yn <= lo:
                yn = lo if lo > 0.0 else y
        if not (done or lo < yn < hi):  # the Newton step left the bracket (or is not defined): bisect
            yn = 0.5 * (lo + hi)
            done = not lo < yn < hi  # the bracket cannot shrink any more
        dy = yn - y
        for a in range(n):  # tangent prediction of x_a(yn) (x_a(y) is convex: it undershoots)
            if a != best:
                xn = w[a] + dy * dxdy[a]
                w[a] = xn if 0.0 < xn < math.inf else w[a] * (yn / y)
        y = yn
        if done:
            break
    total = 1.0
    for a in range(n):
        if a != best:
            total += w[a]
    w[best] = 1.0
    for a in range(n):
        w[a] /= total
        last[a] = w[a]


def optimal_weights(mu: ArrayLike) -> np.ndarray:
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
    ws, key, iws = workspace(counts.shape[0])
    return _pick_ws(sums, counts, pending, w, ws, key, iws)


@njit(cache=True)
def _pick_ws(sums, counts, pending, w, ws, key, iws):  # pragma: no cover - compiled
    """:func:`tas_pick` with the w* workspace ``(ws, key, iws)`` of :func:`_weights_ws` (same pick)."""
    n = counts.shape[0]
    t = 0
    lo = 0
    for i in range(n):
        t += counts[i] + pending[i]
        if counts[i] + pending[i] < counts[lo] + pending[lo]:
            lo = i
    if counts[lo] + pending[lo] <= max(math.sqrt(t) - n / 2.0, 0.0):
        return lo
    mu = ws[_WS_MEAN]
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
    _weights_ws(mu, w, ws, key, iws)
    best = 0
    best_v = -math.inf
    for i in range(n):
        v = t * w[i] - (counts[i] + pending[i])
        if v > best_v:
            best_v = v
            best = i
    return best


@njit(cache=True)
def _pick_allowed_ws(sums, counts, pending, mask, w, ws, key, iws):  # pragma: no cover - compiled
    """:func:`_pick_ws` among the arms where ``mask`` is True (at least one); the same arm when all are.

    Forced exploration restricted to the allowed arms: if the least-pulled allowed arm has
    ``N <= max(sqrt(t) - n/2, 0)`` (t = sum of N over all arms), pull it; otherwise the allowed
    arm with the largest tracking deficit ``t w*_a(mu_hat) - N_a``. Ties to the lower index.
    """
    n = counts.shape[0]
    t = 0
    lo = -1
    for i in range(n):
        t += counts[i] + pending[i]
        if mask[i] and (lo < 0 or counts[i] + pending[i] < counts[lo] + pending[lo]):
            lo = i
    if counts[lo] + pending[lo] <= max(math.sqrt(t) - n / 2.0, 0.0):
        return lo
    mu = ws[_WS_MEAN]
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
    _weights_ws(mu, w, ws, key, iws)
    best = -1
    best_v = -math.inf
    for i in range(n):
        if mask[i]:
            v = t * w[i] - (counts[i] + pending[i])
            if v > best_v or best < 0:
                best_v = v
                best = i
    return best


class TrackAndStop(KinfStopMixin, Learner):
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
        delta-correct, but conservative in practice) or ``log(2 t (n-1)/delta)`` (GK16 Prop. 12); with
        ``stop="kinf"``, "theory" is :func:`~purebandits.glr_thresholds.kinf_kt_pair_threshold` per pair,
        proven for that statistic.
    stop : {"glr", "kinf"}, default="glr"
        The stopping statistic: GK16's Bernoulli GLR of the means, or the GLR of the rewards' own model, every
        distribution on ``support`` (K_inf, :mod:`purebandits.kinf_glr`): on ratings it is 1.3-2 times larger for
        the same answers, so the stop comes sooner at the same proven error. The sampling rule is unchanged.
    weights : {"bernoulli", "kinf"}, default="bernoulli"
        The proportions tracked: GK16's w*(mu_hat) for Bernoulli arms (Thm 5, every pull), or w*(F_hat) of the
        ratings' own model (the T*_Kinf of :mod:`purebandits.lower_bound`, categorical arms on ``support`` against
        every distribution on [0, 1]), the allocation that makes the K_inf stop fastest. The latter is an LP
        (cutting planes, relative gap 1e-2), so it is recomputed lazily: when the answers have grown by 10 %
        since the last solve (our choice; the tracking argument of GK16 Thm 14 needs only w*(F_hat) -> w*(F),
        which lazily updated weights keep). Use it with ``stop="kinf"``.
    support : tuple of 2 or 3 floats, default=(0.0, 0.5, 1.0)
        The values the rewards take (``stop="kinf"`` or ``weights="kinf"``; another reward is a ``ValueError``).

    Notes
    -----
    Needs rewards in [0, 1] (Bernoulli KL). Empirical means of 0 or 1 and ties are handled
    by clipping the means to [1e-9, 1 - 1e-9] inside w* and by uniform weights over tied
    best arms (see :func:`optimal_weights_s`); the GLR statistic uses the unclipped means.
    Pending pulls count in the tracking (virtual pulls), not in the means or the stop.
    Each pull outside forced exploration solves for w* (:func:`optimal_weights_s`: Newton
    iterations, O(n) work each; ~4 us on 10 arms, ~18 us on 50).

    Restricted asks (``ask(n, allowed=...)``): D-tracking among the allowed arms
    (:func:`_pick_allowed_ws`): forced exploration of the least-pulled allowed arm when its
    count is at most ``max(sqrt(t) - n/2, 0)``, else the allowed arm with the largest tracking
    deficit ``t w*_a - N_a`` (the unrestricted pick when every arm is allowed). Correctness is
    the GLR stop's, which holds for any sampling rule: with ``threshold="theory"``, GK16 Thm 10
    bounds the probability that Z(t) ever exceeds it for a wrong answer "whatever the sampling
    strategy" (the practical threshold is not proven, restricted or not). What the restriction
    can cost is the asymptotic optimality: it needs the counts to track w*, so every arm must be
    allowed often enough; an arm rarely allowed falls behind and the stop comes later.

    References
    ----------
    A. Garivier, E. Kaufmann. Optimal best arm identification with fixed confidence.
    COLT 2016. Code: jsfunc/best-arm-identification (BAIalgos.jl, mainBAI.jl).
    """

    name = "track_and_stop"
    kind = "fixed_confidence"
    tags = {"top_k": False, "bounded_rewards": True}
    paper = "Garivier, Kaufmann, COLT 2016 (Track-and-Stop: D-tracking, Thm 5 weights, Chernoff stop)"
    invalid_params = [("threshold", "loose"), ("stop", "lucb"), ("support", (0.5,)), ("weights", "gauss")]

    def __init__(self, delta: float = 0.1, *, threshold: str = "practical", stop: str = "glr",
                 weights: str = "bernoulli", support: tuple[float, ...] = RATINGS) -> None:
        self.delta = delta
        self.threshold = threshold
        self.stop = stop
        self.weights = weights
        self.support = support

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("threshold", self.threshold, allowed=("practical", "theory"))
        check_param("stop", self.stop, allowed=("glr", "kinf"))
        check_param("weights", self.weights, allowed=("bernoulli", "kinf"))
        check_support(self.support)

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` (on ``support`` with the K_inf stop or weights)."""
        if self.stop == "kinf" or self.weights == "kinf":
            self._kinf_check_reward(reward)
        Learner.tell(self, arm, reward)

    def _kinf_weights(self) -> np.ndarray:
        """w*(F_hat) of the K_inf model, recomputed when the answers have grown by 5 % (see ``weights``)."""
        t = int(self.t_)
        if self.kinf_w_.size == 0 or t >= self.kinf_w_next_:
            # add-1/2 (Krichevsky-Trofimov) estimates: an arm whose answers are all one value would otherwise be a
            # point mass, whose K_inf to the extreme values is infinite and whose cutting plane does not close
            C = label_counts_from_moments(self.counts_, self.sums_, self.sumsq_, self.support) + 0.5
            try:
                w = solve_characteristic_time(Categorical(C, self.support), 1, rtol=1e-2).weights
            except RuntimeError:  # the LP did not reach its gap: keep the previous weights (uniform at first)
                w = self.kinf_w_ if self.kinf_w_.size else np.full(self.n_arms_, 1.0 / self.n_arms_)
            self.kinf_w_ = np.asarray(w, dtype=np.float64)
            self.kinf_w_next_ = max(t + 1, math.ceil(1.1 * t))
        return self.kinf_w_

    def _kinf_pick(self, mask: np.ndarray | None) -> int:
        """D-tracking of :meth:`_kinf_weights` (the rule of :func:`tas_pick`, among the allowed arms if masked)."""
        N = self.counts_ + self.pending_
        t = float(N.sum())
        M = N if mask is None else np.where(mask, N, np.iinfo(np.int64).max)
        lo = int(np.argmin(M))
        if N[lo] <= max(math.sqrt(t) - self.n_arms_ / 2.0, 0.0):
            return lo
        deficit = t * self._kinf_weights() - N
        if mask is not None:
            deficit = np.where(mask, deficit, -np.inf)
        return int(np.argmax(deficit))

    def _restore(self) -> None:
        self._w = np.empty(self.n_arms_)
        self._ws = workspace(self.n_arms_)  # w* workspace (:func:`_weights_ws`): same picks, less work
        self._glr_hint = -1  # the GLR statistic's last minimiser (glr_stop_s: the same stops as glr_statistic_s)
        self._kstop = None  # the K_inf stop's cache of the state (KinfStopMixin): rebuilt from the arrays

    def _start(self) -> None:
        if self.weights == "kinf":  # state (saved and loaded), so a loaded learner tracks the same weights
            self.kinf_w_ = np.zeros(0)  # the last w*(F_hat); recomputed once t >= kinf_w_next_
            self.kinf_w_next_ = 0

    def _ask_one(self) -> int:
        if self.weights == "kinf":
            return self._kinf_pick(None)
        return int(_pick_ws(self.sums_, self.counts_, self.pending_, self._w, *self._ws))

    def _ask_allowed(self, mask: np.ndarray) -> int:
        if self.weights == "kinf":
            return self._kinf_pick(mask)
        return int(_pick_allowed_ws(self.sums_, self.counts_, self.pending_, mask, self._w, *self._ws))

    def _glr(self) -> tuple[int, float, float]:
        """(empirical best arm, Bernoulli GLR statistic Z(t), threshold beta(t, delta)) on the answered pulls."""
        best, z = glr_statistic_s(self.sums_, self.counts_, False, 0.5)
        return int(best), float(z), float(glr_threshold_s(float(self.t_), float(self.n_arms_), float(self.delta),
                                                          self.threshold == "theory"))

    def _check_stop(self) -> None:
        if self.stop == "kinf":
            self._kinf_check_stop()
            return
        # Z > beta decided by glr_stop_s: one transportation cost while the last minimiser stays below the
        # threshold, the full O(n) statistic only otherwise (the same decision as computing Z)
        thr = glr_threshold_s(float(self.t_), float(self.n_arms_), float(self.delta), self.threshold == "theory")
        best, stop, self._glr_hint = glr_stop_s(self.sums_, self.counts_, False, 0.5, thr, self._glr_hint)
        if stop:
            self._finish([int(best)])

    def _stopping_progress(self) -> StoppingProgress:
        """Chernoff/GLR stop (GK16 Sec. 3): ``statistic = Z(t)``, ``threshold = beta(t, delta)``.

        Strict (fires at margin > 0); ``fraction = min(1, Z/beta)``. ``Z = 0`` while an arm has no answer.
        """
        if self.stop == "kinf":
            return self._kinf_progress("Track-and-Stop, Garivier and Kaufmann 2016")
        _, z, thr = self._glr()
        beta = "log(2 t (n-1)/delta)" if self.threshold == "theory" else "log((log t + 1)/delta)"
        return statistic_progress(z, thr, z > thr, (
            f"stops when the evidence that the leading item is best (the GLR statistic) exceeds {beta}, "
            f"delta = {self.delta:g} (Track-and-Stop, Garivier and Kaufmann 2016)"))

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if self.stop == "kinf" or self.weights == "kinf":
            raise NotImplementedError("Track-and-Stop with the K_inf stop or weights has no compiled kernel (the "
                                      "ask/tell loop runs it)")
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
    ws, key, iws = workspace(n)  # w* workspace kept across pulls (_weights_ws: same w*, less work)
    total = 0
    for i in range(n):
        total += counts[i]
    hint = -1  # the GLR statistic's last minimiser (glr_stop_s: the same decisions as glr_statistic_s)
    while total < max_pulls:
        arm = _pick_ws(sums, counts, pending, w, ws, key, iws)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        best, stop, hint = glr_stop_s(sums, counts, False, 0.5, glr_threshold_s(float(total), float(n), delta, theory),
                                      hint)
        if stop:
            return best, total
    return -1, total
