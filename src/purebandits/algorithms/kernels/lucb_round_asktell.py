"""Incremental ask/tell state of LUCB1 and KL-LUCB: no O(n) pass per ask, tell or cancel.

LUCB1 (KTAS12) and KL-LUCB (KK13) widen every arm's bound with the round t, so the Python
learners of :mod:`purebandits.algorithms.lucb` used to choose with :func:`family_select`, an O(n)
pass over every arm's bound (a KL inversion each for KL-LUCB) at every ask and every stop test.
The compiled whole-run driver :mod:`~purebandits.algorithms.kernels.lucb_round_incremental` avoids that
pass with window keys (valid for a range of rounds), exact re-keying of heap tops and classes of
arms with equal (mean bits, count, side). This module drives the same machinery, imported from
there, under the ask/tell contract of :mod:`~purebandits.algorithms.kernels.lucb_incremental` (its module
docstring): pending pulls, concurrent asks, cancels and the initialisation with concurrent
participants. It is a cache, built from the state arrays (``counts``, ``sums``, ``pending``)
and never serialised.

Two sets of classes and bound heaps, as the reference rule evaluates two sets of bounds:

- **S** (stop test): radius count = answered pulls, round index ``rounds_ + 1`` at the test
  (after every answer and every cancel); kept current at every answer;
- **P** (sampling): radius count = answered + pending pulls (``vc``), round index
  ``rounds_ + 1`` at the ask. Its arms are refreshed lazily (a dirty list) when a pair is
  chosen while some pull is pending. With no pull pending P's bounds are S's, bit for bit (same
  counts, means, sides and round), so the pair is taken from S, whose h and l at that round the
  last stop test usually left exact: a sequential ``ask(1)``/``tell`` loop never touches P.

Shared: the answered means, the empirical top-K (two heaps by mean, one swap per answer, as in
the compiled drivers, so it is :func:`topk_fill`'s set), and a heap of the arms never answered
keyed by their pending pulls (the initialisation asks the fewest pending, then the lowest
index, as the reference does). Each set's window level and "exact at this round" epoch are its
own; exact values are found by :func:`family_bound_s` (the reference's call, so the same bits)
and h and l are the reference's arms, ties included (see the driver's docstring for why).

Storage: one int64 vector ``IW`` and one float64 vector ``FW`` (a header of scalars, the bound
parameters, then every row), carved into views by :func:`_views` inside each compiled call, so
that a call from Python passes few arguments.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels import lucb_round_incremental as _rdi
from purebandits.algorithms.kernels.arm_classes import classes_clear
from purebandits.algorithms.kernels.lucb_round_incremental import (
    _CEXV,
    _CLS,
    _LHARM,
    _LKEY,
    _LOWER,
    _LWHERE,
    _N_FW,
    _N_IW,
    _ROWS,
    _UHARM,
    _UKEY,
    _UPPER,
    _UWHERE,
    _new_round,
    _rejoin,
    _search,
    round_incremental_supported,
)
from purebandits.algorithms.kernels.lucb_rules import (
    BOUND_KL_LUCB,
    BOUND_LUCB,
    N_BP,
    RULE_PAIR,
    _ranks_above,
    _refresh_membership,
    random_pick,
    stop_test,
)
from purebandits.heaps import heap_init, heap_top, keyheap_init, keyheap_update
from purebandits.jit import borrow

__all__ = ["round_asktell_supported", "rat_new", "rat_ask", "rat_note", "rat_tell", "rat_told", "rat_stop",
           "rat_pair", "NZERO"]

# IW header: sizes, scalars of the state, the learner's settings
_N, _TAB, NZERO, _BUILT, _EPO_S, _EPO_P, _NPEND, _NDIRTY, _CODE, _KTOP, _RULE, _STRICT = range(12)
_HI = 16
# FW header: window level and level of each set, the stop tolerance, then the bound parameters
_K_S, _TT_S, _K_P, _TT_P, _EPS = range(5)
_BP0 = 8
_HF = _BP0 + N_BP


def round_asktell_supported(code: int, bp: np.ndarray, k: int, n: int) -> bool:
    """Whether this workspace applies: the conditions of the whole-run driver (LUCB1 or KL-LUCB, 1 <= k < n,
    a positive finite level at round 1)."""
    if code != BOUND_LUCB and code != BOUND_KL_LUCB:  # every other learner of the family starts without compiling it
        return False
    return bool(round_incremental_supported(code, bp, k, n))


def _sizes(n: int) -> tuple[int, int, int]:
    """(hash table size, exact-list size, row width) of the class workspaces over n arms."""
    size = 4
    while size < 2 * n:
        size *= 2
    return size, 2 * n + 64, n + 1


@njit(cache=True, inline="always")
def _views(IW, FW):  # pragma: no cover - compiled
    """The rows of the workspace as views of ``IW`` and ``FW`` (borrowed: no reference counting)."""
    IW, FW = borrow(IW), borrow(FW)
    n = IW[_N]
    size = IW[_TAB]
    w = n + 1
    ne = 2 * n + 64
    o = _HI
    iws = IW[o:o + _N_IW * w].reshape((_N_IW, w))
    o += _N_IW * w
    iwp = IW[o:o + _N_IW * w].reshape((_N_IW, w))
    o += _N_IW * w
    tabs = IW[o:o + size]
    o += size
    tabp = IW[o:o + size]
    o += size
    exls = IW[o:o + ne]
    o += ne
    exlp = IW[o:o + ne]
    o += ne
    scs = IW[o:o + 2]
    scp = IW[o + 2:o + 4]
    o += 4
    ht = IW[o:o + n]
    wt = IW[o + n:o + 2 * n]
    hb = IW[o + 2 * n:o + 3 * n]
    wb = IW[o + 3 * n:o + 4 * n]
    o += 4 * n
    zharm = IW[o:o + w]
    o += w
    zwhere = IW[o:o + n]
    vc = IW[o + n:o + 2 * n]
    dflag = IW[o + 2 * n:o + 3 * n]
    dlist = IW[o + 3 * n:o + 4 * n]
    bp = FW[_BP0:_BP0 + N_BP]
    o = _HF
    fws = FW[o:o + _N_FW * w].reshape((_N_FW, w))
    o += _N_FW * w
    fwp = FW[o:o + _N_FW * w].reshape((_N_FW, w))
    o += _N_FW * w
    means = FW[o:o + n]
    keyT = FW[o + n:o + 2 * n]
    keyB = FW[o + 2 * n:o + 3 * n]
    o += 3 * n
    zkey = FW[o:o + w]
    return (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag,
            dlist, means, keyT, keyB, zkey)


def rat_new(code: int, bp: np.ndarray, k: int, rule: int, eps: float, strict: bool, counts: np.ndarray,
            pending: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A workspace (IW, FW, top) for the state ``counts``, ``pending`` (needs :func:`round_asktell_supported`).

    The classes and bounds are built on first use once every arm has an answer.
    """
    n = int(counts.shape[0])
    size, ne, w = _sizes(n)
    IW = np.zeros(_HI + 2 * _N_IW * w + 2 * size + 2 * ne + 4 + 5 * n + w + 3 * n, dtype=np.int64)
    FW = np.zeros(_HF + 2 * _N_FW * w + 3 * n + w)
    IW[_N], IW[_TAB], IW[_CODE], IW[_KTOP], IW[_RULE], IW[_STRICT] = n, size, code, k, rule, int(bool(strict))
    FW[_EPS] = eps
    FW[_BP0:_BP0 + N_BP] = bp
    top = np.zeros(n, dtype=np.bool_)
    _init(IW, FW, counts, pending)
    return IW, FW, top


