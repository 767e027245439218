"""The outside probe of issue #23: how the service behaves when the database or a client misbehaves.

Each scenario starts its own ``purebandits serve`` (through ``benchmarks/service_load.py``) on a
fresh database, puts it under a small background load, does one bad thing to it from outside,
and prints one markdown table and a line with the conditions (CPUs, load average, source tree,
database durability); ``--out`` writes everything (every figure of the tables and a bit more)
as JSON.

- ``sqlite-lock``: another process holds SQLite's write lock (``BEGIN IMMEDIATE``) for 10 s.
- ``pg-rowlock``: an outside transaction holds experiment 1's learner row (``FOR UPDATE``) for
  10 s while experiment 2 is under load too.
- ``pg-hang``: every process of the PostgreSQL cluster is stopped (SIGSTOP) for 8 s.
- ``big-create``: an experiment of 100,000 items is created under load.
- ``big-results``: an owner polls the results of a 100,000-item experiment every second.
- ``starvation``: 20 participants ask a round-based learner (successive elimination, 20 items)
  once each and walk away; how long until the next participant is served?
- ``mint``: with the default rate limits, one client mints participant ids as fast as it can and
  asks once with each.
- ``memory``: the server's RSS while five experiments of 100,000 items are created and used.

Run it against this checkout and against a previous one (``git worktree add /tmp/prev 352531f``)::

    PYTHONPATH=src python benchmarks/reliability/probe.py --scenarios all --out docs/reliability/probe_new.json
    PYTHONPATH=src python benchmarks/reliability/probe.py --scenarios all --src /tmp/prev/src \\
        --out docs/reliability/probe_prev.json

``--quick`` shortens every phase (a smoke test, not a measurement); ``--scenarios
sqlite-lock,starvation`` runs a few. The load is ``--participants`` (10) simulated participants,
each with its own keep-alive httpx client, asking and answering with ``--think`` seconds (0.1)
between rounds, registering a new id when told the experiment is exhausted for them. "During"
a fault counts every request in flight at some moment of it. Settings the previous code does
not know (``PUREBANDITS_DB_WAIT_SECONDS``) are ignored by it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from service_load import process_cpu_seconds, start_server, stop_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # client timeout: long enough to see how long the old code hangs
SMALL_ITEMS = [f"caption {i}" for i in range(20)]
PARTICIPANT_KINDS = ("register", "ask", "answer")
DEFAULT_RATES = {"PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "1", "PUREBANDITS_PARTICIPANT_BURST": "60",
                 "PUREBANDITS_ASK_RATE_PER_SECOND": "10", "PUREBANDITS_ASK_BURST": "30"}
QUICK = {"lock_seconds": 3.0, "stop_seconds": 3.0, "warmup": 1.0, "after": 3.0, "phase_seconds": 3.0,
         "mint_seconds": 5.0, "starve_seconds": 30.0, "settle_seconds": 5.0, "memory_experiments": 2,
         "big_answers": 40}


# ---------------------------------------------------------------------------------------- timing


@dataclass
class Sample:
    """One HTTP request: what it was, when it started and ended (seconds on the probe's clock), its status
    (0: no response, a transport error or timeout) and the ``state`` of an ask."""

    kind: str
    t0: float
    t1: float
    status: int
    tag: str = ""
    state: str = ""
    nbytes: int = 0

    @property
    def ms(self) -> float:
        return 1000 * (self.t1 - self.t0)


@dataclass
class Probe:
    """The server under test and every request made to it, on one clock (``now()``, also used by threads)."""

    url: str
    pid: int = 0  # the server process
    origin: float = field(default_factory=time.perf_counter)
    samples: list[Sample] = field(default_factory=list)

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def client(self, **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=TIMEOUT, **kw)

    async def call(self, client: httpx.AsyncClient, method: str, path: str, kind: str, tag: str = "",
                   **kw: Any) -> tuple[int, Any]:
        t0 = self.now()
        status, body, nbytes = 0, None, 0
        try:
            r = await client.request(method, path, **kw)
            status, nbytes = r.status_code, len(r.content)
            if r.headers.get("content-type", "").startswith("application/json"):
                body = r.json()
        except httpx.HTTPError:
            pass
        state = body.get("state", "") if isinstance(body, dict) and isinstance(body.get("state"), str) else ""
        self.samples.append(Sample(kind, t0, self.now(), status, tag, state, nbytes))
        return status, body

    def window(self, kinds: tuple[str, ...] | str, start: float, end: float, tag: str | None = None) -> list[Sample]:
        """Requests of these kinds in flight at some moment of [start, end)."""
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        return [s for s in self.samples
                if s.kind in kinds and (tag is None or s.tag == tag) and s.t0 < end and s.t1 > start]


def stats(samples: list[Sample]) -> dict[str, Any]:
    """Count, latency percentiles (ms) and statuses of some requests."""
    ms = np.array([s.ms for s in samples])
    out: dict[str, Any] = {"n": len(samples), "statuses": dict(sorted(Counter(s.status for s in samples).items()))}
    for name, q in (("p50", 50), ("p99", 99), ("max", 100)):
        out[name] = float(np.percentile(ms, q)) if len(ms) else None
    return out


def recovery(probe: Probe, released: float, tag: str | None = None, slow_ms: float = 1000.0) -> dict[str, Any]:
    """After a fault ends: when the last failed (not 2xx) or slow participant request ended, and when the first
    ask sent after the end was served (seconds after the end; None if there was none)."""
    after = [s for s in probe.samples if s.kind in PARTICIPANT_KINDS and s.t1 > released
             and (tag is None or s.tag == tag)]
    bad = [s.t1 for s in after if not 200 <= s.status < 300 or s.ms > slow_ms]
    served = [s.t1 for s in after if s.kind == "ask" and s.t0 >= released and s.state == "ok"]
    return {"last_bad_s": max(bad) - released if bad else 0.0,
            "first_ok_ask_s": min(served) - released if served else None}


# ---------------------------------------------------------------------------------------- load


async def participant(probe: Probe, eid: int, stop: asyncio.Event, think: float, rng: random.Random,
                      tag: str = "") -> None:
    """Ask and answer until ``stop``; a new id when this one has nothing more to do; 0.25 s back-off on errors."""
    async with probe.client() as c:
        pid: str | None = None
        while not stop.is_set():
            if pid is None:
                status, body = await probe.call(c, "POST", "/api/participants", "register", tag)
                if status == 201:
                    pid = body["participant_id"]
                else:
                    await asyncio.sleep(0.25)
                continue
            status, body = await probe.call(c, "POST", f"/api/experiments/{eid}/queries", "ask", tag,
                                            json={"participant_id": pid})
            if status == 200 and body.get("state") == "ok":
                label = rng.choice(body.get("labels") or ["funny"])
                await probe.call(c, "POST", f"/api/queries/{body['query_id']}/answer", "answer", tag,
                                 json={"participant_id": pid, "label": label})
            elif status == 200 and body.get("state") in ("exhausted", "complete", "done"):
                pid = None
                continue
            else:
                await asyncio.sleep(0.25)
            if think:
                await asyncio.sleep(think)


async def poll_health(probe: Probe, stop: asyncio.Event, every: float = 0.1) -> None:
    """GET /healthz every ``every`` seconds (the next one at once if one took longer)."""
    async with probe.client() as c:
        due = probe.now()
        while not stop.is_set():
            await probe.call(c, "GET", "/healthz", "health")
            due = max(due + every, probe.now())
            await asyncio.sleep(due - probe.now())


@asynccontextmanager
async def background(probe: Probe, loads: list[tuple[int, int, str]], think: float,
                     health: bool = True) -> AsyncIterator[None]:
    """``loads``: (experiment id, participants, tag); plus the /healthz poller. Stopped on exit."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(participant(probe, eid, stop, think, random.Random(f"{tag}{k}"), tag))
             for eid, n, tag in loads for k in range(n)]
    if health:
        tasks.append(asyncio.create_task(poll_health(probe, stop)))
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def create(probe: Probe, items: list[str], **spec: Any) -> tuple[int, str]:
    async with probe.client() as c:
        status, body = await probe.call(c, "POST", "/api/experiments", "create",
                                        json={"name": spec.pop("name", "probe"), "items": items, "seed": 1, **spec})
    if status != 201:
        raise RuntimeError(f"creating an experiment failed: {status} {body}")
    return body["id"], body["owner_token"]


