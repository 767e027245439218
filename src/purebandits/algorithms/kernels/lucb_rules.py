"""Decision rules shared by the LUCB family: one bound dispatcher, one selection, one kernel.

Every LUCB-type learner (``purebandits.algorithms.lucb``) is a pair (confidence bound, sampling
rule). The bound is an integer code plus a float parameter vector ``bp`` read by
:func:`family_bound_s`; the rule is "pull both critical arms" (:data:`RULE_PAIR`, LUCB1,
KL-LUCB, lil'LUCB, LUCB++, lil-KLUCB) or "pull one of them at random" (:data:`RULE_RANDOM`,
lil'RandLUCB). :func:`family_select` is the reference rule (a from-scratch O(n) pass; the Python
learners use it with ``_incremental = False`` and for their reports); the compiled driver
(:func:`purebandits.algorithms.kernels.lucb_driver.family_kernel`, over the kernels here and in
:mod:`purebandits.algorithms.kernels.lucb_round_incremental`) and the Python learners' ask/tell path
(:mod:`purebandits.algorithms.kernels.lucb_incremental` for the round-free bounds,
:mod:`purebandits.algorithms.kernels.lucb_round_asktell` for LUCB1 and KL-LUCB) keep the same
quantities incrementally in indexed heaps. All call the same scalar bound function and break
ties the same way (higher mean first, then lower index; argmin/argmax of the bounds to the
lower index), so they choose the same arms bit for bit.

Layout of ``bp`` (float64): ``[w_top, w_bot, eps, sigma, offset, k1, alpha, N, kappa_top,
kappa_bot, c_N, n, nv, v0, v1, v2]``. ``w_top`` is the confidence level of arms in the empirical top-K (their
lower bound decides ``h``), ``w_bot`` that of the other arms (their upper bound decides
``l``); LUCB++-type splits give them different values. ``nv`` values ``v0..`` are the support of the K_inf
bounds (:data:`BOUND_KINF_KT`), which read each arm's law there from its mean and mean square; every other bound
reads the mean only.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.bounds import (
    _KL_ITERS,
    _g_exact,
    kl_lower_bracket_s,
    kl_lower_s,
    kl_lucb_rate_s,
    kl_upper_bracket_s,
    kl_upper_s,
    kt_kl_level_s,
    kt_regret_binary_s,
    kt_regret_s,
    lil_kl_exact_steps_s,
    lil_kl_exact_zone_s,
    lil_kl_level_s,
    lil_kl_lower_exact_s,
    lil_kl_upper_exact_s,
    lil_radius_s,
    lucb_rate_s,
    sg1_radius_s,
    sg2_radius_s,
)
from purebandits.heaps import heap_build, heap_top, heap_update, keyheap_init, keyheap_key, keyheap_update
from purebandits.instances.rewards import stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.kinf_bounds import arm_probabilities_s, kinf_lower_s, kinf_upper_s
from purebandits.ranking import topk_fill

__all__ = [
    "BOUND_LUCB",
    "BOUND_KL_LUCB",
    "BOUND_LIL",
    "BOUND_LIL_KL",
    "BOUND_LIL_KL_EXACT",
    "BOUND_SG1",
    "BOUND_SG2",
    "BOUND_KL_KT",
    "BOUND_KINF_KT",
    "RULE_PAIR",
    "RULE_RANDOM",
    "N_BP",
    "family_time_term",
    "family_bound_s",
    "family_select",
    "stop_test",
    "separated_count",
    "random_pick",
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
#: KL bounds at the Krichevsky-Trofimov level {q : T d(mu_hat, q) <= log(1/w) + kt_regret(T)} (bounds.kt_kl_level_s)
BOUND_KL_KT = 7
#: K_inf bounds of the arm's law on a known support at the same level (kinf_bounds.kinf_upper_s / kinf_lower_s)
BOUND_KINF_KT = 8

RULE_PAIR = 0
RULE_RANDOM = 1

N_BP = 16
_W_TOP, _W_BOT, _EPS, _SIGMA, _OFFSET, _K1, _ALPHA, _N, _KAPPA_TOP, _KAPPA_BOT, _C_N, _NARMS, _NV, _V0, _V1, _V2 = \
    range(N_BP)

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
def count_scale_s(code, bp, T, top):
    """The count-only part of a round-free bound (every code but LUCB1 and KL-LUCB).

    The radius of the sub-Gaussian bounds (lil, [SG1], [SG2]) or the KL level of the lil-KL
    bounds, for an arm with radius count ``T`` on side ``top`` (``w_top`` or ``w_bot``). It
    depends on nothing else, so the compiled driver tabulates it once per count.
    """
    w = bp[_W_TOP] if top else bp[_W_BOT]
    if code == BOUND_LIL:
        return lil_radius_s(T, w, bp[_EPS], bp[_SIGMA], bp[_OFFSET])
    kappa = bp[_KAPPA_TOP] if top else bp[_KAPPA_BOT]
    if code == BOUND_SG1:
        return sg1_radius_s(T, w, bp[_N], bp[_SIGMA], kappa)
    if code == BOUND_SG2:
        return sg2_radius_s(T, w, bp[_SIGMA])
    if code == BOUND_KL_KT or code == BOUND_KINF_KT:
        return kt_kl_level_s(T, w)
    level = lil_kl_level_s(T, w, kappa)
    if code == BOUND_LIL_KL:
        return bp[_C_N] * level
    return level


@njit(cache=True)
def scale_bounds_s(code, bp, mean, m2, s, T, side):
    """(lcb, ucb) of a round-free bound from the count scale ``s`` (:func:`count_scale_s` of the count ``T``).

    ``m2`` is the arm's mean square (the K_inf bounds read the arm's law on the support from ``mean`` and ``m2``;
    the others ignore it). ``side`` as in :func:`family_bound_s` (a skipped side is returned infinite).

    On a two-point support the K_inf bounds take the Krichevsky-Trofimov mixture's exact regret on the answers
    (:func:`purebandits.bounds.kt_regret_binary_s`) in place of its worst case ``kt_regret(T)``: there the
    mixture's wealth has a closed form (the answers are 0/1 after an affine map of the two points), and
    ``T K_inf^+(F_T, m)`` is at most the Bernoulli divergence of the mapped answers, so the bound's proof is
    unchanged with the smaller term.
    """
    lo = -math.inf
    hi = math.inf
    if code == BOUND_KINF_KT:
        nv = int(bp[_NV])
        v = bp[_V0:_V0 + nv]
        p = np.empty(nv)
        arm_probabilities_s(1.0, mean, m2, v, p)
        if nv == 2 and T > 0.0:
            s -= (kt_regret_s(T) - kt_regret_binary_s(p[1] * T, p[0] * T)) / T
            if v[0] == 0.0 and v[1] == 1.0:  # K_inf on {0, 1} is the Bernoulli KL: its bounds, without the Newton
                if side != _SIDE_UPPER:
                    lo = kl_lower_s(mean, s)
                if side != _SIDE_LOWER:
                    hi = kl_upper_s(mean, s)
                return lo, hi
        if side != _SIDE_UPPER:
            lo = kinf_lower_s(p, v, s)
        if side != _SIDE_LOWER:
            hi = kinf_upper_s(p, v, s)
        return lo, hi
    if code == BOUND_LIL or code == BOUND_SG1 or code == BOUND_SG2:
        if side != _SIDE_UPPER:
            lo = mean - s
        if side != _SIDE_LOWER:
            hi = mean + s
    elif code == BOUND_LIL_KL or code == BOUND_KL_KT:
        if side != _SIDE_UPPER:
            lo = kl_lower_s(mean, s)
        if side != _SIDE_LOWER:
            hi = kl_upper_s(mean, s)
    else:  # BOUND_LIL_KL_EXACT
        if side != _SIDE_UPPER:
            lo = lil_kl_lower_exact_s(mean, s, bp[_N])
        if side != _SIDE_LOWER:
            hi = lil_kl_upper_exact_s(mean, s, bp[_N])
    return lo, hi


@njit(cache=True)
def family_bound_s(code, bp, mean, m2, T, top, tterm, side):
    """(lcb, ucb) of one arm with answered mean ``mean`` (mean square ``m2``) and radius count ``T`` (> 0).

    ``top`` says whether the arm is in the empirical top-K (it selects ``w_top`` or ``w_bot``);
    ``tterm`` is :func:`family_time_term` of the current round; ``side`` = 0 computes both
    bounds, 1 only the lower one (the upper is returned as +inf), 2 only the upper one (the
    lower is -inf); a skipped side is thus still a valid, if useless, bound.
    """
    if code == BOUND_LUCB:
        r = math.sqrt(tterm / T)
        lo = mean - r if side != _SIDE_UPPER else -math.inf
        hi = mean + r if side != _SIDE_LOWER else math.inf
        return lo, hi
    if code == BOUND_KL_LUCB:
        level = tterm / T
        lo = kl_lower_s(mean, level) if side != _SIDE_UPPER else -math.inf
        hi = kl_upper_s(mean, level) if side != _SIDE_LOWER else math.inf
        return lo, hi
    return scale_bounds_s(code, bp, mean, m2, count_scale_s(code, bp, T, top), T, side)


@njit(cache=True)
def _ranks_above(means, a, b):
    """True if arm a precedes arm b in the order (higher mean, then lower index)."""
    return means[a] > means[b] or (means[a] == means[b] and a < b)


@njit(cache=True, error_model="numpy")
def _critical_pair(code, bp, means, m2s, counts, T, in_top, tterm, both_sides, lcb, ucb):
    """Fill the per-arm bounds and return (h, l) for a given top-K membership ``in_top``.

    LUCB1's bounds get a branch-free loop that the compiler vectorises (the same arithmetic as
    :func:`family_bound_s`, so the same values; the skipped sides are set to -inf / inf as
    there): LUCB1 re-evaluates all n bounds at every pull.
    """
    n = counts.shape[0]
    if code == BOUND_LUCB:
        for i in range(n):
            r = math.sqrt(tterm / float(T[i]))
            lcb[i] = means[i] - r if both_sides or in_top[i] else -math.inf
            ucb[i] = means[i] + r if both_sides or not in_top[i] else math.inf
    for i in range(n):
        if counts[i] == 0:
            lcb[i] = -math.inf
            ucb[i] = math.inf
        elif code != BOUND_LUCB:
            side = _SIDE_BOTH if both_sides else (_SIDE_LOWER if in_top[i] else _SIDE_UPPER)
            lcb[i], ucb[i] = family_bound_s(code, bp, means[i], m2s[i], float(T[i]), in_top[i], tterm, side)
    h = -1
    el = -1  # the papers' l
    for i in range(n):
        if in_top[i]:
            if h < 0 or lcb[i] < lcb[h]:
                h = i
        elif el < 0 or ucb[i] > ucb[el]:
            el = i
    return h, el


@njit(cache=True)
def family_select(code, bp, k, sums, sumsq, counts, T, tterm, both_sides, in_top, lcb, ucb):
    """Empirical top-K and the critical pair (h, l), from scratch in O(n) (O(n log n) for k > 1).

    Means come from the answered pulls (``sums``, ``counts``), radii from ``T`` (answered plus
    pending pulls for sampling, answered pulls for stopping); an arm never answered has
    infinite bounds. Fills ``in_top`` and the per-arm bounds ``lcb``/``ucb`` (only the side
    that matters, lower for top arms and upper for the rest, unless ``both_sides``) and returns
    ``h = argmin_{top} lcb`` and ``l = argmax_{not top} ucb``, ties to the lower index.
    """
    n = counts.shape[0]
    means = np.zeros(n)
    m2s = np.zeros(n)
    for i in range(n):
        if counts[i] > 0:
            means[i] = sums[i] / counts[i]
            m2s[i] = sumsq[i] / counts[i]
    topk_fill(means, k, in_top)
    return _critical_pair(code, bp, means, m2s, counts, T, in_top, tterm, both_sides, lcb, ucb)


@njit(cache=True)
def stop_test(lcb_h, ucb_l, eps_stop, strict):
    """LUCB stop: ``ucb_l - lcb_h < eps`` (strict) or ``<= eps`` (lil'RandLUCB's ">=")."""
    gap = ucb_l - lcb_h
    if strict:
        return gap < eps_stop
    return gap <= eps_stop


@njit(cache=True)
def separated_count(lcb_h, ucb, in_top, eps_stop, strict):
    """How many arms outside the top-K already pass :func:`stop_test` against ``lcb_h``.

    The stop test holds exactly when all of them do (``l`` has the largest upper bound and the
    test is monotone in it), so ``count / (n - K)`` is the share of the rule already met.
    """
    c = 0
    for i in range(ucb.shape[0]):
        if not in_top[i] and stop_test(lcb_h, ucb[i], eps_stop, strict):
            c += 1
    return c


@njit(cache=True)
def random_pick(h, el, th, tl, u):
    """lil'RandLUCB (JLQ17 Alg. 1): h if ``u < T_l/(T_h + T_l)`` else l (u uniform in [0, 1))."""
    if u < float(tl) / float(th + tl):
        return h
    return el


