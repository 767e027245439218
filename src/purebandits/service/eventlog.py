"""The event log: every learner's ``ask`` / ``answer`` / ``cancel`` events, their replay, and snapshots.

A learner's state is a pure function of (algorithm, parameters, n_arms, seed, event log):
replaying its ``ask`` (which must return the stored arm: asked among the items its participant
could be given, all but those listed in ``excluded``; in logs from before restricted asks, after
the candidates it passed over, listed in ``passed``, which are then cancelled), ``pass`` (such an
old ask that found no candidate its participant could see: its candidates are asked and cancelled),
``answer`` (``tell``) and ``cancel`` events in ``seq`` order into a fresh learner reproduces it.
Each learner of an experiment has its own log (``events`` rows with its ``learner`` index,
``seq = 1, 2, ...``) and its own snapshot (``state_dict`` every ``snapshot_every`` events), a
cache that
:meth:`purebandits.service.study.Study.verify` checks against the replay, and its verified
checkpoint (``checkpoints``: a state a replay computed, with its SHA-256), from which that replay
starts.

The hot statements (the few an ask or an answer runs) go straight to the DBAPI cursor through
:class:`HotStatements`: they skip SQLAlchemy's statement compilation and result proxies, which
dominated the cost per answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections import namedtuple
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from purebandits.base import Learner
from purebandits.registry import make_learner
from purebandits.service.errors import ReplayError
from purebandits.service.models import checkpoints, events, queries, snapshots

__all__ = ["HotStatements", "BatchWrites", "Rows", "LogTx", "apply_event", "apply_log", "encode_passed",
           "encode_excluded", "decode_excluded", "read_snapshot", "write_snapshot", "learner_from_snapshot",
           "Checkpoint", "read_checkpoint", "write_checkpoint", "state_digest", "canonical_state"]

# qmark placeholders, converted per driver
_HOT_SQL = {
    "lock_learner": "SELECT l.version, l.done_ms, e.status FROM learners l JOIN experiments e "
                    "ON e.id = l.experiment_id WHERE l.experiment_id = ? AND l.idx = ?",
    "upd_version": "UPDATE learners SET version = ? WHERE experiment_id = ? AND idx = ?",
    "upd_done": "UPDATE learners SET done_ms = ?, done_answers = ? WHERE experiment_id = ? AND idx = ?",
    "ins_event": "INSERT INTO events (experiment_id, learner, seq, kind, query_id, arm, label, reward, created_ms, "
                 "passed, excluded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ins_query": "INSERT INTO queries (id, experiment_id, participant_id, learner, arm, status, created_ms, "
                 "expires_ms, ask_seq, opponent, left_arm) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
    "sel_query_owner": "SELECT experiment_id, participant_id, learner FROM queries WHERE id = ?",
    "sel_query": "SELECT status, label, reward, arm, expires_ms, opponent, left_arm FROM queries WHERE id = ?",
    "sel_seen": "SELECT id, arm, status, expires_ms, answered_ms, opponent, left_arm FROM queries "
                "WHERE experiment_id = ? "
                "AND participant_id = ? "
                "ORDER BY created_ms, ask_seq",
    "upd_answered": "UPDATE queries SET status = 'answered', answered_ms = ?, label = ?, reward = ?, end_seq = ? "
                    "WHERE id = ?",
    "sel_participant": "SELECT id FROM participants WHERE id = ?",
    # the participants excluded (read every few seconds per experiment and process), learners not stopped yet
    "sel_excluded": "SELECT participant_id FROM exclusions WHERE experiment_id = ?",
    "sel_running": "SELECT count(*) AS n FROM learners WHERE experiment_id = ? AND done_ms IS NULL",
    # gold items (only in experiments that have them): a participant's, and one issued
    "sel_gold_seen": "SELECT id, gold, position, answered_ms FROM gold_queries WHERE experiment_id = ? "
                     "AND participant_id = ? ORDER BY position",
    "ins_gold_query": "INSERT INTO gold_queries (id, experiment_id, participant_id, gold, position, created_ms) "
                      "VALUES (?, ?, ?, ?, ?, ?)",
    "sel_stale": "SELECT id, arm FROM queries WHERE experiment_id = ? AND learner = ? AND status = 'pending' "
                 "AND expires_ms <= ? ORDER BY expires_ms, id",
    "sel_oldest_pending": "SELECT id, arm FROM queries WHERE experiment_id = ? AND learner = ? AND status = 'pending' "
                          "AND created_ms <= ? ORDER BY created_ms, id LIMIT 1",
    "upd_expired": "UPDATE queries SET status = 'expired', end_seq = ? WHERE id = ?",
    # a release: cancelled as an expiry, with the time it was given back (what tells it from an abandoned query)
    "upd_released": "UPDATE queries SET status = 'expired', answered_ms = ?, end_seq = ? WHERE id = ?",
    # the reissue path, for a participant who answers: the oldest pending query past the cutoff or held by an id
    # that abandoned a query of the experiment before
    "sel_oldest_reissuable": "SELECT q.id, q.arm FROM queries q WHERE q.experiment_id = ? AND q.learner = ? "
                             "AND q.status = 'pending' AND (q.created_ms <= ? OR EXISTS (SELECT 1 FROM queries a "
                             "WHERE a.experiment_id = q.experiment_id AND a.participant_id = q.participant_id "
                             "AND a.status = 'expired' AND a.answered_ms IS NULL)) ORDER BY q.created_ms, q.id LIMIT 1",
    # the reissue path only: abandoned queries (cancelled, never given back) of an experiment from the
    # participant's registering address, counted up to a cap
    "sel_abandoned_from": "SELECT count(*) AS n FROM (SELECT 1 FROM queries q JOIN participants p "
                          "ON p.id = q.participant_id WHERE q.experiment_id = ? AND q.status = 'expired' "
                          "AND q.answered_ms IS NULL AND p.origin = (SELECT origin FROM participants WHERE id = ?) "
                          "LIMIT ?) AS a",
    # PostgreSQL only (a list parameter is an array there): a whole batch's rows in one statement
    "sel_seen_many": "SELECT participant_id, id, arm, status, expires_ms, answered_ms, opponent, left_arm FROM queries "
                     "WHERE experiment_id = ? "
                     "AND participant_id = ANY(?) ORDER BY created_ms, ask_seq",
    "sel_query_many": "SELECT id, status, label, reward, arm, expires_ms, opponent, left_arm FROM queries "
                      "WHERE id = ANY(?)",
}


#: statements that return no rows (queued without waiting in PostgreSQL's pipeline mode)
_WRITES = frozenset({"upd_version", "upd_done", "ins_event", "ins_query", "upd_answered", "upd_expired",
                     "upd_released", "ins_gold_query"})

#: the row writes a transaction buffers (:class:`BatchWrites`), in the order a flush sends them
_BUFFERED = ("ins_event", "ins_query", "upd_answered", "upd_expired", "upd_released")

# PostgreSQL: each buffered statement for any number of rows, one array per column (``unnest``), so
# a batch's writes are a few statements whatever its size
_BULK_SQL = {
    "ins_event": "INSERT INTO events (experiment_id, learner, seq, kind, query_id, arm, label, reward, created_ms, "
                 "passed, excluded) SELECT * FROM unnest(%s::integer[], %s::integer[], %s::bigint[], %s::varchar[], "
                 "%s::varchar[], %s::integer[], %s::varchar[], %s::float8[], %s::bigint[], %s::text[], %s::text[])",
    "ins_query": "INSERT INTO queries (id, experiment_id, participant_id, learner, arm, status, created_ms, "
                 "expires_ms, ask_seq, opponent, left_arm) SELECT v.id, v.eid, v.pid, v.learner, v.arm, 'pending', "
                 "v.created, v.expires, v.seq, v.opponent, v.left_arm FROM unnest(%s::varchar[], %s::integer[], "
                 "%s::varchar[], %s::integer[], %s::integer[], %s::bigint[], %s::bigint[], %s::bigint[], "
                 "%s::integer[], %s::integer[]) AS v(id, eid, pid, learner, arm, created, expires, seq, opponent, "
                 "left_arm)",
    "upd_answered": "UPDATE queries SET status = 'answered', answered_ms = v.ms, label = v.label, reward = v.reward, "
                    "end_seq = v.seq FROM unnest(%s::bigint[], %s::varchar[], %s::float8[], %s::bigint[], "
                    "%s::varchar[]) AS v(ms, label, reward, seq, id) WHERE queries.id = v.id",
    "upd_expired": "UPDATE queries SET status = 'expired', end_seq = v.seq FROM unnest(%s::bigint[], %s::varchar[]) "
                   "AS v(seq, id) WHERE queries.id = v.id",
    "upd_released": "UPDATE queries SET status = 'expired', answered_ms = v.ms, end_seq = v.seq "
                    "FROM unnest(%s::bigint[], %s::bigint[], %s::varchar[]) AS v(ms, seq, id) WHERE queries.id = v.id",
}

def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


# per column of each bulk statement: the Python type its array holds (psycopg dumps a list of one type only,
# and a reward may arrive as an int)
_BULK_TYPES: dict[str, tuple[Callable[[Any], Any], ...]] = {
    "ins_event": (int, int, int, str, str, int, _opt_str, _opt_float, int, _opt_str, _opt_str),
    "ins_query": (str, int, str, int, int, int, int, int, _opt_int, _opt_int),
    "upd_answered": (int, _opt_str, _opt_float, int, str),
    "upd_expired": (int, str),
    "upd_released": (int, int, str),
}



class Rows:
    """Fetched rows of a hot-path statement, with the two accessors the protocol uses."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def one(self) -> Any:
        if len(self.rows) != 1:
            raise sa.exc.NoResultFound("expected exactly one row") if not self.rows else \
                sa.exc.MultipleResultsFound("expected exactly one row")
        return self.rows[0]

    def first(self) -> Any:
        return self.rows[0] if self.rows else None


