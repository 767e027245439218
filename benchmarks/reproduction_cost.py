"""What the paper-scale reproduction (``purebandits reproduce --all --scale paper``) costs, per experiment, in
pulls and process-seconds, estimated from a sample of its repetitions (issue 24, target 5).

The whole reproduction runs for many process-hours, so this runs every experiment's ``compute`` at the paper
scale with each simulator call cut to a fraction ``--fraction`` of its repetitions (at least one), on one
process, and scales each call's measured CPU seconds and pulls by planned / run repetitions. A simulation's
cost is a sum over independent repetitions, so the estimate is unbiased up to per-call overheads (set-up,
compilation: numba's cache is warmed by a first pass at ``--warm`` of the fraction, not timed); the fixed-
budget experiments' exact-sums runs (``experiments.st17.fixed_budget_runs``) are sampled the same way, and
experiments that simulate nothing (``lower_bound``, the analytic tables) are timed whole. The repetitions kept
are the first ones of each call (the same seeds as the full run), so a call whose runs differ much in length
(capped runs) is estimated from its first runs only: an estimate, checked against the recorded wall
times of the full runs in docs/REPRODUCTION.md where the code has not changed since.

With ``--src`` the same estimate runs on another source tree (the previous code) in a subprocess afterwards.

    PYTHONPATH=src python benchmarks/reproduction_cost.py --fraction 0.01
    PYTHONPATH=src python benchmarks/reproduction_cost.py --fraction 0.01 --src /tmp/prev/src --only jmnb14_fig3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402


def estimate(fraction: float, only: list[str] | None, warm: float) -> list[dict[str, Any]]:
    """Per experiment: estimated pulls and CPU seconds of the paper scale, from ``fraction`` of its repetitions."""
    import purebandits.simulate as sim_pkg
    from purebandits.experiments.base import Context, all_experiments

    real = sim_pkg.simulate
    calls: list[dict[str, float]] = []
    state = {"fraction": fraction}

    def sampled(learner: Any, instance: Any, *, reps: int = 100, **kw: Any) -> Any:
        run = max(1, math.ceil(reps * state["fraction"]))
        kw.update(jobs=1, executor=None, progress=False, journal=None)
        c0 = time.process_time()
        res = real(learner, instance, reps=run, **kw)
        sec = time.process_time() - c0
        calls.append({"reps": reps, "run": run, "seconds": sec, "pulls": float(res.pulls.sum()),
                      "learner": getattr(learner, "name", None) or type(learner).__name__})
        return res

    sim_pkg.simulate = sampled

    # the fixed-budget experiments (st17_*) run their round-based learners on the exact-sums path,
    # not through the simulator: sample those repetitions the same way
    import purebandits.experiments.st17 as st17

    real_fb = st17.fixed_budget_runs

    def sampled_fb(learner: Any, instance: Any, reps: int, seed: int) -> Any:
        run = max(1, math.ceil(reps * state["fraction"]))
        c0 = time.process_time()
        out = real_fb(learner, instance, run, seed)
        calls.append({"reps": reps, "run": run, "seconds": time.process_time() - c0,
                      "pulls": float(out["pulls"].sum()), "learner": type(learner).__name__})
        return out

    st17.fixed_budget_runs = sampled_fb
    out = []
    exps = all_experiments()
    for name in only or sorted(exps):
        exp = exps[name]
        if "paper" not in exp.scales:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            ctx = Context(scale="paper", jobs=1, progress=False, out_dir=tmp, overrides=_source_dir(exp))
            state["fraction"] = warm  # compile and warm caches; not timed
            calls.clear()
            _compute(exp, ctx)
            state["fraction"] = fraction
            calls.clear()
            c0, w0 = time.process_time(), time.perf_counter()
            _compute(exp, ctx)
            total, wall = time.process_time() - c0, time.perf_counter() - w0
        sim_sec = sum(c["seconds"] for c in calls)
        est_sim = sum(c["seconds"] * c["reps"] / c["run"] for c in calls)
        est_pulls = sum(c["pulls"] * c["reps"] / c["run"] for c in calls)
        by_learner: dict[str, float] = {}
        for c in calls:
            by_learner[c["learner"]] = by_learner.get(c["learner"], 0.0) + c["seconds"] * c["reps"] / c["run"]
        out.append({"experiment": name, "calls": len(calls), "reps": int(sum(c["reps"] for c in calls)),
                    "by_learner": dict(sorted(by_learner.items(), key=lambda kv: -kv[1])),
                    "sampled_seconds": total, "sampled_wall": wall,
                    "est_seconds": est_sim + (total - sim_sec), "est_pulls": est_pulls})
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def _source_dir(exp: Any) -> dict[str, Any]:
    """``lower_bound`` reads other experiments' results: point it at the committed ones."""
    paper = exp.scales.get("paper", {})
    if "source_dir" in paper:
        return {"source_dir": str(Path(__file__).resolve().parents[1] / "docs" / "reproduction")}
    return {}


def _compute(exp: Any, ctx: Any) -> None:
    exp.compute(ctx, ctx.settings(exp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fraction", type=float, default=0.01, help="share of each call's repetitions run")
    ap.add_argument("--warm", type=float, default=0.0002, help="share run first, untimed, to compile")
    ap.add_argument("--only", help="comma list of experiments (default: all)")
    ap.add_argument("--src", type=Path, help="another source tree to estimate afterwards (the previous code)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = args.only.split(",") if args.only else None
    if args.json:
        print(json.dumps(estimate(args.fraction, only, args.warm)))
        return
    runs = {"this code": estimate(args.fraction, only, args.warm)}
    if args.src is not None:
        env = dict(os.environ, PYTHONPATH=str(args.src))
        cmd = [sys.executable, __file__, "--json", "--fraction", str(args.fraction), "--warm", str(args.warm)]
        if args.only:
            cmd += ["--only", args.only]
        runs["previous"] = json.loads(subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE,
                                                     text=True).stdout)
    print(f"# reproduction_cost --fraction {args.fraction} ({machine()})")
    names = [r["experiment"] for r in runs["this code"]]
    prev = {r["experiment"]: r for r in runs.get("previous", [])}
    print("| experiment | simulator calls | repetitions | est. pulls | est. process-seconds | previous code "
          "(s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tot = tot_prev = 0.0
    for r in runs["this code"]:
        p = prev.get(r["experiment"])
        tot += r["est_seconds"]
        ps = f"{p['est_seconds']:,.0f}" if p else "-"
        ratio = f"{p['est_seconds'] / r['est_seconds']:.2f}" if p and r["est_seconds"] > 0 else "-"
        if p:
            tot_prev += p["est_seconds"]
        print(f"| {r['experiment']} | {r['calls']:,} | {r['reps']:,} | {r['est_pulls']:.3g} | "
              f"{r['est_seconds']:,.0f} | {ps} | {ratio} |")
    print(f"| total ({len(names)} experiments) | | | | {tot:,.0f} ({tot / 3600:.2f} h) | "
          + (f"{tot_prev:,.0f} ({tot_prev / 3600:.2f} h) | {tot_prev / tot:.2f} |" if prev else "- | - |"))
    print("\nWhere the time goes (this code; estimated process-seconds by learner class, the three largest):")
    for r in sorted(runs["this code"], key=lambda r: -r["est_seconds"])[:5]:
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["by_learner"].items())[:3])
        print(f"- {r['experiment']}: {top}")


if __name__ == "__main__":
    main()
