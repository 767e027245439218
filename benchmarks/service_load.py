"""Load test of the crowdsourcing service: N concurrent simulated participants on loopback.

Starts ``purebandits serve`` as a subprocess (SQLite file and/or a throwaway PostgreSQL
server), creates an experiment from caption contest 559, and lets N participants (asyncio
tasks sharing one ``httpx.AsyncClient``) ask for a query and answer it with a label drawn
from that caption's public vote counts (a bootstrapped caption contest), as fast as they can,
for a fixed time after a warm-up. Reports answered queries per second and the p50 / p99
latency of ask and answer, per backend.

    PYTHONPATH=src python benchmarks/service_load.py --participants 100 --seconds 20
    PYTHONPATH=src python benchmarks/service_load.py --backends sqlite --participants 100

The client runs on the same machine as the server, so the figures include the client's
own CPU use (on a 2-core machine the client and the server share the cores). By default each
participant speaks HTTP/1.1 over one keep-alive connection with a minimal hand-written client
(``--client raw``, on uvloop when installed): httpx needed ~3 ms of CPU per request and, at
100 participants, saturated a core by itself long before the server did. ``--client httpx``
keeps the old client for comparison.

Participants come and go as on a real contest: after ``--churn`` answers (default 30), or
when told ``exhausted`` (nothing more for them now), a simulated participant registers a new
id and goes on as a new visitor, so the repeat policy
(an item at most once per participant while unseen items remain) holds without running them
out of captions. ``--learners 2`` runs lil'UCB and random sampling side by side at 50/50.
``--src DIR`` serves from another source tree (for example a ``git worktree`` of the
previous commit), to compare with the previous code in the same run; only fields that code
knows are sent (``--learners 1 --repeats ''``).

    PYTHONPATH=src python benchmarks/service_load.py --participants 100 --learners 2
    git worktree add /tmp/prev 6b96d6e
    PYTHONPATH=src python benchmarks/service_load.py --src /tmp/prev/src --repeats ''
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np

from purebandits.instances.real import caption_contest

ROOT = Path(__file__).resolve().parents[1]
LABELS = ["unfunny", "somewhat funny", "funny"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db_url: str, workers: int, src: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Serve ``db_url`` from ``src`` (default: this checkout) with the rate limits off; ``env`` adds or
    overrides ``PUREBANDITS_*`` variables."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(src or ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PUREBANDITS_ASK_RATE_PER_SECOND": "0",
           "PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0", "PUREBANDITS_CREATE_RATE_PER_SECOND": "0",
           "PUREBANDITS_QUERY_EXPIRY_SECONDS": "600", **(env or {})}
    env.update({k: v for k, v in os.environ.items() if k.startswith("PUREBANDITS_")})
    proc = subprocess.Popen([sys.executable, "-m", "purebandits.cli", "serve", "--db", db_url, "--port", str(port),
                             "--workers", str(workers), "--no-access-log", "--log-level", "warning"], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants (Linux /proc), 0 if unavailable.

    With ``--workers N`` the server pid is uvicorn's supervisor and the work is in its worker
    processes, which a parent's ``cutime`` only counts once they have exited.
    """
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, own CPU seconds)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK"))
    if pid not in stats:
        return 0.0
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats[current][1]
        todo.extend(child for child, (parent, _) in stats.items() if parent == current)
    return total


class Poster(Protocol):
    async def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]: ...

    async def aclose(self) -> None: ...