@njit(cache=True)
def _init(IW, FW, counts, pending):  # pragma: no cover - compiled
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    none = np.full(n, -math.inf)
    for iw, fw, tab, sc in ((iws, fws, tabs, scs), (iwp, fwp, tabp, scp)):
        iw[:] = -1  # the kernel's own rows (epochs, tightness, heaps) at -1
        sc[0] = classes_clear(iw, _ROWS, tab, n)
        sc[1] = 0
        fw[:] = -math.inf
        keyheap_init(none, fw[_UKEY], iw[_UHARM], iw[_UWHERE])
        keyheap_init(none, fw[_LKEY], iw[_LHARM], iw[_LWHERE])
    keyT[:] = -math.inf
    keyB[:] = -math.inf
    heap_init(keyT, ht, wt)
    heap_init(keyB, hb, wb)
    zk = np.full(n, -math.inf)
    nz = 0
    npend = 0
    for i in range(n):
        vc[i] = counts[i] + pending[i]
        npend += pending[i]
        if counts[i] == 0:
            zk[i] = -float(pending[i])
            nz += 1
    keyheap_init(zk, zkey, zharm, zwhere)
    dflag[:] = 0
    IW[NZERO] = nz
    IW[_NPEND] = npend
    IW[_BUILT] = 0
    IW[_NDIRTY] = 0
    IW[_EPO_S] = -1
    IW[_EPO_P] = -1
    FW[_K_S] = 0.0
    FW[_K_P] = 0.0


