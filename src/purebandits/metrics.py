"""Evaluation metrics of the pure-exploration papers, as plain NumPy over arrays of runs.

Coordinates shared with the simulator: ``recommended`` is a ``(reps, k)`` integer array (one
row of recommended arms per run), ``means`` the ``(n,)`` true means, ``counts`` a
``(reps, n)`` array of per-arm pulls, ``n_pulls`` a ``(reps,)`` array of total pulls. Per-run
metrics return a ``(reps,)`` array; rates return a :class:`Rate` with a Wilson interval.

Ties among the true means are handled by value: a recommended set is a correct top-K set when
its arms' means are the K largest values (any tied choice counts), which is exact-set equality
when the top-K is unique.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = [
    "Rate",
    "wilson_interval",
    "misidentified",
    "misidentification_rate",
    "error_probability",
    "aggregate_regret",
    "precision",
    "best_in_top_m",
    "below_median_share",
    "SampleCountSummary",
    "sample_count_distribution",
    "sample_complexity_summary",
    "decision_gap",
    "reported_ranking",
    "top1_correct",
    "kendall_top",
    "ranking_quality",
    "QUALITY_NAMES",
    "ratings_until",
]


@dataclass(frozen=True)
class Rate:
    """An estimated probability with its Wilson score interval."""

    estimate: float
    low: float
    high: float
    successes: int
    trials: int


def wilson_interval(successes: int, trials: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion at level ``1 - alpha``.

    ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`` with ``z = Phi^-1(1 - alpha/2)``;
    unlike the normal interval it stays inside [0, 1] and is sensible at 0 or n successes.
    """
    if trials <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    p = successes / trials
    den = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    lo = 0.0 if successes == 0 else max(0.0, float(centre - half))  # exact ends (rounding aside)
    hi = 1.0 if successes == trials else min(1.0, float(centre + half))
    return lo, hi


def _rate(flags: np.ndarray, alpha: float) -> Rate:
    flags = np.asarray(flags, dtype=bool)
    x, n = int(flags.sum()), int(flags.size)
    lo, hi = wilson_interval(x, n, alpha)
    return Rate(x / n if n else float("nan"), lo, hi, x, n)


def _rec(recommended: Sequence | np.ndarray) -> np.ndarray:
    rec = np.asarray(recommended, dtype=np.int64)
    return rec[:, None] if rec.ndim == 1 else rec


def _kth(means: np.ndarray, k: int) -> float:
    return float(np.sort(np.asarray(means, dtype=float))[::-1][k - 1])


def misidentified(recommended: Sequence | np.ndarray, means: np.ndarray) -> np.ndarray:
    """Per run: True when the recommended k arms are not a top-k set (exact top-K error)."""
    rec = _rec(recommended)
    means = np.asarray(means, dtype=float)
    k = rec.shape[1]
    distinct = np.array([len(set(row)) == k for row in rec])
    top = np.sort(means)[::-1][:k]
    return ~(distinct & np.all(np.sort(means[rec], axis=1)[:, ::-1] == top, axis=1))


def misidentification_rate(recommended: Sequence | np.ndarray, means: np.ndarray, alpha: float = 0.05) -> Rate:
    """Fraction of runs whose recommended set is not the top-k, with a Wilson interval."""
    return _rate(misidentified(recommended, means), alpha)


def error_probability(recommended: Sequence | np.ndarray, means: np.ndarray, alpha: float = 0.05) -> Rate:
    """P(the first recommended arm is not a best arm), with a Wilson interval (best-arm error)."""
    rec = _rec(recommended)[:, 0]
    means = np.asarray(means, dtype=float)
    return _rate(means[rec] < means.max(), alpha)


def aggregate_regret(recommended: Sequence | np.ndarray, means: np.ndarray) -> np.ndarray:
    """OptMAI eq. (1): ``(1/K)(sum of the K largest means - sum of the recommended means)``."""
    rec = _rec(recommended)
    means = np.asarray(means, dtype=float)
    k = rec.shape[1]
    best = np.sort(means)[::-1][:k].sum()
    return (best - means[rec].sum(axis=1)) / k


