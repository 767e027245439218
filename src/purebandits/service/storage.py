"""Engines and migrations: SQLite (WAL, one writer at a time) or PostgreSQL, same schema.

SQLite: every write transaction starts with ``BEGIN IMMEDIATE`` (it takes the database's
write lock at once, as datasette does, so two processes never both read a version and then
race to write it), reads use a plain deferred ``BEGIN``; WAL lets readers run during a write,
and a ``busy_timeout`` of ``wait_seconds`` makes a second writer wait that long before failing
with "database is locked" (a 503). PostgreSQL: writers lock the learner row with ``SELECT ...
FOR UPDATE`` (see :mod:`purebandits.service.study`); ``lock_timeout`` (``wait_seconds``) and
``statement_timeout`` bound every wait, so a lock held elsewhere or a runaway statement fails
the request instead of holding a worker thread. Migrations lift both limits.

Neither bounds a server that stops answering (stopped, overloaded, cut off by the network): the
statement never reaches it, and psycopg has no client-side timeout. :class:`Liveness` tracks when
the database last answered this process, so the
:class:`~purebandits.service.dispatch.Dispatcher` can tell a hung server (503) from a slow request.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import logging
import re
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["make_engine", "upgrade", "current_revision", "head_revision", "is_sqlite", "Liveness", "liveness"]

log = logging.getLogger("purebandits.service")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: bytes SQLite's write-ahead log is truncated back to once checkpointed (``PRAGMA journal_size_limit``)
WAL_SIZE_LIMIT = 64 * 1024 * 1024
_BEGIN = {"DEFERRED": "BEGIN DEFERRED", "IMMEDIATE": "BEGIN IMMEDIATE", "EXCLUSIVE": "BEGIN EXCLUSIVE"}


def is_sqlite(engine: Engine) -> bool:
    """Whether ``engine`` talks to SQLite (which needs its own locking and pragmas)."""
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, wait_seconds: float = 2.0, statement_timeout_seconds: float = 30.0,
                **kwargs: Any) -> Engine:
    """An engine for ``url`` with the pragmas / pool settings the service relies on.

    ``wait_seconds`` bounds a wait for a lock (SQLite ``busy_timeout``, PostgreSQL
    ``lock_timeout``); ``statement_timeout_seconds`` bounds a PostgreSQL statement.
    """
    wait_ms = max(1, int(wait_seconds * 1000))
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": wait_seconds},
                                  **kwargs)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
            # the log grows while a reader holds an old snapshot (a download, 6 MB/s at 100 answers/s on a
            # million-answer contest) and SQLite keeps it at its largest: truncated back after a checkpoint
            cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={wait_ms}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            # on the driver connection: exec_driver_sql's execution context was ~6 % of the server's
            # CPU per answer; a driver error is wrapped as SQLAlchemy would (OperationalError -> 503)
            mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
            sql = _BEGIN.get(mode) or f"BEGIN {mode}"
            try:
                conn.connection.driver_connection.execute(sql)  # type: ignore[union-attr]
            except sqlite3.Error as exc:
                raise sa.exc.DBAPIError.instance(sql, (), exc, sqlite3.Error, dialect=conn.dialect) from exc

        return engine
    statement_ms = max(1, int(statement_timeout_seconds * 1000))
    kwargs.setdefault("connect_args", {"connect_timeout": 5,
                                       "options": f"-c lock_timeout={wait_ms} -c statement_timeout={statement_ms}"})
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    engine = sa.create_engine(url, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        _ping_when_idle(engine)
    _LIVENESS[engine] = Liveness(engine, kwargs["connect_args"])
    return engine


class Liveness:
    """When a PostgreSQL server last answered this process: any statement through the engine, a new
    connection, or a probe (``SELECT 1`` on a connection of its own, kept open, one at a time, in a daemon
    thread).

    A slow owner request (a large create, the delete of a million answers) is not a hung server: while
    the server answers something (the probe, if nothing else) such a request may take as long as it
    needs. A server silent for ``db_wait_seconds`` (a probe included) is hung, and the requests waiting
    for it get 503 (:meth:`~purebandits.service.dispatch.Dispatcher.owner_call`).
    """

    def __init__(self, engine: Engine, connect_args: dict[str, Any]) -> None:
        self.last = time.monotonic()
        self._probing = threading.Lock()
        self._conn: sa.Connection | None = None
        # outside the pool: a probe must not wait for a connection that the hung requests hold
        self._probe_engine = sa.create_engine(engine.url, poolclass=sa.pool.NullPool, connect_args=connect_args)

        @event.listens_for(engine, "connect")
        @event.listens_for(engine, "after_cursor_execute")
        def _heard(*_args: Any) -> None:
            self.last = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the server last answered."""
        return time.monotonic() - self.last

    def probe(self) -> None:
        """Ask the server for ``SELECT 1`` in a daemon thread unless a probe is already waiting for it."""
        if not self._probing.acquire(blocking=False):
            return
        threading.Thread(target=self._probe, name="purebandits-db-probe", daemon=True).start()

    def _probe(self) -> None:
        try:
            if self._conn is None:  # kept open: a probe is then one round trip, not a new backend
                self._conn = self._probe_engine.connect()
            self._conn.exec_driver_sql("SELECT 1")
            self._conn.rollback()
            self.last = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - a failed probe is silence; the requests get 503
            log.debug("database probe failed: %s", exc)
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        finally:
            self._probing.release()


