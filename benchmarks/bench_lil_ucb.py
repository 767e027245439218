"""Compiled driver, one core: lil'UCB (heuristic) on the 1-sparse Gaussian instance, and every
registered learner that has a kernel.

Targets (docs/BENCHMARKS.md): lil'UCB >= 15 M pulls/s at n = 1,000 and >= 10 M at n = 10,000;
every adaptive fixed-confidence learner >= 5 M at n = 1,000; fixed-budget learners >= 30 M at
n = 1,000 with a budget of 10 M. Rates are whole simulate() runs (start, kernel, results) in one
process, so per-run overheads count.

    PYTHONPATH=src python benchmarks/bench_lil_ucb.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, naive_lil_ucb, naive_pulls, timed  # noqa: E402

from purebandits import LilUCB  # noqa: E402
from purebandits.instances import make_instance  # noqa: E402
from purebandits.registry import all_learners  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402
from purebandits.simulate.engine import _advance_reference, rep_seeds  # noqa: E402


def sim_rate(learner, instance, reps, max_pulls=None) -> tuple[float, float, int]:
    simulate(learner, instance, reps=1, seed=99, jobs=1, max_pulls=max_pulls, progress=False)  # load kernels

    def run() -> int:
        return int(simulate(learner, instance, reps=reps, seed=0, jobs=1, max_pulls=max_pulls,
                            progress=False).pulls.sum())

    return timed(run, repeats=3)


def ask_tell_rate(learner, instance, pulls: int) -> float:
    """The reference ask/tell loop (a per-pull Python loop) on one repetition."""
    import time

    ls, ss = rep_seeds(0, 0)
    lr = learner.clone().start(instance.n_arms, seed=ls)
    stream = instance.model.stream(ss)
    t0 = time.perf_counter()
    _advance_reference(lr, stream, pulls)
    return lr.t_ / (time.perf_counter() - t0)


def main(quick: bool = False) -> None:
    print(f"# bench_lil_ucb ({machine()})")
    print("## lil'UCB heuristic, delta = 0.1, 1-sparse Gaussian (best 0.5, others 0, variance 1/4), compiled driver")
    print(f"{'n':>7} {'reps':>5} {'pulls/rep':>10} {'M pulls/s':>10} {'(cpu)':>8} {'naive numpy':>12} {'ratio':>8}")
    for n, reps in ((10, 2000), (100, 200), (1000, 40), (10000, 4)):
        if quick:
            reps = max(1, reps // 8)
        wall, cpu, pulls = sim_rate(LilUCB(delta=0.1), f"one_sparse:n={n}", reps)
        naive = naive_lil_ucb(n, naive_pulls(n) // (4 if quick else 1))
        print(f"{n:>7} {reps:>5} {pulls / reps:>10.0f} {wall / 1e6:>10.2f} {cpu / 1e6:>8.2f} {naive:>12.0f} "
              f"{wall / naive:>8.0f}x")
    print()
    print("## every learner with a kernel at n = 1000 (fixed confidence: delta = 0.1; fixed budget: budget = 1e7)")
    print("   baseline: the same learner's reference ask/tell loop (a per-pull Python loop)")
    print(f"{'learner':>24} {'kind':>17} {'M pulls/s':>10} {'(cpu)':>8} {'ask/tell':>10} {'ratio':>8}")
    for name, cls in all_learners().items():
        if not cls.has_kernel():
            continue
        params = {}
        if "delta" in cls._param_names():
            params["delta"] = 0.1
        if cls.kind == "fixed_budget":
            params["budget"] = 10_000_000 if not quick else 1_000_000
        learner = cls(**params)
        bounded = cls.tags.get("bounded_rewards", False)
        inst = make_instance("one_sparse:n=1000" + (",model=bernoulli" if bounded else ""))
        reps = 1 if cls.kind == "fixed_budget" else (2 if quick else 5)
        cap = 10_000_000
        wall, cpu, pulls = sim_rate(learner, inst, reps, max_pulls=cap)
        base = ask_tell_rate(learner, inst, 30_000 if not quick else 5_000)
        print(f"{name:>24} {cls.kind:>17} {wall / 1e6:>10.2f} {cpu / 1e6:>8.2f} {base:>10.0f} {wall / base:>8.0f}x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
