"""Decision rules shared by the LUCB family: one bound dispatcher, one selection, one kernel.

Every LUCB-type learner (``purebandits.algorithms.lucb``) is a pair (confidence bound, sampling
rule). The bound is an integer code plus a float parameter vector ``bp`` read by
:func:`family_bound_s`; the rule is "pull both critical arms" (:data:`RULE_PAIR`, LUCB1,
KL-LUCB, lil'LUCB, LUCB++, lil-KLUCB) or "pull one of them at random" (:data:`RULE_RANDOM`,
lil'RandLUCB). The Python learners call :func:`family_select` (a from-scratch O(n) pass);
the compiled driver :func:`family_kernel` keeps the same quantities incrementally in indexed
heaps. Both call the same scalar bound function and break ties the same way (higher mean
first, then lower index; argmin/argmax of the bounds to the lower index), so they choose the
same arms bit for bit.

Layout of ``bp`` (float64): ``[w_top, w_bot, eps, sigma, offset, k1, alpha, N, kappa_top,
kappa_bot, c_N, n]``. ``w_top`` is the confidence level of arms in the empirical top-K (their
lower bound decides ``h``), ``w_bot`` that of the other arms (their upper bound decides
``l``); LUCB++-type splits give them different values.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from purebandits.bounds import (
    kl_lower_s,
    kl_lucb_rate_s,
    kl_upper_s,
    lil_kl_level_s,
    lil_kl_lower_exact_s,
    lil_kl_upper_exact_s,
    lil_radius_s,
    lucb_rate_s,
    sg1_radius_s,
    sg2_radius_s,
)
from purebandits.heaps import heap_build, heap_top, heap_update
from purebandits.instances.rewards import stream_draw

__all__ = [
    "BOUND_LUCB",
    "BOUND_KL_LUCB",
    "BOUND_LIL",
    "BOUND_LIL_KL",
    "BOUND_LIL_KL_EXACT",
    "BOUND_SG1",
    "BOUND_SG2",
    "RULE_PAIR",
    "RULE_RANDOM",
    "N_BP",
    "family_time_term",
    "family_bound_s",
    "family_select",
    "stop_test",
    "random_pick",
    "family_kernel",
]

#: LUCB1 radius sqrt(2 sigma^2 log(k1 n t^4/delta)/u) (KTAS12); depends on the round t
BOUND_LUCB = 0
#: KL-LUCB: {q : T d(mu_hat, q) <= log(k1 n t^alpha/delta)} (KK13); depends on the round t
BOUND_KL_LUCB = 1
#: finite-LIL radius U(T, w) (JMNB14 Lemma 1 / JLQ17 Lemma 2.1, offset 0 or 2)
BOUND_LIL = 2
#: lil-KLUCB simplified bounds L', U' (TNM17 Sec. 3, c(N) level)
BOUND_LIL_KL = 3
#: lil-KLUCB bounds of TNM17 eqs. (2)-(3)
BOUND_LIL_KL_EXACT = 4
#: [SG1] of TNM17 Sec. 5
BOUND_SG1 = 5
#: [SG2]: KCG16 Theorem 8, beta = 3/2
BOUND_SG2 = 6

RULE_PAIR = 0
RULE_RANDOM = 1

N_BP = 12
_W_TOP, _W_BOT, _EPS, _SIGMA, _OFFSET, _K1, _ALPHA, _N, _KAPPA_TOP, _KAPPA_BOT, _C_N, _NARMS = range(N_BP)

_SIDE_BOTH, _SIDE_LOWER, _SIDE_UPPER = 0, 1, 2


@njit(cache=True)
def family_time_term(code, bp, t):
    """The round-dependent part of the bound (LUCB1, KL-LUCB), computed once per round; else 0."""
    if code == BOUND_LUCB:
        return lucb_rate_s(t, bp[_NARMS], bp[_W_TOP], bp[_K1], bp[_SIGMA])
    if code == BOUND_KL_LUCB:
        return kl_lucb_rate_s(t, bp[_NARMS], bp[_W_TOP], bp[_ALPHA], bp[_K1])
    return 0.0


@njit(cache=True)
def family_bound_s(code, bp, mean, T, top, tterm, side):
    """(lcb, ucb) of one arm with answered mean ``mean`` and radius count ``T`` (> 0).

    ``top`` says whether the arm is in the empirical top-K (it selects ``w_top`` or ``w_bot``);
    ``tterm`` is :func:`family_time_term` of the current round; ``side`` = 0 computes both
    bounds, 1 only the lower one (the upper is returned as +inf), 2 only the upper one (the
    lower is -inf); a skipped side is thus still a valid, if useless, bound.
    """
    w = bp[_W_TOP] if top else bp[_W_BOT]
    lo = -math.inf
    hi = math.inf
    if code == BOUND_LUCB or code == BOUND_LIL or code == BOUND_SG1 or code == BOUND_SG2:
        if code == BOUND_LUCB:
            r = math.sqrt(tterm / T)
        elif code == BOUND_LIL:
            r = lil_radius_s(T, w, bp[_EPS], bp[_SIGMA], bp[_OFFSET])
        elif code == BOUND_SG1:
            kappa = bp[_KAPPA_TOP] if top else bp[_KAPPA_BOT]
            r = sg1_radius_s(T, w, bp[_N], bp[_SIGMA], kappa)
        else:
            r = sg2_radius_s(T, w, bp[_SIGMA])
        if side != _SIDE_UPPER:
            lo = mean - r
        if side != _SIDE_LOWER:
            hi = mean + r
        return lo, hi
    if code == BOUND_KL_LUCB:
        level = tterm / T
        if side != _SIDE_UPPER:
            lo = kl_lower_s(mean, level)
        if side != _SIDE_LOWER:
            hi = kl_upper_s(mean, level)
        return lo, hi
    kappa = bp[_KAPPA_TOP] if top else bp[_KAPPA_BOT]
    level = lil_kl_level_s(T, w, kappa)
    if code == BOUND_LIL_KL:
        level = bp[_C_N] * level
        if side != _SIDE_UPPER:
            lo = kl_lower_s(mean, level)
        if side != _SIDE_LOWER:
            hi = kl_upper_s(mean, level)
        return lo, hi
    # BOUND_LIL_KL_EXACT
    if side != _SIDE_UPPER:
        lo = lil_kl_lower_exact_s(mean, level, bp[_N])
    if side != _SIDE_LOWER:
        hi = lil_kl_upper_exact_s(mean, level, bp[_N])
    return lo, hi


@njit(cache=True)
def _ranks_above(means, a, b):
    """True if arm a precedes arm b in the order (higher mean, then lower index)."""
    return means[a] > means[b] or (means[a] == means[b] and a < b)


@njit(cache=True)
def _top_k_mask(means, k, mask):
    """Mark the k arms with the highest means (ties to the lower index) in ``mask``."""
    n = means.shape[0]
    mask[:] = False
    if k == 1:
        best = 0
        for i in range(1, n):
            if means[i] > means[best]:
                best = i
        mask[best] = True
        return
    order = np.argsort(-means, kind="mergesort")  # stable: equal means keep index order
    for j in range(k):
        mask[order[j]] = True


@njit(cache=True)
def _critical_pair(code, bp, means, counts, T, in_top, tterm, both_sides, lcb, ucb):
    """Fill the per-arm bounds and return (h, l) for a given top-K membership ``in_top``."""
    n = counts.shape[0]
    h = -1
    el = -1  # the papers' l
    for i in range(n):
        if counts[i] == 0:
            lcb[i] = -math.inf
            ucb[i] = math.inf
        else:
            side = _SIDE_BOTH if both_sides else (_SIDE_LOWER if in_top[i] else _SIDE_UPPER)
            lcb[i], ucb[i] = family_bound_s(code, bp, means[i], float(T[i]), in_top[i], tterm, side)
        if in_top[i]:
            if h < 0 or lcb[i] < lcb[h]:
                h = i
        elif el < 0 or ucb[i] > ucb[el]:
            el = i
    return h, el


@njit(cache=True)
def family_select(code, bp, k, sums, counts, T, tterm, both_sides, in_top, lcb, ucb):
    """Empirical top-K and the critical pair (h, l), from scratch in O(n) (O(n log n) for k > 1).

    Means come from the answered pulls (``sums``, ``counts``), radii from ``T`` (answered plus
    pending pulls for sampling, answered pulls for stopping); an arm never answered has
    infinite bounds. Fills ``in_top`` and the per-arm bounds ``lcb``/``ucb`` (only the side
    that matters, lower for top arms and upper for the rest, unless ``both_sides``) and returns
    ``h = argmin_{top} lcb`` and ``l = argmax_{not top} ucb``, ties to the lower index.
    """
    n = counts.shape[0]
    means = np.zeros(n)
    for i in range(n):
        if counts[i] > 0:
            means[i] = sums[i] / counts[i]
    _top_k_mask(means, k, in_top)
    return _critical_pair(code, bp, means, counts, T, in_top, tterm, both_sides, lcb, ucb)


@njit(cache=True)
def stop_test(lcb_h, ucb_l, eps_stop, strict):
    """LUCB stop: ``ucb_l - lcb_h < eps`` (strict) or ``<= eps`` (lil'RandLUCB's ">=")."""
    gap = ucb_l - lcb_h
    if strict:
        return gap < eps_stop
    return gap <= eps_stop


@njit(cache=True)
def random_pick(h, el, th, tl, u):
    """lil'RandLUCB (JLQ17 Alg. 1): h if ``u < T_l/(T_h + T_l)`` else l (u uniform in [0, 1))."""
    if u < float(tl) / float(th + tl):
        return h
    return el


