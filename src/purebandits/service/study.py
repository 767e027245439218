"""The crowdsourcing protocol, independent of HTTP: experiments, their learners, queries, answers.

One :class:`Study` per process drives registered learners through the ask/tell contract.
Spec validation lives in :mod:`~purebandits.service.validation`, the event log and its replay
in :mod:`~purebandits.service.eventlog`, and what owners read in
:mod:`~purebandits.service.reports`; this module holds the locked transactions and the
participant and owner operations built on them.

Several learners per experiment
-------------------------------
An experiment runs one or more learners on the same items, as NEXT ran several algorithms
side by side in the caption contests. Each has its own event log, version and snapshot; each
participant is assigned to one of them by share, sticky (a hash of experiment and participant
id, so every process agrees without storing anything).

Consistency
-----------
Every change to a learner happens in ONE database transaction that first locks it
(PostgreSQL ``SELECT ... FOR UPDATE`` on its ``learners`` row; SQLite ``BEGIN IMMEDIATE``,
the database's single write lock), then brings the process's cached learner up to the stored
``version`` by applying the events other processes appended since, then calls ``ask`` /
``tell`` / ``cancel``, appends the matching events and bumps the version. An answer is
acknowledged only after that transaction commits. If anything fails the cached learner is
dropped (it may hold uncommitted changes) and rebuilt from the log next time.

Repeats
-------
A participant is never handed the same item twice in a row and, with the default policy
``repeats="never"``, at most once per experiment while items they have not seen remain. The
learner still decides: the protocol asks it for candidates one by one (with ``never``, up to
as many as the participant has seen plus :data:`CANDIDATES_BEYOND_SEEN`, at most
:data:`MAX_CANDIDATES_NEVER`; else :data:`MAX_CANDIDATES`), serves the first this participant
may see and cancels the others through the contract (a cancelled pull is as if never asked,
so the decision rule's guarantee holds). The candidates passed over are stored with the
ask's event (``events.passed``), so replay asks and cancels them again and stays exact; an
ask that finds none it may serve logs them as one ``pass`` event and answers ``exhausted``. A
participant with a pending query gets that query again rather than a second one.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import logging
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from purebandits.base import Learner
from purebandits.service.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    RateLimited,
    ReplayError,
    ServiceError,
    Unauthorized,
    Unavailable,
    WouldBlock,
)
from purebandits.service.eventlog import (
    BatchWrites,
    HotStatements,
    LogTx,
    Rows,
    apply_log,
    canonical_state,
    learner_from_snapshot,
    read_checkpoint,
    read_snapshot,
    write_checkpoint,
    write_snapshot,
)
from purebandits.service.history import ActivityTally, history_point, history_rows, read_points, thin, write_point
from purebandits.service.lru import LRU
from purebandits.service.models import (
    checkpoints,
    events,
    experiments,
    history,
    images,
    items,
    learners,
    participants,
    queries,
    snapshots,
)
from purebandits.service.reports import (
    SUMMARY_COLUMNS,
    agreement,
    answers_rows,
    label_counts,
    logged_label_counts,
    participants_rows,
    ranking_page,
    ranking_rows,
    stopping_progress,
    summary_rows,
)
from purebandits.service.settings import Settings
from purebandits.service.storage import is_sqlite
from purebandits.service.validation import (
    DEFAULT_LABELS,
    LearnerSpec,
    check_participant_id,
    check_webhook_url,
    has_control,
    parse_items_csv,
    validate_spec,
)
from purebandits.service.warmup import warm_learners
from purebandits.service.webhooks import post_json

__all__ = ["Study", "DEFAULT_LABELS", "parse_items_csv", "hash_token", "SUMMARY_COLUMNS", "summary_rows",
           "MAX_CANDIDATES", "MAX_CANDIDATES_NEVER", "CANDIDATES_BEYOND_SEEN"]

log = logging.getLogger("purebandits.service")

STATUSES = ("active", "paused", "stopped", "archived")
#: a learner's activity (a scan of its answered queries) is computed at most this often per process, however
#: many dashboards poll it
ACTIVITY_TTL_MS = 3000
#: lazy expiry on ask runs at most this often per learner and process (the sweep also runs)
LAZY_EXPIRE_EVERY_MS = 1000
#: how many of the learner's candidates an ask looks through for one the participant may see:
#: with ``repeats="never"`` as many as the participant has seen plus this many (a learner may
#: want every seen item again first, as lil'UCB does in its first sweeps), else this many
CANDIDATES_BEYOND_SEEN = MAX_CANDIDATES = 16
#: the bound on candidates per ask with ``repeats="never"`` (each is one ``ask`` of the learner, under its lock)
MAX_CANDIDATES_NEVER = 256
#: participant ids a process remembers as registered (others are looked up in the database)
MAX_KNOWN_PARTICIPANTS = 100_000
#: learners whose activity tally and history points one server process keeps (the ones asked for last)
MAX_REPORT_CACHES = 64


def hash_token(token: str) -> str:
    """Owner tokens are stored as their SHA-256 (hex); a database leak does not reveal them."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A random owner token (32 URL-safe characters) that does not start with '-' (a command line would read
    ``--token -x...`` as an option)."""
    while True:
        token = secrets.token_urlsafe(24)
        if token[0].isalnum():
            return token


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Meta:
    """The immutable part of an experiment, cached per process."""

    id: int
    name: str
    k: int
    n_arms: int
    labels: list[dict[str, Any]]
    created_ms: int
    expiry_s: float
    learners: list[LearnerSpec]
    instructions: str | None
    repeats: str
    answers_per_participant: int | None
    code_secret: str
    has_image: bool
    items: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rewards(self) -> dict[str, float]:
        return {lab["name"]: float(lab["reward"]) for lab in self.labels}

    def assign(self, pid: str) -> int:
        """The learner participant ``pid`` is assigned to: by share, sticky (a hash, same in every process)."""
        if len(self.learners) == 1:
            return 0
        h = hashlib.sha256(f"{self.id}:{pid}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2.0**64
        acc = 0.0
        for i, ls in enumerate(self.learners):
            acc += ls.share
            if u < acc:
                return i
        return len(self.learners) - 1

    def learner_index(self, label: str | None) -> int:
        """Index of the learner called ``label`` (the first one if None); NotFound otherwise."""
        if label is None:
            return 0
        for i, ls in enumerate(self.learners):
            if ls.label == label:
                return i
        raise NotFound(f"experiment {self.id} has no learner {label!r}; its learners: "
                       f"{[ls.label for ls in self.learners]}")

    def completion_code(self, pid: str) -> str:
        """The code a participant who reached ``answers_per_participant`` is shown (an HMAC the owner can check)."""
        mac = hmac.new(self.code_secret.encode(), f"{self.id}:{pid}".encode(), hashlib.sha256).digest()
        return base64.b32encode(mac[:10]).decode()[:12]


class _Due(NamedTuple):
    """What a learner's changes in a transaction still have to write: a snapshot (its version crossed a
    multiple of ``snapshot_every``), a history point, and whether it stopped in this transaction."""

    snapshot: bool
    history: bool
    stopped: bool


@dataclass
class _Cached:
    version: int
    learner: Learner


class _Query:
    """One ``queries`` row as a batch sees it (kept current as the batch's ops change it)."""

    __slots__ = ("id", "arm", "status", "expires_ms", "label", "reward")

    def __init__(self, id: str, arm: int, status: str, expires_ms: int, label: str | None = None,
                 reward: float | None = None) -> None:
        self.id, self.arm, self.status, self.expires_ms, self.label, self.reward = \
            id, arm, status, expires_ms, label, reward


class _BatchQueries:
    """The ``queries`` rows a batch of asks and answers reads: per op (SQLite, where a read costs no round
    trip), or, with ``prefetch`` (PostgreSQL), the rows of every participant and query in the batch in two
    statements sent with the learners' locks (:meth:`reads`, rows given to :meth:`load`), then kept current by
    the batch's own writes (its asks, answers and cancels), so each op costs no round trip and reads exactly
    what it would have read from the database at its turn."""

    def __init__(self, hot: HotStatements, eid: int, ops: list[tuple[str, ...]], prefetch: bool) -> None:
        self.hot, self.eid, self.prefetch = hot, eid, prefetch
        self.conn: Connection | None = None  # the batch's connection, set once it is locked
        self._seen: dict[str, list[_Query]] = {}
        self._by_id: dict[str, _Query] = {}
        self._pids = sorted({op[1] for op in ops if op[0] == "ask"}) if prefetch else []
        self._qids = sorted({op[2] for op in ops if op[0] == "answer"}) if prefetch else []

    def reads(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The hot statements that prefetch the batch's rows (none without ``prefetch``)."""
        return [*([("sel_seen_many", (self.eid, self._pids))] if self._pids else []),
                *([("sel_query_many", (self._qids,))] if self._qids else [])]

    def load(self, conn: Connection, fetched: list[Rows]) -> None:
        """Bind the batch's connection and take the rows of :meth:`reads`, in its order."""
        self.conn = conn
        it = iter(fetched)
        if self._pids:
            self._seen = {pid: [] for pid in self._pids}
            for r in next(it).rows:
                q = _Query(r.id, r.arm, r.status, r.expires_ms)
                self._seen[r.participant_id].append(q)
                self._by_id[q.id] = q
        if self._qids:
            for r in next(it).rows:
                q = self._by_id.get(r.id)
                if q is None:
                    self._by_id[r.id] = _Query(r.id, r.arm, r.status, r.expires_ms, r.label, r.reward)
                else:
                    q.label, q.reward = r.label, r.reward

    def seen(self, pid: str) -> list[Any]:
        """The participant's queries in this experiment, oldest first."""
        if not self.prefetch:
            return self.hot(self.conn, "sel_seen", self.eid, pid).rows
        return self._seen[pid]

    def query(self, qid: str) -> Any:
        """The query ``qid`` (it exists: :meth:`Study.prepare_answer` found it)."""
        if not self.prefetch:
            return self.hot(self.conn, "sel_query", qid).one()
        q = self._by_id.get(qid)
        if q is None:
            raise sa.exc.NoResultFound("expected exactly one row")
        return q

    def asked(self, pid: str, qid: str, arm: int, expires_ms: int) -> None:
        if self.prefetch:
            q = self._by_id[qid] = _Query(qid, arm, "pending", expires_ms)
            self._seen.setdefault(pid, []).append(q)

    def answered(self, qid: str, label: str, reward: float) -> None:
        q = self._by_id.get(qid)
        if q is not None:
            q.status, q.label, q.reward = "answered", label, reward

    def expired(self, qid: str) -> None:
        q = self._by_id.get(qid)
        if q is not None:
            q.status = "expired"


class Study:
    """Experiments over a SQL database, driving registered learners; one per process.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        SQLite or PostgreSQL engine from :func:`purebandits.service.storage.make_engine`.
    settings : Settings
        Expiry, snapshot frequency, admin token.
    clock : callable, optional
        Returns the time in epoch milliseconds (tests inject a fake clock).
    """

    def __init__(self, engine: Engine, settings: Settings, clock: Callable[[], int] | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock or _now_ms
        self._sqlite = is_sqlite(engine)
        # bounded: a miss only costs a reload from the database (settings.cache_experiments)
        items_budget = max(1, int(settings.cache_items))
        self._meta: LRU = LRU(max(1, int(settings.cache_experiments)), items_budget, lambda m: m.n_arms)
        self._cache: LRU = LRU(max(1, int(settings.cache_experiments)), items_budget,
                               lambda c: c.learner.n_arms_)
        self._locks: dict[tuple[int, int], threading.Lock] = {}
        self._global = threading.Lock()
        self._known_participants: LRU = LRU(MAX_KNOWN_PARTICIPANTS)
        self._last_expire: dict[tuple[int, int], int] = {}
        self._activity: dict[tuple[int, int], tuple[int, dict[str, Any]]] = {}  # (eid, idx) -> (when, activity)
        # what the owners' reports keep per learner, for the MAX_REPORT_CACHES learners asked for last (a
        # contest of a million answers: ~1 MB of tally and ~30 MB of history points): (eid, idx) -> its
        # activity tally, and -> (the experiment's created_ms, its history points read so far, their lock)
        self._tallies: LRU = LRU(MAX_REPORT_CACHES)
        self._points: LRU = LRU(MAX_REPORT_CACHES)
        self._reports_lock = threading.Lock()
        # (eid, idx) -> (version, answers per (arm, label) at that version): the owners' polls add the
        # answers logged since instead of counting every answer again
        self._counts: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        # pending queries issued here: id -> (eid, pid, learner); entries leave on answer / expiry,
        # so the map stays as large as the pending set (memory must not grow with the answers)
        self._query_owner: dict[str, tuple[int, str, int]] = {}
        self._x = HotStatements(engine)
        self._hot: tuple[int, Connection] | None = None  # (thread id, connection): see _loop_connection
        self._local = threading.local()  # .nowait: see nowait()
        self._wait = max(0.001, float(settings.db_wait_seconds))

    # ------------------------------------------------------------------ connections and locks
    @contextmanager
    def nowait(self) -> Iterator[None]:
        """Run the block on this thread without ever waiting: :class:`WouldBlock` instead.

        The event loop runs participant work inside this (see
        :class:`~purebandits.service.dispatch.Dispatcher`): on SQLite through its own connection
        with no busy wait, taking in-process locks only when free; on PostgreSQL only work that
        needs no database at all (cached settings, known participants). Whatever would wait
        raises :class:`WouldBlock` before anything is committed, and the caller hands the same
        call to a worker thread, where waits are bounded by ``db_wait_seconds``.
        """
        self._local.nowait = True
        try:
            yield
        finally:
            self._local.nowait = False

    def _nowait(self) -> bool:
        return getattr(self._local, "nowait", False)

    def _lock(self, eid: int, idx: int) -> threading.Lock:
        # SQLite has one writer: serialising in-process writers on one lock avoids busy-waiting
        if self._sqlite:
            return self._global
        key = (eid, idx)
        lock = self._locks.get(key)
        if lock is None:
            with self._global:
                lock = self._locks.setdefault(key, threading.Lock())
        return lock

    @contextmanager
    def _hold(self, lock: threading.Lock) -> Iterator[None]:
        """Hold ``lock``, waiting at most ``db_wait_seconds`` (503 after), or not at all in :meth:`nowait`."""
        if self._nowait():
            if not lock.acquire(blocking=False):
                raise WouldBlock("lock held")
        elif not lock.acquire(timeout=self._wait):
            raise Unavailable(f"busy: no turn within {self._wait:g} s; retry shortly")
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        if self._nowait():
            if not self._sqlite:
                raise WouldBlock("PostgreSQL work runs in a worker thread")
            hot = self._loop_connection()
            if hot is not None:
                # the event loop's own connection: no pool checkout / reset per transaction, no busy wait
                hot.execution_options(sqlite_begin="IMMEDIATE" if write else "DEFERRED")
                try:
                    with hot.begin():
                        yield hot
                except sa.exc.OperationalError as exc:
                    if _sqlite_busy(exc):
                        raise WouldBlock("database locked") from exc
                    raise
                finally:
                    if hot.invalidated or hot.in_transaction():
                        self._drop_loop_connection()
                return
        with self.engine.connect() as conn:
            if write and self._sqlite:
                conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn

    def _loop_connection(self) -> Connection | None:
        """SQLite: one connection kept by the thread running the event loop, else None.

        The participant endpoints run their transactions on the event loop when they need not
        wait, one at a time, so that thread keeps one connection instead of checking one out of
        the pool (and resetting it) for every transaction, ~12 % of the server's CPU per answer.
        It never waits for SQLite's write lock (``busy_timeout`` 0: the work goes to a thread
        instead) and never checkpoints the WAL (``wal_autocheckpoint`` 0: :meth:`checkpoint`
        does that from a thread), so the loop does no fsync.
        """
        hot = self._hot
        if hot is not None and hot[0] == threading.get_ident():
            return None if hot[1].in_transaction() else hot[1]  # nested use: take one from the pool
        if hot is not None:
            return None  # another loop thread owns it; this one uses the pool
        conn = self.engine.connect()
        driver = conn.connection.driver_connection
        driver.execute("PRAGMA busy_timeout=0")  # type: ignore[union-attr]
        driver.execute("PRAGMA wal_autocheckpoint=0")  # type: ignore[union-attr]
        self._hot = (threading.get_ident(), conn)
        return conn

    def _drop_loop_connection(self) -> None:
        hot, self._hot = self._hot, None
        if hot is not None:
            with suppress(Exception):
                hot[1].close()

    def checkpoint(self) -> None:
        """SQLite: copy the WAL into the database file (``PRAGMA wal_checkpoint(PASSIVE)``); else nothing.

        Run from a worker thread (the expiry sweep), as the event loop's connection never does it.
        """
        if self._sqlite:
            with self.engine.connect() as conn:
                conn.connection.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]

    def close(self) -> None:
        """Release the event loop's connection (call before ``engine.dispose()``)."""
        self._drop_loop_connection()

    @contextmanager
    def _locked(self, eid: int, idx: int = 0, write: bool = True) -> Iterator[tuple[Connection, Any, LogTx]]:
        """Lock learner ``idx`` of experiment ``eid``; yield (connection, its row, a LogTx on the synced learner).

        The caller appends events through the LogTx; the version (and a snapshot every
        ``snapshot_every`` events, and the moment the learner stopped) is written back on
        exit, and the transaction commits when the block ends without an exception.
        """
        with self._locked_many(eid, [idx], write) as (conn, parts, _):
            row, tx = parts[idx]
            yield conn, row, tx

    @contextmanager
    def _locked_many(self, eid: int, idxs: list[int], write: bool = True,
                     reads: list[tuple[str, tuple[Any, ...]]] | None = None,
                     ) -> Iterator[tuple[Connection, dict[int, tuple[Any, LogTx]], list[Rows]]]:
        """:meth:`_locked` for several learners of ``eid`` in ONE transaction (one commit for all of them).

        Learners are locked in increasing index, in every code path, so two transactions never
        wait for each other in a cycle. ``reads`` are hot read statements ``(name, params)`` run
        right after the locks. Yields (connection, {idx: (row, LogTx)}, the reads' rows).

        A write transaction buffers its hot row writes (:class:`~purebandits.service.eventlog.BatchWrites`).
        On PostgreSQL it runs in psycopg's pipeline mode from its first statement: BEGIN, the
        locks and ``reads`` go out together and cost one round trip; the buffered writes, the
        version updates and, when nothing else is due in the transaction (a snapshot, a history
        point, the experiment's stop), the COMMIT go out together at the end and cost one more. A
        learner behind the database (another process wrote) leaves pipeline mode to catch up.
        """
        meta = self.meta(eid)
        idxs = sorted(set(idxs))
        reads = reads or []
        txs: dict[int, LogTx] = {}
        ok = False
        with ExitStack() as held:
            for lock in dict.fromkeys(self._lock(eid, i) for i in idxs):  # SQLite: one lock for all
                held.enter_context(self._hold(lock))
            try:
                with self._connect(write) as conn, ExitStack() as pipe:
                    pipelined = write and not self._sqlite
                    if pipelined:
                        pipe.enter_context(self._pipeline(conn, write))
                    stmt = "lock_learner_update" if write else "lock_learner"
                    locks = [self._x.send(conn, stmt, eid, idx) for idx in idxs]
                    sent = [self._x.send(conn, name, *params) for name, params in reads]
                    rows = [self._x.fetch(conn, stmt, cur).first() for cur in locks]
                    fetched = [self._x.fetch(conn, name, cur) for (name, _), cur in zip(reads, sent, strict=True)]
                    parts: dict[int, tuple[Any, LogTx]] = {}
                    start_pulls: dict[int, int] = {}
                    writes = BatchWrites(self._x)
                    for idx, row in zip(idxs, rows, strict=True):
                        if row is None:
                            self._forget(eid)
                            raise NotFound(f"experiment {eid} does not exist")
                        learner = self._cached_learner(meta, idx, int(row.version))
                        if learner is None:
                            pipe.close()  # catching up reads through SQLAlchemy: out of pipeline mode
                            learner = self._sync(conn, meta, idx, int(row.version))
                            if pipelined:
                                pipe.enter_context(self._pipeline(conn, write))
                        txs[idx] = LogTx(self._x, conn, eid, idx, int(row.version), learner)
                        start_pulls[idx] = learner.n_pulls
                        parts[idx] = (row, txs[idx])
                    if write:
                        writes.install(conn)
                    try:
                        yield conn, parts, fetched
                        if write:
                            writes.flush(conn)
                    finally:
                        writes.uninstall(conn)
                    for idx, (row, tx) in parts.items():
                        if tx.version != row.version:
                            self._x(conn, "upd_version", tx.version, eid, idx)
                            if tx.learner.done and row.done_ms is None:
                                self._x(conn, "upd_done", self.clock(), tx.learner.n_pulls, eid, idx)
                    due = {idx: self._due(row, tx, start_pulls[idx]) for idx, (row, tx) in parts.items()}
                    if pipelined and not any(any(d) for d in due.values()):
                        # the common case: nothing else to write, so the COMMIT goes out with the writes and
                        # the pipeline's closing sync waits for it (an error there fails the whole batch)
                        self._x.commit(conn)
                    pipe.close()
                    for idx, (_, tx) in parts.items():
                        if due[idx].snapshot:
                            write_snapshot(conn, eid, idx, tx.version, tx.learner, self.clock())
                    self._after_changes(conn, meta, parts, due)
                ok = True
                for idx, tx in txs.items():
                    self._cache[(eid, idx)] = _Cached(tx.version, tx.learner)
            except ServiceError:
                # refusals are raised before any change; keep the caches unless events were appended
                ok = all(tx.version == tx.start_version for tx in txs.values())
                raise
            finally:
                if not ok:
                    for idx in txs:  # synced learners may hold uncommitted changes
                        self._cache.pop((eid, idx), None)

    def _due(self, row: Any, tx: LogTx, start_pulls: int) -> _Due:
        """What one learner's changes in this transaction still have to write after its hot statements (row:
        its locked learners row; ``start_pulls``: its answers when the transaction began). The one place these
        conditions are stated: the batch commits early when none is due, and writes what is."""
        if tx.version == row.version:
            return _Due(False, False, False)
        snap, hist = max(1, int(self.settings.snapshot_every)), int(self.settings.history_every)
        stopped = bool(tx.learner.done and row.done_ms is None)
        return _Due(snapshot=tx.version // snap > int(row.version) // snap,
                    history=hist > 0 and (stopped or tx.learner.n_pulls // hist > start_pulls // hist),
                    stopped=stopped)

    def _after_changes(self, conn: Connection, meta: _Meta, parts: dict[int, tuple[Any, LogTx]],
                       due: dict[int, _Due]) -> None:
        """In the transaction that changed the learners: a history point for each learner whose answers
        crossed a multiple of ``history_every`` or that stopped; when the last learner stops, the
        experiment stops too if its owner asked for it (``auto_stop``)."""
        for idx, (_, tx) in parts.items():
            if due[idx].history:
                point = history_point(tx.learner, meta.learners[idx].params, meta.k)
                write_point(conn, meta.id, idx, point, self.clock())
        if any(d.stopped for d in due.values()) and conn.execute(
                sa.select(sa.func.count()).select_from(learners).where(
                    learners.c.experiment_id == meta.id, learners.c.done_ms.is_(None))).scalar_one() == 0:
            conn.execute(experiments.update().where(
                experiments.c.id == meta.id, experiments.c.auto_stop.is_(True),
                experiments.c.status.in_(("active", "paused"))).values(status="stopped"))

    def _pipeline(self, conn: Connection, write: bool) -> Any:
        """PostgreSQL writes: psycopg's pipeline mode, so statements whose rows nobody reads (the inserts and
        updates of a batch) go out without a round trip each, with the next read; errors still surface
        before the commit. Only :class:`HotStatements` run inside (they fetch a read's rows explicitly;
        SQLAlchemy would take a queued SELECT for one without rows)."""
        if self._sqlite or not write:
            return nullcontext()
        return self._x.pipeline(conn)

    def _forget(self, eid: int) -> None:
        """Drop what this process cached of ``eid`` (it was deleted)."""
        self._meta.pop(eid, None)
        with self._reports_lock:
            reports = [*self._tallies, *self._points]
        for key in [k for k in (*self._cache, *self._last_expire, *self._activity, *self._counts, *reports)
                    if k[0] == eid]:
            self._cache.pop(key, None)
            self._last_expire.pop(key, None)
            self._activity.pop(key, None)
            self._counts.pop(key, None)
            with self._reports_lock:
                self._tallies.pop(key, None)
                self._points.pop(key, None)

    # ------------------------------------------------------------------ learner state
    def meta(self, eid: int) -> _Meta:
        """The experiment's immutable settings, learners and items (cached); NotFound if absent."""
        m = self._meta.get(eid)
        if m is not None:
            return m
        with self._connect(False) as conn:
            row = conn.execute(sa.select(experiments).where(experiments.c.id == eid)).first()
            if row is None:
                raise NotFound(f"experiment {eid} does not exist")
            its = conn.execute(
                sa.select(items.c.arm, items.c.external_id, items.c.text, items.c.image_url)
                .where(items.c.experiment_id == eid).order_by(items.c.arm)
            ).all()
            lrs = conn.execute(sa.select(learners).where(learners.c.experiment_id == eid)
                               .order_by(learners.c.idx)).all()
            has_image = conn.execute(sa.select(sa.func.count()).select_from(images)
                                     .where(images.c.experiment_id == eid)).scalar_one() > 0
            secret = row.code_secret
            if secret is None:  # experiments from before revision 0002 get one on first use
                secret = secrets.token_hex(32)
        if row.code_secret is None:
            with self._connect(True) as conn:
                conn.execute(experiments.update().where(experiments.c.id == eid, experiments.c.code_secret.is_(None))
                             .values(code_secret=secret))
                secret = conn.execute(sa.select(experiments.c.code_secret).where(experiments.c.id == eid)).scalar()
        m = _Meta(
            id=row.id, name=row.name, k=row.k, n_arms=row.n_arms, labels=list(row.labels),
            created_ms=int(row.created_ms),
            expiry_s=float(row.query_expiry_seconds or self.settings.query_expiry_seconds),
            learners=[LearnerSpec(label=r.label, algorithm=r.algorithm, params=dict(r.params), share=float(r.share),
                                  seed=int(r.seed)) for r in lrs],
            instructions=row.instructions, repeats=row.repeats, answers_per_participant=row.answers_per_participant,
            code_secret=secret, has_image=has_image,
            items=[{"arm": r.arm, "id": r.external_id, "text": r.text, "image_url": r.image_url} for r in its],
        )
        self._meta[eid] = m
        return m

    def _cached_learner(self, meta: _Meta, idx: int, version: int) -> Learner | None:
        """The cached learner if it is at ``version`` (no database work), else None (:meth:`_sync` catches up)."""
        cached = self._cache.get((meta.id, idx))
        return cached.learner if cached is not None and cached.version == version else None

    def _sync(self, conn: Connection, meta: _Meta, idx: int, version: int) -> Learner:
        """The cached learner brought to ``version`` (catch-up, snapshot or full replay)."""
        key = (meta.id, idx)
        cached = self._cache.get(key)
        if cached is not None and cached.version == version:
            return cached.learner
        if cached is not None and cached.version < version:
            try:
                apply_log(conn, meta.id, idx, cached.learner, cached.version, version)
                cached.version = version
                return cached.learner
            except ReplayError:
                log.warning("experiment %s learner %s: catch-up replay diverged; rebuilding from the log", meta.id, idx)
        self._cache.pop(key, None)
        spec = meta.learners[idx]
        snap = read_snapshot(conn, meta.id, idx)
        if snap is not None and snap[0] <= version:
            learner, start = learner_from_snapshot(spec.algorithm, spec.params, snap[1]), snap[0]
        else:
            learner, start = spec.fresh(meta.n_arms), 0
        apply_log(conn, meta.id, idx, learner, start, version)
        self._cache[key] = _Cached(version, learner)
        return learner

    def _version(self, conn: Connection, eid: int, idx: int) -> int:
        v = conn.execute(sa.select(learners.c.version).where(learners.c.experiment_id == eid,
                                                             learners.c.idx == idx)).scalar()
        if v is None:
            raise NotFound(f"experiment {eid} has no learner {idx}")
        return int(v)

    def replay(self, eid: int, upto: int | None = None, learner: int = 0) -> Learner:
        """A fresh learner with learner ``learner``'s seed, fed its whole event log (up to ``upto``)."""
        meta = self.meta(eid)
        with self._connect(False) as conn:
            if upto is None:
                upto = self._version(conn, eid, learner)
            out = meta.learners[learner].fresh(meta.n_arms)
            apply_log(conn, eid, learner, out, 0, upto)
        return out

    def verify(self, eid: int, full: bool = False) -> dict[str, Any]:
        """Check every learner of ``eid``: replay its log, compare with its snapshot, cache the replayed learner
        and store it as the learner's snapshot and verified checkpoint at the current version.

        Incremental by default: the replay starts from the learner's verified checkpoint (a state a
        previous replay computed; see :mod:`~purebandits.service.eventlog`), so it costs the events
        after it, not the whole log. It starts from the beginning instead when ``full``, when there is
        no checkpoint, or when the checkpoint is corrupt (its state no longer hashes to its SHA-256) or
        cannot be replayed from; and a snapshot that differs from the replay from the checkpoint is
        settled by a full replay too (each of these is logged as a warning).

        The replay runs without the learner's lock (the log up to a version is never rewritten);
        only the last step, which replays what was appended meanwhile and writes, holds it.

        Returns ``{"snapshot_matches", "replayed", "learners": [{"label", "version", "snapshot_version",
        "snapshot_matches", "replayed", "replayed_from", "full_replay", "checkpoint"}]}``: ``snapshot_matches``
        is False if any snapshot differed from the replay (it is replaced by the replayed state), None if
        none was checked; ``replayed`` counts the events replayed (a full replay after a replay from the
        checkpoint counts both); ``replayed_from`` is the version the final replay started from;
        ``full_replay`` whether it replayed the whole log; ``checkpoint`` is ``"ok"``, ``"missing"``, ``"corrupt"``,
        ``"unusable"`` (it did not replay) or ``"skipped"`` (``full``).
        """
        meta = self.meta(eid)
        report = [self._verify_learner(meta, idx, full) for idx in range(len(meta.learners))]
        return {"snapshot_matches": _combine([r["snapshot_matches"] for r in report]),
                "replayed": sum(r["replayed"] for r in report), "learners": report}

    #: events read per statement by a long replay (the whole log of a big experiment does not fit in memory)
    REPLAY_CHUNK = 50_000

    #: the background replay (:meth:`advance_checkpoints`) goes in slices of this many events with a pause
    #: between them, so the event loop's thread is not kept waiting for the GIL for a whole round's replay
    BACKGROUND_SLICE, BACKGROUND_PAUSE_S = 500, 0.002

    def _replay(self, eid: int, idx: int, learner: Learner, after: int, upto: int,
                snap: tuple[int, str] | None, background: bool = False) -> tuple[int, bool | None]:
        """Replay events ``after < seq <= upto`` into ``learner`` (read transactions of :attr:`REPLAY_CHUNK`
        events, or :attr:`BACKGROUND_SLICE` with a pause after each in the ``background``; no lock: they are
        committed and never rewritten) and compare with ``snap`` when the replay passes its version; returns
        (events replayed, whether the snapshot matched or None if not passed)."""
        chunk = self.BACKGROUND_SLICE if background else self.REPLAY_CHUNK
        stops = sorted({*range(after + chunk, upto, chunk), upto})
        if snap is not None and after < snap[0] < upto:
            stops = sorted({*stops, snap[0]})
        matches: bool | None = None
        if snap is not None and snap[0] == after:
            matches = canonical_state(snap[1]) == learner.state_json()
        at = after
        for stop in stops:
            with self._connect(False) as conn:
                apply_log(conn, eid, idx, learner, at, stop)
            at = stop
            if snap is not None and stop == snap[0] and stop != after:
                matches = canonical_state(snap[1]) == learner.state_json()
            if background and stop != upto:
                time.sleep(self.BACKGROUND_PAUSE_S)
        return upto - after, matches

    def _verify_learner(self, meta: _Meta, idx: int, full: bool) -> dict[str, Any]:
        eid, spec = meta.id, meta.learners[idx]
        # the checkpoint, then the version, then the snapshot: a snapshot at or below the version read is
        # the one of that version's transaction or a later one (it only moves forward)
        with self._connect(False) as conn:
            ck = read_checkpoint(conn, eid, idx)
            version = self._version(conn, eid, idx)
            snap = read_snapshot(conn, eid, idx)
        learner: Learner | None = None
        start, status = 0, "skipped" if full else "missing"
        if not full and ck is not None:
            status = "ok"
            if not ck.intact:
                status = "corrupt"
                log.warning("experiment %s learner %s: verified checkpoint at version %s is corrupt (its SHA-256 "
                            "does not match); replaying the whole log", eid, spec.label, ck.version)
            elif ck.version > version:
                status = "corrupt"
                log.warning("experiment %s learner %s: verified checkpoint at version %s is past the log's end (%s); "
                            "replaying the whole log", eid, spec.label, ck.version, version)
            else:
                try:
                    learner, start = learner_from_snapshot(spec.algorithm, spec.params, ck.state), ck.version
                except Exception as exc:  # a state that does not load is as good as corrupt
                    status = "unusable"
                    log.warning("experiment %s learner %s: verified checkpoint at version %s does not load (%s); "
                                "replaying the whole log", eid, spec.label, ck.version, exc)
        checked = snap if snap is not None and snap[0] <= version else None
        replayed, matches = 0, None
        if learner is not None:
            try:
                replayed, matches = self._replay(eid, idx, learner, start, version, checked)
            except ReplayError as exc:
                status, learner = "unusable", None
                log.warning("experiment %s learner %s: replay from the verified checkpoint at version %s failed (%s); "
                            "replaying the whole log", eid, spec.label, start, exc)
        if learner is not None and matches is False:
            log.warning("experiment %s learner %s: snapshot at version %s differs from the replay from the verified "
                        "checkpoint at version %s; replaying the whole log to settle it", eid, spec.label,
                        checked[0] if checked else None, start)
        whole = learner is None or matches is False
        if whole:
            from_checkpoint = learner
            learner, start = spec.fresh(meta.n_arms), 0
            n, full_matches = self._replay(eid, idx, learner, 0, version, checked)
            replayed += n
            if from_checkpoint is not None and from_checkpoint.state_json() != learner.state_json():
                log.warning("experiment %s learner %s: the verified checkpoint disagrees with the full replay; "
                            "both the snapshot and the checkpoint are replaced", eid, spec.label)
            matches = full_matches
        if matches is False:
            log.warning("experiment %s learner %s: snapshot at version %s differs from the replay of the event log; "
                        "using the replay", eid, spec.label, checked[0] if checked else None)
        # the short locked step: what was appended meanwhile, then the writes
        with self._hold(self._lock(eid, idx)):
            self._cache.pop((eid, idx), None)
            with self._connect(True) as conn:
                row = self._x(conn, "lock_learner_update", eid, idx).first()
                if row is None:
                    self._forget(eid)
                    raise NotFound(f"experiment {eid} does not exist")
                head = int(row.version)
                if head > version:
                    now_snap = read_snapshot(conn, eid, idx)
                    at = version
                    if now_snap is not None and version < now_snap[0] <= head:
                        replayed += apply_log(conn, eid, idx, learner, at, now_snap[0])
                        at = now_snap[0]
                        late = canonical_state(now_snap[1]) == learner.state_json()
                        matches = _combine([matches, late])
                    replayed += apply_log(conn, eid, idx, learner, at, head)
                state, now = learner.state_json(), self.clock()
                write_checkpoint(conn, eid, idx, head, state, now, force=True)
                current = read_snapshot(conn, eid, idx)
                if current is None or current[0] != head or matches is False:
                    write_snapshot(conn, eid, idx, head, learner, now)
            self._cache[(eid, idx)] = _Cached(head, learner)
        return {"label": spec.label, "version": head, "snapshot_version": None if snap is None else snap[0],
                "snapshot_matches": matches, "replayed": replayed, "replayed_from": start, "full_replay": whole,
                "checkpoint": status}

    def verify_all(self, full: bool = False) -> dict[int, dict[str, Any]]:
        """:meth:`verify` of every experiment, by id (what startup runs; ``full`` replays every log whole)."""
        with self._connect(False) as conn:
            ids = [r.id for r in conn.execute(sa.select(experiments.c.id).order_by(experiments.c.id))]
        out = {}
        for eid in ids:
            with suppress(NotFound):  # deleted meanwhile
                out[eid] = self.verify(eid, full=full)
        return out

    #: a claim on advancing a checkpoint that its process left for this long (it died) is taken over
    CHECKPOINT_CLAIM_MS = 120_000

    def advance_checkpoints(self, max_events: int = 20_000) -> dict[str, int]:
        """Move every learner's verified checkpoint up to its current version by replaying the events after it
        (at most ``max_events`` per learner per call), checking the snapshot the replay passes; returns
        ``{"learners", "replayed", "repaired"}``.

        Runs in the background (see :func:`purebandits.service.app.create_app`), so that a restart
        replays only the few events after the last checkpoint. The replay holds no lock (the log up
        to a version is never rewritten) and the promotion is one short write that only moves the
        checkpoint forward; of several server processes one claims each learner's replay
        (``claim_ms``), the others skip it. A snapshot that differs from the replay, or a checkpoint
        that is corrupt or does not replay, is repaired as :meth:`verify` repairs it (a full replay,
        then both rewritten), with a warning.
        """
        now = self.clock()
        stale = now - self.CHECKPOINT_CLAIM_MS
        unclaimed = sa.or_(checkpoints.c.claim_ms.is_(None), checkpoints.c.claim_ms < stale)
        with self._connect(False) as conn:
            due = conn.execute(
                sa.select(checkpoints.c.experiment_id, checkpoints.c.learner, checkpoints.c.version)
                .join(learners, sa.and_(learners.c.experiment_id == checkpoints.c.experiment_id,
                                        learners.c.idx == checkpoints.c.learner))
                .where(learners.c.version > checkpoints.c.version, unclaimed)
                .order_by(checkpoints.c.experiment_id, checkpoints.c.learner)).all()
        out = {"learners": 0, "replayed": 0, "repaired": 0}
        for eid, idx, vc in due:
            with self._connect(True) as conn:
                won = conn.execute(checkpoints.update().where(
                    checkpoints.c.experiment_id == eid, checkpoints.c.learner == idx, checkpoints.c.version == vc,
                    unclaimed).values(claim_ms=now)).rowcount == 1
            if not won:
                continue
            try:
                n, repaired = self._advance(int(eid), int(idx), max_events)
            except NotFound:
                continue
            finally:
                with self._connect(True) as conn:
                    conn.execute(checkpoints.update().where(
                        checkpoints.c.experiment_id == eid, checkpoints.c.learner == idx,
                        checkpoints.c.claim_ms == now).values(claim_ms=None))
            out["learners"] += 1
            out["replayed"] += n
            out["repaired"] += int(repaired)
        return out

    def _advance(self, eid: int, idx: int, max_events: int) -> tuple[int, bool]:
        """One learner's share of :meth:`advance_checkpoints`: (events replayed, whether it was repaired)."""
        meta = self.meta(eid)
        spec = meta.learners[idx]
        with self._connect(False) as conn:
            ck = read_checkpoint(conn, eid, idx)
            version = self._version(conn, eid, idx)
            snap = read_snapshot(conn, eid, idx)
        if ck is None or ck.version >= version:
            return 0, False
        problem = None
        if not ck.intact:
            problem = f"verified checkpoint at version {ck.version} is corrupt (its SHA-256 does not match)"
        else:
            upto = min(version, ck.version + max(1, int(max_events)))
            try:
                learner = learner_from_snapshot(spec.algorithm, spec.params, ck.state)
                n, matches = self._replay(eid, idx, learner, ck.version, upto,
                                          snap if snap is not None and snap[0] <= upto else None, background=True)
            except ReplayError as exc:
                problem = f"replay from the verified checkpoint at version {ck.version} failed ({exc})"
            else:
                if matches is False:
                    problem = (f"snapshot at version {snap[0] if snap else None} differs from the replay from the "
                               f"verified checkpoint at version {ck.version}")
                else:
                    with self._connect(True) as conn:
                        write_checkpoint(conn, eid, idx, upto, learner.state_json(), self.clock())
                    return n, False
        log.warning("experiment %s learner %s: %s; repairing by a full replay", eid, spec.label, problem)
        r = self._verify_learner(meta, idx, full=True)
        return r["replayed"], True

    # ------------------------------------------------------------------ owners
    def create_experiment(self, spec: dict[str, Any], origin: str | None = None) -> tuple[int, str]:
        """Validate ``spec`` (see :func:`~purebandits.service.validation.validate_spec`) and create the
        experiment; returns (id, owner token). Nothing is created when the spec is refused.

        A create from client address ``origin`` counts against its limit (``create_rate_per_second`` /
        ``create_burst``, shared by every process through the database); the routes pass it only
        when the server has no admin token (anyone may create).
        """
        s = validate_spec(spec)
        token = new_token()
        now, source = self.clock(), origin_hash(origin)
        with self._connect(True) as conn:
            if source is not None:
                self._admit(conn, experiments, source, now, self.settings.create_rate_per_second,
                            self.settings.create_burst, "new experiments from this address")
            eid = conn.execute(experiments.insert().values(origin=source,
                name=s.name, k=s.k, n_arms=len(s.items), labels=s.labels, status="active",
                owner_token_hash=hash_token(token), query_expiry_seconds=s.query_expiry_seconds, created_ms=now,
                instructions=s.instructions, repeats=s.repeats, answers_per_participant=s.answers_per_participant,
                code_secret=secrets.token_hex(32),
            ).returning(experiments.c.id)).scalar_one()
            conn.execute(learners.insert(), [
                {"experiment_id": eid, "idx": i, "label": ls.label, "algorithm": ls.algorithm, "params": ls.params,
                 "share": ls.share, "seed": ls.seed, "version": 0} for i, ls in enumerate(s.learners)
            ])
            conn.execute(items.insert(), [
                {"experiment_id": eid, "arm": a, "external_id": it["id"], "text": it["text"],
                 "image_url": it["image_url"]} for a, it in enumerate(s.items)
            ])
            for i, ls in enumerate(s.learners):
                fresh = ls.fresh(len(s.items))
                write_snapshot(conn, eid, i, 0, fresh, now)
                write_checkpoint(conn, eid, i, 0, fresh.state_json(), now, force=True)  # the empty log's replay
            if s.image is not None:
                conn.execute(images.insert().values(experiment_id=eid, content_type=s.image[0], data=s.image[1]))
        # compile a new kind of learner now, not inside its first participant's request (service.warmup)
        warm_learners((ls.algorithm, ls.params) for ls in s.learners)
        return int(eid), token

    def learner_specs(self) -> list[tuple[str, dict[str, Any]]]:
        """The (algorithm, params) of every stored experiment's learners, each once (what startup warms)."""
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(learners.c.algorithm, learners.c.params)).all()
        seen: dict[str, tuple[str, dict[str, Any]]] = {}
        for algorithm, params in rows:
            seen.setdefault(json.dumps([algorithm, params], sort_keys=True), (algorithm, dict(params or {})))
        return list(seen.values())

    def rotate_token(self, eid: int) -> str:
        """A new owner token for ``eid`` (the old one stops working): token recovery for whoever runs the server."""
        token = new_token()
        self.set_token(eid, token)
        return token

    def set_token(self, eid: int, token: str) -> None:
        """Make ``token`` the owner token of ``eid`` (stored hashed); NotFound if there is no such experiment."""
        with self._connect(True) as conn:
            res = conn.execute(experiments.update().where(experiments.c.id == eid)
                               .values(owner_token_hash=hash_token(token)))
            if res.rowcount == 0:
                raise NotFound(f"experiment {eid} does not exist")

    def token_matches(self, eid: int, token: str) -> bool:
        """Whether ``token`` is the owner token of ``eid``."""
        with self._connect(False) as conn:
            stored = conn.execute(sa.select(experiments.c.owner_token_hash).where(experiments.c.id == eid)).scalar()
        return stored is not None and hmac.compare_digest(hash_token(token), stored)

    def find_experiment(self, name: str) -> int | None:
        """Id of the oldest experiment called ``name``, or None (the demo is found by name)."""
        with self._connect(False) as conn:
            return conn.execute(sa.select(experiments.c.id).where(experiments.c.name == name)
                                .order_by(experiments.c.id).limit(1)).scalar()

    def check_owner(self, eid: int, token: str | None) -> None:
        """Raise :class:`Unauthorized` unless ``token`` is the experiment's owner token (or the admin token)."""
        if not token:
            raise Unauthorized("owner token required: send 'Authorization: Bearer <token>'")
        admin = self.settings.admin_token
        if admin and hmac.compare_digest(hash_token(token), hash_token(admin)):
            return
        with self._connect(False) as conn:
            stored = conn.execute(sa.select(experiments.c.owner_token_hash).where(experiments.c.id == eid)).scalar()
        # compare in constant time; an unknown experiment gives 401 too (no existence oracle)
        if not hmac.compare_digest(hash_token(token), stored or "0" * 64) or stored is None:
            raise Unauthorized("invalid owner token for this experiment")

    def check_admin(self, token: str | None, action: str = "this") -> None:
        """Raise :class:`Unauthorized` unless ``token`` is the admin token (no admin token: anyone may)."""
        admin = self.settings.admin_token
        if admin is None:
            return
        if not token or not hmac.compare_digest(hash_token(token), hash_token(admin)):
            raise Unauthorized(f"{action} needs the admin token: 'Authorization: Bearer <token>'")

    def set_status(self, eid: int, status: str) -> dict[str, Any]:
        """Pause (``paused``), resume (``active``), stop (``stopped``, final) or archive (``archived``, read-only)."""
        if status not in STATUSES:
            raise BadRequest(f"status must be one of {list(STATUSES)}")
        meta = self.meta(eid)
        with self._locked(eid, 0) as (conn, row, _tx):
            current = row.status
            if current == "archived" and status != "archived":
                raise Conflict("experiment is archived (read-only); an archived experiment cannot change")
            if current == "stopped" and status not in ("stopped", "archived"):
                raise Conflict("experiment is stopped; a stopped experiment cannot be resumed")
            conn.execute(experiments.update().where(experiments.c.id == eid).values(status=status))
        for idx in range(len(meta.learners)):
            with self._locked(eid, idx) as (conn, _row, tx):
                write_snapshot(conn, eid, idx, tx.version, tx.learner, self.clock())
        return {"id": eid, "status": status}

    def delete_experiment(self, eid: int) -> dict[str, Any]:
        """Remove the experiment and every row of it (items, learners, events, queries, snapshots, image)."""
        self.meta(eid)
        with self._hold(self._lock(eid, 0)), self._connect(True) as conn:
            # children first: the same on every backend, whatever its foreign-key enforcement
            for table in (events, queries, snapshots, checkpoints, history, images, items, learners):
                conn.execute(table.delete().where(table.c.experiment_id == eid))
            conn.execute(experiments.delete().where(experiments.c.id == eid))
        self._forget(eid)
        self._query_owner = {q: v for q, v in self._query_owner.items() if v[0] != eid}
        return {"id": eid, "deleted": True}

    def list_experiments(self) -> list[dict[str, Any]]:
        """Every experiment, oldest first: id, name, status, items, answers, learner labels, creation time."""
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(experiments.c.id, experiments.c.name, experiments.c.status,
                                          experiments.c.n_arms, experiments.c.created_ms)
                                .order_by(experiments.c.id)).all()
            answered = dict(conn.execute(
                sa.select(queries.c.experiment_id, sa.func.count()).where(queries.c.status == "answered")
                .group_by(queries.c.experiment_id)).all())
            labels: dict[int, list[str]] = {}
            for e, label in conn.execute(sa.select(learners.c.experiment_id, learners.c.label)
                                         .order_by(learners.c.experiment_id, learners.c.idx)):
                labels.setdefault(e, []).append(label)
        return [{"id": r.id, "name": r.name, "status": r.status, "n_items": r.n_arms,
                 "n_answers": int(answered.get(r.id, 0)), "algorithms": labels.get(r.id, []),
                 "created_at": r.created_ms / 1000.0} for r in rows]

    def image(self, eid: int) -> tuple[str, bytes]:
        """(content type, bytes) of the experiment's context image; NotFound if it has none."""
        with self._connect(False) as conn:
            row = conn.execute(sa.select(images.c.content_type, images.c.data)
                               .where(images.c.experiment_id == eid)).first()
        if row is None:
            raise NotFound(f"experiment {eid} has no context image")
        return row.content_type, bytes(row.data)

    # ------------------------------------------------------------------ participants
    def new_participant(self, pid: str | None = None, origin: str | None = None) -> str:
        """Register a participant and return its id: a random UUID, or ``pid`` (a crowd platform's worker id).

        Registering an id that exists already is fine (the same worker coming back). A new id from
        client address ``origin`` counts against that address's limit
        (``participant_rate_per_second`` / ``participant_burst``), kept in the database so every
        worker process enforces the same one: :class:`RateLimited` when it is spent.
        """
        if pid is None:
            pid = str(uuid.uuid4())
        else:
            pid = check_participant_id(pid)
            if pid in self._known_participants:
                return pid
            with self._connect(False) as conn:
                if self._x(conn, "sel_participant", pid).first() is not None:
                    self._known_participants.add(pid)
                    return pid
        now, source = self.clock(), origin_hash(origin)
        try:
            with self._connect(True) as conn:
                if source is not None:
                    self._admit(conn, participants, source, now, self.settings.participant_rate_per_second,
                                self.settings.participant_burst, "new participant ids from this address")
                conn.execute(participants.insert().values(id=pid, created_ms=now, origin=source))
        except sa.exc.IntegrityError:  # registered by a concurrent request
            pass
        self._known_participants.add(pid)
        return pid

    @staticmethod
    def _admit(conn: Connection, table: sa.Table, source: str, now: int, rate: float, burst: float, what: str) -> None:
        """Refuse (:class:`RateLimited`) a new row of ``table`` from ``source`` if ``burst`` rows from it arrived
        in the last ``burst / rate`` seconds: a sliding window every process reads from the same table."""
        if rate <= 0 or burst <= 0:
            return
        window = int(1000 * burst / rate)
        recent = conn.execute(sa.select(table.c.created_ms).where(table.c.origin == source,
                                                                 table.c.created_ms > now - window)
                              .order_by(table.c.created_ms.desc()).limit(int(burst))).scalars().all()
        if len(recent) >= int(burst):
            raise RateLimited(f"too many {what}; slow down", retry_after=max(0.001, (recent[-1] + window - now) / 1000))

    def _check_participant(self, conn: Connection, pid: str) -> None:
        if pid in self._known_participants:
            return
        if not pid or has_control(pid) or self._x(conn, "sel_participant", pid).first() is None:
            raise Forbidden("unknown participant id: get one from POST /api/participants")
        self._known_participants.add(pid)

    def next_query(self, eid: int, pid: str) -> dict[str, Any]:
        """Ask the participant's learner for an item they may see and record a pending query.

        Returns ``{"state": "ok", "query_id", "item", "labels", "expires_at", "n_answered"}``,
        or a ``state`` without a query: ``"paused"``, ``"stopped"``, ``"archived"``,
        ``"done"`` (the learner stopped), ``"waiting"`` (the learner needs answers to come
        back first), ``"exhausted"`` (every candidate is one this participant may not see
        again) or ``"complete"`` (``answers_per_participant`` reached, with its
        ``completion_code``).
        """
        eid, idx = self.prepare_ask(eid, pid)
        return _raise_or_return(self.run_ops(eid, idx, [("ask", pid)])[0])

    def answer(self, query_id: str, pid: str, label: str) -> dict[str, Any]:
        """Record ``label`` for a pending query, ``tell`` the learner, commit, then acknowledge.

        Idempotent: answering an answered query with the same label returns the same
        response and changes nothing. Unknown query -> NotFound; other participant's query
        -> Forbidden; expired -> Gone; a different label the second time, or an archived
        experiment -> Conflict; a label outside the set -> BadRequest.
        """
        eid, idx = self.prepare_answer(query_id, pid, label)
        return _raise_or_return(self.run_ops(eid, idx, [("answer", pid, query_id, label)])[0])

    def prepare_ask(self, eid: int, pid: str) -> tuple[int, int]:
        """Check an ask before it takes the learner's lock; returns (experiment, learner index) to run it on."""
        meta = self.meta(eid)
        if pid not in self._known_participants:
            try:
                pid.encode("utf-8")
            except UnicodeEncodeError:
                raise Forbidden("unknown participant id: get one from POST /api/participants") from None
            with self._connect(False) as conn:
                self._check_participant(conn, pid)
        return eid, meta.assign(pid)

    def prepare_answer(self, query_id: str, pid: str, label: str) -> tuple[int, int]:
        """Check an answer before it takes the learner's lock; returns (experiment, learner index) to run it on."""
        owner = self._query_owner.get(query_id)
        if owner is None:
            try:
                query_id.encode("utf-8")
            except UnicodeEncodeError:
                raise NotFound("unknown query") from None
            if has_control(query_id):
                raise NotFound(f"unknown query {query_id!r}")
            with self._connect(False) as conn:
                found = self._x(conn, "sel_query_owner", query_id).first()
            if found is None:
                raise NotFound(f"unknown query {query_id!r}")
            owner = (int(found.experiment_id), found.participant_id, int(found.learner))
        eid, owner_pid, idx = owner
        if not hmac.compare_digest(owner_pid.encode(), (pid or "").encode("utf-8", "replace")):
            raise Forbidden("this query was issued to another participant")
        rewards = self.meta(eid).rewards
        if label not in rewards:
            raise BadRequest(f"label {label!r} is not in this experiment's label set {list(rewards)}")
        return eid, idx

    def run_ops(self, eid: int, idx: int, ops: list[tuple[str, ...]]) -> list[Any]:
        """Run asks ``("ask", pid)`` and answers ``("answer", pid, query_id, label)`` on learner ``idx``:
        :meth:`run_batch` for one learner."""
        return self.run_batch(eid, [(idx, op) for op in ops])

    def run_batch(self, eid: int, ops: list[tuple[int, tuple[str, ...]]]) -> list[Any]:
        """Run ``(learner index, op)`` pairs of experiment ``eid`` -- asks ``("ask", pid)`` and answers
        ``("answer", pid, query_id, label)``, each checked first by :meth:`prepare_ask` /
        :meth:`prepare_answer` -- in order, in ONE transaction that locks every learner involved
        (one commit: group commit of concurrent requests, whichever learner they go to).

        Returns one entry per op: its response, or the :class:`ServiceError` it ends in (a refusal
        changes nothing, so the others go on). Any other error fails them all and commits nothing.
        """
        meta = self.meta(eid)
        out: list[Any] = []
        now = self.clock()
        idxs = sorted({idx for idx, _ in ops})
        due = [idx for idx in idxs if now - self._last_expire.get((eid, idx), -LAZY_EXPIRE_EVERY_MS)
               >= LAZY_EXPIRE_EVERY_MS]
        view = _BatchQueries(self._x, eid, [op for _, op in ops], prefetch=not self._sqlite and len(ops) > 1)
        # lazy expiry's reads and the view's go out with the locks (one round trip on PostgreSQL)
        reads = [("sel_stale", (eid, idx, now)) for idx in due] + view.reads()
        with self._locked_many(eid, idxs, reads=reads) as (conn, parts, fetched):
            view.load(conn, fetched[len(due):])
            for idx, stale in zip(due, fetched, strict=False):
                self._cancel_queries(conn, parts[idx][1], stale.rows, now, view)
                self._last_expire[(eid, idx)] = now
            for idx, op in ops:
                row, tx = parts[idx]
                try:
                    if op[0] == "ask":
                        out.append(self._ask_locked(meta, conn, row, tx, op[1], view))
                    else:
                        out.append(self._answer_locked(meta, conn, row, tx, op[2], op[3], view))
                except ServiceError as exc:
                    out.append(exc)
        # committed: remember the new pending queries' owners; answered or expired ones leave the map
        if len(self._query_owner) > 100_000:  # pending queries of other processes' lifetimes: a bound
            self._query_owner.clear()
        for (idx, op), res in zip(ops, out, strict=True):
            if op[0] == "ask":
                if isinstance(res, dict) and res.get("query_id"):
                    self._query_owner[res["query_id"]] = (eid, op[1], idx)
            elif not isinstance(res, ServiceError) or isinstance(res, Gone):
                self._query_owner.pop(op[2], None)
        return out

    def _ask_locked(self, meta: _Meta, conn: Connection, row: Any, tx: LogTx, pid: str,
                    view: _BatchQueries) -> dict[str, Any]:
        now = self.clock()
        if row.status != "active":
            return {"state": row.status, "retry_after": 5.0}
        eid, idx = meta.id, tx.idx
        seen: set[int] = set()
        last, n_answered, pending = -1, 0, None
        for q in view.seen(pid):
            seen.add(q.arm)
            last = q.arm
            if q.status == "answered":
                n_answered += 1
            elif q.status == "pending" and q.expires_ms > now:
                pending = q
        quota = meta.answers_per_participant
        if quota is not None and n_answered >= quota:
            return {"state": "complete", "completion_code": meta.completion_code(pid), "n_answered": n_answered,
                    "retry_after": 3600.0}
        if pending is not None:  # a reload or a retried ask: the same query again, not a second one
            return self._query_response(meta, pending.id, pending.arm, pending.expires_ms, n_answered)
        strict = meta.repeats == "never" and len(seen) < meta.n_arms
        arm, passed = self._pick(tx, seen, last, strict)
        if arm < 0 and not passed and not tx.learner.done and self._reissue_oldest(conn, tx, now, view):
            # the learner waits for pulls that are out; the oldest of them was abandoned: ask again
            arm, passed = self._pick(tx, seen, last, strict)
        if arm < 0 and passed:
            # nothing served: the candidates go back to the learner, logged as one "pass" event
            # (replay asks and cancels them too; cheaper than rebuilding the learner)
            tx.append("pass", str(uuid.uuid4()), passed[0], None, None, now, passed=passed)
        if arm < 0:
            if tx.learner.done:
                return {"state": "done", "retry_after": 5.0, "n_answered": n_answered}
            if passed:
                return {"state": "exhausted", "retry_after": 30.0, "n_answered": n_answered}
            return {"state": "waiting", "retry_after": 1.0, "n_answered": n_answered}
        qid = str(uuid.uuid4())
        expires = now + int(meta.expiry_s * 1000)
        # one event: the passed-over candidates go back to the learner (cancelled) right after
        seq = tx.append("ask", qid, arm, None, None, now, passed=passed)
        self._x(conn, "ins_query", qid, eid, pid, idx, arm, now, expires, seq)
        view.asked(pid, qid, arm, expires)
        return self._query_response(meta, qid, arm, expires, n_answered)

    @staticmethod
    def _pick(tx: LogTx, seen: set[int], last: int, strict: bool) -> tuple[int, list[int]]:
        """The first of the learner's candidates this participant may see (-1 if none) and those passed over."""
        passed: list[int] = []
        tries = min(len(seen) + CANDIDATES_BEYOND_SEEN, MAX_CANDIDATES_NEVER) if strict else MAX_CANDIDATES
        for _ in range(tries):
            got = tx.learner.ask(1)
            if not got:
                break
            if got[0] != last and not (strict and got[0] in seen):
                return got[0], passed
            passed.append(got[0])
        return -1, passed

    def _reissue_oldest(self, conn: Connection, tx: LogTx, now: int, view: _BatchQueries | None = None) -> bool:
        """Cancel this learner's oldest pending query if it is older than ``reissue_after_seconds``.

        Called when the learner has nothing to hand out until pulls come back (a round-based
        rule such as successive elimination or sequential halving): a query left unanswered that
        long is treated as abandoned (its late answer gets 410, as after expiry), so a few
        participants who ask and walk away cannot hold the round up for ``query_expiry_seconds``.
        """
        cutoff = now - int(max(0.0, float(self.settings.reissue_after_seconds)) * 1000)
        oldest = self._x(conn, "sel_oldest_pending", tx.eid, tx.idx, cutoff).rows
        self._cancel_queries(conn, tx, oldest, now, view)
        return bool(oldest)

    @staticmethod
    def _query_response(meta: _Meta, qid: str, arm: int, expires_ms: int, n_answered: int) -> dict[str, Any]:
        item = meta.items[arm]
        return {
            "state": "ok", "query_id": qid, "experiment_id": meta.id,
            "item": {"id": item["id"], "text": item["text"], "image_url": item["image_url"]},
            "labels": [lab["name"] for lab in meta.labels], "expires_at": expires_ms / 1000.0,
            "n_answered": n_answered,
        }

    def _answer_locked(self, meta: _Meta, conn: Connection, row: Any, tx: LogTx, query_id: str,
                       label: str, view: _BatchQueries) -> dict[str, Any] | Gone:
        rewards = meta.rewards
        q = view.query(query_id)
        if q.status == "answered":
            if q.label != label:
                raise Conflict(f"query already answered with label {q.label!r}")
            return _answer_response(query_id, q.label, q.reward)
        if q.status == "expired":
            raise Gone("query expired; ask for a new one")
        if row.status == "archived":
            raise Conflict("experiment is archived (read-only); answers are no longer accepted")
        now = self.clock()
        if q.expires_ms <= now:
            self._expire(conn, tx, now, view)
            return Gone("query expired; ask for a new one")  # after the expiry commits
        reward = rewards[label]
        seq = tx.append("answer", query_id, int(q.arm), label, reward, now)
        self._x(conn, "upd_answered", now, label, reward, seq, query_id)
        view.answered(query_id, label, reward)
        return _answer_response(query_id, label, reward)

    def _expire(self, conn: Connection, tx: LogTx, now: int, view: _BatchQueries | None = None) -> int:
        stale = self._x(conn, "sel_stale", tx.eid, tx.idx, now).rows
        self._cancel_queries(conn, tx, stale, now, view)
        return len(stale)

    def _cancel_queries(self, conn: Connection, tx: LogTx, rows: list[Any], now: int,
                        view: _BatchQueries | None = None) -> None:
        for q in rows:
            self._query_owner.pop(q.id, None)
            seq = tx.append("cancel", q.id, int(q.arm), None, None, now)
            self._x(conn, "upd_expired", seq, q.id)
            if view is not None:
                view.expired(q.id)

    def expire_stale(self) -> int:
        """Expire every pending query past its time, in every experiment; returns how many."""
        now = self.clock()
        with self._connect(False) as conn:
            keys = [(r[0], r[1]) for r in conn.execute(
                sa.select(queries.c.experiment_id, queries.c.learner).distinct()
                .where(queries.c.status == "pending", queries.c.expires_ms <= now))]
        n = 0
        for eid, idx in keys:
            with suppress(NotFound), self._locked(eid, idx) as (conn, _row, tx):
                n += self._expire(conn, tx, self.clock())
        return n

    # ------------------------------------------------------------------ results
    def learner_state(self, eid: int, learner: str | None = None) -> dict[str, Any]:
        """A learner's state (``state_dict``) and the version it belongs to (the first learner by default)."""
        idx = self.meta(eid).learner_index(learner)
        with self._locked(eid, idx, write=False) as (_conn, _row, tx):
            return {"version": tx.version, "state": json.loads(tx.learner.state_json())}

    def _learner_copy(self, eid: int, idx: int) -> tuple[Learner, int, str]:
        """(a copy of learner ``idx`` synced to the log, its version, the experiment's status).

        Owners' reports compute on the copy, outside the learner's lock: ranking 100,000 items
        every second held the lock (on SQLite, the one every write takes) for ~80 ms per poll.
        """
        with self._locked(eid, idx, write=False) as (_conn, row, tx):
            return copy.deepcopy(tx.learner), tx.version, row.status

    def results(self, eid: int, timeline: bool = True, learner: str | None = None, limit: int | None = None,
                offset: int = 0, q: str | None = None, sort: str = "rank", order: str = "asc") -> dict[str, Any]:
        """One learner's ranking with its intervals, label counts, stopping progress and recommendation.

        ``limit`` / ``offset`` page the ranking (``n_items`` is the total), so a dashboard polling a
        contest with many thousands of items does not serialise all of them every second; ``q``
        keeps the items whose text or id contains it (``n_matching`` of them) and ``sort`` / ``order``
        sort them by a column (:func:`purebandits.service.reports.ranking_page`).
        """
        if order not in ("asc", "desc"):
            raise BadRequest("order must be 'asc' or 'desc'")
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        spec = meta.learners[idx]
        names = [lab["name"] for lab in meta.labels]
        now = self.clock()
        lrn, version, status = self._learner_copy(eid, idx)
        with self._connect(False) as conn:
            counts = self._label_counts(conn, meta, idx, names, version)
            n_pending = int(conn.execute(sa.select(sa.func.count()).select_from(queries).where(
                queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.status == "pending")).scalar_one())
            tl = None
            if timeline:
                tally = self._tally(eid, idx, meta.created_ms)
                with tally.lock:
                    tally.refresh(conn, now)
                    tl = tally.timeline()
            done_ms, done_answers = conn.execute(sa.select(learners.c.done_ms, learners.c.done_answers).where(
                learners.c.experiment_id == eid, learners.c.idx == idx)).one()
            on_done = self._on_done(conn, eid)
        rec = lrn.recommend()
        progress = stopping_progress(lrn, spec.params)
        try:
            ranking, n_matching = ranking_page(lrn, meta.items, counts, names, rec, limit=limit, offset=offset,
                                               q=q, sort=sort, descending=order == "desc")
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        done, n_told = bool(lrn.done), lrn.n_pulls
        return {
            "experiment_id": eid, "name": meta.name, "algorithm": spec.algorithm, "params": spec.params,
            "algorithm_label": spec.label, "algorithms": [ls.label for ls in meta.learners],
            "status": status, "done": done, "version": version,
            "n_answers": int(counts.sum()), "n_told": n_told, "n_pending": n_pending,
            "labels": meta.labels, "label_totals": {n: int(counts[:, j].sum()) for j, n in enumerate(names)},
            "recommendation": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]} for a in rec],
            "stopping": progress, "n_items": meta.n_arms, "offset": offset, "n_matching": n_matching,
            "sort": sort, "order": order, "ranking": ranking, "timeline": tl, "now": now / 1000.0,
            "learner_done": None if done_ms is None else {"at_answers": done_answers, "at": done_ms / 1000.0},
            "on_done": on_done,
        }

    def _label_counts(self, conn: Connection, meta: _Meta, idx: int, names: list[str], version: int) -> np.ndarray:
        """Answers per (arm, label) of learner ``idx`` at ``version`` (a committed version of its log).

        Each poll of a dashboard used to count every answer again (a GROUP BY over the answered queries,
        ~17 ms at 20,000 answers and growing with them); now the counts at the last version asked for are
        kept, and only the ``answer`` events logged since are added (:func:`logged_label_counts`). The
        first call in a process reads the whole log once; an older version than the kept one starts over.
        """
        key = (meta.id, idx)
        kept = self._counts.get(key)
        if kept is not None and kept[0] <= version:
            after, base = kept
        else:
            after, base = 0, np.zeros((meta.n_arms, len(names)), dtype=np.int64)
        counts = logged_label_counts(conn, meta.id, idx, names, base, after, version)
        if len(self._counts) >= max(1, int(self.settings.cache_experiments)) and key not in self._counts:
            with suppress(StopIteration, RuntimeError):  # polls run in threads: another may change the dict
                self._counts.pop(next(iter(self._counts)), None)  # bounded as the other per-experiment caches
        self._counts[key] = (version, counts)
        return counts.copy()

    @staticmethod
    def _on_done(conn: Connection, eid: int) -> dict[str, Any]:
        e = conn.execute(sa.select(experiments.c.auto_stop, experiments.c.webhook_url, experiments.c.webhook_ms,
                                   experiments.c.webhook_status, experiments.c.webhook_error)
                         .where(experiments.c.id == eid)).one()
        called = None if e.webhook_ms is None else {"called_at": e.webhook_ms / 1000.0, "status": e.webhook_status,
                                                     "error": e.webhook_error}
        return {"auto_stop": bool(e.auto_stop), "webhook_url": e.webhook_url, "webhook": called}

    def set_on_done(self, eid: int, auto_stop: bool, webhook_url: str | None) -> dict[str, Any]:
        """What happens when every learner has stopped: the experiment stops (``auto_stop``) and/or
        ``webhook_url`` gets one POST (see :meth:`call_webhooks`).

        Set after the learners stopped, ``auto_stop`` stops the experiment now and a webhook is called
        at the next sweep; a new URL is called once even if the previous one was.
        """
        if webhook_url is not None:
            webhook_url = check_webhook_url(webhook_url)
            if not self.settings.webhooks:
                raise Forbidden("webhooks are turned off on this server (PUREBANDITS_WEBHOOKS=0)")
        meta = self.meta(eid)
        with ExitStack() as held:
            # every learner locked, in index order as everywhere: a learner stopping now either sees the new
            # auto_stop or has committed its stop before the check below
            for lock in dict.fromkeys(self._lock(eid, i) for i in range(len(meta.learners))):
                held.enter_context(self._hold(lock))
            conn = held.enter_context(self._connect(True))
            conn.execute(sa.select(learners.c.idx).where(learners.c.experiment_id == eid)
                         .order_by(learners.c.idx).with_for_update())
            current = conn.execute(sa.select(experiments.c.webhook_url).where(experiments.c.id == eid)).first()
            if current is None:
                self._forget(eid)
                raise NotFound(f"experiment {eid} does not exist")
            current = current[0]
            values: dict[str, Any] = {"auto_stop": bool(auto_stop), "webhook_url": webhook_url}
            if webhook_url != current:
                values.update(webhook_ms=None, webhook_status=None, webhook_error=None)
            conn.execute(experiments.update().where(experiments.c.id == eid).values(**values))
            all_done = conn.execute(sa.select(sa.func.count()).select_from(learners).where(
                learners.c.experiment_id == eid, learners.c.done_ms.is_(None))).scalar_one() == 0
            if auto_stop and all_done:
                conn.execute(experiments.update().where(
                    experiments.c.id == eid, experiments.c.status.in_(("active", "paused"))).values(status="stopped"))
            return self._on_done(conn, eid)

    #: a claimed webhook call that recorded nothing for this long (its process died) is claimed again
    WEBHOOK_RECLAIM_MS = 300_000

    def call_webhooks(self) -> int:
        """POST to the webhook of every experiment whose learners have all stopped, once; returns how many.

        A process first claims the call (``webhook_ms``, set only where it is NULL: one process wins),
        then POSTs JSON (experiment, learners, where each stopped, its recommendation) with up to 3
        tries, and records the HTTP status or the error. A claim left without a result for
        :attr:`WEBHOOK_RECLAIM_MS` (the process died mid-call) is claimed again.
        """
        if not self.settings.webhooks:
            return 0
        now = self.clock()
        stale = now - self.WEBHOOK_RECLAIM_MS
        undone = sa.select(learners.c.idx).where(learners.c.experiment_id == experiments.c.id,
                                                 learners.c.done_ms.is_(None)).exists()
        unclaimed = sa.or_(experiments.c.webhook_ms.is_(None), sa.and_(
            experiments.c.webhook_ms < stale, experiments.c.webhook_status.is_(None),
            experiments.c.webhook_error.is_(None)))
        with self._connect(False) as conn:
            due = [(r.id, r.webhook_url) for r in conn.execute(
                sa.select(experiments.c.id, experiments.c.webhook_url)
                .where(experiments.c.webhook_url.is_not(None), unclaimed, ~undone))]
        n = 0
        for eid, url in due:
            with self._connect(True) as conn:
                won = conn.execute(experiments.update().values(webhook_ms=now).where(
                    experiments.c.id == eid, experiments.c.webhook_url == url, unclaimed)).rowcount
            if won != 1:
                continue
            status, error = post_json(url, self._webhook_payload(eid), float(self.settings.webhook_timeout_seconds))
            with self._connect(True) as conn:
                conn.execute(experiments.update().where(experiments.c.id == eid, experiments.c.webhook_ms == now)
                             .values(webhook_status=status, webhook_error=error))
            log.info("webhook of experiment %d: %s", eid, error or f"HTTP {status}")
            n += 1
        return n

    def _webhook_payload(self, eid: int) -> dict[str, Any]:
        meta = self.meta(eid)
        out = []
        with self._connect(False) as conn:
            status = conn.execute(sa.select(experiments.c.status).where(experiments.c.id == eid)).scalar_one()
            rows = conn.execute(sa.select(learners.c.done_ms, learners.c.done_answers)
                                .where(learners.c.experiment_id == eid).order_by(learners.c.idx)).all()
        for idx, (spec, r) in enumerate(zip(meta.learners, rows, strict=True)):
            lrn, _version, _status = self._learner_copy(eid, idx)
            out.append({"label": spec.label, "algorithm": spec.algorithm, "stopped_at_answers": r.done_answers,
                        "stopped_at": None if r.done_ms is None else r.done_ms / 1000.0,
                        "recommendation": [{"id": meta.items[a]["id"], "text": meta.items[a]["text"]}
                                           for a in lrn.recommend()]})
        return {"event": "learners_stopped", "experiment_id": eid, "name": meta.name, "status": status,
                "learners": out}

    def history(self, eid: int, learner: str | None = None, max_points: int = 500) -> dict[str, Any]:
        """Each learner's results over time (its ``learner`` only if given): at most ``max_points`` points each
        (see :mod:`purebandits.service.history`), with the leaders' item ids and texts."""
        meta = self.meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        out = []
        for i, spec in enumerate(meta.learners):
            if idx is not None and i != idx:
                continue
            out.append({"algorithm": spec.label, "points": thin(self._points_of(meta, i), max_points)})
        return {"every": int(self.settings.history_every), "series": out}

    def _points_of(self, meta: _Meta, idx: int) -> list[dict[str, Any]]:
        """Every history point of learner ``idx`` (a copy of the list), its leaders with their item ids and texts.

        Points are only ever added, at growing answer counts, so this process keeps those it has read and
        reads only the newer ones: a dashboard asks every few seconds, and a contest of a million answers has
        10,000 points per learner (decoding them all took 0.14-0.38 s per request)."""
        key = (meta.id, idx)
        with self._reports_lock:
            known = self._points.get(key)
            if known is None or known[0] != meta.created_ms:  # new, or an id reused by a later experiment
                known = self._points[key] = (meta.created_ms, [], threading.Lock())
        _, points, lock = known
        with self._connect(False) as conn, lock:  # the connection first, as everywhere
            new = read_points(conn, meta.id, idx, after=points[-1]["n_answers"] if points else -1).get(idx, [])
            for p in new:
                for ld in p["leaders"]:
                    ld["id"] = meta.items[ld["arm"]]["id"]
                    ld["text"] = meta.items[ld["arm"]]["text"]
            points.extend(new)
            return list(points)

    def export_history(self, eid: int, learner: str | None = None) -> list[list[Any]]:
        """CSV rows (with header) of every history point, one row per leader (see ``history_rows``)."""
        meta = self.meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        with self._connect(False) as conn:
            series = read_points(conn, eid, idx)
        return history_rows(series, {i: ls.label for i, ls in enumerate(meta.learners)}, meta.items)

    def activity(self, eid: int, learner: str | None = None) -> dict[str, Any]:
        """One learner's activity: answers over time, per item, per participant, and response times."""
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        now = self.clock()
        cached = self._activity.get((eid, idx))
        if cached is not None and now - cached[0] < ACTIVITY_TTL_MS:
            return cached[1]
        lrn, _version, _status = self._learner_copy(eid, idx)
        tally = self._tally(eid, idx, meta.created_ms)
        with self._connect(False) as conn, tally.lock:  # the connection first, as results() takes them
            tally.refresh(conn, now)
            out = {"algorithm": meta.learners[idx].label, **tally.activity(lrn)}
        if len(self._activity) > 1000:
            self._activity.clear()
        self._activity[(eid, idx)] = (now, out)
        return out

    def _tally(self, eid: int, idx: int, created_ms: int) -> ActivityTally:
        """The activity tally of learner ``idx`` of ``eid`` in this process (made on first use)."""
        key = (eid, idx)
        with self._reports_lock:
            tally = self._tallies.get(key)
            if tally is None or tally.created_ms != created_ms:  # new, or an id reused by a later experiment
                tally = self._tallies[key] = ActivityTally(eid, idx, created_ms)
        return tally

    def comparison(self, eid: int, top: int = 10) -> dict[str, Any]:
        """Every learner side by side: answers, participants, whether and when it stopped, its top items, and the
        pairwise agreement of their recommendations."""
        meta = self.meta(eid)
        names = [lab["name"] for lab in meta.labels]
        out, recs = [], {}
        for idx, spec in enumerate(meta.learners):
            lrn, version, _status = self._learner_copy(eid, idx)
            tally = self._tally(eid, idx, meta.created_ms)
            with self._connect(False) as conn:
                counts = self._label_counts(conn, meta, idx, names, version)
                with tally.lock:  # its participants (a distinct count of every answer took 1-2 s at a million)
                    tally.refresh(conn, self.clock())
                    n_participants = tally.n_participants
                rec = lrn.recommend()
                rows = ranking_rows(lrn, meta.items, counts, names, rec, limit=max(top, meta.k))
                done_ms, done_answers = conn.execute(
                    sa.select(learners.c.done_ms, learners.c.done_answers)
                    .where(learners.c.experiment_id == eid, learners.c.idx == idx)).one()
                out.append({
                    "label": spec.label, "algorithm": spec.algorithm, "params": spec.params, "share": spec.share,
                    "n_answers": int(counts.sum()), "n_participants": n_participants, "done": bool(lrn.done),
                    "stopped_at_answers": done_answers, "stopped_at": None if done_ms is None else done_ms / 1000.0,
                    "recommendation": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]}
                                       for a in rec],
                    "top": [{k: r[k] for k in ("rank", "arm", "id", "text", "mean", "lower", "upper", "count")}
                            for r in rows],
                })
                recs[spec.label] = rec
        return {"experiment_id": eid, "k": meta.k, "algorithms": out, "agreement": agreement(recs)}

    def export_answers(self, eid: int) -> Iterator[list[Any]]:
        """CSV rows (with header) of every answer, in the order they were applied, with each one's learner.

        Read as they are consumed, in one transaction (a consistent export), holding a connection until the
        last row or until the iterator is dropped; an unknown ``eid`` raises here, before any row."""
        meta = self.meta(eid)
        labels_of = {i: ls.label for i, ls in enumerate(meta.learners)}

        def rows() -> Iterator[list[Any]]:
            with self._connect(False) as conn:
                yield from answers_rows(conn, eid, meta.items, labels_of)

        return rows()

    def export_summary(self, eid: int, learner: str | None = None) -> list[list[Any]]:
        """One learner's per-item summary, rows with header (see ``summary_rows``): the public caption-contest
        columns plus ``item_id`` for the default labels, one count column per label and the mean reward
        for other label sets."""
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        names = [lab["name"] for lab in meta.labels]
        with self._connect(False) as conn:
            counts = label_counts(conn, eid, idx, meta.n_arms, names)
        return summary_rows(counts, meta.labels, meta.items, meta.name)

    def export_participants(self, eid: int) -> Iterator[list[Any]]:
        """CSV rows (with header): each participant's learner, answers, first and last answer, completion code;
        read as they are consumed, as :meth:`export_answers`."""
        meta = self.meta(eid)
        labels_of = {i: ls.label for i, ls in enumerate(meta.learners)}

        def rows() -> Iterator[list[Any]]:
            with self._connect(False) as conn:
                yield from participants_rows(conn, eid, labels_of, meta.answers_per_participant,
                                             meta.completion_code)

        return rows()

    def experiment_info(self, eid: int) -> dict[str, Any]:
        """What the owner API reports of an experiment: its spec, learners, status and versions."""
        meta = self.meta(eid)
        with self._connect(False) as conn:
            status = conn.execute(sa.select(experiments.c.status).where(experiments.c.id == eid)).scalar()
            if status is None:
                self._forget(eid)
                raise NotFound(f"experiment {eid} does not exist")
            lrows = conn.execute(sa.select(learners.c.version, learners.c.done_ms, learners.c.done_answers)
                                 .where(learners.c.experiment_id == eid).order_by(learners.c.idx)).all()
        first = meta.learners[0]
        return {"id": eid, "name": meta.name, "algorithm": first.algorithm, "params": first.params, "k": meta.k,
                "n_items": meta.n_arms, "labels": meta.labels, "status": status,
                "version": int(sum(r.version for r in lrows)), "seed": first.seed,
                "query_expiry_seconds": meta.expiry_s, "created_at": meta.created_ms / 1000.0,
                "instructions": meta.instructions, "has_image": meta.has_image, "repeats": meta.repeats,
                "answers_per_participant": meta.answers_per_participant,
                "algorithms": [{"label": ls.label, "algorithm": ls.algorithm, "params": ls.params, "share": ls.share,
                                "seed": ls.seed, "version": int(r.version), "done": r.done_ms is not None,
                                "stopped_at_answers": r.done_answers}
                               for ls, r in zip(meta.learners, lrows, strict=True)]}


def origin_hash(address: str | None) -> str | None:
    """What the database keeps of a client address for the rate limits: a hash (pseudonymous only, as IPv4
    addresses are few enough to try them all), the same in every process."""
    if address is None:
        return None
    return hashlib.sha256(b"purebandits-origin:" + address.encode("utf-8", "replace")).hexdigest()[:32]


def _combine(flags: list[bool | None]) -> bool | None:
    """False if any is False, else True if any is True, else None (nothing was checked)."""
    return False if False in flags else (True if True in flags else None)


def _raise_or_return(result: Any) -> Any:
    if isinstance(result, BaseException):
        raise result
    return result


def _sqlite_busy(exc: sa.exc.OperationalError) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" / "database table is locked" (it would have to wait)."""
    orig = exc.orig
    return isinstance(orig, sqlite3.OperationalError) and \
        (getattr(orig, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _answer_response(query_id: str, label: str, reward: float) -> dict[str, Any]:
    return {"query_id": query_id, "status": "answered", "label": label, "reward": float(reward)}

