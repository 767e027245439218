"""Incremental ask/tell state of the round-free LUCB learners: O(log n) per ask, tell and cancel.

The Python learners of :mod:`purebandits.algorithms.lucb` choose with :func:`family_select`, an
O(n) pass over every arm's bound (each a KL inversion for lil-KLUCB and KL-RandLUCB). For the
bounds that depend on an arm's own count only (every code but LUCB1 and KL-LUCB) this module
keeps the same quantities between calls, as the compiled driver (:func:`_round_free_kernel`)
does, with what the ask/tell contract adds: pending pulls (the sampling bounds use answered plus
pending pulls, the stop test answered pulls only), concurrent asks, cancels and the
initialisation with concurrent participants. It is a cache: built from the state arrays
(``counts``, ``sums``, ``pending``) and never serialised.

Workspace (allocated by :func:`inc_new`): ``fw`` float64 rows, ``iw`` int64 rows, ``top`` (bool,
the empirical top-K). Seven indexed heaps (:mod:`purebandits.heaps`, keys in heap order, ties to
the lower arm), all over the n arms:

- ``T`` / ``B``: the weakest top arm (key -mean on reversed ids) and the strongest other arm (key
  mean); after an answer one swap restores "every top arm precedes every other arm", so ``top``
  is always :func:`topk_fill`'s set (higher mean first, then lower index);
- ``SL`` / ``SU``: the stop test's lower bounds of the top arms (key -lower) and upper bounds of
  the others (key upper), at the answered counts;
- ``PL`` / ``PU``: the same at answered plus pending counts, for sampling;
- ``Z``: arms never answered, key -pending (the initialisation asks the fewest pending, then the
  lowest index, as the Python rule does).

A bound is kept as an interval [lo, hi] around its exact value (lo == hi once exact): the KL
inversions of ``form="simplified"`` get the one-evaluation brackets of
:func:`~purebandits.bounds.kl_lower_bracket_s`; those of ``form="exact"`` the ranges their
bisections start from ([0, mean] and [mean, 1]); sub-Gaussian radii are exact at once. Heaps are
keyed by the optimistic end, and a heap's top is used only when certified as in the compiled
driver: its bound is exact, or its pessimistic end beats every other arm's optimistic end;
otherwise it is computed exactly (the same call as :func:`family_bound_s`, so the same bits) and
re-keyed. Hence h and l are the O(n) rule's arms, ties included.

A bound changes only when its arm's count, pending pulls, mean or membership change. The stop
bounds are refreshed at once (a tell tests the rule); the sampling bounds of changed arms are
marked dirty and refreshed when the next pair is chosen, by copying the stop bound when the arm
has no pending pull (same count, same mean, same side: the same value) and computing it
otherwise. Exact values found for one side are shared with the other when the counts agree.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.lucb_rules import (
    BOUND_KL_KT,
    BOUND_KL_LUCB,
    BOUND_LIL_KL,
    BOUND_LIL_KL_EXACT,
    BOUND_LUCB,
    RULE_PAIR,
    _ranks_above,
    count_scale_s,
    random_pick,
    scale_bounds_s,
    stop_test,
)
from purebandits.bounds import kl_lower_bracket_s, kl_upper_bracket_s
from purebandits.heaps import keyheap_init, keyheap_key, keyheap_update
from purebandits.jit import borrow
from purebandits.ranking import topk_fill

__all__ = ["incremental_supported", "inc_new", "inc_ask", "inc_ask_allowed", "inc_note", "inc_tell", "inc_told",
           "inc_stop", "inc_pair", "inc_progress"]

# fw rows: per-arm values, then the heap keys in heap order
_MEAN, _SS, _SLO, _SHI, _PS, _PLO, _PHI, _M2 = range(8)  # _M2: the mean square (K_inf bounds)
_KEY0 = 8
# heaps (fw row _KEY0 + heap, iw row heap for the arms in heap order, iw row _WHERE0 + heap for positions)
_HT, _HB, _HSL, _HSU, _HPL, _HPU, _HZ = range(7)
_N_HEAPS = 7
_N_FW = _KEY0 + _N_HEAPS
_WHERE0 = _N_HEAPS
# iw rows after the heaps: dirty flags, dirty list, scalars
_DFLAG = 2 * _N_HEAPS
_DLIST = _DFLAG + 1
_SCAL = _DLIST + 1
_N_IW = _SCAL + 1
# scalars: arms never answered, dirty arms, bounds built
_NZERO, _NDIRTY, _BUILT = range(3)

_NEG_INF = -math.inf


def incremental_supported(code: int) -> bool:
    """Whether the bound ``code`` depends on each arm's own count only (not LUCB1, KL-LUCB)."""
    return code != BOUND_LUCB and code != BOUND_KL_LUCB


