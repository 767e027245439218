"""Restart time of the crowdsourcing service at contest scale: process start to the first served query.

Builds (by script, not over HTTP) an experiment with ``--items`` items (default 7,500) on the
service's default learner and ``--answers`` answered queries (default 1,000,000), then starts
``purebandits serve`` on a fresh copy of that database and times from the process start to the
first query it hands out (``POST /api/participants`` then ``POST /api/experiments/{id}/queries``
answered with ``state: ok``), on SQLite and on PostgreSQL, for this checkout and for the previous
code (a source tree given by ``--prev-src``, by default a ``git worktree`` of ``--prev-rev`` that
the script adds at ``/tmp/purebandits-prev``), in one run, and prints a table.

    PYTHONPATH=src python benchmarks/restart.py --answers 20000          # a quick check
    PYTHONPATH=src python benchmarks/restart.py                          # 1,000,000 answers (hours: see below)
    PYTHONPATH=src python benchmarks/restart.py --prev-rev HEAD~1        # once this change is committed
    PYTHONPATH=src python benchmarks/restart.py --damage-snapshot        # one count wrong in the latest snapshot

``--damage-snapshot`` corrupts one count in the big experiment's latest snapshot and adds a second,
small experiment, and times, from the process start, ``/healthz``, the small experiment's first
query, the damaged one's first query (503s retried) and the end of the startup verification (for
this code: ``/healthz`` without ``verifying``, after the whole-log replay that settles the snapshot;
the previous code did all of it before serving).

The log is the one the service would have written: the builder drives a fresh learner with the
experiment's seed exactly as the service does (asks with ``repeats="never"``: the learner's choice
among the items a participant has not rated, the others recorded in ``events.excluded``; a
participant answers ``--per-participant`` queries, each answered before the next ask; labels
drawn from per-item probabilities), and writes the ``events``, ``queries`` and ``participants``
rows in bulk, a snapshot every ``snapshot_every`` (200) events as the service keeps them (the
last one is stored), and the verified checkpoint ``--lag`` events behind the head (the state a
running server's background verification would have reached just before a crash, at a multiple
of ``snapshot_every``; ``--lag 0``: it had caught up with the head). So the log is replayable:
the previous code replays it whole at start and checks the snapshot (a replay error would stop
it), and the new code checks the snapshot against the checkpoint plus the replayed tail; the
table shows both checks. Building takes about as long as a full replay (the learner's ask and
tell dominate: 5.5 minutes for 1,000,000 answers on a busy two-core machine with KL-RandLUCB's
incremental bounds, hours with an implementation that recomputes every item's bound per answer),
with a progress bar; the built database is cached in ``--cache`` (keyed by items, answers, seed,
lag and a digest of the learners' code) for reruns.

Both codes must run the same learners: a log is replayable only by the learner code that wrote it.
While learners are being changed in the working tree, compare two trees that differ only in the
service (for example worktrees of one commit, with this change's service files copied into one),
and run the script from the new one (the builder uses the learners it imports).
``--prev-timeout`` bounds the previous code's start (it replays the whole log: as long as the
build), reported as ``> N s``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
LABELS = [("unfunny", 0.0), ("somewhat funny", 0.5), ("funny", 1.0)]
#: bump when the built database changes, so an old cache is not reused
FORMAT = 1


# ---------------------------------------------------------------------------- build
def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # a plain counter on stderr
        class _Plain:
            def __init__(self) -> None:
                self.n, self.last = 0, 0.0

            def update(self, k: int) -> None:
                self.n += k
                if time.monotonic() - self.last > 5:
                    self.last = time.monotonic()
                    print(f"{desc}: {self.n}/{total}", file=sys.stderr, flush=True)

            def close(self) -> None:
                print(f"{desc}: {self.n}/{total}", file=sys.stderr, flush=True)
        return _Plain()
    return tqdm(total=total, desc=desc, unit="answer", smoothing=0.05, mininterval=2)


def build(path: Path, n_items: int, n_answers: int, seed: int, lag: int, per_participant: int) -> dict[str, Any]:
    """Build the database at ``path`` (SQLite, schema at this checkout's head); returns what was built."""
    from purebandits.service.crowd import excluded_arms
    from purebandits.service.eventlog import encode_passed, write_checkpoint
    from purebandits.service.models import events, learners, participants, queries, snapshots
    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine, upgrade
    from purebandits.service.study import Study

    started = time.perf_counter()
    path.unlink(missing_ok=True)
    settings = Settings(database_url=f"sqlite:///{path}")
    every = int(settings.snapshot_every)
    engine = make_engine(settings.url)
    upgrade(engine)
    study = Study(engine, settings)
    spec = {"name": f"restart benchmark: {n_items} items, {n_answers} answers",
            "items": [{"id": f"c{i}", "text": f"caption {i}"} for i in range(n_items)], "seed": seed}
    eid, _token = study.create_experiment(spec)  # the default learner and repeat policy, as the service sets them
    meta = study.meta(eid)
    assert meta.repeats == "never"
    lspec = meta.learners[0]
    learner = lspec.fresh(meta.n_arms)
    rng = np.random.default_rng([seed, 2])
    # per item: P(unfunny), P(somewhat), P(funny), a caption contest's spread (most items unfunny)
    funny = rng.beta(1.0, 6.0, n_items)
    somewhat = rng.uniform(0.5, 1.0, n_items) * (1 - funny) * 0.6
    probs = np.stack([1 - funny - somewhat, somewhat, funny], axis=1)
    cum = probs.cumsum(axis=1)
    expiry_ms = int(meta.expiry_s * 1000)
    now = meta.created_ms
    seq, answered = 0, 0
    ev_rows: list[tuple[Any, ...]] = []
    q_rows: list[tuple[Any, ...]] = []
    p_rows: list[tuple[Any, ...]] = []
    states: dict[int, str] = {}  # the learner's state at every multiple of snapshot_every (the last few)
    db = sqlite3.connect(str(path))
    ev_sql = (f"INSERT INTO events ({', '.join(c.name for c in events.c)}) VALUES "
              f"({', '.join('?' * len(events.c))})")
    q_cols = ["id", "experiment_id", "participant_id", "learner", "arm", "status", "created_ms", "expires_ms",
              "answered_ms", "label", "reward", "ask_seq", "end_seq"]
    q_sql = f"INSERT INTO queries ({', '.join(q_cols)}) VALUES ({', '.join('?' * len(q_cols))})"
    p_sql = "INSERT INTO participants (id, created_ms, origin) VALUES (?, ?, NULL)"

    def flush() -> None:
        db.execute("BEGIN")
        db.executemany(p_sql, p_rows)
        db.executemany(ev_sql, ev_rows)
        db.executemany(q_sql, q_rows)
        db.execute("COMMIT")
        p_rows.clear()
        ev_rows.clear()
        q_rows.clear()

    def logged(kind: str, qid: str, arm: int, label: str | None, reward: float | None,
               excluded: list[int] | None) -> int:
        nonlocal seq
        seq += 1
        ev_rows.append((eid, 0, seq, kind, qid, arm, label, reward, now, None, encode_passed(excluded)))
        if seq % every == 0:
            states[seq] = learner.state_json()
            for old in [s for s in states if s < seq - every * (lag // every + 3)]:
                del states[old]
        return seq

    bar = _progress(n_answers, "building")
    pid, seen, last, n_mine = "", set(), -1, per_participant
    while answered < n_answers:
        if n_mine >= per_participant:
            pid, seen, last, n_mine = str(uuid.uuid4()), set(), -1, 0
            p_rows.append((pid, now))
        # CrowdOperations._ask_locked with repeats="never": the learner's choice among the items this participant
        # may be given
        excluded = sorted(excluded_arms("never", n_items, seen, set(), last))
        if excluded:
            allowed = np.ones(n_items, dtype=bool)
            allowed[excluded] = False
            got = learner.ask(1, allowed=allowed)
        else:
            got = learner.ask(1)
        if not got:
            raise SystemExit(f"the learner stopped after {answered} answers; use fewer --answers")
        arm = got[0]
        qid = str(uuid.uuid4())
        ask_seq = logged("ask", qid, arm, None, None, excluded or None)
        which = int(np.searchsorted(cum[arm], rng.random() * cum[arm, -1], side="right"))
        label, reward = LABELS[min(which, 2)]
        now += 150
        learner.tell(arm, reward)
        end_seq = logged("answer", qid, arm, label, reward, None)
        q_rows.append((qid, eid, pid, 0, arm, "answered", now - 150, now - 150 + expiry_ms, now, label, reward,
                       ask_seq, end_seq))
        seen.add(arm)
        last = arm
        n_mine += 1
        answered += 1
        bar.update(1)
        if len(ev_rows) >= 20_000:
            flush()
        now += 50
    flush()
    bar.close()
    db.close()
    head = seq
    snap_v = head // every * every
    ck_v = max(0, (head - lag) // every * every) if lag else head
    snap_state = learner.state_json() if snap_v == head else states[snap_v]
    ck_state = learner.state_json() if ck_v == head else states.get(ck_v)
    if ck_state is None:
        raise SystemExit(f"--lag {lag} is too far back for the states kept; use a smaller one")
    with engine.begin() as conn:
        conn.execute(learners.update().where(learners.c.experiment_id == eid).values(version=head))
        conn.execute(snapshots.update().where(snapshots.c.experiment_id == eid)
                     .values(version=snap_v, state=snap_state, created_ms=now))
        write_checkpoint(conn, eid, 0, ck_v, ck_state, now, force=True)
        counts = {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                  for t in (events, queries, participants)}
    engine.dispose()
    with sqlite3.connect(str(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    info = {"format": FORMAT, "experiment": eid, "items": n_items, "answers": answered, "events": head,
            "snapshot_version": snap_v, "checkpoint_version": ck_v, "learner": lspec.algorithm,
            "params": lspec.params, "seed": seed, "rows": counts, "build_seconds": time.perf_counter() - started}
    return info


def learner_code_digest() -> str:
    """A digest of the learners' code the builder runs (everything of the package but the service): a log built
    by one version of a learner need not replay in another, so a cached database is only reused with the same."""
    import hashlib

    import purebandits

    h = hashlib.sha256()
    pkg = Path(purebandits.__file__).parent
    for f in sorted(pkg.rglob("*.py")):
        if "service" not in f.relative_to(pkg).parts:
            h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def cached_build(cache: Path, args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The built database (from the cache when there), and what it holds."""
    cache.mkdir(parents=True, exist_ok=True)
    key = f"restart-f{FORMAT}-{args.items}items-{args.answers}answers-seed{args.seed}-lag{args.lag}" \
          f"-pp{args.per_participant}-code{learner_code_digest()}"
    db, meta = cache / f"{key}.sqlite", cache / f"{key}.json"
    if db.exists() and meta.exists():
        print(f"using the cached database {db}", file=sys.stderr)
        return db, json.loads(meta.read_text())
    tmp = cache / f"{key}.building.sqlite"
    info = build(tmp, args.items, args.answers, args.seed, args.lag, args.per_participant)
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    tmp.rename(db)
    meta.write_text(json.dumps(info, indent=1))
    print(f"built {db} in {info['build_seconds']:.0f} s", file=sys.stderr)
    return db, info


# ---------------------------------------------------------------------------- copies for each run
def downgrade(url: str, revision: str) -> None:
    """The database at ``url`` at ``revision`` with this checkout's migrations (for the previous code): up to it if
    it is older (a cached database may be), down to it if newer. On SQLite without foreign-key enforcement: a
    downgrade that rebuilds a table (Alembic's batch mode: drop and recreate) would otherwise cascade-delete
    every row that refers to it."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    from purebandits.service.storage import _alembic_config, make_engine

    if url.startswith("sqlite"):
        engine = sa.create_engine(url)
    else:
        engine = make_engine(url, statement_timeout_seconds=24 * 3600.0)
    try:
        cfg = _alembic_config(engine)
        with engine.begin() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
            cfg.attributes["connection"] = conn
            if current == revision:
                return
            older = current is None or current < revision  # the revisions are numbered: "0001", "0002", ...
            (command.upgrade if older else command.downgrade)(cfg, revision)
    finally:
        engine.dispose()


def head_of(src: Path) -> str:
    """The newest migration revision of the source tree ``src``."""
    versions = sorted(p.name.split("_", 1)[0] for p in (src / "purebandits/service/migrations/versions").glob("0*.py"))
    return versions[-1]


def load_postgres(sqlite_path: Path, url: str) -> None:
    """Copy every table of the built SQLite database into the empty PostgreSQL database at ``url`` (COPY for the
    big ones), at the same schema revision."""
    from purebandits.service.models import metadata
    from purebandits.service.storage import make_engine, upgrade

    src = make_engine(f"sqlite:///{sqlite_path}")
    dst = make_engine(url, statement_timeout_seconds=24 * 3600.0)  # a COPY of millions of rows
    try:
        upgrade(dst)
        big = {"events", "queries", "participants"}
        with src.connect() as s, dst.begin() as d:
            for table in metadata.sorted_tables:
                cols = [c.name for c in table.c]
                if table.name not in big:
                    rows = [dict(r._mapping) for r in s.execute(sa.select(table))]
                    if rows:
                        d.execute(table.insert(), rows)
                    continue
                raw = d.connection.driver_connection
                with raw.cursor() as cur, cur.copy(f"COPY {table.name} ({', '.join(cols)}) FROM STDIN") as cp:
                    result = s.execution_options(stream_results=True).exec_driver_sql(
                        f"SELECT {', '.join(cols)} FROM {table.name}")
                    for part in result.partitions(50_000):
                        for row in part:
                            cp.write_row(tuple(row))
            d.exec_driver_sql("SELECT setval(pg_get_serial_sequence('experiments', 'id'), "
                              "(SELECT max(id) FROM experiments))")
        with dst.connect() as d:
            d.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    finally:
        src.dispose()
        dst.dispose()


# ---------------------------------------------------------------------------- timing
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def add_small_experiment(sqlite_path: Path) -> int:
    """A second, small experiment (10 items, no answers yet) in the built database: the one a restart with a
    damaged snapshot of the big one must serve at once. Returns its id."""
    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine
    from purebandits.service.study import Study

    engine = make_engine(f"sqlite:///{sqlite_path}")
    try:
        study = Study(engine, Settings(database_url=f"sqlite:///{sqlite_path}"))
        eid, _ = study.create_experiment({"name": "another experiment", "seed": 1,
                                          "items": [{"id": f"s{i}", "text": f"small {i}"} for i in range(10)]})
        study.close()
    finally:
        engine.dispose()
    return eid


def damage_snapshot(sqlite_path: Path, eid: int) -> None:
    """One count wrong in experiment ``eid``'s latest snapshot (the checkpoint is left intact)."""
    with sqlite3.connect(str(sqlite_path)) as db:
        (text,) = db.execute("SELECT state FROM snapshots WHERE experiment_id = ?", (eid,)).fetchone()
        state = json.loads(text)
        state["state"]["counts_"]["__ndarray__"][0] += 1
        db.execute("UPDATE snapshots SET state = ? WHERE experiment_id = ?", (json.dumps(state), eid))


def _first_query(client: httpx.Client, base: str, eid: int, t0: float, timeout: float) -> float | None:
    """Seconds from ``t0`` to a new participant's first query of ``eid`` (503s retried), None past ``timeout``."""
    pid = client.post(base + "/api/participants").json()["participant_id"]
    while time.perf_counter() - t0 < timeout:
        q = client.post(f"{base}/api/experiments/{eid}/queries", json={"participant_id": pid})
        if q.status_code == 503:
            time.sleep(min(1.0, float(q.headers.get("Retry-After", 1))))
            continue
        q.raise_for_status()
        if q.json().get("state") != "ok":
            raise RuntimeError(f"first ask of experiment {eid} answered {q.json()}")
        return time.perf_counter() - t0
    return None


def time_restart(db_url: str, src: Path, eid: int, timeout: float, log_path: Path,
                 other: int | None = None) -> dict[str, Any]:
    """Start ``purebandits serve`` from ``src`` on ``db_url``; seconds from the process start to its healthz and
    to its first served query, and what its startup log says. With ``other`` (an experiment whose state is
    sound), its first query is timed first (``other_query``), then ``eid``'s, then the end of the startup
    verification (``verified``: /healthz without ``verifying``)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PUREBANDITS_ASK_RATE_PER_SECOND": "0", "PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0",
           "PUREBANDITS_CREATE_RATE_PER_SECOND": "0"}
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"healthz": None, "first_query": None, "other_query": None, "verified": None,
                           "timed_out": False}
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "purebandits.cli", "serve", "--db", db_url, "--port",
                                 str(port), "--no-access-log", "--log-level", "info"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            with httpx.Client(timeout=30) as client:
                while True:
                    if time.perf_counter() - t0 > timeout:
                        out["timed_out"] = True
                        break
                    if proc.poll() is not None:
                        raise RuntimeError(f"server exited with {proc.returncode}; see {log_path}")
                    try:
                        client.get(base + "/healthz", timeout=1).raise_for_status()
                    except httpx.TransportError:
                        time.sleep(0.02)
                        continue
                    out["healthz"] = time.perf_counter() - t0
                    if other is not None:
                        out["other_query"] = _first_query(client, base, other, t0, timeout)
                    out["first_query"] = _first_query(client, base, eid, t0, timeout)
                    if out["first_query"] is None:
                        out["timed_out"] = True
                        break
                    if other is not None:
                        while "verifying" in client.get(base + "/healthz", timeout=30).json():
                            if time.perf_counter() - t0 > timeout:
                                break
                            time.sleep(0.5)
                        else:
                            out["verified"] = time.perf_counter() - t0
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    text = log_path.read_text(errors="replace")
    m = re.search(r"verified \d+ experiment.*", text)
    out["log"] = m.group(0) if m else next((ln for ln in text.splitlines() if "rebuilt" in ln), "")
    m = re.search(r"(\d+) event\(s\) replayed", out["log"])
    out["replayed"] = int(m.group(1)) if m else None
    out["snapshot_warning"] = "differs from the replay" in text
    out["settled"] = "agrees with the verified checkpoint" in text
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--answers", type=int, default=1_000_000)
    p.add_argument("--items", type=int, default=7_500)
    p.add_argument("--seed", type=int, default=559)
    p.add_argument("--lag", type=int, default=400,
                   help="at least this many events between the verified checkpoint and the head (default 400: a "
                        "crash a few seconds after the background verification's last round; 0: none)")
    p.add_argument("--per-participant", type=int, default=10, help="answers per participant (default 10)")
    p.add_argument("--backends", default="sqlite,postgres", help="comma list of sqlite, postgres")
    p.add_argument("--codes", default="prev,new", help="comma list of prev, new")
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the new code's source tree (default: this "
                                                                  "checkout)")
    p.add_argument("--prev-src", type=Path, default=None,
                   help="the previous code's source tree (default: a git worktree of --prev-rev at "
                        "/tmp/purebandits-prev, added if absent)")
    p.add_argument("--prev-rev", default="HEAD", help="the previous code's revision for the worktree (default HEAD: "
                                                      "the commit this uncommitted change applies to)")
    p.add_argument("--prev-timeout", type=float, default=float("inf"),
                   help="give up on the previous code's start after this many seconds (default: wait)")
    p.add_argument("--timeout", type=float, default=600.0, help="the same for the new code (default 600)")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                   / "purebandits" / "restart-benchmark", help="where the built database is kept")
    p.add_argument("--pg-url", default=os.environ.get("PUREBANDITS_TEST_PG_URL"),
                   help="admin URL of a PostgreSQL server (default: start a throwaway durable one)")
    p.add_argument("--pg-fast", action="store_true", help="throwaway PostgreSQL with fsync off (not durable)")
    p.add_argument("--damage-snapshot", action="store_true",
                   help="corrupt one count in the big experiment's latest snapshot and add a second, small "
                        "experiment; time /healthz, the small one's first query, the damaged one's and the end of "
                        "the verification")
    args = p.parse_args(argv)
    codes = [c for c in args.codes.split(",") if c]
    load_start = os.getloadavg()[0]
    prev_src = args.prev_src
    if "prev" in codes and prev_src is None:
        tree = Path("/tmp/purebandits-prev")
        if not tree.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.prev_rev],
                           check=True)
        prev_src = tree / "src"
    srcs = {"new": args.src, "prev": prev_src}
    db, info = cached_build(args.cache, args)
    print(f"database: {info}", file=sys.stderr)
    rows = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="restart-bench-")))
        admin = None
        for backend in args.backends.split(","):
            for code in codes:
                src = srcs[code]
                revision = head_of(src)  # the schema that code knows
                copy = tmp / f"{backend}-{code}.sqlite"
                shutil.copy(db, copy)
                other = None
                if args.damage_snapshot:
                    other = add_small_experiment(copy)
                    damage_snapshot(copy, info["experiment"])
                print(f"{backend}/{code}: preparing a copy at revision {revision}", file=sys.stderr)
                if backend == "sqlite":
                    url = f"sqlite:///{copy}"
                    downgrade(url, revision)
                elif backend == "postgres":
                    from purebandits.testing.postgres import create_database, temporary_postgres

                    if admin is None:
                        admin = args.pg_url or stack.enter_context(temporary_postgres(durable=not args.pg_fast))
                    url = create_database(admin)
                    downgrade(f"sqlite:///{copy}", head_of(ROOT / "src"))  # the tables as this checkout reads them
                    load_postgres(copy, url)
                    downgrade(url, revision)
                    copy.unlink()
                else:
                    raise SystemExit(f"unknown backend {backend!r}")
                timeout = args.prev_timeout if code == "prev" else args.timeout
                print(f"{backend}/{code}: starting the server from {src}", file=sys.stderr)
                res = time_restart(url, src, info["experiment"], timeout, tmp / f"{backend}-{code}.log", other)
                print(f"{backend}/{code}: {res}", file=sys.stderr)
                rows.append((backend, code, res, timeout))
                if backend == "sqlite":
                    copy.unlink(missing_ok=True)
    load_end = os.getloadavg()[0]
    pg = "NOT durable (fsync off)" if args.pg_fast else "durable (fsync, synchronous_commit on)"
    print(f"\n{info['items']} items, {info['answers']} answers ({info['events']} events; {info['learner']} "
          f"{info['params']}, the service's default learner), snapshot at version {info['snapshot_version']}, "
          f"verified checkpoint at {info['checkpoint_version']} ({info['events'] - info['checkpoint_version']} "
          f"events behind the head); built in {info['build_seconds']:.0f} s. PostgreSQL {pg}"
          f"{' (given by --pg-url)' if args.pg_url else ''}; {os.cpu_count()} CPUs, load average {load_start:.1f} "
          f"at the start and {load_end:.1f} at the end; Python {platform.python_version()}. New code: {args.src}; "
          f"previous code: {prev_src}.\n")
    if args.damage_snapshot:
        print("One count of the big experiment's latest snapshot corrupted; a second, small experiment (10 items). "
              "Seconds from the process start.\n")
        print("| backend | code | /healthz | another experiment's first query | damaged experiment's first query "
              "| verification over (whole-log replay settled) | snapshot check |")
        print("|---|---|---:|---:|---:|---:|---|")
        for backend, code, r, timeout in rows:
            def cell(x: float | None, timeout: float = timeout) -> str:
                return f"> {timeout:g} (stopped)" if x is None else f"{x:.2f}"
            check = ("differs; settled by the whole-log replay" if r["settled"] else
                     "differs (repaired)" if r["snapshot_warning"] else "-")
            verified = r["verified"] if code == "new" else r["healthz"]  # the previous code verified before serving
            print(f"| {backend} | {code} | {cell(r['healthz'])} | {cell(r['other_query'])} | "
                  f"{cell(r['first_query'])} | {cell(verified)} | {check} |")
        return 0
    print("| backend | code | start to /healthz (s) | start to first query (s) | events replayed | snapshot check |")
    print("|---|---|---:|---:|---:|---|")
    for backend, code, r, timeout in rows:
        first = f"> {timeout:g} (stopped)" if r["timed_out"] else f"{r['first_query']:.2f}"
        health = "-" if r["healthz"] is None else f"{r['healthz']:.2f}"
        replayed = r["replayed"] if r["replayed"] is not None else (info["events"] if code == "prev" and
                                                                    not r["timed_out"] else "-")
        check = "differs (repaired)" if r["snapshot_warning"] else ("-" if r["timed_out"] else "matched")
        print(f"| {backend} | {code} | {health} | {first} | {replayed} | {check} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
