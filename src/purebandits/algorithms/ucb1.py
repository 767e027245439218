"""UCB1 sampling with the LIL stopping rule ("UCB1 + LS", JMNB14 Sec. 5)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.ls_incremental import LSCheck
from purebandits.algorithms.kernels.ucb1_incremental import UCB1Cache
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import ls_delta
from purebandits.heaps import UPPER_KEY_MARGIN, bonus_horizon, keyheap_best_bonus, keyheap_init, keyheap_update
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.stopping import (
    LS_EPSILON,
    borrow_tracker,
    ls_progress,
    ls_stop_arm,
    ls_tracker_fill,
    ls_tracker_update,
    ls_workspace,
)

__all__ = ["UCB1"]

#: from this many arms on, the compiled driver finds the argmax in a heap of upper keys
LAZY_MIN_ARMS = 16


@njit(cache=True, inline="always")
def ucb1_index(m, T, lt, sigma):  # pragma: no cover - compiled
    """UCB1's index ``m + sqrt(2 sigma^2 lt / T)``, the one expression every pick evaluates.

    It is ``m + sqrt(c / T)`` with ``c = 2 sigma^2 lt`` rounded as written, the form of
    :func:`purebandits.heaps.keyheap_best_bonus`, so the heap walk picks the scan's arm.
    """
    return m + math.sqrt(2.0 * sigma * sigma * lt / T)


@njit(cache=True)
def ucb1_pick(sums, counts, pending, t, sigma):  # pragma: no cover - compiled
    """Arm with the largest UCB1 index ``mu_hat_i + sqrt(2 sigma^2 log(t)/T_i)`` (ties: lower index).

    ``T_i`` counts answered and pending pulls (virtual pulls), the mean uses answered pulls
    only (0 before the first answer); an arm with ``T_i = 0`` has an infinite index.
    """
    n = counts.shape[0]
    lt = math.log(t) if t > 1.0 else 0.0
    best = 0
    best_v = -math.inf
    for i in range(n):
        T = counts[i] + pending[i]
        if T == 0:
            return i
        m = sums[i] / counts[i] if counts[i] > 0 else 0.0
        v = ucb1_index(m, float(T), lt, sigma)
        if v > best_v:
            best_v = v
            best = i
    return best


@njit(cache=True)
def ucb1_pick_allowed(sums, counts, pending, mask, t, sigma):  # pragma: no cover - compiled
    """:func:`ucb1_pick` over the arms where ``mask`` is True (at least one): the first such arm with
    ``T_i = 0``, else the largest index among them (ties: lower index). All True: ucb1_pick's arm."""
    n = counts.shape[0]
    lt = math.log(t) if t > 1.0 else 0.0
    best = -1
    best_v = -math.inf
    for i in range(n):
        if not mask[i]:
            continue
        T = counts[i] + pending[i]
        if T == 0:
            return i
        m = sums[i] / counts[i] if counts[i] > 0 else 0.0
        v = ucb1_index(m, float(T), lt, sigma)
        if v > best_v or best < 0:
            best_v = v
            best = i
    return best


