"""The compiled driver of every LUCB-family learner: one entry point over the rules' kernels.

:func:`family_kernel` picks, for a learner's bound, the kernel that makes its decisions fastest: the
round-free bounds' O(log n) kernel (:mod:`purebandits.algorithms.kernels.lucb_rules`), or for the round-dependent
bounds (LUCB1, KL-LUCB) the incremental kernel (:mod:`purebandits.algorithms.kernels.lucb_round_incremental`) where
it applies and the O(n) reference kernel where it does not. It sits in a module of its own so that the rules
and their incremental fast path import in one direction only (the fast path imports the rules).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.lucb_round_incremental import round_incremental_kernel, round_incremental_supported
from purebandits.algorithms.kernels.lucb_rules import (
    BOUND_KL_LUCB,
    BOUND_LUCB,
    _round_dependent_kernel,
    _round_free_kernel,
)

__all__ = ["family_kernel"]


@njit(cache=True)
def family_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls, lrng,
                  kind, a, b, cdf, values, block, pos, srng):  # pragma: no cover - compiled
    """Sequential (ask(1)/tell) run of any LUCB-family learner; returns (done, queued, rounds, total).

    Same decisions as the Python learner: each arm once first (lowest index), then at each
    round the pair (h, l) from the empirical top-K and the bounds; the stop test runs after
    every answered pull with the round index ``rounds + 1``. Round-dependent bounds (LUCB1,
    KL-LUCB) go to :mod:`purebandits.algorithms.kernels.lucb_round_incremental` (amortised O(log n) per
    pull, the same decisions), or to the O(n) reference ``_round_dependent_kernel`` where it does
    not apply; the others cost O(log n) (:func:`~purebandits.algorithms.kernels.lucb_rules._round_free_kernel`).
    """
    if code == BOUND_LUCB or code == BOUND_KL_LUCB:
        if round_incremental_supported(code, bp, k, counts.shape[0]):  # same decisions, O(log n) per pull
            return round_incremental_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued,
                                            rounds, max_pulls, lrng, kind, a, b, cdf, values, block, pos, srng)
        return _round_dependent_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds,
                                       max_pulls, lrng, kind, a, b, cdf, values, block, pos, srng)
    n = counts.shape[0]
    # means, lt, ub, the keys of the four heaps in heap order, lt_hi, ub_lo, the bisection zones' ends
    fw = np.full((11, n + 1), -math.inf)
    fw[2] = math.inf
    fw[8] = math.inf
    fw[10] = math.inf
    # the arms of the four heaps in heap order, then their positions, then the exact form's bisection steps
    iw = np.zeros((9, n + 1), dtype=np.int64)
    in_top = np.zeros(n, dtype=np.bool_)
    return _round_free_kernel(code, rule, strict, eps_stop, bp, k, counts, sums, sumsq, queued, rounds, max_pulls,
                              lrng, kind, a, b, cdf, values, block, pos, srng, fw, iw, in_top)
