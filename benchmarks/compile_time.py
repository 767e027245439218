"""Where the first compile of the learners' kernels goes, on an empty numba cache.

Runs the service's warm-up (:func:`purebandits.service.warmup._exercise`: start, ask, tell, cancel,
stopping progress, intervals, a copy and a state round trip on a small instance) for every
registered learner, or the ones named, in a fresh process with an empty ``NUMBA_CACHE_DIR``, and
records numba's ``numba:compile`` events: wall seconds in all, the number of compiles, and each
function's *self* time (nested compiles subtracted). Functions compiled more than once are listed:
a call from compiled code with a constant argument compiles the callee once more as a
``Literal[...]`` specialisation, which costs compile time and nothing else.

    PYTHONPATH=src python benchmarks/compile_time.py [--learners kl_rand_lucb,...] [--src /tmp/prev/src]

``--src DIR`` measures another source tree (the previous code) the same way, after this one.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(learners: list[str]) -> dict:
    """In this process: compile events while every learner in ``learners`` (all if empty) is exercised."""
    from numba.core import event

    from purebandits.registry import all_learners
    from purebandits.service import warmup

    stack: list[list[float]] = []
    self_time: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    literal: collections.Counter = collections.Counter()

    class Recorder(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            stack.append([time.perf_counter(), 0.0])

        def on_end(self, ev: event.Event) -> None:
            t0, nested = stack.pop()
            spent = time.perf_counter() - t0
            if stack:
                stack[-1][1] += spent
            f = ev.data["dispatcher"].py_func
            name = f"{f.__module__}.{f.__name__}"
            self_time[name] += spent - nested
            count[name] += 1
            literal[name] += "Literal" in str(ev.data.get("args"))

    names = learners or list(all_learners())
    t0 = time.perf_counter()
    with event.install_listener("numba:compile", Recorder()):
        for name in names:
            warmup._exercise(name, warmup._params_for(name))
    repeated = sorted(((self_time[k], count[k], literal[k], k) for k in count if count[k] > 1), reverse=True)
    return {"seconds": time.perf_counter() - t0, "compiles": sum(count.values()),
            "repeat_seconds": sum(s * (c - 1) / c for s, c, _, _ in repeated), "repeated": repeated[:8]}


def run_tree(src: Path, learners: list[str]) -> dict:
    """:func:`measure` in a fresh process on ``src`` with an empty numba cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, __file__, "--child", ",".join(learners)], env=env, check=True,
                             capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learners", default="", help="comma-separated registry names (default: all)")
    p.add_argument("--src", type=Path, default=None, help="another source tree, measured after this one")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(measure([x for x in args.child.split(",") if x])))
        return 0
    learners = [x for x in args.learners.split(",") if x]
    print(f"# compile_time, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"learners: {', '.join(learners) or 'all'}", flush=True)
    for label, src in [("this tree", ROOT / "src")] + ([("--src", args.src)] if args.src else []):
        r = run_tree(src, learners)
        print(f"{label}: {r['seconds']:.1f} s, {r['compiles']} compiles, {r['repeat_seconds']:.1f} s in second and "
              f"later specialisations (load {os.getloadavg()[0]:.2f})", flush=True)
        for s, c, lit, name in r["repeated"]:
            print(f"    {s:6.2f} s self  {c:2d} compiles ({lit} with a Literal argument)  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
