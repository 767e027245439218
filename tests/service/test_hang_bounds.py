"""Issue #41 item 4: pages and owner endpoints are bounded while PostgreSQL hangs.

An outside probe stopped PostgreSQL (SIGSTOP) for 10 s: ``/``, ``/rate/{id}`` and ``/public`` took the
whole 10 s (the participant API already answered 503 after its bound), and rating pages loaded during a
40 s hang got 503 after 9 to 45 s. Here every PostgreSQL process of a cluster of the module's own is
stopped for longer than the bound while a real server process is asked for every page and a
representative set of owner endpoints: each answers within twice ``db_wait_seconds`` plus a generous
margin (the machine is loaded), with 503 and ``Retry-After`` where it needs the database, and the
rating page of a known experiment answers 200 with its shell. A second server that has never seen the
experiment serves the shell without its name. In Chromium, a rating page opened during the hang says
it is retrying and shows an item once the database is back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from conftest import HTTP, own_postgres_cluster

WAIT = 1.0
BOUND = 2 * WAIT  # what docs/service.md promises: twice db_wait_seconds
MARGIN = 4.0      # generous: two loaded cores shared with other test runs
HANG = BOUND + MARGIN + 6.0  # longer than any answer may take: a request that waits for the database shows it
ENV = {"PUREBANDITS_DB_WAIT_SECONDS": str(WAIT), "PUREBANDITS_VERIFY_ON_START": "0"}
ITEMS = [f"caption {i}" for i in range(6)]


@pytest.fixture(scope="module")
def pg_admin():
    """A PostgreSQL cluster of this module's own (its tests stop it, so no other module may share it; its tests run
    one at a time in a worker, and each continues it before it ends): one initdb and start for the module."""
    with own_postgres_cluster() as admin:
        yield admin


@pytest.fixture
def pg_url(pg_admin):
    """A new database on the module's cluster."""
    from purebandits.testing.postgres import create_database

    return create_database(pg_admin)


@pytest.fixture(scope="module")
def hang_server(pg_admin):
    """A server with ``ENV`` on a database of the module's cluster, for the two tests that stop the cluster under it
    (each on experiments of its own, created after the previous hang ended): a server start costs about 3 s of a
    core."""
    from conftest import Server
    from purebandits.testing.postgres import create_database

    srv = Server(create_database(pg_admin), env=ENV).start(timeout=300)
    try:
        yield srv
    finally:
        srv.stop()


