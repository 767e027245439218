"""The LIL stopping rule LS (JMNB14 Sec. 5), usable on any learner's counts and sums.

:func:`lil_stopping_arm` (in :mod:`purebandits.bounds`) checks the rule in O(n);
:func:`ls_check` applies it to any started learner. For compiled kernels the rule is
tracked incrementally, in O(log n) per pull, by :func:`ls_tracker` / :func:`ls_tracker_update`:
two indexed heaps hold the empirical means and the upper bounds ``mu_hat + B(T)``, so the
test "the best arm's lower bound is at least every other arm's upper bound" reads two
heap tops. Both forms give the same decision at every pull (tested).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from purebandits.bounds import lil_stopping_arm, ls_delta, ls_radius_s
from purebandits.heaps import heap_init, heap_second, heap_top, heap_update
from purebandits.jit import borrow

__all__ = ["ls_check", "ls_tracker", "ls_tracker_update", "ls_workspace", "ls_tracker_fill", "borrow_tracker",
           "LS_EPSILON", "RADIUS_MEMO"]

#: epsilon of the LIL stopping rule (ALGORITHMS.md 0.2: 0.01 assumed for JMNB14 Sec. 5)
LS_EPSILON = 0.01


def ls_check(learner, nu: float, sigma: float = 0.5) -> int:
    """Arm that LS with error budget ``nu`` would output for ``learner`` now, or -1."""
    return int(lil_stopping_arm(learner.sums_, learner.counts_.astype(np.float64),
                                ls_delta(nu, LS_EPSILON), LS_EPSILON, sigma))


#: slots of the tracker's radius memo (direct-mapped on the pull count; a power of two)
RADIUS_MEMO = 1024


def ls_workspace(n: int) -> tuple:
    """Arrays for an LS tracker over ``n`` arms, allocated in Python (fill with :func:`ls_tracker_fill`).

    A kernel that receives them as an argument can :func:`borrow_tracker` them, which makes
    :func:`ls_tracker_update` free of reference counting.
    """
    return (np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64),
            np.empty(n, np.int64), np.empty(n), np.zeros(1, np.int64), np.full(RADIUS_MEMO, -1, np.int64),
            np.empty(RADIUS_MEMO), np.zeros(2))


@njit(cache=True, inline="always")
def memo_radius(rcount, rval, rpar, c, d_ls, n, sigma):  # pragma: no cover - compiled
    """``ls_radius_s(c, d_ls, n, LS_EPSILON, sigma)`` through a direct-mapped memo on the count ``c``.

    The radius costs two logarithms and a square root, and the learners that use LS pull the
    same counts over and over (a round-robin round pulls every arm at one count; an elimination
    round walks each arm through the same counts), so most pulls find it in the memo. The
    memo holds the value the function returned, so the decisions are the same bit for bit;
    it is cleared when ``d_ls`` or ``sigma`` differ from those it was filled with.
    """
    if rpar[0] != d_ls or rpar[1] != sigma:
        rcount[:] = -1
        rpar[0] = d_ls
        rpar[1] = sigma
    slot = c & (RADIUS_MEMO - 1)
    if rcount[slot] == c:
        return rval[slot]
    rad = ls_radius_s(float(c), d_ls, float(n), LS_EPSILON, sigma)
    rcount[slot] = c
    rval[slot] = rad
    return rad


@njit(cache=True)
def ls_tracker_fill(tr, sums, counts, d_ls, sigma):  # pragma: no cover - compiled
    """Initialise the tracker arrays ``tr`` (from :func:`ls_workspace`) from counts and sums."""
    mkey, mheap, mwhere, ukey, uheap, uwhere, lcb, n_zero, rcount, rval, rpar = tr
    n = counts.shape[0]
    rcount[:] = -1
    rpar[0] = d_ls
    rpar[1] = sigma
    n_zero[0] = 0
    for i in range(n):
        if counts[i] > 0:
            c = float(counts[i])
            rad = ls_radius_s(c, d_ls, float(n), LS_EPSILON, sigma)
            mkey[i] = sums[i] / c
            ukey[i] = mkey[i] + rad
            lcb[i] = mkey[i] - rad
        else:
            mkey[i] = -math.inf
            ukey[i] = math.inf
            lcb[i] = -math.inf
            n_zero[0] += 1
    heap_init(mkey, mheap, mwhere)
    heap_init(ukey, uheap, uwhere)


@njit(cache=True)
def ls_tracker(sums, counts, d_ls, sigma):  # pragma: no cover - compiled
    """Build the incremental LS state: (mkey, mheap, mwhere, ukey, uheap, uwhere, lcb, n_zero)."""
    n = counts.shape[0]
    tr = (np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64),
          np.empty(n, np.int64), np.empty(n), np.zeros(1, np.int64), np.full(RADIUS_MEMO, -1, np.int64),
          np.empty(RADIUS_MEMO), np.zeros(2))
    ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    return tr


@njit(cache=True, inline="always")
def borrow_tracker(tr):  # pragma: no cover - compiled
    """Borrowed views of a tracker's arrays (only for a tracker the kernel got as an argument)."""
    return (borrow(tr[0]), borrow(tr[1]), borrow(tr[2]), borrow(tr[3]), borrow(tr[4]), borrow(tr[5]),
            borrow(tr[6]), borrow(tr[7]), borrow(tr[8]), borrow(tr[9]), borrow(tr[10]))


@njit(cache=True, inline="always")
def ls_tracker_update(tr, sums, counts, arm, d_ls, sigma):  # pragma: no cover - compiled
    """Record that ``arm`` was just pulled (counts already updated); return LS's arm or -1."""
    mkey, mheap, mwhere, ukey, uheap, uwhere, lcb, n_zero, rcount, rval, rpar = tr
    n = counts.shape[0]
    ci = counts[arm]
    if ci == 1:
        n_zero[0] -= 1
    rad = memo_radius(rcount, rval, rpar, ci, d_ls, n, sigma)
    m = sums[arm] / float(ci)
    lcb[arm] = m - rad
    heap_update(mheap, mwhere, mkey, arm, m)
    heap_update(uheap, uwhere, ukey, arm, m + rad)
    if n_zero[0] > 0:
        return -1
    best = heap_top(mheap)
    top_u = heap_top(uheap)
    other = top_u if top_u != best else heap_second(uheap, ukey)
    if lcb[best] >= ukey[other]:
        return best
    return -1
