"""The characteristic time T*(mu) of fixed-confidence top-k identification and the lower bound it gives.

Garivier and Kaufmann (COLT 2016, "GK16") Thm 1: every delta-correct learner satisfies
``E[tau] >= T*(mu) kl(delta, 1 - delta)``, where

    T*(mu)^{-1} = sup_{w in simplex} inf_{lambda in Alt(mu)} sum_a w_a D(F_a, G_a),

``D`` is the KL divergence between an arm's distribution F_a and its alternative G_a, and
``Alt(mu)`` the models whose answer differs from mu's. The same change-of-measure argument
(Kaufmann, Cappe, Garivier, JMLR 2016, Lemma 1) gives it for top-k: ``Alt`` is the union over
pairs (i in the top k, j outside) of ``{mean_j >= mean_i}``, so for a fixed w the infimum is the
minimum over pairs of the two-arm cost

    g_ij(w) = inf_m [w_i D^-(F_i, m) + w_j D^+(F_j, m)],

``D^-(F, m)`` (``D^+``) the smallest divergence from F to a distribution of the model with mean
<= m (>= m). Each ``g_ij`` is concave and 1-homogeneous in w (an infimum of linear functions), so
the outer problem maximises a concave function over the simplex.

Reward models (:mod:`purebandits.instances.rewards`):

* Bernoulli: ``D = d(mu, m)``, the Bernoulli KL (:func:`purebandits.bounds.kl_bernoulli`; its rounding
  error, ~1e-16, makes T* meaningless when two means at the boundary differ by less than ~1e-7).
* Gaussian with known per-arm sigma: ``D = (mu - m)^2 / (2 sigma^2)``.
* Categorical on a finite support in [0, 1] (caption contests: {0, 1/2, 1} with vote frequencies),
  taken as the nonparametric model "every distribution on [0, 1]": D is Honda and Takemura's
  ``K_inf`` (COLT 2010), computed by its convex dual (:func:`kinf`). Since every alternative on
  [0, 1] is allowed, this is the bound against learners that only know the rewards are in [0, 1].

Solvers (``method="auto"``): for k = 1, Bernoulli arms use Track-and-Stop's GK16 Thm 5 root
finding (:func:`purebandits.algorithms.track_and_stop.optimal_weights`) and Gaussian arms the
same Thm 5 characterisation in closed form (one scalar root); everything else (top-k, K_inf) uses
a cutting-plane LP (:func:`_cutting_plane`) that stops at a certified relative gap ``rtol``.
A tie at the top-k boundary (``mu_(k) = mu_(k+1)``) puts mu on the boundary of ``Alt``: then
``T* = inf`` (``math.inf``; every w is optimal and uniform weights are returned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, sparse

from purebandits.bounds import kl_bernoulli
from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian, RewardModel

__all__ = ["CharacteristicTime", "characteristic_time", "optimal_weights", "sample_lower_bound",
           "solve_characteristic_time", "kinf"]

#: relative step at which the scalar Newton solves stop (the quadratic convergence leaves ~1e-20); K_inf and
#: g_ij are stationary in the dual variable and in m, so their values are then exact to rounding
_NEWTON_TOL = 1e-10
_NEWTON_MAX = 100
_COEF_CAP = 1e12  # largest cut coefficient (relative to the value) passed to the LP


@dataclass(frozen=True)
class CharacteristicTime:
    """The solution of GK16 Thm 1's max-min problem for one instance.

    Attributes
    ----------
    T_star : T*(mu) = 1 / (the value of ``weights``); ``math.inf`` on a top-k tie.
    weights : optimal sampling proportions w*(mu) (sum to 1).
    rel_gap : certified relative gap of the value (cutting plane: (upper - lower) / lower, so the
        exact T* lies in ``[T_star / (1 + rel_gap), T_star]``); the root-finding paths report 0
        (they are accurate to ~1e-9 relative or better, see their docstrings).
    method : "gk16-bernoulli", "gk16-gaussian", "cutting-plane" or "tie".
    iterations : LP solves (cutting plane) or root-finding evaluations.
    """

    T_star: float
    weights: np.ndarray
    rel_gap: float
    method: str
    iterations: int


def sample_lower_bound(T_star: float, delta: float) -> float:
    """GK16 Thm 1's bound ``T*(mu) kl(delta, 1 - delta)`` on the expected samples of a delta-correct learner."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(T_star) * float(kl_bernoulli(float(delta), 1.0 - float(delta)))


