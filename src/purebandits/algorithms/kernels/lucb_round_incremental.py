"""Compiled driver for LUCB1 and KL-LUCB with O(log n) amortised work per pull, same decisions.

LUCB1 (Kalyanakrishnan, Tewari, Auer, Stone, ICML 2012) and KL-LUCB (Kaufmann & Kalyanakrishnan,
COLT 2013) widen every arm's bound with the round t: radius ``sqrt(beta(t) / u)``, or a KL
inversion at level ``beta(t) / u``. The reference driver
(:func:`purebandits.algorithms.kernels.lucb_rules._round_dependent_kernel`) therefore re-evaluates all
n bounds per pull. This driver finds the same h (the top arm of least lower bound) and l (the
other arm of greatest upper bound), ties to the lower index, without doing so:

- **Windows.** Keys are built at a level ``K >= beta(t)`` valid for a window of rounds (the
  level at a horizon a factor 1 + 1/512 ahead, at least n/16 rounds). Each round's level is
  computed with the reference's call and the keys are rebuilt as soon as it exceeds K, so the
  keys' validity is checked, not assumed (no monotonicity of ``log`` or ``pow`` is relied on).
- **Keys** are optimistic for every level up to K: an upper key is >= the arm's exact upper bound,
  a lower key <= its lower bound. LUCB1's are the bound's own formula at K (IEEE division, sqrt
  and addition are monotone). KL-LUCB's start at the Pinsker end of the bisection bracket (the
  inversion never leaves it) and, once the arm is a candidate, tightened by a Newton step from
  its exact bound to a point where d(mean, .) is certified beyond level K by one evaluation
  (:func:`_kl_beyond`: the bisection can then never cross it); means 0 and 1 have closed forms,
  keyed with a 1e-15 margin over ``expm1``/``exp`` (whose error is below one ulp).
- **Search.** The heap's top is the answer once its key is its exact bound at this round (every
  other arm's exact bound is at most its key, ties to the lower index as in the heap order);
  otherwise its key is replaced by the exact bound (the same call as the reference, so the same
  bits) and the top is looked at again. Exact keys go back to their window keys when
  the round changes.
- **Classes.** Arms with the same mean (bit for bit), count and side have the same bound, so only
  the lowest-indexed one (which wins any tie) sits in a heap; a hash table finds an arm's class
  (:mod:`purebandits.algorithms.kernels.arm_classes` keeps the lists and the table, this module the keys).
  Without this, 999 arms of mean 0 (Bernoulli 1-sparse instances) tie at every round and each
  would be evaluated.

- **Brackets (KL-LUCB).** An exact KL inversion costs tens of logarithms. :func:`_search_bracket`
  first brackets the top class's bound at this round (:func:`_kl_bracket`: Newton from the
  class's last iterate, both ends certified by one evaluation each) and takes the top once the
  bracket's pessimistic end beats every other key strictly; the exact bound is computed only when
  the bracket overlaps another key. The stop test is decided on the brackets when their least
  possible gap fails it (rounded subtraction is monotone), else on the exact bounds.

The empirical top-K is kept as in the reference (two heaps by mean, one swap per answer).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.arm_classes import (
    ClassRows,
    class_find,
    class_link,
    class_open,
    class_release,
    class_unlink,
    classes_clear,
)
from purebandits.algorithms.kernels.lucb_rules import (
    _SIDE_LOWER,
    _SIDE_UPPER,
    BOUND_KL_LUCB,
    BOUND_LUCB,
    RULE_PAIR,
    _ranks_above,
    _refresh_membership,
    family_bound_s,
    family_time_term,
    random_pick,
    stop_test,
)
from purebandits.bounds import _kl_certified_below
from purebandits.heaps import heap_build, heap_top, keyheap_init, keyheap_key, keyheap_update
from purebandits.instances.rewards import stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.ranking import topk_fill

__all__ = ["round_incremental_supported", "round_incremental_kernel"]

# int64 workspace rows: per arm, then per class, then scratch lists and the two bound heaps
_CLS, _NXT, _PRV = 0, 1, 2
_CHEAD, _CTAIL, _CT, _CSIDE, _CPB, _CEXEP, _CTIGHT, _CSLOT, _CSIZE = 3, 4, 5, 6, 7, 8, 9, 10, 11
_FREE, _EXL = 12, 13
_UHARM, _UWHERE, _LHARM, _LWHERE = 14, 15, 16, 17
_N_IW = 18
#: the class rows (:mod:`purebandits.algorithms.kernels.arm_classes`)
_ROWS = ClassRows(cls=_CLS, nxt=_NXT, prv=_PRV, head=_CHEAD, tail=_CTAIL, pb=_CPB, t=_CT, side=_CSIDE, slot=_CSLOT,
                  size=_CSIZE, free=_FREE)
# float64 workspace rows: per-class window key (heap form) and exact bound, heap keys in heap order,
# scratch for rebuilding the heaps; per class the bracket of this round's bound (value form) and
# the last Newton iterate (the next bracket's start)
_CUKEY, _CEXV, _UKEY, _LKEY, _SCR_U, _SCR_L, _CBLO, _CBHI, _CWARM = 0, 1, 2, 3, 4, 5, 6, 7, 8
_N_FW = 9

_UPPER = 1  # side of the arms outside the empirical top-K (their upper bound decides l)
_LOWER = 0  # side of the top arms (their lower bound decides h)

#: relative increase of the level at which a KL key is tightened (a point just beyond the root)
_TIGHT_LEVEL = 1.0 + 2.0 ** -20
#: margin of the closed-form keys (means 0 and 1): far above expm1/exp's 1-ulp error on [0, 1]
_CLOSED_MARGIN = 1e-15
#: the bisection's result is within this of its last certified point (60 halvings of <= 0.71)
_BISECT_SLACK = 1e-15


@njit(cache=True)
def round_incremental_supported(code, bp, k, n):  # pragma: no cover - compiled
    """True if this driver applies: LUCB1 or KL-LUCB, 1 <= k < n, and a positive finite level."""
    if code != BOUND_LUCB and code != BOUND_KL_LUCB:
        return False
    if k < 1 or k >= n:
        return False
    level = family_time_term(code, bp, 1.0)
    return 0.0 < level < math.inf


@njit(cache=True)
def _kl_beyond(p: float, level: float, q: float) -> bool:  # pragma: no cover - compiled
    """True if d(p, q') > ``level`` for every q' from ``q`` away from p, as computed and exactly.

    The mirror of :func:`purebandits.bounds._kl_certified_below`: d(p, .) grows away from p, so
    one computed value above the level by twice the rounding error of ``kl_bernoulli_s`` (the
    margin of ``_kl_newton``) certifies every point further out (whose own rounding error is
    relatively as small). A KL bisection (``kl_upper_s``/``kl_lower_s``) then never moves its
    inner end past ``q``, so its result is within ``_BISECT_SLACK`` of ``q`` or inside.
    """
    if not (0.0 < p < 1.0 and 0.0 < q < 1.0):
        return False
    pp = 1.0 - p
    t1 = p * math.log(p / q)
    t2 = pp * math.log(pp / (1.0 - q))
    return t1 + t2 >= level + 3.0e-15 * (1.0 + abs(t1) + abs(t2))


@njit(cache=True)
def _window_key(code, upper, p, T, K):  # pragma: no cover - compiled
    """(key, tight): a bound of an arm with mean ``p`` and count ``T`` valid at every level <= ``K``.

    Upper side: key >= the exact upper bound at any round whose level is <= ``K``; lower side:
    key <= the exact lower bound (heap form is -key). ``tight`` is False for KL-LUCB's Pinsker
    keys (means inside (0, 1)), which :func:`_tight_key` replaces once the arm is a candidate.
    """
    if code == BOUND_LUCB:
        r = math.sqrt(K / T)
        return (p + r, True) if upper else (p - r, True)
    q = min(max(p, 0.0), 1.0)  # KL-LUCB, as kl_upper_s / kl_lower_s clip it
    lvl = K / T
    if upper:
        if q >= 1.0 or lvl <= 0.0:
            return q, True
        if q <= 0.0:
            return -math.expm1(-lvl) + _CLOSED_MARGIN, True
        return min(1.0, q + math.sqrt(lvl / 2.0)), False  # the bisection starts from this end
    if q <= 0.0 or lvl <= 0.0:
        return q, True
    if q >= 1.0:
        return math.exp(-lvl) - _CLOSED_MARGIN, True
    return max(0.0, q - math.sqrt(lvl / 2.0)), False


@njit(cache=True)
def _tight_key(upper, p, T, K, x, pinsker):  # pragma: no cover - compiled
    """A KL-LUCB window key at level ``K / T`` better than ``pinsker``, from the exact bound ``x`` at a lower level.

    Newton's step for d(p, q) = K/T (1 + 2^-20) from ``x`` (inside the root: d(p, .) is convex,
    so the tangent's zero lies beyond it), certified by :func:`_kl_beyond`; up to three steps,
    else the Pinsker key stays.
    """
    q = min(max(p, 0.0), 1.0)
    lvl = K / T
    if not (0.0 < q < 1.0 and 0.0 < x < 1.0 and lvl > 0.0):
        return pinsker
    qq = 1.0 - q
    for _ in range(3):
        t1 = q * math.log(q / x)
        t2 = qq * math.log(qq / (1.0 - x))
        slope = qq / (1.0 - x) - q / x
        if slope == 0.0 or (slope > 0.0) != upper:
            return pinsker
        x = x + (lvl * _TIGHT_LEVEL + 4e-15 * (1.0 + abs(t1) + abs(t2)) - t1 - t2) / slope
        if not (0.0 < x < 1.0):
            return pinsker
        if _kl_beyond(q, lvl, x):
            return min(pinsker, x + _BISECT_SLACK) if upper else max(pinsker, x - _BISECT_SLACK)
    return pinsker


@njit(cache=True, inline="always")
def _heap_form(side, v):  # pragma: no cover - compiled
    """A bound as its heap key: upper bounds as they are, lower bounds negated (least first)."""
    return v if side == _UPPER else -v


@njit(cache=True, inline="always")
def _bracketed(epoch):  # pragma: no cover - compiled
    """The ``_CEXEP`` mark of a class whose bound is only bracketed at round ``epoch`` (>= 1): below -1."""
    return -epoch - 2


@njit(cache=True, inline="always")
def _optimistic(side, fw, c):  # pragma: no cover - compiled
    """Class c's bracket end that may beat the other arms, as a heap key (upper end, or minus the lower end)."""
    return fw[_CBHI, c] if side == _UPPER else -fw[_CBLO, c]


@njit(cache=True, inline="always")
def _pessimistic(side, fw, c):  # pragma: no cover - compiled
    """Class c's other bracket end as a heap key: the exact bound's heap key is at least this."""
    return fw[_CBLO, c] if side == _UPPER else -fw[_CBHI, c]


@njit(cache=True, inline="always")
def _class_hkey(iw, fw, c, epoch):  # pragma: no cover - compiled
    """The heap key of class c's representative: its exact bound this round if known, else its window key."""
    if iw[_CEXEP, c] == epoch:
        return _heap_form(iw[_CSIDE, c], fw[_CEXV, c])
    if iw[_CEXEP, c] == _bracketed(epoch):
        return _optimistic(iw[_CSIDE, c], fw, c)
    return fw[_CUKEY, c]


@njit(cache=True, inline="always")
def _set_hkey(iw, fw, n, side, arm, value):  # pragma: no cover - compiled
    """Give ``arm`` the key ``value`` in the heap of ``side``."""
    if side == _UPPER:
        if keyheap_key(fw[_UKEY], iw[_UWHERE], arm) != value:
            keyheap_update(fw[_UKEY], iw[_UHARM], iw[_UWHERE], n, arm, value)
    elif keyheap_key(fw[_LKEY], iw[_LWHERE], arm) != value:
        keyheap_update(fw[_LKEY], iw[_LHARM], iw[_LWHERE], n, arm, value)


@njit(cache=True)
def _class_remove(iw, fw, tab, sc, n, i, epoch):  # pragma: no cover - compiled
    """Take arm i out of its class (a new representative inherits the key; an empty class is freed)."""
    c, nx, was_head = class_unlink(iw, _ROWS, i)
    if was_head:
        side = iw[_CSIDE, c]
        _set_hkey(iw, fw, n, side, i, -math.inf)
        if nx >= 0:
            _set_hkey(iw, fw, n, side, nx, _class_hkey(iw, fw, c, epoch))
    if iw[_CSIZE, c] == 0:
        sc[0] = class_release(iw, _ROWS, tab, tab.shape[0] - 1, c, sc[0])


@njit(cache=True)
def _class_add(code, iw, fw, tab, sc, n, i, side, pb, p, T, K, epoch):  # pragma: no cover - compiled
    """Put arm i (mean bits ``pb``, mean ``p``, count ``T``) in the class of ``side``, creating it if new."""
    slot, c = class_find(iw, _ROWS, tab, tab.shape[0] - 1, pb, T, side)
    if c < 0:
        c, sc[0] = class_open(iw, _ROWS, tab, slot, sc[0], pb, T, side, i)
        iw[_CEXEP, c] = -1
        fw[_CWARM, c] = math.nan
        key, tight = _window_key(code, side == _UPPER, p, float(T), K)
        fw[_CUKEY, c] = _heap_form(side, key)
        iw[_CTIGHT, c] = 1 if tight else 0
        _set_hkey(iw, fw, n, side, i, fw[_CUKEY, c])
    elif class_link(iw, _ROWS, c, i):  # i is the new representative: it takes the key from the old one
        _set_hkey(iw, fw, n, side, iw[_NXT, i], -math.inf)
        _set_hkey(iw, fw, n, side, i, _class_hkey(iw, fw, c, epoch))


@njit(cache=True)
def _rekey_window(code, iw, fw, means, n, K):  # pragma: no cover - compiled
    """New window keys at level ``K`` for every class, and both bound heaps rebuilt from them."""
    up = fw[_SCR_U, :n]
    lo = fw[_SCR_L, :n]
    up[:] = -math.inf
    lo[:] = -math.inf
    for c in range(n):
        if iw[_CSIZE, c] == 0:
            continue
        side = iw[_CSIDE, c]
        head = iw[_CHEAD, c]
        key, tight = _window_key(code, side == _UPPER, means[head], float(iw[_CT, c]), K)
        hk = _heap_form(side, key)
        fw[_CUKEY, c] = hk
        iw[_CTIGHT, c] = 1 if tight else 0
        iw[_CEXEP, c] = -1
        if side == _UPPER:
            up[head] = hk
        else:
            lo[head] = hk
    keyheap_init(up, fw[_UKEY], iw[_UHARM], iw[_UWHERE])
    keyheap_init(lo, fw[_LKEY], iw[_LHARM], iw[_LWHERE])


@njit(cache=True)
def _search(code, bp, iw, fw, sc, exl, n, side, means, counts, tterm, K, epoch):  # pragma: no cover - compiled
    """h (``side`` lower) or l (upper) at this round: the exact arg-min/max, ties to the lower index.

    The top of the side's heap is the answer once its key is its exact bound this round; else its
    exact bound is computed (:func:`family_bound_s`, the call of the reference) and made its key
    (a Pinsker window key is tightened from it on the way), and the new top is examined.
    """
    harm = _UHARM if side == _UPPER else _LHARM
    while True:
        a = iw[harm, 0]
        c = iw[_CLS, a]
        if iw[_CEXEP, c] == epoch:
            return a
        if side == _UPPER:
            v = family_bound_s(code, bp, means[a], means[a], float(counts[a]), False, tterm, _SIDE_UPPER)[1]
        else:
            v = family_bound_s(code, bp, means[a], means[a], float(counts[a]), True, tterm, _SIDE_LOWER)[0]
        if iw[_CTIGHT, c] == 0:  # a Pinsker key: tighten it from the exact bound (valid at later rounds too)
            pinsker = fw[_CUKEY, c] if side == _UPPER else -fw[_CUKEY, c]
            fw[_CUKEY, c] = _heap_form(side, _tight_key(side == _UPPER, means[a], float(counts[a]), K, v, pinsker))
            iw[_CTIGHT, c] = 1
        fw[_CEXV, c] = v
        iw[_CEXEP, c] = epoch
        exl[sc[1]] = c
        sc[1] += 1
        _set_hkey(iw, fw, n, side, a, _heap_form(side, v))


@njit(cache=True)
def _bracket_newton(p, level, q):  # pragma: no cover - compiled
    """``_kl_newton`` that also stops when the step is within a few ulps of the iterate: (root, margin, |slope|).

    Near 0 or 1 the slope is so steep that ``_kl_newton``'s test (a step below the rounding
    noise of d over the slope) asks for less than an ulp; the zone around the root is widened
    by as much (``2e-15 q``) in :func:`_kl_bracket`, so stopping there is safe.
    """
    pp = 1.0 - p
    for _ in range(40):
        if not (1e-300 < q < 1.0):
            break
        t1 = p * math.log(p / q)
        t2 = pp * math.log(pp / (1.0 - q))
        d = pp / (1.0 - q) - p / q
        if d == 0.0:
            break
        step = (t1 + t2 - level) / d
        q -= step
        margin = 1.5e-15 * (1.0 + abs(t1) + abs(t2))
        if abs(step) <= max(margin / abs(d), 2e-16 * q):
            if 1e-300 < q < 1.0:
                return q, margin, abs(d)
            break
    return math.nan, 0.0, 0.0


@njit(cache=True)
def _kl_bracket(upper, p, level, x):  # pragma: no cover - compiled
    """(lo, hi, x): lo <= ``kl_upper_s(p, level)`` <= hi (``kl_lower_s`` if not ``upper``), p in (0, 1).

    Newton's method for d(p, q) = level (``_kl_newton``, from ``x``, the last iterate of this
    class, or the second-order guess when that is not on this side, then from _kl_zone's second
    start), then a zone of twice its rounding error
    either side of the iterate, its inner end certified by ``_kl_certified_below`` (the bisection
    then moves its inner end past it) and its outer end by :func:`_kl_beyond` (the bisection never
    gets past it). An end that fails to certify falls back to p or the Pinsker end, which the
    bisection never leaves; ``x`` is returned as the next start.
    """
    pp = 1.0 - p
    r = math.sqrt(level / 2.0)
    if not (p > 1e-300 and level < 1e200):  # (as _kl_zone: no overflow in the starts below)
        return (p, min(1.0, p + r), math.nan) if upper else (max(0.0, p - r), p, math.nan)
    if upper:
        pin = min(1.0, p + r)
        if not (p < x < 1.0):
            x = min(p + math.sqrt(2.0 * level * p * pp), 0.5 + 0.5 * p)
    else:
        pin = max(0.0, p - r)
        if not (1e-300 < x < p):
            x = max(p - math.sqrt(2.0 * level * p * pp), 0.5 * p)
    lo = p if upper else pin
    hi = pin if upper else p
    x, margin, slope = _bracket_newton(p, level, x)
    if x != x:  # as _kl_zone: from a point beyond the root (one term of d dropped), where Newton is monotone
        hh = -p * math.log(p) - pp * math.log(pp)
        x, margin, slope = _bracket_newton(p, level, 1.0 - math.exp(-(level + hh) / pp) if upper
                                           else math.exp(-(level + hh) / p))
        if x != x or slope == 0.0:
            return lo, hi, math.nan
    w = 6.0 * margin / slope + 2e-15 * x
    if upper:
        a = x - w
        b = x + w
        if p < a < pin and _kl_certified_below(p, level, a):
            lo = a
        if b < 1.0 and _kl_beyond(p, level, b):
            hi = min(pin, b + _BISECT_SLACK)
    else:
        a = x + w
        b = x - w
        if pin < a < p and _kl_certified_below(p, level, a):
            hi = a
        if b > 0.0 and _kl_beyond(p, level, b):
            lo = max(pin, b - _BISECT_SLACK)
    return lo, hi, x


@njit(cache=True)
def _make_exact(code, bp, iw, fw, sc, exl, n, side, a, means, counts, tterm, K, epoch):  # pragma: no cover
    """Compute the exact bound of arm a's class this round (the reference's call) and make it a's key."""
    c = iw[_CLS, a]
    if side == _UPPER:
        v = family_bound_s(code, bp, means[a], means[a], float(counts[a]), False, tterm, _SIDE_UPPER)[1]
    else:
        v = family_bound_s(code, bp, means[a], means[a], float(counts[a]), True, tterm, _SIDE_LOWER)[0]
    if iw[_CTIGHT, c] == 0:  # a Pinsker key: tighten it from the exact bound (valid at later rounds too)
        pinsker = fw[_CUKEY, c] if side == _UPPER else -fw[_CUKEY, c]
        fw[_CUKEY, c] = _heap_form(side, _tight_key(side == _UPPER, means[a], float(counts[a]), K, v, pinsker))
        iw[_CTIGHT, c] = 1
    if iw[_CEXEP, c] != _bracketed(epoch):  # not yet on this round's list
        exl[sc[1]] = c
        sc[1] += 1
    fw[_CEXV, c] = v
    iw[_CEXEP, c] = epoch
    _set_hkey(iw, fw, n, side, a, _heap_form(side, v))


@njit(cache=True)
def _search_bracket(code, bp, iw, fw, sc, exl, n, side, means, counts, tterm, K, epoch):  # pragma: no cover
    """:func:`_search` deciding from brackets where they suffice: the same arm, fewer KL inversions.

    KL-LUCB's top class with a window key first gets a bracket of its bound this round
    (:func:`_kl_bracket`, its optimistic end as key); a bracketed top is the answer when its
    pessimistic end beats every other key strictly (each key is at least its arm's exact bound),
    else its exact bound is computed as in :func:`_search`. Every class on the way is thus exact
    or bracketed at ``epoch``; the answer's value is read by :func:`_bound_range`.
    """
    harm = _UHARM if side == _UPPER else _LHARM
    hkey = _UKEY if side == _UPPER else _LKEY
    while True:
        a = iw[harm, 0]
        c = iw[_CLS, a]
        st = iw[_CEXEP, c]
        if st == epoch:
            return a
        if st == _bracketed(epoch):
            second = max(fw[hkey, 1], fw[hkey, 2])
            if _pessimistic(side, fw, c) > second:
                return a
            _make_exact(code, bp, iw, fw, sc, exl, n, side, a, means, counts, tterm, K, epoch)
            continue
        p = means[a]
        T = float(counts[a])
        if code != BOUND_KL_LUCB or not (0.0 < p < 1.0) or not (tterm / T > 0.0):
            _make_exact(code, bp, iw, fw, sc, exl, n, side, a, means, counts, tterm, K, epoch)
            continue
        lo, hi, x = _kl_bracket(side == _UPPER, p, tterm / T, fw[_CWARM, c])
        fw[_CWARM, c] = x
        fw[_CBLO, c] = lo
        fw[_CBHI, c] = hi
        if iw[_CTIGHT, c] == 0:  # tighten the Pinsker key from the bound's inner end (the exact path's rule)
            pinsker = fw[_CUKEY, c] if side == _UPPER else -fw[_CUKEY, c]
            inner = lo if side == _UPPER else hi
            if inner != p:  # certified: _tight_key steps from inside the root
                fw[_CUKEY, c] = _heap_form(side, _tight_key(side == _UPPER, p, T, K, inner, pinsker))
                iw[_CTIGHT, c] = 1
        iw[_CEXEP, c] = _bracketed(epoch)
        exl[sc[1]] = c
        sc[1] += 1
        _set_hkey(iw, fw, n, side, a, _optimistic(side, fw, c))


@njit(cache=True, inline="always")
def _critical(code, bp, iw, fw, sc, exl, n, means, counts, tterm, K, epoch):  # pragma: no cover - compiled
    """(h, l) this round: KL-LUCB's from brackets where they decide, LUCB1's (whose bounds cost a sqrt) exactly.

    Sides are passed as runtime values (``np.int64``) here and wherever a constant side is passed: numba
    compiles a call with a constant argument as a separate ``Literal[...]`` specialisation of the callee.
    """
    if code == BOUND_KL_LUCB:
        return (_search_bracket(code, bp, iw, fw, sc, exl, n, _LOWER, means, counts, tterm, K, epoch),
                _search_bracket(code, bp, iw, fw, sc, exl, n, _UPPER, means, counts, tterm, K, epoch))
    return (_search(code, bp, iw, fw, sc, exl, n, np.int64(_LOWER), means, counts, tterm, K, epoch),
            _search(code, bp, iw, fw, sc, exl, n, np.int64(_UPPER), means, counts, tterm, K, epoch))


@njit(cache=True, inline="always")
def _bound_range(iw, fw, c, epoch):  # pragma: no cover - compiled
    """(lo, hi) around class c's exact bound this round (lo == hi == it once computed)."""
    if iw[_CEXEP, c] == epoch:
        return fw[_CEXV, c], fw[_CEXV, c]
    return fw[_CBLO, c], fw[_CBHI, c]


@njit(cache=True, inline="always")
def _window_level(code, bp, e, n, tterm):  # pragma: no cover - compiled
    """The key level of a window starting at round ``e``: the level a factor 1 + 1/512 (>= n/16 rounds) ahead.

    Shorter windows keep keys tighter (fewer candidates), longer ones re-key less often (O(n) each);
    measured on LUCB1 and KL-LUCB at n = 1,000 (1/64 and n/2 halved LUCB1's rate).
    """
    K = family_time_term(code, bp, e + max(e / 512.0, n / 16.0))
    return max(K, tterm)


@njit(cache=True)
def _new_round(code, bp, iw, fw, sc, exl, means, n, e, K):  # pragma: no cover - compiled
    """(level, window level) at round ``e``: exact keys of the last round back to window keys, or new windows."""
    tterm = family_time_term(code, bp, float(e))
    if tterm > K:
        K = _window_level(code, bp, float(e), n, tterm)
        _rekey_window(code, iw, fw, means, n, K)
    else:
        for j in range(sc[1]):
            c = exl[j]
            if iw[_CSIZE, c] > 0 and iw[_CEXEP, c] != -1:  # exact or bracketed last round
                iw[_CEXEP, c] = -1
                _set_hkey(iw, fw, n, iw[_CSIDE, c], iw[_CHEAD, c], fw[_CUKEY, c])
    sc[1] = 0
    return tterm, K


@njit(cache=True)
def _rejoin(code, iw, fw, tab, sc, n, i, side, means, mbits, counts, K, epoch):  # pragma: no cover - compiled
    """Move arm i to the class of its current mean, count and ``side``."""
    if iw[_CLS, i] >= 0:
        _class_remove(iw, fw, tab, sc, n, i, epoch)
    _class_add(code, iw, fw, tab, sc, n, i, side, mbits[i], means[i], counts[i], K, epoch)


@njit(cache=True)
def _build(code, bp, k, iw, fw, tab, sc, means, mbits, counts, sums, in_top, keyT, ht, wt, keyB, hb, wb,
           e):  # pragma: no cover - compiled
    """Top-K, classes and keys once every arm has an answer; returns (level, window level) at round ``e``."""
    n = counts.shape[0]
    for i in range(n):
        means[i] = sums[i] / counts[i]
    topk_fill(means, k, in_top)
    for i in range(n):
        _refresh_membership(i, in_top, means, keyT, ht, wt, keyB, hb, wb)
    tterm = family_time_term(code, bp, float(e))
    K = _window_level(code, bp, float(e), n, tterm)
    for i in range(n):
        _rejoin(code, iw, fw, tab, sc, n, i, _LOWER if in_top[i] else _UPPER, means, mbits, counts, K, e)
    return tterm, K


@njit(cache=True)
def round_incremental_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls,
                             lrng, kind, a, b, cdf, values, block, pos, srng):  # pragma: no cover - compiled
    """:func:`~purebandits.algorithms.kernels.lucb_driver.family_kernel` for LUCB1 and KL-LUCB, incrementally.

    The same loop as ``_round_dependent_kernel`` (same asks, pulls, round indices and stop
    tests), with h and l found by :func:`_search` instead of a pass over all n bounds. Needs
    :func:`round_incremental_supported`. Allocates the workspace, which it keeps alive while
    :func:`_run` uses borrowed views of it.
    """
    n = counts.shape[0]
    means = np.zeros(n)
    in_top = np.zeros(n, dtype=np.bool_)
    keyT = np.full(n, -math.inf)
    keyB = np.full(n, -math.inf)
    ht, wt = heap_build(keyT)
    hb, wb = heap_build(keyB)
    iw = np.full((_N_IW, n + 1), -1, dtype=np.int64)  # the kernel's own rows (epochs, tightness, heaps) at -1
    fw = np.full((_N_FW, n + 1), -math.inf)
    keyheap_init(np.full(n, -math.inf), fw[_UKEY], iw[_UHARM], iw[_UWHERE])
    keyheap_init(np.full(n, -math.inf), fw[_LKEY], iw[_LHARM], iw[_LWHERE])
    sc = np.zeros(2, dtype=np.int64)  # free classes, exact-list length
    size = 4
    while size < 2 * n:
        size *= 2
    tab = np.empty(size, dtype=np.int64)
    sc[0] = classes_clear(iw, _ROWS, tab, n)
    exl = np.empty(2 * n + 64, dtype=np.int64)  # classes made exact this round (< n + 6 per round)
    out = _run(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls, lrng, kind, a, b,
               cdf, values, block, pos, srng, means, in_top, keyT, keyB, ht, wt, hb, wb, iw, fw, sc, tab, exl)
    # keep the workspace alive until _run is done with its borrowed views
    if means.shape[0] + in_top.shape[0] + keyT.shape[0] + keyB.shape[0] + ht.shape[0] + wt.shape[0] + hb.shape[0] \
            + wb.shape[0] + iw.shape[0] + fw.shape[0] + sc.shape[0] + tab.shape[0] + exl.shape[0] < 0:
        raise AssertionError
    return out


