"""The samplers that ran the New Yorker caption contest, as learners that never stop.

NEXT (Jamieson et al.; the contest's cardinal ratings 2015-2023) ran a batched, delayed UCB and a
KL-UCB variant (``nextml/NEXT: apps/CardinalBanditsPureExploration/algs/LilUCB.py`` and
``KLUCB.py``): a priority list of the arms sorted by index, recomputed on about one answer in ten,
handed out in order to the participants who ask in between. The system that replaced it in 2024
(Zhang et al., "Humor in AI: Massive Scale Crowd-Sourced Preferences and Benchmarks for Cartoon
Captioning", NeurIPS 2024 Datasets and Benchmarks, App. D) pulled ``argmax mu_hat + sqrt(2 ln(4 N^2)
/ N)``, sending a batch of captions per request. Neither stops: the contest ran until its budget of
ratings (the week) was spent, so each learner's ``done`` stays False and ``recommend()`` is the
``k`` best empirical means at any time, as :class:`~purebandits.algorithms.random_sampling.RandomSampling`.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import kl_lower, kl_upper, kl_upper_s
from purebandits.heaps import heap_build, heap_update
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.stopping import never_stops_progress

__all__ = ["NextUCB", "NextKLUCB", "ContestUCB2024"]


# --------------------------------------------------------------------------- the indices
@njit(cache=True)
def next_ucb_index(s: float, c: float, delta: float, R: float) -> float:
    """NEXT's LilUCB.py index of an arm with ``c >= 1`` answers summing to ``s``:
    ``mu_hat + sqrt(2 R^2 log(4 T^2 / delta) / T)`` (T = c)."""
    return s / c + math.sqrt(2.0 * R * R * math.log(4.0 * c * c / delta) / c)


@njit(cache=True)
def next_kl_level(c: float, delta: float) -> float:
    """The KL level of NEXT's KLUCB.py: ``log(2 T^2 / delta) / T`` (T = c >= 1 answers)."""
    return math.log(2.0 * c * c / delta) / c


@njit(cache=True)
def next_kl_index(s: float, c: float, delta: float) -> float:
    """NEXT's KLUCB.py index: ``sup{q >= mu_hat : d(mu_hat, q) <= log(2 T^2/delta)/T}`` (Bernoulli KL,
    mu_hat clipped to [0, 1]; :func:`purebandits.bounds.kl_upper_s`)."""
    return kl_upper_s(min(max(s / c, 0.0), 1.0), next_kl_level(c, delta))


@njit(cache=True)
def ucb2024_index(s: float, c: float) -> float:
    """The 2024 system's index (Zhang et al. 2024, App. D): ``mu_hat + sqrt(2 ln(4 N^2) / N)``; +inf at N = 0."""
    if c <= 0.0:
        return math.inf
    return s / c + math.sqrt(2.0 * math.log(4.0 * c * c) / c)


@njit(cache=True)
def _next_neg(s, c, delta, R, kl):  # pragma: no cover - compiled
    """Minus the arm's NEXT index (-inf for an arm with no answer: its index is +inf)."""
    if c == 0.0:
        return -math.inf
    if kl:
        return -next_kl_index(s, c, delta)
    return -next_ucb_index(s, c, delta, R)


@njit(cache=True)
def next_negs(sums, counts, delta, R, kl):  # pragma: no cover - compiled
    """Minus every arm's NEXT index (the cache :func:`next_refresh` keeps up to date)."""
    n = counts.shape[0]
    neg = np.empty(n)
    for i in range(n):
        neg[i] = _next_neg(sums[i], float(counts[i]), delta, R, kl)
    return neg


