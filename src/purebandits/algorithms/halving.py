"""Sequential Halving (Karnin, Koren, Somekh, ICML 2013), with a top-k variant."""

from __future__ import annotations

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.rounds import (
    ACCEPTED,
    ACTIVE,
    REJECTED,
    _RoundLearner,
    budget_clip,
    round_pulls,
    top_random_ties,
)
from purebandits.instances.rewards import RewardStream

__all__ = ["SequentialHalving"]


def halving_rounds(n: int, k: int = 1) -> int:
    """Number of rounds ``ceil(log2(n/k))`` (``ceil(log2 n)`` for the best arm)."""
    r, s = 0, n
    while s > k:
        s = max(k, (s + 1) // 2)
        r += 1
    return r


@njit(cache=True)
def _sh_open(status, todo, order, counts, sums, c0, s0, n_rounds, budget, planned):  # pragma: no cover
    """Round r: ``floor(T/(|S_r| R))`` pulls per active arm; remember the round's start."""
    m = 0
    for i in range(status.shape[0]):
        todo[i] = 0
        c0[i] = counts[i]
        s0[i] = sums[i]
        if status[i] == ACTIVE:
            order[m] = i
            m += 1
    inc = budget_clip(budget // (m * n_rounds), m, budget, planned)
    for j in range(m):
        todo[order[j]] = inc
    return m, inc * m, planned + inc * m


@njit(cache=True)
def _sh_close(status, counts, sums, c0, s0, k, rng):  # pragma: no cover - compiled
    """Keep the ``max(k, ceil(|S|/2))`` best round means (ties at random); True at k left."""
    n = status.shape[0]
    act = np.empty(n, dtype=np.int64)
    na = 0
    for i in range(n):
        if status[i] == ACTIVE:
            act[na] = i
            na += 1
    act = act[:na]
    mu = np.zeros(na)
    for j in range(na):
        i = act[j]
        dc = counts[i] - c0[i]
        if dc > 0:
            mu[j] = (sums[i] - s0[i]) / dc
        elif counts[i] > 0:  # no sample this round (tiny budget): fall back to all samples
            mu[j] = sums[i] / counts[i]
    keep = max(k, (na + 1) // 2)
    mask = top_random_ties(mu, keep, rng)
    for j in range(na):
        if not mask[j]:
            status[act[j]] = REJECTED
    if keep == k:
        for j in range(na):
            if mask[j]:
                status[act[j]] = ACCEPTED
        return True
    return False


@njit(cache=True)
def _sh_kernel(counts, sums, sumsq, status, todo, order, c0, s0, k, n_rounds, budget,
               rnd, m, ptr, left, planned, max_pulls, srng,
               kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    total = 0
    for i in range(counts.shape[0]):
        total += counts[i]
    finished = False
    while True:
        ptr, left, total = round_pulls(counts, sums, sumsq, todo, order, m, ptr, left, total, max_pulls,
                                       kind, a, b, cdf, values, block, pos, rng)
        if left > 0:
            break
        if _sh_close(status, counts, sums, c0, s0, k, srng):
            finished = True
            break
        rnd += 1
        m, left, planned = _sh_open(status, todo, order, counts, sums, c0, s0, n_rounds, budget, planned)
        ptr = 0
    return finished, total, rnd, m, ptr, left, planned


class SequentialHalving(_RoundLearner):
    """Sequential Halving: R rounds with equal budget, keep the better half of each round.

    Round r pulls every arm of S_r ``floor(T/(|S_r| R))`` times and keeps the
    ``ceil(|S_r|/2)`` arms with the best means over **that round's** samples (KKS13 Alg. 1),
    ties at random. For k > 1 it keeps ``max(k, ceil(|S_r|/2))`` and stops at k arms, with
    ``R = ceil(log2(n/k))`` rounds (the usual top-k variant; at k = 1, R = ceil(log2 n)).
    If a budget is so small that an arm gets no pull in a round, its mean over all samples is
    used instead.

    Restricted asks (``ask(n, allowed=...)``): the round's next allowed pull; when none of the
    round's remaining pulls is allowed, an extra pull of the allowed active arm with the fewest
    pulls, off the schedule and on top of the budget (``extra_``; the rule and the argument are
    :class:`~purebandits.algorithms.kernels.rounds._RoundLearner`'s). An extra answered during a round
    joins that round's mean (samples since the round opened), one answered later the next
    round's. Every active arm still gets its ``floor(T/(|S_r| R))`` pulls in each round, so
    KKS13's bound ``3 log2(n) exp(-T/(8 H2 log2 n))`` holds with the same T and at most twice
    the constant (per-arm Hoeffding from at least that many samples, the count random).

    Parameters
    ----------
    k : int, default=1
        Number of arms to return.
    budget : int
        Total pulls T (>= n_arms); never exceeded.

    References
    ----------
    Z. Karnin, T. Koren, O. Somekh. Almost Optimal Exploration in Multi-Armed Bandits.
    ICML 2013 (Sequential Halving, Thm 4.1).
    """

    name = "sequential_halving"
    paper = "Karnin, Koren, Somekh, ICML 2013 (Sequential Halving)"

    def __init__(self, k: int = 1, budget: int | None = None) -> None:
        self.k = k
        self.budget = budget

    def _resolve(self) -> None:
        self._rounds = halving_rounds(self.n_arms_, int(self.k))

    def _start_rounds(self) -> None:
        self.c0_ = np.zeros(self.n_arms_, dtype=np.int64)
        self.s0_ = np.zeros(self.n_arms_, dtype=np.float64)

    def _open(self) -> None:
        self.m_, self.left_, self.planned_ = (int(x) for x in _sh_open(
            self.status_, self.todo_, self.order_, self.counts_, self.sums_, self.c0_, self.s0_,
            self._rounds, int(self.budget), self.planned_))

    def _close(self) -> bool:
        return bool(_sh_close(self.status_, self.counts_, self.sums_, self.c0_, self.s0_, int(self.k), self.rng_))

    def _kernel(self, stream: RewardStream, max_pulls: int) -> tuple:
        return _sh_kernel(self.counts_, self.sums_, self.sumsq_, self.status_, self.todo_, self.order_, self.c0_,
                          self.s0_, int(self.k), self._rounds, int(self.budget), self.round_, self.m_, self.ptr_,
                          self.left_, self.planned_, max_pulls, self.rng_, *stream.args())



