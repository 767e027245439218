"""Incremental ask/tell state of top-two (:class:`purebandits.algorithms.top_two.TopTwo`).

The reference rule (:func:`top_two_pick` per ask, :func:`glr_statistic_s` per answer) makes O(n)
passes: the first arm with no pull, the means, the empirical-best leader, the challenger
``argmin_{j != B} W(B, j)`` and the GLR statistic. This workspace keeps them between calls,
with the same decisions bit for bit (tests/test_incremental_ask_tell.py holds them to the reference):

- the means ``mu`` (answered; 0 for an arm never answered, as the rule has it) and an indexed
  max-heap on them (:mod:`purebandits.heaps`, ties to the lower arm): its top is the EB leader,
  and the GLR's empirical best once every arm has an answer;
- how many arms have no pull at all (answered or pending) and how many no answer;
- for the Gaussian cost, the arms in buckets by virtual count ``N = counts + pending``
  (bucket k holds ``2^k <= N < 2^(k+1)``), each bucket a max-heap on ``mu``. The challenger is
  found by walking the buckets from their roots: below a node every arm has ``mu_j <= mu_p`` and
  ``N_j >= 2^k``, and :func:`glr_pair_cost_s` is monotone in both in floating point too
  (every step is a correctly rounded, monotone operation), so ``W(mu_B, N_B; mu_p, 2^k)`` is a
  lower bound of every cost in the subtree, which is skipped when that bound exceeds the best
  cost found so far (exceeds: a tie could still win on its index). The walk starts from the last
  challenger's cost. The Bernoulli cost is not monotone in that certified way: it keeps the scan.
- the GLR stop uses the leader from the heap and :func:`glr_stop_s`'s hint (the last minimiser):
  one cost usually shows that the rule does not stop; otherwise Z is computed in full.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from purebandits.bounds import glr_challenge_s, glr_pair_cost_s, glr_threshold_s
from purebandits.heaps import keyheap_init, keyheap_key, keyheap_update
from purebandits.jit import borrow

__all__ = ["tt_new", "tt_ask", "tt_note", "tt_tell", "tt_told", "tt_stop", "N_BUCKETS"]

#: buckets of virtual counts (the last one also holds every larger count: still a valid lower bound)
N_BUCKETS = 40
# fw rows: mu, leader heap keys, bucket heap keys
_MU, _KL = 0, 1
_KB0 = 2
_N_FW = _KB0 + N_BUCKETS
# iw rows: leader heap arms, positions; bucket heap arms, positions; bucket of each arm; walk stack; scalars
_HL, _WL = 0, 1
_HB0 = 2
_WB0 = _HB0 + N_BUCKETS
_BUCKET = _WB0 + N_BUCKETS
_STACK = _BUCKET + 1
_SCAL = _STACK + 1
_N_IW = _SCAL + 1
# scalars: arms with no pull at all, arms with no answer, GLR hint, last challenger
_NOPULL, _NOANSWER, _HINT, _CHAL = range(4)


def tt_new(counts: np.ndarray, sums: np.ndarray, pending: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A workspace (fw, iw) for the state ``counts``, ``sums``, ``pending``."""
    n = counts.shape[0]
    width = max(n + 1, 8)  # a heap's n arms and its sentinel; the scalars' row
    fw = np.full((_N_FW, width), -math.inf)
    iw = np.zeros((_N_IW, width), dtype=np.int64)
    _tt_init(counts, sums, pending, fw, iw)
    return fw, iw