def inc_new(counts: np.ndarray, pending: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A workspace (fw, iw, top) for the state ``counts``, ``pending``; the bounds are built on first use."""
    n = counts.shape[0]
    width = max(n + 1, 8)  # a heap's n arms and its sentinel; the scalars' row
    fw = np.full((_N_FW, width), -math.inf)
    iw = np.zeros((_N_IW, width), dtype=np.int64)
    top = np.zeros(n, dtype=np.bool_)
    _inc_init(counts, pending, fw, iw)
    return fw, iw, top


@njit(cache=True)
def _inc_init(counts, pending, fw, iw):  # pragma: no cover - compiled
    n = counts.shape[0]
    key = np.full(n, -math.inf)
    nz = 0
    for i in range(n):
        if counts[i] == 0:
            key[i] = -float(pending[i])
            nz += 1
    for h in range(_N_HEAPS):
        keyheap_init(key if h == _HZ else np.full(n, -math.inf), fw[_KEY0 + h], iw[h], iw[_WHERE0 + h][:n])
    iw[_SCAL, _NZERO] = nz
    iw[_SCAL, _NDIRTY] = 0
    iw[_SCAL, _BUILT] = 0


@njit(cache=True, inline="always")
def _set(fw, iw, h, n, arm, value):  # pragma: no cover - compiled
    """Give ``arm`` the key ``value`` in heap ``h`` (nothing if unchanged)."""
    hkey = fw[_KEY0 + h]
    where = iw[_WHERE0 + h]
    if keyheap_key(hkey, where, arm) != value:
        keyheap_update(hkey, iw[h], where, n, arm, value)


@njit(cache=True, inline="always")
def _top_of(iw, h):  # pragma: no cover - compiled
    return iw[h, 0]


@njit(cache=True)
def _bracket(code, bp, mean, m2, s, T, is_top):  # pragma: no cover - compiled
    """[lo, hi] around the deciding bound (lower if ``is_top``, else upper) with count scale ``s`` of count ``T``."""
    if code == BOUND_LIL_KL or code == BOUND_KL_KT:
        if is_top:
            return kl_lower_bracket_s(mean, s)
        return kl_upper_bracket_s(mean, s)
    if code == BOUND_LIL_KL_EXACT:
        # the bisections of lil_kl_lower_exact_s / lil_kl_upper_exact_s stay in [0, mean] / [mean, 1]
        if is_top:
            if s > 0.0 and mean > 0.0:
                return 0.0, mean
        elif s > 0.0 and mean < 1.0:
            return mean, 1.0
    v = _exact(code, bp, mean, m2, s, T, is_top)
    return v, v


@njit(cache=True)
def _exact(code, bp, mean, m2, s, T, is_top):  # pragma: no cover - compiled
    """The deciding bound itself: :func:`scale_bounds_s` on one side, as :func:`family_bound_s` calls it."""
    if is_top:
        return scale_bounds_s(code, bp, mean, m2, s, T, 1)[0]
    return scale_bounds_s(code, bp, mean, m2, s, T, 2)[1]


@njit(cache=True)
def _refresh_member(fw, iw, top, n, i):  # pragma: no cover - compiled
    """Re-key arm i in the membership heaps after its mean or membership changed."""
    m = fw[_MEAN, i]
    if top[i]:
        _set(fw, iw, _HT, n, n - 1 - i, -m)
        _set(fw, iw, _HB, n, i, _NEG_INF)
    else:
        _set(fw, iw, _HT, n, n - 1 - i, _NEG_INF)
        _set(fw, iw, _HB, n, i, m)


@njit(cache=True)
def _key_bound(fw, iw, top, n, i, low, lo_row, hi_row):  # pragma: no cover - compiled
    """Re-key arm i in the bound heaps ``low`` (lower bounds of top arms) and ``low + 1`` (upper, others)."""
    if top[i]:
        _set(fw, iw, low, n, i, -fw[lo_row, i])
        _set(fw, iw, low + 1, n, i, _NEG_INF)
    else:
        _set(fw, iw, low, n, i, _NEG_INF)
        _set(fw, iw, low + 1, n, i, fw[hi_row, i])


@njit(cache=True)
def _refresh_stop(code, bp, counts, fw, iw, top, n, i):  # pragma: no cover - compiled
    """Recompute arm i's stop bound (answered count) and re-key it."""
    s = count_scale_s(code, bp, float(counts[i]), top[i])
    lo, hi = _bracket(code, bp, fw[_MEAN, i], fw[_M2, i], s, float(counts[i]), top[i])
    fw[_SS, i] = s
    fw[_SLO, i] = lo
    fw[_SHI, i] = hi
    _key_bound(fw, iw, top, n, i, np.int64(_HSL), np.int64(_SLO), np.int64(_SHI))  # runtime rows: see _resolve


@njit(cache=True)
def _refresh_samp(code, bp, counts, pending, fw, iw, top, n, i):  # pragma: no cover - compiled
    """Recompute arm i's sampling bound (answered + pending count) and re-key it."""
    if pending[i] == 0:  # the stop bound's count, mean and side: the same bound
        fw[_PS, i] = fw[_SS, i]
        fw[_PLO, i] = fw[_SLO, i]
        fw[_PHI, i] = fw[_SHI, i]
    else:
        s = count_scale_s(code, bp, float(counts[i] + pending[i]), top[i])
        lo, hi = _bracket(code, bp, fw[_MEAN, i], fw[_M2, i], s, float(counts[i] + pending[i]), top[i])
        fw[_PS, i] = s
        fw[_PLO, i] = lo
        fw[_PHI, i] = hi
    _key_bound(fw, iw, top, n, i, np.int64(_HPL), np.int64(_PLO), np.int64(_PHI))


@njit(cache=True, inline="always")
def _mark(iw, i):  # pragma: no cover - compiled
    """Mark arm i's sampling bound for a refresh before the next pair."""
    if iw[_DFLAG, i] == 0:
        iw[_DFLAG, i] = 1
        nd = iw[_SCAL, _NDIRTY]
        iw[_DLIST, nd] = i
        iw[_SCAL, _NDIRTY] = nd + 1


@njit(cache=True)
def _build(code, bp, k, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """Means, membership and every bound from scratch (once every arm has an answer)."""
    n = counts.shape[0]
    means = fw[_MEAN]
    for i in range(n):
        means[i] = sums[i] / counts[i]
        fw[_M2, i] = sumsq[i] / counts[i]
    topk_fill(means[:n], k, top)
    for i in range(n):
        _refresh_member(fw, iw, top, n, i)
        _refresh_stop(code, bp, counts, fw, iw, top, n, i)
        _refresh_samp(code, bp, counts, pending, fw, iw, top, n, i)
        iw[_DFLAG, i] = 0
    iw[_SCAL, _NDIRTY] = 0
    iw[_SCAL, _BUILT] = 1


@njit(cache=True)
def _resolve(code, bp, counts, pending, fw, iw, top, n, heap, force, stop):  # pragma: no cover - compiled
    """The certified top of a bound heap (h for a lower heap, l for an upper one).

    ``stop`` selects the stop heaps (else the sampling ones); ``force`` makes the top's bound
    exact even when its bracket already certifies it. An exact value is shared with the other
    side's entry of the arm when that entry has the same count and is current.

    Callers pass ``heap``, ``force`` and ``stop`` as runtime values (``np.int64``, ``np.bool_``): numba
    compiles a call with a constant argument as a separate ``Literal[...]`` specialisation, and this
    function was compiled six times (8.4 s of compiling, ~7 s of a fresh server's first start).
    """
    lower = heap == _HSL or heap == _HPL
    if stop:
        lo_row, hi_row, s_row = _SLO, _SHI, _SS
    else:
        lo_row, hi_row, s_row = _PLO, _PHI, _PS
    hkey = fw[_KEY0 + heap]
    harm = iw[heap]
    while True:
        a = harm[0]
        lo = fw[lo_row, a]
        hi = fw[hi_row, a]
        if lo == hi:
            return a
        if not force:
            other = max(hkey[1], hkey[2])  # the best key below the root (hkey[n] is the sentinel)
            if (lower and -hi > other) or (not lower and lo > other):
                return a
        cnt = counts[a] if stop else counts[a] + pending[a]
        v = _exact(code, bp, fw[_MEAN, a], fw[_M2, a], fw[s_row, a], float(cnt), lower)
        fw[lo_row, a] = v
        fw[hi_row, a] = v
        _set(fw, iw, heap, n, a, -v if lower else v)
        if pending[a] == 0 and (stop and iw[_DFLAG, a] == 0 or not stop):
            other_heap = heap + 2 if stop else heap - 2
            olo, ohi = (_PLO, _PHI) if stop else (_SLO, _SHI)
            fw[olo, a] = v
            fw[ohi, a] = v
            _set(fw, iw, other_heap, n, a, -v if lower else v)


@njit(cache=True)
def _stop(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """The LUCB stop test on the answered pulls: 1 stop, 0 not, -1 not tested (an arm has no answer)."""
    if iw[_SCAL, _NZERO] > 0:
        return -1
    if iw[_SCAL, _BUILT] == 0:
        _build(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)
    n = counts.shape[0]
    force = False
    while True:
        h = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HSL), force, np.bool_(True))
        el = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HSU), force, np.bool_(True))
        # certain if the largest possible gap passes, impossible if the smallest fails (the gap is
        # monotone in both bounds); else both bounds exact (a certified top stays on top)
        if stop_test(fw[_SLO, h], fw[_SHI, el], eps, strict):
            return 1
        if force or not stop_test(fw[_SHI, h], fw[_SLO, el], eps, strict):
            return 0
        force = True


