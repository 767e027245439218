"""Two processes against one on a 250-repetition run (target: >= 1.8x).

lil'UCB heuristic on the 1-sparse Gaussian instance with n = 2,000 arms (about 90,000 pulls per
repetition), compiled driver; ``jobs=1`` runs in-process, ``jobs=2`` uses the local process pool
(pool start-up included). The results of both runs are checked to be identical.

    PYTHONPATH=src python benchmarks/bench_parallel.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, naive_lil_ucb  # noqa: E402

from purebandits import LilUCB  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402


def main(quick: bool = False) -> None:
    n, reps = 2000, 250
    if quick:
        n, reps = 500, 60
    inst = f"one_sparse:n={n}"
    print(f"# bench_parallel ({machine()})")
    simulate(LilUCB(), inst, reps=2, jobs=1, progress=False)  # load the kernel
    times = {}
    results = {}
    for jobs in (1, 2):
        t0 = time.perf_counter()
        results[jobs] = simulate(LilUCB(), inst, reps=reps, seed=0, jobs=jobs, progress=False)
        times[jobs] = time.perf_counter() - t0
    same = all(np.array_equal(getattr(results[1], a), getattr(results[2], a)) for a in results[1]._ARRAYS)
    pulls = int(results[1].pulls.sum())
    naive = naive_lil_ucb(n, 5000)
    print(f"lil'UCB, {inst}, {reps} reps, {pulls} pulls in all; identical results: {same}")
    for jobs in (1, 2):
        print(f"  jobs={jobs}: {times[jobs]:.2f} s, {pulls / times[jobs] / 1e6:.2f} M pulls/s "
              f"({pulls / times[jobs] / naive:.0f}x the naive NumPy loop at {naive:.0f} pulls/s)")
    print(f"  speed-up of 2 processes: {times[1] / times[2]:.2f}x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