@njit(cache=True)
def _run(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls, lrng, kind, a, b, cdf,
         values, block, pos, srng, means, in_top, keyT, keyB, ht, wt, hb, wb, iw, fw, sc, tab,
         exl):  # pragma: no cover - compiled
    """The loop of :func:`round_incremental_kernel`, on borrowed arrays (no reference counting per call)."""
    counts, sums, sumsq, bp = borrow(counts), borrow(sums), borrow(sumsq), borrow(bp)
    a, b, cdf, values, block, pos, srng = borrow_stream(a, b, cdf, values, block, pos, srng)
    lrng = borrow(lrng)
    means, in_top, keyT, keyB = borrow(means), borrow(in_top), borrow(keyT), borrow(keyB)
    ht, wt, hb, wb = borrow(ht), borrow(wt), borrow(hb), borrow(wb)
    iw, fw, sc, tab, exl = borrow(iw), borrow(fw), borrow(sc), borrow(tab), borrow(exl)
    mbits = borrow(means.view(np.int64))
    n = counts.shape[0]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    zp = 0
    built = False
    have_hl = False
    h = -1
    el = -1
    epoch = -1
    K = 0.0
    tterm = 0.0
    while total < max_pulls:
        # ---- ask
        if queued >= 0:
            arm = queued
            queued = -1
        elif n_zero > 0:
            while counts[zp] > 0:
                zp += 1
            arm = zp
        else:
            if not have_hl:
                e = rounds + 1
                if not built:
                    tterm, K = _build(code, bp, k, iw, fw, tab, sc, means, mbits, counts, sums, in_top, keyT, ht, wt,
                                      keyB, hb, wb, e)
                    epoch = e
                    built = True
                if e != epoch:
                    tterm, K = _new_round(code, bp, iw, fw, sc, exl, means, n, e, K)
                    epoch = e
                h, el = _critical(code, bp, iw, fw, sc, exl, n, means, counts, tterm, K, epoch)
            rounds += 1
            if rule == RULE_PAIR:
                arm = h
                queued = el
            else:
                arm = random_pick(h, el, counts[h], counts[el], lrng.random())
        have_hl = False
        # ---- tell
        r = stream_draw(kind, a, b, cdf, values, block, pos, srng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        if n_zero > 0:
            continue  # no stop test before every arm has an answer (infinite bounds)
        e = rounds + 1
        if not built:
            tterm, K = _build(code, bp, k, iw, fw, tab, sc, means, mbits, counts, sums, in_top, keyT, ht, wt, keyB,
                              hb, wb, e)
            epoch = e
            built = True
        else:
            means[arm] = sums[arm] / counts[arm]
            _refresh_membership(arm, in_top, means, keyT, ht, wt, keyB, hb, wb)
            _rejoin(code, iw, fw, tab, sc, n, arm, _LOWER if in_top[arm] else _UPPER, means, mbits, counts, K, epoch)
            while True:  # restore "every top arm precedes every other arm" (one swap suffices)
                w = n - 1 - heap_top(ht)
                bb = heap_top(hb)
                if not _ranks_above(means, bb, w):
                    break
                in_top[w] = False
                in_top[bb] = True
                _refresh_membership(w, in_top, means, keyT, ht, wt, keyB, hb, wb)
                _refresh_membership(bb, in_top, means, keyT, ht, wt, keyB, hb, wb)
                _rejoin(code, iw, fw, tab, sc, n, w, np.int64(_UPPER), means, mbits, counts, K, epoch)
                _rejoin(code, iw, fw, tab, sc, n, bb, np.int64(_LOWER), means, mbits, counts, K, epoch)
        # ---- stop test (after every answered pull, as Learner.tell does)
        if e != epoch:
            tterm, K = _new_round(code, bp, iw, fw, sc, exl, means, n, e, K)
            epoch = e
        h, el = _critical(code, bp, iw, fw, sc, exl, n, means, counts, tterm, K, epoch)
        have_hl = True
        # the gap ucb_l - lcb_h is monotone in both (rounded subtraction is): the least gap the
        # brackets allow failing the test decides it; else the exact bounds (same arms: each
        # exact key stays within its bracket, so h and l keep the top of their heaps)
        hlo, hhi = _bound_range(iw, fw, iw[_CLS, h], epoch)
        llo, lhi = _bound_range(iw, fw, iw[_CLS, el], epoch)
        if stop_test(hhi, llo, eps_stop, strict):
            if iw[_CEXEP, iw[_CLS, h]] != epoch:
                _make_exact(code, bp, iw, fw, sc, exl, n, _LOWER, h, means, counts, tterm, K, epoch)
            if iw[_CEXEP, iw[_CLS, el]] != epoch:
                _make_exact(code, bp, iw, fw, sc, exl, n, _UPPER, el, means, counts, tterm, K, epoch)
            if stop_test(fw[_CEXV, iw[_CLS, h]], fw[_CEXV, iw[_CLS, el]], eps_stop, strict):
                return True, queued, rounds, total
    return False, queued, rounds, total
