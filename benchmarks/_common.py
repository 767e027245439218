"""Shared helpers of the benchmarks: timing, the naive NumPy baseline, machine information.

Every benchmark prints pulls per second and the ratio against a naive per-pull NumPy loop of
the same algorithm measured in the same run, so numbers from a busy or slower machine can be
compared through the ratio. Timings are wall-clock (``time.perf_counter``), best of a few
repeats; the CPU time of this process is printed next to them, because on a shared machine the
wall clock also counts time other processes held the core.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable

import numpy as np


def machine() -> str:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cpus = os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return (f"{platform.processor() or platform.machine()}, {cpus} cores, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def timed(fn: Callable[[], int], repeats: int = 3, by: str = "wall") -> tuple[float, float, int]:
    """Run ``fn`` (which returns a number of pulls) ``repeats`` times.

    Returns (wall pulls/s, CPU pulls/s, pulls) of the best repeat: the one with the highest
    wall-clock rate (``by="wall"``) or CPU-time rate (``by="cpu"``; on a shared machine the
    CPU time of a single-process run is the steadier measure, wall clock also counts the time
    other jobs held the core).
    """
    best = (0.0, 0.0, 0)
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        pulls = fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        cand = (pulls / max(w, 1e-9), pulls / max(c, 1e-9), pulls)
        if cand[0 if by == "wall" else 1] > best[0 if by == "wall" else 1]:
            best = cand
    return best


def naive_lil_ucb(n: int, pulls: int, seed: int = 0, delta: float = 0.1, beta: float = 0.5) -> float:
    """Heuristic lil'UCB (eps = 0, beta = 1/2, delta' = delta/5) as a naive per-pull NumPy loop.

    Each pull recomputes every arm's index with NumPy (O(n)), takes the argmax and draws one
    Gaussian reward with ``rng.normal``. Returns pulls per second over ``pulls`` pulls of the
    1-sparse instance (arms that were never pulled, or pulled once, have an infinite index).
    """
    rng = np.random.default_rng(seed)
    mu = np.zeros(n)
    mu[0] = 0.5
    counts = np.zeros(n)
    sums = np.zeros(n)
    d = delta / 5
    t0 = time.perf_counter()
    for _ in range(pulls):
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = np.log(counts)
            ll = np.where(inner > d * np.e, np.log(inner / d), 1.0)
            rad = np.sqrt(2 * 0.25 * ll / counts)
            idx = np.where(inner > 0, sums / counts + (1 + beta) * rad, np.inf)
        arm = int(np.argmax(idx))
        counts[arm] += 1
        sums[arm] += rng.normal(mu[arm], 0.5)
    return pulls / (time.perf_counter() - t0)


def naive_pulls(n: int) -> int:
    """How many pulls to time the naive loop for (about a second)."""
    return max(2000, min(100_000, 20_000_000 // max(n, 1)))
