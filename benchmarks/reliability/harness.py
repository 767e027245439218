"""Reliability harness for the crowdsourcing service: server processes, faults, a ledger client, the audit.

Building blocks shared by ``crash.py`` (SIGKILL the servers, restart PostgreSQL), ``sustained.py``
(long load with memory sampling) and the CI tests ``tests/service/test_reliability_*.py``:

- :class:`PgCluster`: a throwaway PostgreSQL cluster that can be stopped (``pg_ctl stop -m
  immediate``, i.e. a database crash) and started again.
- :class:`ServerProc`: one service process on a fixed loopback port, started either as
  ``purebandits serve`` (``mode="exec"``) or forked from a pre-imported zygote
  (``mode="fork"``, restarts in well under a second; see ``zygote.py``), killed with SIGKILL.
- :class:`Ledger` and :func:`run_participant`: simulated participants that ask and answer over
  HTTP and write down every query they were given, every answer they sent and which answers got
  a success response. An answer whose response was lost (connection reset, 503, server killed)
  is retried with the same query id and label until it is acknowledged: the API is idempotent,
  so a retry of an answer that was committed before the crash must return the same response and
  count once.
- :func:`audit`: compares the ledger with the database and the learners: every acknowledged
  answer is stored exactly once, nothing is stored that the client did not send, no answer is
  stored twice, per-item counts and reward sums equal the stored answers, each experiment's
  learner (as a live server reports it) equals a fresh replay of its event log, and so does the
  recommendation.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
ZYGOTE = Path(__file__).resolve().parent / "zygote.py"
LABELS = ["unfunny", "somewhat funny", "funny"]
REWARDS = {"unfunny": 0.0, "somewhat funny": 0.5, "funny": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ----------------------------------------------------------------------------- PostgreSQL
class PgCluster:
    """A private PostgreSQL cluster on a free loopback port that the harness can crash and restart."""

    def __init__(self) -> None:
        from purebandits.testing.postgres import PostgresUnavailable, find_pg_bin

        self.bin = find_pg_bin()
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self.prefix: list[str] = []
        if as_root:
            if shutil.which("runuser") is None:
                raise PostgresUnavailable("running as root without runuser")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.base = Path(tempfile.mkdtemp(prefix="purebandits-chaos-pg-"))
        self.data, self.sock, self.logfile = self.base / "data", self.base / "sock", self.base / "server.log"
        self.sock.mkdir()
        if as_root:
            shutil.chown(self.base, "postgres")
            shutil.chown(self.sock, "postgres")
            os.chmod(self.base, 0o700)
        self.port = free_port()
        self.env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--locale=C.UTF-8")
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        from purebandits.testing.postgres import PostgresUnavailable

        proc = subprocess.run([*self.prefix, str(self.bin / tool), *args], env=self.env, capture_output=True,
                              text=True, cwd=str(self.base))
        if proc.returncode != 0:
            log = self.logfile.read_text()[-2000:] if self.logfile.exists() else ""
            raise PostgresUnavailable(f"{tool} failed ({proc.returncode}): {proc.stderr.strip()} {log}")

    def start(self) -> None:
        # durable settings (fsync on): a database crash must not lose committed transactions
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.sock} "
                "-c max_connections=300")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.logfile), "-w", "-t", "60", "start")

    def stop(self, mode: str = "immediate") -> None:
        """``immediate``: the postmaster kills every backend without a checkpoint (a crash; recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def create_database(self) -> str:
        from purebandits.testing.postgres import create_database

        return create_database(self.admin_url)

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                            "stop"], env=self.env, capture_output=True, cwd=str(self.base))
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PgCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- server processes
class Zygote:
    """The pre-imported forking parent of ``zygote.py`` (one per harness run)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=_env(), text=True, bufsize=1)
        self._lock = threading.Lock()
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line or not json.loads(line).get("ready"):
            raise RuntimeError("zygote did not start")

    def spawn(self, port: int, env: dict[str, str], log: Path) -> int:
        with self._lock:
            self.proc.stdin.write(json.dumps({"port": port, "env": env, "log": str(log)}) + "\n")  # type: ignore
            self.proc.stdin.flush()  # type: ignore[union-attr]
            return int(json.loads(self.proc.stdout.readline())["pid"])  # type: ignore[union-attr]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ServerProc:
    """One service process on a fixed loopback port (the same port across restarts)."""

    def __init__(self, db_url: str, log_dir: Path, *, mode: str = "fork", zygote: Zygote | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.db_url, self.log_dir, self.mode, self.zygote = db_url, Path(log_dir), mode, zygote
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {"PUREBANDITS_DATABASE_URL": db_url, "PUREBANDITS_ASK_RATE_PER_SECOND": "0",
                    "PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0",
                    "PUREBANDITS_CREATE_RATE_PER_SECOND": "0", "PUREBANDITS_QUERY_EXPIRY_SECONDS": "3600",
                    **(env or {})}
        self.pid: int | None = None
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.kills = 0
        self.log = self.log_dir / f"server-{self.port}.log"

    def start(self) -> None:
        """Launch (does not wait: see :meth:`wait_ready`)."""
        self.starts += 1
        if self.mode == "fork":
            assert self.zygote is not None
            self.pid = self.zygote.spawn(self.port, self.env, self.log)
        else:
            fh = open(self.log, "ab")
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "purebandits.cli", "serve", "--db", self.db_url, "--port", str(self.port),
                 "--no-access-log", "--log-level", "warning"],
                env={**_env(), **self.env}, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            fh.close()
            self.pid = self.popen.pid

    def alive(self) -> bool:
        if self.pid is None:
            return False
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)

    def wait_ready(self, timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing, open transactions die with the process."""
        if self.pid is not None and self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.kills += 1
            if self.popen is not None:
                self.popen.wait()
            else:
                deadline = time.monotonic() + 10
                while pid_alive(self.pid) and time.monotonic() < deadline:
                    time.sleep(0.01)

    def stop(self) -> None:
        if self.pid is not None and self.alive():
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.alive():
                os.kill(self.pid, signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()
        self.pid = None

    def rss_kb(self) -> int | None:
        """Resident memory of the server process (``VmRSS`` in /proc), or None."""
        if self.pid is None:
            return None
        try:
            with open(f"/proc/{self.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None


def ensure_ready(servers: list[ServerProc], timeout: float = 120.0) -> None:
    for s in servers:
        for _ in range(5):
            if s.wait_ready(timeout):
                break
            s.stop()
            s.start()
        else:
            raise RuntimeError(f"server on port {s.port} does not come up; see {s.log}")


# ----------------------------------------------------------------------------- the client ledger
@dataclass
class Ledger:
    """What the simulated participants saw: queries, answers sent, answers acknowledged, every response."""

    asked: dict[str, tuple[int, str]] = field(default_factory=dict)  # qid -> (experiment, participant)
    sent: dict[str, str] = field(default_factory=dict)  # qid -> label (sent at least once)
    acked: dict[str, str] = field(default_factory=dict)  # qid -> label of the success response
    in_doubt: set[str] = field(default_factory=set)  # answers whose first attempt got no success response
    status: Counter = field(default_factory=Counter)  # (endpoint, status) -> n ; status "conn" = transport error
    bad: list[str] = field(default_factory=list)  # responses that break the contract (5xx other than 503, ...)
    r503: list[tuple[float, str]] = field(default_factory=list)  # (time, body) of every 503
    latencies: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    acked_at: list[float] = field(default_factory=list)

    def record(self, endpoint: str, t0: float, t1: float, resp: httpx.Response | None) -> None:
        code = "conn" if resp is None else resp.status_code
        self.status[(endpoint, code)] += 1
        if resp is None:
            return
        self.latencies[endpoint].append((t0, t1 - t0))
        if resp.status_code == 503:
            self.r503.append((t1, resp.text))
            try:
                # "database unavailable ...", "busy: ...", "experiment N is being verified after a restart ...": a
                # sentence that says why, and when to come back
                ok = len(str(resp.json()["detail"])) >= 10 and resp.headers.get("retry-after")
            except ValueError:
                ok = False
            if not ok:
                self.bad.append(f"{endpoint}: 503 without the clear message / Retry-After: {resp.text[:200]}")
        elif resp.status_code >= 500:
            self.bad.append(f"{endpoint}: {resp.status_code} {resp.text[:300]}")

    def summary(self) -> dict[str, Any]:
        return {"queries": len(self.asked), "answers_sent": len(self.sent), "answers_acked": len(self.acked),
                "answers_in_doubt": len(self.in_doubt),
                "status": {f"{e} {c}": n for (e, c), n in sorted(self.status.items(), key=str)},
                "contract_violations": len(self.bad)}


class MiniResponse:
    """The parts of an ``httpx.Response`` the participants use."""

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class MiniTransportError(Exception):
    """Connection refused / reset / closed before a full response."""


class MiniClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams (one connection, one request at a time).

    httpx costs about a millisecond of client CPU per request; with hundreds of participants in
    one process on a 2-core machine the load generator, not the server, became the bottleneck.
    This client only does what the participants need: POST JSON, read a Content-Length body.
    """

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._host: tuple[str, int] | None = None

    async def __aenter__(self) -> MiniClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None

    async def post(self, url: str, json: Any = None) -> MiniResponse:  # noqa: A002
        try:
            return await asyncio.wait_for(self._post(url, json), self.timeout)
        except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
            await self.aclose()
            raise MiniTransportError(repr(exc)) from None

    async def _post(self, url: str, body: Any) -> MiniResponse:
        from urllib.parse import urlsplit

        u = urlsplit(url)
        host = (u.hostname or "127.0.0.1", int(u.port or 80))
        if self._conn is None or self._host != host:
            await self.aclose()
            self._conn = await asyncio.open_connection(*host)
            self._host = host
        reader, writer = self._conn
        data = b"" if body is None else json.dumps(body).encode()
        writer.write(f"POST {u.path} HTTP/1.1\r\nHost: {host[0]}:{host[1]}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionResetError("connection closed")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        content = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.aclose()
        return MiniResponse(status, headers, content)


RETRYABLE = (httpx.TransportError, MiniTransportError)


async def _post(client: httpx.AsyncClient, servers: list[str], path: str, body: dict | None, ledger: Ledger,
                endpoint: str, rng: random.Random) -> httpx.Response | None:
    url = servers[rng.randrange(len(servers))] + path
    t0 = time.perf_counter()
    try:
        resp = await client.post(url, json=body)
    except RETRYABLE:
        resp = None
    ledger.record(endpoint, t0, time.perf_counter(), resp)
    return resp


async def run_participant(k: int, servers: list[str], experiments: list[int], ledger: Ledger, stop: asyncio.Event,
                          *, seed: int = 0, pace: float = 0.0, answer_prob: float = 1.0,
                          final_deadline: float | None = None, label_probs: dict | None = None,
                          client_kind: str = "httpx") -> None:
    """One participant: ask, answer (retrying lost answers with the same query id), repeat until ``stop``.

    ``pace`` > 0: start one ask+answer every ``1/pace`` seconds; 0: as fast as possible.
    ``answer_prob`` < 1 leaves some queries unanswered (they stay pending / expire).
    After ``stop`` the participant still finishes the answer it is retrying (until ``final_deadline``).
    """
    rng = random.Random(seed * 100_003 + k)
    eid = experiments[k % len(experiments)]
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
    client_cm: Any = (MiniClient() if client_kind == "mini" else
                      httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=5.0), limits=limits, verify=False))
    async with client_cm as client:
        pid = None
        while pid is None and not stop.is_set():
            r = await _post(client, servers, "/api/participants", None, ledger, "participant", rng)
            if r is not None and r.status_code == 201:
                pid = r.json()["participant_id"]
            else:
                await asyncio.sleep(0.1 + 0.2 * rng.random())
        next_start = time.perf_counter() + (rng.random() / pace if pace > 0 else 0.0)
        while not stop.is_set():
            if pace > 0:
                delay = next_start - time.perf_counter()
                if delay > 0:
                    try:
                        await asyncio.wait_for(stop.wait(), delay)
                        return
                    except TimeoutError:
                        pass
                next_start = max(next_start + 1.0 / pace, time.perf_counter() - 1.0)
            r = await _post(client, servers, f"/api/experiments/{eid}/queries", {"participant_id": pid}, ledger,
                            "ask", rng)
            if r is None or r.status_code == 503:
                await asyncio.sleep(0.05 + 0.2 * rng.random())
                continue
            if r.status_code != 200:
                ledger.bad.append(f"ask: unexpected {r.status_code} {r.text[:200]}")
                await asyncio.sleep(0.2)
                continue
            q = r.json()
            if q["state"] != "ok":
                if q["state"] == "done" and len(experiments) > 1:
                    eid = experiments[(experiments.index(eid) + 1) % len(experiments)]
                await asyncio.sleep(min(1.0, q.get("retry_after") or 0.5))
                continue
            qid = q["query_id"]
            ledger.asked[qid] = (eid, pid)
            if rng.random() >= answer_prob:
                continue
            if label_probs is not None:
                p = label_probs[q["item"]["id"]]
                label = rng.choices(LABELS, weights=p)[0]
            else:
                label = LABELS[rng.randrange(3)]
            ledger.sent[qid] = label
            first = True
            while True:
                r = await _post(client, servers, f"/api/queries/{qid}/answer", {"participant_id": pid,
                                                                               "label": label}, ledger, "answer", rng)
                if r is not None and r.status_code == 200:
                    body = r.json()
                    if body.get("label") != label or body.get("query_id") != qid:
                        ledger.bad.append(f"answer: response for another answer {body}")
                    ledger.acked[qid] = label
                    ledger.acked_at.append(time.perf_counter())
                    break
                if r is not None and r.status_code != 503:
                    ledger.bad.append(f"answer: unexpected {r.status_code} {r.text[:200]}")
                    break
                if first:
                    ledger.in_doubt.add(qid)
                    first = False
                if stop.is_set() and final_deadline is not None and time.monotonic() > final_deadline:
                    break
                await asyncio.sleep(0.05 + 0.2 * rng.random())


# ----------------------------------------------------------------------------- audit
def create_experiments(url: str, n: int, n_items: int = 20, seed: int = 0, algorithm: str = "lil_ucb",
                       params: dict | None = None, texts: list[str] | None = None) -> list[tuple[int, str]]:
    out = []
    for j in range(n):
        items = ([{"id": str(i), "text": t} for i, t in enumerate(texts)] if texts is not None
                 else [{"id": f"i{i}", "text": f"item {i} of experiment {j}"} for i in range(n_items)])
        spec: dict[str, Any] = {"name": f"chaos {j}", "items": items, "seed": seed + j,
                                "repeats": "not_consecutive"}  # participants here rate hundreds of items
        learner_params = params if params is not None else {"delta": 0.01}
        if j % 2 == 1:  # every other experiment runs two learners side by side, each with its own log
            spec["algorithms"] = [{"label": "A", "algorithm": algorithm, "params": learner_params, "share": 1},
                                  {"label": "B", "algorithm": algorithm, "params": learner_params, "share": 1}]
        else:
            spec.update(algorithm=algorithm, params=learner_params)
        r = httpx.post(url + "/api/experiments", timeout=60, json=spec)
        r.raise_for_status()
        out.append((r.json()["id"], r.json()["owner_token"]))
    return out


def audit(db_url: str, server_url: str, experiments: list[tuple[int, str]], ledger: Ledger) -> dict[str, Any]:
    """Compare the client's ledger with the database and the learners (see the module docstring).

    Returns a report; ``report["ok"]`` is True when every check holds and ``report["problems"]``
    lists the failures.
    """
    import numpy as np

    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine
    from purebandits.service.study import Study

    settings = Settings(database_url=db_url)
    engine = make_engine(settings.url)
    study = Study(engine, settings)
    problems: list[str] = []
    report: dict[str, Any] = {"experiments": {}}
    eids = {eid for eid, _ in experiments}
    try:
        with engine.connect() as conn:
            stored = {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in conn.exec_driver_sql(
                "SELECT id, experiment_id, label, status, arm, learner FROM queries")}
            answer_events = Counter(r[0] for r in conn.exec_driver_sql(
                "SELECT query_id FROM events WHERE kind = 'answer'"))
        answered = {q: v for q, v in stored.items() if v[2] == "answered"}
        lost = [q for q in ledger.acked if q not in answered]
        wrong_label = [q for q, lab in ledger.acked.items() if q in answered and answered[q][1] != lab]
        doubled = [q for q, n in answer_events.items() if n > 1]
        event_without_query = [q for q in answer_events if q not in answered]
        query_without_event = [q for q in answered if answer_events.get(q, 0) != 1]
        phantom = [q for q in answered if q not in ledger.sent]
        unacked_stored = [q for q in answered if q in ledger.sent and q not in ledger.acked]
        phantom_queries = [q for q, v in stored.items() if v[0] in eids and q not in ledger.asked]
        report.update({
            "answers_acked": len(ledger.acked), "answers_stored": len(answered),
            "answers_lost": len(lost), "double_counted": len(doubled), "wrong_label": len(wrong_label),
            "stored_never_sent": len(phantom), "stored_without_ack": len(unacked_stored),
            "in_doubt_retried": len(ledger.in_doubt), "queries_issued_to_client": len(ledger.asked),
            "queries_stored": sum(1 for v in stored.values() if v[0] in eids),
            "queries_stored_unseen_by_client": len(phantom_queries),
            "contract_violations": list(ledger.bad[:20]), "n_contract_violations": len(ledger.bad),
        })
        for name, bad in (("acknowledged answers not stored", lost), ("stored with another label", wrong_label),
                          ("answers stored twice", doubled), ("answer events without an answered query",
                                                              event_without_query),
                          ("answered queries without exactly one answer event", query_without_event),
                          ("stored answers the client never sent", phantom)):
            if bad:
                problems.append(f"{name}: {len(bad)} (e.g. {bad[:3]})")
        if ledger.bad:
            problems.append(f"{len(ledger.bad)} responses broke the contract, e.g. {ledger.bad[:3]}")
        for eid, token in experiments:
            auth = {"Authorization": f"Bearer {token}"}
            meta = study.meta(eid)
            for idx, spec in enumerate(meta.learners):  # every learner of the experiment, each with its own log
                key = eid if len(meta.learners) == 1 else f"{eid}/{spec.label}"
                query = {"algorithm": spec.label}
                live = httpx.get(f"{server_url}/api/experiments/{eid}/state", headers=auth, timeout=60,
                                 params=query).json()
                res = httpx.get(f"{server_url}/api/experiments/{eid}/results", headers=auth, timeout=60,
                                params={"timeline": "false", **query}).json()
                replayed = study.replay(eid, upto=live["version"], learner=idx)
                counts = np.zeros(meta.n_arms, dtype=np.int64)
                sums = np.zeros(meta.n_arms)
                for _q, (e, label, _st, arm, lrn) in answered.items():
                    if e == eid and lrn == idx:
                        counts[arm] += 1
                        sums[arm] += REWARDS[label]
                same_state = replayed.state_dict() == live["state"]
                rec_live = [r["arm"] for r in res["recommendation"]]
                rec_replay = list(replayed.recommend())
                st = live["state"]["state"]
                ok_counts = bool(np.array_equal(_arr(st["counts_"]), counts))
                ok_sums = bool(np.allclose(_arr(st["sums_"]), sums, rtol=0, atol=1e-9))
                pending_stored = sum(1 for v in stored.values() if v[0] == eid and v[2] == "pending" and v[4] == idx)
                ok_pending = int(_arr(st["pending_"]).sum()) == pending_stored
                report["experiments"][key] = {
                    "version": live["version"], "answers": int(counts.sum()), "state_equals_replay": same_state,
                    "recommendation": rec_live, "recommendation_equals_replay": rec_live == rec_replay,
                    "counts_equal_stored_answers": ok_counts, "sums_equal_stored_answers": ok_sums,
                    "pending_equals_stored_pending": ok_pending, "n_answers_results": res["n_answers"]}
                if not same_state:
                    problems.append(f"experiment {key}: live learner state != replay of the event log")
                if rec_live != rec_replay:
                    problems.append(f"experiment {key}: recommendation {rec_live} != replay's {rec_replay}")
                if not (ok_counts and ok_sums):
                    problems.append(f"experiment {key}: learner counts/sums != stored answers")
                if not ok_pending:
                    problems.append(f"experiment {key}: learner pending != stored pending queries")
                if res["n_answers"] != int(counts.sum()):
                    problems.append(f"experiment {key}: results n_answers {res['n_answers']} != {int(counts.sum())}")
    finally:
        engine.dispose()
    report["problems"] = problems
    report["ok"] = not problems
    return report


def _arr(x: Any) -> Any:
    import numpy as np

    return np.asarray(x["__ndarray__"] if isinstance(x, dict) else x)


def percentile_ms(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")
