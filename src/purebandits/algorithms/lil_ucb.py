"""lil'UCB (Jamieson, Malloy, Nowak, Bubeck, COLT 2014), faithful and heuristic presets."""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

from purebandits.base import Learner, check_param
from purebandits.bounds import c_epsilon, lil_stopping_arm, lil_ucb_index_s, ls_delta
from purebandits.heaps import heap_build, heap_top, heap_update
from purebandits.instances.rewards import stream_draw
from purebandits.stopping import LS_EPSILON, ls_tracker, ls_tracker_update

__all__ = ["LilUCB"]


class LilUCB(Learner):
    """lil'UCB: sample the arm with the largest LIL index, stop when one arm dominates the pulls.

    Index (JMNB14 Fig. 1): ``mu_hat_i + (1+beta) U(T_i, delta')`` with the finite-LIL radius
    ``U`` (ALGORITHMS.md 0.1) and sigma = 1/2. Stop once some arm has
    ``T_i >= 1 + lam * sum_{j != i} T_j`` and output the most-pulled arm; with ``ls=True``
    also stop by the LIL stopping rule LS (JMNB14 Sec. 5) and output its arm.

    Parameters
    ----------
    delta : float, default=0.1
        Target error probability nu of the whole procedure.
    preset : {"heuristic", "faithful"}, default="heuristic"
        ``"faithful"`` (JMNB14 Sec. 3/5): eps = 0.01, beta = 1, lam = ((2+beta)/beta)^2 = 9,
        delta' = (sqrt(1+nu)-1)^2/(4 c_eps) (from inverting the Theorem 2 probability
        1 - 4 sqrt(c_eps delta') - 4 c_eps delta'; nu/2 in place of nu with LS).
        ``"heuristic"`` (JMNB14 Sec. 5, no guarantee): eps = 0, beta = 1/2,
        lam = 1 + 10/n, delta' = nu/5.
    epsilon, beta, lam : float or None
        Override the preset's value.
    ls : bool, default=False
        Also stop with LS; the error budget is then split nu/2 + nu/2.
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards (1/2 for rewards in [0, 1] or N(mu, 1/4)).

    Notes
    -----
    With eps = 0 the index is ``+inf`` at T = 1 (log log 1 is undefined), so every arm is
    pulled twice first (banditpylib's reading). A pending pull counts in ``T_i`` of the index
    (not in the mean), so concurrent participants are spread over arms. Per pull the
    learner does O(log n) work: only the pulled arm's index changes, kept in a heap
    (JMNB14 Sec. 5 footnote).

    References
    ----------
    K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
    for Multi-Armed Bandits. COLT 2014, arXiv:1312.7308.
    """

    name = "lil_ucb"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Jamieson, Malloy, Nowak, Bubeck, COLT 2014 (Fig. 1, Thm 2, Sec. 5)"

    def __init__(
        self,
        delta: float = 0.1,
        *,
        preset: str = "heuristic",
        epsilon: float | None = None,
        beta: float | None = None,
        lam: float | None = None,
        ls: bool = False,
        sigma: float = 0.5,
    ) -> None:
        self.delta = delta
        self.preset = preset
        self.epsilon = epsilon
        self.beta = beta
        self.lam = lam
        self.ls = ls
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("preset", self.preset, allowed=("heuristic", "faithful"))
        if self.epsilon is not None:
            check_param("epsilon", self.epsilon, low=0.0, high=1.0, high_open=True)
        if self.beta is not None:
            check_param("beta", self.beta, low=0.0, low_open=True)
        if self.lam is not None:
            check_param("lam", self.lam, low=0.0, low_open=True)
        check_param("ls", self.ls, allowed=(True, False))
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        n, nu = self.n_arms_, float(self.delta)
        if self.preset == "faithful":
            eps, beta = 0.01, 1.0
            lam = ((2 + beta) / beta) ** 2
        else:
            eps, beta, lam = 0.0, 0.5, 1.0 + 10.0 / n
        eps = eps if self.epsilon is None else float(self.epsilon)
        beta = beta if self.beta is None else float(self.beta)
        lam = lam if self.lam is None else float(self.lam)
        if self.preset == "faithful":
            if eps <= 0:
                raise ValueError("epsilon must be > 0 with preset='faithful' (c_eps is infinite at 0)")
            target = nu / 2 if self.ls else nu
            delta_int = (math.sqrt(1 + target) - 1) ** 2 / (4 * c_epsilon(eps))
        else:
            delta_int = nu / 5
        self._eps, self._beta, self._lam, self._delta_int = eps, beta, lam, delta_int
        self._d_ls = ls_delta(nu / 2, LS_EPSILON)  # used only when ls=True

    def _index(self, arm: int) -> float:
        t = int(self.counts_[arm]) + int(self.pending_[arm])
        if t == 0:
            return math.inf
        mean = self.sums_[arm] / self.counts_[arm] if self.counts_[arm] > 0 else 0.0
        return lil_ucb_index_s(mean, float(t), self._delta_int, self._eps, self._beta, float(self.sigma))

    def _restore(self) -> None:
        n = self.n_arms_
        self._n_zero = int((self.counts_ == 0).sum())
        self._ver = [0] * n
        self._heap = [(-self._index(a), a, 0) for a in range(n)]
        heapq.heapify(self._heap)

    def _push(self, arm: int) -> None:
        self._ver[arm] += 1
        heapq.heappush(self._heap, (-self._index(arm), arm, self._ver[arm]))
        if len(self._heap) > 4 * self.n_arms_ + 64:
            self._restore()

    def _ask_one(self) -> int:
        heap, ver = self._heap, self._ver
        while heap[0][2] != ver[heap[0][1]]:
            heapq.heappop(heap)
        arm = heap[0][1]
        self.pending_[arm] += 1  # the index sees the pull as out
        self._push(arm)
        self.pending_[arm] -= 1  # ask() adds it back
        return arm

    def _on_tell(self, arm: int, reward: float) -> None:
        self._push(arm)
        c = int(self.counts_[arm])
        if c == 1:
            self._n_zero -= 1
        # the rule applies after the initial pull of every arm (JMNB14 Fig. 1); only the told
        # arm can newly satisfy T_i >= 1 + lam (t - T_i), so this is O(1) per pull
        if self._n_zero == 0 and c >= 1 + self._lam * (self.t_ - c):
            self._finish()

    def _on_cancel(self, arm: int) -> None:
        self._push(arm)

    def _check_stop(self) -> None:
        if self.ls:
            arm = lil_stopping_arm(self.sums_, self.counts_.astype(np.float64), self._d_ls, LS_EPSILON,
                                   float(self.sigma))
            if arm >= 0:
                self._finish([int(arm)])

    def _recommend(self) -> list[int]:
        # the most-pulled arm (JMNB14's output), ties to the higher mean then the lower index
        order = np.lexsort((np.arange(self.n_arms_), -self.means(), -self.counts_))
        return [int(order[0])]

    def run_compiled(self, stream, max_pulls: int) -> None:
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        done, final, t = _lil_ucb_kernel(
            self.counts_, self.sums_, self.sumsq_, self._delta_int, self._eps, self._beta,
            float(self.sigma), self._lam, self.ls, self._d_ls, int(max_pulls), *stream.args(),
        )
        self.t_ = int(t)
        self._restore()
        if done:
            self._finish([int(final)])


