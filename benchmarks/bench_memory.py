"""Peak memory of a 5,000-arm, 250-repetition run with 100 checkpoints (target: < 1 GiB).

lil'UCB heuristic on the 1-sparse Gaussian instance, n = 5,000, checkpoints on a geometric grid
from 5,000 to 2,000,000 pulls, two worker processes. Reports the peak resident set size of this
process and of the largest worker (``getrusage``), and the size of the result arrays.

    PYTHONPATH=src python benchmarks/bench_memory.py [--quick]
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits import LilUCB  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402


def main(quick: bool = False) -> None:
    n, reps = (5000, 250) if not quick else (5000, 20)
    checkpoints = np.unique(np.geomspace(5000, 2_000_000, 100).astype(np.int64))
    print(f"# bench_memory ({machine()})")
    t0 = time.perf_counter()
    res = simulate(LilUCB(), f"one_sparse:n={n}", reps=reps, seed=0, checkpoints=checkpoints, jobs=2,
                   progress=False)
    dt = time.perf_counter() - t0
    kib_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kib_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    arrays = sum(getattr(res, a).nbytes for a in res._ARRAYS)
    print(f"lil'UCB, one_sparse:n={n}, {reps} reps, {len(checkpoints)} checkpoints, jobs=2: {dt:.1f} s, "
          f"{res.pulls.sum() / dt / 1e6:.2f} M pulls/s")
    print(f"  result arrays: {arrays / 2**20:.1f} MiB")
    print(f"  peak RSS: main process {kib_self / 2**10:.0f} MiB, largest worker {kib_child / 2**10:.0f} MiB, "
          f"sum {(kib_self + 2 * kib_child) / 2**10:.0f} MiB (bound: main + 2 x largest worker)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
