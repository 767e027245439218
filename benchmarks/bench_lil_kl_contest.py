"""lil-KLUCB and KL-RandLUCB compiled kernels at contest scale, both bound forms, new vs another tree.

Issue "Real contest scale", target 2: lil-KLUCB and KL-RandLUCB at least 2 M pulls/s on the full
bundled contests 558 and 512 (3,925 and 4,399 captions, graded rewards 0 / 1/2 / 1), k = 1 and
k = 5, and on contest 558's 50 best captions (where the near-ties at the top make the exact
bounds' comparisons hardest). delta = 0.005, the kernel of ``run_compiled`` (one core), pulls per
CPU second (the steadier measure on a shared machine), best of ``--repeats``; the first pull of
every arm is included (it is ~1 % of the pulls on the full contests).

Each case also prints a fingerprint of the run (SHA-256 of the learner's state after the pulls):
the compiled kernels decide bit for bit as the ask/tell rules do, so a tree that only made them
faster prints the same fingerprints as the previous one.

    PYTHONPATH=src python benchmarks/bench_lil_kl_contest.py --src /tmp/prev/src [--pulls 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

LEARNERS = [("lil-KLUCB", "lil_kl_ucb"), ("KL-RandLUCB", "kl_rand_lucb")]
FORMS = ["exact", "simplified"]
INSTANCES = [("558 top 50", "558", 50, 1), ("558 full", "558", 0, 1), ("558 full", "558", 0, 5),
             ("512 full", "512", 0, 1), ("512 full", "512", 0, 5)]
DELTA = 0.005


def _instance(contest: str, m: int, k: int):
    from purebandits.experiments.caption_extra import top_m_contest
    from purebandits.instances import caption

    if m:
        return top_m_contest(contest, m, k)
    inst = caption(contest)
    return inst.model, k, inst.n_arms


def worker(pulls: int, repeats: int) -> dict[str, Any]:
    from purebandits.registry import make_learner
    from purebandits.simulate.engine import rep_seeds

    out: dict[str, Any] = {}
    for iname, contest, m, k in INSTANCES:
        if m:
            inst = _instance(contest, m, k)
            model, n = inst.model, inst.n_arms
        else:
            model, _, n = _instance(contest, m, k)
        for lname, reg in LEARNERS:
            for form in FORMS:
                learner = make_learner(reg, delta=DELTA, k=k, form=form)
                learner.clone().start(n, seed=0).run_compiled(model.stream(0), 2 * n)  # load the compiled code
                best = 0.0
                for _ in range(repeats):
                    ls, ss = rep_seeds(0, 0)
                    lr = learner.clone().start(n, seed=ls)
                    c0 = time.process_time()
                    lr.run_compiled(model.stream(ss), pulls)
                    c = time.process_time() - c0
                    best = max(best, lr.t_ / max(c, 1e-9))
                fp = hashlib.sha256(lr.state_json().encode()).hexdigest()[:12]
                out[f"{lname}|{form}|{iname}|{k}"] = {"rate": best, "pulls": int(lr.t_), "done": bool(lr.done_),
                                                      "fp": fp}
    return out


def run_tree(src: Path, pulls: int, repeats: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, __file__, "--worker", "--pulls", str(pulls), "--repeats", str(repeats)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(src: Path | None, pulls: int, repeats: int) -> None:
    here = Path(__file__).resolve().parents[1] / "src"
    print(f"# bench_lil_kl_contest ({machine()})")
    print(f"## delta = {DELTA}, {pulls:,} pulls per run (fewer if the learner stops), M pulls per CPU second, "
          f"best of {repeats}")
    new = run_tree(here, pulls, repeats)
    prev = run_tree(src, pulls, repeats) if src else {}
    print(f"{'learner':<12} {'form':<11} {'instance':<11} {'k':>2} {'pulls':>10} {'new':>7}"
          + (f" {'prev':>7} {'new/prev':>9} {'same':>5}" if src else "") + "  fingerprint")
    for key, r in new.items():
        lname, form, iname, k = key.split("|")
        line = f"{lname:<12} {form:<11} {iname:<11} {k:>2} {r['pulls']:>10,} {r['rate'] / 1e6:>7.2f}"
        if src and key in prev:
            q = prev[key]
            same = "yes" if q["fp"] == r["fp"] else "NO"
            line += f" {q['rate'] / 1e6:>7.2f} {r['rate'] / q['rate']:>8.1f}x {same:>5}"
        print(line + f"  {r['fp']}" + ("  (stopped)" if r["done"] else ""), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", type=Path, default=None, help="also measure this source tree (the previous code)")
    ap.add_argument("--pulls", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.pulls, args.repeats)))
    else:
        main(args.src, args.pulls, args.repeats)
