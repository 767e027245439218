"""Fixed-budget learners at n = 1,000 with a budget of 10 M: the per-pull compiled kernel and the
exact-sums path, against the same learner's reference ask/tell loop measured in the same run.

Target (docs/BENCHMARKS.md): fixed-budget learners >= 30 M pulls/s at n = 1,000, budget 10 M.
Two compiled paths exist (the simulator issue allows the second where the algorithm uses only
sums): ``run_compiled`` hands out every pull and reads the same reward stream as the ask/tell
loop (bit-identical to it), while ``run_compiled_sums`` draws each round's pulls of an arm at once
from the exact law of their sum (one normal / binomial / multinomial per arm and round; tested
for equality in distribution in ``tests/test_fixed_budget.py``). Instance: 1-sparse Gaussian
(best mean 0.5, others 0, variance 1/4), k = 1.

    PYTHONPATH=src python benchmarks/bench_fixed_budget.py [--quick]
"""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import machine, timed  # noqa: E402

from purebandits.base import Learner  # noqa: E402
from purebandits.instances import Instance, make_instance  # noqa: E402
from purebandits.registry import all_learners  # noqa: E402
from purebandits.simulate.engine import _advance_reference, rep_seeds  # noqa: E402

TARGET = 30e6


def run_per_pull(learner: Learner, inst: Instance, n: int, budget: int, s_learner, s_stream) -> int:
    """One run on the per-pull kernel (the ask/tell loop's reward stream); returns the pulls."""
    lr = learner.clone().start(n, seed=s_learner)
    lr.run_compiled(inst.model.stream(s_stream), budget)
    return lr.n_pulls


def run_exact_sums(learner: Learner, inst: Instance, n: int, s_learner, s_stream) -> int:
    """One run drawing each round's per-arm sums from their exact law; returns the pulls."""
    lr = learner.clone().start(n, seed=s_learner)
    lr.run_compiled_sums(inst.model, np.random.default_rng(s_stream))
    return lr.n_pulls


def main(quick: bool = False) -> None:
    n, budget = 1000, (1_000_000 if quick else 10_000_000)
    inst = make_instance(f"one_sparse:n={n}")
    print(f"# bench_fixed_budget ({machine()})")
    print(f"## fixed-budget learners, n = {n}, budget = {budget:,}, 1-sparse Gaussian, one core")
    print(f"{'learner':>20} {'per-pull M/s':>13} {'(cpu)':>7} {'exact-sums M/s':>15} {'(cpu)':>7} "
          f"{'ask/tell':>10} {'ratio':>7}  target (>= 30 M, cpu)")
    for name, cls in all_learners().items():
        if cls.kind != "fixed_budget":
            continue
        learner = cls(budget=budget)
        s_learner, s_stream = rep_seeds(0, 0)
        per_pull = partial(run_per_pull, learner, inst, n, budget, s_learner, s_stream)
        exact_sums = partial(run_exact_sums, learner, inst, n, s_learner, s_stream)
        per_pull(), exact_sums()  # compile
        pw, pc, _ = timed(per_pull, repeats=3, by="cpu")
        sw, sc, _ = timed(exact_sums, repeats=3, by="cpu")
        lr = learner.clone().start(n, seed=s_learner)
        stream = inst.model.stream(s_stream)
        t0 = time.perf_counter()
        _advance_reference(lr, stream, 20_000 if quick else 100_000)
        base = lr.n_pulls / (time.perf_counter() - t0)
        best = max(pc, sc)
        verdict = "met" if best >= TARGET else "NOT met"
        print(f"{name:>20} {pw / 1e6:>13.1f} {pc / 1e6:>7.1f} {sw / 1e6:>15.0f} {sc / 1e6:>7.0f} "
              f"{base:>10.0f} {sw / base:>6.0f}x  {verdict} ({'exact sums' if sc >= pc else 'per pull'})")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
