"""How many more answers a learner needs to decide, forecast from its own statistic on its current state.

A stopping progress of "0 % decided" after tens of thousands of answers says nothing about how far
the decision is. :func:`answers_to_decision` answers that in answers, with a range, **if the current
estimates are right** (the means the learner has measured are the true ones):

* **Interval stops** (the LUCB family: LUCB1, KL-LUCB, lil'LUCB, LUCB++, lil'RandLUCB, lil-KLUCB and
  the service's default KL-RandLUCB). The rule stops when every top-k item's lower bound clears every
  other item's upper bound. Let ``b`` be the midpoint between the k-th and (k+1)-th empirical means.
  Each item needs answers until the learner's own bound (:func:`~purebandits.algorithms.kernels.lucb_rules.
  family_bound_s`: the same bound, confidence split and round term the stop test uses) at the item's
  current mean no longer reaches ``b``: its lower bound above ``b`` for a top-k item, its upper bound
  below it for the others. The forecast is the sum over items of that count minus the answers the
  item has (items already clear count 0). Range: the same with every mean moved one standard error
  (:func:`_standard_errors`) away from ``b`` (low) or towards it (high; by at most half the distance,
  since a mean within one standard error of ``b`` would ask for unboundedly many answers).
* **The K_inf GLR stop** (``stop="kinf"``, up to :data:`KINF_FORECAST_MAX_ITEMS` items): the same plug-in with
  T*_Kinf of the items' rating distributions and the threshold the stop uses (:func:`_kinf_forecast`).
* **GLR stops** (:class:`~purebandits.algorithms.top_two.TopTwo`,
  :class:`~purebandits.algorithms.track_and_stop.TrackAndStop`: the statistic ``Z(t)`` against the
  threshold ``beta(t, delta)``). An allocation that matches the optimal proportions makes ``Z(t)``
  grow like ``t / T*(mu)``, so the plug-in stopping time is the ``t'`` with ``t' = T*(mu_hat)
  beta(t', delta)`` (a fixed point; :func:`purebandits.lower_bound.characteristic_time` with the
  learner's own model: Gaussian with its ``sigma`` or Bernoulli); the forecast is ``t' - t``. Range: as
  for intervals, every mean moved one standard error away from or towards the midpoint between the two
  best means (seeded draws of the means were tried: on thousands of items answered a few times each, the
  largest of 4,000 draws sits far above the best estimate, so every draw forecast fewer answers and the
  range missed the forecast). T* for k = 1 is GK16 Thm 5's scalar root, about 1 ms for 4,000 arms, so
  every arm is kept.
* **Successive Elimination** (EDMM02; the LS or EDMM radius): each item still in play is dropped once
  twice its radius is below its distance to the best mean; the answers until then, the best item's
  until the last drop, minus those they have (range as for intervals).
* **Fixed budget**: ``budget - t`` exactly.
* A learner that has stopped needs 0. For one that never stops by itself, one with items not answered
  yet, and a rule this module has no model of, :func:`forecast_or_reason` says why there is no forecast.

The cost on 4,000 items is a few tens of milliseconds per interval learner (three passes of a compiled
bisection over the items), which the service still caches per learner state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.lucb_rules import family_bound_s, family_time_term
from purebandits.base import Learner
from purebandits.bounds import glr_threshold
from purebandits.ranking import topk_fill

__all__ = ["Forecast", "answers_to_decision", "forecast_or_reason"]

#: the largest count a bisection looks at; an item that needs more is "never" (a tie at the boundary)
_MAX_COUNT = 1e15
#: relative precision of the counts found by bisection (the forecast is an estimate; 1 % is plenty)
_REL_PRECISION = 0.01
#: Bernoulli means are clipped to [p, 1 - p] for T* (a mean of exactly 0 or 1 has an infinite divergence)
_BERNOULLI_CLIP = 1e-4
_ASSUMPTION = "if the current estimates are right"


@dataclasses.dataclass(frozen=True)
class Forecast:
    """Answers a learner still needs to decide: a central value and a range, and how they were computed.

    Attributes
    ----------
    low, mid, high : int
        Answers still needed (``low <= mid <= high``); ``mid`` is the forecast on the current estimates.
    method : str
        How the numbers were computed and under which assumption ("if the current estimates are right").
    exact : bool
        True when the number is certain (a fixed budget's remaining answers, or 0 after a stop), not a forecast.
    """

    low: int
    mid: int
    high: int
    method: str
    exact: bool = False

    def as_dict(self) -> dict[str, int | str | bool]:
        """The fields as a JSON-able dict."""
        return dataclasses.asdict(self)


def answers_to_decision(learner: Learner) -> Forecast | None:
    """The answers ``learner`` still needs to decide, or None when there is no forecast.

    :func:`forecast_or_reason` gives the reason when there is none. Reads the state only.
    Raises ValueError if ``learner`` is not a :class:`~purebandits.base.Learner`.
    """
    out = forecast_or_reason(learner)
    return out if isinstance(out, Forecast) else None


def forecast_or_reason(learner: Learner) -> Forecast | str:
    """The :class:`Forecast` of ``learner``, or one sentence saying why there is none.

    Dispatch by what the learner is: a fixed-budget learner, one that never stops, an LUCB-family
    interval rule, Successive Elimination, a GLR rule (module docstring). Raises ValueError if ``learner``
    is not a Learner.
    """
    from purebandits.algorithms.elimination import SuccessiveElimination
    from purebandits.algorithms.lucb import _LUCBFamily
    from purebandits.algorithms.top_two import TopTwo
    from purebandits.algorithms.track_and_stop import TrackAndStop

    if not isinstance(learner, Learner):
        raise ValueError(f"a forecast needs a Learner, got {type(learner).__name__}")
    if not hasattr(learner, "n_arms_"):
        return "the learner is not started"
    cls = type(learner)
    if learner.done:
        return Forecast(0, 0, 0, "the learner has stopped: no more answers are needed", exact=True)
    if cls.tags.get("never_stops"):
        return "it never stops by itself (the owner stops it), so no number of answers brings a decision"
    if cls.kind == "fixed_budget":
        return _budget_forecast(learner)
    if learner.n_pulls == 0:
        return "no answers yet: the forecast starts from the first estimates"
    unanswered = int((learner.counts_ == 0).sum())
    if isinstance(learner, _LUCBFamily | TopTwo | TrackAndStop | SuccessiveElimination) and unanswered:
        return (f"{unanswered} of {learner.n_arms_} items have no answer yet: the rule is measured once every "
                "item has one")
    if isinstance(learner, _LUCBFamily):
        if getattr(learner, "stop", "bounds") == "kinf":
            return _kinf_forecast(learner)
        return _interval_forecast(learner)
    if isinstance(learner, TopTwo | TrackAndStop):
        return _glr_forecast(learner)
    if isinstance(learner, SuccessiveElimination):
        return _elimination_forecast(learner)
    return (f"no forecast for the stopping rule of {cls.__name__}: only the interval, successive elimination, GLR "
            "and fixed-budget rules have one")


# ------------------------------------------------------------------------------------------- fixed budget
def _budget_forecast(learner: Learner) -> Forecast | str:
    budget = getattr(learner, "budget", None)
    if not isinstance(budget, int | np.integer) or isinstance(budget, bool):
        return "a fixed-budget learner without an integer budget"
    left = max(int(budget) - learner.n_pulls, 0)
    return Forecast(left, left, left, f"the budget of {int(budget)} answers minus the {learner.n_pulls} answered "
                                      "(exact: the learner stops there)", exact=True)


# ------------------------------------------------------------------------------------------- interval stops
@njit(cache=True)
def _clears(code, bp, mean, m2, count, top, tterm, boundary):  # pragma: no cover - compiled
    """Whether the bound of an item with ``mean`` (mean square ``m2``) after ``count`` answers no longer reaches
    ``boundary``."""
    if top:
        lo, _ = family_bound_s(code, bp, mean, m2, count, True, tterm, 1)
        return lo > boundary
    _, hi = family_bound_s(code, bp, mean, m2, count, False, tterm, 2)
    return hi < boundary


@njit(cache=True)
def _counts_to_clear(code, bp, means, m2s, in_top, boundary, tterm, counts, rel):  # pragma: no cover - compiled
    """Per item, the smallest count (to ``rel``) at which its bound at its mean (and mean square, which only the
    K_inf bounds read) no longer reaches ``boundary``.

    An item already clear at its current count gets that count (it needs nothing more); one whose mean
    is on the wrong side of ``boundary`` (or on it) gets ``inf``. Doubling from the current count, then
    bisection: ``O(log(needed / count) + log(1 / rel))`` bound evaluations per item.
    """
    n = means.shape[0]
    out = np.empty(n)
    for i in range(n):
        m = means[i]
        q = m2s[i]
        top = in_top[i]
        start = max(float(counts[i]), 1.0)
        if _clears(code, bp, m, q, start, top, tterm, boundary):
            out[i] = start
            continue
        if (top and m <= boundary) or (not top and m >= boundary):
            out[i] = math.inf
            continue
        lo = start
        hi = 2.0 * start
        while hi < _MAX_COUNT and not _clears(code, bp, m, q, hi, top, tterm, boundary):
            lo = hi
            hi *= 2.0
        if hi >= _MAX_COUNT:
            out[i] = math.inf
            continue
        while hi - lo > max(1.0, rel * lo):
            mid = 0.5 * (lo + hi)
            if _clears(code, bp, m, q, mid, top, tterm, boundary):
                hi = mid
            else:
                lo = mid
        out[i] = math.ceil(hi)
    return out


def _standard_errors(learner: Learner) -> np.ndarray:
    """Each item's standard error of the mean: the sample standard deviation over sqrt(answers).

    An item whose answers all agree has a sample deviation of 0; it gets that of a 0/1 answer with its mean
    shrunk towards 1/2 as the Krichevsky-Trofimov estimate ``(sum + 1/2) / (count + 1)`` does, so a few
    identical answers still leave an uncertainty.
    """
    counts = np.maximum(learner.counts_, 1).astype(float)
    means = learner.sums_ / counts
    var = np.maximum(learner.sumsq_ / counts - means * means, 0.0) * counts / np.maximum(counts - 1.0, 1.0)
    kt = (learner.sums_ + 0.5) / (counts + 1.0)
    var = np.where(var > 0.0, var, np.clip(kt * (1.0 - kt), 0.0, 0.25))
    return np.sqrt(var / counts)


def _shifted_means(learner: Learner, means: np.ndarray, in_top: np.ndarray,
                   boundary: float) -> tuple[np.ndarray, np.ndarray]:
    """The means of the range's two ends: every mean moved one standard error away from ``boundary`` (the top
    items up, the others down: clearer gaps, the low end), and towards it by at most half its distance (the high
    end; a mean within one standard error of the boundary would otherwise ask for unboundedly many answers)."""
    se = _standard_errors(learner)
    away = np.where(in_top, 1.0, -1.0)
    dist = np.abs(means - boundary)
    low_means = means + away * se
    high_means = means - away * np.minimum(se, 0.5 * dist)
    if learner.tags.get("bounded_rewards"):
        low_means, high_means = np.clip(low_means, 0.0, 1.0), np.clip(high_means, 0.0, 1.0)
    return low_means, high_means


def _interval_sum(learner: Learner, means: np.ndarray, in_top: np.ndarray, boundary: float) -> float:
    """Answers still needed with the items' means at ``means`` (inf if an item can never clear)."""
    counts = learner.counts_
    c = np.maximum(counts, 1).astype(np.float64)
    # the items' spread kept as their means move (the K_inf bounds read the law: mean and mean square)
    m2s = means * means + np.maximum(learner.sumsq_ / c - (learner.sums_ / c) ** 2, 0.0)
    per_pull = (learner.rounds_ + 1.0) / max(learner.n_pulls, 1)  # rounds per answer so far (round-indexed bounds)
    remaining = 0.0
    for _ in range(4):  # the round term grows with the answers still needed: a short fixed-point iteration
        tterm = family_time_term(learner._code, learner._bparams, learner.rounds_ + 1.0 + per_pull * remaining)
        need = _counts_to_clear(learner._code, learner._bparams, means, m2s, in_top, boundary, tterm,
                               counts.astype(np.float64), _REL_PRECISION)
        new = float(np.maximum(need - counts, 0.0).sum())
        if not math.isfinite(new) or tterm == 0.0 or abs(new - remaining) <= _REL_PRECISION * max(new, 1.0):
            return new
        remaining = new
    return remaining


