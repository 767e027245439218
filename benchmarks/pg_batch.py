"""One group-commit batch on PostgreSQL: milliseconds and client waits on the server per batch.

``Study.run_batch`` runs a batch of asks or answers of one experiment in one transaction
(``purebandits.service.dispatch``). On PostgreSQL each time the client blocks on the server (a
round trip: a read's rows, a pipeline sync, the commit) costs a wake-up of both processes,
which on two busy cores is most of a batch's time. This measures, in one process and without
HTTP, a contest-size experiment (``--items`` captions, the service's default learner) on a
throwaway **durable** PostgreSQL (fsync and synchronous_commit on): batches of ``B`` asks from
``B`` participants, then ``B`` answers to them, for B = 1, 8 and 32, ``--rounds`` times each
after a warm-up; per batch the median and 90th percentile wall time, and, from libpq's protocol
trace of one more batch, its *turns*: how many times the client went from sending messages to
reading the server's (an upper bound on its round trips: every wait for the server is one, and
reading results that already arrived while still sending can add some). With ``--src`` another source
tree (the previous code) runs the same in a subprocess right after, on the same server.

    PYTHONPATH=src python benchmarks/pg_batch.py --src /tmp/prev/src
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
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

SIZES = (1, 8, 32)


def worker(url: str, items: int, rounds: int) -> dict:
    """Run the batches against database ``url`` with the ``purebandits`` on ``sys.path``; returns the figures."""
    from psycopg.pq import Trace

    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine, upgrade
    from purebandits.service.study import Study

    settings = Settings(database_url=url, ask_rate_per_second=0, participant_rate_per_second=0,
                        create_rate_per_second=0)
    engine = make_engine(settings.url, pool_size=1, max_overflow=0)
    upgrade(engine)
    study = Study(engine, settings)
    spec = {"name": "pg batch", "items": [f"caption {i}" for i in range(items)], "repeats": "not_consecutive"}
    eid, _token = study.create_experiment(spec)
    pids = [study.new_participant() for _ in range(max(SIZES))]

    def flights(run: Any) -> int:
        """``run()`` with libpq's protocol trace on: how many times the client turned from sending to reading."""
        with tempfile.NamedTemporaryFile("w+") as f:
            with engine.connect() as c:  # the pool's one connection, which the study uses too
                pgconn = c.connection.driver_connection.pgconn
                pgconn.trace(f.fileno())
                pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)  # lines: direction, length, message
            run()
            with engine.connect() as c:  # its checkout's ping is traced too: one turn taken off below
                c.connection.driver_connection.pgconn.untrace()
            f.seek(0)
            turns, last = 0, ""
            for line in f:
                side = line.split("\t", 1)[0]
                if side in ("F", "B"):
                    turns += last == "F" and side == "B"
                    last = side
            return turns - 1

    rng = np.random.default_rng(0)
    labels = ["unfunny", "somewhat funny", "funny"]
    out: dict = {}
    for b in SIZES:
        rows: dict[str, list[float]] = {"ask": [], "answer": []}
        for r in range(rounds + 5):
            ops = [(0, ("ask", pid)) for pid in pids[:b]]
            t0 = time.perf_counter()
            res = study.run_batch(eid, ops)
            t1 = time.perf_counter()
            qs = [x["query_id"] for x in res]
            ops = [(0, ("answer", pid, q, labels[int(rng.integers(3))])) for pid, q in zip(pids[:b], qs, strict=True)]
            t2 = time.perf_counter()
            study.run_batch(eid, ops)
            t3 = time.perf_counter()
            if r >= 5:
                rows["ask"].append(t1 - t0)
                rows["answer"].append(t3 - t2)
        asks = [(0, ("ask", pid)) for pid in pids[:b]]
        got: list[Any] = []
        turns = {"ask": flights(lambda: got.extend(study.run_batch(eid, asks)))}  # noqa: B023 - run at once
        answers = [(0, ("answer", pid, x["query_id"], labels[0])) for pid, x in zip(pids[:b], got, strict=True)]
        turns["answer"] = flights(lambda: study.run_batch(eid, answers))  # noqa: B023 - run at once
        for kind, v in rows.items():
            ms = np.array(v) * 1e3
            out[f"{kind} x{b}"] = {"p50": float(np.median(ms)), "p90": float(np.percentile(ms, 90)),
                                   "turns": turns[kind]}
    study.close()
    engine.dispose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=7500)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--src", type=Path, help="another source tree (the previous code) to measure after this one")
    ap.add_argument("--pg-url", default=os.environ.get("PUREBANDITS_TEST_PG_URL"),
                    help="admin URL of a PostgreSQL server (default: a throwaway durable one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.items, args.rounds)))
        return 0
    from contextlib import ExitStack

    from purebandits.testing.postgres import create_database, temporary_postgres

    trees = [("this", Path(__file__).resolve().parents[1] / "src")] + ([("previous", args.src)] if args.src else [])
    results = {}
    with ExitStack() as stack:
        admin = args.pg_url or stack.enter_context(temporary_postgres(durable=True))
        for name, src in trees:
            url = create_database(admin)
            load0 = os.getloadavg()[0]
            env = dict(os.environ, PYTHONPATH=str(src))
            cmd = [sys.executable, __file__, "--worker", url, "--items", str(args.items), "--rounds", str(args.rounds)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{name}: worker failed:\n{proc.stderr}")
            res = json.loads(proc.stdout)
            results[name] = (res, f"{load0:.1f}-{os.getloadavg()[0]:.1f}")
    print(f"# pg_batch ({machine()}); {args.items:,} items, default learner, durable PostgreSQL, "
          f"{args.rounds} batches per row")
    print("| batch | " + " | ".join(f"{n}: p50 / p90 ms, turns (load {ld})" for n, (_, ld) in results.items()) + " |")
    print("|---|" + "---:|" * len(results))
    for key in next(iter(results.values()))[0]:
        cells = [f"{r[key]['p50']:.2f} / {r[key]['p90']:.2f}, {r[key]['turns']}" for r, _ in results.values()]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
