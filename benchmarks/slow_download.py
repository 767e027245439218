"""A slow client downloading ``answers.csv`` of a million-answer contest while the contest goes on, for this
checkout and for the previous code (``--src``), one after the other in the same invocation.

An organiser on a phone over a slow link downloads the answers while participants keep answering. Each
code serves its own copy of the experiment built by ``benchmarks/restart.py``'s builder (7,500 items,
1,000,000 answers, SQLite, cached), in a server process of its own (``purebandits serve``). For
``--seconds`` seconds one client reads ``answers.csv`` at ``--rate`` KB/s and ``--participants``
participants answer at ``--answers-per-second`` in all (each a new participant every 10 answers); then
the download is dropped. They start once the server's start-up reads are over (the check of the
snapshot runs in the background for half a minute and more at this size, a reader of its own) and the log
has been emptied (checkpointed); sampled every half second: the size of the database's write-ahead log, which
SQLite can only checkpoint from the start again once no reader holds an older snapshot. Reported: the
log's size at the end and at its largest, the answers given, the participants' latency (ask and answer,
p50 and p99) and the bytes the slow client got.

    PYTHONPATH=src python benchmarks/slow_download.py --src /tmp/prev/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_load import start_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "slow-download-benchmark"


def slow_reader(base: str, rate_kb: float, stop: threading.Event, out: dict) -> None:
    """Read answers.csv at ``rate_kb`` KB/s until ``stop``, then drop the connection."""
    t0 = time.monotonic()
    got = 0
    with httpx.Client(timeout=None) as client, client.stream(
            "GET", f"{base}/api/experiments/1/answers.csv", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        out["status"] = r.status_code
        for piece in r.iter_raw(16 * 1024):
            if "first_byte_s" not in out:
                out["first_byte_s"] = time.monotonic() - t0
            got += len(piece)
            ahead = got / (rate_kb * 1024) - (time.monotonic() - t0)
            if ahead > 0:
                stop.wait(ahead)
            if stop.is_set():
                break
        else:
            out["whole_s"] = time.monotonic() - t0
    out["bytes"] = got


def participants(base: str, n: int, per_second: float, stop: threading.Event, lat: list, errors: list,
                 done: list) -> None:
    """``n`` threads answering at ``per_second`` in all; latency of every ask and answer, answers accepted."""
    def one(k: int) -> None:
        rng = np.random.default_rng(k)
        period = n / per_second
        nxt = time.monotonic() + rng.uniform(0, period)
        with httpx.Client(base_url=base, timeout=30) as c:
            pid, left = None, 0
            while not stop.is_set():
                stop.wait(max(0.0, nxt - time.monotonic()))
                nxt += period
                if stop.is_set():
                    break
                try:
                    if left == 0:
                        pid, left = c.post("/api/participants", json={}).json()["participant_id"], 10
                    t = time.perf_counter()
                    q = c.post("/api/experiments/1/queries", json={"participant_id": pid})
                    lat.append(time.perf_counter() - t)
                    q = q.json()
                    if q.get("state") != "ok":
                        left = 0
                        continue
                    t = time.perf_counter()
                    r = c.post(f"/api/queries/{q['query_id']}/answer",
                               json={"participant_id": pid, "label": ["unfunny", "somewhat funny", "funny"]
                                     [int(rng.integers(3))]})
                    lat.append(time.perf_counter() - t)
                    if r.status_code == 200:
                        done.append(1)
                    else:
                        errors.append(r.status_code)
                    left -= 1
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def measure(name: str, src: Path, db: Path, a: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "contest.sqlite"
        shutil.copy(db, copy)
        wal = Path(str(copy) + "-wal")
        proc, base = start_server(f"sqlite:///{copy}", 1, src, env={"PUREBANDITS_ADMIN_TOKEN": TOKEN})
        try:
            with httpx.Client(base_url=base, timeout=30) as c:  # the learner's first ask, before timing
                pid = c.post("/api/participants", json={}).json()["participant_id"]
                c.post("/api/experiments/1/queries", json={"participant_id": pid})
            t = time.monotonic()
            with sqlite3.connect(copy, timeout=1) as con:  # the log emptied of the server's start-up writes,
                while con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:  # once its start-up
                    time.sleep(0.5)  # reads are over (the snapshot's check in the background: ~30 s)
            print(f"# {name}: the server's start-up reads took {time.monotonic() - t:.0f} s more", flush=True)
            stop = threading.Event()
            lat: list[float] = []
            errors: list = []
            done: list = []
            dl: dict = {}
            sizes: list[int] = []
            reader = threading.Thread(target=slow_reader if a.download else lambda *_: None,
                                      args=(base, a.rate, stop, dl))
            crowd = threading.Thread(target=participants,
                                     args=(base, a.participants, a.answers_per_second, stop, lat, errors, done))
            reader.start()
            crowd.start()
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.seconds:
                sizes.append(wal.stat().st_size if wal.exists() else 0)
                time.sleep(0.5)
            stop.set()
            reader.join()
            crowd.join()
            lat_ms = np.array(lat) * 1000
            every = int(10 / 0.5)  # the log's size every 10 s
            return {"wal_mb_every_10s": [round(x / 2**20, 1) for x in sizes[every - 1::every]],
                    "wal_end_mb": sizes[-1] / 2**20, "wal_max_mb": max(sizes) / 2**20,
                    "answers": len(done), "p50_ms": float(np.percentile(lat_ms, 50)),
                    "p99_ms": float(np.percentile(lat_ms, 99)), "errors": len(errors),
                    "download_mb": dl.get("bytes", 0) / 2**20, "first_byte_s": dl.get("first_byte_s"),
                    "whole_download_s": dl.get("whole_s"),
                    "status": dl.get("status")}
        finally:
            proc.terminate()
            proc.wait(60)


def main(argv: list[str] | None = None) -> int:
    from restart import cached_build

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--answers", type=int, default=1_000_000, help="answers in the built experiment")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rate", type=float, default=256.0, help="the slow client's KB/s")
    p.add_argument("--no-download", dest="download", action="store_false",
                   help="no download at all: the log's size under the participants alone")
    p.add_argument("--participants", type=int, default=20)
    p.add_argument("--answers-per-second", type=float, default=100.0)
    p.add_argument("--src", type=Path, default=None, help="the previous code's source tree")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                   / "purebandits-bench")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    build_args = argparse.Namespace(items=7_500, answers=a.answers, seed=559, lag=400, per_participant=10)
    db, info = cached_build(a.cache, build_args)
    print(f"# {info['items']} items, {info['answers']:,} answers; {a.seconds:.0f} s, slow client at {a.rate:.0f} "
          f"KB/s, {a.answers_per_second:.0f} answers/s; load average {os.getloadavg()}")
    codes = [("new", ROOT / "src")] + ([("previous", a.src)] if a.src else [])
    rows = {name: measure(name, src, db, a) for name, src in codes}
    print(f"{'code':<10} {'WAL end (MB)':>13} {'WAL max (MB)':>13} {'answers':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'errors':>6} {'downloaded (MB)':>16} {'first byte (s)':>15}")
    for name, r in rows.items():
        print(f"{name:<10} {r['wal_end_mb']:>13.1f} {r['wal_max_mb']:>13.1f} {r['answers']:>8} {r['p50_ms']:>7.1f} "
              f"{r['p99_ms']:>7.1f} {r['errors']:>6} {r['download_mb']:>16.1f} {r['first_byte_s'] or 0:>15.2f}")
    for name, r in rows.items():
        print(f"{name:<10} the log every 10 s (MB): {r['wal_mb_every_10s']}")
    print(json.dumps(rows))
    print(f"# {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
