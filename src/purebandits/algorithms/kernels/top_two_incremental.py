"""Incremental ask/tell state of top-two (:class:`purebandits.algorithms.top_two.TopTwo`).

The reference rule (:func:`top_two_pick` per ask, :func:`glr_statistic_s` per answer) makes O(n)
passes: the first arm with no pull, the means, the empirical-best leader, the challenger
``argmin_{j != B} W(B, j)`` and the GLR statistic. This workspace keeps them between calls,
with the same decisions bit for bit (tests/test_incremental_ask_tell.py holds them to the reference):

- the means ``mu`` (answered; 0 for an arm never answered, as the rule has it);
- the arms in an array sorted by virtual count ``N = counts + pending``, so that the arms of one
  count form a *class*, a contiguous range; the classes are records in a list by increasing N
  (at most n records; an arm whose N changes by one moves to the end of its range and into the
  neighbouring class, O(1) plus two tree updates);
- a segment tree over that array: each node keeps ``(m1, i1, m2)``, the largest mean below it,
  the lowest arm with that mean and the largest mean below ``m1``. The root's ``i1`` is the EB
  leader (ties to the lower arm, as the rule), and each class caches its own summary;
- the challenger: every arm of a class has the same N, so its cost depends on its mean alone,
  non-increasing in it. In a class, the arms with mean ``m1`` cost exactly the same (same inputs
  to the same function) and ``i1`` is the lowest of them; every other arm has a mean <= ``m2``
  and costs at least a certified lower bound at ``m2``. One cost per class usually settles it;
  otherwise the class's range of the tree is searched with the same bounds at each node. With
  graded rewards many arms share (N, mean): the walk costs O(number of counts), not O(ties).
  Gaussian cost: :func:`glr_pair_cost_s` itself is the bound (every step is a correctly rounded,
  monotone operation, so it is monotone in floating point too). Bernoulli cost:
  :func:`_bern_lower`, the computed cost minus a margin that covers its rounding errors.
  Candidates are compared as ``(cost, arm)``: the reference's lowest index among equal costs.
- the GLR stop: the hint (the last minimiser) usually shows in one cost that the rule does not
  stop; else the challenger search at the virtual counts gives Z exactly when no pull is pending
  and a witness arm otherwise; only when that fails is Z computed in full.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.bounds import glr_challenge_s, glr_pair_cost_s, glr_threshold_s
from purebandits.jit import borrow

__all__ = ["tt_new", "tt_ask", "tt_note", "tt_tell", "tt_told", "tt_stop", "tt_challenger", "bern_lower"]

# fw rows: means; tree m1, m2; class m1, m2
_MU, _T1, _T2, _R1, _R2 = range(5)
_N_FW = 5
# iw rows: tree i1; position of each arm; arm at each position; class of each arm; class count N, range
# [lo, hi), previous and next class, dirty summary flag, class i1; search stack; scalars
_TI, _POS, _AT, _REC, _RN, _RLO, _RHI, _RPREV, _RNEXT, _RDIRTY, _RI, _STACK, _SCAL = range(13)
_N_IW = 13
# scalars: arms with no pull at all, arms with no answer, GLR hint, last challenger, first class,
# first free class record, tree leaves, pending pulls in total, 1 if every change of pending is noted (EB
# leader; the TS leader's asks go through the reference rule and leave the classes stale)
_NOPULL, _NOANSWER, _HINT, _CHAL, _HEAD, _FREE, _SIZE, _PEND, _SYNCED = range(9)
_STACK_LEN = 192  # (node, first position, span) triples of a depth-first search: 3 * (depth + 2) suffice

#: machine epsilon (unit roundoff is half of it)
_EPS = 2.0 ** -52


def tt_new(counts: np.ndarray, sums: np.ndarray, pending: np.ndarray,
           synced: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A workspace (fw, iw) for the state ``counts``, ``sums``, ``pending``; ``synced``: every later change
    of ``pending`` goes through :func:`tt_ask` / :func:`tt_note` / a tell (else the stop does not use the classes)."""
    n = counts.shape[0]
    size = 1
    while size < n:
        size *= 2
    width = max(2 * size, n + 2, _STACK_LEN, 16)
    fw = np.full((_N_FW, width), -math.inf)
    iw = np.zeros((_N_IW, width), dtype=np.int64)
    order = np.argsort(counts + pending, kind="stable").astype(np.int64)
    _tt_init(counts, sums, pending, order, size, fw, iw)
    iw[_SCAL, _SYNCED] = int(synced)
    return fw, iw