def _cluster_pids(url: str) -> list[int]:
    """The postmaster of the server at ``url`` and all its children (found through one backend's parent)."""
    import psycopg

    def parent(pid: str | int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

    with psycopg.connect(url) as conn:
        postmaster = parent(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                if parent(entry.name) == postmaster:
                    pids.append(int(entry.name))
    return pids


@contextmanager
def stopped(url: str, seconds: float = HANG) -> Iterator[None]:
    """Every process of the cluster at ``url`` stopped (SIGSTOP) for ``seconds`` from the start of the block (or
    until it ends, if sooner); always continued (SIGCONT) by the end of the block."""
    pids = _cluster_pids(url)
    done = threading.Event()

    def resume() -> None:
        for p in pids:
            with suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)

    def later() -> None:
        if not done.wait(seconds):
            resume()

    try:
        for p in pids:
            with suppress(ProcessLookupError):  # a backend that just ended
                os.kill(p, signal.SIGSTOP)
        threading.Thread(target=later, daemon=True).start()
        yield
    finally:
        done.set()
        resume()


def _timed(method: str, url: str, **kw) -> tuple[float, httpx.Response]:
    t0 = time.monotonic()
    r = HTTP.request(method, url, timeout=HANG + 30, **kw)
    return time.monotonic() - t0, r


def _create(url: str, name: str) -> tuple[int, str]:
    r = HTTP.post(f"{url}/api/experiments", json={"name": name, "items": ITEMS}, timeout=60)
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["owner_token"]


def test_pages_and_owner_endpoints_answer_within_the_bound_while_postgres_hangs(hang_server, server_cls):
    srv, pg_url = hang_server, hang_server.db_url
    fresh = None
    try:
        eid, token = _create(srv.url, "hung pages")
        other, _ = _create(srv.url, "to delete")
        owner = {"Authorization": f"Bearer {token}"}
        pid = HTTP.post(f"{srv.url}/api/participants", timeout=60).json()["participant_id"]
        r = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid}, timeout=60)
        assert r.status_code == 200, r.text  # the server has read the experiment's settings: it caches them
        fresh = server_cls(pg_url, env=ENV).start(timeout=300)  # has never read the experiment
        HTTP.get(f"{fresh.url}/healthz", timeout=30)
        # what needs the database: 503 + Retry-After within the bound
        needs_db = [("GET", srv.url + "/", {}), ("GET", f"{srv.url}/api/experiments/{eid}/public", {}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/image", {}),
                    ("GET", f"{srv.url}/api/experiments", {}),
                    ("GET", f"{srv.url}/api/experiments/{eid}", {"headers": owner}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/results", {"headers": owner}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/history", {"headers": owner}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/activity", {"headers": owner}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/comparison", {"headers": owner}),
                    ("GET", f"{srv.url}/api/experiments/{eid}/answers.csv", {"headers": owner}),
                    ("POST", f"{srv.url}/api/experiments/{eid}/pause", {"headers": owner}),
                    ("POST", f"{srv.url}/api/experiments/{eid}/on-done",
                     {"headers": owner, "json": {"auto_stop": True, "webhook_url": None}}),
                    ("DELETE", f"{srv.url}/api/experiments/{other}", {"headers": owner}),
                    ("POST", f"{srv.url}/api/experiments",
                     {"json": {"name": "created during the hang", "items": ITEMS}})]
        # what must not: 200 at once (the rating page from the process's cache of the experiment's settings)
        shells = [("GET", f"{srv.url}/rate/{eid}", {}), ("GET", f"{srv.url}/dashboard/{eid}", {}),
                  ("GET", f"{srv.url}/new", {}), ("GET", f"{srv.url}/admin", {}),
                  ("GET", f"{fresh.url}/rate/{eid}", {})]
        with stopped(pg_url), ThreadPoolExecutor(len(needs_db) + len(shells)) as pool:
            t0 = time.monotonic()
            futures = [(m, u, pool.submit(_timed, m, u, **kw)) for m, u, kw in [*needs_db, *shells]]
            answers = [(m, u, f.result()) for m, u, f in futures]
            all_answered = time.monotonic() - t0
        for method, url, (took, r) in answers:  # the figures docs/service.md quotes (pytest -s shows them)
            print(f"{method:6} {url.split(':', 2)[2].split('/', 1)[1]:45} {r.status_code} {took:6.2f} s")
        problems = []
        for method, url, (took, r) in answers[:len(needs_db)]:
            if not (r.status_code == 503 and int(r.headers.get("Retry-After", "0")) >= 1 and took < BOUND + MARGIN):
                problems.append((method, url, r.status_code, round(took, 2), r.text[:120]))
        for method, url, (took, r) in answers[len(needs_db):]:
            if not (r.status_code == 200 and took < BOUND + MARGIN):
                problems.append((method, url, r.status_code, round(took, 2), r.text[:120]))
        assert not problems, problems
        assert all_answered < HANG, "the hang ended before every request was answered: the test shows nothing"
        home = answers[0][2][1]
        assert "text/html" in home.headers["content-type"] and "busy" in home.text  # a page, not JSON
        cached, uncached = answers[len(needs_db)][2], answers[-1][2]
        assert "<h1 id=\"title\">hung pages</h1>" in cached[1].text and cached[0] < MARGIN
        assert "<h1 id=\"title\">Loading…</h1>" in uncached[1].text  # named by its script once the data comes
        # the database is back: everything answers again
        deadline = time.monotonic() + 60
        while True:
            r = HTTP.get(f"{srv.url}/api/experiments/{eid}/results", headers=owner, timeout=60)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.status_code == 200, r.text
        assert HTTP.get(f"{fresh.url}/rate/{eid}", timeout=60).status_code == 200
        assert HTTP.get(f"{fresh.url}/rate/{eid + 100}", timeout=60).status_code == 404
    finally:
        if fresh is not None:
            fresh.stop()


def test_owner_request_longer_than_the_bound_on_a_live_database_is_not_cut(pg_url, server_cls):
    """The bound is for a database that does not answer, not for a request that takes long on one that does: a
    create of 50,000 items takes longer than twice ``db_wait_seconds`` (here 0.5 s) and still succeeds."""
    wait = 0.5
    srv = server_cls(pg_url, env={**ENV, "PUREBANDITS_DB_WAIT_SECONDS": str(wait)}).start(timeout=300)
    try:
        items = [f"item number {i}" for i in range(50_000)]
        took, r = _timed("POST", f"{srv.url}/api/experiments", json={"name": "large", "items": items})
        assert r.status_code == 201, r.text
        assert r.json()["n_items"] == len(items)
        assert took > 2 * wait, f"the create took {took:.2f} s: too fast to show anything"
    finally:
        srv.stop()


@pytest.mark.browser
def test_rating_page_opened_during_a_hang_says_it_retries_then_shows_an_item(hang_server, browser, tmp_path):
    srv = hang_server
    eid, _ = _create(srv.url, "hung page")
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = ctx.new_page()
    try:
        with stopped(srv.db_url):
            page.goto(f"{srv.url}/rate/{eid}", timeout=int((BOUND + MARGIN) * 1000))
            page.wait_for_function(
                "() => /retrying/.test(document.getElementById('message').textContent)",
                timeout=int((BOUND + MARGIN + 10) * 1000))
            text = page.locator("#message").text_content()
            shot = tmp_path / "rate-during-hang.png"
            page.screenshot(path=str(shot))
        # this server has not read the experiment yet (created just now): the page came without its name
        assert "retrying" in text and page.locator("h1").text_content() == "Loading…"
        page.wait_for_selector("#buttons button.label:not([disabled])", timeout=90_000)
        assert page.locator("#item-text").text_content() in ITEMS
        assert page.locator("h1").text_content() == "hung page" and page.title() == "Rate: hung page"
        assert not page.locator("#message").text_content()  # the note goes once it works again
    finally:
        ctx.close()