_LIVENESS: weakref.WeakKeyDictionary[Engine, Liveness] = weakref.WeakKeyDictionary()


def liveness(engine: Engine) -> Liveness | None:
    """The :class:`Liveness` of a PostgreSQL engine from :func:`make_engine`; None for SQLite (it has no server
    to hang: its waits are ``busy_timeout``'s) and for other engines."""
    return _LIVENESS.get(engine)


#: a pooled PostgreSQL connection idle longer than this is pinged when checked out (:func:`_ping_when_idle`)
IDLE_PING_SECONDS = 1.0


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection on checkout only if it sat idle in the pool for over ``IDLE_PING_SECONDS``.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: one more round trip per transaction,
    a third of a busy group-commit batch's. A connection in steady use needs none: if the server
    went away under it, its next statement fails as a disconnect, SQLAlchemy invalidates it and the
    pool's older connections (the request gets 503, safe to retry). A connection that waited in the
    pool (the server may have restarted meanwhile) is pinged first and silently replaced if dead
    (raising ``DisconnectionError`` at checkout makes the pool retry with a new one).
    """
    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:  # a new connection counts as just used
        record.info["purebandits_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("purebandits_idle_since")
        if since is not None and time.monotonic() - since <= IDLE_PING_SECONDS:  # module global: tests change it
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DisconnectionError(f"pooled connection is dead: {exc}") from exc


def _alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


#: a ``revision = "..."`` / ``down_revision = ...`` line of a migration script (annotated or not)
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


@functools.cache
def shipped_head() -> str | None:
    """The newest revision in ``migrations/versions``, read from its scripts' ``revision`` and ``down_revision``
    lines without importing Alembic or the scripts (their import and loading cost about 0.2 s of a core at
    every start of the service); tests/service/test_deployment.py checks it against Alembic's own head.

    None, so that :func:`upgrade` leaves it all to Alembic, unless every script names exactly one plain revision
    and one plain parent (or none) and exactly one revision is no script's parent."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = _REVISION_LINE.findall(path.read_text(encoding="utf-8"))
        names = sorted(name for name, _ in found)
        if names != ["down_revision", "revision"]:
            return None
        try:
            values = {name: ast.literal_eval(text) for name, text in found}
        except (ValueError, SyntaxError):
            return None
        if not isinstance(values["revision"], str) or not isinstance(values["down_revision"], (str, type(None))):
            return None  # a merge (a tuple of parents) or anything unusual: Alembic knows
        revisions.add(values["revision"])
        if values["down_revision"] is not None:
            parents.add(values["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 and parents <= revisions else None


def _stands_at(engine: Engine, revision: str) -> bool:
    """Whether ``alembic_version`` holds ``revision`` and nothing else (False if there is no such table; a database
    that cannot be reached raises, as the migrations would have, without a second wait for it)."""
    with engine.connect() as conn:
        try:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
        except sa.exc.DBAPIError:  # a new database: no alembic_version yet
            return False
    return len(rows) == 1 and rows[0][0] == revision


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` with the Alembic migrations kept in the package.

    A database that already stands at the head (every start but the first after an upgrade of the code) is
    left as it is after one query, without importing Alembic: its upgrade would apply nothing either."""
    if revision == "head" and (head := shipped_head()) is not None and _stands_at(engine, head):
        return
    from alembic import command

    cfg = _alembic_config(engine)
    with engine.connect() as conn:
        # a migration may rewrite big tables and wait for the service's transactions: no time limits
        if is_sqlite(engine):
            conn.connection.driver_connection.execute("PRAGMA busy_timeout=600000")  # type: ignore[union-attr]
            conn = conn.execution_options(sqlite_begin="IMMEDIATE")
        else:
            conn.exec_driver_sql("SET lock_timeout = 0")
            conn.exec_driver_sql("SET statement_timeout = 0")
            conn.commit()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()
        conn.invalidate()  # not back into the pool with the limits lifted


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at (None: not created yet)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    """The newest Alembic revision this code ships."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config(engine)).get_current_head()