@njit(cache=True, inline="always")
def _combine(a1, ai, a2, b1, bi, b2):  # pragma: no cover - compiled
    """The summary (m1, i1, m2) of two sets from theirs."""
    if a1 > b1:
        return a1, ai, max(a2, b1)
    if b1 > a1:
        return b1, bi, max(b2, a1)
    return a1, min(ai, bi), max(a2, b2)


@njit(cache=True, inline="always")
def _pull_up(fw, iw, k):  # pragma: no cover - compiled
    """Recompute the tree above node k (a leaf just set); stop where a node does not change."""
    t1, t2, ti = fw[_T1], fw[_T2], iw[_TI]
    k >>= 1
    while k >= 1:
        a, b = 2 * k, 2 * k + 1
        m1, i1, m2 = _combine(t1[a], ti[a], t2[a], t1[b], ti[b], t2[b])
        if m1 == t1[k] and i1 == ti[k] and m2 == t2[k]:
            break
        t1[k], ti[k], t2[k] = m1, i1, m2
        k >>= 1


@njit(cache=True, inline="always")
def _set_leaf(fw, iw, p, arm):  # pragma: no cover - compiled
    """Position p holds ``arm`` (with its current mean)."""
    k = iw[_SCAL, _SIZE] + p
    fw[_T1, k] = fw[_MU, arm]
    fw[_T2, k] = -math.inf
    iw[_TI, k] = arm
    _pull_up(fw, iw, k)


@njit(cache=True)
def _tt_init(counts, sums, pending, order, size, fw, iw):  # pragma: no cover - compiled
    n = counts.shape[0]
    mu = fw[_MU]
    nopull = 0
    noanswer = 0
    pend = 0
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
        pend += pending[i]
        if counts[i] == 0:
            noanswer += 1
            if pending[i] == 0:
                nopull += 1
    t1, t2, ti = fw[_T1], fw[_T2], iw[_TI]
    for p in range(size):
        k = size + p
        t2[k] = -math.inf
        if p < n:
            arm = order[p]
            iw[_AT, p] = arm
            iw[_POS, arm] = p
            t1[k] = mu[arm]
            ti[k] = arm
        else:
            t1[k] = -math.inf
            ti[k] = n  # above every arm: an empty leaf never wins a tie
    for k in range(size - 1, 0, -1):
        a, b = 2 * k, 2 * k + 1
        t1[k], ti[k], t2[k] = _combine(t1[a], ti[a], t2[a], t1[b], ti[b], t2[b])
    # classes, in order of N; the unused records form the free list
    nrec = 0
    prev = -1
    head = -1
    p = 0
    while p < n:
        N = counts[order[p]] + pending[order[p]]
        q = p
        while q < n and counts[order[q]] + pending[order[q]] == N:
            iw[_REC, order[q]] = nrec
            q += 1
        iw[_RN, nrec] = N
        iw[_RLO, nrec] = p
        iw[_RHI, nrec] = q
        iw[_RPREV, nrec] = prev
        iw[_RNEXT, nrec] = -1
        iw[_RDIRTY, nrec] = 1
        if prev >= 0:
            iw[_RNEXT, prev] = nrec
        else:
            head = nrec
        prev = nrec
        nrec += 1
        p = q
    for r in range(nrec, n + 1):
        iw[_RNEXT, r] = r + 1 if r < n else -1
    iw[_SCAL, _NOPULL] = nopull
    iw[_SCAL, _NOANSWER] = noanswer
    iw[_SCAL, _HINT] = -1
    iw[_SCAL, _CHAL] = -1
    iw[_SCAL, _HEAD] = head
    iw[_SCAL, _FREE] = nrec if nrec <= n else -1
    iw[_SCAL, _SIZE] = size
    iw[_SCAL, _PEND] = pend


