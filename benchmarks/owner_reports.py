"""What an owner's dashboard and downloads cost at contest scale, on an experiment with 7,500 items and
1,000,000 answers (built by ``benchmarks/restart.py``'s builder and cached), for this checkout and for the
previous code (``--src``), one after the other in the same invocation.

A dashboard asks for the activity (answers over time, per item, per participant, response times), the
history of the results and the results with their timeline every few seconds while the results change,
and a dashboard of several learners asks for their comparison every second. Each code, in a fresh
process on its own copy of the database: the first call (nothing read yet in the process), then
``--rounds`` times: ``--per-round`` more answers through the service's own calls (new and returning
participants), then one call of each (timed; the activity cache's few seconds are let pass between
them). The builder writes no history points; each copy gets the 10,000 the service would have written
(one every 100 answers, five leaders each). CPU seconds of the calling process, SQLite, one core. Then
the downloads ``answers.csv`` and ``participants.csv`` as the routes build them (every byte consumed):
wall seconds and the process's peak resident memory above what it held before.

    PYTHONPATH=src python benchmarks/owner_reports.py --src /tmp/prev/src
    PYTHONPATH=src python benchmarks/owner_reports.py --answers 200000 --src /tmp/prev/src   # quicker build
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import numpy as np
from purebandits.service.settings import Settings
from purebandits.service.storage import make_engine
from purebandits.service.study import Study

path, rounds, per_round = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
clock_ms = [int(time.time() * 1000)]
settings = Settings(database_url=f"sqlite:///{path}", ask_rate_per_second=0, participant_rate_per_second=0,
                    create_rate_per_second=0)
study = Study(make_engine(settings.url), settings, clock=lambda: clock_ms[0])
eid = 1

def timed(f):
    t = time.process_time()
    f()
    return time.process_time() - t

# a contest of this size that ran in the service has a history point every 100 answers (10,000 here): the
# builder writes none, so they are added as the service would have written them (5 leaders each)
import sqlalchemy as sa
from purebandits.service.models import history
with study.engine.connect() as conn:
    have = conn.execute(sa.select(sa.func.count()).select_from(history)).scalar_one()
if have == 0:
    n_answers = study.results(eid, timeline=False, limit=1)["n_answers"]
    prng = np.random.default_rng(1)
    rows = [{"experiment_id": eid, "learner": 0, "n_answers": 100 * j, "created_ms": clock_ms[0] - 10**8 + 10**4 * j,
             "done": False, "fraction": j / 1e4, "margin": -1 + j / 1e4,
             "leaders": [{"rank": r + 1, "arm": int(prng.integers(1000)), "mean": 0.8 - 0.01 * r, "lower": 0.7,
                          "upper": 0.9, "count": j} for r in range(5)]} for j in range(1, n_answers // 100 + 1)]
    with study.engine.begin() as conn:
        conn.execute(history.insert(), rows)

out = {"first_activity": timed(lambda: study.activity(eid))}
out["first_history"] = timed(lambda: study.history(eid, max_points=500))
out["first_results"] = timed(lambda: study.results(eid, limit=30))
rng = np.random.default_rng(0)
pool, acts, ress, cmps, hists = [], [], [], [], []
for r in range(rounds):
    done = 0
    while done < per_round:
        pid = pool[int(rng.integers(len(pool)))] if pool and rng.random() < 0.5 else study.new_participant()
        pool.append(pid)
        q = study.next_query(eid, pid)
        if q["state"] != "ok":
            continue
        clock_ms[0] += 200
        study.answer(q["query_id"], pid, ["unfunny", "somewhat funny", "funny"][int(rng.integers(3))])
        done += 1
    clock_ms[0] += 10_000  # past the activity cache
    acts.append(timed(lambda: study.activity(eid)))
    ress.append(timed(lambda: study.results(eid, limit=30)))
    cmps.append(timed(lambda: study.comparison(eid)))
    hists.append(timed(lambda: study.history(eid, max_points=500)))
out["activity"], out["results"], out["comparison"], out["history"] = acts, ress, cmps, hists

import asyncio, resource
from purebandits.service.routes import experiments as routes
for name, rows in (("answers", study.export_answers), ("participants", study.export_participants)):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    resp = routes._csv(rows(eid), "x.csv")
    if hasattr(resp, "body_iterator"):  # streamed (Starlette runs a plain iterator in its thread pool)
        async def drain(it):
            return sum([len(c) async for c in it])
        size = asyncio.run(drain(resp.body_iterator))
    else:
        size = len(resp.body)
    out[name + "_csv"] = {"seconds": time.perf_counter() - t, "bytes": size,
                          "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}
print(json.dumps(out))
"""


def measure(src: Path, db: Path, rounds: int, per_round: int) -> dict:
    """One code's figures, in a fresh process on a copy of ``db``."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "contest.sqlite"
        shutil.copy(db, copy)
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run([sys.executable, "-c", CHILD, str(copy), str(rounds), str(per_round)], env=env,
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    from restart import cached_build

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=7_500)
    p.add_argument("--answers", type=int, default=1_000_000, help="answers in the built experiment")
    p.add_argument("--seed", type=int, default=559)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--per-round", type=int, default=2_500, help="answers between two dashboard refreshes "
                   "(2,500: five seconds at 500 answers per second)")
    p.add_argument("--src", type=Path, default=None, help="the previous code's source tree")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                   / "purebandits-bench")
    a = p.parse_args(argv)
    build_args = argparse.Namespace(items=a.items, answers=a.answers, seed=a.seed, lag=400, per_participant=10)
    db, info = cached_build(a.cache, build_args)
    print(f"# {info['items']} items, {info['answers']:,} answers; load average {os.getloadavg()}")
    codes = [("new", ROOT / "src")] + ([("previous", a.src)] if a.src else [])
    rows = {name: measure(src, db, a.rounds, a.per_round) for name, src in codes}
    print(f"{'code':<10} {'first activity':>15} {'first history':>14} {'first results':>14} "
          f"{'activity (median)':>18} {'results (median)':>17} {'comparison (median)':>20} "
          f"{'history (median)':>17}   CPU seconds")
    for name, r in rows.items():
        med = sorted(r["activity"])[len(r["activity"]) // 2]
        medr = sorted(r["results"])[len(r["results"]) // 2]
        medc = sorted(r["comparison"])[len(r["comparison"]) // 2]
        medh = sorted(r["history"])[len(r["history"]) // 2]
        print(f"{name:<10} {r['first_activity']:>15.3f} {r['first_history']:>14.3f} {r['first_results']:>14.3f} "
              f"{med:>18.4f} {medr:>17.4f} {medc:>20.4f} {medh:>17.4f}")
    print(f"{'code':<10} {'download':<18} {'seconds':>8} {'bytes':>12} {'peak memory added (MB)':>23}")
    for name, r in rows.items():
        for what in ("answers_csv", "participants_csv"):
            d = r[what]
            print(f"{name:<10} {what.replace('_csv', '.csv'):<18} {d['seconds']:>8.1f} {d['bytes']:>12,} "
                  f"{d['peak_mb']:>23.0f}")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"# {time.perf_counter() - t0:.0f} s")
    raise SystemExit(code)