@njit(cache=True)
def inc_stop(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """:func:`_stop` on the current state (after a cancel, or a tell applied by the caller)."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top = borrow(fw), borrow(iw), borrow(top)
    return _stop(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top)


@njit(cache=True)
def _pair(code, bp, k, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """(h, l) of the sampling rule (answered means, answered + pending counts)."""
    if iw[_SCAL, _BUILT] == 0:
        _build(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)
    n = counts.shape[0]
    nd = iw[_SCAL, _NDIRTY]
    for j in range(nd):
        i = iw[_DLIST, j]
        iw[_DFLAG, i] = 0
        _refresh_samp(code, bp, counts, pending, fw, iw, top, n, i)
    iw[_SCAL, _NDIRTY] = 0
    h = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HPL), np.bool_(False), np.bool_(False))
    el = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HPU), np.bool_(False), np.bool_(False))
    return h, el


@njit(cache=True)
def inc_pair(code, bp, k, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """The sampling pair (h, l) on the current state, every arm answered (for tests)."""
    return _pair(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)


@njit(cache=True)
def _exact_value(code, bp, counts, pending, fw, i, lower):  # pragma: no cover - compiled
    """Make arm i's sampling bound exact (lower if ``lower``, else upper) in the rows, shared with its stop bound
    when it has no pending pull (same count, mean and side: the same value, as :func:`_resolve` shares it);
    returns it. The heaps are not re-keyed: :func:`_rekey_exact` does it."""
    v = _exact(code, bp, fw[_MEAN, i], fw[_M2, i], fw[_PS, i], float(counts[i] + pending[i]), lower)
    fw[_PLO, i] = v
    fw[_PHI, i] = v
    if pending[i] == 0:
        fw[_SLO, i] = v
        fw[_SHI, i] = v
    return v


@njit(cache=True)
def _rekey_exact(pending, fw, iw, n, i, lower):  # pragma: no cover - compiled
    """Re-key arm i in the sampling heap of its side (and the stop heap, if shared) after :func:`_exact_value`."""
    v = fw[_PLO, i]
    if lower:
        _set(fw, iw, _HPL, n, i, -v)
        if pending[i] == 0:
            _set(fw, iw, _HSL, n, i, -v)
    else:
        _set(fw, iw, _HPU, n, i, v)
        if pending[i] == 0:
            _set(fw, iw, _HSU, n, i, v)


@njit(cache=True)
def _walk_allowed(code, bp, counts, pending, fw, iw, n, heap, lower, mask, stack, fixed, nfix):  # pragma: no cover
    """The allowed arm of a sampling heap's side with the best exact bound (the least lower bound of a top arm,
    ``lower``, or the greatest upper bound of another arm; ties to the lower index), by a walk down the heap.

    Keys are optimistic ends of the brackets (``-lo`` for lower bounds, ``hi`` for upper ones), so every
    arm's exact value is at most its key, and a node's key and arm bound those of its subtree (larger key,
    ties to the lower arm): a subtree is skipped when its root's key is below the best value found, or
    equal to it with a higher arm (no arm in it can win or tie to a lower index). Arms of the other side
    (key -inf) are never visited. Allowed arms visited get an exact value (:func:`_exact_value`; listed in
    ``fixed`` from ``nfix``, re-keyed by the caller after the walk: the walk reads the heap as it was).
    Returns (arm, its exact bound, nfix); arm -1 when no allowed arm is on that side.
    """
    hkey = fw[_KEY0 + heap]
    harm = iw[heap]
    plo = fw[_PLO]
    phi = fw[_PHI]
    best = -1
    best_v = -math.inf  # the best key value found: -lower bound or upper bound
    stack[0] = 0
    size = 1
    while size > 0:
        size -= 1
        p = stack[size]
        kp = hkey[p]
        if kp == -math.inf or kp < best_v or (kp == best_v and harm[p] > best):
            continue
        a = harm[p]
        if mask[a]:
            v = plo[a]
            if v != phi[a]:
                v = _exact_value(code, bp, counts, pending, fw, a, lower)
                fixed[nfix] = a
                nfix += 1
            if lower:
                v = -v
            if best < 0 or v > best_v or (v == best_v and a < best):
                best_v = v
                best = a
        ch = 2 * p + 1
        if ch < n:
            d = ch + 1  # hkey[n] is the sentinel (-inf)
            if hkey[d] > hkey[ch] or (hkey[d] == hkey[ch] and harm[d] < harm[ch]):
                ch, d = d, ch
            # the better child goes on last, so it is walked first and raises best_v sooner
            if d < n:
                stack[size] = d
                size += 1
            stack[size] = ch
            size += 1
    return best, (-best_v if lower else best_v), nfix


@njit(cache=True)
def inc_ask_allowed(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, mask):  # pragma: no cover - compiled
    """The restricted rule's candidates on the sampling bounds, every arm answered: ``(a, b, crit_a, crit_b)``.

    ``a`` is the allowed top arm with the lowest lower bound and ``b`` the allowed other arm with the
    highest upper bound (ties to the lower index; -1 when no such arm is allowed), ``crit_a = ucb_l - lcb_a``
    and ``crit_b = ucb_b - lcb_h`` (h, l: the sampling pair): the values of the O(n) reference
    (``_LUCBFamily._reference_ask_allowed``). When h and l are both allowed they are ``(h, l, 0, 0)``
    (a tie, as there) after the O(log n) pair alone; otherwise the allowed side's best arm is h (l) when
    allowed, else found by :func:`_walk_allowed`. Exact bounds found are kept in the workspace, as the
    pair's are. Pending pulls are not changed. (``lower`` flags and heap rows are passed as runtime
    values: see :func:`_resolve`.)
    """
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top, mask = borrow(fw), borrow(iw), borrow(top), borrow(mask)
    h, el = _pair(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)
    if mask[h] and mask[el]:
        return h, el, 0.0, 0.0
    n = counts.shape[0]
    lcb_h = fw[_PLO, h]
    if lcb_h != fw[_PHI, h]:
        lcb_h = _exact_value(code, bp, counts, pending, fw, h, np.bool_(True))
        _rekey_exact(pending, fw, iw, n, h, np.bool_(True))
    ucb_l = fw[_PHI, el]
    if ucb_l != fw[_PLO, el]:
        ucb_l = _exact_value(code, bp, counts, pending, fw, el, np.bool_(False))
        _rekey_exact(pending, fw, iw, n, el, np.bool_(False))
    stack = np.empty(n + 1, dtype=np.int64)
    fixed = np.empty(n, dtype=np.int64)
    nfix = 0
    if mask[h]:
        a, lcb_a = h, lcb_h
    else:
        a, lcb_a, nfix = _walk_allowed(code, bp, counts, pending, fw, iw, n, np.int64(_HPL), np.bool_(True), mask,
                                       stack, fixed, nfix)
        for j in range(nfix):
            _rekey_exact(pending, fw, iw, n, fixed[j], np.bool_(True))
        nfix = 0
    if mask[el]:
        b, ucb_b = el, ucb_l
    else:
        b, ucb_b, nfix = _walk_allowed(code, bp, counts, pending, fw, iw, n, np.int64(_HPU), np.bool_(False), mask,
                                       stack, fixed, nfix)
        for j in range(nfix):
            _rekey_exact(pending, fw, iw, n, fixed[j], np.bool_(False))
    crit_a = ucb_l - lcb_a if a >= 0 else -math.inf
    crit_b = ucb_b - lcb_h if b >= 0 else -math.inf
    return a, b, crit_a, crit_b


@njit(cache=True)
def _note(counts, pending, fw, iw, arm):  # pragma: no cover - compiled
    """Arm ``arm``'s pending pulls changed (an ask or a cancel): re-key it where that matters."""
    if counts[arm] == 0:
        _set(fw, iw, _HZ, counts.shape[0], arm, -float(pending[arm]))
    elif iw[_SCAL, _BUILT] == 1:
        _mark(iw, arm)