@njit(cache=True, inline="always")
def _range_summary(fw, iw, lo, hi):  # pragma: no cover - compiled
    """(m1, i1, m2) of the positions [lo, hi)."""
    t1, t2, ti = fw[_T1], fw[_T2], iw[_TI]
    size = iw[_SCAL, _SIZE]
    m1, i1, m2 = -math.inf, size, -math.inf
    a = lo + size
    b = hi + size
    while a < b:
        if a & 1:
            m1, i1, m2 = _combine(m1, i1, m2, t1[a], ti[a], t2[a])
            a += 1
        if b & 1:
            b -= 1
            m1, i1, m2 = _combine(m1, i1, m2, t1[b], ti[b], t2[b])
        a >>= 1
        b >>= 1
    return m1, i1, m2


@njit(cache=True, inline="always")
def _refresh(fw, iw, r):  # pragma: no cover - compiled
    if iw[_RDIRTY, r]:
        fw[_R1, r], iw[_RI, r], fw[_R2, r] = _range_summary(fw, iw, iw[_RLO, r], iw[_RHI, r])
        iw[_RDIRTY, r] = 0


@njit(cache=True, inline="always")
def _new_record(iw, N, p, prev, nxt):  # pragma: no cover - compiled
    """A class of count N holding position p alone, linked between ``prev`` and ``nxt``."""
    r = iw[_SCAL, _FREE]
    iw[_SCAL, _FREE] = iw[_RNEXT, r]
    iw[_RN, r] = N
    iw[_RLO, r] = p
    iw[_RHI, r] = p + 1
    iw[_RPREV, r] = prev
    iw[_RNEXT, r] = nxt
    iw[_RDIRTY, r] = 1
    if prev >= 0:
        iw[_RNEXT, prev] = r
    else:
        iw[_SCAL, _HEAD] = r
    if nxt >= 0:
        iw[_RPREV, nxt] = r
    return r


@njit(cache=True, inline="always")
def _drop_if_empty(iw, r):  # pragma: no cover - compiled
    if iw[_RLO, r] == iw[_RHI, r]:
        prev, nxt = iw[_RPREV, r], iw[_RNEXT, r]
        if prev >= 0:
            iw[_RNEXT, prev] = nxt
        else:
            iw[_SCAL, _HEAD] = nxt
        if nxt >= 0:
            iw[_RPREV, nxt] = prev
        iw[_RNEXT, r] = iw[_SCAL, _FREE]
        iw[_SCAL, _FREE] = r
        return True
    return False


@njit(cache=True, inline="always")
def _swap(fw, iw, p, q):  # pragma: no cover - compiled
    """Exchange the arms at positions p and q (the same class: no summary changes)."""
    if p != q:
        a, b = iw[_AT, p], iw[_AT, q]
        iw[_AT, p], iw[_AT, q] = b, a
        iw[_POS, a], iw[_POS, b] = q, p
        _set_leaf(fw, iw, p, b)
        _set_leaf(fw, iw, q, a)


@njit(cache=True, inline="always")
def _leaving(fw, iw, r, arm):  # pragma: no cover - compiled
    """``arm`` leaves class r (still non-empty): its summary changes only if the arm's mean is m1 or m2."""
    if not iw[_RDIRTY, r] and fw[_MU, arm] >= fw[_R2, r]:
        iw[_RDIRTY, r] = 1


@njit(cache=True, inline="always")
def _joining(fw, iw, r, arm):  # pragma: no cover - compiled
    if not iw[_RDIRTY, r]:
        fw[_R1, r], iw[_RI, r], fw[_R2, r] = _combine(fw[_R1, r], iw[_RI, r], fw[_R2, r], fw[_MU, arm], arm,
                                                       -math.inf)