# ------------------------------------------------------------------------------------ internals
@njit(cache=True, inline="always")
def _mark(IW, dflag, dlist, i):  # pragma: no cover - compiled
    """Arm i's sampling class is stale (its mean, pending pulls or side changed)."""
    if dflag[i] == 0:
        dflag[i] = 1
        nd = IW[_NDIRTY]
        dlist[nd] = i
        IW[_NDIRTY] = nd + 1


@njit(cache=True)
def _build(IW, FW, counts, sums, top, e):  # pragma: no cover - compiled
    """Means, top-K and the stop classes at round ``e`` (every arm answered); every sampling class is stale."""
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    mbits = means.view(np.int64)
    tterm, K = _rdi._build(IW[_CODE], bp, IW[_KTOP], iws, fws, tabs, scs, means, mbits, counts, sums, top, keyT, ht,
                           wt, keyB, hb, wb, e)
    FW[_TT_S] = tterm
    FW[_K_S] = K
    IW[_EPO_S] = e
    for i in range(n):
        _mark(IW, dflag, dlist, i)
    IW[_BUILT] = 1


@njit(cache=True)
def _pick(IW, FW, counts, top, stop, e):  # pragma: no cover - compiled
    """(h, l, lcb_h, ucb_l) at round ``e``: the stop set's (answered counts) if ``stop``, else the sampling set's.

    The sampling set first takes its stale arms into their classes (before any re-keying, which
    reads the representatives' means), then moves to round ``e``. The list of classes made exact
    this round is emptied (their keys back to window keys) whenever a search could overflow it.
    """
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    code = IW[_CODE]
    if stop:
        iw, fw, tab, sc, exl, cnt, ep_i, k_i, tt_i = iws, fws, tabs, scs, exls, counts, _EPO_S, _K_S, _TT_S
    else:
        iw, fw, tab, sc, exl, cnt, ep_i, k_i, tt_i = iwp, fwp, tabp, scp, exlp, vc, _EPO_P, _K_P, _TT_P
        nd = IW[_NDIRTY]
        if nd > 0:
            mbits = means.view(np.int64)
            K = FW[_K_P]
            ep = IW[_EPO_P]
            for j in range(nd):
                i = dlist[j]
                dflag[i] = 0
                _rejoin(code, iw, fw, tab, sc, n, i, _LOWER if top[i] else _UPPER, means, mbits, cnt, K, ep)
            IW[_NDIRTY] = 0
    if IW[ep_i] != e:
        tterm, K = _new_round(code, bp, iw, fw, sc, exl, means, n, e, FW[k_i])
        FW[tt_i] = tterm
        FW[k_i] = K
        IW[ep_i] = e
    tterm = FW[tt_i]
    K = FW[k_i]
    if sc[1] > n + 32:  # a search adds at most n classes: keep the list within its 2n + 64
        _new_round(code, bp, iw, fw, sc, exl, means, n, e, K)
    h = _search(code, bp, iw, fw, sc, exl, n, np.int64(_LOWER), means, cnt, tterm, K, e)
    lcb_h = fw[_CEXV, iw[_CLS, h]]
    if sc[1] > n + 32:
        _new_round(code, bp, iw, fw, sc, exl, means, n, e, K)
    el = _search(code, bp, iw, fw, sc, exl, n, np.int64(_UPPER), means, cnt, tterm, K, e)
    return h, el, lcb_h, fw[_CEXV, iw[_CLS, el]]


