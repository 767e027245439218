"""AT-LUCB (Jun and Nowak, ICML 2016): anytime top-k identification by LUCB stages."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.arm_classes import classes_clear
from purebandits.algorithms.kernels.lucb_round_incremental import (
    _CLS,
    _N_FW,
    _N_IW,
    _ROWS,
    _SCR_U,
    _UHARM,
    _UKEY,
    _UPPER,
    _UWHERE,
    _class_add,
    _class_remove,
    _rekey_window,
)
from purebandits.algorithms.kernels.lucb_rules import BOUND_LUCB
from purebandits.base import Learner, StoppingProgress, check_param, top_k_by
from purebandits.heaps import (
    UPPER_KEY_MARGIN,
    bonus_horizon,
    keyheap_best_bonus_steps,
    keyheap_bonus_reaches,
    keyheap_init,
    keyheap_update,
)
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.ranking import borrow_topk, topk_mask, topk_tracker_fill, topk_tracker_update, topk_workspace
from purebandits.stopping import never_stops_progress, separation_progress

__all__ = ["ATLUCB"]

K1 = 1.25  # LUCB1's k1 = 5/4 (KTAS12), the radius AT-LUCB runs its stages on
_NO_EPOCH = np.int64(-2)  # the class tables' "exact this round" epoch, never used here: every key is a window key
# the class tables' bound code and side here, as runtime values like _NO_EPOCH (np.int64): numba compiles a call
# with a constant argument as a separate Literal[...] specialisation of the callee, which the LUCB kernels
# already compile with runtime values (_class_add was compiled three times, 11 s)
_CODE, _SIDE = np.int64(BOUND_LUCB), np.int64(_UPPER)


@njit(cache=True)
def _at_lucb_scale(t, n, delta1, stage, alpha, sigma):  # pragma: no cover - compiled
    """``2 sigma^2 log(k1 n t^4 / delta_s)``: the part of the radius shared by every arm of a round.

    The log is expanded (``log(k1 n t^4/delta1) + (s-1) log(1/alpha)``) so deep stages do not
    underflow delta_s.
    """
    lg = math.log(K1 * n * t**4 / delta1) + (stage - 1) * math.log(1.0 / alpha)
    return 2.0 * sigma * sigma * lg


@njit(cache=True)
def at_lucb_radius(u, t, n, delta1, stage, alpha, sigma):  # pragma: no cover - compiled
    """LUCB1 radius ``sqrt(2 sigma^2 log(k1 n t^4 / delta_s) / u)`` at ``delta_s = delta1 alpha^(s-1)``."""
    if u <= 0.0:
        return math.inf
    return math.sqrt(_at_lucb_scale(t, n, delta1, stage, alpha, sigma) / u)


@njit(cache=True, inline="always")
def _radii(u, c):  # pragma: no cover - compiled
    """Every arm's ``sqrt(c / u)`` (:func:`at_lucb_radius`'s arithmetic, given its scale ``c``)."""
    n = u.shape[0]
    rad = np.empty(n)
    for i in range(n):  # branch-free, so the divisions and square roots vectorise
        rad[i] = math.sqrt(c / u[i]) if u[i] > 0.0 else math.inf
    return rad


@njit(cache=True)
def at_lucb_pair(mu, u, top, t, delta1, stage, alpha, sigma):  # pragma: no cover - compiled
    """LUCB1's h (weakest top arm by LCB) and l (strongest other arm by UCB) and ``U_l - L_h``."""
    n = mu.shape[0]
    rad = _radii(u, _at_lucb_scale(t, n, delta1, stage, alpha, sigma))  # one logarithm per call, not n
    h, lo = -1, -1
    lo_h, up_l = math.inf, -math.inf
    for i in range(n):
        r = rad[i]
        if top[i]:
            if mu[i] - r < lo_h or h < 0:
                lo_h, h = mu[i] - r, i
        else:
            if mu[i] + r > up_l or lo < 0:
                up_l, lo = mu[i] + r, i
    return h, lo, up_l - lo_h