# ------------------------------------------------------------------------------------ kernel
# Two compiled drivers share the decisions above. Both keep the empirical top-K with two indexed
# heaps (the weakest top arm, keyed by -mean on reversed ids so that equal means pop the higher
# arm; the strongest other arm, keyed by mean): after a pull one swap restores "every top arm
# precedes every other arm". Round-dependent bounds (LUCB1, KL-LUCB) are then re-evaluated for
# all n arms per pull (O(n)); round-free ones are cached per arm and h, l come from two more
# heaps keyed by the cached bounds (O(log n) per pull).


@njit(cache=True, inline="always")
def _set_key(heap, where, key, i, value):
    """heap_update, skipped when the key does not change (the heap is then already valid)."""
    if key[i] != value:
        heap_update(heap, where, key, i, value)


@njit(cache=True, inline="always")
def _set_keyheap(hkey, harm, where, n, i, value):  # pragma: no cover - compiled
    """keyheap_update, skipped when the key does not change."""
    if keyheap_key(hkey, where, i) != value:
        keyheap_update(hkey, harm, where, n, i, value)


@njit(cache=True)
def _refresh_membership(i, in_top, means, keyT, ht, wt, keyB, hb, wb):
    """Re-key arm i in the two membership heaps after its mean or membership changed."""
    n = means.shape[0]
    j = n - 1 - i
    if in_top[i]:
        _set_key(ht, wt, keyT, j, -means[i])
        _set_key(hb, wb, keyB, i, -math.inf)
    else:
        _set_key(ht, wt, keyT, j, -math.inf)
        _set_key(hb, wb, keyB, i, means[i])


