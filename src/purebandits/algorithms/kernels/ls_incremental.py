"""The LIL stopping rule LS on the Python ask/tell path, in O(1) per answer (amortised).

The learners whose only per-answer O(n) work was LS (Nonadaptive + LS, ExpGap + LS, UCB1 + LS)
test it after every ``tell`` and ``cancel``. :func:`purebandits.stopping.ls_stop_arm` does so in
O(n); :class:`LSCheck` keeps the compiled kernels' certificate (:func:`purebandits.stopping.ls_tracker_update`:
a level at least every lower bound, and the number of upper bounds above it) and updates it for
the told arm in Python, calling the compiled O(n) rescan only when the certificate fails. It gives
the decision of :func:`ls_stop_arm` at every answer (the kernels' tracker is tested against it;
``tests/test_ask_tell_contest_learners.py`` runs the learners with both on the same events).

The learner calls :meth:`LSCheck.told` from ``_on_tell`` and :meth:`LSCheck.check` from
``_check_stop``; the check falls back to a full rebuild (O(n), compiled) whenever the tracker is
not exactly one answer behind the learner (first check after ``start``, a load, the compiled
driver, an answer that was not announced): the tracker is a cache, never part of the state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from purebandits.bounds import ls_radius_s
from purebandits.stopping import LS_EPSILON, ls_rescan, ls_stop_arm, ls_tracker_fill, ls_workspace

__all__ = ["LSCheck"]


class LSCheck:
    """LS with confidence ``d_ls`` and scale ``sigma`` over a learner's counts and sums."""

    __slots__ = ("d_ls", "sigma", "counts", "sums", "t", "last", "tr", "mean", "ucb", "lcb", "nz", "lvl",
                 "above", "memo", "n", "told_arm", "told_t")

    def __init__(self, d_ls: float, sigma: float) -> None:
        self.d_ls = float(d_ls)
        self.sigma = float(sigma)
        self.counts: Any = None  # the arrays the tracker follows (None: not built)
        self.sums: Any = None
        self.t = -1  # answers the tracker holds
        self.last = -1  # LS's decision on that state
        self.tr: tuple | None = None  # the tracker's arrays (purebandits.stopping.ls_workspace)
        self.memo: dict[int, float] = {}  # radius by count (ls_radius_s's doubles)
        self.told_arm = -1  # the arm of the last announced answer, and the answers after it
        self.told_t = -1

    def told(self, arm: int, t: int) -> None:
        """The learner has just recorded an answer of ``arm``; it now has ``t`` answers."""
        self.told_arm = arm
        self.told_t = t

    def _build(self, sums: np.ndarray, counts: np.ndarray, t: int) -> int:
        n = counts.shape[0]
        tr = ls_workspace(n)
        ls_tracker_fill(tr, sums, counts, self.d_ls, self.sigma)
        self.tr = tr
        self.mean, self.ucb, self.lcb = memoryview(tr[0]), memoryview(tr[1]), memoryview(tr[2])
        self.nz, self.lvl, self.above = memoryview(tr[3]), memoryview(tr[4]), memoryview(tr[5])
        self.counts, self.sums, self.n, self.t = counts, sums, float(n), t
        self.last = ls_stop_arm(sums, counts, self.d_ls, self.sigma)
        return self.last

    def check(self, sums: np.ndarray, counts: np.ndarray, t: int, cv: memoryview, sv: memoryview) -> int:
        """LS's arm on the learner's state (``t`` answers; ``cv``/``sv`` views of counts/sums), or -1."""
        if counts is not self.counts or sums is not self.sums:
            return self._build(sums, counts, t)
        if t == self.t:  # a cancel: counts and sums as at the last check
            return self.last
        arm = self.told_arm
        if t != self.t + 1 or self.told_t != t or arm < 0:
            return self._build(sums, counts, t)
        self.told_arm = -1
        self.t = t
        # purebandits.stopping.ls_tracker_update, step for step (same doubles)
        ci = cv[arm]
        if ci == 1:
            self.nz[0] -= 1
        memo = self.memo
        rad = memo.get(ci)
        if rad is None:
            rad = memo[ci] = ls_radius_s(float(ci), self.d_ls, self.n, LS_EPSILON, self.sigma)
        m = sv[arm] / float(ci)
        ucb = self.ucb
        lv = self.lvl[0]
        above = self.above
        k = above[0]
        if ucb[arm] > lv:
            k -= 1
        self.mean[arm] = m
        u = m + rad
        lo = m - rad
        ucb[arm] = u
        self.lcb[arm] = lo
        if u > lv:
            k += 1
        above[0] = k
        if lo <= lv and k >= 2:
            self.last = -1
            return -1
        self.last = stop = int(ls_rescan(self.tr))
        return stop
