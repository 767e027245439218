"""The exact lil-KL bounds by their definition, for tests that hold the fast paths to it (test_bounds, test_lucb)."""

from __future__ import annotations

from numba import njit

from purebandits import bounds as B


@njit(cache=True)
def plain_exact(p, level, N, upper):  # pragma: no cover - compiled
    """TNM17 eqs. (2)-(3) by their definition: the end test, then 60 plain bisection steps, no early stop."""
    if upper:
        if level <= 0.0 or p >= 1.0:
            return max(min(p, 1.0), 0.0) if level <= 0.0 else 1.0
        lo, hi = p, 1.0
        if B._g_exact(p, hi, N) <= level:
            return 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if B._g_exact(p, mid, N) <= level:
                lo = mid
            else:
                hi = mid
        return hi
    if level <= 0.0 or p <= 0.0:
        return max(min(p, 1.0), 0.0) if level <= 0.0 else 0.0
    lo, hi = 0.0, p
    if B._g_exact(p, lo, N) <= level:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if B._g_exact(p, mid, N) <= level:
            hi = mid
        else:
            lo = mid
    return lo
