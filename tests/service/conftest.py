"""Fixtures: a storage URL parametrised over SQLite (per-test file) and PostgreSQL (per-test database)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from purebandits.testing.postgres import PostgresUnavailable, create_database, drop_database, temporary_postgres

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_admin_url():
    """Admin URL of a PostgreSQL server: PUREBANDITS_TEST_PG_URL, else a throwaway local cluster."""
    url = os.environ.get("PUREBANDITS_TEST_PG_URL")
    if url:
        yield url
        return
    with own_postgres_cluster() as url:
        yield url


@contextlib.contextmanager
def own_postgres_cluster():
    """A throwaway local PostgreSQL cluster (its admin URL), stopped and removed at the end; skips the test when
    PostgreSQL is unavailable. For tests that stop or hang their cluster, which no other test may share."""
    try:
        cm = temporary_postgres()
        url = cm.__enter__()
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    try:
        yield url
    finally:
        cm.__exit__(None, None, None)


def _url(backend: str, request, tmp_path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'service.sqlite'}"
    admin = request.getfixturevalue("pg_admin_url")
    url = create_database(admin)
    request.addfinalizer(lambda: drop_database(admin, url))
    return url


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """A fresh, empty database per test: SQLite file or PostgreSQL database."""
    if request.param == "postgres":
        request.node.add_marker(pytest.mark.postgres)
    return _url(request.param, request, tmp_path)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'service.sqlite'}"


# ---------------------------------------------------------------- real server processes
SRC = str(Path(__file__).resolve().parents[2] / "src")


def http_client(**kw: Any) -> httpx.Client:
    """An httpx client that, like ``httpx.post`` and ``httpx.get``, opens a new connection for every request and
    limits neither how many are open at once nor (unless told) their timeout of 5 s, but builds its SSL context
    once: a bare ``httpx.post`` builds one per call, 22 ms of a core each, twenty times the request itself."""
    return httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0), **kw)


#: what the tests' ``httpx.post(...)`` calls go through (thread-safe, closed at exit)
HTTP = http_client()
atexit.register(HTTP.close)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``purebandits serve --db URL`` on a free loopback port; ``stop()`` sends SIGTERM."""

    def __init__(self, db_url: str, *extra: str, env: dict[str, str] | None = None, log_dir: Path | None = None):
        self.db_url, self.extra, self.port = db_url, extra, free_port()
        self.env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    "PUREBANDITS_ASK_RATE_PER_SECOND": "0",
                    "PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0", "PUREBANDITS_CREATE_RATE_PER_SECOND": "0",
                    **(env or {})}
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> Server:
        log = open(self.log_dir / f"server-{self.port}.log", "wb") if self.log_dir else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "purebandits.cli", "serve", "--db", self.db_url, "--port", str(self.port),
             "--no-access-log", "--log-level", "warning", *self.extra],
            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:  # HTTP: a bare httpx.get per poll took a second of a core per start
                if HTTP.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not start in time")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> Server:
        return self if self.proc is not None else self.start()  # ``with srv.start(timeout=...)``: started once

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def server_cls():
    """The :class:`Server` class (a ``purebandits serve`` subprocess)."""
    return Server


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One ``purebandits serve`` on a SQLite file with the default settings, shared by a module's tests (under
    xdist: by those of them a worker runs); each test works on experiments of its own there.

    A server start costs about 3 s of a core (the service's imports, the migrations, the default learner's
    kernels); a test that needs other settings, a fresh database, a restart or a crash starts its own with
    ``server_cls``."""
    tmp = tmp_path_factory.mktemp("shared-server")
    with Server(f"sqlite:///{tmp / 'shared.sqlite'}", log_dir=tmp) as srv:
        yield srv


@pytest.fixture(scope="module", params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_server_on(request, tmp_path_factory):
    """A module's ``purebandits serve`` with the default settings on each backend in turn: on SQLite the module's
    :func:`shared_server`, on PostgreSQL one on a database of its own (dropped at the end); its ``db_url`` is
    that database. For the tests that would otherwise start one per test and backend only to work on
    experiments of their own (a start costs about 3 s of a core)."""
    if request.param == "sqlite":
        yield request.getfixturevalue("shared_server")
        return
    admin = request.getfixturevalue("pg_admin_url")
    url = create_database(admin)
    try:
        with Server(url, log_dir=tmp_path_factory.mktemp("shared-server-pg")) as srv:
            yield srv
    finally:
        drop_database(admin, url)


# ---------------------------------------------------------------- headless Chromium
CHROMIUM = os.environ.get("PUREBANDITS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
#: Chromium features that cost every new browser context (Playwright opens a window for each) CPU and have nothing
#: to do with the pages: the browser's own address-bar popups, WebUI pages that this (new-headless) Chromium preloads
#: in a renderer of their own per window, 0.3 s of a core each (the tests open a few hundred contexts). The pages'
#: rendering is untouched.
CHROMIUM_DISABLED_FEATURES = ["WebUIOmniboxPopup", "WebUIOmniboxAimPopup"]


def _playwright_disabled_features() -> list[str] | None:
    """The features Playwright's driver disables itself (its ``chromiumSwitches``), read from the driver's source;
    None if not found there.

    Chromium heeds only the last ``--disable-features`` of its command line, and Playwright puts its own before the
    caller's arguments: a switch of ours must repeat Playwright's list, or it would enable them again."""
    import re

    import playwright

    package = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    for source in (package / "coreBundle.js", package / "server" / "chromium" / "chromiumSwitches.js"):
        try:
            text = source.read_text(encoding="utf-8")
        except OSError:
            continue
        m = re.search(r"disabledFeatures\s*=\s*\[(.*?)\]", text, re.DOTALL)
        if m:
            body = re.sub(r"//[^\n]*", "", m.group(1))
            names = re.findall(r"[\"']([A-Za-z0-9_]+)[\"']", body)
            return names or None
    return None


def chromium_args() -> list[str]:
    """:data:`CHROMIUM_ARGS`, with :data:`CHROMIUM_DISABLED_FEATURES` added to Playwright's own disabled features
    (left out, with Playwright's list as it is, if that list cannot be read)."""
    theirs = _playwright_disabled_features()
    if theirs is None:
        return list(CHROMIUM_ARGS)
    ours = [f for f in CHROMIUM_DISABLED_FEATURES if f not in theirs]
    return [*CHROMIUM_ARGS, "--disable-features=" + ",".join([*theirs, *ours])]


class CspBypassingBrowser:
    """A Playwright browser whose ``new_context`` / ``new_page`` bypass the pages' Content-Security-Policy
    unless told ``bypass_csp=False``.

    Playwright's ``wait_for_function`` runs its expression through ``eval`` in the page, which the
    service's policy (no ``'unsafe-eval'``) refuses; test_web_hardening.py checks the pages under their
    real policy, with ``bypass_csp=False`` and waits that need no eval (selectors, ``expect``).
    """

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def new_context(self, **kw: Any) -> Any:
        kw.setdefault("bypass_csp", True)
        return self._browser.new_context(**kw)

    def new_page(self, **kw: Any) -> Any:
        kw.setdefault("bypass_csp", True)
        return self._browser.new_page(**kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


@pytest.fixture(scope="module")
def browser():
    """The system Chromium (never a downloaded browser) driven by Playwright; skips if either is missing.

    One per module: Playwright's sync API keeps its event loop marked as running in this thread while it is open,
    so a browser kept for the session broke the later tests of the worker that call ``asyncio.run``. Each test
    works in browser contexts of its own (``new_context`` / ``new_page``: their own cookies, storage, cache, routes
    and clock).

    Its contexts bypass the Content-Security-Policy by default (see :class:`CspBypassingBrowser`).
    """
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args(), headless=True)
        yield CspBypassingBrowser(b)
        b.close()