@njit(cache=True)
def at_lucb_allowed_pair(mu, u, top, t, delta1, stage, alpha, sigma, mask):  # pragma: no cover - compiled
    """The restricted rule's candidates: ``(a, b, crit_a, crit_b)`` (``ATLUCB._ask_allowed``).

    With :func:`at_lucb_pair`'s bounds (the same arithmetic): ``a`` = the allowed top arm with the lowest
    lower bound, ``b`` = the allowed other arm with the highest upper bound (ties to the lower index, -1 when
    none is allowed), ``crit_a = U_l - L_a`` and ``crit_b = U_b - L_h``.
    """
    n = mu.shape[0]
    rad = _radii(u, _at_lucb_scale(t, n, delta1, stage, alpha, sigma))
    h, lo, a, b = -1, -1, -1, -1
    lo_h, up_l, lo_a, up_b = math.inf, -math.inf, math.inf, -math.inf
    for i in range(n):
        r = rad[i]
        if top[i]:
            v = mu[i] - r
            if v < lo_h or h < 0:
                lo_h, h = v, i
            if mask[i] and (v < lo_a or a < 0):
                lo_a, a = v, i
        else:
            v = mu[i] + r
            if v > up_l or lo < 0:
                up_l, lo = v, i
            if mask[i] and (v > up_b or b < 0):
                up_b, b = v, i
    crit_a = up_l - lo_a if a >= 0 else -math.inf
    crit_b = up_b - lo_h if b >= 0 else -math.inf
    return a, b, crit_a, crit_b


@njit(cache=True)
def at_lucb_separation(mu, u, top, t, delta1, stage, alpha, sigma, eps):  # pragma: no cover - compiled
    """:func:`at_lucb_pair`'s ``(L_h, U_l)`` and how many other arms have ``U_j - L_h < eps``.

    Term holds (``U_l - L_h < eps``) exactly when every other arm does (``U_l`` is their largest).
    """
    h, lo, _ = at_lucb_pair(mu, u, top, t, delta1, stage, alpha, sigma)
    rad = _radii(u, _at_lucb_scale(t, mu.shape[0], delta1, stage, alpha, sigma))
    lo_h = mu[h] - rad[h]
    n_sep = 0
    for i in range(mu.shape[0]):
        if not top[i] and (mu[i] + rad[i]) - lo_h < eps:
            n_sep += 1
    return lo_h, mu[lo] + rad[lo], n_sep


@njit(cache=True)
def at_lucb_stage(mu, u, top, t, stage, delta1, alpha, eps, sigma):  # pragma: no cover - compiled
    """Stage update of round t and LUCB1's pair at the new stage: (stage, reset J?, h, l).

    Term is tested at the current stage; if it holds, the stage rises until Term fails. The
    pair returned is the one of that last test (same statistics, same t), so a kernel whose
    pick uses the same ``u`` needs no second pass.
    """
    h, lo, gap = at_lucb_pair(mu, u, top, t, delta1, stage, alpha, sigma)
    if gap >= eps:
        return stage, stage == 1, h, lo
    while gap < eps:
        stage += 1
        h, lo, gap = at_lucb_pair(mu, u, top, t, delta1, stage, alpha, sigma)
    return stage, True, h, lo


@njit(cache=True)
def at_lucb_round(mu, counts, k, t, stage, delta1, alpha, eps, sigma):  # pragma: no cover - compiled
    """Stage update of round t: returns (new stage, whether J is reset to the empirical top-k)."""
    stage, reset, _, _ = at_lucb_stage(mu, counts.astype(np.float64), topk_mask(mu, k), t, stage, delta1, alpha,
                                       eps, sigma)
    return stage, reset


@njit(cache=True, inline="always")
def _top_lcb(mu, u, topl, c):  # pragma: no cover - compiled
    """h, the top arm with the least ``mu - sqrt(c/u)`` (ties: lower index), and that bound: a pass over the k."""
    h, lo_h = -1, math.inf
    for j in range(topl.shape[0]):
        i = topl[j]
        v = mu[i] - math.sqrt(c / u[i])
        if v < lo_h or h < 0 or (v == lo_h and i < h):
            lo_h, h = v, i
    return h, lo_h


@njit(cache=True, inline="always")
def _lazy_pair(mu, u, topl, ukey, uarm, stack, c):  # pragma: no cover - compiled
    """:func:`at_lucb_pair` from the kernel's state: h by a pass over the top list, l by the heap walk.

    Same h, l and ``U_l - L_h`` as the full pass (ties to the lower index) while ``ukey`` bounds
    ``mu + sqrt(c/u)`` of every arm with a finite key (with classes, their lowest-indexed members:
    the others have the same value and higher indices, so they can neither win nor win a tie).
    Returns (h, l, gap, walk steps).
    """
    h, lo_h = _top_lcb(mu, u, topl, c)
    lo, steps = keyheap_best_bonus_steps(ukey, uarm, mu.shape[0], stack, mu, u, c)
    return h, lo, (mu[lo] + math.sqrt(c / u[lo])) - lo_h, steps