_NO_ROWS = Rows([])


class HotStatements:
    """The protocol's hot statements for one engine, run on the connection's DBAPI cursor."""

    def __init__(self, engine: Engine) -> None:
        self.pg = pg = engine.dialect.paramstyle in ("format", "pyformat")
        self.sql = {k: v.replace("?", "%s") if pg else v for k, v in _HOT_SQL.items()}
        # PostgreSQL: lock the learner's row (writers of one learner take turns); SQLite: BEGIN
        # IMMEDIATE already holds the database's single write lock
        self.sql["lock_learner_update"] = self.sql["lock_learner"] + (" FOR UPDATE OF l" if pg else "")
        self._row_cls: dict[str, Any] = {}
        # id(connection) -> its transaction's BatchWrites while it buffers (a plain map: an invalidated
        # connection refuses even ``Connection.info`` until rolled back, and the buffer must go away then too)
        self.buffers: dict[int, BatchWrites] = {}

    def __call__(self, conn: Connection, name: str, *params: Any) -> Rows:
        """Run statement ``name`` in the connection's transaction.

        While the transaction buffers its writes (:meth:`BatchWrites.install`), a
        buffered write is added to the buffer and a read first sends what is buffered, so it sees
        the transaction's own writes. A driver error is wrapped exactly as SQLAlchemy would
        (``OperationalError`` -> 503) and a broken connection is invalidated.
        """
        writes = self.buffers.get(id(conn)) if self.buffers else None
        if writes is not None:
            if name in writes.rows:
                writes.rows[name].append(params)
                return _NO_ROWS
            writes.flush(conn)
        return self.fetch(conn, name, self.send(conn, name, *params))

    @contextmanager
    def pipeline(self, conn: Connection) -> Iterator[None]:
        """psycopg's pipeline mode on ``conn`` (PostgreSQL) for the block. A queued statement's error surfaces
        when the pipeline syncs, possibly at its exit: it is wrapped there as SQLAlchemy would wrap it."""
        fairy = conn.connection
        try:
            with fairy.driver_connection.pipeline():  # type: ignore[union-attr]
                yield
        except Exception as exc:
            if not isinstance(exc, conn.dialect.loaded_dbapi.Error):
                raise
            raise _wrapped(conn, exc, "(pipeline sync)", (), fairy.dbapi_connection, None) from exc

    def commit(self, conn: Connection) -> None:
        """Queue ``COMMIT`` in the transaction (psycopg's pipeline mode: it goes out with what is queued, and
        the pipeline's closing sync waits for it and raises its error). The DBAPI connection is then idle,
        so SQLAlchemy's own commit that follows sends nothing."""
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            self._run(conn, cur, "COMMIT", (), lambda: cur.execute("COMMIT"))
        finally:
            cur.close()

    def send(self, conn: Connection, name: str, *params: Any) -> Any:
        """Execute statement ``name`` and return its open cursor without fetching (:meth:`fetch` does).

        In psycopg's pipeline mode the statement is only queued, so several reads sent one after
        another cost one round trip when their rows are fetched.
        """
        sql = self.sql[name]
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        self._run(conn, cur, sql, params, lambda: cur.execute(sql, params))
        return cur

    def fetch(self, conn: Connection, name: str, cur: Any) -> Rows:
        """The rows of the statement :meth:`send` ran on ``cur`` (none for a write), closing ``cur``."""
        try:
            if name in _WRITES:  # no rows; in psycopg's pipeline mode, not even a round trip
                return _NO_ROWS
            rows = self._run(conn, cur, self.sql[name], (), cur.fetchall)
            desc = cur.description
        finally:
            cur.close()
        if not rows:
            return Rows(rows)
        cls = self._row_cls.get(name)
        if cls is None:
            cls = self._row_cls[name] = namedtuple(f"Row_{name}", [d[0] for d in desc])  # type: ignore
        return Rows([cls(*r) for r in rows])

    @staticmethod
    def _run(conn: Connection, cur: Any, sql: str, params: Any, call: Callable[[], Any]) -> Any:
        """``call()`` on cursor ``cur`` (running ``sql``), a driver error wrapped as SQLAlchemy would wrap it."""
        try:
            return call()
        except Exception as exc:
            if not isinstance(exc, conn.dialect.loaded_dbapi.Error):
                raise
            # the cursor's own DBAPI connection: an invalidated Connection refuses ``.connection`` until rolled back
            err = _wrapped(conn, exc, sql, params, cur.connection, cur)
            cur.close()
            raise err from exc


