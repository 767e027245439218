"""A SQLite database that is expensive to fill, built once per test session and copied for each xdist worker.

test_browser_dashboard.py's contest (thousands of simulated answers through a Study: about 25 s of a core) was
rebuilt by every xdist worker that ran one of its tests. Here the first worker to need it builds it under a
file lock in the session's shared temporary directory (``tmp_path_factory.getbasetemp().parent``, the pattern
pytest-xdist documents) and the others copy it. A copy made later than the build has every epoch-millisecond
column (every ``*_ms`` column of the schema) moved forward by the time since the build, so it is the database
that a build at the moment of the copy would have made: the same rows, the same times relative to now (the
contest's "ended two minutes ago", its pending queries' expiry, the charts' last hours).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: a build's times lie within this long before its ``now`` (the contest's simulated crowds start 12 hours back)
MAX_AGE_MS = 24 * 3_600_000


def _backup(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite file (its write-ahead log included) through SQLite's backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def shift_times(path: Path, delta_ms: int, built_ms: int) -> None:
    """Move every ``*_ms`` column of every table of the SQLite file ``path`` forward by ``delta_ms``.

    Each such value is first checked to be an epoch time of the build (within ``MAX_AGE_MS`` before
    ``built_ms``, or up to an hour after: an expiry), so a column that held a duration would fail loudly
    instead of being shifted."""
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for col in [r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[1].endswith("_ms")]:
                lo, hi = con.execute(f'SELECT min("{col}"), max("{col}") FROM "{table}"').fetchone()
                if lo is None:
                    continue
                assert built_ms - MAX_AGE_MS <= lo <= hi <= built_ms + 3_600_000, (table, col, lo, hi, built_ms)
                con.execute(f'UPDATE "{table}" SET "{col}" = "{col}" + ? WHERE "{col}" IS NOT NULL', (delta_ms,))
        con.commit()
    finally:
        con.close()


def session_database(tmp_path_factory: pytest.TempPathFactory, name: str, dst: Path,
                     build: Callable[[str, int], dict[str, Any]]) -> dict[str, Any]:
    """Make ``dst`` the SQLite database that ``build(url, now_ms)`` fills (it returns what the tests need to know
    about it, JSON-able); built once per session, copied (times shifted to now) for each further xdist worker."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: nothing to share
        return build(f"sqlite:///{dst}", int(time.time() * 1000))
    shared = tmp_path_factory.getbasetemp().parent / f"session-db-{name}"
    shared.mkdir(exist_ok=True)
    db, meta = shared / "db.sqlite", shared / "meta.json"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while the first one builds
        try:
            if not meta.exists():
                built_ms = int(time.time() * 1000)
                scratch = shared / "build"
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir()
                info = build(f"sqlite:///{scratch / 'db.sqlite'}", built_ms)
                _backup(scratch / "db.sqlite", db)
                meta.write_text(json.dumps({"built_ms": built_ms, "info": info}))
            saved = json.loads(meta.read_text())
            _backup(db, dst)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    shift_times(dst, int(time.time() * 1000) - saved["built_ms"], saved["built_ms"])
    return saved["info"]


# ---------------------------------------------------------------- the rating page's arming, in the page's own time
#: rate.js's ARM_MS: a new item's buttons take clicks this long after it appeared (double clicks)
ARM_MS = 250
#: a new item shown since the test's last wait (``window.__waited``, as the tests' NEXT scripts keep it), or the
#: page idle (nothing more for this participant)
SHOWN_OR_IDLE = """() => document.querySelector('main').classList.contains('idle')
  || Number(document.getElementById('card').dataset.shown || 0) > (window.__waited || 0)"""


#: an item on the card other than the one whose query id is the argument
NEW_ITEM = "(q) => { const id = document.getElementById('card').dataset.queryId; return !!id && id !== q; }"


def let_arming_pass(page: Any, timeout_s: float = 15, shown: str = SHOWN_OR_IDLE, arg: Any = None) -> None:
    """On a page whose clock the test drives (``page.clock.install()`` before ``goto``): wait for the next item
    (``shown(arg)`` true: by default a new item or the idle page), then let ``ARM_MS`` of the page's time pass at
    once, so that its buttons take answers.

    A test that plays a hundred answers through the page otherwise waits a quarter of a second of real time for
    each. The page's other timers (a retry's backoff, a request's timeout) move only when the test moves its
    clock: while no new item comes, the clock is moved a second at a time, so that a retry still happens."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            page.wait_for_function(shown, arg=arg, timeout=1000)
            break
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, "no new item on the page"
            page.clock.run_for(1000)
    page.clock.run_for(ARM_MS)