def precision(recommended: Sequence | np.ndarray, means: np.ndarray) -> np.ndarray:
    """``|T intersect top-K| / K`` (OptMAI Sec. 6).

    Arms tied with the K-th mean fill the top-K slots left at that value (so with means
    (0.9, 0.5, 0.5) and K = 2, {0.5, 0.5} scores 1/2); duplicate arms count once.
    """
    rec = _rec(recommended)
    means = np.asarray(means, dtype=float)
    k = rec.shape[1]
    kth = _kth(means, k)
    slots_at_kth = k - int((means > kth).sum())
    hits = []
    for row in rec:
        arms = np.array(sorted({int(a) for a in row}), dtype=np.int64)
        hits.append(int((means[arms] > kth).sum()) + min(int((means[arms] == kth).sum()), slots_at_kth))
    return np.array(hits) / k


def best_in_top_m(empirical: np.ndarray, means: np.ndarray, m: int) -> np.ndarray:
    """Per run: is a best arm among the top ``m`` empirical means?

    ``empirical`` is ``(reps, n)``: per-run empirical means (or any score where higher is
    better, e.g. negated ranks). Ties in the scores count against the best arm: its rank is
    1 + the number of other arms scoring at least as high, so the answer is never optimistic.
    """
    emp = np.atleast_2d(np.asarray(empirical, dtype=float))
    means = np.asarray(means, dtype=float)
    out = np.zeros(emp.shape[0], dtype=bool)
    for b in np.flatnonzero(means == means.max()):
        rank = (emp >= emp[:, [b]]).sum(axis=1)  # includes the arm itself
        out |= rank <= m
    return out


