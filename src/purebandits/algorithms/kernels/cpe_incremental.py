"""CLUCB and lil'CLUCB on the top-K decision class without O(n) work per pull, same decisions.

The rule (Chen et al. 2014 Alg. 1; JLQ17 App. C Alg. 2), as :func:`~purebandits.algorithms.kernels.cpe_rules.
_cpe_topk_kernel` evaluates it with two O(n) oracle calls per pull: M = top-K of the means, every
arm's radius, ``tilde = mu - rad`` inside M and ``mu + rad`` outside, M~ = top-K of tilde
(:func:`~purebandits.ranking.topk_fill`'s order: larger first, ties to the lower index); stop when
M~ == M (lil'CLUCB) or ``w~(M~) <= w~(M)`` (CLUCB, sums in arm order), else pull the arm of
``M symdiff M~`` with the largest radius (ties to the lower index).

For the top-K class ``|M~ \\ M| = |M \\ M~| <= K``: M~ is the top-K of the K inside values and the
top-K outside values, so only those are needed.

- **M** is kept by :func:`~purebandits.ranking.topk_tracker_update` (one mean changes per answer).
- **Classes.** Outside arms with the same mean (bit for bit) and count have the same tilde, so only
  the lowest-indexed one of each class sits in a key heap (:mod:`purebandits.heaps`); a hash table
  finds an arm's class and each class lists its members by index
  (:mod:`purebandits.algorithms.kernels.arm_classes`). The top-K outside arms are then the first K members
  of the best classes (the classes whose tilde is at least that of the class where K arms are
  covered), so 999 tied arms cost one class, not 999 arms.
- **Keys.** lil'CLUCB's radius depends on the count only: a class's key is its exact tilde.
  CLUCB's grows with the round t: keys are upper keys for a window of rounds (the level
  ``2 log(4 n t1^3/conf)`` at ``t1 = bonus_horizon(t, n)``, inflated by ``UPPER_KEY_MARGIN``; each
  round's level is computed with the reference's call and the keys are rebuilt as soon as it
  exceeds theirs), as for :func:`~purebandits.heaps.keyheap_best_bonus`.
- **Walk.** The best classes are found by walking down from the top of the heap and skipping every
  subtree whose key is below the tilde of the class where K arms are covered so far (no class in
  it can enter M~ or tie); each class visited gets its exact tilde this round (the same arithmetic
  as :func:`~purebandits.algorithms.kernels.cpe_rules.cpe_radii`, so the same bits). The heap is not
  changed by the walk, so nothing is undone at the next round. The classes found are kept in a
  buffer in rank order up to K = ``_SMALL``, and above it in a heap, worst first, trimmed as the
  others cover K (O(log K) a class; the buffer's O(classes found) a class made a round O(K^2) at
  K = N/2).
- The inside values are K exact evaluations; M~ (by insertion up to K = ``_SMALL``, by a quickselect
  above), the symmetric difference and the stop test are O(K) (O(K log K), or O(n) for a large K, for
  CLUCB's sums in arm order when M~ != M). lil'CLUCB's radii are cached per arm.
- A round still finds at least K classes, so where K is a sizeable share of the arms the two plain
  O(n) oracle calls of the reference kernel are cheaper: the learners' ``run_compiled`` takes this
  kernel only while K <= ``_SMALL`` or 40 K <= n (:data:`purebandits.algorithms.cpe.INCREMENTAL_SHARE`).

Ask/tell (pending pulls): M, M~ and the stop test depend on the answered pulls only, so asks and
cancels change nothing but the pick, which takes the radii of the <= 2K arms of the symmetric
difference at answered + pending counts. Before every arm has an answer, a key heap by pending
pulls gives the reference's initialisation pick (fewest pending, then lowest index). The workspace
(``fw``, ``iw``, ``bw`` from :func:`cpe_inc_new`) is a cache of the state arrays, never serialised.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.arm_classes import (
    NO_SIDE,
    ClassRows,
    class_find,
    class_link,
    class_open,
    class_release,
    class_unlink,
    classes_clear,
)
from purebandits.algorithms.kernels.cpe_rules import LIL, _clucb_scale, cpe_radius_s
from purebandits.heaps import UPPER_KEY_MARGIN, bonus_horizon, keyheap_init, keyheap_key, keyheap_update
from purebandits.instances.rewards import stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.ranking import topk_tracker_fill, topk_tracker_update

__all__ = ["cpe_inc_new", "cpe_inc_reset", "cpe_inc_ask", "cpe_inc_ask_allowed", "cpe_inc_note", "cpe_inc_tell",
           "cpe_inc_told", "cpe_inc_kernel", "IS_ROW", "IS_BUILT", "IS_STOP"]

# float64 rows: per arm, per class, heaps (keys in heap order), scratch, scalars
_MU, _RAD, _UKEY, _CKEY, _THKEY, _ZKEY, _SCR, _CV, _SV, _SRV, _BV, _FS = range(12)
_N_FW = 12
# float scalars (row _FS)
_LEV, _C1, _CONF, _EPS, _SIGMA = range(5)
# int64 rows: outside heap, per arm class links, per class, free list, top-k tracker, initialisation
# heap, scratch (candidates, selection, symmetric difference, M~, sort, walk), scalars; then the hash
# table, in as many rows as it takes (rows from _TAB on, read as one array)
(_UHARM, _UWHERE, _CLS, _NXT, _PRV, _CHEAD, _CTAIL, _CPB, _CT, _CSLOT, _CSIZE, _FREE, _THARM, _TWHERE,
 _TMEM, _ZHARM, _ZWHERE, _CA, _SA, _SD, _MTL, _SRA, _BA, _STK, _IS, _TAB) = range(26)
#: the int scalars' row, and the entries Python reads (through a memoryview of that row)
IS_ROW = _IS
(_NZERO, IS_BUILT, _NFREE, _NSD, IS_STOP, _K, _MODE, _SETS_EQ, _N, _TABMASK) = range(10)
#: the class rows (:mod:`purebandits.algorithms.kernels.arm_classes`; outside arms only, no side)
_ROWS = ClassRows(cls=_CLS, nxt=_NXT, prv=_PRV, head=_CHEAD, tail=_CTAIL, pb=_CPB, t=_CT, side=NO_SIDE, slot=_CSLOT,
                  size=_CSIZE, free=_FREE)
#: up to this K the selection of M~ and the sorts are insertions into a buffer (no allocation)
_SMALL = 16

_NEG_INF = -math.inf


def cpe_inc_new(n: int, k: int, mode: int, conf: float, eps: float, sigma: float,
                sets_equal: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty workspace (fw, iw, bw) for n arms; :func:`cpe_inc_reset` fills it from a state.

    ``bw[0]`` is M's mask (the tracker's) and ``bw[1]`` M~'s, once built.
    """
    tab = 4
    while tab < 2 * n:
        tab *= 2
    width = max(n + 1, 16)
    fw = np.full((_N_FW, width), -math.inf)
    iw = np.full((_TAB + -(-tab // width), width), -1, dtype=np.int64)
    bw = np.zeros((2, n), dtype=np.bool_)
    fw[_FS, _CONF], fw[_FS, _EPS], fw[_FS, _SIGMA] = conf, eps, sigma
    fw[_FS, _LEV] = fw[_FS, _C1] = 0.0
    iw[_IS, :] = 0
    iw[_IS, _K], iw[_IS, _MODE], iw[_IS, _SETS_EQ], iw[_IS, _N], iw[_IS, _TABMASK] = k, mode, int(sets_equal), n, \
        tab - 1
    return fw, iw, bw


@njit(cache=True, inline="always")
def _radius(fw, iw, u):  # pragma: no cover - compiled
    """The arm's radius at count ``u`` > 0: :func:`cpe_radii`'s value this round (level ``fw[_FS, _LEV]``)."""
    if iw[_IS, _MODE] == LIL:
        return cpe_radius_s(u, 0.0, LIL, fw[_FS, _CONF], fw[_FS, _EPS], fw[_FS, _SIGMA], iw[_IS, _N])
    return fw[_FS, _SIGMA] * math.sqrt(fw[_FS, _LEV] / u)


@njit(cache=True, inline="always")
def _tracker(fw, iw, bw, n):  # pragma: no cover - compiled
    """The top-k tracker (:mod:`purebandits.ranking`) over the means, as views of the workspace."""
    return bw[0], iw[_TMEM, :iw[_IS, _K]], fw[_THKEY, :n + 1], iw[_THARM, :n + 1], iw[_TWHERE, :n]


@njit(cache=True, inline="always")
def _set_key(fw, iw, n, arm, value):  # pragma: no cover - compiled
    """Give ``arm`` the key ``value`` in the heap of outside classes."""
    if keyheap_key(fw[_UKEY], iw[_UWHERE], arm) != value:
        keyheap_update(fw[_UKEY], iw[_UHARM], iw[_UWHERE], n, arm, value)


@njit(cache=True, inline="always")
def _table(iw):  # pragma: no cover - compiled
    """The hash table of classes (linear probing; class ids, -1 for a free slot): the rows from ``_TAB`` on."""
    return iw[_TAB:].reshape(-1)


@njit(cache=True)
def _class_remove(fw, iw, n, i):  # pragma: no cover - compiled
    """Take outside arm i out of its class (the next member inherits the key; an empty class is freed)."""
    c, nx, was_head = class_unlink(iw, _ROWS, i)
    if was_head:
        _set_key(fw, iw, n, i, _NEG_INF)
        if nx >= 0:
            _set_key(fw, iw, n, nx, fw[_CKEY, c])
    if iw[_CSIZE, c] == 0:
        iw[_IS, _NFREE] = class_release(iw, _ROWS, _table(iw), iw[_IS, _TABMASK], c, iw[_IS, _NFREE])


@njit(cache=True)
def _class_add(counts, fw, iw, n, i, pb):  # pragma: no cover - compiled
    """Put outside arm i (mean bits ``pb``) in the class of its mean and count, creating it if new."""
    tab = _table(iw)
    T = counts[i]
    slot, c = class_find(iw, _ROWS, tab, iw[_IS, _TABMASK], pb, T, 0)
    if c < 0:
        c, iw[_IS, _NFREE] = class_open(iw, _ROWS, tab, slot, iw[_IS, _NFREE], pb, T, 0, i)
        if iw[_IS, _MODE] == LIL:  # the exact tilde, valid at every round
            fw[_CKEY, c] = fw[_MU, i] + fw[_RAD, i]
        else:  # an upper key for the rounds of the window
            fw[_CKEY, c] = fw[_MU, i] + fw[_FS, _SIGMA] * math.sqrt(fw[_FS, _C1] / float(T))
        _set_key(fw, iw, n, i, fw[_CKEY, c])
    elif class_link(iw, _ROWS, c, i):  # i is the new representative: it takes the key from the old one
        _set_key(fw, iw, n, iw[_NXT, i], _NEG_INF)
        _set_key(fw, iw, n, i, fw[_CKEY, c])


@njit(cache=True)
def _sync(counts, fw, iw, bw, n, mbits, i):  # pragma: no cover - compiled
    """Arm i in no class if it is in M, else in the class of its current mean and count."""
    c = iw[_CLS, i]
    if bw[0, i]:
        if c >= 0:
            _class_remove(fw, iw, n, i)
        return
    if c >= 0:
        if iw[_CPB, c] == mbits[i] and iw[_CT, c] == counts[i]:
            return
        _class_remove(fw, iw, n, i)
    _class_add(counts, fw, iw, n, i, mbits[i])


@njit(cache=True)
def _rekey_window(fw, iw, n):  # pragma: no cover - compiled
    """CLUCB: every class keyed at the window level ``fw[_FS, _C1]``, and the heap rebuilt from them."""
    scr = fw[_SCR, :n]
    scr[:] = _NEG_INF
    sigma = fw[_FS, _SIGMA]
    c1 = fw[_FS, _C1]
    for c in range(n):
        if iw[_CSIZE, c] == 0:
            continue
        head = iw[_CHEAD, c]
        key = fw[_MU, head] + sigma * math.sqrt(c1 / float(iw[_CT, c]))
        fw[_CKEY, c] = key
        scr[head] = key
    keyheap_init(scr, fw[_UKEY, :n + 1], iw[_UHARM, :n + 1], iw[_UWHERE, :n])


@njit(cache=True)
def _new_round(fw, iw, n, t):  # pragma: no cover - compiled
    """Round ``t``: CLUCB's level (the reference's call), and a new window of keys once it exceeds theirs."""
    if iw[_IS, _MODE] == LIL:
        return
    conf = fw[_FS, _CONF]
    lev = _clucb_scale(float(t), conf, n)
    fw[_FS, _LEV] = lev
    if lev > fw[_FS, _C1]:
        fw[_FS, _C1] = max(lev, _clucb_scale(bonus_horizon(float(t), n), conf, n) * UPPER_KEY_MARGIN)
        _rekey_window(fw, iw, n)


@njit(cache=True, inline="always")
def _ranks_above(va, a, vb, b):  # pragma: no cover - compiled
    """(va, a) before (vb, b) in topk_fill's order: larger value, ties to the lower index."""
    return va > vb or (va == vb and a < b)


@njit(cache=True)
def _sum_in_arm_order(arms, vals, m, sa, sv, mask):  # pragma: no cover - compiled
    """``sum(vals)`` added in increasing arm order from 0.0, as :func:`cpe_weights` adds them.

    ``mask`` marks the m arms (over all n). Up to ``_SMALL`` arms an insertion sort; for a set that is a
    large share of the arms (K = N/2) a pass over the mask in arm order (O(n) without a sort: at N =
    1,000, K = 500 a sort of the K arms took most of CLUCB's round); else a sort of the arms.
    """
    n = mask.shape[0]
    if m > _SMALL and n <= 4 * m * math.log2(m):
        for j in range(m):
            sv[arms[j]] = vals[j]
        s = 0.0
        for a in range(n):
            if mask[a]:
                s += sv[a]
        return s
    if m > _SMALL:
        order = np.argsort(arms[:m])
        s = 0.0
        for j in range(m):
            s += vals[order[j]]
        return s
    for j in range(m):  # insertion sort by arm
        a = arms[j]
        v = vals[j]
        p = j
        while p > 0 and sa[p - 1] > a:
            sa[p] = sa[p - 1]
            sv[p] = sv[p - 1]
            p -= 1
        sa[p] = a
        sv[p] = v
    s = 0.0
    for j in range(m):
        s += sv[j]
    return s


@njit(cache=True)
def _select_large(ca, cv, nc, k, sa, sv):  # pragma: no cover - compiled
    """The k best of the nc candidates (arms ``ca``, values ``cv``) into ``sa``/``sv`` in no order, for K above
    ``_SMALL``: a quickselect (M~ is a set: its mask, the symmetric difference and the sums in arm order do
    not depend on the order; two sorts of the ~2K candidates cost more at K = N/2)."""
    for j in range(nc):
        sa[j] = ca[j]
        sv[j] = cv[j]
    lo = 0
    hi = nc - 1
    while lo < hi:  # Hoare's selection: the ranks are a strict order (the arms differ)
        mid = (lo + hi) // 2
        pa, pv = sa[mid], sv[mid]
        i, j = lo, hi
        while i <= j:
            while _ranks_above(sv[i], sa[i], pv, pa):
                i += 1
            while _ranks_above(pv, pa, sv[j], sa[j]):
                j -= 1
            if i <= j:
                sa[i], sa[j] = sa[j], sa[i]
                sv[i], sv[j] = sv[j], sv[i]
                i += 1
                j -= 1
        if k - 1 <= j:
            hi = j
        elif k - 1 >= i:
            lo = i
        else:
            break


@njit(cache=True)
def _select(ca, cv, nc, k, sa, sv):  # pragma: no cover - compiled
    """The k best (K up to ``_SMALL``) of the nc candidates (arms ``ca``, values ``cv``) into ``sa``/``sv``,
    best first, by insertion."""
    m = 0
    for j in range(nc):
        a = ca[j]
        v = cv[j]
        if m == k:
            if not _ranks_above(v, a, sv[k - 1], sa[k - 1]):
                continue
            p = k - 1
        else:
            p = m
            m += 1
        while p > 0 and _ranks_above(v, a, sv[p - 1], sa[p - 1]):
            sa[p] = sa[p - 1]
            sv[p] = sv[p - 1]
            p -= 1
        sa[p] = a
        sv[p] = v


@njit(cache=True, inline="always")
def _worse(va, a, vb, b):  # pragma: no cover - compiled
    """(va, a) after (vb, b) in topk_fill's order (the order is strict: the arms differ)."""
    return _ranks_above(vb, b, va, a)


@njit(cache=True, inline="always")
def _class_size(iw, a):  # pragma: no cover - compiled
    """The number of arms in the class whose representative is ``a``."""
    return iw[_CSIZE, iw[_CLS, a]]


@njit(cache=True)
def _found_sift_down(ba, bv, nb, p):  # pragma: no cover - compiled
    """Restore the worst-first heap ``ba``/``bv`` (``nb`` entries) below position ``p``."""
    a = ba[p]
    v = bv[p]
    while True:
        c = 2 * p + 1
        if c >= nb:
            break
        if c + 1 < nb and _worse(bv[c + 1], ba[c + 1], bv[c], ba[c]):
            c += 1
        if not _worse(bv[c], ba[c], v, a):
            break
        ba[p] = ba[c]
        bv[p] = bv[c]
        p = c
    ba[p] = a
    bv[p] = v


@njit(cache=True)
def _found_push(iw, ba, bv, nb, cover, a, v):  # pragma: no cover - compiled
    """Add the class of representative ``a`` (tilde ``v``) to the found classes; returns (nb, cover)."""
    p = nb
    while p > 0:
        q = (p - 1) // 2
        if not _worse(v, a, bv[q], ba[q]):
            break
        ba[p] = ba[q]
        bv[p] = bv[q]
        p = q
    ba[p] = a
    bv[p] = v
    return nb + 1, cover + _class_size(iw, a)


@njit(cache=True)
def _found_pop(ba, bv, nb):  # pragma: no cover - compiled
    """Remove the worst found class (the heap's top); returns the new count."""
    nb -= 1
    if nb > 0:
        ba[0] = ba[nb]
        bv[0] = bv[nb]
        _found_sift_down(ba, bv, nb, 0)
    return nb


@njit(cache=True)
def _found_trim(iw, ba, bv, nb, cover, k, ta, tv):  # pragma: no cover - compiled
    """Drop the classes below the tilde where ``k`` arms are covered (``cover >= k``); returns (nb, cover).

    Sorted best first, the covering class is the first where the running count of arms reaches k, and
    every class with a smaller tilde goes (those with its tilde stay). So the worst classes, taken as a
    group of equal tilde, go while the others still cover k: then the covering class is in the worst group
    and the heap's top holds its tilde. A group of one is checked without leaving the heap; a larger
    one (a tie of tildes) is taken out into ``ta``/``tv`` and put back if it must stay. O(log) per class
    dropped, where the buffer kept sorted cost O(classes found) per class found (K = N/2: 160 us a pull
    at N = 1,000).
    """
    while nb > 0:
        w = ba[0]
        v = bv[0]
        tied = (nb > 1 and bv[1] == v) or (nb > 2 and bv[2] == v)
        if not tied:
            s = _class_size(iw, w)
            if cover - s < k:
                break
            cover -= s
            nb = _found_pop(ba, bv, nb)
            continue
        g = 0
        size = 0
        while nb > 0 and bv[0] == v:
            ta[g] = ba[0]
            tv[g] = v
            size += _class_size(iw, ba[0])
            g += 1
            nb = _found_pop(ba, bv, nb)
        if cover - size >= k:
            cover -= size
            continue
        for j in range(g):
            nb, _ = _found_push(iw, ba, bv, nb, 0, ta[j], tv[j])
        break
    return nb, cover


@njit(cache=True)
def _found_add(iw, ba, bv, nb, cover, k, a, v, ta, tv):  # pragma: no cover - compiled
    """Add a found class (K above ``_SMALL``); returns (nb, cover, the covering tilde or -inf)."""
    nb, cover = _found_push(iw, ba, bv, nb, cover, a, v)
    if cover < k:
        return nb, cover, _NEG_INF
    nb, cover = _found_trim(iw, ba, bv, nb, cover, k, ta, tv)
    return nb, cover, bv[0]


@njit(cache=True)
def _decide(counts, fw, iw, bw, n):  # pragma: no cover - compiled
    """M~ from the K inside values and the best outside classes; the symmetric difference and the stop test."""
    k = iw[_IS, _K]
    lil = iw[_IS, _MODE] == LIL
    sigma = fw[_FS, _SIGMA]
    lev = fw[_FS, _LEV]
    mu = fw[_MU]
    ukey = fw[_UKEY]
    uharm = iw[_UHARM]
    ca = iw[_CA]
    cv = fw[_CV]
    nc = 0
    for j in range(k):  # the inside values: mu - rad
        i = iw[_TMEM, j]
        ca[nc] = i
        cv[nc] = mu[i] - (fw[_RAD, i] if lil else sigma * math.sqrt(lev / float(counts[i])))
        nc += 1
    # the best outside classes: walk the heap, skipping subtrees keyed below thr, the tilde of the
    # class where k arms are covered (ba/bv: the classes found with tilde >= thr)
    ba = iw[_BA]
    bv = fw[_BV]
    nb = 0
    cover = 0
    small = k <= _SMALL
    thr = _NEG_INF
    stack = iw[_STK]
    stack[0] = 0
    size = 1
    while size > 0:
        size -= 1
        p = stack[size]
        key = ukey[p]
        if key == _NEG_INF or key < thr:
            continue
        a = uharm[p]
        v = key if lil else mu[a] + sigma * math.sqrt(lev / float(counts[a]))
        if v >= thr and small:
            # up to K = _SMALL a buffer kept in order (larger tilde first, ties to the lower representative)
            # and counted anew: a few classes, cheaper than the heap (K = 8: 1.1 against 1.7 M pulls/s)
            q = nb
            while q > 0 and _ranks_above(v, a, bv[q - 1], ba[q - 1]):
                ba[q] = ba[q - 1]
                bv[q] = bv[q - 1]
                q -= 1
            ba[q] = a
            bv[q] = v
            nb += 1
            cover = 0
            for q in range(nb):
                cover += iw[_CSIZE, iw[_CLS, ba[q]]]
                if cover >= k:
                    thr = bv[q]
                    break
            while bv[nb - 1] < thr:  # classes below thr cannot enter M~
                nb -= 1
        elif v >= thr:  # above, a heap of the found classes, worst first: O(log) a class
            nb, cover, thr = _found_add(iw, ba, bv, nb, cover, k, a, v, iw[_SRA], fw[_SRV])
        ch = 2 * p + 1
        if ch < n:
            d = ch + 1  # ukey[n] is the sentinel (-inf)
            if ukey[d] > ukey[ch]:
                ch, d = d, ch
            # the larger child goes on last, so it is walked first and raises thr sooner
            if d < n and ukey[d] >= thr and ukey[d] != _NEG_INF:
                stack[size] = d
                size += 1
            if ukey[ch] >= thr and ukey[ch] != _NEG_INF:
                stack[size] = ch
                size += 1
    for q in range(nb):  # each class's first k members (equal tilde: the lower indices first)
        m = ba[q]
        take = 0
        while m >= 0 and take < k:
            ca[nc] = m
            cv[nc] = bv[q]
            nc += 1
            take += 1
            m = iw[_NXT, m]
    sa = iw[_SA]
    sv = fw[_SV]
    if small:
        _select(ca, cv, nc, k, sa, sv)
    else:
        _select_large(ca, cv, nc, k, sa, sv)
    # M~'s mask, the symmetric difference (outside arms of M~, then the arms of M not in M~)
    mtl = iw[_MTL]
    for j in range(k):
        if mtl[j] >= 0:
            bw[1, mtl[j]] = False
    for j in range(k):
        mtl[j] = sa[j]
        bw[1, sa[j]] = True
    sd = iw[_SD]
    nsd = 0
    for j in range(k):
        if not bw[0, sa[j]]:
            sd[nsd] = sa[j]
            nsd += 1
    nout = nsd
    for j in range(k):
        i = iw[_TMEM, j]
        if not bw[1, i]:
            sd[nsd] = i
            nsd += 1
    iw[_IS, _NSD] = nsd
    if nout == 0:  # M~ == M: both rules stop (CLUCB: the two sums are the same additions)
        stop = True
    elif iw[_IS, _SETS_EQ] == 1:
        stop = False
    else:
        wm = _sum_in_arm_order(ca, cv, k, iw[_SRA], fw[_SRV], bw[0])  # the inside candidates are M
        wt = _sum_in_arm_order(sa, sv, k, iw[_SRA], fw[_SRV], bw[1])
        stop = wt <= wm
    iw[_IS, IS_STOP] = 1 if stop else 0


@njit(cache=True)
def _build(counts, sums, fw, iw, bw, n, t):  # pragma: no cover - compiled
    """M, the classes, the keys and the decisions of round ``t`` from scratch (every arm has an answer)."""
    k = iw[_IS, _K]
    mu = fw[_MU, :n]
    for i in range(n):
        mu[i] = sums[i] / counts[i]
    if iw[_IS, _MODE] == LIL:
        for i in range(n):
            fw[_RAD, i] = _radius(fw, iw, float(counts[i]))
    topk_tracker_fill(_tracker(fw, iw, bw, n), mu, k)
    iw[_IS, _NFREE] = classes_clear(iw, _ROWS, _table(iw), n)
    iw[_MTL, :k] = -1
    bw[1, :] = False
    keyheap_init(np.full(n, _NEG_INF), fw[_UKEY, :n + 1], iw[_UHARM, :n + 1], iw[_UWHERE, :n])
    fw[_FS, _C1] = -math.inf  # CLUCB: the round below opens a window (its level keys the classes)
    _new_round(fw, iw, n, t)
    mbits = mu.view(np.int64)
    for i in range(n):  # in index order, so every arm joins its class at the end
        if not bw[0, i]:
            _class_add(counts, fw, iw, n, i, mbits[i])
    iw[_IS, IS_BUILT] = 1
    _decide(counts, fw, iw, bw, n)


@njit(cache=True)
def _told_built(counts, sums, fw, iw, bw, n, arm, t):  # pragma: no cover - compiled
    """Arm ``arm`` got an answer (counts and sums updated; every arm answered): the decisions of round ``t``."""
    mu = fw[_MU, :n]
    mu[arm] = sums[arm] / counts[arm]
    if iw[_IS, _MODE] == LIL:
        fw[_RAD, arm] = _radius(fw, iw, float(counts[arm]))
    if iw[_CLS, arm] >= 0:
        _class_remove(fw, iw, n, arm)
    out, inn = topk_tracker_update(_tracker(fw, iw, bw, n), mu, arm)
    mbits = mu.view(np.int64)
    _sync(counts, fw, iw, bw, n, mbits, arm)
    if out >= 0:
        _sync(counts, fw, iw, bw, n, mbits, out)
        _sync(counts, fw, iw, bw, n, mbits, inn)
    _new_round(fw, iw, n, t)
    _decide(counts, fw, iw, bw, n)


@njit(cache=True, inline="always")
def _pick(counts, pending, use_pending, fw, iw):  # pragma: no cover - compiled
    """The arm of M symdiff M~ with the largest radius (ties to the lower index); -1 if none.

    Radii at answered (+ pending, with ``use_pending``) counts, at the round of the last decision.
    """
    lil = iw[_IS, _MODE] == LIL
    best = -1.0
    arm = -1
    for j in range(iw[_IS, _NSD]):
        a = iw[_SD, j]
        if use_pending and pending[a] > 0:
            r = _radius(fw, iw, float(counts[a] + pending[a]))
        elif lil:
            r = fw[_RAD, a]
        else:
            r = _radius(fw, iw, float(counts[a]))
        if arm < 0 or r > best or (r == best and a < arm):
            best = r
            arm = a
    return arm


# ------------------------------------------------------------------------------------ ask/tell
@njit(cache=True)
def cpe_inc_reset(counts, sums, pending, fw, iw, bw, t):  # pragma: no cover - compiled
    """Fill the workspace from the state: the initialisation heap, and everything else if every arm has an answer."""
    n = counts.shape[0]
    key = np.full(n, _NEG_INF)
    nz = 0
    for i in range(n):
        if counts[i] == 0:
            key[i] = -float(pending[i])
            nz += 1
    keyheap_init(key, fw[_ZKEY, :n + 1], iw[_ZHARM, :n + 1], iw[_ZWHERE, :n])
    iw[_IS, _NZERO] = nz
    iw[_IS, IS_BUILT] = 0
    iw[_IS, IS_STOP] = 0
    iw[_IS, _NSD] = 0
    if nz == 0:
        _build(counts, sums, fw, iw, bw, n, t)


@njit(cache=True)
def cpe_inc_note(counts, pending, fw, iw, arm, delta):  # pragma: no cover - compiled
    """Add ``delta`` to ``pending[arm]`` (0: already changed by the caller) and update the initialisation heap."""
    counts, pending, fw, iw = borrow(counts), borrow(pending), borrow(fw), borrow(iw)
    pending[arm] += delta
    if counts[arm] == 0:
        n = counts.shape[0]
        keyheap_update(fw[_ZKEY], iw[_ZHARM], iw[_ZWHERE], n, arm, -float(pending[arm]))


@njit(cache=True)
def cpe_inc_ask(counts, pending, fw, iw):  # pragma: no cover - compiled
    """One ask: the arm (its pending pull added), or -1 if the rule has none (it has stopped).

    While an arm has no answer: the unanswered arm with the fewest pending pulls (lowest index on ties).
    """
    counts, pending, fw, iw = borrow(counts), borrow(pending), borrow(fw), borrow(iw)
    n = counts.shape[0]
    if iw[_IS, _NZERO] > 0:
        arm = iw[_ZHARM, 0]
        pending[arm] += 1
        keyheap_update(fw[_ZKEY], iw[_ZHARM], iw[_ZWHERE], n, arm, -float(pending[arm]))
        return arm
    arm = _pick(counts, pending, True, fw, iw)
    if arm >= 0:
        pending[arm] += 1
    return arm


@njit(cache=True)
def cpe_inc_ask_allowed(counts, pending, fw, iw, mask):  # pragma: no cover - compiled
    """One restricted ask, every arm answered (``_CPELearner._ask_allowed``): the allowed arm of M symdiff M~ with
    the largest radius at answered + pending counts, else the allowed arm with the largest radius (ties to the
    lower index); its pending pull is added. :func:`_pick`'s radii, so the reference's values: O(K), and one pass
    over the arms when no arm of the symmetric difference is allowed."""
    counts, pending, fw, iw, mask = borrow(counts), borrow(pending), borrow(fw), borrow(iw), borrow(mask)
    lil = iw[_IS, _MODE] == LIL
    best = -1.0
    arm = -1
    for j in range(iw[_IS, _NSD]):
        a = iw[_SD, j]
        if not mask[a]:
            continue
        if pending[a] > 0:
            r = _radius(fw, iw, float(counts[a] + pending[a]))
        elif lil:
            r = fw[_RAD, a]
        else:
            r = _radius(fw, iw, float(counts[a]))
        if arm < 0 or r > best or (r == best and a < arm):
            best = r
            arm = a
    if arm < 0:
        for a in range(counts.shape[0]):
            if not mask[a]:
                continue
            if pending[a] > 0:
                r = _radius(fw, iw, float(counts[a] + pending[a]))
            elif lil:
                r = fw[_RAD, a]
            else:
                r = _radius(fw, iw, float(counts[a]))
            if arm < 0 or r > best:
                best = r
                arm = a
    pending[arm] += 1
    return arm


@njit(cache=True)
def _told(counts, sums, pending, fw, iw, bw, arm, t):  # pragma: no cover - compiled
    n = counts.shape[0]
    if counts[arm] == 1:
        keyheap_update(fw[_ZKEY], iw[_ZHARM], iw[_ZWHERE], n, arm, _NEG_INF)
        iw[_IS, _NZERO] -= 1
    if iw[_IS, IS_BUILT] == 1:
        _told_built(counts, sums, fw, iw, bw, n, arm, t)
    elif iw[_IS, _NZERO] == 0:
        _build(counts, sums, fw, iw, bw, n, t)


@njit(cache=True)
def cpe_inc_told(counts, sums, pending, fw, iw, bw, arm, t):  # pragma: no cover - compiled
    """A tell applied by the caller (``Learner.tell``; ``t`` = answered pulls + 1): the decisions of round t."""
    counts, sums, pending, fw, iw, bw = borrow(counts), borrow(sums), borrow(pending), borrow(fw), borrow(iw), \
        borrow(bw)
    _told(counts, sums, pending, fw, iw, bw, arm, t)


@njit(cache=True)
def cpe_inc_tell(counts, sums, sumsq, pending, fw, iw, bw, arm, reward, t):  # pragma: no cover - compiled
    """A whole tell (``t`` = answered pulls + 1 after it): -2 if ``arm`` has no pending pull (nothing changed),
    else the pull is recorded (the same float operations as ``Learner.tell``) and the stop test's answer is
    returned (1 stop, 0 not, -1 not tested: an arm has no answer)."""
    counts, sums, sumsq, pending = borrow(counts), borrow(sums), borrow(sumsq), borrow(pending)
    fw, iw, bw = borrow(fw), borrow(iw), borrow(bw)
    if pending[arm] <= 0:
        return -2
    pending[arm] -= 1
    counts[arm] += 1
    sums[arm] += reward
    sumsq[arm] += reward * reward
    _told(counts, sums, pending, fw, iw, bw, arm, t)
    if iw[_IS, IS_BUILT] == 0:
        return -1
    return iw[_IS, IS_STOP]


# ------------------------------------------------------------------------------- compiled driver
@njit(cache=True)
def cpe_inc_kernel(counts, sums, sumsq, fw, iw, bw, max_pulls, kind, a, b, cdf, values, block, pos,
                   rng):  # pragma: no cover - compiled
    """:func:`~purebandits.algorithms.kernels.cpe_rules._cpe_topk_kernel` on a workspace from :func:`cpe_inc_new`.

    The same loop (initialisation in index order, then the pick, the draw and the stop test after
    every pull with round ``total + 1``), with M, M~ and the pick kept incrementally. Returns
    (stopped, total pulls).
    """
    counts, sums, sumsq = borrow(counts), borrow(sums), borrow(sumsq)
    fw, iw, bw = borrow(fw), borrow(iw), borrow(bw)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    if n_zero == 0:
        _build(counts, sums, fw, iw, bw, n, total + 1)
    zp = 0
    while total < max_pulls:
        if n_zero > 0:
            while counts[zp] > 0:
                zp += 1
            arm = zp
        else:
            arm = _pick(counts, counts, False, fw, iw)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        if n_zero == 0:
            if iw[_IS, IS_BUILT] == 1:
                _told_built(counts, sums, fw, iw, bw, n, arm, total + 1)
            else:
                _build(counts, sums, fw, iw, bw, n, total + 1)
            if iw[_IS, IS_STOP] == 1:
                return True, total
    return False, total