@njit(cache=True)
def _tt_init(counts, sums, pending, fw, iw):  # pragma: no cover - compiled
    n = counts.shape[0]
    mu = fw[_MU]
    nopull = 0
    noanswer = 0
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
        if counts[i] == 0:
            noanswer += 1
            if pending[i] == 0:
                nopull += 1
    keyheap_init(mu[:n], fw[_KL], iw[_HL], iw[_WL][:n])
    none = np.full(n, -math.inf)
    for b in range(N_BUCKETS):
        keyheap_init(none, fw[_KB0 + b], iw[_HB0 + b], iw[_WB0 + b][:n])
    for i in range(n):
        iw[_BUCKET, i] = -1
        _rebucket(counts, pending, fw, iw, n, i)
    iw[_SCAL, _NOPULL] = nopull
    iw[_SCAL, _NOANSWER] = noanswer
    iw[_SCAL, _HINT] = -1
    iw[_SCAL, _CHAL] = -1


@njit(cache=True, inline="always")
def _set(fw, iw, krow, hrow, wrow, n, arm, value):  # pragma: no cover - compiled
    hkey = fw[krow]
    where = iw[wrow]
    if keyheap_key(hkey, where, arm) != value:
        keyheap_update(hkey, iw[hrow], where, n, arm, value)


@njit(cache=True, inline="always")
def _bucket_of(N):  # pragma: no cover - compiled
    """floor(log2 N) for N >= 1, capped at the last bucket."""
    k = 0
    m = N >> 1
    while m > 0 and k < N_BUCKETS - 1:
        k += 1
        m >>= 1
    return k


@njit(cache=True)
def _rebucket(counts, pending, fw, iw, n, i):  # pragma: no cover - compiled
    """Put arm i in the bucket of its virtual count (none at 0), keyed by its mean."""
    N = counts[i] + pending[i]
    old = iw[_BUCKET, i]
    new = _bucket_of(N) if N > 0 else -1
    if new != old:
        if old >= 0:
            _set(fw, iw, _KB0 + old, _HB0 + old, _WB0 + old, n, i, -math.inf)
        if new >= 0:
            _set(fw, iw, _KB0 + new, _HB0 + new, _WB0 + new, n, i, fw[_MU, i])
        iw[_BUCKET, i] = new


@njit(cache=True)
def _challenger_walk(counts, pending, fw, iw, leader, sigma):  # pragma: no cover - compiled
    """argmin_{j != leader} W(leader, j) at the virtual counts, Gaussian cost, ties to the lower index."""
    n = counts.shape[0]
    mu = fw[_MU]
    mb = mu[leader]
    nb = float(counts[leader] + pending[leader])
    stack = iw[_STACK]
    best = -1
    best_w = math.inf
    c = iw[_SCAL, _CHAL]
    if 0 <= c < n and c != leader:  # the last challenger: usually the answer, a tight bound at once
        best = c
        best_w = glr_pair_cost_s(mb, nb, mu[c], float(counts[c] + pending[c]), True, sigma)
    for b in range(N_BUCKETS):
        hkey = fw[_KB0 + b]
        if hkey[0] == -math.inf:
            continue
        harm = iw[_HB0 + b]
        floor_n = float(1 << b)
        stack[0] = 0
        size = 1
        while size > 0:
            size -= 1
            p = stack[size]
            kp = hkey[p]
            if kp == -math.inf or glr_pair_cost_s(mb, nb, kp, floor_n, True, sigma) > best_w:
                continue  # every arm below p costs at least that much
            j = harm[p]
            if j != leader:
                w = glr_pair_cost_s(mb, nb, mu[j], float(counts[j] + pending[j]), True, sigma)
                if w < best_w or (w == best_w and j < best):
                    best_w = w
                    best = j
            ch = 2 * p + 1
            if ch < n:
                stack[size] = ch
                size += 1
                if ch + 1 < n:
                    stack[size] = ch + 1
                    size += 1
    iw[_SCAL, _CHAL] = best
    return best


@njit(cache=True)
def _challenger_scan(counts, pending, fw, leader, gaussian, sigma):  # pragma: no cover - compiled
    """The reference scan of :func:`top_two_pick` on the kept means."""
    mu = fw[_MU]
    chal = -1
    best_w = math.inf
    nb = float(counts[leader] + pending[leader])
    for j in range(counts.shape[0]):
        if j != leader:
            w = glr_pair_cost_s(mu[leader], nb, mu[j], float(counts[j] + pending[j]), gaussian, sigma)
            if w < best_w:
                best_w = w
                chal = j
    return chal