@njit(cache=True, inline="always")
def _alone(fw, iw, r, arm):  # pragma: no cover - compiled
    """Class r holds ``arm`` alone."""
    fw[_R1, r], iw[_RI, r], fw[_R2, r] = fw[_MU, arm], arm, -math.inf
    iw[_RDIRTY, r] = 0


@njit(cache=True)
def _move_up(fw, iw, arm):  # pragma: no cover - compiled
    """N of ``arm`` grew by one: to the end of its class's range, then into the next class."""
    r = iw[_REC, arm]
    N = iw[_RN, r]
    last = iw[_RHI, r] - 1
    _swap(fw, iw, iw[_POS, arm], last)
    iw[_RHI, r] = last
    nxt = iw[_RNEXT, r]
    if nxt >= 0 and iw[_RN, nxt] == N + 1:
        iw[_RLO, nxt] = last
        _joining(fw, iw, nxt, arm)
    else:
        nxt = _new_record(iw, N + 1, last, r, nxt)
        _alone(fw, iw, nxt, arm)
    iw[_REC, arm] = nxt
    if not _drop_if_empty(iw, r):
        _leaving(fw, iw, r, arm)


@njit(cache=True)
def _move_down(fw, iw, arm):  # pragma: no cover - compiled
    """N of ``arm`` fell by one: to the start of its class's range, then into the previous class."""
    r = iw[_REC, arm]
    N = iw[_RN, r]
    first = iw[_RLO, r]
    _swap(fw, iw, iw[_POS, arm], first)
    iw[_RLO, r] = first + 1
    prev = iw[_RPREV, r]
    if prev >= 0 and iw[_RN, prev] == N - 1:
        iw[_RHI, prev] = first + 1
        _joining(fw, iw, prev, arm)
    else:
        prev = _new_record(iw, N - 1, first, prev, r)
        _alone(fw, iw, prev, arm)
    iw[_REC, arm] = prev
    if not _drop_if_empty(iw, r):
        _leaving(fw, iw, r, arm)


@njit(cache=True)
def bern_lower(m_a: float, n_a: float, m: float, n_b: float) -> float:  # pragma: no cover - compiled
    """A lower bound of the *computed* Bernoulli cost ``glr_pair_cost_s(m_a, n_a, m_j, n_b, False, .)``
    for every mean ``m_j <= m`` (same ``m_a``, ``n_a``, ``n_b``; counts at least 1, else 0).

    Why it holds (u = 2^-53, each operation's relative error; ``log`` taken within 4u, twice
    glibc's bound): exactly, ``W(m_j) >= W(m)``, the cost being non-increasing in the challenger's
    mean. Each ``kl(p, q)`` is computed within ``3.05u + 7.02u (|t1| + |t2|)`` (its two terms), and
    at the midpoint ``|t1| + |t2| <= 0.37 + log(1 + n_a + n_b)`` for either arm, so the computed cost
    of any arm is within ``A = u s (5.65 + 7.02 log(1 + s)) + 2.01u W`` (``s = n_a + n_b``) of the
    exact function at the rounded midpoint. That midpoint only raises the function (the exact one
    minimises it), by at most ``8.2 u^2 s (1 + m^2/(1 - m))`` at the bound's own point: at most
    ``1e-22 s`` when ``1 - m >= 1e-9``, which is required (else 0 is returned, valid as every
    computed cost is >= 0). So every arm's computed cost is at least
    ``w (1 - 7u) - 2A - 1e-22 s`` (``w`` the computed cost at ``m``); the margin used is about
    nine times that. Tested against the cost at neighbouring floats in
    tests/test_incremental_ask_tell.py.
    """
    return _bern_lower_of(glr_pair_cost_s(m_a, n_a, m, n_b, False, 0.5), m_a, n_a, m, n_b)


