"""OptMAI (Zhou, Chen, Li, ICML 2014): fixed-budget top-K for small aggregate regret."""

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
    arm_means,
    ranked,
    round_pulls,
    top_random_ties,
)
from purebandits.base import check_param
from purebandits.instances.rewards import RewardStream

__all__ = ["OptMAI", "PAPER_BETA"]

#: the paper's round ratio beta = e^0.2 * 3/4 (ZCL14 Alg. 1)
PAPER_BETA = math.exp(0.2) * 0.75


@njit(cache=True)
def _optmai_open(status, todo, order, counts, sums, c0, s0, rnd, beta, qprime, budget, planned):  # pragma: no cover
    """Round r = rnd - 1: ``floor(beta^r (1-beta) Q')`` pulls, ``floor`` of it per arm.

    The remainder goes one each to the active arms with the fewest samples so far (ties to
    the lower index); the round is clipped so that the pulls planned never exceed the budget.
    """
    m = 0
    for i in range(status.shape[0]):
        todo[i] = 0
        c0[i] = counts[i]
        s0[i] = sums[i]
        if status[i] == ACTIVE:
            order[m] = i
            m += 1
    total = int(math.floor(beta ** (rnd - 1) * (1.0 - beta) * qprime))
    total = max(0, min(total, budget - planned))
    q = total // m
    rem = total - q * m
    for j in range(m):
        todo[order[j]] = q
    if rem > 0:
        cnt = np.empty(m, dtype=np.int64)
        for j in range(m):
            cnt[j] = counts[order[j]]
        by = np.argsort(cnt, kind="mergesort")
        for j in range(rem):
            todo[order[by[j]]] += 1
    return m, total, planned + total


