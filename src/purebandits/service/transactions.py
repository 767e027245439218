"""Locked transactions over learners: connections (the event loop's own SQLite connection, pooled
others), in-process locks, and the one transaction that locks learners, syncs them to the log and writes
back their versions, snapshots and history points (:class:`Transactions`, a part of
:class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.service.errors import (
    NotFound,
    ServiceError,
    Unavailable,
    WouldBlock,
)
from purebandits.service.eventlog import (
    BatchWrites,
    LogTx,
    Rows,
    write_snapshot,
)
from purebandits.service.experiment_meta import CachedLearner, Due, ExperimentMeta
from purebandits.service.history import history_point, write_point
from purebandits.service.models import (
    experiments,
    learners,
)

log = logging.getLogger("purebandits.service")

# Lock order. Every transaction that locks more than one thing of an experiment takes the locks in this
# order and never another, so no two of them (participants' batches, owner and admin actions, in one
# process or several) wait for each other in a cycle (PostgreSQL would break it with DeadlockDetected: 503s):
#   1. this process's in-process locks of the learners, in increasing index (``_lock``; SQLite: one lock);
#   2. the learners' rows, in increasing index (PostgreSQL ``SELECT ... FOR UPDATE``; SQLite's write lock
#      stands for all of them: ``BEGIN IMMEDIATE``);
#   3. the experiment's row (updated: status, on-done settings, auto stop; or locked ``FOR UPDATE`` by a
#      delete; a new query or event row only KEY SHAREs it, through its foreign key);
#   4. the experiment's other rows (queries, events, snapshots, checkpoints, history, items, image).
# Who takes several: a batch (``_locked_many``: 1, 2, then 3 for an auto stop and 4), a status change
# (``OwnerOperations.set_status``: learner 0 by 1 and 2, then 3), ``DoneHooks.set_on_done`` (every learner
# by 1 and 2, then 3), a delete (``OwnerOperations.delete_experiment``: every learner by 1 and 2, 3, then
# 4). Transactions that lock a single row (a checkpoint's claim or promotion, a webhook's claim) can wait
# for one of these but hold nothing any of them waits for.

def _sqlite_busy(exc: sa.exc.OperationalError) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" / "database table is locked" (it would have to wait)."""
    orig = exc.orig
    return isinstance(orig, sqlite3.OperationalError) and \
        (getattr(orig, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class Transactions:
    """Connections, locks and the learner transaction of :class:`~purebandits.service.study.Study`."""

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

    def _lock_every_learner(self, held: ExitStack, eid: int, n_learners: int) -> Connection:
        """Steps 1 and 2 of the lock order for every learner of ``eid`` (in-process locks, then the rows ``FOR
        UPDATE``, in index order), held until ``held`` closes; the write connection they are held on."""
        for lock in dict.fromkeys(self._lock(eid, i) for i in range(n_learners)):
            held.enter_context(self._hold(lock))
        conn = held.enter_context(self._connect(True))
        conn.execute(sa.select(learners.c.idx).where(learners.c.experiment_id == eid)
                     .order_by(learners.c.idx).with_for_update())
        return conn

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
                     reads: list[tuple[str, tuple[Any, ...]]] | None = None, pipeline: bool = True,
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
        learner behind the database (another process wrote) leaves pipeline mode to catch up. ``pipeline=False``:
        never in pipeline mode, for an owner's operation that reads through SQLAlchemy in the transaction.
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
                    pipelined = write and pipeline and not self._sqlite
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
                    self._cache[(eid, idx)] = CachedLearner(tx.version, tx.learner)
            except ServiceError:
                # refusals are raised before any change; keep the caches unless events were appended
                ok = all(tx.version == tx.start_version for tx in txs.values())
                raise
            finally:
                if not ok:
                    for idx in txs:  # synced learners may hold uncommitted changes
                        self._cache.pop((eid, idx), None)

    def _due(self, row: Any, tx: LogTx, start_pulls: int) -> Due:
        """What one learner's changes in this transaction still have to write after its hot statements (row:
        its locked learners row; ``start_pulls``: its answers when the transaction began). The one place these
        conditions are stated: the batch commits early when none is due, and writes what is."""
        if tx.version == row.version:
            return Due(False, False, False)
        snap, hist = max(1, int(self.settings.snapshot_every)), int(self.settings.history_every)
        stopped = bool(tx.learner.done and row.done_ms is None)
        return Due(snapshot=tx.version // snap > int(row.version) // snap,
                    history=hist > 0 and (stopped or tx.learner.n_pulls // hist > start_pulls // hist),
                    stopped=stopped)

    def _after_changes(self, conn: Connection, meta: ExperimentMeta, parts: dict[int, tuple[Any, LogTx]],
                       due: dict[int, Due]) -> None:
        """In the transaction that changed the learners: a history point for each learner whose answers
        crossed a multiple of ``history_every`` or that stopped; when the last learner stops, the
        experiment stops too if its owner asked for it (``auto_stop``)."""
        for idx, (_, tx) in parts.items():
            if due[idx].history:
                point = history_point(tx.learner, meta.learners[idx].params, meta.k)
                write_point(conn, meta.id, idx, point, self.clock())
        if meta.staged:  # stage 1 stopping hands over to stage 2 (service.stages); the experiment goes on
            self._after_stage_changes(conn, meta, parts)
            return
        stopped = [meta.id] if meta.stage_of is None else [meta.id, meta.stage_of]  # a stage 2 stops both
        if any(d.stopped for d in due.values()) and conn.execute(
                sa.select(sa.func.count()).select_from(learners).where(
                    learners.c.experiment_id == meta.id, learners.c.done_ms.is_(None))).scalar_one() == 0:
            auto = conn.execute(sa.select(experiments.c.auto_stop).where(experiments.c.id == meta.id)).scalar()
            if auto:
                conn.execute(experiments.update().where(
                    experiments.c.id.in_(stopped), experiments.c.status.in_(("active", "paused")))
                    .values(status="stopped"))

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
            reports = [*self._tallies, *self._points, *self._forecasts]
        for key in [k for k in (*self._cache, *self._last_expire, *self._activity, *self._counts, *reports)
                    if k[0] == eid]:
            self._cache.pop(key, None)
            self._last_expire.pop(key, None)
            self._activity.pop(key, None)
            self._counts.pop(key, None)
            with self._reports_lock:
                self._tallies.pop(key, None)
                self._points.pop(key, None)
                self._forecasts.pop(key, None)

