"""Successive Rejects, SAR, NSE and NSAR: one family of fixed-budget learners, one schedule.

All four pull every active arm up to ``n_r`` total samples in phase r and then deactivate one
arm. The schedule is :func:`nsar_schedule` (NSE's ``C_p`` / ``n_r``; p = 1 is the
Successive Rejects schedule with ``logbar(n) = 1/2 + sum_{i=2}^n 1/i``):

- reject-only (SR, NSE): drop the arm with the lowest mean;
- accept/reject (SAR, NSAR): drop the arm with the largest empirical gap, accepting it if it
  is in the empirical top ``l_r`` (slots left), rejecting it otherwise.

SAR is NSAR with p = 1 (the same code path, so the two coincide on the same seed).

Restricted asks (``ask(n, allowed=...)``), the same for all four: the phase's next allowed pull;
when none of the phase's remaining pulls is allowed, an extra pull of the allowed active arm with
the fewest pulls, off the schedule and on top of the budget (``extra_``), whose answer joins the
arm's cumulative mean (:class:`~purebandits.algorithms.kernels.rounds._RoundLearner` gives the rule and
the argument). Every active arm still has at least ``n_r`` samples after phase r, so each error
bound of ALGORITHMS.md 10.1-10.5 holds with the same T and at most twice its constant.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.rounds import (
    ACCEPTED,
    ACTIVE,
    REJECTED,
    _RoundLearner,
    argmax_random_tie,
    budget_clip,
    round_pulls,
)
from purebandits.base import check_param
from purebandits.instances.rewards import RewardStream

__all__ = ["SuccessiveRejects", "SuccessiveAcceptsRejects", "NSE", "NSAR", "nsar_schedule"]


def nsar_schedule(n: int, budget: int, p: float = 1.0, k: int = 1, accept: bool = True) -> np.ndarray:
    """Cumulative per-arm pulls ``n_r`` after phase r (``n_0 = 0``) of the SR/NSE family.

    ``n_r = ceil((T - n) / (C (n + 1 - r)^p))`` (ABM10 for p = 1; Shahrampour, Noshad and
    Tarokh, NSE, for p > 0). With accepts and rejects (SAR/NSAR) there are n - 1 phases and
    ``C = C_p = 2^-p + sum_{r=2}^n r^-p``. Reject-only with k > 1 stops after n - k phases
    (k survivors), and we use ``C = k (k+1)^-p + sum_{j=k+1}^n j^-p``, the constant for which
    the same accounting (``sum_r n_r + k n_{n-k} <= T``) holds; at k = 1 it is C_p.
    In both cases the total ``sum_r |A_r| (n_r - n_{r-1}) <= T``: each ceil adds at most one
    pull per phase, which the ``n`` in ``T - n`` pays for.
    """
    if accept or k == 1:
        phases = n - 1
        c = 2.0 ** (-p) + sum(float(j) ** (-p) for j in range(2, n + 1))
    else:
        phases = n - k
        c = k * float(k + 1) ** (-p) + sum(float(j) ** (-p) for j in range(k + 1, n + 1))
    out = np.zeros(phases + 1, dtype=np.int64)
    for r in range(1, phases + 1):
        out[r] = math.ceil((budget - n) / (c * float(n + 1 - r) ** p))
    return out


@njit(cache=True)
def _sr_open(status, todo, order, nr, rnd, budget, planned):  # pragma: no cover - compiled
    """Phase ``rnd``: every active arm gets ``n_rnd - n_{rnd-1}`` more pulls (budget-clipped)."""
    m = 0
    for i in range(status.shape[0]):
        todo[i] = 0
        if status[i] == ACTIVE:
            order[m] = i
            m += 1
    inc = 0
    if rnd < nr.shape[0]:
        inc = budget_clip(nr[rnd] - nr[rnd - 1], m, budget, planned)
    for j in range(m):
        todo[order[j]] = inc
    return m, inc * m, planned + inc * m


@njit(cache=True)
def _sr_close(status, counts, sums, k, accept, rng):  # pragma: no cover - compiled
    """Deactivate one arm (SAR gap rule, or the lowest mean); True when the answer is fixed."""
    n = status.shape[0]
    act = np.empty(n, dtype=np.int64)
    na = 0
    n_acc = 0
    for i in range(n):
        if status[i] == ACTIVE:
            act[na] = i
            na += 1
        elif status[i] == ACCEPTED:
            n_acc += 1
    act = act[:na]
    mu = np.zeros(na)
    for j in range(na):
        if counts[act[j]] > 0:
            mu[j] = sums[act[j]] / counts[act[j]]
    slots = k - n_acc
    if accept:
        srt = np.argsort(-mu, kind="mergesort")  # decreasing mean, ties to the lower index
        gaps = np.empty(na)
        for r in range(na):
            if r < slots:
                gaps[r] = mu[srt[r]] - mu[srt[slots]] if slots < na else math.inf
            else:
                gaps[r] = mu[srt[slots - 1]] - mu[srt[r]] if slots > 0 else math.inf
        r = argmax_random_tie(gaps, rng)
        arm = act[srt[r]]
        if r < slots:
            status[arm] = ACCEPTED
            slots -= 1
        else:
            status[arm] = REJECTED
    else:
        neg = -mu
        arm = act[argmax_random_tie(neg, rng)]
        status[arm] = REJECTED
    na -= 1
    if slots == 0 or na == slots:
        for i in range(n):
            if status[i] == ACTIVE:
                status[i] = ACCEPTED if slots > 0 else REJECTED
        return True
    return False


@njit(cache=True)
def _sr_kernel(counts, sums, sumsq, status, todo, order, nr, k, accept, budget,
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
        if _sr_close(status, counts, sums, k, accept, srng):
            finished = True
            break
        rnd += 1
        m, left, planned = _sr_open(status, todo, order, nr, rnd, budget, planned)
        ptr = 0
    return finished, total, rnd, m, ptr, left, planned


class _SRFamily(_RoundLearner):
    """Shared machinery; subclasses fix ``_accept`` and whether ``p`` is a parameter."""

    _accept = True

    def _p(self) -> float:
        return float(getattr(self, "p", 1.0))

    def _validate(self) -> None:
        super()._validate()
        if hasattr(self, "p"):
            check_param("p", self.p, low=0.0, low_open=True, high=10.0)

    def _resolve(self) -> None:
        self._nr = nsar_schedule(self.n_arms_, int(self.budget), self._p(), int(self.k), self._accept)

    def _open(self) -> None:
        self.m_, self.left_, self.planned_ = (int(x) for x in _sr_open(
            self.status_, self.todo_, self.order_, self._nr, self.round_, int(self.budget), self.planned_))

    def _close(self) -> bool:
        return bool(_sr_close(self.status_, self.counts_, self.sums_, int(self.k), self._accept, self.rng_))

    def _kernel(self, stream: RewardStream, max_pulls: int) -> tuple:
        return _sr_kernel(self.counts_, self.sums_, self.sumsq_, self.status_, self.todo_, self.order_, self._nr,
                          int(self.k), self._accept, int(self.budget), self.round_, self.m_, self.ptr_,
                          self.left_, self.planned_, max_pulls, self.rng_, *stream.args())


class SuccessiveRejects(_SRFamily):
    """Successive Rejects: n - 1 phases on the logbar schedule, drop the lowest mean each phase.

    Phase r pulls every active arm up to ``n_r = ceil((T-n)/(logbar(n)(n+1-r)))`` samples
    (cumulative; ABM10 Sec. 3) and rejects the arm with the lowest mean (ties at random). With
    k > 1 it rejects n - k arms and returns the survivors, on the schedule of
    :func:`nsar_schedule` with its k-adjusted constant (our generalisation; at k = 1 it is SR).

    Restricted asks: the phase's next allowed pull, else an extra pull of an allowed active arm
    on top of the budget (module docstring); ABM10's bound holds with the same T and at most
    twice its constant.

    Parameters
    ----------
    k : int, default=1
        Number of arms to return.
    budget : int
        Total pulls T (>= n_arms); never exceeded.

    References
    ----------
    J.-Y. Audibert, S. Bubeck, R. Munos. Best Arm Identification in Multi-Armed Bandits.
    COLT 2010.
    """

    name = "successive_rejects"
    paper = "Audibert, Bubeck, Munos, COLT 2010 (SR, Sec. 3)"
    _accept = False

    def __init__(self, k: int = 1, budget: int | None = None) -> None:
        self.k = k
        self.budget = budget


class SuccessiveAcceptsRejects(_SRFamily):
    """SAR (top-k): SR's schedule, deactivate the arm with the largest empirical gap.

    After phase r (active arms sorted by decreasing mean, l slots left) the gap of the arm at
    rank i is ``mu_(i) - mu_(l+1)`` for i <= l and ``mu_(l) - mu_(i)`` otherwise; the arm with
    the largest gap (ties at random) is accepted if its rank is <= l, rejected otherwise
    (Bubeck, Wang, Viswanathan 2013; the rank test is NSAR Fig. 1's ``mu_index > mu_(m_r+1)``
    read with ties by rank). It stops as soon as the answer is fixed (no slot left, or as many
    slots as active arms), which changes no output and only saves pulls.

    Restricted asks: the phase's next allowed pull, else an extra pull of an allowed active arm
    on top of the budget (module docstring); BWV13's bound holds with the same T and at most
    twice its constant.

    Parameters
    ----------
    k : int, default=1
        Number of arms to return (m in the paper).
    budget : int
        Total pulls T (>= n_arms); never exceeded.

    References
    ----------
    S. Bubeck, T. Wang, N. Viswanathan. Multiple Identifications in Multi-Armed Bandits.
    ICML 2013.
    """

    name = "sar"
    paper = "Bubeck, Wang, Viswanathan, ICML 2013 (SAR)"

    def __init__(self, k: int = 1, budget: int | None = None) -> None:
        self.k = k
        self.budget = budget


class NSE(_SRFamily):
    """Nonlinear Sequential Elimination: SR with the schedule ``n_r ~ (T-n)/(C_p (n-r+1)^p)``.

    ``p < 1`` spends more early (many competitive arms), ``1 < p <= 2`` more late (few);
    p = 1 is Successive Rejects. k > 1 as in :class:`SuccessiveRejects`.

    Restricted asks: the phase's next allowed pull, else an extra pull of an allowed active arm
    on top of the budget (module docstring); the bound of Table I holds with the same T and at most
    twice its constant.

    Parameters
    ----------
    k : int, default=1
    budget : int
        Total pulls T (>= n_arms); never exceeded.
    p : float, default=1.0
        Schedule exponent, in (0, 10].

    References
    ----------
    S. Shahrampour, M. Noshad, V. Tarokh. On Sequential Elimination Algorithms for Best-Arm
    Identification in Multi-Armed Bandits. IEEE TSP 2017 (Table I).
    """

    name = "nse"
    invalid_params = [("budget", None), ("p", 0.0), ("p", -1.0)]
    paper = "Shahrampour, Noshad, Tarokh, IEEE TSP 2017 (NSE)"
    _accept = False

    def __init__(self, k: int = 1, budget: int | None = None, p: float = 1.0) -> None:
        self.k = k
        self.budget = budget
        self.p = p


class NSAR(_SRFamily):
    """NSAR: SAR's accept/reject rule on NSE's nonlinear schedule (p = 1 is SAR exactly).

    Restricted asks: the phase's next allowed pull, else an extra pull of an allowed active arm
    on top of the budget (module docstring); Prop. 2's bound holds with the same T and at most
    twice its constant.

    Parameters
    ----------
    k : int, default=1
        Number of arms to return (M in the paper).
    budget : int
        Total pulls T (>= n_arms); never exceeded.
    p : float, default=1.0
        Schedule exponent; the paper's experiments use p in {0.7, 0.85, 1.1, 1.2, 1.3}.

    References
    ----------
    S. Shahrampour, V. Tarokh. Nonlinear Sequential Accepts and Rejects for Identification of
    Top Arms in Stochastic Bandits. 2017 (Fig. 1, Prop. 2).
    """

    name = "nsar"
    invalid_params = [("budget", None), ("p", 0.0), ("p", -1.0)]
    paper = "Shahrampour, Tarokh 2017 (NSAR, Fig. 1)"

    def __init__(self, k: int = 1, budget: int | None = None, p: float = 1.0) -> None:
        self.k = k
        self.budget = budget
        self.p = p