class RawClient:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads ``Content-Length`` responses.

    Just enough HTTP for this benchmark (the server always sends ``Content-Length``), so the
    load generator costs a small fraction of what the server does per request.
    """

    def __init__(self, url: str) -> None:
        hostport = url.split("://", 1)[1].rstrip("/")
        self.host, _, port = hostport.partition(":")
        self.port = int(port or 80)
        self.head = f"Host: {hostport}\r\nContent-Type: application/json\r\n".encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        data = json.dumps(body).encode() if body is not None else b""
        self.writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\n" + self.head
                          + b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"response without Content-Length: {head!r}")
        payload = await self.reader.readexactly(length)
        return status, json.loads(payload) if payload else None

    async def aclose(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with suppress(OSError):
                await self.writer.wait_closed()


class HttpxClient:
    """The same interface over ``httpx.AsyncClient`` (one per participant)."""

    def __init__(self, url: str) -> None:
        self.client = httpx.AsyncClient(base_url=url, timeout=30, verify=False)

    async def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        r = await self.client.post(path, json=body)
        return r.status_code, r.json()

    async def aclose(self) -> None:
        await self.client.aclose()


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run_load(url: str, n: int, seconds: float, warmup: float, seed: int, pace: float = 0.0,
                   server_pid: int | None = None, client_kind: str = "raw", learners: int = 1,
                   repeats: str = "never", churn: int = 30) -> dict:
    """Closed loop (pace = 0: each participant asks again as soon as it answered) or paced
    (each participant starts one ask+answer every 1/pace seconds, with a random phase; so the
    offered load is n * pace answers per second)."""
    cc = caption_contest("559")
    probs = cc.votes / cc.votes.sum(axis=1, keepdims=True)  # columns unfunny, somewhat, funny
    async with httpx.AsyncClient(base_url=url, timeout=30, verify=False) as client:
        spec: dict[str, Any] = {"name": "load test", "seed": seed,
                                "items": [{"id": str(i), "text": t} for i, t in enumerate(cc.captions)]}
        if learners == 1:
            spec.update(algorithm="lil_ucb", params={"delta": 0.05})
        else:
            spec["algorithms"] = [{"label": "LilUCB", "algorithm": "lil_ucb", "params": {"delta": 0.05}},
                                  {"label": "RandomSampling", "algorithm": "random_sampling"}]
        if repeats:
            spec["repeats"] = repeats
        r = await client.post("/api/experiments", json=spec)
        r.raise_for_status()
        eid = r.json()["id"]
        index = {str(i): i for i in range(cc.n_arms)}
        ask_lat: list[float] = []
        ans_lat: list[float] = []
        answered = 0
        errors = 0
        # one client (one keep-alive connection) per participant: one pool shared by N concurrent
        # tasks costs O(N) per request in httpcore and made the client the bottleneck; plain
        # http on loopback, so no TLS context (verify=False skips loading the CA bundle N times)
        factory = RawClient if client_kind == "raw" else HttpxClient
        clients: list[Poster] = [factory(url) for _ in range(n)]
        pids = [(await c.post("/api/participants"))[1]["participant_id"] for c in clients]
        visitors = n
        exhausted = 0
        t_start = time.perf_counter()
        t_measure = t_start + warmup
        t_end = t_measure + seconds
        cpu: dict[str, float] = {}

        async def sample_cpu() -> None:
            if server_pid is None:
                return
            await asyncio.sleep(max(0.0, t_measure - time.perf_counter()))
            cpu["start"], cpu["client_start"] = process_cpu_seconds(server_pid), time.process_time()
            await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
            cpu["end"], cpu["client_end"] = process_cpu_seconds(server_pid), time.process_time()

        async def new_visitor(client: Poster, pid: str) -> str:
            """A new participant id for the next visitor (the old one on failure, counted as an error)."""
            nonlocal errors, visitors
            status, body = await client.post("/api/participants")
            if status != 201:
                errors += 1
                return pid
            visitors += 1
            return body["participant_id"]

        async def participant(k: int) -> None:
            nonlocal answered, errors, visitors, exhausted
            client, pid = clients[k], pids[k]
            mine = 0
            rng = np.random.default_rng(seed * 1000 + k)
            next_start = t_start + (rng.random() / pace if pace > 0 else 0.0)
            while True:
                if pace > 0:
                    delay = next_start - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    next_start += 1.0 / pace
                t0 = time.perf_counter()
                if t0 >= t_end:
                    return
                status, body = await client.post(f"/api/experiments/{eid}/queries", {"participant_id": pid})
                t1 = time.perf_counter()
                if status == 200 and body["state"] == "exhausted":  # "come back later": this visitor leaves
                    exhausted += 1
                    pid, mine = await new_visitor(client, pid), 0
                    continue
                if status != 200 or body["state"] != "ok":
                    errors += 1
                    await asyncio.sleep(0.05)
                    continue
                arm = index[body["item"]["id"]]
                label = LABELS[int(rng.choice(3, p=probs[arm]))]
                status, _ = await client.post(f"/api/queries/{body['query_id']}/answer",
                                              {"participant_id": pid, "label": label})
                t2 = time.perf_counter()
                if status != 200:
                    errors += 1
                    continue
                if t0 >= t_measure and t2 <= t_end:
                    ask_lat.append(t1 - t0)
                    ans_lat.append(t2 - t1)
                    answered += 1
                mine += 1
                if churn and mine >= churn:  # this visitor leaves; a new one arrives
                    pid, mine = await new_visitor(client, pid), 0

        await asyncio.gather(sample_cpu(), *(participant(k) for k in range(n)))
        for c in clients:
            await c.aclose()
    ask = np.array(ask_lat) * 1000
    ans = np.array(ans_lat) * 1000
    return {
        "visitors": visitors,
        "exhausted": exhausted,
        "answers_per_s": answered / seconds,
        "answered": answered,
        "errors": errors,
        "ask_p50": float(np.percentile(ask, 50)) if len(ask) else float("nan"),
        "ask_p99": float(np.percentile(ask, 99)) if len(ask) else float("nan"),
        "answer_p50": float(np.percentile(ans, 50)) if len(ans) else float("nan"),
        "answer_p99": float(np.percentile(ans, 99)) if len(ans) else float("nan"),
        "server_cpu_ms_per_answer": (1000 * (cpu["end"] - cpu["start"]) / answered
                                     if answered and "end" in cpu else float("nan")),
        "client_cpu_ms_per_answer": (1000 * (cpu["client_end"] - cpu["client_start"]) / answered
                                     if answered and "end" in cpu else float("nan")),
    }


def run(coro: Any) -> Any:
    """Run ``coro`` on uvloop when it is installed (a cheaper event loop for the load generator)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="sqlite,postgres", help="comma list of sqlite, postgres")
    p.add_argument("--participants", type=int, default=100)
    p.add_argument("--seconds", type=float, default=20.0, help="measured time")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--workers", type=int, default=1, help="server worker processes")
    p.add_argument("--pg-url", default=os.environ.get("PUREBANDITS_TEST_PG_URL"),
                   help="admin URL of a PostgreSQL server (default: start a throwaway one)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--client", choices=["raw", "httpx"], default="raw",
                   help="load generator: minimal keep-alive HTTP/1.1 client on uvloop (default) or httpx")
    p.add_argument("--pace", type=float, default=0.0,
                   help="answers per second per participant (0: closed loop, as fast as possible)")
    p.add_argument("--learners", type=int, choices=[1, 2], default=1,
                   help="1: lil'UCB; 2: lil'UCB and random sampling side by side at 50/50")
    p.add_argument("--repeats", default="never",
                   help="the experiment's repeat policy (never, not_consecutive; '' to send none, for older code)")
    p.add_argument("--churn", type=int, default=30, help="answers per visitor before a new one arrives (0: never)")
    p.add_argument("--pg-fast", action="store_true",
                   help="throwaway PostgreSQL with fsync, synchronous_commit and full_page_writes off (not durable; "
                        "the default is PostgreSQL's durable settings)")
    p.add_argument("--src", type=Path, default=None, help="serve from this source tree (default: this checkout)")
    args = p.parse_args(argv)
    rows = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for backend in args.backends.split(","):
            if backend == "sqlite":
                db = f"sqlite:///{tmp / 'load.sqlite'}"
            elif backend == "postgres":
                from purebandits.testing.postgres import create_database, temporary_postgres

                admin = args.pg_url or stack.enter_context(temporary_postgres(durable=not args.pg_fast))
                db = create_database(admin)
            else:
                raise SystemExit(f"unknown backend {backend!r}")
            proc, url = start_server(db, args.workers, args.src)
            try:
                res = run(run_load(url, args.participants, args.seconds, args.warmup, args.seed, args.pace,
                                   server_pid=proc.pid, client_kind=args.client, learners=args.learners,
                                   repeats=args.repeats, churn=args.churn))
            finally:
                stop_server(proc)
            rows.append((backend, res))
            print(f"{backend}: {res}", file=sys.stderr)
    mode = f"paced at {args.pace:g} answers/s each" if args.pace > 0 else "closed loop"
    load = os.getloadavg()[0]
    print(f"\n{args.participants} participants ({mode}, a new visitor every {args.churn} answers), "
          f"{args.learners} learner(s), repeats={args.repeats or 'unset'}, source {args.src or ROOT / 'src'}, "
          f"PostgreSQL {'NOT durable (fsync off)' if args.pg_fast else 'durable (fsync, synchronous_commit on)'}"
          f"{' (given by --pg-url)' if args.pg_url else ''}, "
          f"{args.workers} worker(s), {args.client} client, "
          f"{args.seconds:g} s measured after {args.warmup:g} s warm-up; {os.cpu_count()} CPUs, load average "
          f"{load:.1f} at the end, Python {platform.python_version()}\n")
    print("| backend | answers/s | ask p50 (ms) | ask p99 (ms) | answer p50 (ms) | answer p99 (ms) | errors "
          "| exhausted | server CPU ms / answer | client CPU ms / answer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for backend, r in rows:
        print(f"| {backend} | {r['answers_per_s']:.0f} | {r['ask_p50']:.1f} | {r['ask_p99']:.1f} | "
              f"{r['answer_p50']:.1f} | {r['answer_p99']:.1f} | {r['errors']} | {r['exhausted']} | "
              f"{r['server_cpu_ms_per_answer']:.2f} | "
              f"{r['client_cpu_ms_per_answer']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
