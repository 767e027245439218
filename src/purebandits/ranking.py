"""The empirical top-k of a vector, compiled: the one selection every kernel uses.

Order: larger value first, ties to the lower index (the order of
:func:`purebandits.base.top_k_by`), so compiled and Python code pick the same arms.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["topk_fill", "topk_mask"]


@njit(cache=True)
def topk_fill(w, k, mask):  # pragma: no cover - compiled
    """Set ``mask`` to the k largest entries of ``w``: O(n) (one pass for k = 1, else a partition)."""
    n = w.shape[0]
    mask[:] = False
    if k == 1:
        best = 0
        for i in range(1, n):
            if w[i] > w[best]:
                best = i
        mask[best] = True
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