@njit(cache=True)
def _round_dependent_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls,
                            lrng, kind, a, b, cdf, values, block, pos, srng):  # pragma: no cover - compiled
    """:func:`family_kernel` for LUCB1 and KL-LUCB: all n bounds are re-evaluated per pull (their bounds read no
    mean square: ``means`` stands in for it)."""
    n = counts.shape[0]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    zp = 0
    means = np.zeros(n)
    in_top = np.zeros(n, dtype=np.bool_)
    keyT = np.full(n, -math.inf)
    keyB = np.full(n, -math.inf)
    ht, wt = heap_build(keyT)
    hb, wb = heap_build(keyB)
    lcb_s = np.empty(n)
    ucb_s = np.empty(n)
    built = False
    have_hl = False
    h = -1
    el = -1
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
                tterm = family_time_term(code, bp, float(rounds + 1))
                if not built:
                    for i in range(n):
                        means[i] = sums[i] / counts[i]
                    topk_fill(means, k, in_top)
                    for i in range(n):
                        _refresh_membership(i, in_top, means, keyT, ht, wt, keyB, hb, wb)
                    built = True
                h, el = _critical_pair(code, bp, means, means, counts, counts, in_top, tterm, False, lcb_s, ucb_s)
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
            topk_fill(means, k, in_top)
            for i in range(n):
                _refresh_membership(i, in_top, means, keyT, ht, wt, keyB, hb, wb)
            built = True
        else:
            means[arm] = sums[arm] / counts[arm]
            _refresh_membership(arm, in_top, means, keyT, ht, wt, keyB, hb, wb)
            while True:  # restore "every top arm precedes every other arm" (one swap suffices)
                w = n - 1 - heap_top(ht)
                bb = heap_top(hb)
                if not _ranks_above(means, bb, w):
                    break
                in_top[w] = False
                in_top[bb] = True
                _refresh_membership(w, in_top, means, keyT, ht, wt, keyB, hb, wb)
                _refresh_membership(bb, in_top, means, keyT, ht, wt, keyB, hb, wb)
        # ---- stop test (after every answered pull, as Learner.tell does)
        tterm = family_time_term(code, bp, float(rounds + 1))
        h, el = _critical_pair(code, bp, means, means, counts, counts, in_top, tterm, False, lcb_s, ucb_s)
        have_hl = True
        if stop_test(lcb_s[h], ucb_s[el], eps_stop, strict):
            return True, queued, rounds, total
    return False, queued, rounds, total


