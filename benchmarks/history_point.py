"""Cost of one results-history point (``purebandits.service.history.history_point``), which the service computes
under the learner's lock every ``history_every`` answers (issue 21).

For each learner, at 138 items (caption contest 559's size) and 7,500 items (a large contest): the learner is
fed ``30,000`` Bernoulli answers from uniform-random means (seed 0), then ``history_point`` is timed over 10
calls after one warm-up call; the per-answer share at ``history_every = 100`` is that time / 100.

    PYTHONPATH=src python benchmarks/history_point.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.registry import make_learner  # noqa: E402
from purebandits.service.history import history_point  # noqa: E402

LEARNERS = ["lucb1", "lil_ucb", "kl_rand_lucb", "lil_kl_ucb"]


def main() -> None:
    print(f"# history_point ({machine()})")
    print("| learner | items | ms per point | ms per answer at history_every = 100 |")
    print("|---|---:|---:|---:|")
    for n in (138, 7500):
        for name in LEARNERS:
            rng = np.random.default_rng(0)
            mu = rng.random(n)
            learner = make_learner(name).start(n, seed=1)
            for _ in range(30_000):
                got = learner.ask(1)
                if not got:
                    break
                learner.tell(got[0], float(rng.random() < mu[got[0]]))
            history_point(learner, {}, 1)  # warm-up: compiled helpers are compiled on first use
            t0 = time.perf_counter()
            for _ in range(10):
                history_point(learner, {}, 1)
            ms = (time.perf_counter() - t0) / 10 * 1000
            print(f"| {name} | {n:,} | {ms:.2f} | {ms / 100:.3f} |")


if __name__ == "__main__":
    main()