@njit(cache=True, inline="always")
def _key_level(t, n, stage, delta1, alpha, sigma):  # pragma: no cover - compiled
    """(horizon, c1): the scale at which upper keys bound the other arms' UCBs at ``stage`` for rounds
    up to ``bonus_horizon(t, n)``.

    A key is ``mu + sqrt(c1 / u)``, the radius' own arithmetic at a larger scale (IEEE division,
    sqrt and addition are monotone), with c1 inflated by ``UPPER_KEY_MARGIN``. The stop test's
    confidence is not covered (keys covering both would be loose for the pair's walk whenever
    the stop's scale is the larger, as it is in stage 1 with delta < delta1): :func:`_stop_holds`
    checks whether they happen to cover it.
    """
    horizon = bonus_horizon(t, n)
    return horizon, _at_lucb_scale(horizon, n, delta1, stage, alpha, sigma) * UPPER_KEY_MARGIN


@njit(cache=True, inline="always")
def _stop_holds(mu, u, topl, ukey, uarm, stack, c, eps, c1, witness, st):  # pragma: no cover - compiled
    """LUCB1's stop test ``U_l - L_h < eps`` at scale ``c``, as :func:`at_lucb_pair` decides it.

    Rounded subtraction is monotone, so ``U_l - L_h = max_j (U_j - L_h)`` and the test holds
    exactly when no arm outside the top has ``U_j - L_h >= eps``. ``witness`` (the pair's l at
    the stage's scale) usually is one; otherwise the heap is walked for one
    (:func:`purebandits.heaps.keyheap_bonus_reaches`) if its keys (scale ``c1``) bound the
    values at ``c``, else every arm with a finite key is checked.
    """
    _, lo_h = _top_lcb(mu, u, topl, c)
    if not ((mu[witness] + math.sqrt(c / u[witness])) - lo_h < eps):
        return False
    n = mu.shape[0]
    if c <= c1:
        return not keyheap_bonus_reaches(ukey, uarm, n, stack, mu, u, c, lo_h, eps)
    st[6] += 1
    for p in range(n):
        if ukey[p] != -math.inf:
            a = uarm[p]
            if not ((mu[a] + math.sqrt(c / u[a])) - lo_h < eps):
                return False
    return True


@njit(cache=True)
def _classes_build(iw, fw, tab, sc, mu, mbits, counts, top, c1):  # pragma: no cover - compiled
    """Put every arm outside the top-k into the class of its (mean bits, count), keyed at scale ``c1``.

    The class tables are those of :mod:`purebandits.algorithms.kernels.lucb_round_incremental` (its
    upper side only, with LUCB1's key ``mean + sqrt(c1 / count)``): only a class's lowest-indexed
    member holds a finite key in the upper heap (``fw[_UKEY]``, ``iw[_UHARM]``, ``iw[_UWHERE]``).
    Top arms belong to no class.
    """
    n = mu.shape[0]
    iw[:, :] = -1  # the kernel's own rows (epochs, tightness, heap) at -1
    sc[0] = classes_clear(iw, _ROWS, tab, n)
    sc[1] = 0
    fw[:, :] = -math.inf
    keyheap_init(fw[_SCR_U, :n], fw[_UKEY], iw[_UHARM], iw[_UWHERE])
    for i in range(n):
        if not top[i]:
            _class_add(_CODE, iw, fw, tab, sc, n, i, _SIDE, mbits[i], mu[i], counts[i], c1, _NO_EPOCH)


@njit(cache=True)
def _arms_build(iw, fw, mu, u, top, c1):  # pragma: no cover - compiled
    """Without classes: every arm outside the top-k keyed ``mu + sqrt(c1 / u)`` in the upper heap (top: -inf)."""
    n = mu.shape[0]
    key = fw[_SCR_U, :n]
    for i in range(n):
        key[i] = -math.inf if top[i] else mu[i] + math.sqrt(c1 / u[i])
    keyheap_init(key, fw[_UKEY], iw[_UHARM], iw[_UWHERE])