@njit(cache=True)
def _scale_table(code, bp, top, old, need):  # pragma: no cover - compiled
    """:func:`count_scale_s` for counts 0 .. >= ``need``, extending the table ``old`` (doubling)."""
    size = max(2 * old.shape[0], need + 1)
    tab = np.empty(size)
    tab[: old.shape[0]] = old
    for t in range(old.shape[0], size):
        tab[t] = count_scale_s(code, bp, float(t), top) if t > 0 else math.inf
    return tab


@njit(cache=True, inline="always")
def _bisect_start(p, level, N, upper):  # pragma: no cover - compiled
    """The starting state (lo, hi, it) of the bisection of eq. (3) (``upper``) or (2); it = -1: end test pending.

    The cases :func:`lil_kl_upper_exact_s` / :func:`lil_kl_lower_exact_s` answer without
    bisecting come back finished (lo == hi, the same value).
    """
    if upper:
        if level <= 0.0 or p >= 1.0:
            v = lil_kl_upper_exact_s(p, level, N)
            return v, v, 0
        return p, 1.0, -1
    if level <= 0.0 or p <= 0.0:
        v = lil_kl_lower_exact_s(p, level, N)
        return v, v, 0
    return 0.0, p, -1


@njit(cache=True, inline="always")
def _bisect_first(p, level, N, upper, lo, hi, za, zb):  # pragma: no cover - compiled
    """The first step of a partly refined exact bound: (lo, hi, 0, za, zb), lo == hi if finished.

    The end test of :func:`lil_kl_upper_exact_s` / :func:`lil_kl_lower_exact_s`, then the zone
    of :func:`lil_kl_exact_zone_s`, whose Newton iteration starts from the arm's previous zone
    ``(za, zb)`` when it has one (its root at a count one lower: a few iterations fewer).
    """
    end = 1.0 if upper else 0.0
    if _g_exact(p, end, N) <= level:
        return end, end, 0, za, zb
    start = 0.5 * (za + zb) if -math.inf < za and zb < math.inf else math.nan
    za, zb = lil_kl_exact_zone_s(p, level, N, upper, start)
    return lo, hi, 0, za, zb