# ------------------------------------------------------------------------------------ kernel
@njit(cache=True, inline="always")
def _set_key(heap, where, key, i, value):
    """heap_update, skipped when the key does not change (the heap is then already valid)."""
    if key[i] != value:
        heap_update(heap, where, key, i, value)


@njit(cache=True)
def _refresh(i, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl, wl,
             keyU, hu, wu):
    """Re-key arm i in the four heaps after its mean, count or membership changed."""
    n = means.shape[0]
    j = n - 1 - i  # the weakest-top heap runs on reversed ids so equal means pop the higher arm
    if in_top[i]:
        _set_key(ht, wt, keyT, j, -means[i])
        _set_key(hb, wb, keyB, i, -math.inf)
    else:
        _set_key(ht, wt, keyT, j, -math.inf)
        _set_key(hb, wb, keyB, i, means[i])
    if not tdep:
        if in_top[i]:
            lt[i] = family_bound_s(code, bp, means[i], float(counts[i]), True, 0.0, _SIDE_LOWER)[0]
            _set_key(hl, wl, keyL, i, -lt[i])
            _set_key(hu, wu, keyU, i, -math.inf)
        else:
            ub[i] = family_bound_s(code, bp, means[i], float(counts[i]), False, 0.0, _SIDE_UPPER)[1]
            _set_key(hl, wl, keyL, i, -math.inf)
            _set_key(hu, wu, keyU, i, ub[i])