def _wrapped(conn: Connection, exc: Exception, sql: str, params: Any, dbapi_conn: Any, cur: Any) -> sa.exc.DBAPIError:
    """The driver error ``exc`` as SQLAlchemy would wrap it (``OperationalError`` -> 503), ``conn`` invalidated
    if the error means the connection is gone."""
    gone = conn.dialect.is_disconnect(exc, dbapi_conn, cur)
    if gone and not conn.invalidated:
        conn.invalidate(exc)
    return sa.exc.DBAPIError.instance(sql, params, exc, conn.dialect.loaded_dbapi.Error, connection_invalidated=gone,
                                      dialect=conn.dialect)


class BatchWrites:
    """The row writes of one transaction (events, new queries, answered and expired queries), sent together.

    A batch of asks and answers writes two rows per op. Sent one statement per row, each costs a
    driver call, and in psycopg's pipeline mode a wait on the socket that gives up the GIL (which the
    event loop's thread then holds for up to the switch interval); buffered, they go out as one
    statement per kind (PostgreSQL: ``unnest`` of column arrays; SQLite: ``executemany``) when the
    transaction reads (:meth:`HotStatements.__call__` flushes first, so every read sees the
    transaction's own writes) or ends (the caller flushes before its version update).

    Kinds are sent in a fixed order (events, inserts, answers, expiries): a query is answered or
    expired only after a read found it pending (an earlier batch, or a flush before that read
    inserted it), so the order within one flush never matters. Install with :meth:`install`.
    """

    def __init__(self, hot: HotStatements) -> None:
        self.hot = hot
        self.rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in _BUFFERED}

    def install(self, conn: Connection) -> None:
        """Buffer the hot writes of ``conn``'s transaction from now on (:meth:`uninstall` ends it)."""
        self.hot.buffers[id(conn)] = self

    def uninstall(self, conn: Connection) -> None:
        self.hot.buffers.pop(id(conn), None)

    def flush(self, conn: Connection) -> None:
        """Send the buffered rows (one statement per kind; rows whose statements fail raise, nothing is dropped)."""
        pg = self.hot.pg
        for name in _BUFFERED:
            rows = self.rows[name]
            if not rows:
                continue
            cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            if pg:
                sql = _BULK_SQL[name]
                params = [list(map(typ, col)) for typ, col in zip(_BULK_TYPES[name], zip(*rows, strict=True),
                                                                  strict=True)]
                self.hot._run(conn, cur, sql, params, lambda: cur.execute(sql, params))  # noqa: B023 - called at once
            else:
                sql = self.hot.sql[name]
                self.hot._run(conn, cur, sql, rows, lambda: cur.executemany(sql, rows))  # noqa: B023 - called at once
            cur.close()
            rows.clear()