@njit(cache=True, inline="always")
def _bisect_step(p, level, N, upper, lo, hi, it, za, zb):  # pragma: no cover - compiled
    """One more step of a partly refined exact bound: (lo, hi, it, za, zb), with lo == hi once finished.

    The first step is the end test of :func:`lil_kl_upper_exact_s` / :func:`lil_kl_lower_exact_s`
    (and finds the zone (za, zb) of :func:`lil_kl_exact_zone_s`), the others those of
    :func:`lil_kl_exact_steps_s`: the same outcomes in the same order, so the finished value is
    theirs bit for bit.
    """
    if it < 0:
        return _bisect_first(p, level, N, upper, lo, hi, za, zb)
    lo, hi, it, done = lil_kl_exact_steps_s(p, level, N, upper, lo, hi, it, 1, za, zb)
    if done:
        v = hi if upper else lo
        return v, v, it, za, zb
    return lo, hi, it, za, zb


@njit(cache=True, inline="always")
def _bisect_until(p, level, N, upper, lo, hi, it, za, zb, x):  # pragma: no cover - compiled
    """:func:`_bisect_step` repeated while the unfinished range [lo, hi] contains ``x``, in one call.

    The same steps as calling :func:`_bisect_step` in that loop (the steps after the first run
    in :func:`lil_kl_exact_steps_s`'s own loop, which stops once the range excludes ``x``).
    ``x = nan`` finishes the bisection: the kernel asks for that when the best competitor is a
    twin (same count and mean, hence the same bound), whose order against the arm is then by
    index; refining both only until they part would make them overtake each other one step at a
    time, each overtaking a heap update.
    """
    if lo == hi or x < lo or x > hi:
        return lo, hi, it, za, zb
    if it < 0:
        lo, hi, it, za, zb = _bisect_first(p, level, N, upper, lo, hi, za, zb)
        if lo == hi:
            return lo, hi, it, za, zb
    lo, hi, it, done = lil_kl_exact_steps_s(p, level, N, upper, lo, hi, it, _KL_ITERS, za, zb, x)
    if done:
        v = hi if upper else lo
        return v, v, it, za, zb
    return lo, hi, it, za, zb


@njit(cache=True, inline="always")
def _twin_slot(c, p, upper, mask):  # pragma: no cover - compiled
    """Slot of (count, mean, side) in the kernel's direct-mapped table of bisection states."""
    return ((2 * c + (1 if upper else 0)) * 0x9E3779B1 + int(p * 1073741824.0) * 0x85EBCA6B) & mask


