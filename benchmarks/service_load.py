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

``--scenario contest`` is a contest at full size: 7,500 items (the captions of the bundled
contests 558 and 512, 3,925 + the first 3,575, each answered from its own public vote
counts), the service's default learner (``--algorithms default``: the spec names none, so the
service picks KL-RandLUCB with its pinned parameters) and lil-KLUCB (``lil_kl_ucb``, library
defaults, so form='exact'), one experiment per learner, each run separately, and one owner's
dashboard polling the results as ``static/dashboard.js`` does (one page of 30 rows every
second, history and activity every 5 s; ``--dashboards 0`` turns it off). ``--prev-src DIR``
runs every configuration with this checkout and then with DIR, in one invocation, and prints
them side by side:

    git worktree add /tmp/prev_sl HEAD
    PYTHONPATH=src python benchmarks/service_load.py --scenario contest --pace 5 --prev-src /tmp/prev_sl/src
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


#: bundled contests whose captions make up the contest-size scenario, in this order
CONTEST_SOURCES = ("558", "512")
CONTEST_ITEMS = 7_500


def scenario_items(scenario: str, n_items: int = CONTEST_ITEMS) -> tuple[list[str], np.ndarray]:
    """(caption texts, per-item probabilities of unfunny / somewhat funny / funny) of a scenario:
    ``559`` its 138 captions; ``contest`` the first ``n_items`` captions of contests 558 and 512."""
    sources = ["559"] if scenario == "559" else list(CONTEST_SOURCES)
    texts: list[str] = []
    votes: list[np.ndarray] = []
    for contest in sources:
        cc = caption_contest(contest)
        texts.extend(cc.captions)
        votes.append(cc.votes)
    v = np.concatenate(votes).astype(float)
    if scenario != "559":
        if len(texts) < n_items:
            raise SystemExit(f"the bundled contests have {len(texts)} captions, fewer than {n_items}")
        texts, v = texts[:n_items], v[:n_items]
    return texts, v / v.sum(axis=1, keepdims=True)  # columns unfunny, somewhat, funny


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