class LogTx:
    """One locked transaction on one learner: applies events to it and appends them with consecutive ``seq``."""

    def __init__(self, hot: HotStatements, conn: Connection, eid: int, idx: int, version: int,
                 learner: Learner) -> None:
        self.hot, self.conn, self.eid, self.idx, self.version, self.learner = hot, conn, eid, idx, version, learner
        self.start_version = version

    def append(self, kind: str, query_id: str, arm: int, label: str | None, reward: float | None, now: int,
               passed: list[int] | None = None, excluded: list[int] | None = None) -> int:
        """Log one event and apply it: ``answer`` tells, ``cancel`` cancels; an ``ask`` was applied by the
        caller (it chose the arm, among all items but ``excluded`` when that is given), and its ``passed``
        candidates (asked before it, in that order, and not served; logs from before restricted asks) are
        cancelled here; a ``pass`` is such an old ask that served none of its candidates."""
        if kind == "answer":
            self.learner.tell(arm, reward)
        elif kind in ("cancel", "skip"):  # a skip is recorded, never told: the pull is given back
            self.learner.cancel(arm)
        self.version += 1
        self.hot(self.conn, "ins_event", self.eid, self.idx, self.version, kind, query_id, arm, label, reward, now,
                 encode_passed(passed), encode_excluded(excluded, self.learner.n_arms_))
        if passed:
            for cand in passed:
                self.learner.cancel(cand)
        return self.version