# --------------------------------------------------------------------------- K_inf (Honda-Takemura)
def _kinf_up(P: np.ndarray, v: np.ndarray, mu: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                  np.ndarray]:
    """``K_inf^+(F, m)`` for rows ``P`` (B, S) on support ``v`` with means ``mu`` at levels ``mu <= m < 1``.

    Dual (Honda-Takemura): ``K = max_{0 <= l <= 1/(1-m)} phi(l)``, ``phi(l) = E_F log(1 - l (X - m))``,
    concave. With no mass at 1 the maximiser may be the end ``1/(1-m)`` (the alternative then adds
    mass at 1); otherwise it is the root of ``phi'``, found by Newton's method kept in a bracket.
    Returns ``(K, l*, dl*/dm)``; ``dK/dm = l*`` (envelope theorem), so K is convex in m.
    """
    d = v[None, :] - m[:, None]
    pos = P > 0.0
    lam_max = 1.0 / (1.0 - m)
    mass_at_one = (pos & (v[None, :] >= 1.0)).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pos & (v[None, :] < 1.0), P * d / (1.0 - v[None, :]), 0.0)
    boundary = ~mass_at_one & (ratio.sum(axis=1) <= 0.0)
    var = (P * d * d).sum(axis=1)
    gap = np.maximum(m - mu, 0.0)
    lam = np.where(var > 0.0, gap / np.where(var > 0.0, var, 1.0), 0.5 * lam_max)  # quadratic approximation
    lam = np.clip(lam, 0.0, 0.5 * lam_max)
    idx = np.flatnonzero(~boundary & (gap > 0.0))
    lo, hi = np.zeros(idx.size), lam_max[idx]
    eps8 = 8.0 * np.finfo(float).eps
    for _ in range(_NEWTON_MAX):  # on the unfinished rows only
        if not idx.size:
            break
        Pa, da, la = P[idx], d[idx], lam[idx]
        q = 1.0 - la[:, None] * da
        t = Pa * da / q
        f = t.sum(axis=1)  # -phi'(lam): increasing, < 0 left of the root
        fp = (t * da / q).sum(axis=1)
        lo = np.where(f < 0.0, la, lo)
        hi = np.where(f >= 0.0, la, hi)
        safe = np.where(fp > 0.0, fp, np.inf)
        step = f / safe
        # converged (a Newton step this small is final, even if rounding puts it on the bracket's end), or down
        # to the rounding noise of f (a few ulps of sum p |d| / q); otherwise Newton inside the bracket, else bisect
        done = (np.abs(step) <= _NEWTON_TOL * la + eps8 * np.abs(t).sum(axis=1) / safe) | (hi - lo <= _NEWTON_TOL * hi)
        new = la - step
        lam[idx] = np.where(done | ((new > lo) & (new < hi)), new, 0.5 * (lo + hi))
        keep = ~done
        idx, lo, hi = idx[keep], lo[keep], hi[keep]
    lam = np.where(boundary, lam_max, np.where(gap > 0.0, lam, 0.0))
    q = 1.0 - lam[:, None] * d
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(pos, P * np.log1p(-lam[:, None] * d), 0.0).sum(axis=1)
        dlam_int = (P / (q * q)).sum(axis=1) / (P * d * d / (q * q)).sum(axis=1)
    dlam = np.where(boundary, lam_max * lam_max, dlam_int)
    return np.maximum(k, 0.0), lam, dlam


