"""Track-and-Stop's optimal weights w*(mu) (GK16 Thm 5), and Track-and-Stop runs on caption contests.

w* is solved at every pull, so its cost is the learner's per-pull cost. Baseline measured in the
same run: the naive solver of the same equations with SciPy (``brentq`` for every inner root
x_a(y) inside ``brentq`` for the outer F(y) = 1), called from Python.

    PYTHONPATH=src python benchmarks/bench_track_and_stop.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from numba import njit
from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.algorithms.track_and_stop import TAS_CLIP, TrackAndStop, optimal_weights_s  # noqa: E402
from purebandits.bounds import kl_bernoulli  # noqa: E402


@njit(cache=True)
def _solve_all(mus, w, reps):  # pragma: no cover - compiled
    s = 0.0
    for _ in range(reps):
        for i in range(mus.shape[0]):
            optimal_weights_s(mus[i], w)
            s += w[0]
    return s


def naive_weights(mu: np.ndarray) -> np.ndarray:
    """w*(mu) by nested SciPy root finding (the same equations as optimal_weights_s)."""
    mu = np.clip(mu, TAS_CLIP, 1 - TAS_CLIP)
    b = int(np.argmax(mu))
    m1 = mu[b]
    others = [a for a in range(len(mu)) if a != b]

    def g(x, ma):
        m = (m1 + x * ma) / (1 + x)
        return kl_bernoulli(m1, m) + x * kl_bernoulli(ma, m)

    def x_of(y, ma):
        hi = 1.0
        while g(hi, ma) < y:
            hi *= 2
        return brentq(lambda x: g(x, ma) - y, 0.0, hi, xtol=1e-14)

    def f(y):
        s = 0.0
        for a in others:
            x = x_of(y, mu[a])
            m = (m1 + x * mu[a]) / (1 + x)
            s += kl_bernoulli(m1, m) / kl_bernoulli(mu[a], m)
        return s - 1.0

    d12 = kl_bernoulli(m1, np.max(mu[others]))
    with np.errstate(divide="ignore"):  # F(y) is +inf at the top of its bracket
        y = brentq(f, 1e-15 * d12, d12 * (1 - 1e-12), xtol=1e-15)
    w = np.zeros(len(mu))
    for a in others:
        w[a] = x_of(y, mu[a])
    w[b] = 1.0
    return w / w.sum()


def _means(n: int, kind: str, batch: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    if kind == "uniform":
        return rng.uniform(0.01, 0.99, size=(batch, n))
    return 0.5 + 0.05 * rng.uniform(size=(batch, n))  # near-ties, like the top captions of a contest


def solver_us(mus: np.ndarray) -> float:
    """Microseconds per compiled call, best of three after doubling the work to >= 0.3 s."""
    w = np.empty(mus.shape[1])
    _solve_all(mus[:1], w, 1)
    reps = 1
    while True:
        t0 = time.perf_counter()
        _solve_all(mus, w, reps)
        if time.perf_counter() - t0 > 0.3:
            break
        reps *= 2
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        _solve_all(mus, w, reps)
        best = min(best, time.perf_counter() - t0)
    return best / (reps * mus.shape[0]) * 1e6


def naive_us(mus: np.ndarray, calls: int) -> float:
    t0 = time.perf_counter()
    for i in range(calls):
        naive_weights(mus[i])
    return (time.perf_counter() - t0) / calls * 1e6


def main(quick: bool = False) -> None:
    print(f"# bench_track_and_stop ({machine()})")
    print(f"{'arms':>5} {'means':>10} {'us/call':>9} {'naive SciPy':>12} {'ratio':>8}")
    for n in (10, 50):
        for kind in ("uniform", "clustered"):
            mus = _means(n, kind, 50 if quick else 200)
            fast = solver_us(mus)
            slow = naive_us(mus, 3 if quick else 10)
            print(f"{n:>5} {kind:>10} {fast:>9.2f} {slow:>12.0f} {slow / fast:>7.0f}x", flush=True)
    from purebandits.experiments.caption_extra import top_m_contest
    from purebandits.simulate import simulate

    cap = 20_000 if quick else 200_000
    print(f"\n## Track-and-Stop (delta = 0.01), one run, seed 0, capped at {cap:,} pulls")
    for contest in ("559", "558"):
        for m in (10, 50):
            inst = top_m_contest(contest, m, 1)
            simulate(TrackAndStop(delta=0.01), inst, reps=1, seed=0, jobs=1, max_pulls=1_000, progress=False)
            t0 = time.perf_counter()
            r = simulate(TrackAndStop(delta=0.01), inst, reps=1, seed=0, jobs=1, max_pulls=cap, progress=False)
            dt = time.perf_counter() - t0
            p = int(r.pulls[0])
            print(f"contest {contest}, top {m:>2}: {p:>7} pulls ({'stopped' if r.stopped[0] else 'capped'}) "
                  f"in {dt:6.2f} s: {p / dt:>9.0f} pulls/s", flush=True)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