@njit(cache=True)
def _note(counts, pending, fw, iw, arm, before):  # pragma: no cover - compiled
    """Arm ``arm``'s pending pulls changed; ``before`` was its virtual count."""
    n = counts.shape[0]
    N = counts[arm] + pending[arm]
    if before == 0 and N > 0:
        iw[_SCAL, _NOPULL] -= 1
    elif before > 0 and N == 0:
        iw[_SCAL, _NOPULL] += 1
    _rebucket(counts, pending, fw, iw, n, arm)


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
        leader = iw[_HL, 0]
        if u < beta:
            arm = leader
        elif gaussian:
            arm = _challenger_walk(counts, pending, fw, iw, leader, sigma)
        else:
            arm = _challenger_scan(counts, pending, fw, leader, gaussian, sigma)
    before = counts[arm] + pending[arm]
    pending[arm] += 1
    _note(counts, pending, fw, iw, arm, before)
    return arm, leader


@njit(cache=True)
def _told(counts, sums, pending, fw, iw, arm):  # pragma: no cover - compiled
    """Arm ``arm`` got an answer (counts, sums, pending already updated): new mean, same virtual count."""
    n = counts.shape[0]
    m = sums[arm] / counts[arm]
    fw[_MU, arm] = m
    _set(fw, iw, _KL, _HL, _WL, n, arm, m)
    b = iw[_BUCKET, arm]
    if b >= 0:
        _set(fw, iw, _KB0 + b, _HB0 + b, _WB0 + b, n, arm, m)
    if counts[arm] == 1:
        iw[_SCAL, _NOANSWER] -= 1


@njit(cache=True)
def tt_told(counts, sums, pending, fw, iw, arm):  # pragma: no cover - compiled
    """:func:`_told` for a tell applied by the caller."""
    counts, sums, pending, fw, iw = borrow(counts), borrow(sums), borrow(pending), borrow(fw), borrow(iw)
    _told(counts, sums, pending, fw, iw, arm)


@njit(cache=True)
def _stop(counts, sums, fw, iw, gaussian, sigma, threshold):  # pragma: no cover - compiled
    """:func:`glr_stop_s` with the leader from the heap: the arm to output if ``Z > threshold``, else -1."""
    if iw[_SCAL, _NOANSWER] > 0:  # Z = 0 (the reference computes it so)
        if 0.0 > threshold:
            return glr_challenge_s(sums, counts, gaussian, sigma)[0]
        return -1
    n = counts.shape[0]
    hint = iw[_SCAL, _HINT]
    if 0 <= hint < n:
        best = iw[_HL, 0]  # every arm answered: the heap's top is the empirical best
        if hint != best:
            w = glr_pair_cost_s(fw[_MU, best], float(counts[best]), sums[hint] / counts[hint], float(counts[hint]),
                                gaussian, sigma)
            if w <= threshold:  # Z <= W(a_hat, hint) <= threshold
                return -1
    best, z, chal = glr_challenge_s(sums, counts, gaussian, sigma)
    iw[_SCAL, _HINT] = chal
    return best if z > threshold else -1


@njit(cache=True)
def tt_stop(counts, sums, fw, iw, gaussian, sigma, t, n_arms, delta, theory):  # pragma: no cover - compiled
    """The GLR stop on the answered pulls at time ``t``: the arm to output, or -1."""
    counts, sums, fw, iw = borrow(counts), borrow(sums), borrow(fw), borrow(iw)
    return _stop(counts, sums, fw, iw, gaussian, sigma, glr_threshold_s(float(t), n_arms, delta, theory))


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
    return _stop(counts, sums, fw, iw, gaussian, sigma, glr_threshold_s(float(t), n_arms, delta, theory))