def _interval_forecast(learner: Learner) -> Forecast | str:
    k = learner.k_
    means = learner.means()
    in_top = np.zeros(learner.n_arms_, dtype=np.bool_)
    topk_fill(means, k, in_top)
    kth, next_ = float(means[in_top].min()), float(means[~in_top].max())
    if not kth > next_:
        return (f"the {_ordinal(k)} and {_ordinal(k + 1)} best estimates are equal ({kth:g}): if they stayed so, "
                "no number of answers would separate them")
    boundary = 0.5 * (kth + next_)
    mid = _interval_sum(learner, means, in_top, boundary)
    low_means, high_means = _shifted_means(learner, means, in_top, boundary)
    low = _interval_sum(learner, low_means, in_top, boundary)
    high = _interval_sum(learner, high_means, in_top, boundary)
    if not math.isfinite(mid):
        return "an item's estimate sits on the boundary of the top set: no number of answers would decide it"
    label = learner._bound_label() if hasattr(learner, "_bound_label") else "bounds"
    method = (f"for each item, the answers until its own interval ({label}) at its current mean stops reaching "
              f"the midpoint {boundary:.4g} between the {_ordinal(k)} and {_ordinal(k + 1)} best means, summed, "
              "minus the answers it has; range: every mean moved one standard error away from (low) or towards "
              f"(high, by at most half its distance) that midpoint; {_ASSUMPTION}")
    return _ordered(low, mid, high, method)


