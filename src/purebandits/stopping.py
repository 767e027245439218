"""The LIL stopping rule LS (JMNB14 Sec. 5), usable on any learner's counts and sums.

:func:`lil_stopping_arm` (in :mod:`purebandits.bounds`) checks the rule in O(n);
:func:`ls_check` applies it to any started learner. For compiled kernels the rule is
tracked incrementally by :func:`ls_tracker` / :func:`ls_tracker_update`: a certificate (a level
above every lower bound with two upper bounds above it) shows in O(1) that LS cannot stop, and
an O(n) rescan runs only when the certificate fails. Both forms give the same decision at every
pull (tested).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from purebandits.base import Learner
from purebandits.bounds import lil_stopping_arm, ls_delta, ls_radius_s
from purebandits.jit import borrow

__all__ = ["ls_check", "ls_tracker", "ls_tracker_update", "ls_workspace", "ls_tracker_fill", "borrow_tracker",
           "LS_EPSILON", "radius_memo_size"]

#: epsilon of the LIL stopping rule (ALGORITHMS.md 0.2: 0.01 assumed for JMNB14 Sec. 5)
LS_EPSILON = 0.01


def ls_check(learner: Learner, nu: float, sigma: float = 0.5) -> int:
    """Arm that LS with error budget ``nu`` would output for ``learner`` now, or -1."""
    return int(lil_stopping_arm(learner.sums_, learner.counts_.astype(np.float64),
                                ls_delta(nu, LS_EPSILON), LS_EPSILON, sigma))


#: bounds on the slots of the tracker's radius memo (direct-mapped on the pull count)
RADIUS_MEMO_MIN, RADIUS_MEMO_MAX = 1 << 10, 1 << 16


@njit(cache=True)
def radius_memo_size(n):  # pragma: no cover - compiled
    """Slots of the radius memo for ``n`` arms: a power of two >= 8 n, within the bounds above.

    Adaptive rules spread the pulls over many counts (lil'UCB at n = 10,000 pulls arms at counts
    up to ~1e5), so the memo grows with n; at most 1 MiB, so a short run does not pay for it.
    """
    size = RADIUS_MEMO_MIN
    while size < 8 * n and size < RADIUS_MEMO_MAX:
        size *= 2
    return size


@njit(cache=True)
def ls_workspace(n):  # pragma: no cover - compiled
    """Arrays for an LS tracker over ``n`` arms (fill with :func:`ls_tracker_fill`).

    (mean, ucb, lcb, n_zero, level, above, rescans, radius memo: rcount, rval, rpar). A kernel that
    receives them as an argument (allocated by its Python caller) can :func:`borrow_tracker`
    them, which makes :func:`ls_tracker_update` free of reference counting.
    """
    m = radius_memo_size(n)
    return (np.empty(n), np.empty(n), np.empty(n), np.zeros(1, np.int64), np.zeros(1), np.zeros(1, np.int64),
            np.zeros(1, np.int64), np.full(m, -1, np.int64), np.empty(m), np.zeros(2))


@njit(cache=True, inline="always")
def memo_radius(rcount, rval, rpar, c, d_ls, n, sigma):  # pragma: no cover - compiled
    """``ls_radius_s(c, d_ls, n, LS_EPSILON, sigma)`` through a direct-mapped memo on the count ``c``
    (``rcount.shape[0]`` slots, a power of two).

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
    slot = c & (rcount.shape[0] - 1)
    if rcount[slot] == c:
        return rval[slot]
    rad = ls_radius_s(float(c), d_ls, float(n), LS_EPSILON, sigma)
    rcount[slot] = c
    rval[slot] = rad
    return rad


@njit(cache=True)
def ls_tracker_fill(tr, sums, counts, d_ls, sigma):  # pragma: no cover - compiled
    """Initialise the tracker arrays ``tr`` (from :func:`ls_workspace`) from counts and sums."""
    mean, ucb, lcb, n_zero, level, above, rescans, rcount, rval, rpar = tr
    n = counts.shape[0]
    rescans[0] = 0
    n_zero[0] = 0
    for i in range(n):
        if counts[i] > 0:
            rad = memo_radius(rcount, rval, rpar, counts[i], d_ls, n, sigma)
            mean[i] = sums[i] / float(counts[i])
            ucb[i] = mean[i] + rad
            lcb[i] = mean[i] - rad
        else:
            mean[i] = -math.inf
            ucb[i] = math.inf
            lcb[i] = -math.inf
            n_zero[0] += 1
    ls_rescan(tr)


