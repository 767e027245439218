"""Thompson sampling's pick (an exact draw of the posterior argmax) on whole caption contests.

The pick is the learner's per-pull cost. Baseline measured in the same run: the full draw of all
n posteriors (``_ts_full_draw``, the textbook pick, which the learner still uses below 96 arms
and to place its threshold), on the same posteriors. Both are timed on the state a Thompson
sampling run reaches after ``pulls`` pulls of the contest, then a whole run is timed.

    PYTHONPATH=src python benchmarks/bench_thompson.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.algorithms.thompson import ThompsonSampling, _ts_full_draw, ts_pick  # noqa: E402
from purebandits.experiments.tnm17_fig2 import contest  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402


@njit(cache=True)
def _picks(sums, counts, alpha, rng, tail, tail_counts, level, reps, full):  # pragma: no cover - compiled
    s = 0
    for _ in range(reps):
        if full:
            s += _ts_full_draw(sums, counts, alpha, rng, tail, tail_counts, level, False)
        else:
            s += ts_pick(sums, counts, alpha, rng, tail, tail_counts, level)
    return s


def us_per_pick(learner: ThompsonSampling, full: bool, reps: int) -> float:
    """Microseconds per pick on the learner's posteriors (frozen), best of three."""
    args = (learner.sums_, learner.counts_, float(learner.alpha), np.random.default_rng(1), learner.tail_.copy(),
            learner.tail_counts_.copy(), learner.tail_level_.copy())
    _picks(*args, 2, full)
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        _picks(*args, reps, full)
        best = min(best, time.perf_counter() - t0)
    return best / reps * 1e6


def main(quick: bool = False) -> None:
    print(f"# bench_thompson ({machine()})")
    pulls = 20_000 if quick else 200_000
    print(f"{'contest':>8} {'arms':>5} {'state at':>9} {'us/pick':>8} {'full draw':>10} {'ratio':>6} "
          f"{'whole run, us/pull':>19}")
    for name in ("558", "512"):
        inst = contest(name, None)
        simulate(ThompsonSampling(delta=None), inst, reps=1, seed=0, jobs=1, max_pulls=200, progress=False)
        learner = ThompsonSampling(delta=None).start(inst.n_arms, seed=0)
        t0 = time.perf_counter()
        learner.run_compiled(inst.model.stream(0), pulls)
        run_us = (time.perf_counter() - t0) / pulls * 1e6
        fast = us_per_pick(learner, False, 2000 if quick else 20_000)
        slow = us_per_pick(learner, True, 200 if quick else 2000)
        print(f"{name:>8} {inst.n_arms:>5} {pulls:>9,} {fast:>8.1f} {slow:>10.1f} {slow / fast:>5.1f}x "
              f"{run_us:>19.1f}", flush=True)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