def encode_passed(passed: list[int] | None) -> str | None:
    """A list of arms as stored in ``events.passed`` and ``events.excluded`` (``"3,5,3"``), or None."""
    return ",".join(map(str, passed)) if passed else None


def encode_excluded(excluded: list[int] | None, n_arms: int) -> str | None:
    """The items an ask excluded, as stored in ``events.excluded``: their list (``"3,5"``) or, when that would be
    longer (a participant who has rated hundreds of items), ``"b"`` and the base64 of the zlib-compressed bitmap
    over the ``n_arms`` items, so an event stays under ``n_arms / 8`` bytes or so however many were excluded."""
    if not excluded:
        return None
    text = ",".join(map(str, excluded))
    if len(text) <= n_arms // 8 + 16:
        return text
    mask = np.zeros(n_arms, dtype=np.bool_)
    mask[excluded] = True
    return "b" + base64.b64encode(zlib.compress(np.packbits(mask).tobytes(), 6)).decode("ascii")


def decode_excluded(stored: str, n_arms: int) -> np.ndarray:
    """The allowed-arms mask of an ask whose ``events.excluded`` is ``stored`` (:func:`encode_excluded`)."""
    if stored.startswith("b"):
        bits = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(stored[1:])), dtype=np.uint8))
        return ~bits[:n_arms].astype(np.bool_)
    allowed = np.ones(n_arms, dtype=np.bool_)
    allowed[[int(a) for a in stored.split(",")]] = False
    return allowed


def apply_event(learner: Learner, kind: str, arm: int, reward: float | None, *, eid: int = 0, seq: int = 0,
                passed: str | None = None, excluded: str | None = None) -> None:
    """Apply one logged event to ``learner``; an ``ask`` must reproduce its arm (asked among all arms but
    ``excluded`` when given, after its passed-over candidates in old logs)."""
    if kind in ("ask", "pass"):
        # "pass": an ask that found nothing this participant may see; its candidates come back
        skipped = [int(a) for a in passed.split(",")] if passed else []
        allowed = decode_excluded(excluded, learner.n_arms_) if excluded else None
        for want in skipped if kind == "pass" else [*skipped, arm]:
            got = learner.ask(1) if allowed is None else learner.ask(1, allowed=allowed)
            if got != [want]:
                raise ReplayError(f"experiment {eid}, seq {seq}: replayed ask gave {got}, the log says [{want}] "
                                  f"(is the learner deterministic given its seed?)")
        for cand in skipped:
            learner.cancel(cand)
    elif kind == "answer":
        learner.tell(arm, float(reward))  # type: ignore[arg-type]
    elif kind in ("cancel", "skip"):
        learner.cancel(arm)
    elif kind in EXCLUSION_KINDS:
        raise ReplayError(f"experiment {eid}, seq {seq}: an exclusion rebuilds the learner (apply_log)")
    else:
        raise ReplayError(f"experiment {eid}, seq {seq}: unknown event kind {kind!r}")


#: the events that change which participants' answers the learner is told (arm -1, ``label`` = the participant)
EXCLUSION_KINDS = ("exclude", "include")


