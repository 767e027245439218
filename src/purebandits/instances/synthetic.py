"""The papers' problem instances, by name and parameters, with their hardness measures.

An :class:`Instance` bundles a reward model (:mod:`purebandits.instances.rewards`), the size
``k`` of the set to identify, and the hardness measures the five papers state their results in
(:class:`Hardness`). The families (means are listed best first; arm ``i`` below is 1-based):

============================  ===================================================================
``one_sparse(n, k)``          ``mu_1..k = 1/2``, the rest 0, Gaussian with variance 1/4
                              (JMNB14 Sec. 5; JLQ17 Sec. 5 best-1 and best-K)
``lil_exponential(n, alpha)`` ``mu_1 = 1``, ``mu_i = 1 - ((i-1)/n)^alpha``: JMNB14's alpha = 0.3 / 0.6
                              scenarios and JLQ17's "lil-exponential" (Gaussian, variance 1/4);
                              TNM17 Fig. 1 uses it with Bernoulli arms and alpha in {1, 1/2}
``alpha_exponential(n, k)``   JLQ17 Sec. 5 best-K "alpha-exponential" (alpha = 0.3)
``optmai_uniform(n)``         ZCL14 Sec. 6 instance 1: ``theta_i ~ U[0, 1]``, Bernoulli
``two_point(n, k)``           ZCL14 Sec. 6 instance 2: ``theta_i = 0.6`` for ``i <= K``, else 0.5
``nsar_setup(setup, m)``      ST17 Sec. IV setups 1-6, K = 50 Bernoulli arms
============================  ===================================================================

Real data (the caption contests and the RTE workers) are in :mod:`purebandits.instances.real`;
:func:`purebandits.instances.make_instance` builds every instance from a string such as
``"lil_exp:n=1000,alpha=0.3"`` or ``"caption:558"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from purebandits.bounds import chernoff_information
from purebandits.instances.rewards import Bernoulli, Gaussian, RewardModel

__all__ = [
    "Hardness",
    "Instance",
    "hardness",
    "one_sparse",
    "lil_exponential",
    "alpha_exponential",
    "optmai_uniform",
    "two_point",
    "nsar_setup",
    "custom",
]


# --------------------------------------------------------------------------- hardness
def _inv_sq(g: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(g > 0, 1.0 / np.maximum(g, 1e-300) ** 2, np.inf)


@dataclass(frozen=True)
class Hardness:
    """Hardness measures of an instance for identifying its top ``k`` arms.

    Attributes
    ----------
    k : int
        Size of the set to identify.
    gaps : ndarray
        ``Delta_i^(k)`` per arm, in arm order (ST17 eq. 4): ``mu_i - mu_(k+1)`` for the top
        ``k`` arms and ``mu_(k) - mu_i`` for the others. For k = 1 this is the usual
        ``mu_1 - mu_i``, with the best arm's gap ``mu_1 - mu_2``.
    H1 : float
        ``sum_{i != 1} Delta_i^-2`` for k = 1 (JMNB14, ABM10 eq. of H1) and
        ``sum_i (Delta_i^(k))^-2`` over every arm for k > 1 (ST17 eq. 4, ``H_1^(M)``).
    H1_all : float
        ``sum_i (Delta_i^(k))^-2`` over every arm, the best included (ST17's ``H_1^(M)`` for
        any k, KTAS12's ``H``); ST17 Sec. IV sets the budget to ``ceil(H1_all)``.
    H2 : float
        ``max_{i >= 2} i / Delta_(i)^2`` over the gaps sorted increasingly (ABM10; ST17 eq. 4).
    S_SG, S_KL : float
        TNM17 Sec. 2 sums ``sum_{i >= 2} Delta_i^-2`` and ``sum_{i >= 2} 1/D*(mu_i, mu_1)``
        (Bernoulli Chernoff information) against the best arm. For k > 1 (our extension) every
        arm is compared with the boundary it must be told apart from, ``mu_(k+1)`` for the top
        k and ``mu_(k)`` for the others, so ``S_SG = H1``. ``S_KL`` is NaN when a mean lies
        outside [0, 1].

    ``H(p)`` gives ``max_{i >= 2} i^p / Delta_(i)^2`` (ST17 eq. 3-4; ``H(1) = H2``). Ties
    between arm k and arm k + 1 make gaps zero and every measure infinite.
    """

    k: int
    gaps: np.ndarray = field(repr=False)
    H1: float
    H1_all: float
    H2: float
    S_SG: float
    S_KL: float

    def H(self, p: float) -> float:
        """``H^(k)(p) = max_{i >= 2} i^p / Delta_(i)^2`` over the sorted gaps (ST17 eq. 3-4)."""
        g = np.sort(self.gaps)
        if g.size < 2:
            return 0.0
        i = np.arange(1, g.size + 1, dtype=float)
        return float(np.max((i[1:] ** p) * _inv_sq(g[1:])))

    def as_dict(self) -> dict[str, float]:
        """The scalar measures (for tables and the CLI)."""
        return {"k": self.k, "H1": self.H1, "H1_all": self.H1_all, "H2": self.H2,
                "S_SG": self.S_SG, "S_KL": self.S_KL}


def hardness(means: Any, k: int = 1) -> Hardness:
    """Hardness measures (:class:`Hardness`) of the mean vector ``means`` for top-``k``."""
    mu = np.asarray(means, dtype=np.float64)
    n = mu.size
    if not 1 <= k < n:
        raise ValueError(f"k must be in [1, {n - 1}] for {n} arms, got {k}")
    order = np.lexsort((np.arange(n), -mu))
    srt = mu[order]
    top = np.zeros(n, dtype=bool)
    top[order[:k]] = True
    gaps = np.where(top, mu - srt[k], srt[k - 1] - mu)
    inv = _inv_sq(gaps)
    best = order[0]
    H1_all = float(inv.sum())
    H1 = float(np.delete(inv, best).sum()) if k == 1 else H1_all
    g_sorted = np.sort(gaps)
    i = np.arange(1, n + 1, dtype=float)
    H2 = float(np.max(i[1:] * _inv_sq(g_sorted[1:])))
    if k == 1:  # TNM17: every other arm against the best one
        arms = np.delete(np.arange(n), best)
        ref = np.full(arms.size, mu[best])
    else:  # each arm against the boundary it must be told apart from (mu_(k+1) or mu_(k))
        arms = np.arange(n)
        ref = np.where(top, srt[k], srt[k - 1])
    S_SG = float(_inv_sq(np.abs(mu[arms] - ref)).sum())
    if np.all((mu >= 0) & (mu <= 1)):
        chern = np.asarray(chernoff_information(mu[arms], ref), dtype=float)
        S_KL = float(np.sum(np.where(chern > 0, 1.0 / np.maximum(chern, 1e-300), np.inf)))
    else:
        S_KL = math.nan
    return Hardness(k=int(k), gaps=gaps, H1=H1, H1_all=H1_all, H2=H2, S_SG=S_SG, S_KL=S_KL)


# --------------------------------------------------------------------------- instance
class Instance:
    """A named problem: a reward model, the size ``k`` of the set to find, and its hardness.

    Parameters
    ----------
    name : str
        Canonical name, re-parsable by :func:`purebandits.instances.make_instance`.
    model : RewardModel
        The arms' reward distributions.
    k : int, default=1
        Size of the set to identify (the instance's natural ``k``; a learner may ask another).
    description : str
        One line saying where the instance comes from.
    """

    def __init__(self, name: str, model: RewardModel, k: int = 1, description: str = "") -> None:
        if not 1 <= int(k) < model.n_arms:
            raise ValueError(f"k must be in [1, {model.n_arms - 1}], got {k}")
        self.name = name
        self.model = model
        self.k = int(k)
        self.description = description
        self._hardness: dict[int, Hardness] = {}

    def __repr__(self) -> str:
        return f"Instance({self.name!r}, n_arms={self.n_arms}, k={self.k})"

    @property
    def n_arms(self) -> int:
        return self.model.n_arms

    @property
    def means(self) -> np.ndarray:
        """True mean reward of every arm."""
        return self.model.means

    def top(self, k: int | None = None) -> np.ndarray:
        """The true top-``k`` arms, best first (ties to the lower index)."""
        k = self.k if k is None else int(k)
        mu = self.means
        return np.lexsort((np.arange(mu.size), -mu))[:k].astype(np.int64)

    def kth_mean(self, k: int | None = None) -> float:
        """``mu_(k)``, the k-th largest mean: a set is correct iff all its means reach it."""
        k = self.k if k is None else int(k)
        return float(np.sort(self.means)[::-1][k - 1])

    def is_correct(self, recommended: Any, k: int | None = None) -> bool:
        """True if ``recommended`` is a valid top-k set (k distinct arms, none below ``mu_(k)``).

        ``k`` defaults to the instance's ``k``.

        Ties at the boundary make several sets correct; all of them count as correct.
        """
        rec = np.asarray(recommended, dtype=np.int64).ravel()
        k = self.k if k is None else int(k)
        if rec.size != k or np.unique(rec).size != k:
            return False
        return bool(np.all(self.means[rec] >= self.kth_mean(k)))

    def hardness(self, k: int | None = None) -> Hardness:
        """Hardness measures for top-``k`` (cached)."""
        k = self.k if k is None else int(k)
        if k not in self._hardness:
            self._hardness[k] = hardness(self.means, k)
        return self._hardness[k]


def _model(means: np.ndarray, model: str, variance: float) -> RewardModel:
    if model == "gaussian":
        return Gaussian(means, variance)
    if model == "bernoulli":
        return Bernoulli(means)
    raise ValueError(f"model must be 'gaussian' or 'bernoulli', got {model!r}")


def _check_n(n: int, low: int = 2) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < low:
        raise ValueError(f"n must be an integer >= {low}, got {n!r}")
    return int(n)


def _check_k(k: int, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k < n:
        raise ValueError(f"k must be an integer in [1, {n - 1}], got {k!r}")
    return int(k)


def one_sparse(n: int = 1000, k: int = 1, *, best: float = 0.5, rest: float = 0.0,
               model: str = "gaussian", variance: float = 0.25) -> Instance:
    """"1-sparse": ``k`` arms with mean ``best`` (1/2), the rest ``rest`` (0); N(mu, 1/4).

    JMNB14 Sec. 5 (k = 1, H1 = 4(n-1)) and JLQ17 Sec. 5 (best-K with K in {2, n/2}).
    """
    n = _check_n(n)
    k = _check_k(k, n)
    mu = np.full(n, float(rest))
    mu[:k] = float(best)
    name = f"one_sparse:n={n},k={k}" + _suffix(best=(best, 0.5), rest=(rest, 0.0), model=(model, "gaussian"),
                                               variance=(variance, 0.25))
    return Instance(name, _model(mu, model, variance), k, "JMNB14 Sec. 5 / JLQ17 Sec. 5 1-sparse")


def lil_exponential(n: int = 1000, alpha: float = 0.3, *, model: str = "gaussian",
                    variance: float = 0.25, k: int = 1) -> Instance:
    """``mu_1 = 1`` and ``mu_i = 1 - ((i-1)/n)^alpha`` for i = 2..n.

    JMNB14 Sec. 5 "alpha = 0.3" / "alpha = 0.6" and JLQ17 "lil-exponential" (Gaussian,
    variance 1/4); TNM17 Fig. 1 with ``model="bernoulli"`` and alpha in {1, 1/2}.
    ``H1 = sum_{j=1..n-1} (j/n)^(-2 alpha)`` (2376 at alpha = 0.3, n = 1000).
    """
    n = _check_n(n)
    if not float(alpha) > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    k = _check_k(k, n)
    i = np.arange(1, n + 1, dtype=np.float64)
    mu = 1.0 - ((i - 1.0) / n) ** float(alpha)
    name = f"lil_exp:n={n},alpha={alpha}" + _suffix(model=(model, "gaussian"), variance=(variance, 0.25), k=(k, 1))
    return Instance(name, _model(mu, model, variance), k, "JMNB14 Sec. 5 / JLQ17 / TNM17 alpha scenario")


def alpha_exponential(n: int = 1000, k: int = 2, alpha: float = 0.3, *, model: str = "gaussian",
                      variance: float = 0.25) -> Instance:
    """JLQ17 Sec. 5 best-K "alpha-exponential" (ALGORITHMS.md 14.4).

    ``mu_i = (n-k)/n + (k/n)((k-i)/k)^alpha`` for i <= k and
    ``mu_i = (n-k)/n - ((n-k)/n)((i-k)/(n-k))^alpha`` for i > k.
    """
    n = _check_n(n, 3)
    k = _check_k(k, n)
    if not float(alpha) > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    a = float(alpha)
    i = np.arange(1, n + 1, dtype=np.float64)
    base = (n - k) / n
    mu = np.where(i <= k, base + (k / n) * (np.clip(k - i, 0, None) / k) ** a,
                  base - base * (np.clip(i - k, 0, None) / (n - k)) ** a)
    name = f"alpha_exp:n={n},k={k},alpha={alpha}" + _suffix(model=(model, "gaussian"), variance=(variance, 0.25))
    return Instance(name, _model(mu, model, variance), k, "JLQ17 Sec. 5 best-K alpha-exponential")


def optmai_uniform(n: int = 1000, k: int = 10, *, seed: int = 0) -> Instance:
    """ZCL14 Sec. 6 instance 1: Bernoulli arms with ``theta_i ~ U[0, 1]`` drawn from ``seed``."""
    n = _check_n(n)
    k = _check_k(k, n)
    mu = np.random.default_rng(seed).random(n)
    return Instance(f"uniform:n={n},k={k},seed={seed}", Bernoulli(mu), k, "ZCL14 Sec. 6 theta ~ U[0,1]")


def two_point(n: int = 1000, k: int = 10, *, high: float = 0.6, low: float = 0.5) -> Instance:
    """ZCL14 Sec. 6 instance 2: Bernoulli, ``theta_i = 0.6`` for i <= K and 0.5 otherwise."""
    n = _check_n(n)
    k = _check_k(k, n)
    mu = np.full(n, float(low))
    mu[:k] = float(high)
    name = f"two_point:n={n},k={k}" + _suffix(high=(high, 0.6), low=(low, 0.5))
    return Instance(name, Bernoulli(mu), k, "ZCL14 Sec. 6 two-point 0.6/0.5")


def nsar_setup(setup: int = 1, m: int = 2, *, n: int = 50, seed: int = 0) -> Instance:
    """ST17 Sec. IV academic setups 1-6 (K = n = 50 Bernoulli arms, top ``m`` in {2, 4}).

    1. ``mu_1..m = 0.7``, the rest 0.5;
    2. 0.7 | 0.66 (arms m+1..2m) | 0.5;
    3. 0.7 | 0.66 | 0.62 (arms 2m+1..3m) | 0.5;
    4. arithmetic progression ``mu_i = 0.7 - 0.6 (i-1)/(n-1)`` (ST17 gives the gaps
       ``Delta_i = 0.6(i-1)/(K-1)``; ``mu_1 = 0.7`` is our reading, by analogy with the others);
    5. means drawn once from Beta(5, 5) with ``seed`` (ST17 does not say whether they were
       redrawn per run; here they are fixed per instance);
    6. 0.7 (1..m), 0.68 (arm m+1), 0.5 (the rest).
    """
    n = _check_n(n, 4)
    m = _check_k(m, n)
    if setup not in (1, 2, 3, 4, 5, 6):
        raise ValueError(f"setup must be one of 1..6, got {setup!r}")
    mu = np.full(n, 0.5)
    mu[:m] = 0.7
    if setup in (2, 3):
        mu[m:2 * m] = 0.66
    if setup == 3:
        mu[2 * m:3 * m] = 0.62
    if setup == 4:
        mu = 0.7 - 0.6 * np.arange(n) / (n - 1)
    if setup == 5:
        mu = np.random.default_rng(seed).beta(5.0, 5.0, n)
    if setup == 6:
        mu[m] = 0.68
    if 3 * m > n and setup in (2, 3):
        raise ValueError(f"setup {setup} needs n >= 3m, got n={n}, m={m}")
    name = f"nsar:setup={setup},m={m}" + _suffix(n=(n, 50), seed=(seed, 0) if setup == 5 else (0, 0))
    return Instance(name, Bernoulli(mu), m, f"ST17 Sec. IV setup {setup}")


def custom(means: Any, *, k: int = 1, model: str = "bernoulli", variance: float = 0.25) -> Instance:
    """Arms with the given ``means`` (Bernoulli by default, or Gaussian with ``variance``)."""
    mu = np.asarray(means, dtype=np.float64).ravel()
    _check_n(int(mu.size))
    k = _check_k(k, mu.size)
    name = "custom:means=" + "/".join(repr(float(x)) for x in mu) + _suffix(
        k=(k, 1), model=(model, "bernoulli"), variance=(variance, 0.25))
    return Instance(name, _model(mu, model, variance), k, "user-given means")


def _suffix(**pairs: tuple[Any, Any]) -> str:
    """``,key=value`` for every parameter that differs from its default (canonical names)."""
    return "".join(f",{key}={value}" for key, (value, default) in pairs.items() if value != default)