@njit(cache=True)
def inc_note(counts, pending, fw, iw, arm, delta):  # pragma: no cover - compiled
    """Add ``delta`` to ``pending[arm]`` (0: already changed by the caller) and update the workspace."""
    counts, pending, fw, iw = borrow(counts), borrow(pending), borrow(fw), borrow(iw)
    pending[arm] += delta
    _note(counts, pending, fw, iw, arm)


@njit(cache=True)
def inc_ask(code, bp, k, rule, counts, sums, sumsq, pending, fw, iw, top, u):  # pragma: no cover - compiled
    """One ask that is not a queued arm: returns (arm, l) and adds the pending pull.

    During the initialisation (some arm has no answer) ``arm`` is the unanswered arm with the
    fewest pending pulls (lowest index on ties) and ``l`` is -2 (no round). Otherwise (h, l) is
    the sampling pair and ``arm`` is h (pair rule; the caller queues l) or
    :func:`random_pick` with the uniform ``u`` (random rule; ``l`` is then -1).
    """
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top = borrow(fw), borrow(iw), borrow(top)
    if iw[_SCAL, _NZERO] > 0:
        arm = _top_of(iw, _HZ)
        pending[arm] += 1
        _note(counts, pending, fw, iw, arm)
        return arm, -2
    h, el = _pair(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)
    if rule == RULE_PAIR:
        arm = h
        second = el
    else:
        arm = random_pick(h, el, counts[h] + pending[h], counts[el] + pending[el], u)
        second = -1
    pending[arm] += 1
    _mark(iw, arm)
    return arm, second