#: the kernel's use of classes: never, always, or switched at each re-keying (the learner's choice)
CLASSES_OFF, CLASSES_ON, CLASSES_AUTO = 0, 1, 2
#: the kernel's int64 state array: classes on (1), off (0) or no keys yet (-1); walk steps and walks since
#: the last re-keying; auto's backoff and cooldown (re-keyings); switches; stop tests decided by a pass;
#: re-keyings inside stage jumps
_ST_FIELDS = ("classes", "steps", "walks", "backoff", "cooldown", "switches", "stop_passes", "jump_rekeys")
#: auto: classes go on when the walks for l evaluated more than this many arms on average since the
#: last re-keying (ties, as on 1-sparse Bernoulli instances) ...
_CLASS_ON_STEPS = 24
#: ... and more than this many times n in all (building the classes costs n hash insertions: the first
#: windows, n/8 rounds, are too short to repay it; measured on ST17 setup 6 at its 8,676-pull budget) ...
_CLASS_ON_WORK = 8
#: ... and off when there are more classes than this share of the other arms (few ties: the classes'
#: per-pull upkeep would cost more than the walks save; measured on ST17 setup 5, K = 50)
_CLASS_OFF_SHARE = 0.75
#: a stage jump keys the heap for at least this many stages past the one it tests (jumps gain ~14 stages
#: on 1-sparse Bernoulli instances at n = 1,000; each re-keying is O(n))
_JUMP_SPAN = 16


@njit(cache=True)
def _rekey(t, n, k, stage, delta1, alpha, sigma, mode, st, iw, fw, tab, sc, mu, mbits, u, counts,
           top):  # pragma: no cover - compiled
    """New upper keys for the rounds from ``t`` at ``stage``; returns (horizon, c1) of :func:`_key_level`.

    ``st`` is the kernel's int64 state (:data:`_ST_FIELDS`). In auto mode the classes are switched
    here (both ways give the same walks' answers): on after long walks (``_CLASS_ON_STEPS``), off
    when the classes are nearly as many as the arms (``_CLASS_OFF_SHARE``), then not on again for
    ``backoff`` re-keyings (doubled at each switch off, so the choice cannot flap at every re-keying).
    """
    horizon, c1 = _key_level(t, n, stage, delta1, alpha, sigma)
    on = st[0] == 1
    built = st[0] >= 0
    if mode == CLASSES_ON:
        want = True
    elif mode == CLASSES_OFF:
        want = False
    elif on:
        want = (n - sc[0]) <= _CLASS_OFF_SHARE * (n - k)
        if not want:
            st[3] *= 2
            st[4] = st[3]
    elif st[4] > 0:
        want = False
        st[4] -= 1
    else:
        want = st[1] > _CLASS_ON_STEPS * st[2] and st[1] > _CLASS_ON_WORK * n
    st[1] = 0
    st[2] = 0
    if built and want != on:
        st[5] += 1
    if want and on and built:
        _rekey_window(_CODE, iw, fw, mu, n, c1)
    elif want:
        _classes_build(iw, fw, tab, sc, mu, mbits, counts, top, c1)
    else:
        _arms_build(iw, fw, mu, u, top, c1)
    st[0] = 1 if want else 0
    return horizon, c1


def _at_lucb_workspace(n: int, k: int) -> tuple:
    """The kernel's arrays, allocated in Python so the kernel can borrow them: (mu, u, stack, iw, fw, sc,
    tab, st), the class tables of :func:`_classes_build` and the state of :func:`_rekey`, and a top-k
    tracker."""
    size = 4
    while size < 2 * n:
        size *= 2
    return ((np.empty(n), np.empty(n), np.empty(n + 1, np.int64), np.empty((_N_IW, n + 1), np.int64),
             np.empty((_N_FW, n + 1)), np.zeros(2, np.int64), np.empty(size, np.int64),
             np.zeros(len(_ST_FIELDS), np.int64)),
            topk_workspace(n, k))


