"""Indexed max-heap over arms, compiled with Numba, for O(log n) per-pull kernels.

Keys are compared as ``(key, -arm)``: the largest key wins and ties go to the lower arm
index, the same order the Python learners use (``heapq`` on ``(-key, arm)``), so both
drivers pick the same arm. The heap is three arrays: ``heap`` (arms in heap order),
``where`` (position of each arm in ``heap``) and ``key`` (the key of each arm).

Speed: the per-pull functions are inlined into the calling kernel (``inline="always"``). Pass
them borrowed arrays (:func:`purebandits.jit.borrow`, on arrays the kernel received as
arguments; :func:`heap_init` builds a heap in arrays allocated by the caller): otherwise every
call pays atomic reference counting on the three arrays, which costs more than the sift itself.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

__all__ = ["heap_build", "heap_init", "heap_update", "heap_top", "heap_second", "topheap_init", "topheap_replace",
           "topheap_size", "keyheap_init", "keyheap_update", "keyheap_key", "keyheap_best_bonus",
           "keyheap_best_bonus_steps", "keyheap_bonus_reaches", "bonus_horizon", "UPPER_KEY_MARGIN"]


@njit(cache=True, inline="always")
def _above(key, a, b):
    """True if arm a ranks above arm b."""
    return key[a] > key[b] or (key[a] == key[b] and a < b)


@njit(cache=True, inline="always")
def _sift_up(heap, where, key, i):
    while i > 0:
        p = (i - 1) >> 1
        if _above(key, heap[i], heap[p]):
            heap[i], heap[p] = heap[p], heap[i]
            where[heap[i]] = i
            where[heap[p]] = p
            i = p
        else:
            break


@njit(cache=True, inline="always")
def _sift_down(heap, where, key, i):
    n = heap.shape[0]
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        c = left
        r = left + 1
        if r < n and _above(key, heap[r], heap[left]):
            c = r
        if _above(key, heap[c], heap[i]):
            heap[i], heap[c] = heap[c], heap[i]
            where[heap[i]] = i
            where[heap[c]] = c
            i = c
        else:
            break


@njit(cache=True)
def heap_init(key, heap, where):
    """Fill ``heap`` and ``where`` (int64 arrays of length n) with a heap over ``key``."""
    n = key.shape[0]
    for i in range(n):
        heap[i] = i
        where[i] = i
    for i in range(n // 2 - 1, -1, -1):
        _sift_down(heap, where, key, i)


@njit(cache=True)
def heap_build(key):
    """Build (heap, where) for the keys ``key`` (float64 array, one per arm)."""
    n = key.shape[0]
    heap = np.empty(n, dtype=np.int64)
    where = np.empty(n, dtype=np.int64)
    heap_init(key, heap, where)
    return heap, where


@njit(cache=True, inline="always")
def heap_update(heap, where, key, arm, value):
    """Set ``key[arm] = value`` and restore the heap order."""
    old = key[arm]
    key[arm] = value
    i = where[arm]
    if value >= old:
        _sift_up(heap, where, key, i)
    else:
        _sift_down(heap, where, key, i)


@njit(cache=True, inline="always")
def heap_top(heap):
    """The arm with the largest key."""
    return heap[0]


@njit(cache=True, inline="always")
def heap_second(heap, key):
    """The arm ranked second (-1 if fewer than two arms)."""
    n = heap.shape[0]
    if n < 2:
        return -1
    if n == 2:
        return heap[1]
    return heap[1] if _above(key, heap[1], heap[2]) else heap[2]


# --------------------------------------------------------------------------- replace-top heap
# A sequential index policy (lil'UCB) only ever changes the key of the arm at the top: it pulls
# the top arm and re-keys it. For that, the heap keeps the keys *in heap order* next to the arms
# (``hkey[i]`` is the key of ``harm[i]``), so a sift reads a child's key without first loading
# the child's arm and then its key, and needs no ``where`` array (measured: lil'UCB's kernel
# 62 -> 49 ns per pull at n = 1,000; 4- and 8-ary variants and a branch-free child choice were
# slower). The arrays have ``topheap_size(n)`` entries: the slot past ``n`` holds a sentinel
# (key -inf, arm ``n``) that loses every comparison with a real arm, so a sift never tests
# whether the right child exists.


def topheap_size(n: int) -> int:
    """Length of the ``hkey``/``harm`` arrays of a replace-top heap over ``n`` arms."""
    return n + 1


@njit(cache=True, inline="always")
def _pair_above(ka, aa, kb, ab):
    """True if (key ka, arm aa) ranks above (kb, ab): larger key, ties to the lower arm."""
    return ka > kb or (ka == kb and aa < ab)


@njit(cache=True, inline="always")
def _topheap_sift(hkey, harm, n, i, kx):  # pragma: no cover - compiled
    """Move the arm at slot ``i``, with the new key ``kx``, down to its place among the first ``n`` slots."""
    x = harm[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        kc = hkey[c]
        ac = harm[c]
        kr = hkey[c + 1]  # the sentinel when c = n - 1
        ar = harm[c + 1]
        if _pair_above(kr, ar, kc, ac):
            c += 1
            kc = kr
            ac = ar
        if _pair_above(kc, ac, kx, x):
            hkey[i] = kc
            harm[i] = ac
            i = c
        else:
            break
    hkey[i] = kx
    harm[i] = x


@njit(cache=True)
def topheap_init(key, hkey, harm):  # pragma: no cover - compiled
    """Build a replace-top heap over ``key`` (one key per arm) in ``hkey``/``harm``."""
    n = key.shape[0]
    for i in range(n):
        hkey[i] = key[i]
        harm[i] = i
    for i in range(n, hkey.shape[0]):
        hkey[i] = -math.inf
        harm[i] = i
    for i in range(n // 2 - 1, -1, -1):
        _topheap_sift(hkey, harm, n, i, hkey[i])


@njit(cache=True, inline="always")
def topheap_replace(hkey, harm, n, value):  # pragma: no cover - compiled
    """Give the top arm (``harm[0]``) the key ``value`` and restore the order (``n`` arms)."""
    _topheap_sift(hkey, harm, n, 0, value)


# ------------------------------------------------------------------- indexed heap, keys in order
# The replace-top layout (keys stored in heap order, a sentinel past the end) plus a ``where``
# array, so any arm's key can change: what the LUCB family needs, whose pulled arm is not always
# at the top of the heap it sits in. Sifts move a hole instead of swapping pairs. Same order as
# above (larger key, ties to the lower arm), so the top is the same arm as the other heaps'.


@njit(cache=True, inline="always")
def _keyheap_sift_up(hkey, harm, where, i, kx, x):  # pragma: no cover - compiled
    while i > 0:
        p = (i - 1) >> 1
        kp = hkey[p]
        ap = harm[p]
        if _pair_above(kx, x, kp, ap):
            hkey[i] = kp
            harm[i] = ap
            where[ap] = i
            i = p
        else:
            break
    hkey[i] = kx
    harm[i] = x
    where[x] = i


@njit(cache=True, inline="always")
def _keyheap_sift_down(hkey, harm, where, n, i, kx, x):  # pragma: no cover - compiled
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        kc = hkey[c]
        ac = harm[c]
        kr = hkey[c + 1]  # the sentinel when c = n - 1
        ar = harm[c + 1]
        if _pair_above(kr, ar, kc, ac):
            c += 1
            kc = kr
            ac = ar
        if _pair_above(kc, ac, kx, x):
            hkey[i] = kc
            harm[i] = ac
            where[ac] = i
            i = c
        else:
            break
    hkey[i] = kx
    harm[i] = x
    where[x] = i


@njit(cache=True)
def keyheap_init(key, hkey, harm, where):  # pragma: no cover - compiled
    """Build an indexed heap over ``key`` (n keys) in ``hkey``/``harm`` (length n + 1) and ``where`` (n)."""
    n = key.shape[0]
    for i in range(n):
        hkey[i] = key[i]
        harm[i] = i
        where[i] = i
    for i in range(n, hkey.shape[0]):
        hkey[i] = -math.inf
        harm[i] = i
    for i in range(n // 2 - 1, -1, -1):
        _keyheap_sift_down(hkey, harm, where, n, i, hkey[i], harm[i])


@njit(cache=True, inline="always")
def keyheap_key(hkey, where, arm):  # pragma: no cover - compiled
    """The current key of ``arm``."""
    return hkey[where[arm]]


@njit(cache=True, inline="always")
def keyheap_update(hkey, harm, where, n, arm, value):  # pragma: no cover - compiled
    """Give ``arm`` the key ``value`` and restore the order (``n`` arms); the top is ``harm[0]``."""
    i = where[arm]
    if value >= hkey[i]:
        _keyheap_sift_up(hkey, harm, where, i, value, arm)
    else:
        _keyheap_sift_down(hkey, harm, where, n, i, value, arm)


# ------------------------------------------------- index policies whose bonus grows with time
# UCB-type indices mu_i + sqrt(c(t) / u_i) all move when t does, so a heap cannot hold them.
# A key heap can hold upper keys instead: the indices at a horizon t1 >= t (c(t1) >= c(t), and
# every rounded operation is monotone in c). The best index is then found by walking down from
# the top and skipping every subtree whose key is below the best index found so far: no arm in
# it can win or tie. The keys are rebuilt once t passes the horizon. Kernels build them with c
# inflated by UPPER_KEY_MARGIN, so they stay upper bounds even if a libm log or pow were off by
# an ulp between t and t1 (the walk's answer does not depend on how loose the keys are).

#: relative inflation of the c used for upper keys
UPPER_KEY_MARGIN = 1.0 + 1e-9


@njit(cache=True, inline="always")
def bonus_horizon(t: float, n: int) -> float:  # pragma: no cover - compiled
    """The horizon t1 for keys built at time t: t (1 + 1/256), and at least n/8 pulls later.

    A rebuild evaluates n keys, so at least n/8 pulls between rebuilds bounds it by 8 key
    evaluations per pull; the 1/256 keeps the keys tight (measured on UCB1, n = 1,000).
    """
    return t + max(t / 256.0, n / 8.0)


@njit(cache=True, inline="always")
def keyheap_best_bonus_steps(hkey, harm, n, stack, mu, u, c):  # pragma: no cover - compiled
    """:func:`keyheap_best_bonus` and the number of arms it evaluated: (arm, steps)."""
    best = -1
    best_v = -math.inf
    steps = 0
    stack[0] = 0
    size = 1
    while size > 0:
        size -= 1
        p = stack[size]
        if hkey[p] < best_v:
            continue
        a = harm[p]
        v = mu[a] + math.sqrt(c / u[a])
        steps += 1
        if v > best_v or (v == best_v and a < best):
            best_v = v
            best = a
        ch = 2 * p + 1
        if ch < n:
            d = ch + 1  # hkey[n] is the sentinel (-inf)
            if hkey[d] > hkey[ch]:
                ch, d = d, ch
            # the larger child goes on last, so it is walked first and raises best_v sooner
            if d < n and hkey[d] >= best_v:
                stack[size] = d
                size += 1
            if hkey[ch] >= best_v:
                stack[size] = ch
                size += 1
    return best, steps


@njit(cache=True, inline="always")
def keyheap_best_bonus(hkey, harm, n, stack, mu, u, c):  # pragma: no cover - compiled
    """The arm maximising ``mu[i] + sqrt(c / u[i])`` (ties: lower index) in a key heap of upper keys.

    Every key must be at least its arm's value (keys of excluded arms: -inf); ``stack`` is
    scratch of length n + 1. Equal to the scan ``argmax`` over the arms with finite keys.
    """
    return keyheap_best_bonus_steps(hkey, harm, n, stack, mu, u, c)[0]


@njit(cache=True, inline="always")
def keyheap_bonus_reaches(hkey, harm, n, stack, mu, u, c, lo, eps):  # pragma: no cover - compiled
    """True if an arm with a finite key has ``(mu[i] + sqrt(c / u[i])) - lo >= eps`` (not ``< eps``).

    Every finite key must be at least its arm's value. Rounded subtraction is monotone, so a
    subtree whose top key gives ``key - lo < eps`` holds no such arm and is skipped; the walk
    stops at the first arm found. ``max_i (v_i - lo) < eps`` (LUCB's stop test) is then exactly
    ``not keyheap_bonus_reaches(...)``.
    """
    stack[0] = 0
    size = 1
    while size > 0:
        size -= 1
        p = stack[size]
        k = hkey[p]
        if k == -math.inf or k - lo < eps:
            continue
        a = harm[p]
        if not ((mu[a] + math.sqrt(c / u[a])) - lo < eps):
            return True
        ch = 2 * p + 1
        if ch < n:
            stack[size] = ch
            size += 1
            if ch + 1 < n:
                stack[size] = ch + 1
                size += 1
    return False