@njit(cache=True)
def next_refresh(order, lastc, sums, counts, neg, delta, R, kl, rng):  # pragma: no cover - compiled
    """Recompute NEXT's priority list in place: the arms by decreasing index, ties in a uniformly random order.

    NEXT sorted all n indices with ``numpy.lexsort((randn(n), -UCB))``. An index depends only on its
    arm's answers, so only the arms answered since the last list (``counts != lastc``, at most
    ``refresh`` of them) get a new index (``neg`` = minus the indices, a cache); they are sorted and
    merged into the others, which are still in order; then every run of equal indices is shuffled
    (Fisher-Yates with ``rng``). The same distribution as NEXT's sort (each tie group uniformly
    permuted, the rest by index) in O(n + m log m) instead of O(n log n); the result is a function of
    the learner's state and ``rng``, so a replay or a reloaded learner gives the same list.
    """
    n = order.shape[0]
    changed = np.zeros(n, dtype=np.bool_)
    chg = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if counts[i] != lastc[i]:
            neg[i] = _next_neg(sums[i], float(counts[i]), delta, R, kl)
            lastc[i] = counts[i]
            changed[i] = True
            chg[m] = i
            m += 1
    if m > 0:
        vals = np.empty(m)
        for j in range(m):
            vals[j] = neg[chg[j]]
        srt = np.argsort(vals, kind="mergesort")  # chg ascends: ties by arm
        out = np.empty(n, dtype=np.int64)
        p = 0  # next unchanged position in order
        q = 0  # next changed arm in srt
        for w in range(n):
            while p < n and changed[order[p]]:
                p += 1
            if p < n and (q >= m or neg[order[p]] <= vals[srt[q]]):
                out[w] = order[p]
                p += 1
            else:
                out[w] = chg[srt[q]]
                q += 1
        for w in range(n):
            order[w] = out[w]
    i = 0
    while i < n:
        v = neg[order[i]]
        j = i + 1
        while j < n and neg[order[j]] == v:
            j += 1
        for t in range(j - i - 1, 0, -1):  # Fisher-Yates over order[i:j]
            # floor(U (t+1)), U on the 2^-53 grid: off uniform by < (t+1) 2^-53; 6x faster than Generator.integers
            # in numba (7 against 47 ns), and at 7,500 captions nearly every arm is in a tie run
            u = int(rng.random() * (t + 1))
            x = order[i + t]
            order[i + t] = order[i + u]
            order[i + u] = x
        i = j


