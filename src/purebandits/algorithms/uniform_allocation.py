"""Uniform allocation (UNI): the fixed-budget baseline of NSAR Sec. IV and OptMAI Sec. 6."""

from __future__ import annotations

from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.rounds import (
    ACCEPTED,
    REJECTED,
    _RoundLearner,
    arm_means,
    round_pulls,
    top_random_ties,
)
from purebandits.instances.rewards import RewardStream

__all__ = ["UniformAllocation"]


@njit(cache=True)
def _uni_open(todo, order, budget):  # pragma: no cover - compiled
    """One round: ``floor(T/n)`` pulls per arm, the remainder one each to arms 0, 1, ..."""
    n = todo.shape[0]
    q, rem = budget // n, budget % n
    for i in range(n):
        order[i] = i
        todo[i] = q + (1 if i < rem else 0)
    return n, budget, budget


@njit(cache=True)
def _uni_close(status, counts, sums, k, rng):  # pragma: no cover - compiled
    """Accept the k best means (ties at the boundary drawn at random)."""
    keep = top_random_ties(arm_means(counts, sums, False), k, rng)
    for i in range(status.shape[0]):
        status[i] = ACCEPTED if keep[i] else REJECTED
    return True


@njit(cache=True)
def _uni_kernel(counts, sums, sumsq, status, todo, order, k, m, ptr, left, max_pulls, srng,
                kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    total = 0
    for i in range(counts.shape[0]):
        total += counts[i]
    ptr, left, total = round_pulls(counts, sums, sumsq, todo, order, m, ptr, left, total, max_pulls,
                                   kind, a, b, cdf, values, block, pos, rng)
    finished = False
    if left == 0:
        finished = _uni_close(status, counts, sums, k, srng)
    return finished, total, ptr, left


class UniformAllocation(_RoundLearner):
    """UNI: split the budget equally over the arms and return the k best empirical means.

    Each arm gets ``floor(T/n)`` pulls and the ``T mod n`` left over go one each to the arms
    with the lowest indices, so exactly T pulls are used; pulls are handed out round-robin.
    Ties among the means at the k-th place are broken at random (with few Bernoulli samples
    ties are common, and a lower-index rule would favour arms by their position).

    Restricted asks (``ask(n, allowed=...)``): the next allowed pull of the schedule in its
    round-robin order; when none of the remaining pulls is allowed, an extra pull of the allowed
    arm with the fewest pulls, on top of the budget (``extra_``;
    :class:`~purebandits.algorithms.kernels.rounds._RoundLearner`). Every arm still gets its
    ``floor(T/n)`` pulls (the extras only add samples), so the top-k means are from at least the
    unrestricted numbers of samples and any bound for UNI at budget T holds with at most twice
    its constant.

    Parameters
    ----------
    k : int, default=1
        Number of arms to return.
    budget : int
        Total pulls T (>= n_arms).

    References
    ----------
    S. Shahrampour, V. Tarokh, NSAR, 2017, Sec. IV ("UNI"); Y. Zhou, X. Chen, J. Li,
    ICML 2014, Sec. 6 ("uniform sampling").
    """

    name = "uniform_allocation"
    paper = "Uniform allocation baseline (Shahrampour & Tarokh 2017 Sec. IV; Zhou, Chen, Li, ICML 2014 Sec. 6)"

    def __init__(self, k: int = 1, budget: int | None = None) -> None:
        self.k = k
        self.budget = budget

    def _open(self) -> None:
        self.m_, self.left_, self.planned_ = (int(x) for x in _uni_open(self.todo_, self.order_, int(self.budget)))

    def _close(self) -> bool:
        return bool(_uni_close(self.status_, self.counts_, self.sums_, int(self.k), self.rng_))

    def _kernel(self, stream: RewardStream, max_pulls: int) -> tuple:
        finished, total, ptr, left = _uni_kernel(self.counts_, self.sums_, self.sumsq_, self.status_, self.todo_,
                                                 self.order_, int(self.k), self.m_, self.ptr_, self.left_,
                                                 max_pulls, self.rng_, *stream.args())
        return finished, total, self.round_, self.m_, ptr, left, self.planned_