@njit(cache=True)
def _stop(IW, FW, counts, sums, top, e):  # pragma: no cover - compiled
    """The LUCB stop test on the answered pulls at round ``e``: 1 stop, 0 not, -1 not tested (an arm has no answer)."""
    if IW[NZERO] > 0:
        return -1
    if IW[_BUILT] == 0:
        _build(IW, FW, counts, sums, top, e)
    _h, _el, lcb_h, ucb_l = _pick(IW, FW, counts, top, np.bool_(True), e)  # runtime: one specialisation
    return 1 if stop_test(lcb_h, ucb_l, FW[_EPS], IW[_STRICT] != 0) else 0


@njit(cache=True)
def _note(counts, pending, IW, FW, arm):  # pragma: no cover - compiled
    """``pending[arm]`` changed (an ask or a cancel): the virtual count, the total and the stale marks follow."""
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    d = counts[arm] + pending[arm] - vc[arm]
    vc[arm] += d
    IW[_NPEND] += d
    if counts[arm] == 0:
        keyheap_update(zkey, zharm, zwhere, n, arm, -float(pending[arm]))
    elif IW[_BUILT] == 1:
        _mark(IW, dflag, dlist, arm)


@njit(cache=True)
def _told(counts, sums, pending, IW, FW, top, arm):  # pragma: no cover - compiled
    """Arm ``arm`` got an answer (counts, sums and pending already updated; its virtual count is unchanged)."""
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    IW[_NPEND] -= 1
    if counts[arm] == 1:
        keyheap_update(zkey, zharm, zwhere, n, arm, -math.inf)
        IW[NZERO] -= 1
    if IW[_BUILT] == 0:
        return
    code = IW[_CODE]
    K = FW[_K_S]
    ep = IW[_EPO_S]
    mbits = means.view(np.int64)
    means[arm] = sums[arm] / counts[arm]
    _refresh_membership(arm, top, means, keyT, ht, wt, keyB, hb, wb)
    _rejoin(code, iws, fws, tabs, scs, n, arm, _LOWER if top[arm] else _UPPER, means, mbits, counts, K, ep)
    _mark(IW, dflag, dlist, arm)
    while True:  # restore "every top arm precedes every other arm" (one swap suffices)
        w = n - 1 - heap_top(ht)
        b = heap_top(hb)
        if not _ranks_above(means, b, w):
            break
        top[w] = False
        top[b] = True
        _refresh_membership(w, top, means, keyT, ht, wt, keyB, hb, wb)
        _refresh_membership(b, top, means, keyT, ht, wt, keyB, hb, wb)
        _rejoin(code, iws, fws, tabs, scs, n, w, np.int64(_UPPER), means, mbits, counts, K, ep)
        _rejoin(code, iws, fws, tabs, scs, n, b, np.int64(_LOWER), means, mbits, counts, K, ep)
        _mark(IW, dflag, dlist, w)
        _mark(IW, dflag, dlist, b)


