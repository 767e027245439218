"""Deployment: workers that start on a loaded machine, several server processes on one PostgreSQL, and a
command line and worker start-up that do not pay for the learners' compiled code.

An outside run of ``purebandits serve --db postgresql://... --workers 4`` on a loaded two-core machine saw
uvicorn replace its workers 42 times in 4 minutes without ever answering ``/healthz``: a spawned worker
re-imported the package (NumPy, SciPy, Numba and every learner: 8-12 s there) before it could answer
uvicorn's 5-second health check. These tests hold the start-up path to what serving needs and run the
documented scale-out set-ups under load.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import HTTP, SRC, Server
from purebandits.testing.postgres import create_database, drop_database

HEAVY = ("numba", "scipy", "purebandits.algorithms", "llvmlite")


def _modules_after(code: str) -> set[str]:
    """The top-level module names (and ``purebandits.*``) a fresh interpreter holds after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             "print(json.dumps(sorted({m if m.startswith('purebandits') else m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": SRC}, capture_output=True,
                         text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_package_import_loads_no_compiled_code():
    """``import purebandits`` (what a spawned worker and every CLI start do first) loads neither NumPy nor numba;
    the learners come on first use, and stay reachable by name."""
    mods = _modules_after("import purebandits")
    assert not mods & {"numpy", *HEAVY}, sorted(mods & {"numpy", *HEAVY})
    mods = _modules_after("from purebandits import LilUCB, make_learner\nassert make_learner('lil_ucb').name")
    assert "purebandits.algorithms" in mods


def test_cli_client_imports_only_its_command():
    """``purebandits experiment ...`` (the organizer's client) builds only its own parser: no NumPy, numba,
    SQLAlchemy or FastAPI, so it starts in a few tens of milliseconds instead of seconds under load."""
    mods = _modules_after("from purebandits.cli import build_parser\nbuild_parser('experiment')\n"
                          "import purebandits.service.cli_experiment")
    assert not mods & {"numpy", "sqlalchemy", "fastapi", *HEAVY}, sorted(mods & {"numpy", "sqlalchemy", "fastapi"})


def test_service_app_imports_no_learner():
    """A worker builds its app without numba, SciPy or any learner (they load in the warm-up or on first use)."""
    mods = _modules_after("from purebandits.service.app import create_app")
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


def test_start_on_a_migrated_database_skips_alembic(tmp_path):
    """``upgrade`` on a database already at the head (every start but the first) applies nothing and imports no
    Alembic (about 0.2 s of a core per start); the head it knows without Alembic is Alembic's own, and a database
    below it is still brought up to it."""
    from purebandits.service.storage import current_revision, head_revision, make_engine, shipped_head, upgrade

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = make_engine(url)
    try:
        assert shipped_head() == head_revision(engine)
        upgrade(engine, "0010")
        upgrade(engine)
        assert current_revision(engine) == head_revision(engine)
    finally:
        engine.dispose()
    mods = _modules_after(f"from purebandits.service.storage import make_engine, upgrade\n"
                          f"upgrade(make_engine({url!r}))")
    assert "alembic" not in mods