def excluded_participants(conn: Connection, eid: int, idx: int, upto: int) -> set[str]:
    """The participants excluded at event ``upto`` of learner ``idx``'s log: its ``exclude`` and ``include`` events
    up to there, in order."""
    out: set[str] = set()
    for kind, pid in conn.execute(
            sa.select(events.c.kind, events.c.label)
            .where(events.c.experiment_id == eid, events.c.learner == idx, events.c.seq <= upto,
                   events.c.kind.in_(EXCLUSION_KINDS)).order_by(events.c.seq)):
        (out.add if kind == "exclude" else out.discard)(pid)
    return out


def rebuild_without(conn: Connection, eid: int, idx: int, learner: Learner, upto: int, dropped: set[str]) -> Learner:
    """``learner`` (fresh, with the learner's seed) fed learner ``idx``'s events ``1..upto`` as they were handed out,
    without the answers of the participants in ``dropped``: how an owner's exclusion rebuilds a learner.

    Each logged ask gives the learner the arm the log says (an ask restricted to that arm: the arms were chosen by
    the state that had those answers); an answer of a dropped participant is applied as a cancellation (the pull
    comes back untold); other answers, skips and cancellations as logged. Once the learner stops, the rest of the
    log is not applied: without those answers its rule fired there, and what came after would not have been asked.
    ReplayError when the learner cannot take a logged ask before it stops (a round-based rule whose rounds the
    dropped answers changed)."""
    rows = conn.execute(
        sa.select(events.c.seq, events.c.kind, events.c.arm, events.c.reward, events.c.passed,
                  queries.c.participant_id)
        .select_from(events.outerjoin(queries, queries.c.id == events.c.query_id))
        .where(events.c.experiment_id == eid, events.c.learner == idx, events.c.seq <= upto)
        .order_by(events.c.seq)).all()
    only = np.zeros(learner.n_arms_, dtype=np.bool_)
    for ev in rows:
        if learner.done:
            break
        kind, arm = ev.kind, int(ev.arm)
        if kind in EXCLUSION_KINDS:
            continue
        if kind == "answer" and ev.participant_id in dropped:
            kind = "cancel"
        if kind not in ("ask", "pass"):
            apply_event(learner, kind, arm, ev.reward, eid=eid, seq=int(ev.seq))
            continue
        skipped = [int(a) for a in ev.passed.split(",")] if ev.passed else []
        for want in skipped if kind == "pass" else [*skipped, arm]:
            only[want] = True
            got = learner.ask(1, allowed=only)
            only[want] = False
            if got != [want] and not learner.done:
                raise ReplayError(f"experiment {eid}, seq {ev.seq}: without the excluded answers the learner cannot "
                                  f"be handed arm {want} (it waits for answers its rule needs first)")
        for cand in skipped:
            if learner.pending_[cand] > 0:
                learner.cancel(cand)
    return learner


def replace_state(learner: Learner, rebuilt: Learner) -> None:
    """Make ``learner`` the learner ``rebuilt`` is (same class), in place: callers hold on to ``learner``."""
    if type(learner) is not type(rebuilt):
        raise TypeError(f"cannot replace a {type(learner).__name__} by a {type(rebuilt).__name__}")
    vars(learner).clear()
    vars(learner).update(vars(rebuilt))


def apply_log(conn: Connection, eid: int, idx: int, learner: Learner, after: int, upto: int,
              fresh: Callable[[], Learner] | None = None) -> int:
    """Replay learner ``idx``'s events ``after < seq <= upto`` into ``learner``; ReplayError on a gap.

    An ``exclude`` or ``include`` event rebuilds the learner from ``fresh()`` (:func:`rebuild_without`, with the
    participants excluded then), in place, as the owner's action did. Returns how many events were applied
    (``upto - after``)."""
    rows = conn.execute(
        sa.select(events.c.seq, events.c.kind, events.c.arm, events.c.reward, events.c.passed, events.c.excluded)
        .where(events.c.experiment_id == eid, events.c.learner == idx, events.c.seq > after, events.c.seq <= upto)
        .order_by(events.c.seq)
    ).all()
    expect = after + 1
    for ev in rows:
        if ev.seq != expect:
            raise ReplayError(f"experiment {eid}, learner {idx}: event log has a gap at seq {expect}")
        if ev.kind in EXCLUSION_KINDS:
            if fresh is None:
                raise ReplayError(f"experiment {eid}, seq {ev.seq}: an exclusion needs the learner's spec to rebuild")
            dropped = excluded_participants(conn, eid, idx, int(ev.seq))
            replace_state(learner, rebuild_without(conn, eid, idx, fresh(), int(ev.seq), dropped))
        else:
            apply_event(learner, ev.kind, int(ev.arm), ev.reward, eid=eid, seq=int(ev.seq), passed=ev.passed,
                        excluded=ev.excluded)
        expect += 1
    if expect != upto + 1:
        raise ReplayError(f"experiment {eid}, learner {idx}: event log ends at seq {expect - 1}, version is {upto}")
    return max(0, upto - after)