@njit(cache=True)
def ls_tracker(sums, counts, d_ls, sigma):  # pragma: no cover - compiled
    """Build the incremental LS state (the arrays of :func:`ls_workspace`, filled)."""
    tr = ls_workspace(counts.shape[0])
    ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    return tr


@njit(cache=True, inline="always")
def borrow_tracker(tr):  # pragma: no cover - compiled
    """Borrowed views of a tracker's arrays (only for a tracker the kernel got as an argument)."""
    return (borrow(tr[0]), borrow(tr[1]), borrow(tr[2]), borrow(tr[3]), borrow(tr[4]), borrow(tr[5]),
            borrow(tr[6]), borrow(tr[7]), borrow(tr[8]), borrow(tr[9]))


@njit(cache=True)
def ls_rescan(tr):  # pragma: no cover - compiled
    """The exact LS test in O(n), and a new certificate level; return LS's arm or -1.

    best = the largest mean (ties to the lower index, as :func:`purebandits.bounds.lil_stopping_arm`);
    LS stops iff no arm is unpulled and ``lcb[best] >= max_{j != best} ucb[j]``. Otherwise the
    level is put halfway between the largest lower bound and the second-largest upper bound,
    and ``above`` counts the arms whose upper bound exceeds it (see :func:`ls_tracker_update`).
    """
    mean, ucb, lcb, n_zero, level, above, rescans, rcount, rval, rpar = tr
    n = mean.shape[0]
    rescans[0] += 1
    best = 0
    lmax = -math.inf
    u1 = -math.inf
    u2 = -math.inf
    i1 = -1
    for i in range(n):
        if mean[i] > mean[best]:
            best = i
        if lcb[i] > lmax:
            lmax = lcb[i]
        u = ucb[i]
        if u > u1:
            u2 = u1
            u1 = u
            i1 = i
        elif u > u2:
            u2 = u
    stop = -1
    if n_zero[0] == 0:
        other = u1 if i1 != best else u2  # -inf for a single arm, which stops at once
        if lcb[best] >= other:
            stop = best
    # without a stop, u2 > lmax (barring rounding): every arm has lcb < ucb, and an arm whose lcb
    # reached the second-largest ucb would be the best and stop. The level is kept valid after
    # a stop too, for a caller that goes on pulling.
    lv = lmax + 0.5 * (u2 - lmax) if lmax < u2 < math.inf else lmax
    level[0] = lv
    k = 0
    for i in range(n):
        if ucb[i] > lv:
            k += 1
    above[0] = k
    return stop


@njit(cache=True, inline="always")
def ls_tracker_update(tr, sums, counts, arm, d_ls, sigma):  # pragma: no cover - compiled
    """Record that ``arm`` was just pulled (counts already updated); return LS's arm or -1.

    A certificate makes most pulls O(1): a level L at least every arm's lower bound, and the
    number of arms whose upper bound exceeds L. While two arms do, every arm has another arm
    whose upper bound is above its lower bound, so LS cannot stop (whichever arm is best). A
    pull updates the count in O(1); only when the pulled arm's lower bound passes L or fewer
    than two arms stay above it does :func:`ls_rescan` test exactly and set a new level. Same
    decision as :func:`purebandits.bounds.lil_stopping_arm` at every pull (tested).
    """
    mean, ucb, lcb, n_zero, level, above, rescans, rcount, rval, rpar = tr
    ci = counts[arm]
    if ci == 1:
        n_zero[0] -= 1
    rad = memo_radius(rcount, rval, rpar, ci, d_ls, mean.shape[0], sigma)
    m = sums[arm] / float(ci)
    lv = level[0]
    if ucb[arm] > lv:
        above[0] -= 1
    mean[arm] = m
    u = m + rad
    lo = m - rad
    ucb[arm] = u
    lcb[arm] = lo
    if u > lv:
        above[0] += 1
    if lo <= lv and above[0] >= 2:
        return -1
    return ls_rescan(tr)