class UCB1(Learner):
    """UCB1 (Auer, Cesa-Bianchi, Fischer 2002) as a best-arm learner, stopped by LS.

    Pull ``argmax_i mu_hat_i + sqrt(2 s^2 log(t)/T_i)`` (s = ``index_sigma``), t the pulls so far
    (ALGORITHMS.md 2.5); stop with the LIL stopping rule LS (JMNB14 Sec. 5) at confidence
    nu/2 and output its arm.

    Parameters
    ----------
    delta : float, default=0.1
        Target error probability nu; LS runs at nu/2. JMNB14 Sec. 5 sets up every "+ LS"
        comparison the same way: "To implement the strategy for any fixed confidence
        algorithm, simply run the algorithm with nu/2 in place of nu and assign the other
        nu/2 confidence to the LIL stopping criterion." UCB1 has no confidence parameter, so
        its half goes unused and the guarantee is conservative (error <= nu/2), but the
        stopping rule is the paper's: ``d_LS = ls_delta(nu/2)`` (ALGORITHMS.md 0.2, 2.5).
    index_sigma : float, default=1.0
        Scale s of the index. ALGORITHMS.md 2.5 leaves open whether JMNB14 scaled the index by
        sigma^2 = 1/4 (their rewards are N(mu, 1/4)). We keep the classical index
        ``sqrt(2 log t / T_i)`` (s = 1) of the cited UCB1: with s = 1/2 UCB1 gives a
        suboptimal arm only ~``log(t)/(2 Delta^2)`` pulls, while LS needs ~``10/Delta^2``
        (B(T) at d_LS ~ 1e-6), so LS would fire only after ~e^20 pulls; measured on 6 Bernoulli
        arms (0.8, 0.2 x 5), s = 1/2 had not stopped after 200,000 pulls, while s = 1 stopped
        after 2,992. JMNB14 report UCB1 + LS among the fastest, which fits s = 1.
    sigma : float, default=0.5
        Sub-Gaussian scale used by LS.

    Notes
    -----
    Every index depends on t, so the plain pick costs O(n) per pull (JMNB14 Sec. 5 skipped UCB1
    at large n). From ``LAZY_MIN_ARMS`` arms on the compiled driver keeps the indices at a
    horizon ``t1 >= t`` in a heap and evaluates only the arms whose upper key reaches the best
    index found (:func:`purebandits.heaps.keyheap_best_bonus`); it picks the same arm as the
    scan, ties included.
    Pending pulls count in ``T_i`` and in t (virtual pulls), not in the means.

    Restricted asks (``ask(n, allowed=...)``): the allowed arm with the largest UCB1 index
    (:func:`ucb1_pick_allowed`, one O(n) compiled pass; an allowed arm with no pull first), the
    unrestricted arm when every arm is allowed; the key heap follows the pull. The guarantee is
    LS's, which does not depend on how arms were chosen: its event is that every arm stays within
    its anytime LIL bound at every count of its own (ALGORITHMS.md 0.2), so restricted sampling
    changes when it stops, not its error probability (assuming, as unrestricted, that an
    answer's distribution does not depend on which participant gives it).

    References
    ----------
    P. Auer, N. Cesa-Bianchi, P. Fischer. Finite-time analysis of the multiarmed bandit problem.
    Machine Learning 47, 2002. K. Jamieson et al., lil' UCB, COLT 2014, Sec. 5.
    """

    name = "ucb1"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Auer, Cesa-Bianchi, Fischer 2002 (UCB1) + LS of Jamieson et al. COLT 2014 Sec. 5 (LS at delta/2)"
    invalid_params = [("sigma", 0.0), ("index_sigma", -1.0)]

    def __init__(self, delta: float = 0.1, *, index_sigma: float = 1.0, sigma: float = 0.5) -> None:
        self.delta = delta
        self.index_sigma = index_sigma
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("index_sigma", self.index_sigma, low=0.0, low_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        # JMNB14 Sec. 5: LS gets the "other nu/2" (the sampling rule gets nu/2, unused by UCB1)
        self._d_ls = ls_delta(float(self.delta) / 2, LS_EPSILON)

    # ------------------------------------------------------------------ Python ask/tell path
    # While some arm has T_i = 0, ucb1_pick returns the first such arm (kept in a heap). Then,
    # as in the compiled driver, the indices at a horizon t1 >= t are kept as upper keys in a
    # key heap, over the classes of arms with equal (mu_i, T_i), and a walk evaluates only the
    # classes whose key reaches the best index found: the scan's arm, ties included
    # (purebandits.algorithms.kernels.ucb1_incremental). ``_ub`` (a cache, never part of the state)
    # follows every ask, tell and cancel, and is rebuilt in O(n) when it was not (start, a
    # load, the compiled driver). LS uses the incremental tracker (_ls_incremental).
    #: the incremental paths (False: the O(n) reference rules, for tests)
    _ask_incremental = True
    _ls_incremental = True
    _ub: UCB1Cache | None = None
    _lsc: LSCheck | None = None

    def _restore(self) -> None:
        self._ub = None
        self._lsc = LSCheck(self._d_ls, float(self.sigma))

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        for name in ("_ub", "_lsc"):
            state.pop(name, None)  # caches (memoryviews): rebuilt after unpickling
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "n_arms_" in state:
            self._restore()

    def _ask_one_reference(self) -> int:
        """The O(n) pick: :func:`ucb1_pick` at t = answered + pending pulls."""
        t = float(self.t_ + int(self.pending_.sum()))
        return int(ucb1_pick(self.sums_, self.counts_, self.pending_, t, float(self.index_sigma)))

    def _cache(self) -> UCB1Cache:
        ub = self._ub
        if ub is None or ub.t != self.t_ or ub.counts is not self.counts_ or ub.pending is not self.pending_ \
                or ub.sums is not self.sums_:
            ub = self._ub = UCB1Cache(self.counts_, self.sums_, self.pending_, self.t_)
        return ub

    def _ask_one(self) -> int:
        if not self._ask_incremental:
            return self._ask_one_reference()
        ub = self._cache()
        return ub.ask(float(self.t_ + ub.pend), float(self.index_sigma))  # Learner.ask adds the pending pull

    def _ask_allowed(self, mask: np.ndarray) -> int:
        t = float(self.t_ + int(self.pending_.sum()))
        arm = int(ucb1_pick_allowed(self.sums_, self.counts_, self.pending_, mask, t, float(self.index_sigma)))
        if self._ask_incremental:
            self._cache().asked(arm)  # Learner.ask adds the pending pull (the cache counts it now)
        return arm

    def _on_tell(self, arm: int, reward: float) -> None:
        self._lsc.told(arm, self.t_)
        ub = self._ub
        if ub is None:
            return
        if ub.t != self.t_ - 1:
            self._ub = None
            return
        views = self._views()
        ub.tell(arm, views[2][arm] / views[1][arm])

    def _on_cancel(self, arm: int) -> None:
        ub = self._ub
        if ub is None:
            return
        if ub.t != self.t_:
            self._ub = None
            return
        ub.cancel(arm)

    def _check_stop(self) -> None:
        if self._ls_incremental:
            views = self._views()
            arm = self._lsc.check(self.sums_, self.counts_, self.t_, views[1], views[2])
        else:
            arm = self._check_stop_reference()
        if arm >= 0:
            self._finish([int(arm)])

    def _check_stop_reference(self) -> int:
        """LS's arm by the O(n) rule (:func:`purebandits.stopping.ls_stop_arm`), or -1."""
        return ls_stop_arm(self.sums_, self.counts_, self._d_ls, float(self.sigma))

    def _stopping_progress(self) -> StoppingProgress:
        """LS (JMNB14 Sec. 5): other arms whose upper bound is at or below the leader's lower bound."""
        return ls_progress(self.sums_, self.counts_, self._d_ls, float(self.sigma), float(self.delta) / 2)

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        n = self.n_arms_
        ws = (np.empty(n), np.empty(n), np.empty(n), np.empty(n + 1), np.empty(n + 1, np.int64),
              np.empty(n, np.int64), np.empty(n + 1, np.int64))  # borrowed by the kernel
        stop, t = _ucb1_kernel(self.counts_, self.sums_, self.sumsq_, self.pending_, ws, ls_workspace(n),
                               float(self.index_sigma), float(self.sigma), self._d_ls, int(max_pulls), *stream.args())
        self.t_ = int(t)
        self._ub = None
        if stop >= 0:
            self._finish([int(stop)])


@njit(cache=True)
def _ucb1_kernel(counts, sums, sumsq, pending, ws, tr, index_sigma, sigma, d_ls, max_pulls,
                 kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """UCB1 + LS; ``ws`` holds (mu, u, key, hkey, harm, where, stack) and ``tr`` an LS workspace."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    mu, u, key, hkey = borrow(ws[0]), borrow(ws[1]), borrow(ws[2]), borrow(ws[3])
    harm, where, stack = borrow(ws[4]), borrow(ws[5]), borrow(ws[6])
    n = counts.shape[0]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        u[i] = float(counts[i])
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
        n_zero += counts[i] == 0
    ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    tr = borrow_tracker(tr)
    lazy = n >= LAZY_MIN_ARMS
    horizon = -1.0  # the keys hold while t <= horizon; -1: not built
    c1 = 0.0
    while total < max_pulls:
        t = float(total)
        if lazy and n_zero == 0:
            if t > horizon:
                horizon = bonus_horizon(t, n)
                c1 = 2.0 * index_sigma * index_sigma * math.log(horizon) * UPPER_KEY_MARGIN
                for i in range(n):
                    key[i] = mu[i] + math.sqrt(c1 / u[i])
                keyheap_init(key, hkey, harm, where)
            arm = keyheap_best_bonus(hkey, harm, n, stack, mu, u, 2.0 * index_sigma * index_sigma * math.log(t))
        else:
            arm = ucb1_pick(sums, counts, pending, t, index_sigma)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        u[arm] += 1.0
        sums[arm] += r
        sumsq[arm] += r * r
        mu[arm] = sums[arm] / counts[arm]
        total += 1
        if horizon > 0.0:
            keyheap_update(hkey, harm, where, n, arm, mu[arm] + math.sqrt(c1 / u[arm]))
        stop = ls_tracker_update(tr, sums, counts, arm, d_ls, sigma)
        if stop >= 0:
            return stop, total
    return -1, total