# ------------------------------------------------------------------------------------ entry points
@njit(cache=True)
def rat_ask(counts, sums, pending, IW, FW, top, rounds, u):  # pragma: no cover - compiled
    """One ask that is not a queued arm: returns (arm, l) and adds the pending pull.

    During the initialisation (some arm has no answer) ``arm`` is the unanswered arm with the
    fewest pending pulls (lowest index on ties) and ``l`` is -2 (no round: ``rounds`` is not
    read). Otherwise (h, l) is the sampling pair at round ``rounds + 1`` (answered means,
    answered + pending counts) and ``arm`` is h (pair rule; the caller queues l and counts the
    round) or :func:`random_pick` with the uniform ``u`` (random rule; ``l`` is then -1).
    """
    counts, sums, pending, top, IW, FW = borrow(counts), borrow(sums), borrow(pending), borrow(top), borrow(IW), \
        borrow(FW)
    (n, bp, iws, fws, tabs, scs, exls, iwp, fwp, tabp, scp, exlp, ht, wt, hb, wb, zharm, zwhere, vc, dflag, dlist,
     means, keyT, keyB, zkey) = _views(IW, FW)
    if IW[NZERO] > 0:
        arm = zharm[0]
        pending[arm] += 1
        _note(counts, pending, IW, FW, arm)
        return arm, -2
    e = rounds + 1
    if IW[_BUILT] == 0:
        _build(IW, FW, counts, sums, top, e)
    # no pull pending: the sampling bounds are the stop bounds (the last stop test left them exact at e)
    h, el, _lo, _hi = _pick(IW, FW, counts, top, IW[_NPEND] == 0, e)
    if IW[_RULE] == RULE_PAIR:
        arm = h
        second = el
    else:
        arm = random_pick(h, el, vc[h], vc[el], u)
        second = -1
    pending[arm] += 1
    _note(counts, pending, IW, FW, arm)
    return arm, second


@njit(cache=True)
def rat_pair(counts, sums, pending, IW, FW, top, rounds):  # pragma: no cover - compiled
    """The sampling pair (h, l) at round ``rounds + 1`` on the current state, every arm answered (for tests)."""
    counts, sums, pending, top, IW, FW = borrow(counts), borrow(sums), borrow(pending), borrow(top), borrow(IW), \
        borrow(FW)
    e = rounds + 1
    if IW[_BUILT] == 0:
        _build(IW, FW, counts, sums, top, e)
    h, el, _lo, _hi = _pick(IW, FW, counts, top, IW[_NPEND] == 0, e)
    return h, el


@njit(cache=True)
def rat_note(counts, pending, IW, FW, arm, delta):  # pragma: no cover - compiled
    """Add ``delta`` to ``pending[arm]`` (0: already changed by the caller) and update the workspace."""
    counts, pending, IW, FW = borrow(counts), borrow(pending), borrow(IW), borrow(FW)
    pending[arm] += delta
    _note(counts, pending, IW, FW, arm)


@njit(cache=True)
def rat_told(counts, sums, pending, IW, FW, top, arm):  # pragma: no cover - compiled
    """:func:`_told` for a tell applied by the caller (``Learner.tell``)."""
    counts, sums, pending, top, IW, FW = borrow(counts), borrow(sums), borrow(pending), borrow(top), borrow(IW), \
        borrow(FW)
    _told(counts, sums, pending, IW, FW, top, arm)


@njit(cache=True)
def rat_stop(counts, sums, pending, IW, FW, top, rounds):  # pragma: no cover - compiled
    """The stop test at round ``rounds + 1`` on the current state (after a cancel, or a tell applied by the caller)."""
    counts, sums, top, IW, FW = borrow(counts), borrow(sums), borrow(top), borrow(IW), borrow(FW)
    return _stop(IW, FW, counts, sums, top, rounds + 1)


@njit(cache=True)
def rat_tell(counts, sums, sumsq, pending, IW, FW, top, arm, reward, rounds):  # pragma: no cover - compiled
    """A whole tell: -2 if ``arm`` has no pending pull (nothing changed), else the pull is recorded (the same
    float operations as ``Learner.tell``) and the stop test's answer at round ``rounds + 1`` is returned."""
    counts, sums, sumsq, pending, top = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending), borrow(top)
    IW, FW = borrow(IW), borrow(FW)
    if pending[arm] <= 0:
        return -2
    pending[arm] -= 1
    counts[arm] += 1
    sums[arm] += reward
    sumsq[arm] += reward * reward
    _told(counts, sums, pending, IW, FW, top, arm)
    return _stop(IW, FW, counts, sums, top, rounds + 1)