# --------------------------------------------------------------------------- NEXT
class _IndexIntervals(Learner):
    """The intervals of a learner whose index has its own two-sided bounds (``_bounds`` of some arms): NEXT's
    samplers and the 2024 system's. Unpulled arms: -inf, +inf."""

    def _bounds(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """The index's own two-sided bounds per arm."""
        self._require_started()
        return self._bounds(np.arange(self.n_arms_))

    def intervals_of(self, arms) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - ArrayLike
        """:meth:`intervals` of ``arms`` only (the same values; O(len(arms)))."""
        self._require_started()
        return self._bounds(np.asarray(arms, dtype=np.int64))


class _NextBase(_IndexIntervals):
    """NEXT's batched, delayed index sampler (shared by :class:`NextUCB` and :class:`NextKLUCB`)."""

    kind = "anytime"
    #: whether the index is the KL one
    _kl = False

    def __init__(self, k: int = 1, *, delta: float = 0.05, refresh: int = 10) -> None:
        self.k = k
        self.delta = delta
        self.refresh = refresh

    def _validate(self) -> None:
        check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("refresh", self.refresh, low=1, integer=True)

    def _R(self) -> float:
        return 0.0

    def _start(self) -> None:
        self.order_ = self.rng_.permutation(self.n_arms_).astype(np.int64)  # NEXT's initExp
        self.cursor_ = 0  # asks since the list was computed (NEXT's priority_list_cnt)
        self.since_ = 0  # answers since the list was computed
        self.lastc_ = np.zeros(self.n_arms_, dtype=np.int64)  # each arm's answers when the list was computed

    def _restore(self) -> None:
        # minus the indices at the counts of lastc_ (a cache of next_refresh: each a function of its arm's answers)
        self._neg = next_negs(self.sums_, self.lastc_, float(self.delta), self._R(), self._kl)

    def _recompute(self) -> None:
        next_refresh(self.order_, self.lastc_, self.sums_, self.counts_, self._neg, float(self.delta), self._R(),
                     self._kl, self.rng_)
        self.cursor_ = 0
        self.since_ = 0

    def _ask_one(self) -> int:
        arm = int(self.order_[self.cursor_ % self.n_arms_])
        self.cursor_ += 1
        return arm

    def _ask_allowed(self, mask: np.ndarray) -> int:
        # NEXT's getQuery: from position (cnt - 1) mod n, walk down the list past the items the
        # participant may not rate; past its end, a uniform random item (NEXT: of the whole list)
        q = self.cursor_ % self.n_arms_
        self.cursor_ += 1
        rest = mask[self.order_[q:]]
        if rest.any():
            return int(self.order_[q + int(rest.argmax())])
        idx = np.flatnonzero(mask)
        return int(idx[self.rng_.integers(idx.size)])

    def _on_tell(self, arm: int, reward: float) -> None:
        self.since_ += 1
        if self.since_ >= self.refresh:
            self._recompute()

    def _stopping_progress(self) -> StoppingProgress:
        """No stopping rule (NEXT ran until the contest's week was over): a reason, no margin."""
        return never_stops_progress(bool(self.done_), f"NEXT's batched UCB ({self.name}): never stops",
                                    "this learner never stops by itself; the owner stops it")

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Sequential ask(1)/tell from ``stream`` until ``max_pulls`` total pulls (it never stops).

        Pending pulls do not enter NEXT's index, so they are allowed and stay pending. The tie-break
        draws come from the learner's generator in the order of :meth:`_recompute`."""
        self._require_started()
        st = np.array([self.cursor_, self.since_], dtype=np.int64)
        t = _next_kernel(self.counts_, self.sums_, self.sumsq_, self.order_, st, int(self.refresh),
                         float(self.delta), self._R(), self._kl, self.lastc_, self._neg, int(max_pulls), self.rng_,
                         *stream.args())
        self.t_ = int(t)
        self.cursor_, self.since_ = int(st[0]), int(st[1])


class NextUCB(_NextBase):
    """NEXT's batched, delayed UCB: the caption contest's "LilUCB" (which is not lil'UCB).

    Source: ``nextml/NEXT``, ``apps/CardinalBanditsPureExploration/algs/LilUCB.py`` (K. Jamieson,
    2015), the algorithm that chose the captions of the New Yorker contests' cardinal ratings.

    Index (known, from the source): for an arm with T >= 1 answers,
    ``mu_hat + sqrt(2 R^2 log(4 T^2 / delta) / T)`` (:func:`next_ucb_index`); an arm with no answer
    has index +inf, so unpulled arms come first. T counts answers only (NEXT folded an answer into
    T when the list was recomputed; pending pulls never entered it).

    Batching (known): NEXT keeps a *priority list* (the arms by decreasing index, ties at random)
    and a counter of asks since it was computed. The i-th ask after a recomputation gets the arm at
    position ``(i - 1) mod n``, so concurrent participants walk down the list and get distinct arms,
    as NEXT's queue did. Between recomputations the list is stale: answers change the means but not
    the order. Before the first recomputation the list is a uniform random permutation (NEXT's
    ``initExp``).

    Known versus assumed:

    * Refresh period: NEXT recomputed the list in a background job started with probability 0.1
      after each answer (``numpy.random.rand() < .1``, "about 1/10 of trials"). Here the list is
      recomputed after every ``refresh`` answers (default 10: the same mean period, made
      deterministic so that runs are easy to compare; the job's latency is not modelled).
    * Ties: NEXT sorted with ``numpy.lexsort((randn(n), -UCB))``, a uniformly random order of tied
      arms at each recomputation; here each run of tied arms is shuffled with ``rng_`` (the same
      distribution, other draws; :func:`next_refresh`).
    * delta: NEXT's ``failure_probability`` of the experiment; 0.05 in NEXT's cartoon-contest
      example (``examples/cartoon_cardinal/init.yaml``). Assumed to be what the contest ran with.
    * R: with labelled ratings NEXT set ``R = max label - min label`` (``myApp.py``: 2 for the
      contest's labels 1, 2, 3), not the sub-Gaussian scale 1/2 its documentation states for [0, 1]
      rewards. Rewards here are in [0, 1] (unfunny 0, somewhat funny 0.5, funny 1), the contest's
      labels rescaled by 1/2, so the index NEXT ran is this one with ``R = 1`` (the default).
      ``R = 0.5`` gives the sub-Gaussian-scale reading.
    * Restricted asks (``ask(n, allowed=...)``): NEXT's ``getQuery`` with the participant's
      ``do_not_ask_list``: from the counter's position, walk down the list to the first allowed arm;
      past the end, a uniformly random arm (NEXT drew it from the whole list, so it could repeat an
      item; here from the allowed arms). The counter moves by one per ask, as in NEXT.
    * Cancelled pulls: NEXT had none (an unanswered query was simply never answered); a cancel
      changes nothing but ``pending_``.

    Parameters
    ----------
    k : int, default=1
        Size of the recommended set: the ``k`` largest empirical means (ties to the lower index).
    delta : float, default=0.05
        NEXT's ``failure_probability`` in the index.
    R : float, default=1.0
        The scale in the index (see above).
    refresh : int, default=10
        Answers between two recomputations of the priority list ("about one answer in ten").

    Notes
    -----
    Never stops (``done`` stays False): drive it with a budget. A recomputation costs O(n log n)
    in NEXT; here O(n + m log m) (the m <= ``refresh`` arms answered since the last one are re-indexed
    and merged in, tie runs shuffled), once per ``refresh`` answers; an ask or an answer costs O(1)
    otherwise (a restricted ask: the walk down the list). :meth:`intervals` are
    ``mu_hat +/- sqrt(2 R^2 log(4 T^2/delta)/T)``, the bound the index is the upper end of.

    Attributes
    ----------
    order_ : ndarray of int64
        The priority list. ``cursor_``: asks since it was computed. ``since_``: answers since then.
        ``lastc_``: each arm's answers when it was computed.

    References
    ----------
    nextml/NEXT, CardinalBanditsPureExploration (LilUCB.py, myApp.py); K. Jamieson, L. Jain, C.
    Fernandez, N. Glattard, R. Nowak, NEXT: A System for Real-World Development, Evaluation, and
    Application of Active Learning, NIPS 2015.
    """

    name = "next_ucb"
    tags = {"top_k": True, "never_stops": True}
    paper = ("NEXT's batched delayed UCB of the caption contest (nextml/NEXT LilUCB.py: "
             "mu + sqrt(2 R^2 log(4 T^2/delta)/T), list recomputed every `refresh` answers)")
    invalid_params = [("R", 0.0), ("refresh", 0)]

    def __init__(self, k: int = 1, *, delta: float = 0.05, R: float = 1.0, refresh: int = 10) -> None:
        super().__init__(k, delta=delta, refresh=refresh)
        self.R = R

    def _validate(self) -> None:
        super()._validate()
        check_param("R", self.R, low=0.0, low_open=True)

    def _R(self) -> float:
        return float(self.R)

    def _bounds(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = self.counts_[idx].astype(np.float64)
        pulled = c > 0
        cs = np.where(pulled, c, 1.0)
        m = np.where(pulled, self.sums_[idx] / cs, 0.0)
        R = float(self.R)
        rad = np.sqrt(2.0 * R * R * np.log(4.0 * cs * cs / float(self.delta)) / cs)
        return np.where(pulled, m - rad, -np.inf), np.where(pulled, m + rad, np.inf)


class NextKLUCB(_NextBase):
    """NEXT's batched, delayed KL-UCB (``nextml/NEXT``, ``apps/CardinalBanditsPureExploration/algs/KLUCB.py``).

    The same priority list, batching, refresh, ties and restricted asks as :class:`NextUCB`, with the
    index of NEXT's KLUCB.py (known, from the source): for an arm with T >= 1 answers,
    ``sup{q in [mu_hat, 1] : d(mu_hat, q) <= log(2 T^2 / delta) / T}``, d the Bernoulli KL divergence
    (:func:`next_kl_index`); unpulled arms +inf, first. Note the level: ``log(2 T^2/delta)``, not the
    ``log(4 T^2/delta)`` of the sub-Gaussian index and not the standard KL-UCB exploration function
    ``log t + c log log t`` (the source has both the 4 T^2 line commented out and this one).

    Known versus assumed:

    * Rewards: NEXT mapped the labels 1, 2, 3 to ``(x - 1)/2`` in [0, 1]; rewards here are already
      in [0, 1] (the mean is clipped to [0, 1]), which is the same map.
    * Inversion: NEXT bisected on ``[mu_hat, 1]`` to 1e-6 and returned the midpoint; here
      :func:`purebandits.bounds.kl_upper_s` (the library's inversion, exact to rounding, the
      conservative end). The two differ by at most 1e-6, which only reorders arms within 1e-6.
    * Refresh period, ties, delta (0.05) and restricted asks: as :class:`NextUCB`.

    Parameters
    ----------
    k : int, default=1
        Size of the recommended set (the ``k`` largest empirical means).
    delta : float, default=0.05
        NEXT's ``failure_probability`` in the level.
    refresh : int, default=10
        Answers between two recomputations of the priority list.

    Notes
    -----
    Needs rewards in [0, 1]. :meth:`intervals` are the KL bounds at the same level
    (``kl_lower``, ``kl_upper``). A recomputation inverts the KL bound of the arms answered since the
    last one only (an index depends on its arm's answers alone) and sorts, once per ``refresh`` answers.

    References
    ----------
    nextml/NEXT, CardinalBanditsPureExploration (KLUCB.py); E. Kaufmann, S. Kalyanakrishnan,
    Information Complexity in Bandit Subset Selection, COLT 2013 (cited by KLUCB.py).
    """

    name = "next_kl_ucb"
    tags = {"top_k": True, "never_stops": True, "bounded_rewards": True}
    paper = ("NEXT's batched delayed KL-UCB of the caption contest (nextml/NEXT KLUCB.py: KL level "
             "log(2 T^2/delta)/T, list recomputed every `refresh` answers)")
    invalid_params = [("refresh", 0)]
    _kl = True

    def _bounds(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = self.counts_[idx].astype(np.float64)
        pulled = c > 0
        cs = np.where(pulled, c, 1.0)
        m = np.clip(np.where(pulled, self.sums_[idx] / cs, 0.0), 0.0, 1.0)
        level = np.log(2.0 * cs * cs / float(self.delta)) / cs
        lo = np.asarray(kl_lower(m, level), dtype=np.float64)
        hi = np.asarray(kl_upper(m, level), dtype=np.float64)
        return np.where(pulled, lo, -np.inf), np.where(pulled, hi, np.inf)


@njit(cache=True)
def _next_kernel(counts, sums, sumsq, order, st, refresh, delta, R, kl, lastc, neg, max_pulls, own_rng,
                 kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """NEXT's sampler, sequential, until ``max_pulls``; ``st`` = [cursor, since] (updated). Returns the total pulls."""
    counts, sums, sumsq, order = borrow(counts), borrow(sums), borrow(sumsq), borrow(order)
    lastc, neg = borrow(lastc), borrow(neg)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    cursor = st[0]
    since = st[1]
    while total < max_pulls:
        arm = order[cursor % n]
        cursor += 1
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        since += 1
        if since >= refresh:
            next_refresh(order, lastc, sums, counts, neg, delta, R, kl, own_rng)  # as _recompute
            cursor = 0
            since = 0
    st[0] = cursor
    st[1] = since
    return total


# --------------------------------------------------------------------------- the 2024 system
@njit(cache=True)
def _ucb2024_keys(sums, counts):  # pragma: no cover - compiled
    n = counts.shape[0]
    key = np.empty(n)
    for i in range(n):
        key[i] = ucb2024_index(sums[i], float(counts[i]))
    return key


@njit(cache=True)
def _ucb2024_rekey(heap, where, key, arm, value):  # pragma: no cover - compiled
    heap_update(heap, where, key, arm, value)


class ContestUCB2024(_IndexIntervals):
    """The 2024 caption-contest system's UCB: ``argmax mu_hat + sqrt(2 ln(4 N^2) / N)``, never stopping.

    Source: Zhang et al., "Humor in AI: Massive Scale Crowd-Sourced Preferences and Benchmarks for
    Cartoon Captioning", NeurIPS 2024 Datasets and Benchmarks, App. D: the system that replaced NEXT
    for the New Yorker contest samples the caption with the largest index
    ``mu_hat + sqrt(2 ln(4 N^2) / N)`` (N: the caption's ratings; :func:`ucb2024_index`), with no
    stopping rule, and sends a batch of captions per request.

    Known: the index, that it never stops, that a request gets a batch. Assumed (not stated in the
    paper):

    * Refreshed at every answer: the index uses every answer so far (N = answered ratings; pending
      pulls do not enter it, as the index is of ratings). It depends on the arm's own (mu, N) only,
      so an answer changes one key: the keys sit in an indexed max-heap
      (:mod:`purebandits.heaps`), O(log n) per answer.
    * Unpulled captions first (index +inf at N = 0; the formula is undefined there); ties to the
      lower index.
    * Batches: the asks since the last answer walk down the current order, so ``ask(n)`` returns
      the top ``n`` distinct arms (the batch of one request) and concurrent requests between two
      answers get the next ones (how the system served concurrent requests is not described; this
      is NEXT's queue behaviour with a list refreshed at every answer). A walk to rank r costs
      O(r log r).
    * Restricted asks (``ask(n, allowed=...)``): the first allowed arm at or below the walk's
      position; if none is, the best allowed arm.
    * Cancelled pulls change nothing but ``pending_`` (the index ignores pending pulls).

    Parameters
    ----------
    k : int, default=1
        Size of the recommended set (the ``k`` largest empirical means, ties to the lower index).
    delta : float or None, default=None
        Used only by :meth:`intervals`: ``mu_hat +/- sqrt(2 ln(4 N^2 / delta) / N)``, NEXT's bound with
        R = 1. The index is that bound's upper end at delta = 1 (None: the intervals too), so it is
        never a parameter of the sampling.

    Notes
    -----
    :meth:`intervals` are ``mu_hat +/- sqrt(2 ln(4 N^2 / delta)/N)`` (delta = 1 when None). The compiled
    driver (:meth:`run_compiled`) keeps the same heap; sequentially every ask follows an answer, so it
    pulls the heap's top.

    Attributes
    ----------
    cursor_ : int
        Asks since the last answer (the rank the next ask starts from).
    """

    name = "contest_ucb_2024"
    kind = "anytime"
    tags = {"top_k": True, "never_stops": True}
    paper = ("The 2024 caption-contest system (Zhang et al., NeurIPS 2024 D&B, App. D): "
             "argmax mu + sqrt(2 ln(4 N^2)/N), batches per request, no stopping rule")

    def __init__(self, k: int = 1, *, delta: float | None = None) -> None:
        self.k = k
        self.delta = delta

    def _validate(self) -> None:
        check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        if self.delta is not None:
            check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)

    def _start(self) -> None:
        self.cursor_ = 0

    # the heap over the indices is a cache (never part of the state): rebuilt in O(n) when it does
    # not match the answers (start, a load, a state changed from outside)
    _kt = -1
    _kc: np.ndarray | None = None

    def _restore(self) -> None:
        self._kt = -1

    def _cache(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._kt != self.t_ or self._kc is not self.counts_:
            self._key = _ucb2024_keys(self.sums_, self.counts_)
            self._heap, self._where = heap_build(self._key)
            self._kt = self.t_
            self._kc = self.counts_
        return self._key, self._heap, self._where

    def _ranked(self):  # noqa: ANN202 - a generator of arms
        """The arms by decreasing index (ties to the lower arm): a best-first walk of the heap."""
        key, heap, _ = self._cache()
        n = heap.shape[0]
        a0 = int(heap[0])
        cand = [(-float(key[a0]), a0, 0)]
        while cand:
            _, arm, p = heapq.heappop(cand)
            yield arm
            for ch in (2 * p + 1, 2 * p + 2):
                if ch < n:
                    a = int(heap[ch])
                    heapq.heappush(cand, (-float(key[a]), a, ch))

    def _ask_one(self) -> int:
        r = self.cursor_ % self.n_arms_
        self.cursor_ += 1
        if r == 0:
            return int(self._cache()[1][0])
        for i, arm in enumerate(self._ranked()):
            if i == r:
                return arm
        raise AssertionError("unreachable: r < n_arms")

    def _ask_allowed(self, mask: np.ndarray) -> int:
        r = self.cursor_ % self.n_arms_
        self.cursor_ += 1
        left = int(mask.sum())
        best = -1
        for i, arm in enumerate(self._ranked()):
            if mask[arm]:
                if i >= r:
                    return arm
                if best < 0:
                    best = arm
                left -= 1
                if left == 0:
                    break
        return best

    def _on_tell(self, arm: int, reward: float) -> None:
        self.cursor_ = 0
        if self._kt == self.t_ - 1 and self._kc is self.counts_:
            _ucb2024_rekey(self._heap, self._where, self._key, arm,
                           ucb2024_index(float(self.sums_[arm]), float(self.counts_[arm])))
            self._kt = self.t_

    def _stopping_progress(self) -> StoppingProgress:
        """No stopping rule (the 2024 system ran for the contest's week): a reason, no margin."""
        return never_stops_progress(bool(self.done_), "the 2024 contest UCB: never stops",
                                    "this learner never stops by itself; the owner stops it")

    def _bounds(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = self.counts_[idx].astype(np.float64)
        pulled = c > 0
        cs = np.where(pulled, c, 1.0)
        m = np.where(pulled, self.sums_[idx] / cs, 0.0)
        d = 1.0 if self.delta is None else float(self.delta)
        rad = np.sqrt(2.0 * np.log(4.0 * cs * cs / d) / cs)
        return np.where(pulled, m - rad, -np.inf), np.where(pulled, m + rad, np.inf)


    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_kc", None)  # an identity check against counts_: meaningless in a copy
        state["_kt"] = -1
        return state

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Sequential ask(1)/tell from ``stream`` until ``max_pulls`` total pulls (it never stops)."""
        self._require_started()
        if self.cursor_ != 0 and self.t_ < max_pulls:  # asks since the last answer: this ask walks on
            arm = self._ask_free(1)[0]
            self.tell(arm, stream.draw(arm))
        if self.t_ >= max_pulls:
            return
        key, heap, where = self._cache()
        self.t_ = int(_ucb2024_kernel(self.counts_, self.sums_, self.sumsq_, key, heap, where, int(max_pulls),
                                      *stream.args()))
        self._kt = self.t_


@njit(cache=True)
def _ucb2024_kernel(counts, sums, sumsq, key, heap, where, max_pulls,
                    kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Pull the heap's top, answer, re-key it; until ``max_pulls``. Returns the total pulls."""
    counts, sums, sumsq = borrow(counts), borrow(sums), borrow(sumsq)
    key, heap, where = borrow(key), borrow(heap), borrow(where)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    while total < max_pulls:
        arm = heap[0]
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        heap_update(heap, where, key, arm, ucb2024_index(sums[arm], float(counts[arm])))
    return total