@njit(cache=True, inline="always")
def _bern_lower_of(w, m_a, n_a, m, n_b):  # pragma: no cover - compiled
    """:func:`bern_lower` given ``w``, the computed cost at ``m``."""
    if w <= 0.0 or not (n_a >= 1.0 and n_b >= 1.0):
        return 0.0
    pa = min(max(m_a, 0.0), 1.0)
    pb = min(max(m, 0.0), 1.0)
    s = n_a + n_b
    mid = (n_a * pa + n_b * pb) / s
    if not 1.0 - mid >= 2e-9:
        return 0.0
    a = 32.0 * _EPS * s * (1.5 + math.log1p(s))  # 64u s (1.5 + log(1 + s)) >= 9 (A without its W term)
    v = w * (1.0 - 64.0 * _EPS) - 2.0 * a - 1e-20 * s
    return v if v > 0.0 else 0.0


@njit(cache=True, inline="always")
def _lower(mb, nb, m, nf, gaussian, sigma):  # pragma: no cover - compiled
    """A certified lower bound of the computed cost of every arm with mean <= m and count nf."""
    if gaussian:
        return glr_pair_cost_s(mb, nb, m, nf, True, sigma)
    return bern_lower(mb, nb, m, nf)


@njit(cache=True, inline="always")
def _settle(fw, mb, nb, nf, gaussian, sigma, leader, m1, i1, m2, best, best_w):  # pragma: no cover - compiled
    """A set of arms of count ``nf`` with summary (m1, i1, m2): offer its candidate ``i1``; returns
    (best, best_w, search below) where the search is needed if another arm could still win."""
    if m1 == -math.inf:
        return best, best_w, False
    # the arms with mean m1 (= mu[i1]) cost exactly w (the same call); i1 is the lowest of them
    w = glr_pair_cost_s(mb, nb, m1, nf, gaussian, sigma)
    if (w if gaussian else _bern_lower_of(w, mb, nb, m1, nf)) > best_w:
        return best, best_w, False
    if i1 == leader:  # the others with the leader's mean cost 0: look for the lowest of them
        return best, best_w, True
    if w < best_w or (w == best_w and i1 < best):
        best, best_w = i1, w
    if m2 == -math.inf or _lower(mb, nb, m2, nf, gaussian, sigma) > best_w:
        return best, best_w, False
    return best, best_w, True


@njit(cache=True)
def _search(fw, iw, lo, hi, mb, nb, nf, gaussian, sigma, leader, best, best_w):  # pragma: no cover - compiled
    """Branch and bound over the tree's nodes in the positions [lo, hi) (one class, count nf)."""
    t1, t2, ti, mu = fw[_T1], fw[_T2], iw[_TI], fw[_MU]
    stack = iw[_STACK]
    stack[0], stack[1], stack[2] = 1, 0, iw[_SCAL, _SIZE]
    size = 3
    while size > 0:
        size -= 3
        k, a, span = stack[size], stack[size + 1], stack[size + 2]
        b = a + span
        if b <= lo or a >= hi:
            continue
        if a >= lo and b <= hi:
            if span == 1:
                j = ti[k]
                if j != leader:
                    w = glr_pair_cost_s(mb, nb, mu[j], nf, gaussian, sigma)
                    if w < best_w or (w == best_w and j < best):
                        best, best_w = j, w
                continue
            best, best_w, down = _settle(fw, mb, nb, nf, gaussian, sigma, leader, t1[k], ti[k], t2[k], best, best_w)
            if not down:
                continue
        elif t1[k] == -math.inf or _lower(mb, nb, t1[k], nf, gaussian, sigma) > best_w:
            continue  # the node's arms in the range have means <= its m1
        half = span >> 1
        stack[size], stack[size + 1], stack[size + 2] = 2 * k + 1, a + half, half
        stack[size + 3], stack[size + 4], stack[size + 5] = 2 * k, a, half
        size += 6
    return best, best_w


