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

import numpy as np
from numba import njit

__all__ = ["heap_build", "heap_init", "heap_update", "heap_top", "heap_second"]


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
