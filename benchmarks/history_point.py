"""Cost of what the owners' reports compute on a learner: one results-history point
(``purebandits.service.history.history_point``, computed under the learner's lock every ``history_every``
answers, issue 21) and one dashboard poll of the results (a copy of the learner, its stopping progress and a
page of 30 ranking rows, as ``Study.results`` does once a second per open dashboard).

For each learner, at 138 items (caption contest 559's size) and 7,500 items (a large contest): the learner is
fed ``30,000`` Bernoulli answers from uniform-random means (seed 0); then 10 times: 100 more answers (not
timed), one history point and one poll (timed apart). The per-answer share of a point at
``history_every = 100`` is its time / 100. With ``--src`` the same measurement runs on another source tree
(the previous code) in a subprocess, one after the other, in the same invocation.

    PYTHONPATH=src python benchmarks/history_point.py
    PYTHONPATH=src python benchmarks/history_point.py --src /tmp/prev/src
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

LEARNERS = ["lucb1", "lil_ucb", "kl_rand_lucb", "lil_kl_ucb"]


def _poll(learner, items: list[dict], names: list[str]) -> None:
    """What ``Study.results`` computes on the learner for one dashboard poll (30 rows, sorted by rank)."""
    from purebandits.service import reports

    lrn = copy.deepcopy(learner)
    counts = np.zeros((len(items), len(names)), dtype=np.int64)
    rec = lrn.recommend()
    if "lo" in inspect.signature(reports.stopping_progress).parameters:  # the code before issue 24's change
        lo, hi = reports.learner_intervals(lrn, len(items))
        reports.stopping_progress(lrn, {}, lo, hi, rec)
        reports.ranking_page(lrn, items, counts, names, lo, hi, rec, limit=30)
    else:
        reports.stopping_progress(lrn, {})
        reports.ranking_page(lrn, items, counts, names, rec, limit=30)


def _feed(learner, rng: np.random.Generator, mu: np.ndarray, answers: int) -> None:
    """``answers`` asks of one arm, each answered at once with a Bernoulli(mu) reward."""
    for _ in range(answers):
        got = learner.ask(1)
        if not got:
            return
        learner.tell(got[0], float(rng.random() < mu[got[0]]))


def measure(answers: int, rounds: int) -> list[dict]:
    """Per (learner, items): mean ms of a history point and of a poll, over ``rounds`` rounds."""
    from purebandits.registry import make_learner
    from purebandits.service.history import history_point

    out = []
    for n in (138, 7500):
        items = [{"id": str(i), "text": f"caption {i}"} for i in range(n)]
        names = ["unfunny", "somewhat", "funny"]
        for name in LEARNERS:
            rng = np.random.default_rng(0)
            mu = rng.random(n)
            learner = make_learner(name).start(n, seed=1)

            _feed(learner, rng, mu, answers)
            history_point(learner, {}, 1)  # warm-up: compiled helpers are compiled on first use
            _poll(learner, items, names)
            t_point = t_poll = 0.0
            for _ in range(rounds):
                _feed(learner, rng, mu, 100)
                t0 = time.perf_counter()
                history_point(learner, {}, 1)
                t1 = time.perf_counter()
                _poll(learner, items, names)
                t2 = time.perf_counter()
                t_point += t1 - t0
                t_poll += t2 - t1
            out.append({"learner": name, "items": n, "point_ms": t_point / rounds * 1000,
                        "poll_ms": t_poll / rounds * 1000})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, help="another source tree (e.g. the previous code) to measure after this one")
    ap.add_argument("--answers", type=int, default=30_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.answers, args.rounds)))
        return
    runs = {"this code": measure(args.answers, args.rounds)}
    if args.src is not None:
        env = dict(os.environ, PYTHONPATH=str(args.src))
        cmd = [sys.executable, __file__, "--json", "--answers", str(args.answers), "--rounds", str(args.rounds)]
        runs[f"previous ({args.src})"] = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True,
                                                                   text=True).stdout)
    print(f"# history_point ({machine()})")
    print("| code | learner | items | ms per point | ms per answer at history_every = 100 | ms per results poll |")
    print("|---|---|---:|---:|---:|---:|")
    for code, rows in runs.items():
        for r in rows:
            print(f"| {code} | {r['learner']} | {r['items']:,} | {r['point_ms']:.2f} | {r['point_ms'] / 100:.3f} "
                  f"| {r['poll_ms']:.2f} |")


if __name__ == "__main__":
    main()
