"""LUCB1 and KL-LUCB whole runs at n = 1,000: M pulls per CPU second of the compiled round driver.

``simulate(make_learner(name, delta=0.1), instance, reps=1, seed=0, jobs=1)`` to the stop on the
1-sparse and ``lil_exp`` instances (Bernoulli for KL-LUCB), best of three by CPU time after a warm-up
run. Each source tree runs in its own subprocess with its own empty ``NUMBA_CACHE_DIR``: numba's
``cache=True`` checks only the file of the function it loads, so a cache filled before a change to a
callee's module can run the old kernel. Trees alternate for ``--rounds`` rounds; the first round
may still compile paths the warm-up did not reach, so read the last.

    PYTHONPATH=src python benchmarks/bench_lucb_whole_runs.py --src /tmp/prev/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = [("kl_lucb", "one_sparse:n=1000,model=bernoulli"), ("kl_lucb", "lil_exp:n=1000,alpha=0.6,model=bernoulli"),
        ("lucb1", "one_sparse:n=1000"), ("lucb1", "lil_exp:n=1000,alpha=0.6")]


def worker() -> list[tuple[str, str, int, float]]:
    """(learner, instance, pulls, M pulls per CPU second) of each row, in this process."""
    from purebandits.registry import make_learner
    from purebandits.simulate import simulate

    out = []
    for name, inst in ROWS:
        simulate(make_learner(name, delta=0.1), inst, reps=1, seed=99, jobs=1, progress=False, max_pulls=5000)
        best, pulls = 0.0, 0
        for _ in range(3):
            c0 = time.process_time()
            res = simulate(make_learner(name, delta=0.1), inst, reps=1, seed=0, jobs=1, progress=False)
            pulls = int(res.pulls.sum())
            best = max(best, pulls / max(time.process_time() - c0, 1e-9))
        out.append((name, inst, pulls, best / 1e6))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, help="another source tree (the previous code), measured alternately")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker()))
        return 0
    trees = [("this", Path(__file__).resolve().parents[1] / "src")] + ([("previous", args.src)] if args.src else [])
    caches = {name: tempfile.mkdtemp(prefix=f"numba-{name}-") for name, _ in trees}
    for rnd in range(1, args.rounds + 1):
        for name, src in trees:
            load = os.getloadavg()[0]
            env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=caches[name])
            proc = subprocess.run([sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{name}: worker failed:\n{proc.stderr}")
            print(f"# round {rnd}, {name} ({src}), load average {load:.2f}")
            for learner, inst, pulls, rate in json.loads(proc.stdout):
                print(f"{learner:8s} {inst:45s} {pulls:>10,d} pulls  {rate:6.2f} M pulls/s (cpu)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
