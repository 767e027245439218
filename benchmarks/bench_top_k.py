"""CLUCB and lil'CLUCB from K = 2 to K = N/2: the shipped compiled driver against both of its kernels.

The top-K learners' compiled kernels were timed at small K only, and at K = N/2 (the second column of
JLQ17's Figure 1, ``jlq17_fig1``) the incremental kernel of ``purebandits.algorithms.kernels.cpe_incremental``
had become O(K^2) per round: lil'CLUCB ran at 0.006 M pulls/s at N = 1,000, K = 500, and the paper-scale
estimate of ``jlq17_fig1`` went from 151 to 2,176 process-seconds unnoticed. This benchmark times, per
(learner, instance, N, K), on one repetition with a pull cap per N (best CPU rate of two; one for the
previous code):

- ``shipped``: ``run_compiled`` as shipped (the incremental kernel while K <= 16 or 40 K <= N, else the reference);
- ``incremental`` and ``reference``: each kernel forced, so the crossover the dispatch uses is visible;
- with ``--src DIR``, the shipped driver of another source tree (the previous code) in a subprocess.

Same decisions in every column (tests/test_cpe_incremental.py), so the pulls are equal and only time differs.

    PYTHONPATH=src python benchmarks/bench_top_k.py [--quick] [--src /tmp/prev/src]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, timed  # noqa: E402

LEARNERS = ("clucb", "lil_clucb")
INSTANCES = ("1-sparse", "0.3-exponential")


def grid(quick: bool) -> list[tuple[int, int, int]]:
    """(N, K, pull cap) of every row: K = 2, N/25, N/10 and N/2 (N/10 at most at N = 5,000)."""
    rows = []
    for n, cap in ((200, 1_000_000), (1000, 500_000), (5000, 100_000)):
        if quick and n == 5000:
            continue
        for k in sorted({2, n // 25, n // 10, n // 2 if n < 5000 else n // 10}):
            rows.append((n, k, cap // (4 if quick else 1)))
    return rows


def rate(name: str, inst_label: str, n: int, k: int, cap: int, kernel: str | None,
         repeats: int = 2) -> tuple[float, int]:
    """(M pulls per CPU second, pulls) of one capped repetition; ``kernel`` forces one (None: as shipped)."""
    from purebandits.algorithms import cpe
    from purebandits.instances import alpha_exponential, one_sparse
    from purebandits.registry import make_learner
    from purebandits.simulate import simulate

    inst = one_sparse(n, k) if inst_label == "1-sparse" else alpha_exponential(n, k, 0.3)
    learner = make_learner(name, k=k, delta=0.01)
    cls = type(learner)
    saved = (cls.__dict__.get("_incremental"), getattr(cpe, "INCREMENTAL_SHARE", None))
    try:
        if kernel is not None:
            cls._incremental = kernel == "incremental"
            if saved[1] is not None:
                cpe.INCREMENTAL_SHARE = 0
        simulate(learner, inst, reps=1, seed=1, jobs=1, max_pulls=min(cap, 20_000), progress=False)  # compile

        def run() -> int:
            return int(simulate(learner, inst, reps=1, seed=7, jobs=1, max_pulls=cap, progress=False).pulls.sum())

        _, cpu, pulls = timed(run, repeats=repeats, by="cpu")
    finally:
        if saved[0] is not None:
            cls._incremental = saved[0]
        elif "_incremental" in cls.__dict__:  # back to the base class's value
            delattr(cls, "_incremental")
        if saved[1] is not None:
            cpe.INCREMENTAL_SHARE = saved[1]
    return cpu / 1e6, pulls


def measure(quick: bool, kernels: tuple[str | None, ...], repeats: int = 2) -> list[dict]:
    out = []
    for name in LEARNERS:
        for inst_label in INSTANCES:
            for n, k, cap in grid(quick):
                row = {"learner": name, "instance": inst_label, "n": n, "k": k, "cap": cap}
                for kernel in kernels:
                    row[kernel or "shipped"], row["pulls"] = rate(name, inst_label, n, k, cap, kernel, repeats)
                out.append(row)
                if len(kernels) > 1:
                    print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N = 200 and 1,000 only, caps / 4")
    ap.add_argument("--src", type=Path, help="another source tree whose shipped driver is timed too")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:  # the other tree: its shipped driver only, one run each (it may be the slow code)
        print(json.dumps(measure(args.quick, (None,), repeats=1)))
        return 0
    rows = measure(args.quick, (None, "incremental", "reference"))
    prev = {}
    if args.src is not None:
        cmd = [sys.executable, __file__, "--json"] + (["--quick"] if args.quick else [])
        env = dict(os.environ, PYTHONPATH=str(args.src))
        done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
        prev = {(r["learner"], r["instance"], r["n"], r["k"]): r for r in json.loads(done.stdout)}
    print(f"# bench_top_k ({machine()}), delta = 0.01, one repetition capped, M pulls per CPU second")
    print("| learner | instance | N | K | pulls | shipped | incremental kernel | reference kernel | previous code |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p = prev.get((r["learner"], r["instance"], r["n"], r["k"]))
        ps = f"{p['shipped']:.3f}" if p else "-"
        print(f"| {r['learner']} | {r['instance']} | {r['n']:,} | {r['k']} | {r['pulls']:,} | **{r['shipped']:.3f}** | "
              f"{r['incremental']:.3f} | {r['reference']:.3f} | {ps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
