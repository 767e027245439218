"""The per-pull kernels the paper-scale reproductions wait on, on the reproductions' own instances.

- AT-LUCB, anytime, ST17 setup 5 with M = 4 (K = 50, budget ceil(H1) ~ 1.05e7): ``st17_fig2``
  runs it 4,000 times; setups 4 (M = 4) and 6 (M = 2) at their whole budgets ceil(H1), as the other
  configurations are (1,251 to 20,323 pulls: per-run costs count).
- UCB1 + LS, JMNB14 alpha = 0.6, n = 1,000 (about 1.7e6 pulls per run): ``jmnb14_fig2/fig3``.
- ExpGap + LS, JMNB14 alpha = 0.6, n = 1,000 (about 2.2e8 pulls per run): ``jmnb14_fig2``.
- Nonadaptive + LS, ExpGap + LS and lil'UCB + LS at n = 10,000 (alpha = 0.6): ``jmnb14_fig2`` runs
  the first two to its 1e9-pull cap, ``jmnb14_fig3`` all three over its 3e7-pull window, 5,000 times.
- Track-and-Stop and top-two (TC) on caption contest 559's 50 best captions: ``caption_extra`` runs
  each 100 times to its 2e7-pull cap (the two best captions nearly tie, so neither stops sooner).

Each kernel runs one repetition of ``pulls`` pulls (compiled driver, one core). Baseline measured in
the same run: the same learner's reference ask/tell loop (a per-pull Python loop) on the same
instance, whose decisions the kernel reproduces exactly (tested).

    PYTHONPATH=src python benchmarks/bench_reproduction_kernels.py [--quick] [--only=AT-LUCB,...] [--src DIR]

``--only`` keeps the rows whose learner label starts with one of the names; ``--src DIR`` then runs
the same rows on another source tree (the previous code) in a subprocess.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, timed  # noqa: E402

from purebandits.base import Learner  # noqa: E402
from purebandits.experiments.caption_extra import top_m_contest  # noqa: E402
from purebandits.instances import Instance, lil_exponential, nsar_setup  # noqa: E402
from purebandits.registry import make_learner  # noqa: E402
from purebandits.simulate.engine import _advance_reference, rep_seeds  # noqa: E402

CASES = [
    ("AT-LUCB (anytime)", "st17 setup 5, M = 4", lambda: make_learner("at_lucb", k=4), lambda: nsar_setup(5, 4),
     4_000_000),
    ("AT-LUCB (anytime)", "st17 setup 4, M = 4", lambda: make_learner("at_lucb", k=4), lambda: nsar_setup(4, 4),
     20_323),
    ("AT-LUCB (anytime)", "st17 setup 6, M = 2", lambda: make_learner("at_lucb", k=2), lambda: nsar_setup(6, 2),
     8_676),
    ("UCB1 + LS", "jmnb14 alpha = 0.6, n = 1,000", lambda: make_learner("ucb1", delta=0.1),
     lambda: lil_exponential(1000, 0.6), 1_700_000),
    ("ExpGap + LS", "jmnb14 alpha = 0.6, n = 1,000", lambda: make_learner("exp_gap_elimination", delta=0.1, ls=True),
     lambda: lil_exponential(1000, 0.6), 20_000_000),
    ("Nonadaptive + LS", "jmnb14 alpha = 0.6, n = 10,000", lambda: make_learner("non_adaptive", delta=0.1),
     lambda: lil_exponential(10_000, 0.6), 20_000_000),
    ("ExpGap + LS", "jmnb14 alpha = 0.6, n = 10,000",
     lambda: make_learner("exp_gap_elimination", delta=0.1, ls=True), lambda: lil_exponential(10_000, 0.6),
     20_000_000),
    ("lil'UCB + LS", "jmnb14 alpha = 0.6, n = 10,000",
     lambda: make_learner("lil_ucb", delta=0.1, preset="faithful", ls=True), lambda: lil_exponential(10_000, 0.6),
     20_000_000),
    ("Track-and-Stop", "caption 559, top 50", lambda: make_learner("track_and_stop", delta=0.01),
     lambda: top_m_contest("559", 50, 1), 300_000),
    ("Top-two (TC)", "caption 559, top 50", lambda: make_learner("top_two", delta=0.01),
     lambda: top_m_contest("559", 50, 1), 4_000_000),
]


def kernel_rate(learner: Learner, instance: Instance, pulls: int) -> tuple[float, float, int]:
    """(wall, CPU) pulls per second of one compiled repetition of ``pulls`` pulls, best of three."""
    def run() -> int:
        ls, ss = rep_seeds(0, 0)
        lr = learner.clone().start(instance.n_arms, seed=ls)
        lr.run_compiled(instance.model.stream(ss), pulls)
        return lr.t_

    run_short = learner.clone().start(instance.n_arms, seed=0)
    run_short.run_compiled(instance.model.stream(0), 2_000)  # load the compiled kernel
    return timed(run, repeats=3, by="cpu")


def ask_tell_rate(learner: Learner, instance: Instance, pulls: int) -> float:
    """Pulls per second of the reference ask/tell loop over the first ``pulls`` pulls."""
    warm = learner.clone().start(instance.n_arms, seed=0)
    _advance_reference(warm, instance.model.stream(0), 2 * instance.n_arms + 200)  # compile its helpers first
    ls, ss = rep_seeds(0, 0)
    lr = learner.clone().start(instance.n_arms, seed=ls)
    t0 = time.perf_counter()
    _advance_reference(lr, instance.model.stream(ss), pulls)
    return lr.t_ / (time.perf_counter() - t0)


def main(quick: bool = False, only: tuple[str, ...] = ()) -> None:
    print(f"# bench_reproduction_kernels ({machine()})")
    print(f"{'learner':>18} {'instance':>30} {'pulls':>11} {'M pulls/s':>10} {'(cpu)':>7} {'ask/tell /s':>12} "
          f"{'ratio':>7}")
    for label, where, make, inst_of, pulls in CASES:
        if only and not label.startswith(only):
            continue
        learner, inst = make(), inst_of()
        pulls = pulls // (10 if quick else 1)
        wall, cpu, done = kernel_rate(learner, inst, pulls)
        base = ask_tell_rate(learner, inst, 20_000 if not quick else 5_000)
        print(f"{label:>18} {where:>30} {done:>11,} {wall / 1e6:>10.3f} {cpu / 1e6:>7.3f} {base:>12,.0f} "
              f"{wall / base:>6.0f}x", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    other = None
    if "--src" in args:
        i = args.index("--src")
        other, args = args[i + 1], args[:i] + args[i + 2:]
    names = next((a.split("=", 1)[1] for a in args if a.startswith("--only=")), "")
    main(quick="--quick" in args, only=tuple(x for x in names.split(",") if x))
    if other:
        import os
        import subprocess

        print(f"\n# the same with --src {other}", flush=True)
        subprocess.run([sys.executable, __file__, *args], env={**os.environ, "PYTHONPATH": other}, check=True)