# ------------------------------------------------------------------------------------------- successive elimination
def _smallest_counts(clears: Callable[[np.ndarray], np.ndarray], start: np.ndarray) -> np.ndarray:
    """Per entry, the smallest count ``>= start`` (to :data:`_REL_PRECISION`) at which ``clears`` (vectorised,
    monotone in the count) holds; inf where it does not below :data:`_MAX_COUNT`. Doubling, then bisection."""
    lo = np.maximum(start.astype(np.float64), 1.0)
    hi = lo.copy()
    todo = ~clears(hi)
    while todo.any():
        lo = np.where(todo, hi, lo)
        hi = np.where(todo, 2.0 * hi, hi)
        todo &= hi < _MAX_COUNT
        todo &= ~clears(hi)
    hi = np.where(clears(hi), hi, np.inf)
    open_ = np.isfinite(hi) & (hi - lo > np.maximum(1.0, _REL_PRECISION * lo))
    while open_.any():
        mid = np.where(open_, 0.5 * (lo + hi), hi)
        ok = clears(mid)
        hi = np.where(open_ & ok, mid, hi)
        lo = np.where(open_ & ~ok, mid, lo)
        open_ &= hi - lo > np.maximum(1.0, _REL_PRECISION * lo)
    return np.ceil(hi)