def below_median_share(counts: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Per run: share of the samples spent on arms whose true mean is below the median mean."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    means = np.asarray(means, dtype=float)
    below = means < np.median(means)
    total = counts.sum(axis=1)
    return np.divide(counts[:, below].sum(axis=1), total, out=np.zeros_like(total), where=total > 0)


@dataclass(frozen=True)
class SampleCountSummary:
    """Distribution of per-arm sample counts (OptMAI Sec. 6 histograms)."""

    max: np.ndarray  #: (reps,) largest per-arm count of each run
    min: np.ndarray  #: (reps,) smallest per-arm count of each run
    mean: np.ndarray  #: (reps,) average per-arm count of each run
    hist: np.ndarray  #: counts of arms per bin, pooled over runs
    edges: np.ndarray  #: bin edges of ``hist``


def sample_count_distribution(counts: np.ndarray, bins: int | Sequence[float] = 20) -> SampleCountSummary:
    """Max, min and mean per run, and a histogram of per-arm counts pooled over runs."""
    counts = np.atleast_2d(np.asarray(counts))
    hist, edges = np.histogram(counts.ravel(), bins=bins)
    return SampleCountSummary(counts.max(axis=1), counts.min(axis=1), counts.mean(axis=1), hist, edges)


def sample_complexity_summary(n_pulls: np.ndarray,
                              quantiles: Sequence[float] = (0.05, 0.25, 0.5, 0.75, 0.95)) -> dict[str, float]:
    """Mean, standard deviation, standard error and quantiles of the total pulls of each run."""
    x = np.asarray(n_pulls, dtype=float).ravel()
    out = {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0}
    out["sem"] = out["std"] / np.sqrt(x.size) if x.size > 1 else 0.0
    for q, v in zip(quantiles, np.quantile(x, quantiles), strict=True):
        out[f"q{round(100 * q):02d}"] = float(v)
    return out


def decision_gap(recommended: Iterable[Iterable[int]], means: np.ndarray, optimal: Iterable[int]) -> np.ndarray:
    """CPE: ``mu(OPT) - mu(recommended)`` per run, with ``mu(M) = sum_{i in M} mu_i``.

    ``recommended`` may be ragged (s-t paths differ in length); ``optimal`` is the arm set of
    an optimal decision (e.g. ``decision.oracle(means)``).
    """
    means = np.asarray(means, dtype=float)
    best = float(means[np.asarray(list(optimal), dtype=np.int64)].sum())
    return np.array([best - float(means[np.asarray(list(r), dtype=np.int64)].sum()) for r in recommended])


# ----------------------------------------------------------------------------- quality of the reported ranking
#: the anytime quality measures of a reported ranking (issue 37), in the simulator's CSV column order
QUALITY_NAMES = ("top1_correct", "top10_precision", "top25_precision", "kendall25")


def reported_ranking(recommended: Sequence[int], empirical: np.ndarray, counts: np.ndarray, m: int) -> np.ndarray:
    """The first ``m`` arms of the ranking a learner reports, as the service shows it to the owner
    (:func:`purebandits.service.reports.rank_order`): the recommendation first (in its order), then the
    answered arms by decreasing empirical mean, then the unanswered ones, ties by arm index."""
    emp = np.asarray(empirical, dtype=float)
    n = emp.shape[0]
    rec_pos = np.full(n, n, dtype=np.int64)
    rec = np.asarray(recommended, dtype=np.int64)
    rec_pos[rec] = np.arange(rec.size)
    key = np.where(np.asarray(counts) > 0, -emp, np.inf)
    return np.lexsort((np.arange(n), key, rec_pos))[:m]


def top1_correct(best: int, means: np.ndarray) -> bool:
    """The reported best arm is a true best arm (ties with the largest mean count as correct)."""
    means = np.asarray(means, dtype=float)
    return bool(means[int(best)] == means.max())


def kendall_top(ranked: Sequence[int], means: np.ndarray) -> float:
    """Kendall's tau-b between the reported order of ``ranked`` (best first) and their true means.

    1 when the reported top items are in their true order, -1 when reversed; ``nan`` for fewer than two
    items or when their true means are all tied (``scipy.stats.kendalltau``).
    """
    from scipy.stats import kendalltau

    items = np.asarray(ranked, dtype=np.int64)
    if items.size < 2:
        return float("nan")
    true = np.asarray(means, dtype=float)[items]
    if np.all(true == true[0]):
        return float("nan")
    return float(kendalltau(-np.arange(items.size), true).statistic)


def ranking_quality(recommended: Sequence[int], empirical: np.ndarray, counts: np.ndarray,
                    means: np.ndarray) -> dict[str, float]:
    """The four :data:`QUALITY_NAMES` of one reported ranking against the true means.

    ``top1_correct``: the recommendation's first arm is a true best arm. ``top10_precision`` and
    ``top25_precision``: :func:`precision` of the reported top 10 / 25 (:func:`reported_ranking`) against the
    true top 10 / 25 (with fewer arms than 10 or 25, the top ``n``). ``kendall25``: :func:`kendall_top` of the
    reported top 25 (issue 37).
    """
    means = np.asarray(means, dtype=float)
    n = means.shape[0]
    rank = reported_ranking(recommended, empirical, counts, min(25, n))
    rec = np.asarray(recommended, dtype=np.int64)
    best = int(rec[0]) if rec.size else int(rank[0])
    return {
        "top1_correct": float(top1_correct(best, means)),
        "top10_precision": float(precision(rank[None, :min(10, n)], means)[0]),
        "top25_precision": float(precision(rank[None, :min(25, n)], means)[0]),
        "kendall25": kendall_top(rank, means),
    }


def ratings_until(precision_at: np.ndarray, checkpoints: Sequence[int] | np.ndarray, level: float = 0.9) -> float:
    """Ratings until the reported top set is right with probability ``level`` (issue 37's "ratings until the
    reported top 10 is right with probability 0.9").

    ``precision_at`` is a ``(reps, C)`` array of a precision measure (``top10_precision@c``) at the increasing
    ``checkpoints``. A run's top set is right at a checkpoint when its precision is 1. The answer is the first
    checkpoint from which on the share of right runs stays at least ``level`` (a later dip would make an earlier
    checkpoint a fluke of the runs), or ``nan`` when the last checkpoint is not such a point. It is an estimate
    from ``reps`` runs: with 10 runs, 0.9 means 9 of 10.
    """
    p = np.asarray(precision_at, dtype=float)
    ck = np.asarray(checkpoints)
    if p.ndim != 2 or p.shape[1] != ck.shape[0]:
        raise ValueError(f"precision_at must be (reps, {ck.shape[0]}), got shape {p.shape}")
    if not 0 < level <= 1:
        raise ValueError(f"level must be in (0, 1], got {level!r}")
    if p.shape[0] == 0 or p.shape[1] == 0:
        return float("nan")
    ok = (p >= 1.0).mean(axis=0) >= level
    if not ok[-1]:
        return float("nan")
    bad = np.flatnonzero(~ok)
    first = 0 if bad.size == 0 else int(bad[-1]) + 1
    return float(ck[first])