@njit(cache=True)
def family_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls, lrng,
                  kind, a, b, cdf, values, block, pos, srng):  # pragma: no cover - compiled
    """Sequential (ask(1)/tell) run of any LUCB-family learner; returns (done, queued, rounds, total).

    Same decisions as the Python learner: each arm once first (lowest index), then at each
    round the pair (h, l) from the empirical top-K and the bounds; the stop test runs after
    every answered pull with the round index ``rounds + 1``. The empirical top-K is kept by
    two indexed heaps (weakest top arm, strongest other arm; one swap restores it after a
    pull); for round-independent bounds h and l come from two more heaps keyed by the cached
    bounds, so a pull costs O(log n). Round-dependent bounds (LUCB1, KL-LUCB) are re-evaluated
    for all arms after each pull, O(n).
    """
    n = counts.shape[0]
    tdep = code == BOUND_LUCB or code == BOUND_KL_LUCB
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    zp = 0
    means = np.zeros(n)
    in_top = np.zeros(n, dtype=np.bool_)
    lt = np.full(n, -math.inf)
    ub = np.full(n, math.inf)
    keyT = np.full(n, -math.inf)
    keyB = np.full(n, -math.inf)
    keyL = np.full(n, -math.inf)
    keyU = np.full(n, -math.inf)
    ht, wt = heap_build(keyT)
    hb, wb = heap_build(keyB)
    hl, wl = heap_build(keyL)
    hu, wu = heap_build(keyU)
    lcb_s = np.empty(n)
    ucb_s = np.empty(n)
    built = False
    have_hl = False
    h = -1
    el = -1
    while total < max_pulls:
        if not built and n_zero == 0:  # resuming after the initial pulls
            for i in range(n):
                means[i] = sums[i] / counts[i]
            _top_k_mask(means, k, in_top)
            for i in range(n):
                _refresh(i, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl,
                         wl, keyU, hu, wu)
            built = True
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
                if tdep:
                    tterm = family_time_term(code, bp, float(rounds + 1))
                    h, el = _critical_pair(code, bp, means, counts, counts, in_top, tterm, False, lcb_s, ucb_s)
                else:
                    h = heap_top(hl)
                    el = heap_top(hu)
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
        if not built:
            for i in range(n):
                means[i] = sums[i] / counts[i]
            _top_k_mask(means, k, in_top)
            for i in range(n):
                _refresh(i, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl,
                         wl, keyU, hu, wu)
            built = True
        else:
            means[arm] = sums[arm] / counts[arm]
            _refresh(arm, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl, wl,
                     keyU, hu, wu)
            while True:  # restore "every top arm precedes every other arm" (one swap suffices)
                w = n - 1 - heap_top(ht)
                bb = heap_top(hb)
                if not _ranks_above(means, bb, w):
                    break
                in_top[w] = False
                in_top[bb] = True
                _refresh(w, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl, wl,
                         keyU, hu, wu)
                _refresh(bb, code, bp, in_top, means, counts, lt, ub, tdep, keyT, ht, wt, keyB, hb, wb, keyL, hl,
                         wl, keyU, hu, wu)
        # ---- stop test (after every answered pull, as Learner.tell does)
        if tdep:
            tterm = family_time_term(code, bp, float(rounds + 1))
            h, el = _critical_pair(code, bp, means, counts, counts, in_top, tterm, False, lcb_s, ucb_s)
            lo_h = lcb_s[h]
            up_l = ucb_s[el]
        else:
            h = heap_top(hl)
            el = heap_top(hu)
            lo_h = lt[h]
            up_l = ub[el]
        have_hl = True
        if stop_test(lo_h, up_l, eps_stop, strict):
            return True, queued, rounds, total
    return False, queued, rounds, total