def _elimination_sum(learner: Learner, means: np.ndarray, active: np.ndarray, best: int) -> float:
    """Answers until one active item is left: item a is dropped once ``2 radius(T) <= mu_best - mu_a`` (EDMM02's
    test with the learner's radius, every active item pulled once per round), the best one is pulled until the
    last drop."""
    from purebandits.bounds import edmm_radius, ls_radius
    from purebandits.stopping import LS_EPSILON

    n, sigma = learner.n_arms_, float(learner.sigma)
    others = active[active != best]
    gaps = means[best] - means[others]

    def radius(T: np.ndarray) -> np.ndarray:
        if learner.radius == "ls":
            return ls_radius(T, learner._d_ls, n, LS_EPSILON, sigma)
        return edmm_radius(T, n, float(learner.delta), float(learner.c), sigma)

    need = _smallest_counts(lambda T: 2.0 * radius(T) <= gaps, learner.counts_[others])
    if not np.isfinite(need).all():
        return math.inf
    counts = learner.counts_
    return float(np.maximum(need - counts[others], 0.0).sum() + max(need.max() - counts[best], 0.0))


def _elimination_forecast(learner: Learner) -> Forecast | str:
    active = np.asarray(learner.act_[: learner.n_act_], dtype=np.int64)
    means = learner.means()
    best = int(learner._recommend()[0])
    second = float(means[active[active != best]].max())
    if not means[best] > second:
        return "the two best estimates are equal: if they stayed so, no number of answers would decide"
    mid = _elimination_sum(learner, means, active, best)
    in_top = np.zeros(learner.n_arms_, dtype=np.bool_)
    in_top[best] = True
    low_means, high_means = _shifted_means(learner, means, in_top, 0.5 * (float(means[best]) + second))
    low = _elimination_sum(learner, low_means, active, best)
    high = _elimination_sum(learner, high_means, active, best)
    radius = "LIL stopping radius B(T)" if learner.radius == "ls" else "EDMM02 radius"
    method = (f"for each item still in play, the answers until twice its {radius} is below its distance to the best "
              "item's mean (then it is dropped), summed, plus the best item's answers until the last drop, minus "
              "the answers they have; range: every mean moved one standard error away from (low) or towards (high, "
              f"by at most half its distance) the midpoint between the two best means; {_ASSUMPTION}")
    return _ordered(low, mid, high, method)