def test_serve_turns_the_collector_back_on(tmp_path, monkeypatch):
    """``purebandits serve`` loads with the cyclic collector off (service/cli.py); it is back on as soon as numba
    compiles (a compile makes garbage by the 100 MB) and once the app has started (after its collect and freeze;
    the learners' warm-up, which this does not need, left out)."""
    import gc
    import io

    from fastapi.testclient import TestClient
    from numba import njit

    from purebandits.service import app
    from purebandits.service.settings import Settings
    from purebandits.service.warmup import compile_progress

    @njit  # defined here, so nothing has compiled it yet
    def twice(x):
        return 2 * x

    monkeypatch.setattr(app, "warm_learners", lambda specs: 0)
    gc.disable()
    try:
        with compile_progress("testing", file=io.StringIO()):
            assert twice(21) == 42
            assert gc.isenabled()
        gc.disable()
        with TestClient(app.create_app(Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}"))) as client:
            assert gc.isenabled() and client.get("/healthz").status_code == 200
    finally:
        gc.enable()


def _burn(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        sum(range(10_000))


@contextmanager
def loaded_machine(processes: int = 2):
    """``processes`` busy loops (a machine whose cores are all taken), stopped on exit."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    procs = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(processes)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()


@pytest.fixture
def pg_url(pg_admin_url):
    url = create_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, url)


@pytest.mark.postgres
@pytest.mark.reliability
def test_four_workers_start_and_stay_on_a_loaded_machine(pg_url, tmp_path):
    """``serve --workers 4`` on PostgreSQL with both cores busy: it answers, all four workers start once and
    none is replaced while they serve (uvicorn logs "Child process [...] died" when it replaces one)."""
    with loaded_machine(2):
        srv = Server(pg_url, "--workers", "4", "--log-level", "info", log_dir=tmp_path)
        srv.start(timeout=240)
        try:
            eid = HTTP.post(srv.url + "/api/experiments", timeout=60, json={
                "name": "workers", "items": [{"id": str(i), "text": f"caption {i}"} for i in range(30)],
                "seed": 1}).json()["id"]
            answered = 0
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # a new connection per request: spread over the workers
                pid = HTTP.post(srv.url + "/api/participants", timeout=30).json()["participant_id"]
                q = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid},
                               timeout=30).json()
                if q["state"] == "ok":
                    r = HTTP.post(f"{srv.url}/api/queries/{q['query_id']}/answer", timeout=30,
                                   json={"participant_id": pid, "label": "funny"})
                    answered += r.status_code == 200
        finally:
            srv.stop()
    log = (tmp_path / f"server-{srv.port}.log").read_text()
    assert answered > 0
    assert log.count("Started server process") == 4, log[-3000:]
    assert "died" not in log, log[-3000:]


def _register(urls: list[str], n: int) -> tuple[list[str], int]:
    """``n`` attempts at a new participant id, alternating between the servers, from 8 threads at once."""
    ids: list[str] = []
    refused = 0
    lock = threading.Lock()

    def one(k: int) -> None:
        nonlocal refused
        r = HTTP.post(urls[k % len(urls)] + "/api/participants", timeout=60)
        with lock:
            if r.status_code == 201:
                ids.append(r.json()["participant_id"])
            else:
                assert r.status_code == 429, r.text
                refused += 1

    threads = [threading.Thread(target=lambda s=s: [one(k) for k in range(s, n, 8)]) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids, refused


@pytest.mark.postgres
@pytest.mark.reliability
def test_two_servers_on_one_postgres_under_load(pg_url, tmp_path):
    """Two ``serve`` processes on different ports against one PostgreSQL, as behind a reverse proxy, on a loaded
    machine: the per-address id limit is one limit for both, participants who switch servers between their ask and
    their answer are served, no query is handed out twice, and every acknowledged answer is stored once."""
    burst = 12
    env = {"PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0.01", "PUREBANDITS_PARTICIPANT_BURST": str(burst),
           "PUREBANDITS_ASK_RATE_PER_SECOND": "0"}
    items = 25
    with loaded_machine(1), Server(pg_url, env=env, log_dir=tmp_path) as a, \
            Server(pg_url, env=env, log_dir=tmp_path) as b:
        urls = [a.url, b.url]
        eid = HTTP.post(a.url + "/api/experiments", timeout=60, json={
            "name": "two hosts", "repeats": "never", "seed": 3,
            "items": [{"id": str(i), "text": f"caption {i}"} for i in range(items)]}).json()["id"]
        ids, refused = _register(urls, 2 * burst)
        assert (len(ids), refused) == (burst, burst)

        acknowledged: dict[str, tuple[str, str]] = {}  # query id -> (participant, label)
        handed: list[str] = []
        lock = threading.Lock()
        labels = ["unfunny", "somewhat funny", "funny"]

        def participant(k: int, pid: str) -> None:
            for step in range(items):
                ask_at, answer_at = urls[(k + step) % 2], urls[(k + step + 1) % 2]
                q = HTTP.post(f"{ask_at}/api/experiments/{eid}/queries", json={"participant_id": pid},
                               timeout=60).json()
                if q["state"] != "ok":
                    time.sleep(q.get("retry_after", 1.0) / 4)
                    continue
                label = labels[(k + step) % 3]
                r = HTTP.post(f"{answer_at}/api/queries/{q['query_id']}/answer", timeout=60,
                               json={"participant_id": pid, "label": label})
                with lock:
                    handed.append(q["query_id"])
                    if r.status_code == 200:
                        acknowledged[q["query_id"]] = (pid, label)

        threads = [threading.Thread(target=participant, args=(k, pid)) for k, pid in enumerate(ids)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert len(handed) == len(set(handed)), "a query id was handed out twice"
    assert len(acknowledged) >= burst * items // 2
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, participant_id, arm, label FROM queries "
                                        "WHERE experiment_id = :e AND status = 'answered'"), {"e": eid}).all()
            answer_events = Counter(r[0] for r in conn.execute(sa.text(
                "SELECT query_id FROM events WHERE experiment_id = :e AND kind = 'answer'"), {"e": eid}))
    finally:
        engine.dispose()
    stored = {r.id: (r.participant_id, r.label) for r in rows}
    assert stored == acknowledged
    assert set(answer_events) == set(acknowledged) and set(answer_events.values()) == {1}
    pairs = Counter((r.participant_id, r.arm) for r in rows)
    assert max(pairs.values()) == 1, "an item was rated twice by one participant under repeats='never'"


def test_kernel_cache_stamped_before_any_kernel():
    """Every module of the package that imports numba imports :mod:`purebandits.kernel_cache` too (which stamps
    numba's on-disk cache with the digest of all the kernels' sources before any kernel is decorated), now that
    ``import purebandits`` no longer does it for them."""
    root = Path(SRC) / "purebandits"
    missing = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "kernel_cache.py":
            continue
        top = [line for line in path.read_text().splitlines() if line and not line[0].isspace()]
        if any(line.startswith(("import numba", "from numba")) for line in top) and \
                "import purebandits.kernel_cache  # noqa: F401" not in "\n".join(top) and \
                not any(line.startswith("from purebandits.kernel_cache import") for line in top):
            missing.append(str(path.relative_to(root)))
    assert not missing