@njit(cache=True)
def _round_free_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls,
                       lrng, kind, a, b, cdf, values, block, pos, srng, fw, iw, in_top):  # pragma: no cover - compiled
    """:func:`family_kernel` for the bounds that depend on an arm's count only: O(log n) per pull.

    Each arm caches its deciding bound (lower for top arms, upper for the others); h and l are
    the tops of two heaps keyed by them. The count part of the bound (:func:`count_scale_s`)
    comes from a table per side, grown on demand, so a pull computes no logarithm for the
    sub-Gaussian bounds and one KL inversion for the KL ones. The arrays are borrowed
    (:func:`purebandits.jit.borrow`): the refresh below runs up to three times per pull and
    touches all of them.
    """
    counts, sums, sumsq, bp = borrow(counts), borrow(sums), borrow(sumsq), borrow(bp)
    a, b, cdf, values, block, pos, srng = borrow_stream(a, b, cdf, values, block, pos, srng)
    lrng = borrow(lrng)
    n = counts.shape[0]
    radius = code == BOUND_LIL or code == BOUND_SG1 or code == BOUND_SG2
    lazy = code == BOUND_LIL_KL or code == BOUND_KL_KT
    bisect = code == BOUND_LIL_KL_EXACT
    N = bp[_N]
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    zp = 0
    # workspace allocated by the caller (it keeps it alive while these borrowed views are used)
    fw, iw, in_top = borrow(fw), borrow(iw), borrow(in_top)
    means, lt, ub = borrow(fw[0]), borrow(fw[1]), borrow(fw[2])
    kt, kb, klo, kup = borrow(fw[3]), borrow(fw[4]), borrow(fw[5]), borrow(fw[6])
    lt_hi, ub_lo = borrow(fw[7]), borrow(fw[8])
    za, zb = borrow(fw[9]), borrow(fw[10])  # the zones of the exact form's bisections (_bisect_step)
    ht, hb, hl, hu = borrow(iw[0]), borrow(iw[1]), borrow(iw[2]), borrow(iw[3])
    wt, wb, wl, wu = borrow(iw[4]), borrow(iw[5]), borrow(iw[6]), borrow(iw[7])
    bit = borrow(iw[8])  # steps done by each arm's partly refined exact bound (_bisect_start)
    # The exact form's most refined bisection state per (count, mean, side), direct-mapped: arms with
    # the same answers have the same bound (common with graded rewards, and such twins tie at the
    # top of a heap, so their ordering needs the bisection finished), and the state after a given
    # number of steps is a function of (mean, level) alone, so a twin resumes from the other's state
    # instead of repeating its zone and steps. Indexed only (no call takes these arrays).
    tw_mask = 1
    while tw_mask < 2 * n:
        tw_mask *= 2
    tw_mask = tw_mask - 1 if bisect else 0
    tw_c = np.full(tw_mask + 1, -1, dtype=np.int64)  # 2 * count + (1 for an upper bound)
    tw_it = np.zeros(tw_mask + 1, dtype=np.int64)
    tw_p, tw_lo, tw_hi = np.zeros(tw_mask + 1), np.zeros(tw_mask + 1), np.zeros(tw_mask + 1)
    tw_za, tw_zb = np.zeros(tw_mask + 1), np.zeros(tw_mask + 1)
    init = np.full(n, -math.inf)
    keyheap_init(init, kt, ht, wt)
    keyheap_init(init, kb, hb, wb)
    keyheap_init(init, klo, hl, wl)
    keyheap_init(init, kup, hu, wu)
    # indexed only, never passed to a call in the loop: no reference counting, no borrowing
    tab_top = _scale_table(code, bp, True, np.empty(0), 256)
    tab_bot = _scale_table(code, bp, False, np.empty(0), 256)
    built = False
    pulled = False
    arm = -1
    h = -1
    el = -1
    while True:
        if n_zero == 0:  # (re)key what changed; no bound is defined before every arm has an answer
            # arms to re-key: all of them once, then the pulled one, then the pair a swap exchanged
            if not built:
                for i in range(n):
                    means[i] = sums[i] / counts[i]
                topk_fill(means, k, in_top)
                first = 0
                last = n
                built = True
            else:
                means[arm] = sums[arm] / counts[arm]
                first = arm
                last = -1
            second = -1
            while True:
                for step in range(n + 2):
                    if step == 0:
                        i = first
                    elif last < 0:
                        i = second if step == 1 else -1
                    else:
                        i = step if step < last else -1
                    if i < 0:
                        break
                    # ---- refresh arm i in the four heaps (one code site, inlined heap updates)
                    c = counts[i]
                    if in_top[i]:
                        if c >= tab_top.shape[0]:
                            tab_top = _scale_table(code, bp, True, tab_top, c)
                        s = tab_top[c]
                        if radius:
                            lo = means[i] - s
                            lo_hi = lo
                        elif lazy:
                            lo, lo_hi = kl_lower_bracket_s(means[i], s)
                        elif bisect:
                            lo, lo_hi, bit[i] = _bisect_start(means[i], s, N, False)
                        else:
                            lo = scale_bounds_s(code, bp, means[i], sumsq[i] / c, s, float(c), _SIDE_LOWER)[0]
                            lo_hi = lo
                        lt[i] = lo
                        lt_hi[i] = lo_hi
                        _set_keyheap(kt, ht, wt, n, n - 1 - i, -means[i])
                        _set_keyheap(kb, hb, wb, n, i, -math.inf)
                        _set_keyheap(klo, hl, wl, n, i, -lo)
                        _set_keyheap(kup, hu, wu, n, i, -math.inf)
                    else:
                        if c >= tab_bot.shape[0]:
                            tab_bot = _scale_table(code, bp, False, tab_bot, c)
                        s = tab_bot[c]
                        if radius:
                            hi = means[i] + s
                            hi_lo = hi
                        elif lazy:
                            hi_lo, hi = kl_upper_bracket_s(means[i], s)
                        elif bisect:
                            hi_lo, hi, bit[i] = _bisect_start(means[i], s, N, True)
                        else:
                            hi = scale_bounds_s(code, bp, means[i], sumsq[i] / c, s, float(c), _SIDE_UPPER)[1]
                            hi_lo = hi
                        ub[i] = hi
                        ub_lo[i] = hi_lo
                        _set_keyheap(kt, ht, wt, n, n - 1 - i, -math.inf)
                        _set_keyheap(kb, hb, wb, n, i, means[i])
                        _set_keyheap(klo, hl, wl, n, i, -math.inf)
                        _set_keyheap(kup, hu, wu, n, i, hi)
                # restore "every top arm precedes every other arm" (one swap suffices)
                w = n - 1 - heap_top(ht)
                bb = heap_top(hb)
                if not _ranks_above(means, bb, w):
                    break
                in_top[w] = False
                in_top[bb] = True
                first = w
                second = bb
                last = -1
            # ---- h and l. A lazy bound is an interval [lt, lt_hi] (top) or [ub_lo, ub] (others) around
            # the exact value, and the heaps are keyed by its optimistic end. The heap's top is the
            # exact argmin (argmax) once its own bound is exact, or when its pessimistic end beats
            # every other arm's optimistic end (the larger of the root's children keys); otherwise
            # its bound is computed exactly and the test repeats. Then the stop test (after every
            # answered pull, as Learner.tell does; not on entry): certain if the largest possible gap
            # passes, impossible if the smallest fails (the gap is monotone in both bounds, in
            # floating point too); else both bounds are made exact (``exact``: a certified h or l
            # stays on top when its bound becomes exact) and it is decided on them.
            #
            # The exact form's bounds are partly refined bisections instead (_bisect_start): a
            # comparison left open refines the range in question one bisection step at a time, only
            # until it is decided (h's range entirely below or above the best competitor's end; the
            # stop test's smallest and largest gaps on the same side of eps), so most bounds are
            # never bisected to the end; the wider of h's and l's ranges is refined for the stop test.
            # An arm at the top of a heap first resumes from the table of twins' states (tw_*) if a twin
            # got further, is refined in one call (_bisect_until), and is finished at once if the best
            # competitor is a twin. None of this changes a decision: h, l and the stop test are those
            # of the finished bounds (ties by index, as the heaps order equal keys), however far each
            # range was refined.
            exact = False
            while True:
                while True:
                    h = heap_top(hl)
                    if lt[h] == lt_hi[h] or (not exact and -lt_hi[h] > max(klo[1], klo[2])):
                        break
                    if bisect:
                        p = means[h]
                        c = counts[h]
                        s = tab_top[c]
                        lo, lo_hi, it, zl, zh = lt[h], lt_hi[h], bit[h], za[h], zb[h]
                        slot = _twin_slot(c, p, False, tw_mask)
                        if tw_c[slot] == 2 * c and tw_p[slot] == p and tw_it[slot] > it:
                            lo, lo_hi, it = tw_lo[slot], tw_hi[slot], tw_it[slot]
                            zl, zh = tw_za[slot], tw_zb[slot]
                        other = -max(klo[1], klo[2])
                        j = hl[1] if klo[1] >= klo[2] else hl[2]
                        if 0 <= j < n and in_top[j] and counts[j] == c and means[j] == p:
                            other = math.nan  # a twin is the best competitor: finish (see _bisect_until)
                        lo, lo_hi, it, zl, zh = _bisect_until(p, s, N, False, lo, lo_hi, it, zl, zh, other)
                        lt[h], lt_hi[h], bit[h], za[h], zb[h] = lo, lo_hi, it, zl, zh
                        tw_c[slot], tw_p[slot], tw_it[slot] = 2 * c, p, it
                        tw_lo[slot], tw_hi[slot], tw_za[slot], tw_zb[slot] = lo, lo_hi, zl, zh
                        v = lo
                    else:
                        v = scale_bounds_s(code, bp, means[h], sumsq[h] / counts[h], tab_top[counts[h]],
                                           float(counts[h]), _SIDE_LOWER)[0]
                        lt[h] = v
                        lt_hi[h] = v
                    _set_keyheap(klo, hl, wl, n, h, -v)
                while True:
                    el = heap_top(hu)
                    if ub[el] == ub_lo[el] or (not exact and ub_lo[el] > max(kup[1], kup[2])):
                        break
                    if bisect:
                        p = means[el]
                        c = counts[el]
                        s = tab_bot[c]
                        hi_lo, hi, it, zl, zh = ub_lo[el], ub[el], bit[el], za[el], zb[el]
                        slot = _twin_slot(c, p, True, tw_mask)
                        if tw_c[slot] == 2 * c + 1 and tw_p[slot] == p and tw_it[slot] > it:
                            hi_lo, hi, it = tw_lo[slot], tw_hi[slot], tw_it[slot]
                            zl, zh = tw_za[slot], tw_zb[slot]
                        other = max(kup[1], kup[2])
                        j = hu[1] if kup[1] >= kup[2] else hu[2]
                        if 0 <= j < n and not in_top[j] and counts[j] == c and means[j] == p:
                            other = math.nan
                        hi_lo, hi, it, zl, zh = _bisect_until(p, s, N, True, hi_lo, hi, it, zl, zh, other)
                        ub_lo[el], ub[el], bit[el], za[el], zb[el] = hi_lo, hi, it, zl, zh
                        tw_c[slot], tw_p[slot], tw_it[slot] = 2 * c + 1, p, it
                        tw_lo[slot], tw_hi[slot], tw_za[slot], tw_zb[slot] = hi_lo, hi, zl, zh
                        v = hi
                    else:
                        v = scale_bounds_s(code, bp, means[el], sumsq[el] / counts[el], tab_bot[counts[el]],
                                           float(counts[el]), _SIDE_UPPER)[1]
                        ub[el] = v
                        ub_lo[el] = v
                    _set_keyheap(kup, hu, wu, n, el, v)
                if not pulled:
                    break
                if stop_test(lt[h], ub[el], eps_stop, strict):
                    return True, queued, rounds, total
                if exact or not stop_test(lt_hi[h], ub_lo[el], eps_stop, strict):
                    break
                if bisect:  # refine the wider range until the test is decided or it is the narrower one
                    if lt_hi[h] - lt[h] >= ub[el] - ub_lo[el]:
                        p = means[h]
                        s = tab_top[counts[h]]
                        lo, lo_hi, it = lt[h], lt_hi[h], bit[h]
                        while (lo != lo_hi and lo_hi - lo >= ub[el] - ub_lo[el]
                               and not stop_test(lo, ub[el], eps_stop, strict)
                               and stop_test(lo_hi, ub_lo[el], eps_stop, strict)):
                            lo, lo_hi, it, za[h], zb[h] = _bisect_step(p, s, N, False, lo, lo_hi, it, za[h], zb[h])
                        lt[h], lt_hi[h], bit[h] = lo, lo_hi, it
                        _set_keyheap(klo, hl, wl, n, h, -lo)
                    else:
                        p = means[el]
                        s = tab_bot[counts[el]]
                        hi_lo, hi, it = ub_lo[el], ub[el], bit[el]
                        while (hi_lo != hi and hi - hi_lo > lt_hi[h] - lt[h]
                               and not stop_test(lt[h], hi, eps_stop, strict)
                               and stop_test(lt_hi[h], hi_lo, eps_stop, strict)):
                            hi_lo, hi, it, za[el], zb[el] = _bisect_step(p, s, N, True, hi_lo, hi, it, za[el], zb[el])
                        ub_lo[el], ub[el], bit[el] = hi_lo, hi, it
                        _set_keyheap(kup, hu, wu, n, el, hi)
                    continue
                exact = True
        if total >= max_pulls:
            break
        # ---- ask
        if queued >= 0:
            arm = queued
            queued = -1
        elif n_zero > 0:
            while counts[zp] > 0:
                zp += 1
            arm = zp
        else:
            rounds += 1
            if rule == RULE_PAIR:
                arm = h
                queued = el
            else:
                arm = random_pick(h, el, counts[h], counts[el], lrng.random())
        # ---- tell
        r = stream_draw(kind, a, b, cdf, values, block, pos, srng, arm)
        if counts[arm] == 0:
            n_zero -= 1
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        pulled = True
    return False, queued, rounds, total