# ------------------------------------------------------------------------------------------- GLR stops
def _glr_model(learner: Learner, means: np.ndarray) -> object:
    """The reward model of the learner's GLR statistic at ``means`` (Gaussian with its sigma, or Bernoulli)."""
    from purebandits.instances.rewards import Bernoulli, Gaussian

    if getattr(learner, "cost", "bernoulli") == "gaussian":
        return Gaussian(means, variance=float(learner.sigma) ** 2)
    return Bernoulli(np.clip(means, _BERNOULLI_CLIP, 1.0 - _BERNOULLI_CLIP))


def _glr_stop_time(t_star: float, n_arms: int, delta: float, threshold: str | Callable[[float], float]) -> float:
    """The smallest ``t' >= 1`` with ``t' >= T* beta(t', delta)`` (the plug-in stopping time), inf if T* is.

    ``threshold`` names a :func:`~purebandits.bounds.glr_threshold` or is ``beta(t)`` itself.
    ``t - T* beta(t)`` is negative at 1 (beta > 0) and increasing once ``beta'(t) < 1/T*``, which holds from
    ``t = T*`` on for these thresholds (beta' <= 1/t); bisection over whole answers between T* and a doubling
    upper end.
    """
    if not math.isfinite(t_star):
        return math.inf
    beta = threshold if callable(threshold) else (lambda t: float(glr_threshold(t, n_arms, delta, threshold)))

    def short(t: float) -> bool:
        return t < t_star * float(beta(t))

    lo = max(math.floor(t_star), 1)
    if not short(lo):
        return float(lo)
    hi = 2 * lo
    while short(hi):  # lo is short, hi is not: double, then bisect over whole answers
        lo, hi = hi, 2 * hi
        if hi > _MAX_COUNT * 1e3:
            return math.inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if short(mid):
            lo = mid
        else:
            hi = mid
    return float(hi)


