"""``purebandits reproduce``: run one or all reproduced tables and figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "reproduce a table or figure of the papers (CSV, PNG and a Markdown verdict)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits reproduce``: experiments, scale, parallelism, seed, output, overrides, journal."""
    parser.add_argument("names", nargs="*", metavar="NAME", help="experiment name(s) (see --list)")
    parser.add_argument("--all", action="store_true", help="run every experiment")
    parser.add_argument("--list", action="store_true", help="list the experiments")
    parser.add_argument("--scale", choices=("quick", "paper"), default="quick")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    parser.add_argument("--executor", default=None, help="dask://host:port to run on a Dask cluster")
    parser.add_argument("--seed", type=int, default=20170000)
    parser.add_argument("--out", default="reproduction", help="output directory")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="replace one of the scale's settings (JSON value, e.g. reps=500 or ns=[10,100]);"
                             " the Markdown section states it")
    parser.add_argument("--journal", default=None, metavar="DIR",
                        help="write every finished chunk of repetitions to DIR; run the same command again "
                             "to resume a killed run (the CSV is the same)")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: write REPORT.md in --out from the runs already there")
    parser.add_argument("--rejudge", action="store_true",
                        help="run nothing: judge the named runs (or --all) in --out again from their CSVs, after a "
                             "fix of an experiment's assessment; rewrites their Markdown, records and REPORT.md")


def run(args: argparse.Namespace) -> int:
    """Run the chosen experiments (or list them, or only rebuild REPORT.md); exit code 2 for a bad name or setting,
    all checked before anything runs."""
    from purebandits.experiments.base import Context, all_experiments, get_experiment

    exps = all_experiments()
    if args.list and not (args.report or args.rejudge):
        for name, exp in exps.items():
            print(f"{name:28s} {exp.paper} {exp.artefact}: {exp.title}")
        return 0
    # every run draws its figure: the runner needs the plot extra (a clear error names it), the list above does not
    from purebandits.experiments.runner import collect_outputs, rejudge_experiment, run_experiment, write_report

    if args.report or args.rejudge:
        try:
            if args.rejudge:
                chosen = list(exps.values()) if args.all else [get_experiment(n) for n in args.names]
                if not chosen:
                    raise ValueError("give the experiment names to judge again, or --all")
                for exp in chosen:
                    if args.all and not (Path(args.out) / f"{exp.name}.json").exists():
                        continue
                    o = rejudge_experiment(exp, args.out)
                    print(f"{exp.name}: {o.verdict.status} -> {o.markdown}")
            found, ctx = collect_outputs(args.out)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"report: {write_report(found, args.out, ctx)} ({len(found)} experiment(s))")
        return 0
    if not args.all and not args.names:
        print("give an experiment name or --all (see --list)", file=sys.stderr)
        return 2
    try:
        chosen = list(exps.values()) if args.all else [get_experiment(n) for n in args.names]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    overrides = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"--set takes KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    ctx = Context(scale=args.scale, jobs=args.jobs, executor=args.executor, seed=args.seed,
                  progress=not args.no_progress, overrides=overrides, journal=args.journal)
    try:
        for exp in chosen:
            ctx.settings(exp)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    outputs = []
    for exp in chosen:
        print(f"== {exp.name} ({exp.paper} {exp.artefact}), scale {args.scale}", flush=True)
        o = run_experiment(exp, args.out, ctx)
        outputs.append(o)
        print(f"   {o.verdict.status}: {o.verdict.summary}  [{o.seconds:.1f} s; {o.pulls:.3g} pulls in "
              f"{o.cpu_seconds:.1f} CPU-s] -> {o.markdown}", flush=True)
    if len(outputs) > 1:
        print(f"report: {write_report(outputs, args.out, ctx)}")
    return 0
