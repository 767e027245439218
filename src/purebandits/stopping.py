"""Stopping rules shared by several learners, and how close a rule is to firing.

The LIL stopping rule LS (JMNB14 Sec. 5) is usable on any learner's counts and sums:
:func:`ls_separation` computes its bounds (the O(n) test, shared by every learner's
``_check_stop`` and by its progress report), :func:`ls_check` applies it to any started learner.
For compiled kernels the rule is tracked incrementally by :func:`ls_tracker` /
:func:`ls_tracker_update`: a certificate (a level above every lower bound with two upper bounds
above it) shows in O(1) that LS cannot stop, and an O(n) rescan runs only when the certificate
fails. Both forms give the same decision at every pull as :func:`purebandits.bounds.lil_stopping_arm`
(tested).

The ``*_progress`` helpers build a :class:`~purebandits.base.StoppingProgress` for each family of
rules (separation of bounds, arms decided, a statistic over a threshold, a budget), with
``fraction`` exactly 1.0 when the rule holds on the state given, so :func:`either` can report the
rule nearer to firing for learners that stop by the first of two rules.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.base import NOT_DONE_CAP, Learner, StoppingProgress
from purebandits.bounds import ls_delta, ls_radius_s
from purebandits.jit import borrow

__all__ = ["ls_check", "ls_separation", "ls_stop_arm", "ls_progress", "ls_tracker", "ls_tracker_update",
           "ls_workspace", "ls_tracker_fill", "borrow_tracker", "LS_EPSILON", "radius_memo_size",
           "StoppingProgress", "separation_progress", "count_progress", "statistic_progress", "budget_progress",
           "never_stops_progress", "either"]

#: epsilon of the LIL stopping rule (ALGORITHMS.md 0.2: 0.01 assumed for JMNB14 Sec. 5)
LS_EPSILON = 0.01


@njit(cache=True)
def ls_separation(sums, counts, d_ls, eps, sigma):  # pragma: no cover - compiled
    """The bounds LS compares: ``(best, lcb_best, max other ucb, other arms separated)``.

    ``best`` = the empirical best arm (ties to the lower index), ``lcb_best = mu_best - B(T_best)``,
    the largest ``mu_j + B(T_j)`` over the other arms, and how many of them have
    ``mu_j + B(T_j) <= lcb_best`` (JMNB14 Sec. 5; ``B`` = :func:`purebandits.bounds.ls_radius_s`,
    ``counts`` as float64). LS stops with ``best`` when every other arm is separated. Before every
    arm has an answer LS is not defined: ``(-1, -inf, inf, 0)``. The same arithmetic as
    :func:`purebandits.bounds.lil_stopping_arm`, hence the same decisions.
    """
    n = counts.shape[0]
    best = -1
    best_mean = -math.inf
    for i in range(n):
        if counts[i] == 0:
            return -1, -math.inf, math.inf, 0
        m = sums[i] / counts[i]
        if m > best_mean:
            best_mean = m
            best = i
    lcb = best_mean - ls_radius_s(counts[best], d_ls, n, eps, sigma)
    umax = -math.inf
    n_sep = 0
    for j in range(n):
        if j != best:
            u = sums[j] / counts[j] + ls_radius_s(counts[j], d_ls, n, eps, sigma)
            if u > umax:
                umax = u
            if not u > lcb:
                n_sep += 1
    return best, lcb, umax, n_sep


def ls_stop_arm(sums: np.ndarray, counts: np.ndarray, d_ls: float, sigma: float = 0.5) -> int:
    """The arm LS (confidence ``d_ls``, epsilon :data:`LS_EPSILON`) outputs now, or -1 to continue."""
    best, _, _, n_sep = ls_separation(sums, counts.astype(np.float64), d_ls, LS_EPSILON, sigma)
    return int(best) if best >= 0 and n_sep == counts.shape[0] - 1 else -1


def ls_check(learner: Learner, nu: float, sigma: float = 0.5) -> int:
    """Arm that LS with error budget ``nu`` would output for ``learner`` now, or -1."""
    return ls_stop_arm(learner.sums_, learner.counts_, ls_delta(nu, LS_EPSILON), sigma)


# ------------------------------------------------------------------------------------ progress
def _fmt(x: float) -> str:
    return f"{x:.3g}"


def separation_progress(lcb_h: float, ucb_l: float, holds: bool, n_sep: int, of: int, epsilon: float,
                        description: str) -> StoppingProgress:
    """Progress of an LUCB-type rule "``ucb_l - lcb_h < epsilon``" (or ``<=``).

    ``statistic = lcb_h - ucb_l`` (the weakest top arm's lower bound minus the strongest other
    arm's upper bound), ``threshold = -epsilon``, so ``margin = epsilon - (ucb_l - lcb_h)``;
    ``fraction`` = share of the ``of`` other arms separated by the rule's own bounds (``n_sep``),
    1.0 exactly when ``holds`` (the learner's own stop test).
    """
    stat = -(ucb_l - lcb_h)  # = lcb_h - ucb_l, rounded as the stop test rounds ucb_l - lcb_h
    thr = -float(epsilon) if epsilon > 0 else 0.0
    frac = 1.0 if holds else min(n_sep / of if of > 0 else 0.0, NOT_DONE_CAP)
    return StoppingProgress(fraction=frac, margin=stat - thr, statistic=stat, threshold=thr, separated=int(n_sep),
                            of=int(of), description=description)


def count_progress(decided: int, of: int, description: str, fraction: float | None = None) -> StoppingProgress:
    """Progress of an elimination rule that stops when ``decided`` reaches ``of`` (arms decided).

    ``statistic = decided``, ``threshold = of``, ``margin = decided - of`` (fires at >= 0);
    ``fraction = decided / of`` unless the learner gives its own (e.g. pulls of a fixed schedule).
    """
    holds = decided >= of
    if fraction is None:
        fraction = decided / of if of > 0 else 0.0
    frac = 1.0 if holds else min(float(fraction), NOT_DONE_CAP)
    return StoppingProgress(fraction=frac, margin=float(decided - of), statistic=float(decided),
                            threshold=float(of), separated=int(decided), of=int(of), description=description)


def statistic_progress(statistic: float, threshold: float, holds: bool, description: str,
                       fraction: float | None = None) -> StoppingProgress:
    """Progress of a rule "``statistic > threshold``" (or ``>=``): ``fraction = statistic / threshold``.

    ``holds`` is the learner's own test; the ratio is used only for a positive threshold (0
    otherwise) unless the learner gives its own ``fraction``.
    """
    if fraction is None:
        fraction = statistic / threshold if threshold > 0 and statistic > 0 else 0.0
    frac = 1.0 if holds else min(float(fraction), NOT_DONE_CAP)
    return StoppingProgress(fraction=frac, margin=float(statistic - threshold), statistic=float(statistic),
                            threshold=float(threshold), description=description)


def budget_progress(pulls: int, budget: int, description: str, schedule_end: bool | None = None,
                    separated: int | None = None, of: int | None = None) -> StoppingProgress:
    """Progress towards a budget: ``fraction = pulls / budget``.

    For a rule that stops at ``pulls >= budget`` (``schedule_end`` None) the margin is
    ``pulls - budget``. A fixed-budget schedule stops when its last round is answered
    (``schedule_end`` says whether that happened), which may leave part of the budget unused,
    so it compares no two numbers: margin None (statistic = pulls, threshold = budget).
    """
    holds = pulls >= budget if schedule_end is None else bool(schedule_end)
    frac = 1.0 if holds else min(pulls / budget if budget > 0 else 0.0, NOT_DONE_CAP)
    margin = float(pulls - budget) if schedule_end is None else None
    return StoppingProgress(fraction=frac, margin=margin, statistic=float(pulls), threshold=float(budget),
                            separated=separated, of=of, description=description)


def never_stops_progress(done: bool, description: str, reason: str) -> StoppingProgress:
    """A learner whose rule gives no progress: fraction 1.0 if done else 0.0, no margin, a reason."""
    return StoppingProgress(fraction=1.0 if done else 0.0, description=description, reason=reason)


def either(rules: list[tuple[str, StoppingProgress]], description: str) -> StoppingProgress:
    """A learner that stops by the first of several rules: the figures of the one nearer to firing.

    ``rules`` = (name, progress) pairs; the rule with the largest ``fraction`` is reported (the
    first on ties; a rule that holds has fraction 1.0), its name appended to ``description``.
    """
    name, best = rules[0]
    for nm, pr in rules[1:]:
        if pr.fraction > best.fraction:
            name, best = nm, pr
    return StoppingProgress(fraction=best.fraction, margin=best.margin, statistic=best.statistic,
                            threshold=best.threshold, separated=best.separated, of=best.of,
                            description=f"{description}; figures of the {name}, the nearer to firing")


def ls_progress(sums: np.ndarray, counts: np.ndarray, d_ls: float, sigma: float, nu: float) -> StoppingProgress:
    """Progress of LS with confidence ``d_ls`` (error budget ``nu``), from :func:`ls_separation`.

    ``statistic`` = the leader's lower bound, ``threshold`` = the largest other upper bound
    (fires at margin >= 0); ``fraction`` = share of the other arms whose upper bound is at or
    below the leader's lower bound. Not defined (margin None) before every arm has an answer.
    """
    n = counts.shape[0]
    best, lcb, umax, n_sep = ls_separation(sums, counts.astype(np.float64), d_ls, LS_EPSILON, sigma)
    desc = (f"stops when the leading item's lower bound is at or above every other item's upper bound "
            f"(LIL stopping rule LS, Jamieson et al. 2014 Sec. 5; error {_fmt(nu)})")
    if best < 0:
        return StoppingProgress(fraction=0.0, separated=0, of=n - 1, description=desc)
    return StoppingProgress(fraction=1.0 if n_sep == n - 1 else min(n_sep / (n - 1), NOT_DONE_CAP),
                            margin=float(lcb - umax), statistic=float(lcb), threshold=float(umax),
                            separated=int(n_sep), of=n - 1, description=desc)


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

    best = the largest mean (ties to the lower index, as :func:`ls_separation`);
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
    decision as :func:`ls_separation` / :func:`purebandits.bounds.lil_stopping_arm` at every pull (tested).
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