@njit(cache=True)
def _optmai_close(status, counts, sums, c0, s0, K, flip, reuse, rng):  # pragma: no cover - compiled
    """Quartile-Elimination while |S| >= 4K, Accept-Reject after (ZCL14 Algs. 2 and 3)."""
    n = status.shape[0]
    act = np.empty(n, dtype=np.int64)
    s = 0
    n_t = 0
    for i in range(n):
        if status[i] == ACTIVE:
            act[s] = i
            s += 1
        elif status[i] == ACCEPTED:
            n_t += 1
    act = act[:s]
    cum = arm_means(counts, sums, flip)
    mu = np.empty(s)
    for j in range(s):
        i = act[j]
        dc = counts[i] - c0[i]
        if reuse or dc == 0:  # no sample this round (tiny budget): all samples
            mu[j] = cum[i]
        else:
            ds = sums[i] - s0[i]
            mu[j] = (dc - ds) / dc if flip else ds / dc
    if s >= 4 * K:  # QE: drop the quarter with the lowest means (ties at random)
        keep = top_random_ties(mu, s - s // 4, rng)
        for j in range(s):
            if not keep[j]:
                status[act[j]] = REJECTED
        return False
    kp = K - n_t
    if kp >= s:  # every remaining arm is needed
        for j in range(s):
            status[act[j]] = ACCEPTED
        return True
    srt = np.argsort(-mu, kind="mergesort")
    th_k = mu[srt[kp - 1]]
    th_k1 = mu[srt[kp]]
    gap = np.empty(s)
    for j in range(s):
        gap[j] = max(mu[j] - th_k1, th_k - mu[j])
    removed = 0
    while n_t < K and 4 * (s - removed) > 3 * s:
        j = argmax_random_tie(gap, rng)
        gap[j] = -math.inf
        removed += 1
        # Alg. 3 line 6 accepts when mu >= theta_(K'+1); an arm tied with theta_(K'+1) but
        # strictly below theta_(K') is an empirical (K'+1)-th arm and is rejected
        if mu[j] > th_k1 or mu[j] >= th_k:
            status[act[j]] = ACCEPTED
            n_t += 1
        else:
            status[act[j]] = REJECTED
    left = s - removed
    if n_t == K or K - n_t >= left:
        fill = n_t < K
        for j in range(s):
            if status[act[j]] == ACTIVE:
                status[act[j]] = ACCEPTED if fill else REJECTED
        return True
    return False


@njit(cache=True)
def _optmai_kernel(counts, sums, sumsq, status, todo, order, c0, s0, K, flip, reuse, beta, qprime, budget,
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
        if _optmai_close(status, counts, sums, c0, s0, K, flip, reuse, srng):
            finished = True
            break
        rnd += 1
        m, left, planned = _optmai_open(status, todo, order, counts, sums, c0, s0, rnd, beta, qprime, budget,
                                        planned)
        ptr = 0
    return finished, total, rnd, m, ptr, left, planned


class OptMAI(_RoundLearner):
    """OptMAI: Quartile-Elimination then Accept-Reject rounds with geometric budgets.

    Round r (from 0) spends ``beta^r (1-beta) Q'`` pulls spread evenly over the surviving set
    S. While ``|S| >= 4K`` a QE round drops the quarter of S with the lowest means; after
    that, AR rounds remove ``ceil(|S|/4)`` arms with the largest empirical gaps (eq. 2),
    accepting those above the boundary, until K arms are accepted (ZCL14 Algs. 1-3). It
    targets the aggregate regret (eq. 1), not exact identification.

    Practical version (ZCL14 Sec. 6), the default:

    - ``budget_correction``: run with ``Q' = Q/(1 - beta^(ln n/ln(4/3)))`` so the pulls used
      roughly equal Q; rounds are also clipped so the budget is never exceeded;
    - ``reuse``: means use every sample of an arm, including earlier rounds';
    - ``beta = 0.8`` (the paper's suggestion; 0.9 is better for small K).

    Choices where the paper is silent (ALGORITHMS.md 12, "Uncertain"):

    - integer rounds: ``floor`` of the round budget, ``floor`` of it per arm, and the
      remainder one each to the arms with the fewest samples (ties to the lower index);
    - QE removes exactly ``floor(|S|/4)`` arms ("discard a quarter of arms with the minimum
      empirical mean", Sec. 3), ties at the boundary at random, so ties cannot stall it;
    - AR: argmax-gap ties at random; an arm tied with the (K'+1)-th mean but strictly below
      the K'-th is rejected (Alg. 3's ``>=`` otherwise); when ``K' >= |S|`` every remaining
      arm is accepted at once (no pulls are spent to confirm it);
    - complement (Thm 4.5): for ``2K > n`` it selects the ``n - K`` arms with the best
      ``1 - reward`` means and returns the other K, exactly as a run of ``k = n - K`` fed
      ``1 - x`` would (at ``2K = n`` both problems have the same size, so nothing is flipped).

    Restricted asks (``ask(n, allowed=...)``): the round's next allowed pull; when none of the
    round's remaining pulls is allowed, an extra pull of the allowed active arm with the fewest
    pulls, off the schedule and on top of the budget (``extra_``; rule and argument in
    :class:`~purebandits.algorithms.kernels.rounds._RoundLearner`). Its answer joins the arm's mean
    (all samples with ``reuse``, the round's otherwise) and its count, which decides where a
    later round's remainder goes (the fewest samples). Every active arm still gets its share of
    each round, so Thm 4.3's per-arm Hoeffding bounds, hence its regret bound, hold with the
    same Q (at most twice the constant in front of each exponential).

    Parameters
    ----------
    k : int, default=1
        Number of arms to select (K).
    budget : int
        Total pulls Q (>= n_arms); never exceeded.
    beta : float or "paper", default=0.8
        Round ratio in (0, 1); ``"paper"`` is ``e^0.2 * 3/4 = 0.916`` (Alg. 1, the value of
        the analysis, which needs beta in (3/4, 1)).
    budget_correction : bool, default=True
        Use Q' in place of Q (Sec. 6).
    reuse : bool, default=True
        Means over all samples (Sec. 6); False uses each round's samples only (Algs. 2-3).
    complement : bool, default=True
        Solve the complement problem when ``2K > n`` (Thm 4.5).

    References
    ----------
    Y. Zhou, X. Chen, J. Li. Optimal PAC Multiple Arm Identification with Applications to
    Crowdsourcing. ICML 2014.
    """

    name = "optmai"
    paper = "Zhou, Chen, Li, ICML 2014 (Algs. 1-3, Sec. 6 practical version)"
    invalid_params = [("budget", None), ("beta", 1.0), ("beta", 0.0), ("beta", "fast"),
                      ("reuse", 2), ("budget_correction", "yes"), ("complement", None)]

    def __init__(self, k: int = 1, budget: int | None = None, beta: float | str = 0.8,
                 budget_correction: bool = True, reuse: bool = True, complement: bool = True) -> None:
        self.k = k
        self.budget = budget
        self.beta = beta
        self.budget_correction = budget_correction
        self.reuse = reuse
        self.complement = complement

    def _validate(self) -> None:
        super()._validate()
        if self.beta != "paper":
            if isinstance(self.beta, str):
                raise ValueError(f"beta must be a number in (0, 1) or 'paper', got {self.beta!r}")
            check_param("beta", self.beta, low=0.0, high=1.0, low_open=True, high_open=True)
        for flag in ("budget_correction", "reuse", "complement"):
            check_param(flag, getattr(self, flag), allowed=(True, False))

    def _resolve(self) -> None:
        n, k = self.n_arms_, int(self.k)
        self._beta = PAPER_BETA if self.beta == "paper" else float(self.beta)
        self._flip = bool(self.complement) and 2 * k > n
        self._K = n - k if self._flip else k
        q = float(self.budget)
        if self.budget_correction:
            q /= 1.0 - self._beta ** (math.log(n) / math.log(4.0 / 3.0))
        self._qprime = q

    def _start_rounds(self) -> None:
        self.c0_ = np.zeros(self.n_arms_, dtype=np.int64)
        self.s0_ = np.zeros(self.n_arms_, dtype=np.float64)

    def _open(self) -> None:
        self.m_, self.left_, self.planned_ = (int(x) for x in _optmai_open(
            self.status_, self.todo_, self.order_, self.counts_, self.sums_, self.c0_, self.s0_, self.round_,
            self._beta, self._qprime, int(self.budget), self.planned_))

    def _close(self) -> bool:
        return bool(_optmai_close(self.status_, self.counts_, self.sums_, self.c0_, self.s0_, self._K, self._flip,
                                  bool(self.reuse), self.rng_))

    def _kernel(self, stream: RewardStream, max_pulls: int) -> tuple:
        return _optmai_kernel(self.counts_, self.sums_, self.sumsq_, self.status_, self.todo_, self.order_,
                              self.c0_, self.s0_, self._K, self._flip, bool(self.reuse), self._beta, self._qprime,
                              int(self.budget), self.round_, self.m_, self.ptr_, self.left_, self.planned_,
                              max_pulls, self.rng_, *stream.args())

    # ------------------------------------------------------------------ outputs
    def _internal_set(self) -> np.ndarray:
        """The K arms of the internal (possibly complemented) problem: T, then the best of S."""
        mu = arm_means(self.counts_, self.sums_, self._flip)
        acc = np.flatnonzero(self.status_ == ACCEPTED)
        act = np.flatnonzero(self.status_ == ACTIVE)
        rest = ranked(act, mu)[: self._K - acc.size]
        if len(rest) < self._K - acc.size:
            rest += ranked(np.flatnonzero(self.status_ == REJECTED), mu)[: self._K - acc.size - len(rest)]
        return np.array(list(acc) + rest, dtype=np.int64)

    def _recommend(self) -> list[int]:
        chosen = self._internal_set()
        if self._flip:
            chosen = np.setdiff1d(np.arange(self.n_arms_), chosen)
        return ranked(chosen, self.means())

    def _final(self) -> list[int]:
        return self._recommend()