def read_snapshot(conn: Connection, eid: int, idx: int) -> tuple[int, str] | None:
    """(version, state JSON) of learner ``idx``'s stored snapshot, or None."""
    snap = conn.execute(sa.select(snapshots.c.version, snapshots.c.state)
                        .where(snapshots.c.experiment_id == eid, snapshots.c.learner == idx)).first()
    return None if snap is None else (int(snap.version), snap.state)


def write_snapshot(conn: Connection, eid: int, idx: int, version: int, learner: Learner, now: int) -> None:
    """Store ``learner``'s state as learner ``idx``'s snapshot at ``version`` (replacing the previous one)."""
    values = {"version": version, "state": learner.state_json(), "created_ms": now}
    res = conn.execute(snapshots.update().where(snapshots.c.experiment_id == eid, snapshots.c.learner == idx)
                       .values(**values))
    if res.rowcount == 0:
        conn.execute(snapshots.insert().values(experiment_id=eid, learner=idx, **values))


def learner_from_snapshot(algorithm: str, params: dict[str, Any], state: str) -> Learner:
    """A learner restored from a snapshot's state JSON."""
    return make_learner(algorithm, **params).load_state_dict(json.loads(state))


def canonical_state(state: str) -> str:
    """A state JSON in the form :meth:`Learner.state_json` writes (sorted keys), for comparisons."""
    return json.dumps(json.loads(state), sort_keys=True)


def state_digest(state: str) -> str:
    """SHA-256 (hex) of a state JSON as stored: a checkpoint whose state does not hash to its digest is corrupt."""
    return hashlib.sha256(state.encode("utf-8")).hexdigest()


class Checkpoint(namedtuple("Checkpoint", "version state sha256 claim_ms")):
    """A learner's verified checkpoint as stored: (version, state JSON, its SHA-256, claim time or None)."""

    __slots__ = ()

    @property
    def intact(self) -> bool:
        """Whether the state still hashes to the digest stored with it."""
        return state_digest(self.state) == self.sha256


def read_checkpoint(conn: Connection, eid: int, idx: int) -> Checkpoint | None:
    """Learner ``idx``'s verified checkpoint, or None."""
    row = conn.execute(sa.select(checkpoints.c.version, checkpoints.c.state, checkpoints.c.sha256,
                                 checkpoints.c.claim_ms)
                       .where(checkpoints.c.experiment_id == eid, checkpoints.c.learner == idx)).first()
    return None if row is None else Checkpoint(int(row.version), row.state, row.sha256, row.claim_ms)


def write_checkpoint(conn: Connection, eid: int, idx: int, version: int, state: str, now: int, *,
                     force: bool = False) -> bool:
    """Make ``state`` (computed by a replay of the log up to ``version``) learner ``idx``'s verified checkpoint
    and release its claim; returns whether it was written.

    By default only forward (unless the stored one is already at ``version`` or later: whoever writes,
    in whatever order, a checkpoint never moves back) and only over an existing row. ``force`` writes
    it whatever is stored, inserting the row if there is none: for callers that hold the learner's lock
    and replayed up to its current version (nothing later can exist), such as
    :meth:`~purebandits.service.study.Study.verify`, which so also replaces a corrupt checkpoint.
    """
    values = {"version": version, "state": state, "sha256": state_digest(state), "created_ms": now, "claim_ms": None}
    where = [checkpoints.c.experiment_id == eid, checkpoints.c.learner == idx]
    if not force:
        where.append(checkpoints.c.version < version)
    if conn.execute(checkpoints.update().where(*where).values(**values)).rowcount:
        return True
    if not force:
        return False
    conn.execute(checkpoints.insert().values(experiment_id=eid, learner=idx, **values))
    return True