def _glr_forecast(learner: Learner) -> Forecast | str:
    from purebandits.lower_bound import characteristic_time

    if getattr(learner, "stop", "glr") == "kinf":
        return _kinf_forecast(learner)
    threshold = str(getattr(learner, "threshold", ""))
    delta = float(learner.delta)
    n, t = learner.n_arms_, learner.n_pulls
    progress = learner.stopping_progress()
    try:
        beta_now = float(glr_threshold(t, n, delta, threshold))
    except ValueError:
        return f"no forecast for the GLR threshold {threshold!r} (known: practical, theory)"
    if progress is None or progress.threshold is None or not math.isclose(beta_now, progress.threshold,
                                                                          rel_tol=1e-9):
        return "the learner's GLR threshold is not the one this forecast models"
    means = learner.means()

    def remaining(mu: np.ndarray) -> float:
        return _glr_stop_time(characteristic_time(_glr_model(learner, mu)), n, delta, threshold) - t

    ends = _plug_in_range(learner, means, remaining)
    if isinstance(ends, str):
        return ends
    low, mid, high = ends
    method = (f"the plug-in stopping time t' = T*(means) x beta(t', delta) (GLR statistic against its {threshold} "
              f"threshold; T* of {'Gaussian' if getattr(learner, 'cost', '') == 'gaussian' else 'Bernoulli'} arms, "
              f"Garivier and Kaufmann 2016) minus the {t} answers so far; range: every mean moved one standard error "
              "away from (low) or towards (high, by at most half its distance) the midpoint between the two best "
              f"means; {_ASSUMPTION}")
    return _ordered(low, mid, high, method)


#: the K_inf forecast solves T*_Kinf's linear program three times: up to this many items (0.14 s each at 200)
KINF_FORECAST_MAX_ITEMS = 200


