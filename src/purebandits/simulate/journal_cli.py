"""``purebandits journal DIR``: what a journal of a long run (``--journal DIR``) holds so far.

Example::

    purebandits journal runs/journal

lists every task (one algorithm on one instance with one seed) with its finished repetitions,
their pulls, how many stopped by themselves (the rest reached the cap) and how many of those
recommend wrongly, and the worker hours they took, oldest first, so a run that spans several
sessions can be followed (error rates included) without starting it. ``--json`` prints the same
as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

HELP = "list the finished repetitions in a journal directory (of simulate/reproduce --journal)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits journal``."""
    parser.add_argument("directory", metavar="DIR", help="the --journal directory of simulate or reproduce")
    parser.add_argument("--json", action="store_true", help="one JSON object per task instead of a table")


def run(args: argparse.Namespace) -> int:
    """Print the journal's tasks, oldest first, with totals (or as JSON lines); exit code 2 if DIR is missing."""
    from purebandits.simulate.journal import Journal

    journal = Journal(args.directory)
    if not journal.root.is_dir():
        print(f"purebandits journal: no such directory: {args.directory}", file=sys.stderr)
        return 2
    tasks = journal.tasks()
    if args.json:
        for t in tasks:
            print(json.dumps({"key": t.key, **t.about, "reps_done": t.reps, "pulls": t.pulls,
                              "stopped": t.stopped, "wrong": t.wrong,
                              "worker_seconds": round(t.seconds, 3), "modified": t.modified}))
        return 0
    print(f"{'last change (UTC)':<20} {'algorithm':<24} {'instance':<30} {'reps':>6} {'pulls':>10} "
          f"{'stopped':>7} {'wrong':>5} {'worker-h':>9}  key")
    for t in tasks:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(t.modified)) if t.modified else "-"
        algo = str(t.about.get("algorithm", "?"))
        inst = str(t.about.get("instance", "?"))
        print(f"{when:<20} {algo[:24]:<24} {inst[:30]:<30} {t.reps:>6} {t.pulls:>10.3g} {t.stopped:>7} "
              f"{t.wrong:>5} {t.seconds / 3600:>9.2f}  {t.key[:12]}")
    total_h = sum(t.seconds for t in tasks) / 3600
    print(f"{len(tasks)} tasks, {sum(t.reps for t in tasks)} repetitions, "
          f"{sum(t.pulls for t in tasks):.3g} pulls, {total_h:.2f} worker-hours")
    return 0