@njit(cache=True)
def _at_lucb_kernel(counts, sums, sumsq, J, ws, tk, k, rnd, stage, queued, delta1, alpha, eps, sigma, stop_delta,
                    max_pulls, mode, trace, kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """The ask/tell loop without pending pulls, with the empirical top-k and LUCB1's l kept in heaps.

    The top-k set (``top``/``topl``) is kept by :func:`purebandits.ranking.topk_tracker_update`
    (one mean changes per pull, so one swap at most). l, the other arm with the largest
    ``mu + sqrt(c/u)``, is found by walking a heap of upper keys
    (:func:`purebandits.heaps.keyheap_best_bonus`), built at the current stage and a horizon in
    t. When many of those arms tie (the 999 zero-mean arms of a 1-sparse Bernoulli instance:
    the walk would evaluate each), they are grouped in classes of equal (mean bits, count), whose
    members have equal bounds, and only a class's lowest-indexed member sits in the heap
    (:func:`_classes_build`; ``mode`` and :func:`_rekey` say when). h is a pass over the k top
    arms. The fixed-confidence stop test (:func:`_stop_holds`) comes right before the next round's
    pair, which it computes first (same statistics and round) and keeps for the ask. A stage jump
    tests the deeper stages one by one as :func:`at_lucb_stage` does, each by the same walk, on keys
    re-built for stages up to ``_JUMP_SPAN`` (or twice the last jump) further when they do not
    bound the next stage's UCBs (a key at a deeper stage bounds every shallower one: the scale
    grows with the stage). Same decisions as :meth:`ATLUCB.ask` (tested). ``trace`` (int64) receives
    the arm of each pull while it has room (tests compare it with the rule's asks; the learner passes
    an empty one).
    """
    counts, sums, sumsq, J = borrow(counts), borrow(sums), borrow(sumsq), borrow(J)
    trace = borrow(trace)
    n_trace = 0
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    mu, u, stack = borrow(ws[0]), borrow(ws[1]), borrow(ws[2])
    iw, fw, sc, tab, st = borrow(ws[3]), borrow(ws[4]), borrow(ws[5]), borrow(ws[6]), borrow(ws[7])
    mbits = borrow(mu.view(np.int64))
    n = counts.shape[0]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        u[i] = float(counts[i])
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
        n_zero += counts[i] == 0
    topk_tracker_fill(tk, mu, k)
    tk = borrow_topk(tk)
    top, topl = tk[0], tk[1]
    ukey, uarm, uwhere = fw[_UKEY], iw[_UHARM], iw[_UWHERE]
    st[:] = 0
    st[0] = -1  # no keys yet
    st[3] = 1
    horizon = -1.0  # ukey holds upper keys of the other arms' UCBs while t <= horizon at stages <= ukey_stage
    ukey_stage = -1
    last_jump = 0  # stages gained by the last jump
    c1 = 0.0
    j_stale = True  # J may differ from top
    zp = 0  # no arm below zp is unpulled
    have_pair = False  # the stop test computed this round's pair: (arm, queued, gap) in (ph, pl, pgap)
    ph, pl, pgap = -1, -1, 0.0
    while total < max_pulls:
        if queued >= 0:
            arm = queued
            queued = -1
        elif n_zero > 0:
            while counts[zp] > 0:
                zp += 1
            arm = zp
        else:
            t = rnd + 1
            ft = float(t)
            if have_pair:
                arm, queued, gap = ph, pl, pgap
                have_pair = False
            else:
                if ft > horizon or stage > ukey_stage:
                    horizon, c1 = _rekey(ft, n, k, stage, delta1, alpha, sigma, mode, st, iw, fw, tab, sc, mu, mbits,
                                         u, counts, top)
                    ukey_stage = stage
                arm, queued, gap, steps = _lazy_pair(mu, u, topl, ukey, uarm, stack,
                                                     _at_lucb_scale(ft, n, delta1, stage, alpha, sigma))
                st[1] += steps
                st[2] += 1
            if gap < eps:  # Term holds: the stage jumps to the first deeper one where it fails (at_lucb_stage)
                s = stage
                while gap < eps:
                    s += 1
                    cs = _at_lucb_scale(ft, n, delta1, s, alpha, sigma)
                    if cs > c1:  # the keys do not bound stage s: key for stages up to s + span
                        ukey_stage = s + max(_JUMP_SPAN, 2 * last_jump)
                        st[7] += 1
                        horizon, c1 = _rekey(ft, n, k, ukey_stage, delta1, alpha, sigma, mode, st, iw, fw, tab, sc,
                                             mu, mbits, u, counts, top)
                    arm, queued, gap, steps = _lazy_pair(mu, u, topl, ukey, uarm, stack, cs)
                    st[1] += steps
                    st[2] += 1
                last_jump = s - stage
                stage = s
                reset = True
            else:
                reset = stage == 1
            if reset and j_stale:
                c = 0
                for i in range(n):
                    if top[i]:
                        J[c] = i
                        c += 1
                j_stale = False
            rnd = t
        if n_trace < trace.shape[0]:
            trace[n_trace] = arm
            n_trace += 1
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        u[arm] += 1.0
        sums[arm] += r
        sumsq[arm] += r * r
        mu[arm] = sums[arm] / counts[arm]
        total += 1
        out, inn = topk_tracker_update(tk, mu, arm)
        if st[0] == 1:  # classes: move the pulled arm and the swapped ones
            if iw[_CLS, arm] >= 0:
                _class_remove(iw, fw, tab, sc, n, arm, _NO_EPOCH)
            if out >= 0 and inn != arm:
                _class_remove(iw, fw, tab, sc, n, inn, _NO_EPOCH)
            if not top[arm]:
                _class_add(_CODE, iw, fw, tab, sc, n, arm, _SIDE, mbits[arm], mu[arm], counts[arm], c1, _NO_EPOCH)
            if out >= 0 and out != arm:
                _class_add(_CODE, iw, fw, tab, sc, n, out, _SIDE, mbits[out], mu[out], counts[out], c1, _NO_EPOCH)
        elif st[0] == 0:  # one key per arm
            if not top[arm]:
                keyheap_update(ukey, uarm, uwhere, n, arm, mu[arm] + math.sqrt(c1 / u[arm]))
            if out >= 0:
                if out != arm:
                    keyheap_update(ukey, uarm, uwhere, n, out, mu[out] + math.sqrt(c1 / u[out]))
                keyheap_update(ukey, uarm, uwhere, n, inn, -math.inf)
        if out >= 0:
            j_stale = True
        if stop_delta > 0.0 and queued < 0 and n_zero == 0:  # LUCB1's stop test at delta, round rnd + 1
            ft = float(rnd + 1)
            if ft > horizon or stage > ukey_stage:
                horizon, c1 = _rekey(ft, n, k, stage, delta1, alpha, sigma, mode, st, iw, fw, tab, sc, mu, mbits, u,
                                     counts, top)
                ukey_stage = stage
            ph, pl, pgap, steps = _lazy_pair(mu, u, topl, ukey, uarm, stack,
                                             _at_lucb_scale(ft, n, delta1, stage, alpha, sigma))
            st[1] += steps
            st[2] += 1
            have_pair = True
            if _stop_holds(mu, u, topl, ukey, uarm, stack, _at_lucb_scale(ft, n, stop_delta, 1, alpha, sigma), eps, c1,
                           pl, st):
                return True, total, rnd, stage, queued
    return False, total, rnd, stage, queued


class ATLUCB(Learner):
    """AT-LUCB: LUCB1 run in stages of shrinking confidence, with an anytime answer J(t).

    Each round t pulls LUCB1's pair (h, l) at the stage's confidence
    ``delta_s = delta1 * alpha^(s-1)`` with the LUCB1 radius (k1 = 5/4). When Term
    (``U_l - L_h < eps``) holds at ``delta_s``, the stage jumps to the smallest s whose Term
    fails and J(t) becomes the empirical top-k; in stage 1 J follows the empirical top-k; in
    later stages J is kept until the next jump (Jun & Nowak 2016, Alg. 1).
    ``recommend()`` returns J(t), whose error decays with t.

    Used as a fixed-confidence learner: with ``delta`` given it also stops as soon as Term
    holds at ``delta`` (LUCB1's stopping rule: the radius holds for all rounds and arms with
    probability 1 - delta whatever the sampling rule) and returns the empirical top-k then.
    Without ``delta`` it never stops; the caller chooses when to read ``recommend()``.

    Conventions (ALGORITHMS.md 11 "Uncertain"): every arm is pulled once first; h and l are
    taken over the empirical top-k (LUCB1), not over J; the Term test of round t uses the
    statistics after round t-1 with round index t in the radius. Pending pulls count in the
    radius of the pair choice (not in the stage update), so concurrent participants spread.

    Restricted asks (``ask(n, allowed=...)``, a participant rates each item once): LUCB1's rule
    at the stage's confidence restricted to the allowed arms, as in the LUCB family
    (:class:`~purebandits.algorithms.lucb.LUCB1`). A queued second arm is served if allowed,
    else dropped (the stop test runs only between rounds, i.e. with an empty queue, so an arm
    that no participant can rate must not hold it up). Then the allowed unanswered arm with the
    fewest pending pulls; else a round (the stage update and J as in the unrestricted rule,
    ``round_`` + 1) that pulls the allowed arm whose bound most decides Term: the allowed top arm
    ``a`` with the lowest ``L`` and the allowed other arm ``b`` with the highest ``U``, compared by
    their overlaps with the other side, ``U_l - L_a`` and ``U_b - L_h``; on a tie (in particular
    ``a = h``, ``b = l`` when both are allowed) a is pulled and b queued, as the unrestricted rule
    does. The fixed-confidence stop stays valid: LUCB1's radius at ``delta`` holds for every arm
    and round whatever the sampling rule (a union over arms, rounds t and counts ``u <= t``; a
    round still gives an arm at most one pull, so ``u <= round_ + 1``). The anytime guarantee of
    J(t) (its error decaying with t) relies on the sampling rule and is not claimed under
    restrictions.

    Parameters
    ----------
    k : int, default=1
        Number of top arms (m in the paper).
    delta : float or None, default=None
        Target error for the optional stop; None for a pure anytime learner.
    delta1 : float, default=0.5
        Confidence of stage 1 (the value recommended by the paper and used in NSAR Sec. IV).
    alpha : float, default=0.99
        Stage ratio, in (0, 1).
    epsilon : float, default=0.0
        Term tolerance (exact top-k for 0).
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards (1/2 for [0, 1]).

    References
    ----------
    K.-S. Jun, R. Nowak. Anytime Exploration for Multi-armed Bandits using Confidence
    Information. ICML 2016.
    """

    name = "at_lucb"
    kind = "anytime"
    tags = {"top_k": True}
    paper = "Jun and Nowak, ICML 2016 (AT-LUCB, Alg. 1; delta1 = 0.5, alpha = 0.99, eps = 0)"
    test_params = {"delta": 0.1}
    invalid_params = [("alpha", 1.0), ("alpha", 0.0), ("delta1", 0.0), ("sigma", 0.0)]
    #: the compiled kernel's use of classes of tied arms (tests force CLASSES_ON / CLASSES_OFF)
    _class_mode = CLASSES_AUTO

    def __init__(self, k: int = 1, delta: float | None = None, *, delta1: float = 0.5, alpha: float = 0.99,
                 epsilon: float = 0.0, sigma: float = 0.5) -> None:
        self.k = k
        self.delta = delta
        self.delta1 = delta1
        self.alpha = alpha
        self.epsilon = epsilon
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        if self.delta is not None:
            check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("delta1", self.delta1, low=0.0, low_open=True)
        check_param("alpha", self.alpha, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("epsilon", self.epsilon, low=0.0)
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _start(self) -> None:
        self.queue_: list[int] = []
        self.round_ = 0
        self.stage_ = 1
        self.J_ = np.arange(int(self.k), dtype=np.int64)

    # ------------------------------------------------------------------ ask / tell
    def _ask_one(self) -> int:
        if self.queue_:
            return int(self.queue_.pop(0))
        zero = np.flatnonzero(self.counts_ == 0)
        if zero.size:  # initialisation: one pull of every arm, spread over pending pulls
            return int(zero[np.argmin(self.pending_[zero])])
        mu, k, t = self._next_round()
        u = (self.counts_ + self.pending_).astype(np.float64)
        h, lo, _ = at_lucb_pair(mu, u, topk_mask(mu, k), float(t), float(self.delta1), self.stage_,
                               float(self.alpha), float(self.sigma))
        self.queue_.append(int(lo))
        return int(h)

    def _next_round(self) -> tuple[np.ndarray, int, int]:
        """Start a sampling round: update the stage (and the anytime set J on a reset); (means, k, round index)."""
        mu, k = self.means(), int(self.k)
        t = self.round_ + 1
        self.stage_, reset = (int(x) for x in at_lucb_round(
            mu, self.counts_, k, float(t), self.stage_, float(self.delta1), float(self.alpha),
            float(self.epsilon), float(self.sigma)))
        if reset:
            self.J_ = np.flatnonzero(topk_mask(mu, k)).astype(np.int64)
        self.round_ = t
        return mu, k, t

    def _ask_allowed(self, mask: np.ndarray) -> int:
        """The restricted rule (class docstring, "Restricted asks"); Learner.ask adds the pending pull."""
        if self.queue_:
            q = int(self.queue_[0])
            self.queue_.clear()  # served, or dropped when not allowed (the stop test waits for an empty queue)
            if mask[q]:
                return q
        zero = np.flatnonzero(mask & (self.counts_ == 0))
        if zero.size:  # initialisation: the allowed unanswered arm with the fewest pending (lowest index)
            return int(zero[np.argmin(self.pending_[zero])])
        mu, k, t = self._next_round()
        # arms never answered (left out of this ask) keep infinite bounds, whatever their pending pulls
        u = np.where(self.counts_ > 0, self.counts_ + self.pending_, 0).astype(np.float64)
        a, b, crit_a, crit_b = at_lucb_allowed_pair(mu, u, topk_mask(mu, k), float(t), float(self.delta1),
                                                    self.stage_, float(self.alpha), float(self.sigma), mask)
        a, b = int(a), int(b)
        if b < 0 or (a >= 0 and crit_a > crit_b):
            return a
        if a < 0 or crit_b > crit_a:
            return b
        self.queue_.append(b)  # a tie (a = h and b = l when both are allowed): the pair, as the unrestricted rule
        return a

    def _stop_args(self) -> tuple:
        """The arguments of the fixed-confidence test: LUCB1's pair at ``delta`` (stage 1), round ``round_ + 1``."""
        mu = self.means()
        return (mu, self.counts_.astype(np.float64), topk_mask(mu, int(self.k)), float(self.round_ + 1),
                float(self.delta), 1, float(self.alpha), float(self.sigma))

    def _check_stop(self) -> None:
        if self.delta is None or self.queue_ or (self.counts_ == 0).any():
            return
        args = self._stop_args()
        gap = at_lucb_pair(*args)[2]
        if gap < self.epsilon:
            self._finish(top_k_by(args[0], int(self.k)))

    def _stopping_progress(self) -> StoppingProgress:
        """LUCB1's stop at ``delta`` (KTAS12 Sec. 3; JN16 Alg. 1's Term at stage 1): ``U_l - L_h < eps``.

        ``fraction`` = share of the arms outside the empirical top-k with ``U_j - L_h < eps``
        (:func:`at_lucb_separation`), ``margin = eps - (U_l - L_h)`` (strict). The test runs only
        between the two pulls of a pair, so the figures are those of the next test. Without
        ``delta`` the learner is anytime and never stops by itself.
        """
        if self.delta is None:
            return never_stops_progress(bool(self.done_), "anytime AT-LUCB without delta: never stops",
                                        "this learner never stops by itself; the owner stops it")
        k = int(self.k)
        of = self.n_arms_ - k
        who = "the leader's lower bound" if k == 1 else f"the lowest lower bound among the top {k} items"
        eps = f" minus epsilon = {self.epsilon:g}" if self.epsilon > 0 else ""
        desc = (f"stops when {who} is above every other item's upper bound{eps} "
                f"(LUCB1 bounds, KTAS12 beta(u, t), delta = {self.delta:g})")
        if (self.counts_ == 0).any():
            return StoppingProgress(fraction=0.0, separated=0, of=of, description=desc)
        args = self._stop_args()
        lcb_h, ucb_l, n_sep = at_lucb_separation(*args, float(self.epsilon))
        holds = bool(at_lucb_pair(*args)[2] < self.epsilon)
        return separation_progress(float(lcb_h), float(ucb_l), holds, int(n_sep), of, float(self.epsilon), desc)

    # ------------------------------------------------------------------ outputs
    def _recommend(self) -> list[int]:
        if self.round_ == 0:
            return top_k_by(self.means(), int(self.k))
        return [int(a) for a in self.J_]

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean -+ the LUCB1 radius at the current stage's confidence."""
        self._require_started()
        t, n = float(self.round_ + 1), self.n_arms_
        rad = np.array([at_lucb_radius(float(c), t, n, float(self.delta1), self.stage_, float(self.alpha),
                                       float(self.sigma)) for c in self.counts_])
        m = self.means()
        return m - rad, m + rad

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        _run_kernel(self, stream, max_pulls, self._class_mode)


def _run_kernel(lr: ATLUCB, stream: RewardStream, max_pulls: int, mode: int, trace: np.ndarray | None = None,
                workspace: tuple | None = None) -> dict:
    """:meth:`ATLUCB.run_compiled` with the kernel's class ``mode``; returns the kernel's state
    (:data:`_ST_FIELDS`) and fills ``trace`` with the pulled arms (tests). ``workspace``
    (:func:`_at_lucb_workspace`'s, default a new one) lets tests inspect the classes after the run."""
    if lr.done_:
        return {}
    if lr.pending_.any():
        raise ValueError("run_compiled needs a learner with no pending pulls")
    queued = lr.queue_[0] if lr.queue_ else -1
    ws, tk = _at_lucb_workspace(lr.n_arms_, int(lr.k)) if workspace is None else workspace
    stop, t, rnd, stage, queued = _at_lucb_kernel(
        lr.counts_, lr.sums_, lr.sumsq_, lr.J_, ws, tk, int(lr.k), lr.round_, lr.stage_, queued,
        float(lr.delta1), float(lr.alpha), float(lr.epsilon), float(lr.sigma),
        -1.0 if lr.delta is None else float(lr.delta), int(max_pulls), int(mode),
        np.empty(0, np.int64) if trace is None else trace, *stream.args())
    lr.t_, lr.round_, lr.stage_ = int(t), int(rnd), int(stage)
    lr.queue_ = [int(queued)] if queued >= 0 else []
    if stop:
        lr._finish(top_k_by(lr.means(), int(lr.k)))
    return dict(zip(_ST_FIELDS, (int(x) for x in ws[7]), strict=True))