@njit(cache=True)
def _challenger(counts, pending, fw, iw, leader, gaussian, sigma):  # pragma: no cover - compiled
    """(argmin_{j != leader} W(leader, j) at the virtual counts, ties to the lower index; that cost).

    (-1, inf) if no cost is finite, as the reference's strict ``<`` from ``inf``.
    """
    n = counts.shape[0]
    mu = fw[_MU]
    mb = mu[leader]
    nb = float(counts[leader] + pending[leader])
    best = -1
    best_w = math.inf
    c = iw[_SCAL, _CHAL]
    if 0 <= c < n and c != leader:  # the last challenger: often the answer again, a tight bound at once
        w = glr_pair_cost_s(mb, nb, mu[c], float(counts[c] + pending[c]), gaussian, sigma)
        if w < best_w:
            best, best_w = c, w
    r = iw[_SCAL, _HEAD]
    while r >= 0:
        _refresh(fw, iw, r)
        nf = float(iw[_RN, r])
        best, best_w, down = _settle(fw, mb, nb, nf, gaussian, sigma, leader, fw[_R1, r], iw[_RI, r], fw[_R2, r],
                                     best, best_w)
        if down:
            best, best_w = _search(fw, iw, iw[_RLO, r], iw[_RHI, r], mb, nb, nf, gaussian, sigma, leader, best,
                                   best_w)
        r = iw[_RNEXT, r]
    iw[_SCAL, _CHAL] = best
    return best, best_w


@njit(cache=True)
def tt_challenger(counts, pending, fw, iw, leader, gaussian, sigma):  # pragma: no cover - compiled
    """:func:`_challenger` (for tests)."""
    return _challenger(counts, pending, fw, iw, leader, gaussian, sigma)


@njit(cache=True)
def _note(counts, pending, fw, iw, arm, before):  # pragma: no cover - compiled
    """Arm ``arm``'s pending pulls changed; ``before`` was its virtual count."""
    N = counts[arm] + pending[arm]
    if before == 0 and N > 0:
        iw[_SCAL, _NOPULL] -= 1
    elif before > 0 and N == 0:
        iw[_SCAL, _NOPULL] += 1
    iw[_SCAL, _PEND] += N - before
    while iw[_RN, iw[_REC, arm]] < N:
        _move_up(fw, iw, arm)
    while iw[_RN, iw[_REC, arm]] > N:
        _move_down(fw, iw, arm)


@njit(cache=True)
def tt_note(counts, pending, fw, iw, arm, before):  # pragma: no cover - compiled
    """:func:`_note` after a cancel (or any change of ``pending[arm]`` made by the caller)."""
    counts, pending, fw, iw = borrow(counts), borrow(pending), borrow(fw), borrow(iw)
    _note(counts, pending, fw, iw, arm, before)


@njit(cache=True)
def tt_ask(counts, pending, fw, iw, u, gaussian, sigma, beta):  # pragma: no cover - compiled
    """One EB-leader ask: (arm, leader) as :func:`top_two_pick`, and the pending pull added.

    During the initialisation (an arm with no pull at all) the first such arm, leader -1, and
    ``u`` is not used (the caller draws it only otherwise).
    """
    counts, pending, fw, iw = borrow(counts), borrow(pending), borrow(fw), borrow(iw)
    n = counts.shape[0]
    if iw[_SCAL, _NOPULL] > 0:
        arm = 0
        for i in range(n):
            if counts[i] + pending[i] == 0:
                arm = i
                break
        leader = -1
    else:
        leader = iw[_TI, 1]  # the tree's root: the largest mean, ties to the lower arm
        if u < beta:
            arm = leader
        else:
            arm = _challenger(counts, pending, fw, iw, leader, gaussian, sigma)[0]
    before = counts[arm] + pending[arm]
    pending[arm] += 1
    _note(counts, pending, fw, iw, arm, before)
    return arm, leader


@njit(cache=True)
def _told(counts, sums, pending, fw, iw, arm):  # pragma: no cover - compiled
    """Arm ``arm`` got an answer (counts, sums, pending already updated): new mean, same virtual count."""
    m = sums[arm] / counts[arm]
    old = fw[_MU, arm]
    fw[_MU, arm] = m
    if m != old:
        _set_leaf(fw, iw, iw[_POS, arm], arm)
        r = iw[_REC, arm]
        if not iw[_RDIRTY, r] and max(m, old) >= fw[_R2, r]:
            iw[_RDIRTY, r] = 1
    iw[_SCAL, _PEND] -= 1
    if counts[arm] == 1:
        iw[_SCAL, _NOANSWER] -= 1