@njit(cache=True)
def _lil_ucb_kernel(counts, sums, sumsq, delta, eps, beta, sigma, lam, use_ls, d_ls, max_pulls,
                    kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Sequential lil'UCB: same index, same tie-break, same stop as the Python learner.

    Returns (done, recommended arm, total pulls); LS is tracked incrementally.
    """
    n = counts.shape[0]
    key = np.empty(n)
    for i in range(n):
        if counts[i] == 0:
            key[i] = math.inf
        else:
            key[i] = lil_ucb_index_s(sums[i] / counts[i], float(counts[i]), delta, eps, beta, sigma)
    heap, where = heap_build(key)
    total = 0
    for i in range(n):
        total += counts[i]
    tr = ls_tracker(sums, counts, d_ls, sigma)
    n_zero = 0
    for i in range(n):
        if counts[i] == 0:
            n_zero += 1
    while total < max_pulls:
        arm = heap_top(heap)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        heap_update(heap, where, key, arm,
                    lil_ucb_index_s(sums[arm] / counts[arm], float(counts[arm]), delta, eps, beta, sigma))
        if n_zero == 0 and counts[arm] >= 1 + lam * (total - counts[arm]):
            # the most-pulled arm, ties to the higher mean then the lower index (= _recommend)
            best = arm
            for j in range(n):
                if counts[j] > counts[best] or (counts[j] == counts[best] and (
                        sums[j] / counts[j] > sums[best] / counts[best]
                        or (sums[j] / counts[j] == sums[best] / counts[best] and j < best))):
                    best = j
            return True, best, total
        if use_ls:
            stop = ls_tracker_update(tr, sums, counts, arm, d_ls, sigma)
            if stop >= 0:
                return True, stop, total
    return False, -1, total
