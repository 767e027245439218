"""What the crowd costs the simulator: microseconds per rating with ``--crowd`` against the plain loop, same run.

For each learner, one repetition on a bundled contest at full size is timed twice in this process, after a warm-up
run that loads the compiled kernels: once driven by the default crowd (``simulate(..., crowd=Crowd())``: restricted
asks, 32 participants, pending answers) and once by the plain reference loop (``driver="reference"``: ask(1), draw,
tell), the baseline. Both stop at the same number of ratings unless the learner stops first; the table gives CPU
microseconds per rating (``time.thread_time``: steadier than the wall clock on a shared machine) and their ratio.

    PYTHONPATH=src python benchmarks/crowd_loop.py --instance caption:512 --ratings 60000

The learners' restricted asks differ: most keep an index structure and answer in O(log n) or O(1); top-two,
Track-and-Stop and Thompson sampling scan every allowed arm (O(n)), so their crowd runs cost several times their
plain ones at 4,000 captions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.registry import make_learner  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402
from purebandits.simulate.crowd import Crowd  # noqa: E402

LEARNERS = {
    "kl_rand_lucb": {"delta": 0.025, "form": "simplified", "k": 10},
    "lil_kl_ucb": {"delta": 0.025, "k": 10},
    "lucb_plus_plus": {"preset": "faithful", "k": 10},
    "lil_ucb": {"preset": "heuristic"},
    "successive_elimination": {},
    "random_sampling": {"k": 10},
    "next_ucb": {"k": 10},
    "contest_ucb_2024": {"k": 10},
    "top_two": {"cost": "bernoulli", "threshold": "theory"},
}


def cpu_per_rating(name: str, params: dict, instance: str, ratings: int, crowd: Crowd | None) -> tuple[float, int]:
    """(CPU microseconds per rating, ratings) of one seeded repetition."""
    kwargs = {"crowd": crowd} if crowd is not None else {"driver": "reference"}
    lrn = make_learner(name, **params)
    simulate(lrn, instance, reps=1, seed=1, max_pulls=2_000, jobs=1, progress=False, **kwargs)  # kernels loaded
    start = time.thread_time()
    res = simulate(lrn, instance, reps=1, seed=1, max_pulls=ratings, jobs=1, progress=False, **kwargs)
    pulls = int(res.pulls[0])
    return 1e6 * (time.thread_time() - start) / max(pulls, 1), pulls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instance", default="caption:512")
    ap.add_argument("--ratings", type=int, default=60_000)
    ap.add_argument("--learners", nargs="*", default=list(LEARNERS))
    args = ap.parse_args()
    print(f"# crowd loop cost on {args.instance}, {args.ratings:,} ratings per run; {machine()}")
    print(f"{'learner':<24}{'crowd us/rating':>17}{'plain us/rating':>17}{'ratio':>8}{'ratings':>10}")
    for name in args.learners:
        c, pc = cpu_per_rating(name, LEARNERS[name], args.instance, args.ratings, Crowd())
        p, pp = cpu_per_rating(name, LEARNERS[name], args.instance, args.ratings, None)
        print(f"{name:<24}{c:>17.1f}{p:>17.1f}{c / p:>8.2f}{min(pc, pp):>10,}", flush=True)


if __name__ == "__main__":
    main()