def kinf(probabilities: ArrayLike, values: ArrayLike, m: ArrayLike, *, side: str = "upper") -> np.ndarray | float:
    """Honda and Takemura's ``K_inf`` of categorical arms: the smallest KL(F, G) over distributions G on [0, 1]
    with mean >= m (``side="upper"``) or <= m (``side="lower"``).

    Upper: ``K_inf^+(F, m) = max_{0 <= l <= 1/(1-m)} E_F[log(1 - l (X - m))]`` (Honda and Takemura, COLT 2010,
    the dual form); lower: the mirrored form ``K_inf^-(F, m) = K_inf^+(F(1 - .), 1 - m)``. 0 when m is on F's side
    of its mean. For a support containing 0 and 1 this equals K_inf over the support's distributions (the
    optimal G lives on supp(F) and {0, 1}); for other supports G may put mass at 0 or 1.

    Parameters
    ----------
    probabilities : (n, S) or (S,) array, rows summing to 1.
    values : (S,) support, in [0, 1].
    m : level(s), scalar or (n,), broadcast against the rows; in [0, 1] (K_inf^+ is inf at m = 1 unless F = 1).

    Returns a float for one distribution and a scalar m, else an (n,) array.
    """
    P = np.asarray(probabilities, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if P.ndim not in (1, 2) or P.shape[-1] != v.size or np.any(v < 0.0) or np.any(v > 1.0):
        raise ValueError("values must be the (S,) support in [0, 1] of the (S,) or (n, S) probabilities")
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    m_arr = np.asarray(m, dtype=np.float64)
    Pb, mb = np.broadcast_arrays(np.atleast_2d(P), m_arr.reshape(-1, 1) if m_arr.ndim else m_arr.reshape(1, 1))
    Pb = Pb / Pb.sum(axis=1, keepdims=True)
    mb = np.ascontiguousarray(mb[:, 0])
    if side == "lower":
        v, mb = 1.0 - v, 1.0 - mb
    mu = Pb @ v
    out = np.zeros(mb.shape)
    up = mb > mu
    out[up & (mb >= 1.0)] = np.inf
    up &= mb < 1.0
    if up.any():
        out[up] = _kinf_up(Pb[up], v, mu[up], mb[up])[0]
    return float(out[0]) if P.ndim == 1 and m_arr.ndim == 0 else out


# --------------------------------------------------------------------------- divergence models
class _Model:
    """Per-arm divergences D^-(F_i, m), D^+(F_j, m) and the two-arm cost g_ij (vectorised over pairs)."""

    means: np.ndarray
    params: np.ndarray  # one row per arm: arms with equal rows are identical (grouped by the solver)

    def take(self, idx: np.ndarray) -> _Model:
        raise NotImplementedError

    def cut(self, i: np.ndarray, j: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D^-(F_i, m), D^+(F_j, m)) for mu_j <= m <= mu_i."""
        raise NotImplementedError

    def pair(self, i: np.ndarray, j: np.ndarray, wi: np.ndarray, wj: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(g_ij(w), minimising m, D^-(F_i, m), D^+(F_j, m)) for mu_i > mu_j and weights wi, wj >= 0."""
        raise NotImplementedError


class _BernoulliModel(_Model):
    def __init__(self, means: np.ndarray) -> None:
        self.means = np.asarray(means, dtype=np.float64)
        self.params = self.means[:, None]

    def take(self, idx: np.ndarray) -> _Model:
        return _BernoulliModel(self.means[idx])

    def cut(self, i: np.ndarray, j: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return kl_bernoulli(self.means[i], m), kl_bernoulli(self.means[j], m)

    def pair(self, i: np.ndarray, j: np.ndarray, wi: np.ndarray, wj: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = wi + wj
        safe = np.where(s > 0.0, s, 1.0)
        m = np.where(s > 0.0, (wi * self.means[i] + wj * self.means[j]) / safe, 0.5 * (self.means[i] + self.means[j]))
        di, dj = self.cut(i, j, m)  # GK16 Lemma 3: the minimiser is the weighted mean
        return wi * di + wj * dj, m, di, dj


class _GaussianModel(_Model):
    def __init__(self, means: np.ndarray, sigma: np.ndarray) -> None:
        self.means = np.asarray(means, dtype=np.float64)
        self.var = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, self.means.shape).copy()
        self.params = np.column_stack([self.means, self.var])

    def take(self, idx: np.ndarray) -> _Model:
        return _GaussianModel(self.means[idx], np.sqrt(self.var[idx]))

    def cut(self, i: np.ndarray, j: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (self.means[i] - m) ** 2 / (2.0 * self.var[i]), (m - self.means[j]) ** 2 / (2.0 * self.var[j])

    def pair(self, i: np.ndarray, j: np.ndarray, wi: np.ndarray, wj: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a, b = wi / self.var[i], wj / self.var[j]
        s = a + b
        m = np.where(s > 0.0, (a * self.means[i] + b * self.means[j]) / np.where(s > 0.0, s, 1.0),
                     0.5 * (self.means[i] + self.means[j]))
        di, dj = self.cut(i, j, m)
        return wi * di + wj * dj, m, di, dj


class _CategoricalModel(_Model):
    """K_inf on [0, 1]: D^+(F_j, m) = K_inf^+(F_j, m), D^-(F_i, m) = K_inf^+(F_i mirrored, 1 - m)."""

    def __init__(self, probabilities: np.ndarray, values: np.ndarray) -> None:
        self.P = np.asarray(probabilities, dtype=np.float64)
        self.v = np.asarray(values, dtype=np.float64)
        if np.any(self.v < 0.0) or np.any(self.v > 1.0):
            raise ValueError("categorical arms need a support in [0, 1] for K_inf")
        self.means = self.P @ self.v
        self.params = self.P

    def take(self, idx: np.ndarray) -> _Model:
        return _CategoricalModel(self.P[idx], self.v)

    def _down(self, i: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mu = self.means[i]
        k, lam, dlam = _kinf_up(self.P[i], 1.0 - self.v, 1.0 - mu, 1.0 - m)
        return np.where(m < mu, k, 0.0), np.where(m < mu, lam, 0.0), dlam

    def _up(self, j: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mu = self.means[j]
        k, lam, dlam = _kinf_up(self.P[j], self.v, mu, m)
        return np.where(m > mu, k, 0.0), np.where(m > mu, lam, 0.0), dlam

    def cut(self, i: np.ndarray, j: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._down(i, m)[0], self._up(j, m)[0]

    def pair(self, i: np.ndarray, j: np.ndarray, wi: np.ndarray, wj: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Minimise the convex ``Phi(m) = wi K^-_i(m) + wj K^+_j(m)`` on [mu_j, mu_i]: Newton's method on
        ``Phi'(m) = wj l_j(m) - wi l~_i(m)`` (the dual maximisers), kept in a bracket."""
        mi, mj = self.means[i], self.means[j]
        vi = np.maximum((self.P[i] * (self.v[None, :] - mi[:, None]) ** 2).sum(axis=1), 1e-12)
        vj = np.maximum((self.P[j] * (self.v[None, :] - mj[:, None]) ** 2).sum(axis=1), 1e-12)
        a, b = wi / vi, wj / vj
        s = a + b
        m = np.where(s > 0.0, (a * mi + b * mj) / np.where(s > 0.0, s, 1.0), 0.5 * (mi + mj))  # Gaussian guess
        lo, hi = mj.copy(), mi.copy()
        m = np.clip(m, lo + 0.01 * (hi - lo), hi - 0.01 * (hi - lo))
        active = (wi > 0.0) & (wj > 0.0)
        for _ in range(_NEWTON_MAX):
            if not active.any():
                break
            idx = np.flatnonzero(active)
            mm = m[idx]
            _, li, dli = self._down(i[idx], mm)
            _, lj, dlj = self._up(j[idx], mm)
            f = wj[idx] * lj - wi[idx] * li  # Phi'(m), increasing
            fp = wj[idx] * dlj + wi[idx] * dli
            lo[idx] = np.where(f < 0.0, mm, lo[idx])
            hi[idx] = np.where(f >= 0.0, mm, hi[idx])
            safe = np.where(fp > 0.0, fp, np.inf)
            step = f / safe
            # converged (final even if rounding puts it on the bracket's end), or down to the noise of Phi' (the
            # duals are exact to ~1e-12 relative); otherwise Newton inside the bracket, else bisect
            done = (np.abs(step) <= _NEWTON_TOL * mm + 1e-12 * (wj[idx] * lj + wi[idx] * li) / safe) | \
                   (hi[idx] - lo[idx] <= _NEWTON_TOL * hi[idx])
            new = mm - step
            m[idx] = np.where(done, np.clip(new, mj[idx], mi[idx]),
                              np.where((new > lo[idx]) & (new < hi[idx]), new, 0.5 * (lo[idx] + hi[idx])))
            active[idx[done]] = False
        m = np.where((wi > 0.0) & (wj > 0.0), m, np.where(wj > 0.0, mj, mi))  # a zero weight: g = 0
        di, dj = self.cut(i, j, m)
        return wi * di + wj * dj, m, di, dj


def _as_model(arms: Any) -> tuple[_Model, int | None]:
    """The divergence model of a RewardModel or Instance (and the instance's k, if any)."""
    k = None
    if hasattr(arms, "model") and hasattr(arms, "k"):
        arms, k = arms.model, int(arms.k)
    if isinstance(arms, Bernoulli):
        return _BernoulliModel(arms.means), k
    if isinstance(arms, Gaussian):
        return _GaussianModel(arms.a, arms.b), k
    if isinstance(arms, Categorical):
        return _CategoricalModel(arms.probabilities, arms.values), k
    if isinstance(arms, RewardModel):
        raise TypeError(f"no characteristic time for reward model {type(arms).__name__}")
    raise TypeError("arms must be a Bernoulli, Gaussian or Categorical reward model or an Instance, got "
                    f"{type(arms).__name__}")


# --------------------------------------------------------------------------- solvers
def _gk16_bernoulli(model: _BernoulliModel) -> CharacteristicTime:
    """k = 1, Bernoulli: Track-and-Stop's w*(mu) (GK16 Thm 5), then T*^{-1} = min_a g_1a(w*) (GK16 Lemma 3)."""
    from purebandits.algorithms.track_and_stop import optimal_weights as tas_weights

    w = tas_weights(model.means)
    best = int(np.argmax(model.means))
    others = np.delete(np.arange(model.means.size), best)
    g = model.pair(np.full(others.size, best), others, np.full(others.size, w[best]), w[others])[0]
    if not g.min() > 0.0:  # means within ~1e-7 of the best: Track-and-Stop treats them as tied, the LP does not
        return _cutting_plane(model, 1, 1e-6, 500)
    return CharacteristicTime(1.0 / float(g.min()), w, 0.0, "gk16-bernoulli", 1)


def _gk16_gaussian(model: _GaussianModel) -> CharacteristicTime:
    """k = 1, Gaussian: GK16 Thm 5 in closed form.

    With w_1 = 1 and w_a = x_a, ``g_a(x) = Delta_a^2 r/(2 sigma_1^2 (1 + r))``, ``r = x sigma_1^2/sigma_a^2``; so
    ``g_a(x_a) = y`` gives ``r_a(y) = y/(c_a - y)``, ``c_a = Delta_a^2/(2 sigma_1^2)``, and Thm 5's condition
    ``sum_a D(F_1, m_a)/D(F_a, m_a) = 1`` reads ``F(y) = sum_a r_a(y)^2 sigma_a^2/sigma_1^2 = 1``: F increases
    from 0 to inf on (0, min c_a), one root (Brent, to machine precision). ``w_1 = 1/(1 + sum x_a)``,
    ``T*^{-1} = w_1 y*``.
    """
    mu, var = model.means, model.var
    best = int(np.argmax(mu))
    others = np.delete(np.arange(mu.size), best)
    c = (mu[best] - mu[others]) ** 2 / (2.0 * var[best])
    s = var[others] / var[best]
    cmin = float(c.min())
    calls = [0]

    def f(y: float) -> float:
        calls[0] += 1
        r = y / (c - y)
        return float((r * r * s).sum()) - 1.0

    # F(0) = -1 and F -> inf at c_min (the float below it gives r ~ 1e16)
    y = optimize.brentq(f, 0.0, float(np.nextafter(cmin, 0.0)), xtol=1e-300, rtol=4 * np.finfo(float).eps,
                        maxiter=500)
    x = y / (c - y) * s
    w = np.empty(mu.size)
    w[best] = 1.0 / (1.0 + x.sum())
    w[others] = x * w[best]
    g = model.pair(np.full(others.size, best), others, np.full(others.size, w[best]), w[others])[0]
    return CharacteristicTime(1.0 / float(g.min()), w, 0.0, "gk16-gaussian", calls[0])


def _cutting_plane(model: _Model, k: int, rtol: float, max_iter: int) -> CharacteristicTime:
    """Kelley's cutting-plane method on ``max_{w, t} t`` s.t. ``t <= g_ij(w)`` for every pair (i top, j not).

    Arms with identical distributions are merged first (by symmetry and concavity some optimal w gives them equal
    weights): the variables are the groups' total weights W_g. A cut for pair (i, j) at level m is
    ``t <= W_i D^-(F_i, m)/c_i + W_j D^+(F_j, m)/c_j`` (c the group sizes): valid for every m (g_ij is an infimum
    over m) and tight at the current W when m minimises (envelope theorem: the cut is g's supergradient, and g
    is 1-homogeneous, so the cut has no constant). Each round solves the LP (HiGHS), evaluates every pair's
    g_ij at its solution (the smallest is a lower bound of the value, the LP's t an upper bound) and adds cuts
    at the minimising m for each group's most violated pair, until ``(upper - lower) <= rtol * lower``.
    """
    rows, inverse, counts = np.unique(model.params, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    first = np.array([np.flatnonzero(inverse == g)[0] for g in range(rows.shape[0])])
    gm = model.take(first)
    cnt = counts.astype(np.float64)
    order = np.lexsort((np.arange(gm.means.size), -gm.means))
    # groups in the top k (by arm counts): the top groups must hold exactly k arms (else a tie straddles)
    cum = np.cumsum(cnt[order])
    n_top_groups = int(np.searchsorted(cum, k) + 1)
    top, bot = order[:n_top_groups], order[n_top_groups:]
    G = gm.means.size
    pi, pj = np.repeat(top, bot.size), np.tile(bot, top.size)

    def evaluate(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g, m, _, _ = gm.pair(pi, pj, W[pi] / cnt[pi], W[pj] / cnt[pj])
        return g, m

    W0 = cnt / cnt.sum()
    g0, _ = evaluate(W0)
    scale = float(g0.min())
    if not scale > 0.0:
        scale = float(np.median(g0[g0 > 0])) if np.any(g0 > 0) else 1.0
    # starting cuts: for each top group its hardest rival and for each other group its hardest top group at W0,
    # each at the minimisers for weight ratios 1/16 ... 16 (the shape of g_ij along the simplex)
    hard = np.zeros(pi.size, dtype=bool)
    gmat = g0.reshape(top.size, bot.size)
    hard.reshape(top.size, bot.size)[np.arange(top.size), gmat.argmin(axis=1)] = True
    hard.reshape(top.size, bot.size)[gmat.argmin(axis=0), np.arange(bot.size)] = True
    sel = np.flatnonzero(hard)
    ci, cj, cm = [], [], []
    for ratio in (1 / 16, 1 / 4, 1.0, 4.0, 16.0):
        _, m, _, _ = gm.pair(pi[sel], pj[sel], np.full(sel.size, ratio), np.ones(sel.size))
        ci.append(pi[sel])
        cj.append(pj[sel])
        cm.append(m)
    A_parts: list[sparse.csr_matrix] = []

    def add_cuts(i: np.ndarray, j: np.ndarray, m: np.ndarray) -> None:
        di, dj = gm.cut(i, j, m)
        r = np.arange(i.size)
        # coefficients are capped at 1e12 (HiGHS refuses 1e15): that only asks the arm for a weight >= ~1e-12 t
        data = np.concatenate([np.ones(i.size), -np.minimum(di / cnt[i] / scale, _COEF_CAP),
                               -np.minimum(dj / cnt[j] / scale, _COEF_CAP)])
        cols = np.concatenate([np.full(i.size, G), i, j])
        A_parts.append(sparse.csr_matrix((data, (np.tile(r, 3), cols)), shape=(i.size, G + 1)))

    add_cuts(np.concatenate(ci), np.concatenate(cj), np.concatenate(cm))
    c_obj = np.zeros(G + 1)
    c_obj[G] = -1.0
    A_eq = np.ones((1, G + 1))
    A_eq[0, G] = 0.0
    bounds = [(0.0, None)] * G + [(0.0, None)]
    best_W, best_lb, upper = W0, scale, math.inf
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        A = sparse.vstack(A_parts, format="csr")
        res = optimize.linprog(c_obj, A_ub=A, b_ub=np.zeros(A.shape[0]), A_eq=A_eq, b_eq=[1.0], bounds=bounds,
                               method="highs-ds", options={"primal_feasibility_tolerance": 1e-10,
                                                           "dual_feasibility_tolerance": 1e-10})
        if res.status != 0:
            raise RuntimeError(f"cutting-plane LP failed: {res.message}")
        W = np.clip(res.x[:G], 0.0, None)
        W /= W.sum()
        upper = min(upper, float(res.x[G]) * scale)
        g, m = evaluate(W)
        lb = float(g.min())
        if lb > best_lb:
            best_W, best_lb = W, lb
        if upper - best_lb <= rtol * best_lb:
            break
        # new cuts: each top group's and each other group's most violated pair
        gm_ = g.reshape(top.size, bot.size)
        cand = np.union1d(np.arange(top.size) * bot.size + gm_.argmin(axis=1),
                          gm_.argmin(axis=0) * bot.size + np.arange(bot.size))
        viol = cand[g[cand] < upper * (1.0 - 0.25 * rtol)]
        add_cuts(pi[viol], pj[viol], m[viol])
    else:
        raise RuntimeError(f"cutting plane did not reach rtol={rtol} in {max_iter} LPs "
                           f"(gap {(upper - best_lb) / best_lb:.2e})")
    w = best_W[inverse] / cnt[inverse]
    return CharacteristicTime(1.0 / best_lb, w / w.sum(), max(upper - best_lb, 0.0) / best_lb, "cutting-plane", it)


def solve_characteristic_time(arms: Any, k: int | None = None, *, method: str = "auto", rtol: float = 1e-6,
                              max_iter: int = 500) -> CharacteristicTime:
    """T*(mu) and w*(mu) of top-``k`` identification (GK16 Thm 1; top-k pairs as in the module docstring).

    Parameters
    ----------
    arms : Instance or RewardModel (Bernoulli, Gaussian, Categorical on a support in [0, 1]).
    k : size of the set to identify; default the instance's k (1 for a bare reward model).
    method : {"auto", "cutting-plane"}
        "auto": GK16 Thm 5 root finding for k = 1 Bernoulli/Gaussian, the cutting-plane LP otherwise.
    rtol : relative tolerance of the cutting plane's certified gap on the value 1/T*.
    max_iter : LP solves before giving up (RuntimeError).
    """
    model, k_inst = _as_model(arms)
    k = int(k if k is not None else (k_inst or 1))
    n = model.means.size
    if not 1 <= k < n:
        raise ValueError(f"k must be in [1, {n - 1}], got {k}")
    if method not in ("auto", "cutting-plane"):
        raise ValueError(f"method must be 'auto' or 'cutting-plane', got {method!r}")
    srt = np.sort(model.means)[::-1]
    if srt[k - 1] <= srt[k]:  # a tie at the boundary: mu is in the closure of Alt(mu), T* = inf
        return CharacteristicTime(math.inf, np.full(n, 1.0 / n), 0.0, "tie", 0)
    if method == "auto" and k == 1 and isinstance(model, _BernoulliModel):
        return _gk16_bernoulli(model)
    if method == "auto" and k == 1 and isinstance(model, _GaussianModel):
        return _gk16_gaussian(model)
    return _cutting_plane(model, k, rtol, max_iter)


def characteristic_time(arms: Any, k: int | None = None, *, rtol: float = 1e-6) -> float:
    """``T*(mu)`` (GK16 Thm 1) of top-``k`` identification; ``math.inf`` on a tie at the top-k boundary.

    See :func:`solve_characteristic_time`; ``sample_lower_bound(T*, delta)`` is the bound on E[tau].
    """
    return solve_characteristic_time(arms, k, rtol=rtol).T_star


def optimal_weights(arms: Any, k: int | None = None, *, rtol: float = 1e-6) -> np.ndarray:
    """The optimal sampling proportions ``w*(mu)`` attaining T*(mu) (uniform on a top-k tie, where any w is)."""
    return solve_characteristic_time(arms, k, rtol=rtol).weights