# ---------------------------------------------------------------------------------------- servers


@dataclass
class Ctx:
    args: argparse.Namespace
    stack: ExitStack
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {"PUREBANDITS_DB_WAIT_SECONDS": str(self.args.db_wait), **extra}

    def sqlite(self, name: str) -> str:
        return f"sqlite:///{self.tmp / (name + '.sqlite')}"

    def postgres(self) -> str:
        from purebandits.testing.postgres import create_database, temporary_postgres

        admin = self.stack.enter_context(temporary_postgres(durable=self.args.pg_durable))
        return create_database(admin)

    @contextmanager
    def serve(self, db_url: str, env: dict[str, str] | None = None) -> Iterator[Probe]:
        proc, url = start_server(db_url, self.args.workers, self.args.src, env=self.env(**(env or {})))
        probe = Probe(url, proc.pid)
        try:
            yield probe
        finally:
            stop_server(proc)


def describe_db(ctx: Ctx, db: str) -> str:
    if db == "sqlite":
        return "SQLite file (WAL)"
    return ("throwaway PostgreSQL, durable (fsync on)" if ctx.args.pg_durable
            else "throwaway PostgreSQL, NOT durable (fsync off)")


def cluster_pids(url: str) -> list[int]:
    """The postmaster of the server at ``url`` and all its children (as ``_cluster_pids`` in the tests)."""
    import psycopg

    def parent(pid: int | str) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

    with psycopg.connect(url) as conn:
        postmaster = parent(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                if parent(entry.name) == postmaster:
                    children.append(int(entry.name))
    return [postmaster, *children]


def rss_kib(pid: int, descendants: bool = True) -> int:
    """VmRSS of a process and (``descendants``) its live descendants, in KiB."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        with suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        if descendants:
            todo.extend(child for child, parent in parents.items() if parent == current)
    return total


def hold_in_thread(probe: Probe, acquire: Callable[[], Callable[[], None]], seconds: float,
                   marks: dict[str, float]) -> threading.Thread:
    """Run ``acquire`` in a thread (it takes a lock and returns its release), hold ``seconds``, release.
    ``marks`` gets the probe-clock times ``held`` and ``released``."""

    def run() -> None:
        release = acquire()
        marks["held"] = probe.now()
        try:
            time.sleep(seconds)
        finally:
            release()
            marks["released"] = probe.now()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


async def wait_thread(thread: threading.Thread) -> None:
    while thread.is_alive():
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------------------------- reports


@dataclass
class Report:
    title: str
    headers: list[str]
    rows: list[list[Any]]
    conditions: str
    data: dict[str, Any]

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.headers) + " |",
                 "|---|" + "---:|" * (len(self.headers) - 1)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines + ["", self.conditions, ""])


def ms(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def statuses(st: dict[str, Any]) -> str:
    """``2xx: 31, 503: 12, other: 0`` (other named when there are any)."""
    c = Counter(st["statuses"])
    ok = sum(v for k, v in c.items() if 200 <= k < 300)
    other = {k: v for k, v in c.items() if not 200 <= k < 300 and k != 503}
    text = f"2xx: {ok}, 503: {c.get(503, 0)}, other: {sum(other.values())}"
    if other:
        text += " (" + ", ".join(f"{'no response' if k == 0 else k}: {v}" for k, v in sorted(other.items())) + ")"
    return text


def conditions(ctx: Ctx, db: str, extra: str = "") -> str:
    load = os.getloadavg()
    return (f"Conditions: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) at the end, "
            f"source {ctx.args.src or ROOT / 'src'}, {describe_db(ctx, db)}, {ctx.args.workers} worker(s), "
            f"PUREBANDITS_DB_WAIT_SECONDS={ctx.args.db_wait:g} (where the code knows it), "
            f"Python {platform.python_version()}"
            + (f"; {extra}" if extra else "") + ".")


def load_text(ctx: Ctx) -> str:
    return f"{ctx.args.participants} participants, {ctx.args.think:g} s between rounds"


# ---------------------------------------------------------------------------------------- scenarios


async def _fault_under_load(probe: Probe, ctx: Ctx, loads: list[tuple[int, int, str]],
                            fault: Callable[[dict[str, float]], threading.Thread]) -> dict[str, float]:
    """Background load and /healthz polling; after the warm-up start ``fault`` (a thread that fills
    ``held`` / ``released``), keep going ``--after`` seconds after it ends."""
    marks: dict[str, float] = {}
    async with background(probe, loads, ctx.args.think):
        await asyncio.sleep(ctx.args.warmup)
        marks["start"] = probe.now()
        await wait_thread(fault(marks))
        if "released" not in marks:
            raise RuntimeError("the fault thread failed (see its traceback above)")
        await asyncio.sleep(ctx.args.after)
    return marks


def sqlite_lock(ctx: Ctx) -> Report:
    a = ctx.args
    db = ctx.sqlite("lock")

    def fault(marks: dict[str, float]) -> threading.Thread:
        def acquire() -> Callable[[], None]:
            conn = sqlite3.connect(db.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
            conn.execute("BEGIN IMMEDIATE")

            def release() -> None:
                conn.execute("ROLLBACK")
                conn.close()
            return release
        return hold_in_thread(probe, acquire, a.lock_seconds, marks)

    with ctx.serve(db) as probe:
        eid, _ = asyncio.run(create(probe, SMALL_ITEMS))
        marks = asyncio.run(_fault_under_load(probe, ctx, [(eid, a.participants, "")], fault))
    held, released = marks["held"], marks["released"]
    health = stats(probe.window("health", held, released))
    part = stats(probe.window(PARTICIPANT_KINDS, held, released))
    rec = recovery(probe, released)
    rows = [["/healthz during the lock: p50 / max (ms)", f"{ms(health['p50'])} / {ms(health['max'])}"],
            ["/healthz polls during the lock", health["n"]],
            ["participant requests during the lock", statuses(part)],
            ["participant requests during the lock: max latency (ms)", ms(part["max"])],
            ["recovery after release: last failed or > 1 s request ended (s)", secs(rec["last_bad_s"])],
            ["first ask sent after release served after (s)", secs(rec["first_ok_ask_s"])]]
    return Report(f"sqlite-lock: another process holds BEGIN IMMEDIATE for {a.lock_seconds:g} s", ["measure", "value"],
                  rows, conditions(ctx, "sqlite", load_text(ctx)),
                  {"lock_seconds": released - held, "waited_for_lock_s": held - marks["start"], "health": health,
                   "participants": part, "recovery": rec})


def pg_rowlock(ctx: Ctx) -> Report:
    import psycopg

    a = ctx.args
    db = ctx.postgres()
    half = max(1, a.participants // 2)

    with ctx.serve(db) as probe:
        e1, _ = asyncio.run(create(probe, SMALL_ITEMS, name="one"))
        e2, _ = asyncio.run(create(probe, SMALL_ITEMS, name="two"))

        def fault(marks: dict[str, float]) -> threading.Thread:
            def acquire() -> Callable[[], None]:
                conn = psycopg.connect(db)
                conn.execute("SELECT * FROM learners WHERE experiment_id = %s FOR UPDATE", (e1,))

                def release() -> None:
                    conn.rollback()
                    conn.close()
                return release
            return hold_in_thread(probe, acquire, a.lock_seconds, marks)

        marks = asyncio.run(_fault_under_load(probe, ctx, [(e1, half, "e1"), (e2, half, "e2")], fault))
    held, released = marks["held"], marks["released"]
    health = stats(probe.window("health", held, released))
    s1 = stats(probe.window(PARTICIPANT_KINDS, held, released, "e1"))
    s2 = stats(probe.window(PARTICIPANT_KINDS, held, released, "e2"))
    rec = recovery(probe, released, "e1")
    rows = [["/healthz during the lock: p50 / max (ms)", f"{ms(health['p50'])} / {ms(health['max'])}"],
            ["experiment 2 requests during the lock: p50 / max (ms)", f"{ms(s2['p50'])} / {ms(s2['max'])}"],
            ["experiment 2 requests during the lock", statuses(s2)],
            ["experiment 1 (locked) requests during the lock", statuses(s1)],
            ["experiment 1 requests during the lock: max latency (ms)", ms(s1["max"])],
            ["experiment 1 recovery: last failed or > 1 s request ended (s)", secs(rec["last_bad_s"])]]
    return Report(f"pg-rowlock: an outside transaction holds experiment 1's learner row for {a.lock_seconds:g} s",
                  ["measure", "value"], rows,
                  conditions(ctx, "postgres", f"{half} participants on each experiment, {a.think:g} s between rounds"),
                  {"lock_seconds": released - held, "health": health, "e1": s1, "e2": s2, "recovery_e1": rec})


def pg_hang(ctx: Ctx) -> Report:
    a = ctx.args
    db = ctx.postgres()
    with ctx.serve(db) as probe:
        eid, _ = asyncio.run(create(probe, SMALL_ITEMS))
        pids = cluster_pids(db)

        def fault(marks: dict[str, float]) -> threading.Thread:
            def acquire() -> Callable[[], None]:
                for p in pids:
                    with suppress(ProcessLookupError):  # a backend that just ended (the one that listed them)
                        os.kill(p, signal.SIGSTOP)

                def release() -> None:
                    for p in pids:
                        with suppress(ProcessLookupError):
                            os.kill(p, signal.SIGCONT)
                return release
            return hold_in_thread(probe, acquire, a.stop_seconds, marks)

        marks = asyncio.run(_fault_under_load(probe, ctx, [(eid, a.participants, "")], fault))
    held, released = marks["held"], marks["released"]
    health = stats(probe.window("health", held, released))
    part = stats(probe.window(PARTICIPANT_KINDS, held, released))
    rec = recovery(probe, released)
    rows = [["/healthz during the stop: p50 / max (ms)", f"{ms(health['p50'])} / {ms(health['max'])}"],
            ["participant requests during the stop", statuses(part)],
            ["participant requests during the stop: max latency (ms)", ms(part["max"])],
            ["recovery after SIGCONT: last failed or > 1 s request ended (s)", secs(rec["last_bad_s"])],
            ["first ask sent after SIGCONT served after (s)", secs(rec["first_ok_ask_s"])]]
    return Report(f"pg-hang: every PostgreSQL process stopped (SIGSTOP) for {a.stop_seconds:g} s",
                  ["measure", "value"], rows,
                  conditions(ctx, "postgres", f"{load_text(ctx)}; {len(pids)} cluster processes stopped"),
                  {"stop_seconds": released - held, "cluster_processes": len(pids), "health": health,
                   "participants": part, "recovery": rec})


def big_body(n: int) -> bytes:
    """A creation request of ``n`` items, encoded once in advance (not on the probe's event loop mid-phase)."""
    return json.dumps({"name": f"big {n}", "items": [f"caption {i}" for i in range(n)], "seed": 1}).encode()


def big_create(ctx: Ctx) -> Report:
    a = ctx.args
    body = big_body(a.big_items)

    async def run(probe: Probe, eid: int) -> dict[str, float]:
        marks: dict[str, float] = {}
        async with background(probe, [(eid, a.participants, "")], a.think):
            await asyncio.sleep(a.warmup)
            marks["before"] = probe.now()
            await asyncio.sleep(a.phase_seconds)
            marks["start"] = probe.now()
            async with probe.client() as c:
                status, _ = await probe.call(c, "POST", "/api/experiments", "create", "big", content=body,
                                             headers={"Content-Type": "application/json"})
            marks["end"], marks["status"] = probe.now(), status
            await asyncio.sleep(a.after)
        return marks

    with ctx.serve(ctx.sqlite("create")) as probe:
        eid, _ = asyncio.run(create(probe, SMALL_ITEMS))
        marks = asyncio.run(run(probe, eid))
    phases = {"before": (marks["before"], marks["start"]), "during the create": (marks["start"], marks["end"])}
    rows, data = [], {"create_seconds": marks["end"] - marks["start"], "create_status": marks["status"],
                      "body_bytes": len(body)}
    for name, (t0, t1) in phases.items():
        h, p = stats(probe.window("health", t0, t1)), stats(probe.window(PARTICIPANT_KINDS, t0, t1))
        rows.append([name, f"{t1 - t0:.1f}", ms(h["p99"]), ms(h["max"]), p["n"], ms(p["p99"]), ms(p["max"]),
                     statuses(p)])
        data[name] = {"health": h, "participants": p}
    return Report(f"big-create: one experiment of {a.big_items:,} items created under load "
                  f"(took {data['create_seconds']:.1f} s, status {marks['status']})",
                  ["phase", "seconds", "/healthz p99 (ms)", "/healthz max (ms)", "participant requests",
                   "participant p99 (ms)", "participant max (ms)", "statuses"], rows,
                  conditions(ctx, "sqlite", f"{load_text(ctx)}; request body {len(body) / 1e6:.1f} MB"), data)


async def answer_some(probe: Probe, eid: int, n: int) -> int:
    """Answer ``n`` queries of experiment ``eid`` (a new participant whenever one runs out); returns how many."""
    done, rng = 0, random.Random(7)
    async with probe.client() as c:
        pid = None
        for _ in range(4 * n):
            if done >= n:
                break
            if pid is None:
                pid = (await probe.call(c, "POST", "/api/participants", "setup"))[1]["participant_id"]
            status, body = await probe.call(c, "POST", f"/api/experiments/{eid}/queries", "setup",
                                            json={"participant_id": pid})
            if status == 200 and body["state"] == "ok":
                status, _ = await probe.call(c, "POST", f"/api/queries/{body['query_id']}/answer", "setup",
                                             json={"participant_id": pid, "label": rng.choice(body["labels"])})
                done += status == 200
            else:
                pid = None
    return done


def big_results(ctx: Ctx) -> Report:
    a = ctx.args
    path_q = f"?limit={a.results_limit}"

    async def run(probe: Probe, small: int, big: int, token: str) -> dict[str, float]:
        marks: dict[str, float] = {}
        stop = asyncio.Event()

        async def poller() -> None:
            async with probe.client(headers={"Authorization": f"Bearer {token}"}) as c:
                while not stop.is_set():
                    t0 = probe.now()
                    await probe.call(c, "GET", f"/api/experiments/{big}/results{path_q}", "results")
                    await asyncio.sleep(max(0.0, 1.0 - (probe.now() - t0)))

        async with background(probe, [(small, a.participants, "")], a.think):
            await asyncio.sleep(a.warmup)
            marks["without"] = probe.now()
            await asyncio.sleep(a.phase_seconds)
            marks["with"] = probe.now()
            task = asyncio.create_task(poller())
            await asyncio.sleep(a.phase_seconds)
            marks["end"] = probe.now()
            stop.set()
            await task
        return marks

    with ctx.serve(ctx.sqlite("results")) as probe:
        small, _ = asyncio.run(create(probe, SMALL_ITEMS, name="small"))
        t0 = time.perf_counter()
        big, token = asyncio.run(create(probe, [f"caption {i}" for i in range(a.big_items)], name="big"))
        create_s = time.perf_counter() - t0
        answered = asyncio.run(answer_some(probe, big, a.big_answers))
        marks = asyncio.run(run(probe, small, big, token))
    res = probe.window("results", marks["with"], marks["end"])
    rs = stats(res)
    sizes = [s.nbytes for s in res if s.status == 200]
    rows, data = [], {"big_items": a.big_items, "big_answers": answered, "create_seconds": create_s,
                      "results": rs, "results_bytes": max(sizes) if sizes else None}
    for name, (t0, t1) in {"participants without the poller": (marks["without"], marks["with"]),
                           "participants with the poller": (marks["with"], marks["end"])}.items():
        p = stats(probe.window(PARTICIPANT_KINDS, t0, t1))
        rows.append([name, p["n"], ms(p["p50"]), ms(p["p99"]), ms(p["max"]), statuses(p)])
        data[name] = p
    rows.append([f"owner's results?limit={a.results_limit} (body {data['results_bytes'] or 0:,} bytes)", rs["n"],
                 ms(rs["p50"]), ms(rs["p99"]), ms(rs["max"]), statuses(rs)])
    return Report(f"big-results: the owner polls results of a {a.big_items:,}-item experiment "
                  f"({answered} answers) every second",
                  ["requests", "n", "p50 (ms)", "p99 (ms)", "max (ms)", "statuses"], rows,
                  conditions(ctx, "sqlite", f"{load_text(ctx)} on a {len(SMALL_ITEMS)}-item experiment; "
                             f"{a.phase_seconds:g} s per phase"), data)


def starvation(ctx: Ctx) -> Report:
    a = ctx.args

    async def run(probe: Probe, eid: int) -> dict[str, Any]:
        states: Counter[str] = Counter()
        async with probe.client() as c:
            for _ in range(a.walkers):  # ask once, never answer
                pid = (await probe.call(c, "POST", "/api/participants", "register"))[1]["participant_id"]
                status, body = await probe.call(c, "POST", f"/api/experiments/{eid}/queries", "walker",
                                                json={"participant_id": pid})
                states[body.get("state", str(status)) if isinstance(body, dict) else str(status)] += 1
            late = (await probe.call(c, "POST", "/api/participants", "register"))[1]["participant_id"]
            t0, asks, late_states = probe.now(), 0, Counter()
            while probe.now() - t0 < a.starve_seconds:
                t_ask = probe.now()
                status, body = await probe.call(c, "POST", f"/api/experiments/{eid}/queries", "ask",
                                                json={"participant_id": late})
                asks += 1
                state = body.get("state", str(status)) if isinstance(body, dict) else str(status)
                late_states[state] += 1
                if state == "ok":
                    return {"served_after_s": probe.now() - t0, "asks": asks, "walkers": dict(states),
                            "late_states": dict(late_states)}
                await asyncio.sleep(max(0.0, 1.0 - (probe.now() - t_ask)))
        return {"served_after_s": None, "asks": asks, "walkers": dict(states), "late_states": dict(late_states)}

    env = {"PUREBANDITS_QUERY_EXPIRY_SECONDS": "300"}  # the service's default (start_server sets 600)
    with ctx.serve(ctx.sqlite("starve"), env) as probe:
        eid, _ = asyncio.run(create(probe, [f"caption {i}" for i in range(a.starve_items)],
                                    algorithm="successive_elimination", params={}))
        res = asyncio.run(run(probe, eid))
    served = res["served_after_s"]
    rows = [["abandoned queries (walkers' states)", ", ".join(f"{k}: {v}" for k, v in res["walkers"].items())],
            ["a new participant, asking once a second, is served after (s)",
             secs(served) if served is not None else f"> {a.starve_seconds:g}"],
            ["its asks (states)", ", ".join(f"{k}: {v}" for k, v in res["late_states"].items())]]
    return Report(f"starvation: {a.walkers} participants ask a successive_elimination experiment of "
                  f"{a.starve_items} items once and walk away", ["measure", "value"], rows,
                  conditions(ctx, "sqlite", "query expiry 300 s (default), reissue_after_seconds default (20 s in "
                             "the new code)"), res)


def mint(ctx: Ctx) -> Report:
    a = ctx.args

    async def run(probe: Probe, eid: int) -> dict[str, Any]:
        minted = asks_ok = 0
        async with probe.client() as c:
            t0 = probe.now()
            while probe.now() - t0 < a.mint_seconds:
                status, body = await probe.call(c, "POST", "/api/participants", "register")
                if status != 201:
                    continue
                minted += 1
                status, body = await probe.call(c, "POST", f"/api/experiments/{eid}/queries", "ask",
                                                json={"participant_id": body["participant_id"]})
                asks_ok += status == 200 and body.get("state") == "ok"
            seconds = probe.now() - t0
        return {"seconds": seconds, "minted": minted, "asks_served": asks_ok, "asks_served_per_s": asks_ok / seconds}

    with ctx.serve(ctx.sqlite("mint"), DEFAULT_RATES) as probe:
        eid, _ = asyncio.run(create(probe, SMALL_ITEMS))
        cpu0 = process_cpu_seconds(probe.pid)
        res = asyncio.run(run(probe, eid))
        res["server_cpu_s"] = process_cpu_seconds(probe.pid) - cpu0
    reg = stats([s for s in probe.samples if s.kind == "register"])
    res["register"] = reg
    rows = [["asks served per second", f"{res['asks_served_per_s']:.1f}"],
            ["participant ids minted", res["minted"]],
            ["mint requests", f"{reg['n']} ({', '.join(f'{k}: {v}' for k, v in reg['statuses'].items())})"],
            ["server CPU (s)", f"{res['server_cpu_s']:.1f}"]]
    return Report(f"mint: one client mints ids and asks once with each, for {a.mint_seconds:g} s",
                  ["measure", "value"], rows,
                  conditions(ctx, "sqlite", "default rate limits ("
                             + ", ".join(f"{k}={v}" for k, v in DEFAULT_RATES.items()) + "), one sequential client"),
                  res)


def memory(ctx: Ctx) -> Report:
    a = ctx.args
    body = big_body(a.big_items)

    async def run(probe: Probe) -> list[dict[str, Any]]:
        pid = probe.pid
        def rss() -> dict[str, float]:
            return {"rss_mib": rss_kib(pid) / 1024, "server_mib": rss_kib(pid, descendants=False) / 1024}

        points = [{"when": "start", **rss()}]
        async with probe.client() as c:
            for k in range(a.memory_experiments):
                t0 = probe.now()
                status, created = await probe.call(c, "POST", "/api/experiments", "create", content=body,
                                                   headers={"Content-Type": "application/json"})
                if status != 201:
                    raise RuntimeError(f"create failed: {status} {created}")
                participant_id = (await probe.call(c, "POST", "/api/participants", "register"))[1]["participant_id"]
                _, q = await probe.call(c, "POST", f"/api/experiments/{created['id']}/queries", "ask",
                                        json={"participant_id": participant_id})
                points.append({"when": f"after experiment {k + 1} (create + one ask)", **rss(),
                               "seconds": probe.now() - t0, "ask_state": (q or {}).get("state")})
        await asyncio.sleep(a.settle_seconds)
        points.append({"when": f"{a.settle_seconds:g} s later", **rss()})
        return points

    with ctx.serve(ctx.sqlite("memory"), DEFAULT_RATES) as probe:
        points = asyncio.run(run(probe))
    rows = [[p["when"], f"{p['server_mib']:.0f}", f"{p['rss_mib']:.0f}", secs(p.get("seconds")),
             p.get("ask_state", "")] for p in points]
    return Report(f"memory: server RSS with {a.memory_experiments} experiments of {a.big_items:,} items",
                  ["when", "server RSS (MiB)", "with its children (MiB)", "create + ask (s)", "ask state"], rows,
                  conditions(ctx, "sqlite", "default settings (cache bounds, rate limits); VmRSS from "
                             "/proc/<pid>/status of the server process, and of it with its children (the "
                             "background compile of every learner, while it runs)"), {"points": points})


SCENARIOS: dict[str, Callable[[Ctx], Report]] = {
    "sqlite-lock": sqlite_lock, "pg-rowlock": pg_rowlock, "pg-hang": pg_hang, "big-create": big_create,
    "big-results": big_results, "starvation": starvation, "mint": mint, "memory": memory,
}


def _clean(x: Any) -> Any:
    """JSON-safe: NaN -> None, int keys (statuses) -> str."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--scenarios", default="all", help=f"comma list of {', '.join(SCENARIOS)}, or all")
    p.add_argument("--src", type=Path, default=None, help="serve from this source tree (default: this checkout)")
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    p.add_argument("--quick", action="store_true", help="short phases, to check the script runs (not a measurement): "
                   + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    p.add_argument("--participants", type=int, default=10, help="simulated participants of the background load")
    p.add_argument("--think", type=float, default=0.1, help="seconds a participant waits between rounds")
    p.add_argument("--workers", type=int, default=1, help="server worker processes")
    p.add_argument("--db-wait", type=float, default=2.0, help="PUREBANDITS_DB_WAIT_SECONDS (the new code's default)")
    p.add_argument("--pg-durable", action="store_true", help="throwaway PostgreSQL with fsync on (default off)")
    p.add_argument("--warmup", type=float, default=2.0, help="load before a fault starts")
    p.add_argument("--after", type=float, default=5.0, help="load after a fault ends")
    p.add_argument("--lock-seconds", type=float, default=10.0, help="sqlite-lock, pg-rowlock: how long the lock")
    p.add_argument("--stop-seconds", type=float, default=8.0, help="pg-hang: how long the cluster is stopped")
    p.add_argument("--phase-seconds", type=float, default=10.0, help="big-create, big-results: seconds per phase")
    p.add_argument("--big-items", type=int, default=100_000, help="items of a big experiment")
    p.add_argument("--big-answers", type=int, default=200, help="big-results: answers on the big experiment")
    p.add_argument("--results-limit", type=int, default=50, help="big-results: ?limit= of the results call")
    p.add_argument("--walkers", type=int, default=20, help="starvation: participants who ask once and leave")
    p.add_argument("--starve-items", type=int, default=20, help="starvation: items of the experiment")
    p.add_argument("--starve-seconds", type=float, default=90.0, help="starvation: give up after")
    p.add_argument("--mint-seconds", type=float, default=15.0)
    p.add_argument("--memory-experiments", type=int, default=5)
    p.add_argument("--settle-seconds", type=float, default=30.0, help="memory: RSS again after this long")
    if "--quick" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(**QUICK)
    args = p.parse_args(argv)
    names = list(SCENARIOS) if args.scenarios == "all" else args.scenarios.split(",")
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    results: dict[str, Any] = {}
    for name in names:
        print(f"-- {name} ...", file=sys.stderr, flush=True)
        with ExitStack() as stack:
            ctx = Ctx(args, stack, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="probe-"))))
            report = SCENARIOS[name](ctx)
        print(report.markdown(), flush=True)
        results[name] = {"title": report.title, "conditions": report.conditions, "headers": report.headers,
                         "rows": report.rows, "data": report.data}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {"source": str(args.src or ROOT / "src"), "cpus": os.cpu_count(), "python": platform.python_version(),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
        args.out.write_text(json.dumps(_clean({**meta, "scenarios": results}), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