async def run_load(url: str | list[str], n: int, seconds: float, warmup: float, seed: int, pace: float = 0.0,
                   server_pid: int | list[int] | None = None, client_kind: str = "raw", learners: int = 1,
                   repeats: str = "never", churn: int = 30, scenario: str = "559", algorithm: str = "lil_ucb",
                   dashboards: int = 0) -> dict:
    """Closed loop (pace = 0: each participant asks again as soon as it answered) or paced
    (each participant starts one ask+answer every 1/pace seconds, with a random phase; so the
    offered load is n * pace answers per second). ``algorithm``: the learner of a one-learner
    experiment (``default``: none named, the service's default); ``dashboards`` owners poll the
    results meanwhile. Several ``url`` (server processes on one database): participant k speaks to
    ``url[k % len(url)]``, the experiment is created and polled on the first."""
    urls = [url] if isinstance(url, str) else list(url)
    url = urls[0]
    pids_cpu = [] if server_pid is None else [server_pid] if isinstance(server_pid, int) else list(server_pid)
    texts, probs = scenario_items(scenario)
    async with httpx.AsyncClient(base_url=url, timeout=30, verify=False) as client:
        spec: dict[str, Any] = {"name": "load test", "seed": seed,
                                "items": [{"id": str(i), "text": t} for i, t in enumerate(texts)]}
        if learners == 1 and algorithm == "lil_ucb":
            spec.update(algorithm="lil_ucb", params={"delta": 0.05})
        elif learners == 1 and algorithm != "default":
            spec["algorithm"] = algorithm  # its library defaults (and the service's default delta)
        else:
            spec["algorithms"] = [{"label": "LilUCB", "algorithm": "lil_ucb", "params": {"delta": 0.05}},
                                  {"label": "RandomSampling", "algorithm": "random_sampling"}]
        if repeats:
            spec["repeats"] = repeats
        r = await client.post("/api/experiments", json=spec)
        r.raise_for_status()
        eid, owner_token = r.json()["id"], r.json()["owner_token"]
        index = {str(i): i for i in range(len(texts))}
        ask_lat: list[float] = []
        ans_lat: list[float] = []
        answered = 0
        errors = 0
        # one client (one keep-alive connection) per participant: one pool shared by N concurrent
        # tasks costs O(N) per request in httpcore and made the client the bottleneck; plain
        # http on loopback, so no TLS context (verify=False skips loading the CA bundle N times)
        factory = RawClient if client_kind == "raw" else HttpxClient
        clients: list[Poster] = [factory(urls[k % len(urls)]) for k in range(n)]
        pids = [(await c.post("/api/participants"))[1]["participant_id"] for c in clients]
        visitors = n
        exhausted = 0
        t_start = time.perf_counter()
        t_measure = t_start + warmup
        t_end = t_measure + seconds
        cpu: dict[str, float] = {}

        async def sample_cpu() -> None:
            if not pids_cpu:
                return
            await asyncio.sleep(max(0.0, t_measure - time.perf_counter()))
            cpu["start"], cpu["client_start"] = sum(map(process_cpu_seconds, pids_cpu)), time.process_time()
            await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
            cpu["end"], cpu["client_end"] = sum(map(process_cpu_seconds, pids_cpu)), time.process_time()

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

        poll_lat: list[float] = []
        chart_lat: list[float] = []

        async def dashboard() -> None:
            """One owner's dashboard (static/dashboard.js): a page of 30 rows every second, the history and
            the activity every 5 s."""
            nonlocal errors
            auth = {"Authorization": f"Bearer {owner_token}"}
            async with httpx.AsyncClient(base_url=url, timeout=30, verify=False, headers=auth) as owner:

                async def get(path: str, **params: Any) -> int:
                    # a browser retries a GET whose idle keep-alive connection the server closed meanwhile
                    # (uvicorn closes them after 5 s, the period of the chart fetches): so does this
                    for attempt in (0, 1):
                        try:
                            return (await owner.get(path, params=params)).status_code
                        except httpx.TransportError:
                            if attempt:
                                return 0
                    return 0

                last_charts = 0.0
                while time.perf_counter() < t_end:
                    t0 = time.perf_counter()
                    status = await get(f"/api/experiments/{eid}/results", limit=30, offset=0, sort="rank",
                                       order="asc", timeline="false")
                    t1 = time.perf_counter()
                    errors += status != 200
                    if t0 >= t_measure:
                        poll_lat.append(t1 - t0)
                    if t1 - last_charts >= 5.0:
                        last_charts = t1
                        rs = await asyncio.gather(get(f"/api/experiments/{eid}/history", max_points=500),
                                                  get(f"/api/experiments/{eid}/activity"))
                        errors += sum(x != 200 for x in rs)
                        if t1 >= t_measure:
                            chart_lat.append(time.perf_counter() - t1)
                    await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

        await asyncio.gather(sample_cpu(), *(participant(k) for k in range(n)),
                             *(dashboard() for _ in range(dashboards)))
        for c in clients:
            await c.aclose()
    ask = np.array(ask_lat) * 1000
    ans = np.array(ans_lat) * 1000
    both = np.concatenate([ask, ans])
    return {
        "poll_p50": float(np.percentile(poll_lat, 50)) * 1000 if poll_lat else float("nan"),
        "poll_max": float(np.max(poll_lat)) * 1000 if poll_lat else float("nan"),
        "charts_max": float(np.max(chart_lat)) * 1000 if chart_lat else float("nan"),
        "p99": float(np.percentile(both, 99)) if len(both) else float("nan"),
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
    p.add_argument("--scenario", choices=["559", "contest"], default="559",
                   help="559: caption contest 559 (138 captions, lil'UCB); contest: 7,500 captions of contests 558 "
                        "and 512, the default learner and lil-KLUCB, one owner's dashboard polling")
    p.add_argument("--algorithms", default=None,
                   help="comma list of one-learner experiments to run, each separately ('default': the service's "
                        "default learner); default lil_ucb, or default,lil_kl_ucb with --scenario contest")
    p.add_argument("--dashboards", type=int, default=None,
                   help="owners polling the results as the dashboard does (default 0, 1 with --scenario contest)")
    p.add_argument("--participants", type=int, default=100)
    p.add_argument("--seconds", type=float, default=20.0, help="measured time")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--workers", type=int, default=1, help="server worker processes")
    p.add_argument("--servers", type=int, default=1,
                   help="server processes (each with --workers), on different ports against one database: "
                        "participants are spread over them as a reverse proxy would")
    p.add_argument("--pg-url", default=os.environ.get("PUREBANDITS_TEST_PG_URL"),
                   help="admin URL of a PostgreSQL server (default: start a throwaway one)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--client", choices=["raw", "httpx"], default="raw",
                   help="load generator: minimal keep-alive HTTP/1.1 client on uvloop (default) or httpx")
    p.add_argument("--pace", type=float, default=0.0,
                   help="answers per second per participant (0: closed loop, as fast as possible)")
    p.add_argument("--learners", type=int, choices=[1, 2], default=1,
                   help="1: one learner (--algorithms); 2: lil'UCB and random sampling side by side at 50/50")
    p.add_argument("--repeats", default="never",
                   help="the experiment's repeat policy (never, not_consecutive; '' to send none, for older code)")
    p.add_argument("--churn", type=int, default=30, help="answers per visitor before a new one arrives (0: never)")
    p.add_argument("--pg-fast", action="store_true",
                   help="throwaway PostgreSQL with fsync, synchronous_commit and full_page_writes off (not durable; "
                        "the default is PostgreSQL's durable settings)")
    p.add_argument("--src", type=Path, default=None, help="serve from this source tree (default: this checkout)")
    p.add_argument("--prev-src", type=Path, default=None,
                   help="also run every configuration on this source tree (the previous code), right after")
    args = p.parse_args(argv)
    contest = args.scenario == "contest"
    algorithms = (args.algorithms or ("default,lil_kl_ucb" if contest else "lil_ucb")).split(",")
    if args.learners == 2:
        algorithms = ["lil_ucb+random_sampling"]
    dashboards = args.dashboards if args.dashboards is not None else int(contest)
    codes = [("this", args.src)] + ([("previous", args.prev_src)] if args.prev_src else [])
    rows = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        admin = None
        for backend in args.backends.split(","):
            for algorithm in algorithms:
                for code, src in codes:
                    if backend == "sqlite":
                        path = tmp / "load.sqlite"
                        for extra in ("", "-wal", "-shm"):
                            Path(f"{path}{extra}").unlink(missing_ok=True)
                        db = f"sqlite:///{path}"
                    elif backend == "postgres":
                        from purebandits.testing.postgres import create_database, temporary_postgres

                        if admin is None:
                            admin = args.pg_url or stack.enter_context(temporary_postgres(durable=not args.pg_fast))
                        db = create_database(admin)
                    else:
                        raise SystemExit(f"unknown backend {backend!r}")
                    load0 = os.getloadavg()[0]
                    servers = []
                    try:
                        for _ in range(args.servers):
                            servers.append(start_server(db, args.workers, src))
                        res = run(run_load([u for _, u in servers], args.participants, args.seconds, args.warmup,
                                           args.seed, args.pace, server_pid=[proc.pid for proc, _ in servers],
                                           client_kind=args.client, learners=args.learners,
                                           repeats=args.repeats, churn=args.churn, scenario=args.scenario,
                                           algorithm=algorithm, dashboards=dashboards))
                    finally:
                        for proc, _ in servers:
                            stop_server(proc)
                    res["load"] = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
                    rows.append((backend, algorithm, code, res))
                    print(f"{backend} {algorithm} {code}: {res}", file=sys.stderr)
    mode = f"paced at {args.pace:g} answers/s each" if args.pace > 0 else "closed loop"
    items = f"{CONTEST_ITEMS:,} captions of contests 558 + 512" if contest else "138 captions of contest 559"
    print(f"\n{args.participants} participants ({mode}, a new visitor every {args.churn} answers), {items}, "
          f"{dashboards} dashboard(s) polling, repeats={args.repeats or 'unset'}, source {args.src or ROOT / 'src'}"
          f"{f' against {args.prev_src}' if args.prev_src else ''}, "
          f"SQLite WAL synchronous=NORMAL, "
          f"PostgreSQL {'NOT durable (fsync off)' if args.pg_fast else 'durable (fsync, synchronous_commit on)'}"
          f"{' (given by --pg-url)' if args.pg_url else ''}, "
          f"{args.servers} server process(es) of {args.workers} worker(s) each, {args.client} client, "
          f"{args.seconds:g} s measured after {args.warmup:g} s warm-up; {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}\n")
    print("| backend | learner | code | load avg | answers/s | ask p50 / p99 (ms) | answer p50 / p99 (ms) "
          "| p99 all (ms) | errors | exhausted | results poll p50 / max (ms) | server CPU ms / answer "
          "| client CPU ms / answer |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for backend, algorithm, code, r in rows:
        poll = f"{r['poll_p50']:.0f} / {r['poll_max']:.0f}" if dashboards else "-"
        print(f"| {backend} | {algorithm} | {code} | {r['load']} | {r['answers_per_s']:.0f} | "
              f"{r['ask_p50']:.1f} / {r['ask_p99']:.1f} | {r['answer_p50']:.1f} / {r['answer_p99']:.1f} | "
              f"{r['p99']:.1f} | {r['errors']} | {r['exhausted']} | {poll} | "
              f"{r['server_cpu_ms_per_answer']:.2f} | {r['client_cpu_ms_per_answer']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