@njit(cache=True)
def _told(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, arm):  # pragma: no cover - compiled
    """Arm ``arm`` got an answer (its counts, sums and pending pulls are already updated)."""
    n = counts.shape[0]
    if counts[arm] == 1:
        _set(fw, iw, _HZ, n, arm, _NEG_INF)
        iw[_SCAL, _NZERO] -= 1
    if iw[_SCAL, _BUILT] == 0:
        return
    fw[_MEAN, arm] = sums[arm] / counts[arm]
    fw[_M2, arm] = sumsq[arm] / counts[arm]
    _refresh_member(fw, iw, top, n, arm)
    while True:  # restore "every top arm precedes every other arm" (one swap suffices)
        w = n - 1 - _top_of(iw, _HT)
        b = _top_of(iw, _HB)
        if not _ranks_above(fw[_MEAN], b, w):
            break
        top[w] = False
        top[b] = True
        for i in (w, b):
            _refresh_member(fw, iw, top, n, i)
            _refresh_stop(code, bp, counts, fw, iw, top, n, i)
            _mark(iw, i)
    _refresh_stop(code, bp, counts, fw, iw, top, n, arm)
    _mark(iw, arm)


@njit(cache=True)
def inc_told(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, arm):  # pragma: no cover - compiled
    """:func:`_told` for a tell applied by the caller (``Learner.tell``)."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top = borrow(fw), borrow(iw), borrow(top)
    _told(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, arm)


@njit(cache=True)
def inc_tell(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top, arm, reward):  # pragma: no cover
    """A whole tell: -2 if ``arm`` has no pending pull (nothing changed), else the pull is recorded
    (the same float operations as ``Learner.tell``) and :func:`_stop`'s answer is returned."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top = borrow(fw), borrow(iw), borrow(top)
    if pending[arm] <= 0:
        return -2
    pending[arm] -= 1
    counts[arm] += 1
    sums[arm] += reward
    sumsq[arm] += reward * reward
    _told(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, arm)
    return _stop(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top)


