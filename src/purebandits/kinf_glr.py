"""The GLR (Chernoff) statistic for rewards on a known finite support, with Honda and Takemura's K_inf.

Ratings take a few known values (``{0, 1/2, 1}`` for the caption contests). Per arm the data are label counts;
the empirical distribution ``F_hat_a`` (counts / N_a) is the maximum-likelihood estimate, and the log generalised
likelihood ratio of "mean_a >= mean_b" against "mean_a <= mean_b", with every distribution on [0, 1] allowed
under the alternative, is the two-arm cost

    Z_ab = inf_{x in [mu_b, mu_a]} N_a K_inf^-(F_hat_a, x) + N_b K_inf^+(F_hat_b, x)      (0 when mu_a <= mu_b),

``K_inf^+(F, x)`` (``K_inf^-``) the smallest KL(F, G) over distributions G on [0, 1] with mean >= x (<= x),
computed by :func:`purebandits.lower_bound.kinf`. The objective is convex in x (each K_inf is), so the infimum
is a 1-D convex minimisation; it is the same two-arm cost ``g_ij`` that :mod:`purebandits.lower_bound` minimises
for the characteristic time T*_Kinf (with the weights w replaced by the counts N), and is computed by that
module's solver (Newton's method on the derivative, kept in a bracket). The statistic of a top-k answer is
``Z = min over a in the empirical top k, b outside, of Z_ab``; the rule stops when Z exceeds a threshold proven
for it, :func:`purebandits.glr_thresholds.kinf_portfolio_threshold`.

Relation to the Bernoulli statistic: for F on [0, 1] with mean mu, ``K_inf^+(F, x) >= d(mu, x)`` (the Bernoulli
KL), and the same below. Proof by the dual form: ``log(1 - l (X - x))`` is concave in X, so on [0, 1] it lies
above its chord, ``log(1 - l (X - x)) >= (1 - X) log(1 + l x) + X log(1 - l (1 - x))``; taking E_F and the
maximum over l gives ``K_inf^+(F, x) >= K_inf^+(Bernoulli(mu), x) = d(mu, x)``. (Equivalently: among the
distributions on [0, 1] with a given mean, the Bernoulli one is the least informative, being the
most spread in the convex order.) Hence the Bernoulli GLR statistic of the means,
:func:`purebandits.bounds.glr_pair_cost`, is a lower bound of Z, with equality on the support {0, 1}; the gap is
what ratings gain from their own model (about Var_Bernoulli / Var_F near the optimum).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

import purebandits.glr_thresholds as glr_thresholds
import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.kinf_bounds import arm_probabilities_s
from purebandits.lower_bound import _CategoricalModel

__all__ = [
    "kinf_pair_cost", "kinf_pair_upper", "kinf_pair_exceeds", "kinf_glr_statistic", "kinf_glr_stop", "empirical_top",
    "label_counts_from_moments", "KinfGLRStop",
]


def _as_counts(label_counts: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validated (counts (n, S) float, support (S,)) from label counts and the known support."""
    C = np.asarray(label_counts, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if C.ndim != 2 or v.ndim != 1 or C.shape[1] != v.size:
        raise ValueError(f"label_counts must be (n_arms, S) for a support of S values, got {C.shape} and {v.shape}")
    if np.any(v < 0.0) or np.any(v > 1.0) or not np.all(np.isfinite(v)):
        raise ValueError("the support values must lie in [0, 1] (K_inf is the model 'every distribution on [0, 1]')")
    if not np.all(np.isfinite(C)) or np.any(C < 0.0):
        raise ValueError("label counts must be finite and nonnegative")
    return C, v


def _pair_distributions(counts_a: ArrayLike, counts_b: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, ...]:
    """Rows of the two arms' empirical distributions (0 where a count is 0), their counts, which rows have both
    counts positive, and the support: what every pair computation starts from."""
    Ca, v = _as_counts(np.atleast_2d(np.asarray(counts_a, dtype=np.float64)), values)
    Cb, _ = _as_counts(np.atleast_2d(np.asarray(counts_b, dtype=np.float64)), values)
    Ca, Cb = np.broadcast_arrays(Ca, Cb)
    Na, Nb = Ca.sum(axis=1), Cb.sum(axis=1)
    ok = (Na > 0) & (Nb > 0)
    Pa = np.where(ok[:, None], Ca / np.where(ok, Na, 1.0)[:, None], 0.0)
    Pb = np.where(ok[:, None], Cb / np.where(ok, Nb, 1.0)[:, None], 0.0)
    return Pa, Pb, Na, Nb, ok, v


def kinf_pair_cost(counts_a: ArrayLike, counts_b: ArrayLike, values: ArrayLike) -> np.ndarray:
    """``Z_ab`` for rows of label counts: (R, S) counts of arm a and of arm b on the support ``values`` -> (R,).

    0 where a count is 0 or ``mu_hat_a <= mu_hat_b``. Exact to ~1e-10 relative (the solver of
    :mod:`purebandits.lower_bound`, certified by its bracket); vectorised over the R pairs.
    """
    return _pair_cost_level(counts_a, counts_b, values)[0]


def _pair_cost_level(counts_a: ArrayLike, counts_b: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`kinf_pair_cost`, the level x where it is attained; nan where the cost is 0). The cost is the objective
    evaluated at x, so ``Z_ab <= cost + s c(x)`` after s more answers to the pair (:func:`kinf_pair_upper`)."""
    Pa, Pb, Na, Nb, ok, v = _pair_distributions(counts_a, counts_b, values)
    out = np.zeros(Na.shape)
    level = np.full(Na.shape, np.nan)
    ok &= Pa @ v > Pb @ v
    idx = np.flatnonzero(ok)
    if idx.size:
        n = idx.size
        model = _CategoricalModel(np.vstack([Pa[idx], Pb[idx]]), v)
        g, m = model.pair(np.arange(n), np.arange(n, 2 * n), Na[idx], Nb[idx])[:2]
        out[idx] = np.maximum(g, 0.0)
        level[idx] = m
    return out, level


def _tilt_upper(P: np.ndarray, v: np.ndarray, x: np.ndarray, steps: int = 4) -> np.ndarray:
    """An upper bound of ``K_inf^+(F, x)`` per row: ``KL(F, G_l)`` for the exponential tilt ``G_l ~ F e^{l X}`` with
    mean >= x (``log E_F e^{lX} - l mu``), l from a few Newton steps, or, if smaller or if no step reached mean >= x,
    ``KL(F, (1 - e) F + e delta_1)``; ``inf`` only at x = 1.
    """
    mu = P @ v
    var = P @ (v * v) - mu * mu
    lam = np.where(var > 1e-12, (x - mu) / np.maximum(var, 1e-12), 0.0)
    best = np.full(x.shape, np.inf)
    for _ in range(steps):
        a = lam[:, None] * v[None, :]
        a_max = np.where(P > 0.0, a, -np.inf).max(axis=1, keepdims=True)  # over the support of F: z >= min p > 0
        w = P * np.exp(np.where(P > 0.0, a - a_max, -np.inf))
        z = w.sum(axis=1)
        m = (w @ v) / z
        s = (w @ (v * v)) / z - m * m
        feasible = (m >= x) & (lam >= 0.0)
        kl = np.log(z) + a_max[:, 0] - lam * mu
        best = np.where(feasible, np.minimum(best, np.maximum(kl, 0.0)), best)
        lam = np.maximum(lam - (m - x) / np.maximum(s, 1e-12), 0.0)
    # G = (1 - e) F + e (point mass at 1), e = (x - mu)/(1 - mu): KL(F, G) <= -log(1 - e), feasible for every x < 1
    with np.errstate(divide="ignore", invalid="ignore"):
        mix = np.where(x < 1.0, np.log((1.0 - mu) / (1.0 - x)), np.inf)
    return np.where(x <= mu, 0.0, np.minimum(best, mix))


@njit(cache=True)
def _labels_s(n: float, s: float, q: float, v: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """One arm's label counts on a support of 2 or 3 values from (answers, sum, sum of squares): the arm's law
    (:func:`purebandits.kinf_bounds.arm_probabilities_s`) times its answers, rounded."""
    if n <= 0.0:
        out[:] = 0.0
        return
    arm_probabilities_s(n, s, q, v, out)
    for j in range(v.shape[0]):
        out[j] = round(out[j] * n)


@njit(cache=True)
def _tilt_upper_s(p: np.ndarray, v: np.ndarray, x: float, steps: int) -> float:  # pragma: no cover - compiled
    """:func:`_tilt_upper` of one distribution ``p`` on ``v`` (the same Newton steps and mixture, scalar)."""
    m = v.shape[0]
    mu = 0.0
    m2 = 0.0
    for j in range(m):
        mu += p[j] * v[j]
        m2 += p[j] * v[j] * v[j]
    if x <= mu:
        return 0.0
    var = m2 - mu * mu
    lam = (x - mu) / var if var > 1e-12 else 0.0
    best = np.inf
    for _ in range(steps):
        a_max = -np.inf
        for j in range(m):
            if p[j] > 0.0 and lam * v[j] > a_max:
                a_max = lam * v[j]
        z = 0.0
        zm = 0.0
        zs = 0.0
        for j in range(m):
            if p[j] > 0.0:
                w = p[j] * math.exp(lam * v[j] - a_max)
                z += w
                zm += w * v[j]
                zs += w * v[j] * v[j]
        mm = zm / z
        ss = zs / z - mm * mm
        if mm >= x and lam >= 0.0:
            kl = max(math.log(z) + a_max - lam * mu, 0.0)
            if kl < best:
                best = kl
        lam = max(lam - (mm - x) / max(ss, 1e-12), 0.0)
    mix = math.log((1.0 - mu) / (1.0 - x)) if x < 1.0 else np.inf
    return min(best, mix)


@njit(cache=True)
def _pair_upper_s(counts: np.ndarray, sums: np.ndarray, sumsq: np.ndarray, v: np.ndarray, a: int, b: int
                  ) -> tuple[float, float]:  # pragma: no cover - compiled
    """:func:`kinf_pair_upper` of the pair (a, b) read from the learner's arrays: (U, x), (0, nan) where Z_ab = 0."""
    m = v.shape[0]
    ca = np.empty(m)
    cb = np.empty(m)
    _labels_s(float(counts[a]), sums[a], sumsq[a], v, ca)
    _labels_s(float(counts[b]), sums[b], sumsq[b], v, cb)
    na = ca.sum()
    nb = cb.sum()
    if na <= 0.0 or nb <= 0.0:
        return 0.0, np.nan
    pa = ca / na
    pb = cb / nb
    ma = 0.0
    mb = 0.0
    sa = 0.0
    sb = 0.0
    for j in range(m):
        ma += pa[j] * v[j]
        mb += pb[j] * v[j]
        sa += pa[j] * v[j] * v[j]
        sb += pb[j] * v[j] * v[j]
    if ma <= mb:
        return 0.0, np.nan
    wa = na / max(sa - ma * ma, 1e-12)
    wb = nb / max(sb - mb * mb, 1e-12)
    xo = (wa * ma + wb * mb) / (wa + wb)
    up_b = _tilt_upper_s(pb, v, xo, 4)
    ra = pa[::-1].copy()
    rv = 1.0 - v[::-1]
    up_a = _tilt_upper_s(ra, rv, 1.0 - xo, 4)  # K_inf^-(F, x) = K_inf^+(F(1 - .), 1 - x)
    return na * up_a + nb * up_b, xo


@njit(cache=True)
def _best_arm_s(counts: np.ndarray, sums: np.ndarray) -> int:  # pragma: no cover - compiled
    """The empirical best arm, ties to the lower index (:func:`empirical_top` at k = 1); -1 if an arm has no
    answer."""
    best = -1
    best_m = -np.inf
    for i in range(counts.shape[0]):
        if counts[i] <= 0:
            return -1
        m = sums[i] / counts[i]
        if m > best_m:
            best_m = m
            best = i
    return best


@njit(cache=True)
def _top_k_s(counts: np.ndarray, sums: np.ndarray, k: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The k largest means (every arm answered), ties to the lower index, into ``out`` sorted by index:
    :func:`empirical_top` by insertion, O(n k) (for the small k of a top-k answer)."""
    idx = np.empty(k, dtype=np.int64)
    val = np.empty(k)
    m = 0
    for i in range(counts.shape[0]):
        x = sums[i] / counts[i]
        if m == k and x <= val[k - 1]:
            continue  # not above the k-th (a tie keeps the lower index, already in)
        j = m if m < k else k - 1
        while j > 0 and val[j - 1] < x:
            if j < k:
                idx[j] = idx[j - 1]
                val[j] = val[j - 1]
            j -= 1
        idx[j] = i
        val[j] = x
        if m < k:
            m += 1
    out[:] = np.sort(idx)


def _bernoulli_lower(Ca: np.ndarray, Cb: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A lower bound of ``Z_ab`` per row: the Bernoulli GLR of the two means (``K_inf >= d``, module docstring),
    ``N_a d(mu_a, m) + N_b d(mu_b, m)`` at the weighted mean m (GK16 Lemma 3), less a relative 1e-9."""
    from purebandits.bounds import kl_bernoulli

    Na, Nb = Ca.sum(axis=1), Cb.sum(axis=1)
    ma = np.clip((Ca @ v) / Na, 0.0, 1.0)
    mb = np.clip((Cb @ v) / Nb, 0.0, 1.0)
    mid = (Na * ma + Nb * mb) / (Na + Nb)
    z = Na * np.asarray(kl_bernoulli(ma, mid)) + Nb * np.asarray(kl_bernoulli(mb, mid))
    return np.where(ma > mb, z * (1.0 - 1e-9) - 1e-9, 0.0)


def kinf_pair_upper(counts_a: ArrayLike, counts_b: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """A cheap upper bound U >= ``Z_ab`` per row, and the level x in [mu_hat_b, mu_hat_a] where it is evaluated.

    ``Z_ab <= N_a KL(F_a, G_a) + N_b KL(F_b, G_b)`` for any G_a with mean <= x <= mean of G_b (both distributions
    on [0, 1]); we take x the crossing point of the Gaussian approximation and G the exponential tilts of the
    empirical distributions (a few vectorised Newton steps, no root bracketing), which makes U tight to second
    order in the gap (where a tilt cannot reach x, e.g. no mass above x, G mixes F with a point mass at 1 or 0).
    U = 0 where Z_ab = 0 (a count is 0 or ``mu_hat_a <= mu_hat_b``; x is then nan).

    Also a bound on the future: one more answer of arm a or b raises ``N K_inf(F_hat, x)`` by at most
    ``c(x) = max(-log x, -log(1 - x))`` (the dual form's factor ``1 - l (X - x)`` is at most ``1/x`` or ``1/(1-x)``),
    so after s more answers to the pair, both ``Z_ab`` and ``Z_ba`` are at most ``U + s c(x)``.
    """
    Pa, Pb, Na, Nb, ok, v = _pair_distributions(counts_a, counts_b, values)
    ma, mb = Pa @ v, Pb @ v
    ok &= ma > mb
    upper = np.zeros(Na.shape)
    x = np.full(Na.shape, np.nan)
    if ok.any():
        va = np.maximum(Pa[ok] @ (v * v) - ma[ok] ** 2, 1e-12)
        vb = np.maximum(Pb[ok] @ (v * v) - mb[ok] ** 2, 1e-12)
        wa, wb = Na[ok] / va, Nb[ok] / vb
        xo = (wa * ma[ok] + wb * mb[ok]) / (wa + wb)
        up_b = _tilt_upper(Pb[ok], v, xo)
        up_a = _tilt_upper(Pa[ok][:, ::-1], 1.0 - v[::-1], 1.0 - xo)  # K_inf^-(F, x) = K_inf^+(F(1 - .), 1 - x)
        upper[ok] = Na[ok] * up_a + Nb[ok] * up_b
        x[ok] = xo
    return upper, x


def kinf_pair_exceeds(counts_a: ArrayLike, counts_b: ArrayLike, values: ArrayLike,
                      threshold: ArrayLike) -> np.ndarray:
    """``Z_ab > threshold`` per row, exactly, computing ``Z_ab`` only where :func:`kinf_pair_upper` does not decide.

    Most rows far below the threshold are settled by the upper bound (``Z <= U <= threshold``) and
    :func:`kinf_pair_cost` runs on the rest. For simulations and stopping checks.
    """
    Ca = np.atleast_2d(np.asarray(counts_a, dtype=np.float64))
    Cb = np.atleast_2d(np.asarray(counts_b, dtype=np.float64))
    Ca, Cb = np.broadcast_arrays(Ca, Cb)
    thr = np.broadcast_to(np.asarray(threshold, dtype=np.float64), (Ca.shape[0],))
    upper, _ = kinf_pair_upper(Ca, Cb, values)
    out = np.zeros(upper.shape, dtype=bool)
    need = np.flatnonzero(upper > thr)
    if need.size:
        out[need] = kinf_pair_cost(Ca[need], Cb[need], values) > thr[need]
    return out


def empirical_top(means: ArrayLike, k: int = 1) -> np.ndarray:
    """Indices of the k largest means, ties to the lower index (as :func:`purebandits.bounds.glr_statistic`), sorted."""
    m = np.asarray(means, dtype=np.float64)
    order = np.lexsort((np.arange(m.size), -m))
    return np.sort(order[:k])


def kinf_glr_statistic(label_counts: ArrayLike, values: ArrayLike, k: int = 1
                       ) -> tuple[np.ndarray, float, tuple[int, int]]:
    """(empirical top k, ``Z = min_{a in top k, b outside} Z_ab``, the pair (a, b) attaining it).

    ``label_counts`` is (n_arms, S): how often each arm received each support value. Z = 0 while an arm
    has no answer (the pair returned is then (-1, -1)). O(k (n_arms - k)) two-arm costs, all in one
    vectorised solve.
    """
    C, v = _as_counts(label_counts, values)
    n = C.shape[0]
    if isinstance(k, bool) or int(k) != k or not 1 <= k < n:
        raise ValueError(f"k must be an integer with 1 <= k < n_arms = {n}, got {k!r}")
    N = C.sum(axis=1)
    means = np.where(N > 0, (C @ v) / np.where(N > 0, N, 1.0), -np.inf)
    top = empirical_top(means, k)
    if np.any(N <= 0):
        return top, 0.0, (-1, -1)
    rest = np.setdiff1d(np.arange(n), top)
    a = np.repeat(top, rest.size)
    b = np.tile(rest, top.size)
    z = kinf_pair_cost(C[a], C[b], v)
    i = int(np.argmin(z))
    return top, float(z[i]), (int(a[i]), int(b[i]))


def kinf_glr_stop(label_counts: ArrayLike, values: ArrayLike, t: float, delta: float, k: int = 1,
                  threshold: str | Callable[..., float] = "kinf-portfolio"
                  ) -> tuple[int | tuple[int, ...], float, float, bool]:
    """GLR stopping with the K_inf statistic: (recommendation, Z, beta, stop = Z > beta).

    The recommendation is the empirical best arm (an int) at k = 1, else the empirical top k (sorted tuple).
    ``threshold`` is a name of :data:`purebandits.glr_thresholds.THRESHOLDS` or a callable
    ``(t, n_arms, delta, k) -> beta``. Only ``"kinf-portfolio"`` and ``"kinf-kt"`` (the sharper) are proven for
    this statistic; the others are
    proven for the Bernoulli/Gaussian statistics, which are smaller (see the module docstring), so with
    them this rule has no guarantee.
    """
    C, v = _as_counts(label_counts, values)
    if isinstance(threshold, str):
        if threshold not in glr_thresholds.THRESHOLDS:
            raise ValueError(f"unknown threshold {threshold!r}; known: {sorted(glr_thresholds.THRESHOLDS)}")
        beta_fn = glr_thresholds.THRESHOLDS[threshold][0]
    elif callable(threshold):
        beta_fn = threshold
    else:
        raise ValueError(f"threshold must be a name or a callable, got {threshold!r}")
    beta = float(beta_fn(t, C.shape[0], delta, k))
    if not math.isfinite(beta):
        raise ValueError(f"the threshold returned {beta!r}")
    top, z, _ = kinf_glr_statistic(C, v, k)
    rec: int | tuple[int, ...] = int(top[0]) if k == 1 else tuple(int(i) for i in top)
    return rec, z, beta, bool(z > beta)


def label_counts_from_moments(counts: ArrayLike, sums: ArrayLike, sumsq: ArrayLike, values: ArrayLike) -> np.ndarray:
    """Label counts (n_arms, S) on a support of S <= 3 values from each arm's answers, sum and sum of squares.

    Three moments (N, sum X, sum X^2) determine the counts on at most three known values (a Vandermonde system),
    so a learner that keeps them (every :class:`~purebandits.base.Learner` does) needs no other state for the K_inf
    statistic, and saving, loading and replaying it stay as they are. Counts are rounded to integers; a
    reward outside the support shows as a count that is not one (``ValueError``).
    """
    v = np.asarray(values, dtype=np.float64)
    N = np.asarray(counts, dtype=np.float64)
    S = np.asarray(sums, dtype=np.float64)
    Q = np.asarray(sumsq, dtype=np.float64)
    if v.ndim != 1 or not 2 <= v.size <= 3 or np.any(np.diff(v) <= 0):
        raise ValueError(f"the support must be 2 or 3 increasing values, got {v.tolist()}")
    V = np.vander(v, increasing=True).T[: v.size]  # rows: 1, v, v^2 (the first v.size moments)
    M = np.vstack([N, S, Q][: v.size])
    C = np.linalg.solve(V, M).T
    R = np.rint(C)
    if np.any(np.abs(C - R) > 1e-6 * np.maximum(1.0, N)[:, None]) or np.any(R < 0):
        raise ValueError(f"some rewards are not on the support {v.tolist()}: the K_inf statistic needs rewards "
                         "that take only these values")
    return R


class KinfGLRStop:
    """The K_inf GLR stop of a learner, decided exactly after every answer at amortised O(1) cost.

    Holds the learner's arrays (answers, sums, sums of squares per arm; read, never written) and decides
    ``Z > beta(t, delta)`` (:func:`kinf_glr_stop`, the empirical top k) after each answer. Z is evaluated only
    when it may have crossed. Any one pair (a in the top set, b outside) with ``Z_ab <= beta`` rules a stop out;
    :func:`kinf_pair_upper` bounds ``Z_ab <= U_ab`` and ``s`` more answers raise it by at most ``s c_ab``, and
    beta never falls (with t, or per pair with the pair's answers), so while that pair stays a (top, outside) pair no
    stop is possible before the pair has had ``floor((beta - U_ab)/c_ab)`` more answers (answers to other arms do
    not change ``Z_ab``). When the bound is too loose for that, the pair's exact Z, the objective at its minimising
    level x, serves the same way (it too grows by at most ``c(x)`` per answer). The pair kept is the one that rules a
    stop out longest; after a change of the top set, an arm that entered against one that left (at k = 1 the new best
    against the old one). Only when it no longer rules a stop out are all ``k (n - k)`` pairs bounded, and the exact
    Z is computed only where every bound exceeds beta. The same stops as computing Z after every answer
    (``tests/test_kinf_stop.py``, at k = 1 and 2, with per-pair thresholds, and inside KL-RandLUCB).

    ``settled`` is an optional second test, ``(a, b) -> bool array``: a pair it settles needs no ``Z > beta`` (the
    rule stops when every pair passes one of the two; the error is at most the sum of the two tests'). It is asked
    about the kept pair only when that pair's answers change, so it must depend on nothing else while the top set
    stays (KL-RandLUCB's bounds, whose round-free bounds depend on the arm's own answers only).

    ``threshold`` is ``"kinf-kt-pairs"`` (each pair against its own
    :func:`~purebandits.glr_thresholds.kinf_kt_pair_threshold`, the sharpest threshold proven for this statistic),
    a name of :data:`purebandits.glr_thresholds.THRESHOLDS` or a callable ``(t, n_arms, delta, k) -> beta``.
    """

    def __init__(self, counts: np.ndarray, sums: np.ndarray, sumsq: np.ndarray, values: ArrayLike, delta: float,
                 k: int = 1, threshold: str | Callable[..., float] = "kinf-kt-pairs",
                 settled: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> None:
        self.counts, self.sums, self.sumsq = counts, sums, sumsq
        self.settled = settled
        self.values = np.asarray(values, dtype=np.float64)
        label_counts_from_moments(counts, sums, sumsq, self.values)  # validates the support
        self.pairwise = threshold == "kinf-kt-pairs"
        if self.pairwise:
            threshold = glr_thresholds.kinf_kt_threshold  # (what beta(t) reports: every pair's beta is below it)
        elif isinstance(threshold, str):
            if threshold not in glr_thresholds.THRESHOLDS:
                raise ValueError(f"unknown threshold {threshold!r}; known: {sorted(glr_thresholds.THRESHOLDS)}")
            threshold = glr_thresholds.THRESHOLDS[threshold][0]
        self.beta_fn = threshold
        self.delta, self.k = float(delta), int(k)
        self.n = int(counts.shape[0])
        self._pair: tuple[int, int] | None = None  # the (top, outside) pair that rules a stop out
        self._next = 0  # no stop is possible before the pair has this many answers, while it stays (top, outside)
        self._members: set[int] | tuple[int, ...] = ()  # the top set at the last check
        self._pair_sum = -1  # the kept pair's answers when ``settled`` was last asked about it
        self._answered = False  # every arm has an answer (counts never fall while these arrays are the state)
        self._log_pairs = math.log(glr_thresholds.pair_count(self.n, self.k) / self.delta)
        self.checks = 0  # pair bounds computed (for tests and measurements)

    def _top(self) -> np.ndarray:
        N = self.counts
        means = np.where(N > 0, self.sums / np.where(N > 0, N, 1), -np.inf)
        if self.k == 1:
            return np.array([int(np.argmax(means))])  # ties to the lower index, as empirical_top
        return empirical_top(means, self.k)

    def beta(self, t: float) -> float:
        """The threshold at t answers (per pair: the largest a pair can have at t)."""
        return float(self.beta_fn(max(float(t), 1.0), self.n, self.delta, self.k))

    def _betas(self, a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
        """The threshold of each pair (a[i], b[i]) now."""
        if self.pairwise:
            return np.asarray(glr_thresholds.kinf_kt_pair_threshold(self.counts[a], self.counts[b], self.n,
                                                                    self.delta, self.k), dtype=np.float64)
        return np.full(np.shape(a), self.beta(t))

    def _room(self, upper: np.ndarray, x: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Answers to the pair before its bound ``U + s c`` can pass beta (-inf where U > beta or undefined)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.maximum(-np.log(x), -np.log1p(-x))
            room = np.floor((beta - upper) / c)
        return np.where(np.isfinite(room) & (upper <= beta), np.maximum(room, 1.0), -np.inf)

    def _pair_beta(self, a: int, b: int, t: float) -> float:
        """:meth:`_betas` of one pair in scalar arithmetic, less 1e-9 (only used to rule a stop out: a hair below the
        vectorised value, so that rounding never rules out a stop the exact path would take)."""
        if self.pairwise:
            r = 0.0
            for n in (float(self.counts[a]), float(self.counts[b])):
                r += 0.5 * math.log(math.pi) + math.lgamma(n + 1.0) - math.lgamma(n + 0.5)
            return self._log_pairs + r - 1e-9
        return self.beta(t) - 1e-9

    def check(self, t: float) -> list[int] | None:
        """The recommendation (the empirical top k, sorted) if the rule stops at ``t`` answers, else None."""
        if not self._answered:
            if self.counts.min() <= 0:
                return None
            self._answered = True
        if self.k == 1:
            best = _best_arm_s(self.counts, self.sums)
            top = np.array([best])
            members: set[int] | tuple[int] = (best,)
        elif self.k <= 64:
            top = np.empty(self.k, dtype=np.int64)
            _top_k_s(self.counts, self.sums, self.k, top)
            members = set(top.tolist())
        else:
            top = self._top()
            members = set(top.tolist())
        pair = self._pair
        valid = pair is not None and pair[0] in members and pair[1] not in members
        if valid:
            a, b = pair  # type: ignore[misc]
            s = int(self.counts[a] + self.counts[b])
            if s < self._next:
                # still rules a stop out, unless the other test has settled the pair since (it can change only
                # with the pair's answers, or with the top set, which is the same here)
                if self.settled is None or s == self._pair_sum:
                    self._members = members
                    return None
                self._pair_sum = s
                if not self.settled(np.array([a]), np.array([b]))[0]:
                    self._members = members
                    return None
                valid = False
        elif pair is not None:  # the top set changed: an arm that entered against one that left
            entered = [i for i in members if i not in self._members]
            left = [i for i in self._members if i not in members]
            if entered and left:
                pair, valid = (min(entered), min(left)), True
        self._members = members
        if valid and self.settled is not None and self.settled(np.array([pair[0]]), np.array([pair[1]]))[0]:
            valid = False  # settled by the other test: it rules nothing out
        if valid:
            a, b = pair  # type: ignore[misc]
            self.checks += 1
            upper, x = _pair_upper_s(self.counts, self.sums, self.sumsq, self.values, a, b)
            beta = self._pair_beta(a, b, t)
            if upper <= beta and math.isfinite(x):
                c = max(-math.log(x), -math.log1p(-x)) if 0.0 < x < 1.0 else math.inf
                room = math.floor((beta - upper) / c) if c > 0 else math.inf
                if math.isfinite(room):
                    self._pair, self._next = (a, b), int(self.counts[a] + self.counts[b] + max(room, 1.0))
                    self._pair_sum = int(self.counts[a] + self.counts[b])
                    return None
            elif math.isfinite(x):
                # the bound is too loose to rule a stop out: the pair's exact Z may still do it (near the stop,
                # where every bound exceeds beta, this saves the pass over all pairs at every answer)
                C2 = label_counts_from_moments(self.counts[[a, b]], self.sums[[a, b]], self.sumsq[[a, b]],
                                               self.values)
                z, m = _pair_cost_level(C2[:1], C2[1:], self.values)
                room2 = self._room(z + 1e-9 * np.maximum(z, 1.0), m, self._betas(np.array([a]), np.array([b]), t))
                if room2[0] > 0:
                    self._pair, self._next = (a, b), int(self.counts[a] + self.counts[b] + room2[0])
                    self._pair_sum = int(self.counts[a] + self.counts[b])
                    return None
        C = label_counts_from_moments(self.counts, self.sums, self.sumsq, self.values)
        rest = np.setdiff1d(np.arange(self.n), top)
        a_all, b_all = np.repeat(top, rest.size), np.tile(rest, top.size)
        if self.settled is not None:  # only the pairs the other test has not settled need Z > beta
            keep = ~np.asarray(self.settled(a_all, b_all), dtype=bool)
            a_all, b_all = a_all[keep], b_all[keep]
            if a_all.size == 0:
                return [int(j) for j in top]
        beta = self._betas(a_all, b_all, t)
        self.checks += a_all.size
        upper, x = kinf_pair_upper(C[a_all], C[b_all], self.values)
        room = self._room(upper, x, beta)
        i = int(np.argmax(room))
        if room[i] > 0:
            a, b = int(a_all[i]), int(b_all[i])
            self._pair, self._next = (a, b), int(self.counts[a] + self.counts[b] + room[i])
            self._pair_sum = int(self.counts[a] + self.counts[b])
            return None
        # every bound exceeds beta. Z is at least the Bernoulli GLR of the means (module docstring): a pair whose
        # Bernoulli statistic passes beta passes; the others are solved exactly in blocks, the smallest
        # Bernoulli statistic (most likely below beta) first, until one rules a stop out (near the stop of a
        # contest's thousands of pairs, a handful of solves instead of all)
        lower = _bernoulli_lower(C[a_all], C[b_all], self.values)
        order = np.flatnonzero(lower <= beta)
        order = order[np.argsort(lower[order] - beta[order], kind="stable")]
        for lo in range(0, order.size, 32):
            blk = order[lo:lo + 32]
            z, m = _pair_cost_level(C[a_all[blk]], C[b_all[blk]], self.values)
            if np.all(z > beta[blk]):
                continue
            room = self._room(z + 1e-9 * np.maximum(z, 1.0), m, beta[blk])  # the block's longest-ruling pair
            i = int(np.argmax(room))
            a, b = int(a_all[blk[i]]), int(b_all[blk[i]])
            self._pair, self._next = (a, b), int(self.counts[a] + self.counts[b] + max(room[i], 1.0))
            self._pair_sum = int(self.counts[a] + self.counts[b])
            return None
        return [int(j) for j in top]

    def statistic(self, t: float) -> tuple[list[int], float, float]:
        """(empirical top k, Z_ab, beta_ab) of the pair closest to stopping the rule (smallest ``Z_ab - beta_ab``; with
        one beta for all pairs, Z itself), for progress reports.

        Exact: every pair is bounded by :func:`kinf_pair_upper` (``Z <= U``), and Z is solved only for the pairs, in
        increasing ``U - beta``, until the next bound is no smaller than the best ``Z - beta`` found (on 4,000 captions
        a handful of solves instead of 4,000)."""
        C = label_counts_from_moments(self.counts, self.sums, self.sumsq, self.values)
        top = self._top()
        rest = np.setdiff1d(np.arange(self.n), top)
        a, b = np.repeat(top, rest.size), np.tile(rest, top.size)
        if self.settled is not None:  # the pairs the other test has not settled, if any are left
            keep = ~np.asarray(self.settled(a, b), dtype=bool)
            if keep.any():
                a, b = a[keep], b[keep]
        beta = self._betas(a, b, t)
        upper, _ = kinf_pair_upper(C[a], C[b], self.values)
        order = np.argsort(upper - beta, kind="stable")
        best_i, best_gap = -1, math.inf
        z_best = 0.0
        for lo in range(0, order.size, 16):  # in blocks: one vectorised solve per block
            block = order[lo:lo + 16]
            if (upper[block[0]] - beta[block[0]]) >= best_gap:
                break
            z = kinf_pair_cost(C[a[block]], C[b[block]], self.values)
            j = int(np.argmin(z - beta[block]))
            if z[j] - beta[block[j]] < best_gap:
                best_i, best_gap, z_best = int(block[j]), float(z[j] - beta[block[j]]), float(z[j])
        return [int(j) for j in top], z_best, float(beta[best_i])
