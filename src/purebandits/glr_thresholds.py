"""Published, proven stopping thresholds ``beta(t, delta)`` for GLR (Chernoff) stopping rules.

A GLR stopping rule recommends the empirical answer once the statistic
``Z(t) = min over defeated pairs (a in the answer, b outside) of Z_ab(t)`` exceeds ``beta(t, delta)``;
``Z_ab`` is the log generalised likelihood ratio of "mu_a >= mu_b" against "mu_a <= mu_b"
(:func:`purebandits.bounds.glr_pair_cost` for Bernoulli/Gaussian arms, :mod:`purebandits.kinf_glr` for
rewards on a known finite support). Every threshold here is *proven*: whatever the sampling rule, the
probability that the rule ever stops with a wrong answer is at most delta, for the statistic and the
family named in its docstring (and only for those).

All of them share one argument: a wrong answer at stopping means some pair (a, b) with ``mu_a <= mu_b``
(a recommended, b not) has ``Z_ab > beta``; on that pair the truth lies in the alternative, so ``Z_ab`` is
at most the sum over {a, b} of the deviations ``N_i D(F_hat_i, F_i)``; a time-uniform bound on that sum at
level ``delta / P`` and a union over the ``P = k (n_arms - k)`` pairs that can be wrong (``n_arms - 1`` at
k = 1) give the threshold. So every threshold is at least its *floor* ``log(P / delta)``
(:func:`threshold_floor`); what each adds on top is the price of uniformity in time.

Signature shared by the thresholds: ``f(t, n_arms, delta, k=1) -> float`` with ``t >= 1`` the total number of
answers, ``n_arms >= 2``, ``0 < delta < 1`` and ``1 <= k < n_arms``; a bad input raises ``ValueError``.

Sources, and what was checked (see ``docs/glr_stopping.md``):

* Garivier and Kaufmann 2016 (COLT), "Optimal best arm identification with fixed confidence":
  :func:`gk16_threshold`.
* Kaufmann and Koolen 2021 (JMLR 22(246)), "Mixture martingales revisited with applications to
  sequential tests and confidence intervals": :func:`kk21_gaussian_threshold`, :func:`kk21_exp_threshold`.
* Bounded rewards with the K_inf (empirical likelihood) statistic, by betting: :func:`kinf_portfolio_threshold`,
  :func:`kinf_kt_threshold` (the sharper one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from purebandits.bounds import glr_threshold_s

__all__ = [
    "pair_count",
    "threshold_floor",
    "gk16_threshold",
    "kk21_gaussian_calibration",
    "kk21_gaussian_threshold",
    "kk21_exp_calibration",
    "kk21_exp_threshold",
    "kinf_portfolio_threshold",
    "kinf_kt_threshold",
    "kt_regret",
    "kinf_kt_pair_threshold",
    "kinf_kt_allocation_threshold",
    "THRESHOLDS",
]

Threshold = Callable[..., float]


def _check(t: float, n_arms: int, delta: float, k: int) -> None:
    """Raise ValueError with the reason when an argument is outside the thresholds' domain."""
    if isinstance(n_arms, bool) or int(n_arms) != n_arms or n_arms < 2:
        raise ValueError(f"n_arms must be an integer >= 2 (a GLR stop compares two arms at least), got {n_arms!r}")
    if isinstance(k, bool) or int(k) != k or not 1 <= k < n_arms:
        raise ValueError(f"k must be an integer with 1 <= k < n_arms = {n_arms}, got {k!r}")
    if not (isinstance(delta, int | float | np.floating) and 0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if not (isinstance(t, int | float | np.integer | np.floating) and math.isfinite(float(t)) and float(t) >= 1.0):
        raise ValueError(f"t (the number of answers so far) must be a finite number >= 1, got {t!r}")


def pair_count(n_arms: int, k: int = 1) -> int:
    """The number of ways a recommended top-k set can be wrong on one pair: ``k (n_arms - k)``.

    A wrong top-k answer contains an arm a outside the true top k and misses an arm b inside it; the
    thresholds take a union bound over these pairs (``n_arms - 1`` at k = 1, the papers' ``K - 1``; for
    k > 1 the same union bound, not stated in the papers, which treat k = 1).
    """
    _check(1.0, n_arms, 0.5, k)
    return int(k) * (int(n_arms) - int(k))


def threshold_floor(n_arms: int, delta: float, k: int = 1) -> float:
    """``log(k (n_arms - k) / delta)``: the union term every threshold here contains (``log((K-1)/delta)`` at k = 1).

    Any GLR stop with these thresholds needs at least ``T*_stat(mu) * floor`` samples in the limit of
    its statistic's characteristic time; the time terms come on top.
    """
    _check(1.0, n_arms, delta, k)
    return math.log(pair_count(n_arms, k) / float(delta))


# --------------------------------------------------------------------------- Garivier-Kaufmann 2016
def gk16_threshold(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """Garivier and Kaufmann (COLT 2016): ``beta(t, delta) = log(2 t (K - 1) / delta)``.

    Proven for the Bernoulli GLR statistic (Bernoulli-KL transportation costs,
    :func:`purebandits.bounds.glr_pair_cost`) with Bernoulli arms: GK16 Sec. 3, the proposition for
    Bernoulli bandit models (numbered 12 in ``bounds.glr_threshold``'s docstring; we recall it as
    Proposition 11, with Proposition 12 the exponential-family version ``log(C t^alpha / delta)``:
    numbering recalled, not checked against the paper). The Bernoulli statistic stays valid for any rewards
    in [0, 1] (a [0, 1] variable's moment generating function is at most the Bernoulli one with the same
    mean, so the Bernoulli likelihood-ratio martingales remain supermartingales): our remark, not GK16's.
    Computed by :func:`purebandits.bounds.glr_threshold_s` (``theory=True``); for k > 1, ``K - 1`` becomes
    ``k (K - k)`` (:func:`pair_count`).
    """
    _check(t, n_arms, delta, k)
    return float(glr_threshold_s(float(t), float(pair_count(n_arms, k) + 1), float(delta), True))


# --------------------------------------------------------------------------- Kaufmann-Koolen 2021, Gaussian
def _g_gauss(lam: np.ndarray | float) -> np.ndarray | float:
    """``g_G(l) = 2 l - 2 l log(4 l) + log zeta(2 l) - log(1 - l) / 2`` on (1/2, 1) (Kaufmann and Koolen 2021)."""
    lam = np.asarray(lam, dtype=float)
    return 2.0 * lam - 2.0 * lam * np.log(4.0 * lam) + np.log(special.zeta(2.0 * lam, 1.0)) - 0.5 * np.log1p(-lam)


@lru_cache(maxsize=4096)
def _c_gauss(x: float) -> float:
    # (g_G(l) + x) / l is +inf at both ends of (1/2, 1) (zeta(2l) -> inf as l -> 1/2, -log(1 - l) -> inf as
    # l -> 1); a grid brackets the minimum, then Brent's bounded search refines it inside the bracket.
    grid = np.linspace(0.5, 1.0, 4001)[1:-1]
    vals = (_g_gauss(grid) + x) / grid
    i = int(np.argmin(vals))
    lo = grid[i - 1] if i > 0 else 0.5 + 1e-15
    hi = grid[i + 1] if i < grid.size - 1 else 1.0 - 1e-16  # large x: the minimiser tends to 1
    res = optimize.minimize_scalar(lambda lam: float((_g_gauss(lam) + x) / lam), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1e-12})
    return float(min(vals[i], res.fun))


def kk21_gaussian_calibration(x: float) -> float:
    """Kaufmann and Koolen's (JMLR 2021) Gaussian calibration ``C_G(x) = min_{l in (1/2, 1)} (g_G(l) + x) / l``.

    ``g_G(l) = 2 l - 2 l log(4 l) + log zeta(2 l) - log(1 - l) / 2`` (zeta: Riemann's, ``scipy.special.zeta``).
    It is a minimum over the mixing parameter of their hierarchical Gaussian mixture martingale, so no
    closed form; ``C_G(x) ~ x + log x`` for large x. Computed by a grid over (1/2, 1) followed by Brent's
    bounded search in the grid cell of the minimum (``scipy.optimize.minimize_scalar``, xatol 1e-12);
    the objective is +inf at both ends.

    Checked: the definition of g_G and C_G as quoted from Jourdan and Degenne (2022, "Non-asymptotic analysis
    of a UCB-based top two algorithm") in a 2024 paper's appendix and in an independent public implementation;
    the JMLR paper itself was not available to us (its theorem number: recalled as Theorem 9 / Corollary 10).
    """
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(f"C_G needs a finite x > 0, got {x!r}")
    return _c_gauss(float(x))


def kk21_gaussian_threshold(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """``beta(t, delta) = 2 C_G(log((K - 1)/delta) / 2) + 4 log(4 + log(t / 2))`` (Kaufmann and Koolen 2021).

    Proven for the Gaussian GLR statistic ``(mu_a - mu_b)^2 / (2 sigma^2 (1/N_a + 1/N_b))``
    (:func:`purebandits.bounds.glr_pair_cost`, ``gaussian=True``) with Gaussian arms of known variance
    sigma^2. Source: KK21's Gaussian deviation inequality for a subset S of arms,
    ``P(exists t: sum_{a in S} [N_a (mu_hat_a - mu_a)^2 / (2 sigma^2) - 2 log(4 + log N_a)] >= |S| C_G(x / |S|))
    <= e^{-x}``, applied with |S| = 2 and ``x = log((K-1)/delta)``; ``2 log(4 + log N_a) + 2 log(4 + log N_b)
    <= 4 log(4 + log(t/2))`` because ``log(4 + log n)`` is concave and ``N_a + N_b <= t``. This is the
    threshold of Jourdan, Degenne et al. (Top Two algorithms revisited, NeurIPS 2022; TTUCB, 2022),
    as quoted in a 2024 paper; checked against that quotation, not the JMLR paper.
    Because the proof only uses the Gaussian moment generating function as an upper bound, it also holds
    for sigma-sub-Gaussian rewards (rewards in [0, 1] with sigma = 1/2): our remark.
    """
    _check(t, n_arms, delta, k)
    x = math.log(pair_count(n_arms, k) / float(delta))
    return 2.0 * kk21_gaussian_calibration(x / 2.0) + 4.0 * math.log(4.0 + math.log(float(t) / 2.0))


# --------------------------------------------------------------------------- Kaufmann-Koolen 2021, exp. family
_LN_2ZETA2 = math.log(math.pi**2 / 3.0)  # log(2 zeta(2))


def _h_inv(y: float) -> float:
    """Inverse of ``h(u) = u - log u`` on u >= 1: ``-W_{-1}(-e^{-y})`` (y >= 1), the branch with u >= 1."""
    if y < 1.0:
        raise ValueError(f"h^-1 needs y >= 1, got {y!r}")
    if y == 1.0:
        return 1.0
    if y < 600.0:
        return float(-special.lambertw(-math.exp(-y), k=-1).real)
    u = y + math.log(y)  # e^{-y} underflows: the fixed point u = y + log u, a contraction (slope 1/u)
    for _ in range(60):
        u_next = y + math.log(u)
        if abs(u_next - u) <= 1e-15 * u_next:
            return u_next
        u = u_next
    return u


def _h_tilde(x: float, z: float = 1.5) -> float:
    """``h~_z(x) = min_{eta in (1, z]} eta (x - log log eta)``: the closed form ``e^{1/u} u`` with
    ``u = h^-1(x)`` when that minimiser ``eta = e^{1/u}`` is <= z (i.e. ``x >= h(1/log z)``), else
    ``z (x - log log z)``.
    """
    u_z = 1.0 / math.log(z)
    if x >= u_z - math.log(u_z):  # h(1 / log z)
        u = _h_inv(x)
        return math.exp(1.0 / u) * u
    return z * (x - math.log(math.log(z)))


def kk21_exp_calibration(x: float) -> float:
    """Kaufmann and Koolen's (JMLR 2021) exponential-family calibration
    ``T(x) = 2 h~_{3/2}((h^-1(1 + x) + log(2 zeta(2))) / 2)`` (``T(x) ~ x + 4 log(1 + x + sqrt(2x))``).

    ``h(u) = u - log u`` for u >= 1 and ``h^-1`` its inverse (Lambert W, branch -1, so that ``h^-1 >= 1``);
    ``h~_z(x) = e^{1/h^-1(x)} h^-1(x)`` if ``x >= h(1/log z)``, else ``z (x - log log z)``, which is
    ``min_{eta in (1, z]} eta (x - log log eta)`` in closed form (the peeling-grid ratio eta of their proof).

    Uncertain (recalled, then compared with a public implementation of the GLR-klUCB test of Besson and
    Kaufmann, which uses this T): both that transcription and our memory write the branch condition as
    ``x >= h^-1(1/log z)``, which makes h~ jump down at ``x = h^-1(1/log z) ~ 3.80`` (not a minimum, not
    monotone); we read it as ``x >= h(1/log z) ~ 1.56``, where the two branches meet and h~ is the minimum
    above. The literal reading is larger by at most 0.45 on ``x in [1.56, 3.80)`` (at most 1.8 on the
    two-arm threshold); it is not the conservative choice we take because a threshold that falls as
    1/delta grows is not a usable threshold. The validity test (``tests/test_glr_thresholds.py``) checks our
    reading by simulation.
    """
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"T needs a finite x >= 0, got {x!r}")
    return 2.0 * _h_tilde((_h_inv(1.0 + x) + _LN_2ZETA2) / 2.0)


def kk21_exp_threshold(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """``beta(t, delta) = 2 T(log((K - 1)/delta) / 2) + 6 log(1 + log(t / 2))`` (Kaufmann and Koolen 2021).

    Proven for the GLR statistic of a one-parameter exponential family (Bernoulli here:
    :func:`purebandits.bounds.glr_pair_cost`) with arms in that family. Source: KK21's deviation inequality
    for a subset S of arms, ``P(exists t: sum_{a in S} [N_a d(mu_hat_a, mu_a) - 3 log(1 + log N_a)]
    >= |S| T(x / |S|)) <= e^{-x}`` (recalled as their Theorem 7, with a side condition x >= 0.04 that
    ``log((K-1)/delta)/2`` meets for delta <= 0.92 at K = 2), with |S| = 2 and ``x = log((K-1)/delta)``;
    ``3 log(1 + log N_a) + 3 log(1 + log N_b) <= 6 log(1 + log(t/2))`` by concavity. The all-arms form
    ``3 sum_a log(1 + log N_a) + K T(log(1/delta) / K)`` (|S| = K, no union) is the same theorem; it is
    smaller only for few arms and is not implemented. Valid for the Bernoulli statistic on any rewards in
    [0, 1] (see :func:`gk16_threshold`).
    """
    _check(t, n_arms, delta, k)
    x = math.log(pair_count(n_arms, k) / float(delta))
    return 2.0 * kk21_exp_calibration(x / 2.0) + 6.0 * math.log(1.0 + math.log(float(t) / 2.0))


# --------------------------------------------------------------------------- bounded rewards, K_inf
def kinf_portfolio_threshold(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """``beta(t, delta) = log((K - 1)/delta) + 2 log(1 + t/2)`` for the K_inf GLR statistic of rewards in [0, 1].

    Proven for :mod:`purebandits.kinf_glr`'s statistic (``Z_ab = inf_x N_a K_inf^-(F_a, x) + N_b K_inf^+(F_b, x)``,
    K_inf over *all* distributions on [0, 1]) and any arms with rewards in [0, 1] (categorical ratings
    included). The proof is the testing-by-betting argument, assembled here from published pieces:

    1. Dual form (Honda and Takemura 2010): ``N K_inf^+(F_hat_N, m) = max_{0 <= l <= 1/(1-m)} log W_N(l)``
       with ``W_N(l) = prod_i (1 - l (X_i - m))``: the wealth of the best constant bet against "mean >= m".
       Writing ``l = b / (1 - m)``, ``W_N`` is a constant-rebalanced portfolio with weight b in [0, 1] on
       two assets with returns 1 and ``(1 - X_i)/(1 - m) >= 0``.
    2. Universal portfolio (Cover and Ordentlich 1996; Blum and Kalai 1999, the uniform prior over b): the
       mixture wealth ``W~_N = int_0^1 W_N(b) db`` satisfies ``max_b W_N(b) <= (N + 1) W~_N`` for two assets.
    3. If the arm's true mean is >= m, each ``W(b)`` and so ``W~`` is a nonnegative supermartingale (it is
       multiplied by ``1 - l (X - m)``, of conditional mean ``<= 1``, only when the arm is pulled, whatever the
       sampling rule); the same for ``K_inf^-`` mirrored.
    4. For a pair with true means ``mu_a <= mu_b`` put m = mu_a: ``Z_ab <= N_a K_inf^-(F_hat_a, m) +
       N_b K_inf^+(F_hat_b, m) <= log(W~_a W~_b) + log(N_a + 1) + log(N_b + 1)``; the product ``W~_a W~_b`` is a
       nonnegative supermartingale with initial value 1, so by Ville's inequality it exceeds ``(K-1)/delta``
       with probability at most ``delta/(K-1)``; ``log(N_a + 1) + log(N_b + 1) <= 2 log(1 + t/2)`` by concavity.
       A union over the K - 1 wrong recommendations (``k (K - k)`` pairs for top-k) ends the proof.

    Checked: each step above is a standard result (steps 1-3 are also how Orabona and Jun 2021, "Tight
    concentrations and confidence sequences from the regret of universal portfolio", and Waudby-Smith and
    Ramdas 2024, JRSS-B, build their betting confidence sequences). Not checked: whether Jourdan et al. 2022
    (Top Two algorithms revisited, bounded distributions) state this same threshold (we recall a
    ``2 log(1 + t/2)``-type term there); the arXiv 2402.03683 candidate was not identified. A
    Dirichlet(1/2, 1/2) prior in step 2 would cost about ``(1/2) log N`` instead of ``log(N + 1)``; we keep the
    uniform prior, whose bound is elementary (``tests/test_kinf_glr.py`` checks step 2 numerically).
    """
    _check(t, n_arms, delta, k)
    return math.log(pair_count(n_arms, k) / float(delta)) + 2.0 * math.log1p(float(t) / 2.0)


def kinf_kt_threshold(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """``beta(t, delta) = log((K - 1)/delta) + log(1 + t/2) + 2 log 2``: the K_inf GLR statistic, rewards in [0, 1].

    The proof of :func:`kinf_portfolio_threshold` with one change in step 2: the mixture over the bet b uses the
    Dirichlet(1/2, 1/2) (Krichevsky-Trofimov) prior instead of the uniform one. For two assets Cover and Ordentlich
    (1996, Theorem 2 with m = 2) bound the best constant-rebalanced wealth by
    ``sqrt(pi) Gamma(N + 1) / Gamma(N + 1/2) <= 2 sqrt(N + 1)`` times this mixture's, for *every* sequence of
    returns, so each arm of a pair pays ``log 2 + (1/2) log(N + 1)`` instead of ``log(N + 1)``, and
    ``(1/2) log((N_a + 1)(N_b + 1)) <= log(1 + t/2)`` by concavity. The prior is fixed before the data, so the
    mixture is still a nonnegative supermartingale under the null and Ville's inequality applies as before.

    The time term is then GK16's: ``log(4 + 2t)`` against ``log(2t)``, so on ratings the K_inf statistic's gain
    over the Bernoulli one is not paid back in the threshold. Checked: ``tests/test_kinf_glr.py`` computes the
    Dirichlet(1/2, 1/2) mixture wealth by quadrature and checks the ``2 sqrt(N + 1)`` bound on random and extreme
    sequences, and the null stopping rate at equal means (``docs/glr_stopping.md``).
    """
    _check(t, n_arms, delta, k)
    return math.log(pair_count(n_arms, k) / float(delta)) + math.log1p(float(t) / 2.0) + 2.0 * math.log(2.0)


def kt_regret(n: ArrayLike) -> np.ndarray | float:
    """``log(sqrt(pi) Gamma(n + 1) / Gamma(n + 1/2))``: the worst case, over every sequence of n returns, of log(best
    constant bet's wealth / the Dirichlet(1/2, 1/2) mixture's) for two assets (Cover and Ordentlich 1996, Thm 2 with
    m = 2; attained by a sequence of one asset only). 0 at n = 0, ``(1/2) log(pi n) + o(1)``, at most
    ``log 2 + (1/2) log(n + 1)`` (the bound :func:`kinf_kt_threshold` uses)."""
    n = np.asarray(n, dtype=np.float64)
    out = 0.5 * math.log(math.pi) + special.gammaln(n + 1.0) - special.gammaln(n + 0.5)
    return float(out) if out.ndim == 0 else out


def kinf_kt_pair_threshold(n_a: ArrayLike, n_b: ArrayLike, n_arms: int, delta: float,
                           k: int = 1) -> np.ndarray | float:
    """``beta_ab = log(k (K - k)/delta) + kt_regret(N_a) + kt_regret(N_b)``: :func:`kinf_kt_threshold` per pair.

    The proof of :func:`kinf_kt_threshold` bounds ``Z_ab`` by the log of the two arms' mixture wealths plus each
    arm's own regret, ``kt_regret(N)``; that threshold then bounds the two regrets by one function of t. Kept per
    pair, with the exact regret, the threshold is smaller (never larger: ``kt_regret(N) <= log 2 + (1/2) log(N + 1)``
    and the concavity step), most where a rival has few answers. A stop compares each pair (a in the answer, b
    outside) with its own beta_ab; the union over the ``k (K - k)`` pairs is unchanged. ``tests/test_kinf_glr.py``
    checks the regret against the quadrature of the mixture (equality on one-asset sequences).
    """
    _check(1.0, n_arms, delta, k)
    na, nb = np.asarray(n_a, dtype=np.float64), np.asarray(n_b, dtype=np.float64)
    if np.any(na < 0) or np.any(nb < 0):
        raise ValueError("answer counts must be >= 0")
    out = math.log(pair_count(n_arms, k) / float(delta)) + kt_regret(na) + kt_regret(nb)
    return float(out) if np.ndim(out) == 0 else out


def kinf_kt_allocation_threshold(t: float, weights: ArrayLike, best: int, n_arms: int, delta: float) -> float:
    """The largest :func:`kinf_kt_pair_threshold` over the pairs (``best``, rival) when the t answers follow the
    proportions ``weights``: what every pair must pass for a K_inf GLR stop at that allocation (k = 1). Used for
    plug-in stopping times (the fixed point ``t = T* beta(t)``)."""
    w = np.asarray(weights, dtype=np.float64)
    rivals = np.delete(np.arange(w.size), best)
    return float(np.max(kinf_kt_pair_threshold(w[best] * t, w[rivals] * t, n_arms, delta)))


#: name -> (threshold, the statistic and family it is proven for)
THRESHOLDS: dict[str, tuple[Threshold, str]] = {
    "gk16": (gk16_threshold, "Bernoulli GLR; Bernoulli arms (any [0, 1] rewards)"),
    "kk21-gaussian": (kk21_gaussian_threshold, "Gaussian GLR; Gaussian (sub-Gaussian) arms, known sigma"),
    "kk21-exp": (kk21_exp_threshold, "exponential-family GLR; Bernoulli arms (any [0, 1] rewards)"),
    "kinf-portfolio": (kinf_portfolio_threshold, "K_inf GLR; any rewards in [0, 1] (categorical ratings)"),
    "kinf-kt": (kinf_kt_threshold, "K_inf GLR; any rewards in [0, 1] (categorical ratings)"),
}