def _shift_categorical(P: np.ndarray, v: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Each row of ``P`` with its mean moved to ``target`` (as far as it can go) by moving mass between the lowest
    and the highest value: the smallest change of the distribution that moves its mean."""
    P = P.copy()
    span = float(v[-1] - v[0])
    move = (target - P @ v) / span
    up = np.clip(move, 0.0, P[:, 0])
    down = np.clip(-move, 0.0, P[:, -1])
    P[:, 0] += down - up
    P[:, -1] += up - down
    return P


def _kinf_bernoulli_forecast(learner: Learner) -> Forecast | str:
    """An upper estimate for the K_inf GLR stop where its T* (a linear program) is out of reach (over
    :data:`KINF_FORECAST_MAX_ITEMS` items, or k > 1): ``T*_Bern`` of the means, which is at least ``T*_Kinf`` (the
    K_inf statistic is at least the Bernoulli one of the means, :mod:`purebandits.kinf_glr`), with the largest
    threshold any pair can have at t' (:func:`~purebandits.glr_thresholds.kinf_kt_threshold`), minus t."""
    from purebandits.glr_thresholds import kinf_kt_threshold
    from purebandits.instances.rewards import Bernoulli
    from purebandits.lower_bound import characteristic_time

    n, t, delta, k = learner.n_arms_, learner.n_pulls, float(learner.delta), int(learner.k_)
    theory = getattr(learner, "threshold", "theory") == "theory"

    def beta(s: float) -> float:
        return kinf_kt_threshold(s, n, delta, k) if theory else float(glr_threshold(s, n, delta, "practical"))

    def remaining(mu: np.ndarray) -> float:
        t_star = characteristic_time(Bernoulli(np.clip(mu, _BERNOULLI_CLIP, 1.0 - _BERNOULLI_CLIP)), k)
        return _glr_stop_time(t_star, n, delta, beta) - t

    ends = _plug_in_range(learner, learner.means(), remaining, k)
    if isinstance(ends, str):
        return ends
    low, mid, high = ends
    method = (f"an upper estimate: the plug-in stopping time t' = T*_Bern x beta(t') of the Bernoulli model of the "
              f"means (at least T* of the ratings' own K_inf model, which the stop uses; its T* is solved exactly up "
              f"to {KINF_FORECAST_MAX_ITEMS} items at k = 1), with the largest pair threshold at t', minus the {t} "
              "answers so far; range: every mean moved one standard error away from (low) or towards (high, by at "
              f"most half its distance) the midpoint at the top-{k} boundary; {_ASSUMPTION}")
    return _ordered(low, mid, high, method)


def _kinf_forecast(learner: Learner) -> Forecast | str:
    """The plug-in stopping time of the K_inf GLR stop (``stop="kinf"``): ``t' = T*_Kinf(F_hat) beta(t')`` with, for
    the proven threshold, the largest pair threshold at the optimal proportions ``w* t'`` (every pair's statistic
    grows like ``t / T*`` there), minus t. ``F_hat`` are the add-1/2 (Krichevsky-Trofimov) estimates of each item's
    rating distribution; the range moves every mean one standard error as for the other rules, by moving mass
    between the lowest and highest rating."""
    from purebandits.glr_thresholds import kinf_kt_allocation_threshold
    from purebandits.instances.rewards import Categorical
    from purebandits.kinf_glr import label_counts_from_moments
    from purebandits.lower_bound import solve_characteristic_time

    n, t, delta = learner.n_arms_, learner.n_pulls, float(learner.delta)
    k = int(learner.k_)
    if n > KINF_FORECAST_MAX_ITEMS or k > 1:
        return _kinf_bernoulli_forecast(learner)
    v = np.asarray(learner.support, dtype=np.float64)
    C = label_counts_from_moments(learner.counts_, learner.sums_, learner.sumsq_, v) + 0.5
    P = C / C.sum(axis=1, keepdims=True)
    theory = learner.threshold == "theory"

    def remaining(Q: np.ndarray) -> float:
        sol = solve_characteristic_time(Categorical(Q, v), 1, rtol=1e-3)
        if not math.isfinite(sol.T_star):
            return math.inf
        a = int(np.argmax(Q @ v))
        if theory:
            def beta(s: float) -> float:
                return kinf_kt_allocation_threshold(s, sol.weights, a, n, delta)
        else:
            def beta(s: float) -> float:
                return float(glr_threshold(s, n, delta, "practical"))
        return _glr_stop_time(sol.T_star, n, delta, beta) - t

    ends = _plug_in_range(learner, P @ v, lambda m: remaining(_shift_categorical(P, v, m)))
    if isinstance(ends, str):
        return ends
    low, mid, high = ends
    thr = ("each pair's proven Krichevsky-Trofimov threshold at the optimal proportions" if theory
           else "the practical threshold log((log t + 1)/delta)")
    method = (f"the plug-in stopping time t' = T*_Kinf x beta(t') of the K_inf GLR stop ({thr}; T* of the items' "
              f"rating distributions, add-1/2 estimates) minus the {t} answers so far; range: every mean moved one "
              "standard error away from (low) or towards (high, by at most half its distance) the midpoint between "
              f"the two best means; {_ASSUMPTION}")
    return _ordered(low, mid, high, method)


def _plug_in_range(learner: Learner, means: np.ndarray, remaining: Callable[[np.ndarray], float],
                   k: int = 1) -> tuple[float, float, float] | str:
    """(low, mid, high) answers still needed by a plug-in at ``means`` and at the range's two ends (means moved
    one standard error from the midpoint between the k-th and (k+1)-th best, :func:`_shifted_means`), or why there is
    none."""
    mid = remaining(means)
    if not math.isfinite(mid):
        return "the estimates at the top-k boundary are equal: if they stayed so, no number of answers would decide"
    best = np.zeros(means.size, dtype=np.bool_)
    topk_fill(means, k, best)
    boundary = 0.5 * (float(means[best].min()) + float(means[~best].max()))
    low_means, high_means = _shifted_means(learner, means, best, boundary)
    return remaining(low_means), mid, remaining(high_means)


# ------------------------------------------------------------------------------------------- helpers
def _ordered(low: float, mid: float, high: float, method: str) -> Forecast:
    """A Forecast of whole answers (at least 1 before a stop) with ``low <= mid <= high`` (the ends' estimates
    are monotone in the gaps, so this only settles rounding and the bisection's tolerance)."""
    def whole(x: float) -> int:
        return max(1, int(math.ceil(min(x, _MAX_COUNT))))

    m = whole(mid)
    return Forecast(min(whole(low), m), m, max(whole(high), m), method)


def _ordinal(i: int) -> str:
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"