@njit(cache=True)
def inc_progress(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top):  # pragma: no cover - compiled
    """The stop test's figures for :meth:`stopping_progress`: (h, l, lcb_h, ucb_l, separated).

    The same as the O(n) reference (:func:`family_select` on the answered counts, then
    :func:`separated_count`): h and l with exact bounds, and how many arms outside the top-K pass
    :func:`stop_test` against ``lcb_h``. An arm's bracket decides the test when both ends agree (the
    test is monotone in its upper bound); only the others get an exact bound, which is kept, so a
    later call evaluates only the arms whose count changed. h = -1 before every arm has an answer.
    """
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, top = borrow(fw), borrow(iw), borrow(top)
    if iw[_SCAL, _NZERO] > 0:
        return -1, -1, math.nan, math.nan, 0
    if iw[_SCAL, _BUILT] == 0:
        _build(code, bp, k, counts, sums, sumsq, pending, fw, iw, top)
    n = counts.shape[0]
    h = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HSL), np.bool_(True), np.bool_(True))
    el = _resolve(code, bp, counts, pending, fw, iw, top, n, np.int64(_HSU), np.bool_(True), np.bool_(True))
    lcb_h = fw[_SLO, h]
    separated = 0
    for i in range(n):
        if top[i]:
            continue
        if stop_test(lcb_h, fw[_SHI, i], eps, strict):
            separated += 1
        elif stop_test(lcb_h, fw[_SLO, i], eps, strict):
            v = _exact(code, bp, fw[_MEAN, i], fw[_M2, i], fw[_SS, i], float(counts[i]), False)
            fw[_SLO, i] = v
            fw[_SHI, i] = v
            _set(fw, iw, _HSU, n, i, v)
            if stop_test(lcb_h, v, eps, strict):
                separated += 1
    return h, el, lcb_h, fw[_SHI, el], separated
