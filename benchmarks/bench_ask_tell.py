"""Reference ask/tell driver: pulls per second of the literal ``ask(1)`` / ``tell`` loop for
lil'UCB (heuristic, delta = 0.1) on the 1-sparse Gaussian instance, n = 10, 100, 1,000, 10,000.

Target: >= 300,000 pulls/s at n = 10,000 (and no O(n) Python work per pull: the rate must not
fall like 1/n). Baseline: the naive per-pull NumPy loop of the same algorithm, same run.

    PYTHONPATH=src python benchmarks/bench_ask_tell.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, naive_lil_ucb, naive_pulls  # noqa: E402

from purebandits import LilUCB  # noqa: E402
from purebandits.instances import make_instance  # noqa: E402
from purebandits.simulate.engine import _advance_reference  # noqa: E402


def ask_tell(n: int, pulls: int, repeats: int = 3) -> tuple[float, float]:
    """Best wall and best CPU pulls/s of the reference loop over ``pulls`` pulls (the run restarts when it stops).

    Each is the best over the repeats on its own: on a shared machine the CPU-time rate is the
    steadier one, and the repeat with the best wall time is not always the one with the best CPU time.
    """
    model = make_instance(f"one_sparse:n={n}").model
    best = (0.0, 0.0)
    for rep in range(repeats):
        done = 0
        w0, c0 = time.perf_counter(), time.process_time()
        seed = 0
        while done < pulls:
            learner = LilUCB(delta=0.1).start(n, seed=seed + 1000 * rep)
            stream = model.stream(seed + 1000 * rep)
            _advance_reference(learner, stream, pulls - done)
            done += learner.n_pulls
            seed += 1
        w, c = time.perf_counter() - w0, time.process_time() - c0
        best = (max(best[0], done / w), max(best[1], done / c))
    return best


def main(quick: bool = False) -> None:
    print(f"# bench_ask_tell ({machine()})")
    print("## lil'UCB heuristic, delta = 0.1, 1-sparse Gaussian, literal ask(1)/tell loop (reference driver)")
    print(f"{'n':>7} {'pulls/s':>10} {'(cpu)':>10} {'naive numpy':>12} {'ratio':>7}")
    pulls = 40_000 if quick else 300_000
    for n in (10, 100, 1000, 10000):
        ask_tell(n, 2000, repeats=1)  # warm up (heap build, kernels used by the learner)
        wall, cpu = ask_tell(n, pulls)
        naive = naive_lil_ucb(n, naive_pulls(n) // (4 if quick else 1))
        print(f"{n:>7} {wall:>10.0f} {cpu:>10.0f} {naive:>12.0f} {wall / naive:>6.1f}x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