@njit(cache=True)
def tt_told(counts, sums, pending, fw, iw, arm):  # pragma: no cover - compiled
    """:func:`_told` for a tell applied by the caller."""
    counts, sums, pending, fw, iw = borrow(counts), borrow(sums), borrow(pending), borrow(fw), borrow(iw)
    _told(counts, sums, pending, fw, iw, arm)


@njit(cache=True)
def _stop(counts, sums, pending, fw, iw, gaussian, sigma, threshold):  # pragma: no cover - compiled
    """:func:`glr_stop_s` with the leader from the tree: the arm to output if ``Z > threshold``, else -1."""
    if iw[_SCAL, _NOANSWER] > 0:  # Z = 0 (the reference computes it so)
        if 0.0 > threshold:
            return glr_challenge_s(sums, counts, gaussian, sigma)[0]
        return -1
    n = counts.shape[0]
    best = iw[_TI, 1]  # every arm answered: the tree's root is the empirical best
    mb = fw[_MU, best]
    nb = float(counts[best])
    hint = iw[_SCAL, _HINT]
    if 0 <= hint < n and hint != best:
        # Z <= W(a_hat, hint): the cost glr_challenge_s computes for the hint
        if glr_pair_cost_s(mb, nb, sums[hint] / counts[hint], float(counts[hint]), gaussian, sigma) <= threshold:
            return -1
    if not iw[_SCAL, _SYNCED]:
        best, z, chal = glr_challenge_s(sums, counts, gaussian, sigma)
        iw[_SCAL, _HINT] = chal
        return best if z > threshold else -1
    chal, w = _challenger(counts, pending, fw, iw, best, gaussian, sigma)
    if iw[_SCAL, _PEND] == 0:  # virtual counts = answered counts: w is Z, the same costs in the same order
        iw[_SCAL, _HINT] = chal
        return best if w > threshold else -1
    if chal >= 0 and glr_pair_cost_s(mb, nb, sums[chal] / counts[chal], float(counts[chal]), gaussian,
                                     sigma) <= threshold:
        iw[_SCAL, _HINT] = chal  # a witness at the answered counts
        return -1
    best, z, chal = glr_challenge_s(sums, counts, gaussian, sigma)
    iw[_SCAL, _HINT] = chal
    return best if z > threshold else -1


@njit(cache=True)
def tt_stop(counts, sums, pending, fw, iw, gaussian, sigma, t, n_arms, delta, theory):  # pragma: no cover - compiled
    """The GLR stop on the answered pulls at time ``t``: the arm to output, or -1."""
    counts, sums, pending, fw, iw = borrow(counts), borrow(sums), borrow(pending), borrow(fw), borrow(iw)
    return _stop(counts, sums, pending, fw, iw, gaussian, sigma, glr_threshold_s(float(t), n_arms, delta, theory))


@njit(cache=True)
def tt_tell(counts, sums, sumsq, pending, fw, iw, arm, reward, gaussian, sigma, t, n_arms, delta,
            theory):  # pragma: no cover - compiled
    """A whole tell (``t`` = answered pulls after it): -2 if ``arm`` has no pending pull (nothing
    changed), else the pull is recorded as ``Learner.tell`` does and :func:`tt_stop`'s answer returned."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw = borrow(fw), borrow(iw)
    if pending[arm] <= 0:
        return -2
    pending[arm] -= 1
    counts[arm] += 1
    sums[arm] += reward
    sumsq[arm] += reward * reward
    _told(counts, sums, pending, fw, iw, arm)
    return _stop(counts, sums, pending, fw, iw, gaussian, sigma, glr_threshold_s(float(t), n_arms, delta, theory))
