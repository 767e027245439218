"""Non-adaptive (uniform) sampling with the LIL stopping rule (JMNB14 Sec. 5 baseline)."""

from __future__ import annotations

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.ls_incremental import LSCheck
from purebandits.algorithms.kernels.rounds import fewest_pulls
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import ls_delta
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

__all__ = ["NonAdaptive"]


class NonAdaptive(Learner):
    """Cycle through a random permutation of the arms; stop with LS.

    JMNB14 Sec. 5, "nonadaptive + LS": the sampling itself has no failure mode, so the whole
    error budget ``delta`` goes to LS (ALGORITHMS.md 2.1 marks this uncertain; giving LS the
    full nu is the reading under which the procedure is exactly delta-correct).

    Restricted asks (``ask(n, allowed=...)``, a participant who rates each item once): the
    first allowed arm still due in the current pass over the permutation (positions
    ``next_`` to the end); it is swapped into position ``next_`` and the pass moves on, so the
    arms skipped keep their turn in this pass and every arm still gets one pull per pass. When
    none of the arms still due is allowed, an extra pull of the allowed arm with the fewest
    pulls (answered + pending; ties to the lower index), the pass unchanged. With every arm
    allowed it is the unrestricted cycle. LS's guarantee does not depend on how arms are chosen:
    its event is that every arm stays within its anytime LIL bound at every count of its own
    (ALGORITHMS.md 0.2), so unequal counts from extra pulls or skipped turns change when it
    stops, not its error probability.

    Parameters
    ----------
    delta : float, default=0.1
        Error probability of the LS stopping rule.
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards.

    References
    ----------
    K. Jamieson et al., lil' UCB, COLT 2014, Sec. 5.
    """

    name = "non_adaptive"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Jamieson et al., COLT 2014, Sec. 5 (nonadaptive + LS)"

    def __init__(self, delta: float = 0.1, *, sigma: float = 0.5) -> None:
        self.delta = delta
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        self._d_ls = ls_delta(float(self.delta), LS_EPSILON)

    #: test LS on the ask/tell path with the incremental tracker (False: the O(n) reference rule)
    _ls_incremental = True
    _lsc: LSCheck | None = None

    def _restore(self) -> None:
        self._ws = None  # the compiled driver's LS tracker: rebuilt on its next call
        self._lsc = LSCheck(self._d_ls, float(self.sigma))  # the ask/tell path's: rebuilt on its next check

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_lsc", None)  # a cache holding memoryviews: rebuilt after unpickling
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "n_arms_" in state:
            self._lsc = LSCheck(self._d_ls, float(self.sigma))

    def _start(self) -> None:
        self.order_ = self.rng_.permutation(self.n_arms_).astype(np.int64)
        self.next_ = 0

    def _ask_one(self) -> int:
        arm = int(self.order_[self.next_])
        self.next_ = (self.next_ + 1) % self.n_arms_
        return arm

    def _ask_allowed(self, mask: np.ndarray) -> int:
        order, nxt = self.order_, self.next_
        due = mask[order[nxt:]]  # the arms still due in this pass, in their order
        if due.any():
            q = nxt + int(due.argmax())
            if q != nxt:  # the skipped arm at next_ takes q's place: it keeps its turn in this pass
                order[nxt], order[q] = order[q], order[nxt]
            self.next_ = (nxt + 1) % self.n_arms_
            return int(order[nxt])
        # every arm still due is excluded (next_ > 0 here: at a pass's start every arm is due)
        return fewest_pulls(mask, self.counts_, self.pending_)

    def _on_tell(self, arm: int, reward: float) -> None:
        self._lsc.told(arm, self.t_)

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
        return ls_progress(self.sums_, self.counts_, self._d_ls, float(self.sigma), float(self.delta))

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        # the LS tracker survives between calls while nothing else touched the state
        cache = self.__dict__.get("_ws")
        init = cache is None or cache[0] != self.t_
        tr = ls_workspace(self.n_arms_) if init else cache[1]
        stop, nxt, t = _non_adaptive_kernel(self.counts_, self.sums_, self.sumsq_, self.order_, self.next_,
                                            tr, init, self._d_ls, float(self.sigma), int(max_pulls),
                                            *stream.args())
        self.next_, self.t_ = int(nxt), int(t)
        self._ws = (self.t_, tr)
        if stop >= 0:
            self._finish([int(stop)])


@njit(cache=True)
def _non_adaptive_kernel(counts, sums, sumsq, order, nxt, tr, init, d_ls, sigma, max_pulls,
                         kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Round-robin over ``order`` with LS; ``tr`` is an LS workspace (borrowed, see purebandits.jit)."""
    counts, sums, sumsq, order = borrow(counts), borrow(sums), borrow(sumsq), borrow(order)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    if init:
        ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    tr = borrow_tracker(tr)
    while total < max_pulls:
        arm = order[nxt]
        nxt = (nxt + 1) % n
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        stop = ls_tracker_update(tr, sums, counts, arm, d_ls, sigma)
        if stop >= 0:
            return stop, nxt, total
    return -1, nxt, total
