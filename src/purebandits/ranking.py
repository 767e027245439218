"""The empirical top-k of a vector, compiled: the one selection every kernel uses.

Order: larger value first, ties to the lower index (the order of
:func:`purebandits.base.top_k_by`), so compiled and Python code pick the same arms.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["topk_fill", "topk_mask"]

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
    if k <= SMALL_K:  # one pass keeping the best k in order: no allocation, faster than a partition
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
