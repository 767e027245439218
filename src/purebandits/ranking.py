"""The empirical top-k of a vector, compiled: the one selection every kernel uses.

Order: larger value first, ties to the lower index (the order of
:func:`purebandits.base.top_k_by`), so compiled and Python code pick the same arms.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.heaps import keyheap_init, keyheap_update
from purebandits.jit import borrow

__all__ = ["topk_fill", "topk_mask", "topk_workspace", "topk_tracker_fill", "topk_tracker_update", "borrow_topk"]

#: up to this k the selection is one pass over a sorted buffer (the kernels' top-k sets are small)
SMALL_K = 8


@njit(cache=True)
def topk_fill(w, k, mask):  # pragma: no cover - compiled
    """Set ``mask`` to the k largest entries of ``w``: one pass for k <= SMALL_K, else a partition."""
    n = w.shape[0]
    mask[:] = False
    if k == 1:
        best = 0
        for i in range(1, n):
            if w[i] > w[best]:
                best = i
        mask[best] = True
        return
    if k <= SMALL_K:  # one pass keeping the best k in order: faster than a partition and its copies
        idx = np.empty(SMALL_K, dtype=np.int64)
        m = 0
        for i in range(n):
            if m == k and not w[i] > w[idx[k - 1]]:  # ties stay with the earlier (lower) index
                continue
            j = m if m < k else k - 1
            while j > 0 and w[i] > w[idx[j - 1]]:
                idx[j] = idx[j - 1]
                j -= 1
            idx[j] = i
            if m < k:
                m += 1
        for j in range(k):
            mask[idx[j]] = True
        return
    kth = -np.partition(-w, k - 1)[k - 1]
    c = 0
    for i in range(n):
        if w[i] > kth:
            mask[i] = True
            c += 1
    for i in range(n):
        if c == k:
            break
        if w[i] == kth:
            mask[i] = True
            c += 1


@njit(cache=True)
def topk_mask(w, k):  # pragma: no cover - compiled
    """Boolean mask of the k largest entries of ``w`` (see :func:`topk_fill`)."""
    mask = np.zeros(w.shape[0], dtype=np.bool_)
    topk_fill(w, k, mask)
    return mask


# ------------------------------------------------------------------------- incremental top-k
# A kernel that changes one value per step keeps its top-k in O(k + log n) per change instead
# of re-selecting it: when one value moves, the set changes by one swap at most, with the best
# arm outside (the top of a key heap of the other values) or with the worst arm inside.


def topk_workspace(n: int, k: int) -> tuple:
    """Arrays of a top-k tracker over n values (k < n), allocated in Python: fill with :func:`topk_tracker_fill`.

    (mask, members, hkey, harm, where): :func:`topk_mask`'s mask, its k arms in no set order,
    and a key heap (:mod:`purebandits.heaps`) of the other arms' values (members: -inf). A kernel
    that receives them as an argument can :func:`borrow_topk` them.
    """
    return (np.zeros(n, dtype=np.bool_), np.empty(k, np.int64), np.empty(n + 1), np.empty(n + 1, np.int64),
            np.empty(n, np.int64))


@njit(cache=True)
def topk_tracker_fill(tr, w, k):  # pragma: no cover - compiled
    """Set the tracker ``tr`` (from :func:`topk_workspace`) to the top-k of ``w``."""
    mask, members, hkey, harm, where = tr
    n = w.shape[0]
    topk_fill(w, k, mask)
    c = 0
    key = np.empty(n)
    for i in range(n):
        key[i] = w[i]
        if mask[i]:
            key[i] = -math.inf
            members[c] = i
            c += 1
    keyheap_init(key, hkey, harm, where)


@njit(cache=True, inline="always")
def borrow_topk(tr):  # pragma: no cover - compiled
    """Borrowed views of a tracker's arrays (only for a tracker the kernel got as an argument)."""
    return borrow(tr[0]), borrow(tr[1]), borrow(tr[2]), borrow(tr[3]), borrow(tr[4])


@njit(cache=True, inline="always")
def topk_tracker_update(tr, w, arm):  # pragma: no cover - compiled
    """Restore the top-k after ``w[arm]`` changed; returns the swap (out, in), or (-1, -1).

    Same order as :func:`topk_fill`: larger value first, ties to the lower index.
    """
    mask, members, hkey, harm, where = tr
    n = w.shape[0]
    k = members.shape[0]
    if mask[arm]:
        out, inn = arm, harm[0]  # the best arm outside
        if not (w[inn] > w[arm] or (w[inn] == w[arm] and inn < arm)):
            return -1, -1
    else:
        keyheap_update(hkey, harm, where, n, arm, w[arm])
        out = members[0]  # the worst arm inside: smallest value, ties to the higher index
        for j in range(1, k):
            x = members[j]
            if w[x] < w[out] or (w[x] == w[out] and x > out):
                out = x
        inn = arm
        if not (w[arm] > w[out] or (w[arm] == w[out] and arm < out)):
            return -1, -1
    mask[out] = False
    mask[inn] = True
    for j in range(k):
        if members[j] == out:
            members[j] = inn
    keyheap_update(hkey, harm, where, n, out, w[out])
    keyheap_update(hkey, harm, where, n, inn, -math.inf)
    return out, inn
