"""The crowdsourcing protocol, independent of HTTP: experiments, queries, answers, replay.

One :class:`Study` per process drives any registered learner through the ask/tell contract.

Consistency
-----------
Every change to an experiment's learner happens in ONE database transaction that first
locks the experiment (PostgreSQL ``SELECT ... FOR UPDATE`` on its row; SQLite ``BEGIN
IMMEDIATE``, the database's single write lock), then brings the process's cached learner up
to the stored ``version`` by applying the events other processes appended since, then calls
``ask`` / ``tell`` / ``cancel``, appends the matching event with ``seq = version + 1`` and
bumps the version. An answer is acknowledged only after that transaction commits. If
anything fails the cached learner is dropped (it may hold uncommitted changes) and rebuilt
from the log next time.

The learner's state is a pure function of (algorithm, parameters, n_arms, seed, event log):
replaying ``ask`` (which must return the stored arm), ``answer`` (``tell``) and ``cancel``
events in ``seq`` order into a fresh learner reproduces it. Snapshots (``state_dict`` every
``snapshot_every`` events) are a cache that :meth:`Study.verify` checks against the replay.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import hmac
import io
import json
import logging
import math
import secrets
import threading
import time
import uuid
from collections import namedtuple
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from purebandits.base import Learner
from purebandits.registry import get_learner_class, make_learner
from purebandits.service.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ReplayError,
    ServiceError,
    Unauthorized,
)
from purebandits.service.models import events, experiments, items, participants, queries, snapshots
from purebandits.service.settings import Settings
from purebandits.service.storage import is_sqlite

__all__ = ["Study", "DEFAULT_LABELS", "parse_items_csv", "hash_token", "SUMMARY_COLUMNS"]

log = logging.getLogger("purebandits.service")

#: the caption contest's label set: name -> reward
DEFAULT_LABELS = [
    {"name": "unfunny", "reward": 0.0},
    {"name": "somewhat funny", "reward": 0.5},
    {"name": "funny", "reward": 1.0},
]
#: columns of the public caption-contest summaries (nextml/caption-contest-data)
SUMMARY_COLUMNS = ["rank", "funny", "somewhat_funny", "unfunny", "count", "score", "precision", "contest", "caption"]
STATUSES = ("active", "paused", "stopped")
MAX_ITEMS = 100_000
MAX_EXPIRY_SECONDS = 366 * 86400
#: lazy expiry on ask runs at most this often per experiment and process (the sweep also runs)
LAZY_EXPIRE_EVERY_MS = 1000

# Hot-path statements as plain SQL (qmark placeholders, converted per driver): they skip
# SQLAlchemy's statement compilation and cache-key work, which dominated the cost per answer.
_HOT_SQL = {
    "lock_exp": "SELECT status, version FROM experiments WHERE id = ?",
    "upd_version": "UPDATE experiments SET version = ? WHERE id = ?",
    "ins_event": "INSERT INTO events (experiment_id, seq, kind, query_id, arm, label, reward, created_ms) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "ins_query": "INSERT INTO queries (id, experiment_id, participant_id, arm, status, created_ms, expires_ms, "
                 "ask_seq) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
    "sel_query_owner": "SELECT experiment_id, participant_id FROM queries WHERE id = ?",
    "sel_query": "SELECT status, label, reward, arm, expires_ms FROM queries WHERE id = ?",
    "upd_answered": "UPDATE queries SET status = 'answered', answered_ms = ?, label = ?, reward = ?, end_seq = ? "
                    "WHERE id = ?",
    "sel_participant": "SELECT id FROM participants WHERE id = ?",
}


def hash_token(token: str) -> str:
    """Owner tokens are stored as their SHA-256 (hex); a database leak does not reveal them."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass
class _Meta:
    """The immutable part of an experiment, cached per process."""

    id: int
    name: str
    algorithm: str
    params: dict[str, Any]
    k: int
    n_arms: int
    labels: list[dict[str, Any]]
    seed: int
    created_ms: int
    expiry_s: float
    items: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rewards(self) -> dict[str, float]:
        return {lab["name"]: float(lab["reward"]) for lab in self.labels}

    def fresh_learner(self) -> Learner:
        return make_learner(self.algorithm, **self.params).start(self.n_arms, seed=self.seed)


@dataclass
class _Cached:
    version: int
    learner: Learner


# ---------------------------------------------------------------------------- input validation
def parse_items_csv(text: str) -> list[dict[str, Any]]:
    """Items from CSV text with a header: ``text`` (or ``caption``), optional ``id`` and ``image_url``."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    text_col = "text" if "text" in header else "caption" if "caption" in header else None
    if text_col is None:
        raise BadRequest(f"items_csv: the header needs a 'text' (or 'caption') column, got {header}")
    out = []
    for row in reader:
        row = {(k or "").strip(): v for k, v in row.items()}
        item: dict[str, Any] = {"text": row.get(text_col)}
        if row.get("id") not in (None, ""):
            item["id"] = row["id"]
        img = row.get("image_url") or row.get("image")
        if img:
            item["image_url"] = img
        out.append(item)
    return out


def _validate_items(raw: list[Any]) -> list[dict[str, Any]]:
    if not raw:
        raise BadRequest("item list is empty: an experiment needs at least 2 items")
    if len(raw) > MAX_ITEMS:
        raise BadRequest(f"too many items: {len(raw)} > {MAX_ITEMS}")
    seen: dict[str, int] = {}
    out = []
    for i, it in enumerate(raw):
        if isinstance(it, str):
            it = {"text": it}
        if not isinstance(it, dict):
            raise BadRequest(f"item {i}: must be an object with 'text' (and optional 'id', 'image_url')")
        text = it.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(f"item {i}: 'text' must be a non-empty string")
        _check_text(text, f"item {i}: 'text'")
        ext = it.get("id")
        ext = str(i) if ext is None else str(ext).strip()
        if not ext or len(ext) > 200:
            raise BadRequest(f"item {i}: 'id' must be 1..200 characters")
        _check_text(ext, f"item {i}: 'id'")
        if ext in seen:
            raise BadRequest(f"duplicate item id {ext!r} (items {seen[ext]} and {i})")
        seen[ext] = i
        img = it.get("image_url")
        if img is not None:
            if not isinstance(img, str) or not (img.startswith(("https://", "http://", "/"))):
                raise BadRequest(f"item {i}: 'image_url' must be an http(s) URL or an absolute path")
            _check_text(img, f"item {i}: 'image_url'")
        out.append({"id": ext, "text": text.strip(), "image_url": img})
    if len(out) < 2:
        raise BadRequest(f"an experiment needs at least 2 items, got {len(out)}")
    return out


_CONTROL = {chr(c) for c in range(32)} - {"\t", "\n", "\r"} | {"\x7f"}


def _has_control(text: str) -> bool:
    """NUL and other C0 control characters (PostgreSQL cannot store NUL; none belongs in a caption)."""
    return any(ch in _CONTROL for ch in text)


def _check_text(text: str, where: str) -> None:
    if _has_control(text):
        raise BadRequest(f"{where}: control characters (such as NUL) are not allowed")


def _check_json_numbers(value: Any, where: str) -> None:
    """Integers must fit in 64 bits and floats be finite (the learners and the database need both)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not -(2**62) <= value <= 2**62:
            raise BadRequest(f"{where}: integer {value} out of range (|x| <= 2**62)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadRequest(f"{where}: number must be finite")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_json_numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json_numbers(v, f"{where}[{i}]")


def _validate_labels(raw: list[Any] | None) -> list[dict[str, Any]]:
    if raw is None:
        return [dict(lab) for lab in DEFAULT_LABELS]
    if not isinstance(raw, list) or len(raw) < 2:
        raise BadRequest("labels: give at least 2 labels, each {'name': ..., 'reward': ...}")
    out, seen = [], set()
    for i, lab in enumerate(raw):
        if not isinstance(lab, dict) or not isinstance(lab.get("name"), str) or not lab["name"].strip():
            raise BadRequest(f"label {i}: needs a non-empty 'name'")
        name = lab["name"].strip()
        _check_text(name, f"label {i}")
        if len(name) > 100:
            raise BadRequest(f"label {name[:20]!r}...: name longer than 100 characters")
        if lab.get("reward") is None:
            raise BadRequest(f"label {name!r} has no reward")
        r = lab["reward"]
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r):
            raise BadRequest(f"label {name!r}: reward must be a finite number, got {r!r}")
        if name in seen:
            raise BadRequest(f"duplicate label {name!r}")
        seen.add(name)
        out.append({"name": name, "reward": float(r)})
    return out


# ---------------------------------------------------------------------------- the protocol
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
        self._meta: dict[int, _Meta] = {}
        self._cache: dict[int, _Cached] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._global = threading.Lock()
        self._known_participants: set[str] = set()
        self._last_expire: dict[int, int] = {}
        # pending queries issued here: id -> (eid, pid); entries leave on answer / expiry, so the
        # map stays as large as the pending set (memory must not grow with the number of answers)
        self._query_owner: dict[str, tuple[int, str]] = {}
        pg = engine.dialect.paramstyle in ("format", "pyformat")
        self._sql = {k: v.replace("?", "%s") if pg else v for k, v in _HOT_SQL.items()}
        self._row_cls: dict[str, Any] = {}
        self._hot: tuple[int, Connection] | None = None  # (thread id, connection): see _loop_connection
        if not self._sqlite:
            self._sql["lock_exp_update"] = self._sql["lock_exp"] + " FOR UPDATE"
        else:
            self._sql["lock_exp_update"] = self._sql["lock_exp"]

    def _x(self, conn: Connection, name: str, *params: Any) -> _Rows:
        """Run hot-path statement ``name`` on the connection's DBAPI cursor, in its transaction.

        Skips SQLAlchemy's per-statement execution context and result proxy (about 40 % of the
        database time per answer); a driver error is wrapped exactly as SQLAlchemy would
        (``OperationalError`` -> 503) and a broken connection is invalidated.
        """
        sql = self._sql[name]
        fairy = conn.connection
        cur = fairy.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.execute(sql, params)
            desc = cur.description
            rows = cur.fetchall() if desc is not None else []
        except Exception as exc:
            dbapi = conn.dialect.loaded_dbapi
            if not isinstance(exc, dbapi.Error):
                raise
            gone = conn.dialect.is_disconnect(exc, fairy.dbapi_connection, cur)
            if gone:
                conn.invalidate(exc)
            raise sa.exc.DBAPIError.instance(sql, params, exc, dbapi.Error, connection_invalidated=gone,
                                             dialect=conn.dialect) from exc
        finally:
            cur.close()
        if not rows:
            return _Rows(rows)
        cls = self._row_cls.get(name)
        if cls is None:
            cls = self._row_cls[name] = namedtuple(f"Row_{name}", [d[0] for d in desc])  # type: ignore
        return _Rows([cls(*r) for r in rows])

    # ------------------------------------------------------------------ locking
    def _lock(self, eid: int) -> threading.Lock:
        # SQLite has one writer: serialising in-process writers on one lock avoids busy-waiting
        if self._sqlite:
            return self._global
        lock = self._locks.get(eid)
        if lock is None:
            with self._global:
                lock = self._locks.setdefault(eid, threading.Lock())
        return lock

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        hot = self._loop_connection()
        if hot is not None:
            # the event loop's own connection: no pool checkout / reset per transaction
            hot.execution_options(sqlite_begin="IMMEDIATE" if write else "DEFERRED")
            try:
                with hot.begin():
                    yield hot
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

        The participant endpoints run their transactions on the event loop, one at a time, so
        that thread can keep one connection instead of checking one out of the pool (and
        resetting it) for every transaction, ~12 % of the server's CPU per answer. Threads
        without a running loop (owner endpoints, the expiry sweep) use the pool as before.
        """
        if not self._sqlite:
            return None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None
        hot = self._hot
        if hot is not None and hot[0] == threading.get_ident():
            return None if hot[1].in_transaction() else hot[1]  # nested use: take one from the pool
        if hot is not None:
            return None  # another loop thread owns it; this one uses the pool
        conn = self.engine.connect()
        self._hot = (threading.get_ident(), conn)
        return conn

    def _drop_loop_connection(self) -> None:
        hot, self._hot = self._hot, None
        if hot is not None:
            with suppress(Exception):
                hot[1].close()

    def close(self) -> None:
        """Release the event loop's connection (call before ``engine.dispose()``)."""
        self._drop_loop_connection()

    @contextmanager
    def _locked(self, eid: int, write: bool = True) -> Iterator[tuple[Connection, Any, Learner]]:
        """Lock experiment ``eid``, yield (connection, experiment row, learner synced to the row).

        The caller appends events through :meth:`_append` and the version is written back
        on exit; the transaction commits when the block ends without an exception.
        """
        meta = self.meta(eid)
        with self._lock(eid):
            ok = False
            tx: _Tx | None = None
            try:
                with self._connect(write) as conn:
                    row = self._x(conn, "lock_exp_update" if write else "lock_exp", eid).one()
                    learner = self._sync(conn, meta, int(row.version))
                    tx = _Tx(self, conn, eid, int(row.version), learner)
                    yield conn, row, tx
                    if tx.version != row.version:
                        self._x(conn, "upd_version", tx.version, eid)
                        every = max(1, int(self.settings.snapshot_every))
                        if tx.version // every > int(row.version) // every:
                            self._write_snapshot(conn, eid, tx.version, learner)
                ok = True
                self._cache[eid] = _Cached(tx.version, learner)
            except ServiceError:
                # refusals are raised before any change; keep the cache unless events were appended
                if tx is not None and tx.version == tx.start_version:
                    ok = True
                raise
            finally:
                if not ok:
                    self._cache.pop(eid, None)  # may hold uncommitted changes

    # ------------------------------------------------------------------ learner state
    def meta(self, eid: int) -> _Meta:
        """The experiment's immutable settings and items (cached); NotFound if absent."""
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
        m = _Meta(
            id=row.id, name=row.name, algorithm=row.algorithm, params=dict(row.params), k=row.k,
            n_arms=row.n_arms, labels=list(row.labels), seed=int(row.seed), created_ms=int(row.created_ms),
            expiry_s=float(row.query_expiry_seconds or self.settings.query_expiry_seconds),
            items=[{"arm": r.arm, "id": r.external_id, "text": r.text, "image_url": r.image_url} for r in its],
        )
        self._meta[eid] = m
        return m

    def _sync(self, conn: Connection, meta: _Meta, version: int) -> Learner:
        """The cached learner brought to ``version`` (catch-up, snapshot or full replay)."""
        cached = self._cache.get(meta.id)
        if cached is not None and cached.version == version:
            return cached.learner
        if cached is not None and cached.version < version:
            try:
                self._apply_log(conn, meta.id, cached.learner, cached.version, version)
                cached.version = version
                return cached.learner
            except ReplayError:
                log.warning("experiment %s: catch-up replay diverged; rebuilding from the log", meta.id)
        self._cache.pop(meta.id, None)
        snap = conn.execute(
            sa.select(snapshots.c.version, snapshots.c.state).where(snapshots.c.experiment_id == meta.id)
        ).first()
        if snap is not None and int(snap.version) <= version:
            learner = make_learner(meta.algorithm, **meta.params).load_state_dict(json.loads(snap.state))
            start = int(snap.version)
        else:
            learner, start = meta.fresh_learner(), 0
        self._apply_log(conn, meta.id, learner, start, version)
        self._cache[meta.id] = _Cached(version, learner)
        return learner

    def _apply_log(self, conn: Connection, eid: int, learner: Learner, after: int, upto: int) -> None:
        rows = conn.execute(
            sa.select(events.c.seq, events.c.kind, events.c.arm, events.c.reward)
            .where(events.c.experiment_id == eid, events.c.seq > after, events.c.seq <= upto)
            .order_by(events.c.seq)
        ).all()
        expect = after + 1
        for ev in rows:
            if ev.seq != expect:
                raise ReplayError(f"experiment {eid}: event log has a gap at seq {expect}")
            apply_event(learner, ev.kind, int(ev.arm), ev.reward, eid=eid, seq=int(ev.seq))
            expect += 1
        if expect != upto + 1:
            raise ReplayError(f"experiment {eid}: event log ends at seq {expect - 1}, version is {upto}")

    def _write_snapshot(self, conn: Connection, eid: int, version: int, learner: Learner) -> None:
        values = {"version": version, "state": learner.state_json(), "created_ms": self.clock()}
        res = conn.execute(snapshots.update().where(snapshots.c.experiment_id == eid).values(**values))
        if res.rowcount == 0:
            conn.execute(snapshots.insert().values(experiment_id=eid, **values))

    def replay(self, eid: int, upto: int | None = None) -> Learner:
        """A fresh learner with the experiment's seed, fed the whole event log (up to ``upto``)."""
        meta = self.meta(eid)
        with self._connect(False) as conn:
            if upto is None:
                upto = int(conn.execute(sa.select(experiments.c.version).where(experiments.c.id == eid)).scalar_one())
            learner = meta.fresh_learner()
            self._apply_log(conn, eid, learner, 0, upto)
        return learner

    def verify(self, eid: int) -> dict[str, Any]:
        """Rebuild ``eid`` by full replay, compare with its snapshot, cache and re-snapshot it.

        Returns ``{"version", "snapshot_version", "snapshot_matches"}``; a mismatching
        snapshot is logged as a warning and replaced by the replayed state.
        """
        meta = self.meta(eid)
        with self._lock(eid):
            self._cache.pop(eid, None)
            with self._connect(False) as conn:
                version = int(conn.execute(
                    sa.select(experiments.c.version).where(experiments.c.id == eid)).scalar_one())
                snap = conn.execute(
                    sa.select(snapshots.c.version, snapshots.c.state).where(snapshots.c.experiment_id == eid)
                ).first()
                learner = meta.fresh_learner()
                matches = None
                if snap is not None and int(snap.version) <= version:
                    self._apply_log(conn, eid, learner, 0, int(snap.version))
                    stored = json.dumps(json.loads(snap.state), sort_keys=True)
                    matches = stored == learner.state_json()
                    if not matches:
                        log.warning("experiment %s: snapshot at version %s differs from the replay of the "
                                    "event log; using the replay", eid, snap.version)
                    self._apply_log(conn, eid, learner, int(snap.version), version)
                else:
                    self._apply_log(conn, eid, learner, 0, version)
            self._cache[eid] = _Cached(version, learner)
        with self._locked(eid) as (conn, row, tx):
            self._write_snapshot(conn, eid, tx.version, tx.learner)
        return {"version": version, "snapshot_version": None if snap is None else int(snap.version),
                "snapshot_matches": matches}

    def verify_all(self) -> dict[int, dict[str, Any]]:
        """:meth:`verify` of every experiment, by id (the ``verify`` command's report)."""
        with self._connect(False) as conn:
            ids = [r.id for r in conn.execute(sa.select(experiments.c.id).order_by(experiments.c.id))]
        return {eid: self.verify(eid) for eid in ids}

    # ------------------------------------------------------------------ owners
    def create_experiment(self, spec: dict[str, Any]) -> tuple[int, str]:
        """Validate ``spec`` and create the experiment; returns (id, owner token).

        ``spec`` keys: ``name``, ``items`` (list of {id, text, image_url} or strings) or
        ``items_csv`` (CSV text), ``labels`` (list of {name, reward}; default the caption
        contest's), ``algorithm`` (registry name, default ``lil_ucb``), ``params`` (dict), and
        the shortcuts ``k``, ``delta``, ``budget`` (merged into ``params``), ``seed``,
        ``query_expiry_seconds``. Raises :class:`BadRequest` naming the problem; nothing is
        created then.
        """
        name = spec.get("name") or "experiment"
        if not isinstance(name, str) or len(name) > 200:
            raise BadRequest("name must be a string of at most 200 characters")
        _check_text(name, "name")
        if spec.get("items") is not None and spec.get("items_csv") is not None:
            raise BadRequest("give either 'items' or 'items_csv', not both")
        raw_items = parse_items_csv(spec["items_csv"]) if spec.get("items_csv") is not None else spec.get("items")
        if raw_items is None:
            raise BadRequest("item list is empty: give 'items' (a JSON list) or 'items_csv' (CSV text)")
        if not isinstance(raw_items, list):
            raise BadRequest("items must be a list")
        its = _validate_items(raw_items)
        labels = _validate_labels(spec.get("labels"))
        algorithm = spec.get("algorithm") or "lil_ucb"
        params = dict(spec.get("params") or {})
        for key in ("k", "delta", "budget"):
            if spec.get(key) is not None:
                if key in params and params[key] != spec[key]:
                    raise BadRequest(f"parameter {key!r} given twice with different values")
                params[key] = spec[key]
        _check_json_numbers(params, "params")
        try:
            cls = get_learner_class(algorithm)
            learner = make_learner(algorithm, **params)
        except (ValueError, TypeError) as exc:
            raise BadRequest(str(exc)) from None
        seed = spec.get("seed")
        if seed is None:
            seed = secrets.randbits(32)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 or seed >= 2**63:
            raise BadRequest(f"seed must be an integer in [0, 2**63), got {seed!r}")
        try:
            learner.start(len(its), seed=seed)
            learner.recommend()
        except (ValueError, TypeError, OverflowError) as exc:
            raise BadRequest(f"bad parameter for {algorithm}: {exc}") from None
        except Exception as exc:  # e.g. a compiled kernel refusing a value: still the client's input
            log.info("learner %s refused parameters %s: %r", algorithm, params, exc)
            raise BadRequest(f"bad parameter for {algorithm}: the learner cannot start with {params}") from None
        if cls.tags.get("bounded_rewards") and any(not 0.0 <= lab["reward"] <= 1.0 for lab in labels):
            raise BadRequest(f"{algorithm} needs rewards in [0, 1]; label rewards are "
                             f"{[lab['reward'] for lab in labels]}")
        expiry = spec.get("query_expiry_seconds")
        if expiry is not None and (isinstance(expiry, bool) or not isinstance(expiry, int | float)
                                   or not 0 < expiry <= MAX_EXPIRY_SECONDS):
            raise BadRequest(f"query_expiry_seconds must be a number in (0, {MAX_EXPIRY_SECONDS}] "
                             f"(one year), got {expiry!r}")
        try:
            json.dumps(params)
        except TypeError:
            raise BadRequest("params must be JSON values") from None
        token = secrets.token_urlsafe(24)
        now = self.clock()
        with self._connect(True) as conn:
            eid = conn.execute(experiments.insert().values(
                name=name, algorithm=algorithm, params=params, k=learner.k_, n_arms=len(its), labels=labels,
                status="active", owner_token_hash=hash_token(token), seed=int(seed), version=0,
                query_expiry_seconds=expiry, created_ms=now,
            ).returning(experiments.c.id)).scalar_one()
            conn.execute(items.insert(), [
                {"experiment_id": eid, "arm": a, "external_id": it["id"], "text": it["text"],
                 "image_url": it["image_url"]} for a, it in enumerate(its)
            ])
            conn.execute(snapshots.insert().values(experiment_id=eid, version=0, state=learner.state_json(),
                                                   created_ms=now))
        return int(eid), token

    def rotate_token(self, eid: int) -> str:
        """A new owner token for ``eid`` (the old one stops working); used by ``serve --demo``."""
        token = secrets.token_urlsafe(24)
        with self._connect(True) as conn:
            conn.execute(experiments.update().where(experiments.c.id == eid).values(owner_token_hash=hash_token(token)))
        return token

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

    def check_admin(self, token: str | None) -> None:
        """Raise :class:`Unauthorized` unless ``token`` is the admin token (no admin token: anyone may)."""
        admin = self.settings.admin_token
        if admin is None:
            return
        if not token or not hmac.compare_digest(hash_token(token), hash_token(admin)):
            raise Unauthorized("creating experiments needs the admin token: 'Authorization: Bearer <token>'")

    def set_status(self, eid: int, status: str) -> dict[str, Any]:
        """Pause (``paused``), resume (``active``) or stop (``stopped``, final)."""
        if status not in STATUSES:
            raise BadRequest(f"status must be one of {list(STATUSES)}")
        with self._locked(eid) as (conn, row, tx):
            if row.status == "stopped" and status != "stopped":
                raise Conflict("experiment is stopped; a stopped experiment cannot be resumed")
            conn.execute(experiments.update().where(experiments.c.id == eid).values(status=status))
            self._write_snapshot(conn, eid, tx.version, tx.learner)
        return {"id": eid, "status": status}

    def list_experiments(self) -> list[dict[str, Any]]:
        """Id, name, status and number of items of every experiment, oldest first."""
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(experiments.c.id, experiments.c.name, experiments.c.status,
                                          experiments.c.n_arms).order_by(experiments.c.id)).all()
        return [{"id": r.id, "name": r.name, "status": r.status, "n_items": r.n_arms} for r in rows]

    # ------------------------------------------------------------------ participants
    def new_participant(self) -> str:
        """Register a new anonymous participant and return its id (a random UUID)."""
        pid = str(uuid.uuid4())
        with self._connect(True) as conn:
            conn.execute(participants.insert().values(id=pid, created_ms=self.clock()))
        self._known_participants.add(pid)
        return pid

    def _check_participant(self, conn: Connection, pid: str) -> None:
        if pid in self._known_participants:
            return
        if not pid or _has_control(pid) or self._x(conn, "sel_participant", pid).first() is None:
            raise Forbidden("unknown participant id: get one from POST /api/participants")
        self._known_participants.add(pid)

    def next_query(self, eid: int, pid: str) -> dict[str, Any]:
        """Ask the learner for one item for participant ``pid`` and record a pending query.

        Returns ``{"state": "ok", "query_id", "item", "labels", "expires_at"}``, or a
        ``state`` of ``"paused"``, ``"stopped"``, ``"done"`` (the learner stopped) or
        ``"waiting"`` (the learner needs answers to come back first) without a query.
        """
        meta = self.meta(eid)
        if pid not in self._known_participants:
            with self._connect(False) as conn:
                self._check_participant(conn, pid)
        with self._locked(eid) as (conn, row, tx):
            now = self.clock()
            if now - self._last_expire.get(eid, -LAZY_EXPIRE_EVERY_MS) >= LAZY_EXPIRE_EVERY_MS:
                self._expire(conn, tx, now)
                self._last_expire[eid] = now
            if row.status != "active":
                return {"state": row.status, "retry_after": 5.0}
            arms = tx.learner.ask(1)
            if not arms:
                state = "done" if tx.learner.done else "waiting"
                return {"state": state, "retry_after": 1.0 if state == "waiting" else 5.0}
            arm = arms[0]
            qid = str(uuid.uuid4())
            expires = now + int(meta.expiry_s * 1000)
            seq = tx.append("ask", qid, arm, None, None, now)
            self._x(conn, "ins_query", qid, eid, pid, arm, now, expires, seq)
        if len(self._query_owner) > 100_000:  # pending queries of other processes' lifetimes: a bound
            self._query_owner.clear()
        self._query_owner[qid] = (eid, pid)
        item = meta.items[arm]
        return {
            "state": "ok",
            "query_id": qid,
            "experiment_id": eid,
            "item": {"id": item["id"], "text": item["text"], "image_url": item["image_url"]},
            "labels": [lab["name"] for lab in meta.labels],
            "expires_at": expires / 1000.0,
        }

    def answer(self, query_id: str, pid: str, label: str) -> dict[str, Any]:
        """Record ``label`` for a pending query, ``tell`` the learner, commit, then acknowledge.

        Idempotent: answering an answered query with the same label returns the same
        response and changes nothing. Unknown query -> NotFound; other participant's query
        -> Forbidden; expired -> Gone; a different label the second time -> Conflict; a label
        outside the set -> BadRequest.
        """
        owner = self._query_owner.get(query_id)
        if owner is None and _has_control(query_id):
            raise NotFound(f"unknown query {query_id!r}")
        if owner is None:
            with self._connect(False) as conn:
                found = self._x(conn, "sel_query_owner", query_id).first()
            if found is None:
                raise NotFound(f"unknown query {query_id!r}")
            owner = (int(found.experiment_id), found.participant_id)
        eid, owner_pid = owner
        if not hmac.compare_digest(owner_pid.encode(), (pid or "").encode()):
            raise Forbidden("this query was issued to another participant")
        meta = self.meta(eid)
        rewards = meta.rewards
        if label not in rewards:
            raise BadRequest(f"label {label!r} is not in this experiment's label set {list(rewards)}")
        expired = False
        with self._locked(eid) as (conn, row, tx):
            q = self._x(conn, "sel_query", query_id).one()
            if q.status == "answered":
                if q.label != label:
                    raise Conflict(f"query already answered with label {q.label!r}")
                return _answer_response(query_id, q.label, q.reward)
            if q.status == "expired":
                raise Gone("query expired; ask for a new one")
            now = self.clock()
            if q.expires_ms <= now:
                self._expire(conn, tx, now)
                expired = True
            else:
                reward = rewards[label]
                seq = tx.append("answer", query_id, int(q.arm), label, reward, now)
                self._x(conn, "upd_answered", now, label, reward, seq, query_id)
        # committed: the owner map only needs pending queries (a retry looks the owner up in the table)
        self._query_owner.pop(query_id, None)
        if expired:
            raise Gone("query expired; ask for a new one")
        return _answer_response(query_id, label, rewards[label])

    def _expire(self, conn: Connection, tx: _Tx, now: int) -> int:
        stale = conn.execute(
            sa.select(queries.c.id, queries.c.arm)
            .where(queries.c.experiment_id == tx.eid, queries.c.status == "pending", queries.c.expires_ms <= now)
            .order_by(queries.c.expires_ms, queries.c.id)
        ).all()
        for q in stale:
            self._query_owner.pop(q.id, None)
            seq = tx.append("cancel", q.id, int(q.arm), None, None, now)
            conn.execute(queries.update().where(queries.c.id == q.id).values(status="expired", end_seq=seq))
        return len(stale)

    def expire_stale(self) -> int:
        """Expire every pending query past its time, in every experiment; returns how many."""
        now = self.clock()
        with self._connect(False) as conn:
            eids = [r[0] for r in conn.execute(
                sa.select(queries.c.experiment_id).distinct()
                .where(queries.c.status == "pending", queries.c.expires_ms <= now))]
        n = 0
        for eid in eids:
            with self._locked(eid) as (conn, _row, tx):
                n += self._expire(conn, tx, self.clock())
        return n

    # ------------------------------------------------------------------ results
    def learner_state(self, eid: int) -> dict[str, Any]:
        """The experiment's learner state (``state_dict``) and the version it belongs to."""
        with self._locked(eid, write=False) as (_conn, row, tx):
            return {"version": tx.version, "state": json.loads(tx.learner.state_json())}

    def label_counts(self, conn: Connection, eid: int, n_arms: int, labels: list[str]) -> np.ndarray:
        """Answered queries per (arm, label), counted in the database (not in the learner's memory)."""
        out = np.zeros((n_arms, len(labels)), dtype=np.int64)
        col = {name: j for j, name in enumerate(labels)}
        for arm, label, c in conn.execute(
            sa.select(queries.c.arm, queries.c.label, sa.func.count())
            .where(queries.c.experiment_id == eid, queries.c.status == "answered")
            .group_by(queries.c.arm, queries.c.label)
        ):
            out[arm, col[label]] = c
        return out

    def results(self, eid: int, timeline: bool = True) -> dict[str, Any]:
        """Ranking with the learner's intervals, label counts, stopping progress, recommendation."""
        meta = self.meta(eid)
        names = [lab["name"] for lab in meta.labels]
        now = self.clock()
        with self._locked(eid, write=False) as (conn, row, tx):
            learner = tx.learner
            counts = self.label_counts(conn, eid, meta.n_arms, names)
            n_pending = int(conn.execute(sa.select(sa.func.count()).select_from(queries).where(
                queries.c.experiment_id == eid, queries.c.status == "pending")).scalar_one())
            tl = self._timeline(conn, eid, meta, now) if timeline else None
            means = learner.means()
            try:
                lo, hi = learner.intervals()
            except NotImplementedError:
                lo = np.full(meta.n_arms, -np.inf)
                hi = np.full(meta.n_arms, np.inf)
            rec = learner.recommend()
            progress = stopping_progress(learner, meta.params, lo, hi, rec)
            version, status = tx.version, row.status
            n_told = learner.n_pulls
            lcounts, pend = learner.counts_.copy(), learner.pending_.copy()
        rec_set = set(rec)
        order = sorted(range(meta.n_arms), key=lambda a: (a not in rec_set, -means[a] if lcounts[a] else math.inf, a))
        ranking = []
        for rank, a in enumerate(order, 1):
            it = meta.items[a]
            ranking.append({
                "rank": rank, "arm": a, "id": it["id"], "text": it["text"],
                "mean": float(means[a]) if lcounts[a] else None,
                "lower": _finite_or_none(lo[a]), "upper": _finite_or_none(hi[a]),
                "count": int(lcounts[a]), "pending": int(pend[a]),
                "labels": {n: int(counts[a, j]) for j, n in enumerate(names)},
                "recommended": a in rec_set,
            })
        return {
            "experiment_id": eid, "name": meta.name, "algorithm": meta.algorithm, "params": meta.params,
            "status": status, "done": bool(learner.done), "version": version,
            "n_answers": int(counts.sum()), "n_told": n_told, "n_pending": n_pending,
            "labels": meta.labels, "label_totals": {n: int(counts[:, j].sum()) for j, n in enumerate(names)},
            "recommendation": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]} for a in rec],
            "stopping": progress, "ranking": ranking, "timeline": tl, "now": now / 1000.0,
        }

    def _timeline(self, conn: Connection, eid: int, meta: _Meta, now: int) -> dict[str, Any]:
        span = max(1, now - meta.created_ms)
        width = 1000
        for w in (1000, 5000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000):
            width = w
            if span / w <= 120:
                break
        bucket = (events.c.created_ms // width).label("b")
        rows = conn.execute(
            sa.select(bucket, sa.func.count()).where(events.c.experiment_id == eid, events.c.kind == "answer")
            .group_by(bucket).order_by(bucket)
        ).all()
        return {"bucket_seconds": width / 1000.0, "buckets": [[int(b) * width / 1000.0, int(c)] for b, c in rows]}

    def export_answers(self, eid: int) -> Iterator[list[Any]]:
        """CSV rows (with header) of every answer, in the order they were applied."""
        meta = self.meta(eid)
        yield ["seq", "query_id", "participant_id", "arm", "item_id", "label", "reward", "asked_at", "answered_at"]
        with self._connect(False) as conn:
            rows = conn.execute(
                sa.select(queries).where(queries.c.experiment_id == eid, queries.c.status == "answered")
                .order_by(queries.c.end_seq)
            ).all()
        for q in rows:
            yield [q.end_seq, q.id, q.participant_id, q.arm, meta.items[q.arm]["id"], q.label, q.reward,
                   _iso(q.created_ms), _iso(q.answered_ms)]

    def export_summary(self, eid: int) -> list[list[Any]]:
        """Rows in the public caption-contest summary format (see ``summary_rows``)."""
        meta = self.meta(eid)
        names = [lab["name"] for lab in meta.labels]
        with self._connect(False) as conn:
            counts = self.label_counts(conn, eid, meta.n_arms, names)
        return summary_rows(counts, [lab["reward"] for lab in meta.labels], [it["text"] for it in meta.items],
                            meta.name)

    def experiment_info(self, eid: int) -> dict[str, Any]:
        """What the owner API reports of an experiment: its spec, status and version."""
        meta = self.meta(eid)
        with self._connect(False) as conn:
            row = conn.execute(sa.select(experiments.c.status, experiments.c.version)
                               .where(experiments.c.id == eid)).one()
        return {"id": eid, "name": meta.name, "algorithm": meta.algorithm, "params": meta.params, "k": meta.k,
                "n_items": meta.n_arms, "labels": meta.labels, "status": row.status, "version": int(row.version),
                "seed": meta.seed, "query_expiry_seconds": meta.expiry_s, "created_at": meta.created_ms / 1000.0}


class _Rows:
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


class _Tx:
    """One locked transaction: appends events with consecutive sequence numbers."""

    def __init__(self, study: Study, conn: Connection, eid: int, version: int, learner: Learner) -> None:
        self.study, self.conn, self.eid, self.version, self.learner = study, conn, eid, version, learner
        self.start_version = version

    def append(self, kind: str, query_id: str, arm: int, label: str | None, reward: float | None, now: int) -> int:
        if kind == "answer":
            self.learner.tell(arm, reward)
        elif kind == "cancel":
            self.learner.cancel(arm)
        # "ask" was already applied by the caller (it chose the arm)
        self.version += 1
        self.study._x(self.conn, "ins_event", self.eid, self.version, kind, query_id, arm, label, reward, now)
        return self.version


def apply_event(learner: Learner, kind: str, arm: int, reward: float | None, *, eid: int = 0, seq: int = 0) -> None:
    """Apply one logged event to ``learner``; an ``ask`` must reproduce the stored arm."""
    if kind == "ask":
        got = learner.ask(1)
        if got != [arm]:
            raise ReplayError(f"experiment {eid}, seq {seq}: replayed ask gave {got}, the log says [{arm}] "
                              f"(is the learner deterministic given its seed?)")
    elif kind == "answer":
        learner.tell(arm, float(reward))  # type: ignore[arg-type]
    elif kind == "cancel":
        learner.cancel(arm)
    else:
        raise ReplayError(f"experiment {eid}, seq {seq}: unknown event kind {kind!r}")


def stopping_progress(learner: Learner, params: dict[str, Any], lo: np.ndarray, hi: np.ndarray,
                      rec: list[int]) -> dict[str, Any]:
    """How close the learner is to stopping, for any learner.

    ``fraction`` in [0, 1] is 1 once ``done``; for a budgeted learner it is pulls / budget;
    otherwise it is the share of non-recommended arms whose upper bound is already below
    the lowest lower bound of the recommended set (all separated = the intervals alone would
    stop). A learner may add its own figures with an optional ``stopping_progress()`` method.
    """
    n = learner.n_pulls
    out: dict[str, Any] = {"done": bool(learner.done), "kind": learner.kind, "n_pulls": n}
    budget = params.get("budget", getattr(learner, "budget", None))
    others = [a for a in range(len(lo)) if a not in set(rec)]
    threshold = min(lo[a] for a in rec) if rec else -np.inf
    separated = int(sum(1 for a in others if hi[a] < threshold))
    out["separated"] = separated
    out["separated_fraction"] = separated / len(others) if others else 1.0
    out["margin"] = _finite_or_none(threshold - max((hi[a] for a in others), default=-np.inf))
    if isinstance(budget, int | float) and not isinstance(budget, bool) and budget > 0:
        out["budget"] = budget
        out["budget_fraction"] = min(1.0, n / budget)
        fraction = out["budget_fraction"]
    else:
        fraction = out["separated_fraction"]
    out["fraction"] = 1.0 if out["done"] else float(fraction)
    hook = getattr(learner, "stopping_progress", None)
    if callable(hook):
        out["learner"] = hook()
    return out


def summary_rows(counts: np.ndarray, rewards: list[float], texts: list[str], contest: str) -> list[list[Any]]:
    """Summary CSV rows with the columns of the public caption-contest summaries.

    For the default labels this is exactly the public format: ``funny / somewhat_funny /
    unfunny`` are the label counts, ``score`` is the mean on the 1 (unfunny) .. 3 (funny)
    scale and ``precision`` the standard error of that mean (sample std / sqrt(count)).
    Other label sets: ``funny`` counts the labels with the highest reward, ``unfunny`` those
    with the lowest, ``somewhat_funny`` all others, and ``score = 1 + 2 (r - r_min) /
    (r_max - r_min)`` averaged over answers (so the scale is still 1..3).
    """
    r = np.asarray(rewards, dtype=float)
    lo_r, hi_r = float(r.min()), float(r.max())
    spread = hi_r - lo_r if hi_r > lo_r else 1.0
    s = 1.0 + 2.0 * (r - lo_r) / spread  # score of each label
    top, bottom = r == hi_r, r == lo_r
    mid = ~(top | bottom)
    rows = []
    for a in range(counts.shape[0]):
        c = counts[a]
        n = int(c.sum())
        if n:
            score = float(c @ s) / n
            var = float(c @ (s - score) ** 2) / (n - 1) if n > 1 else 0.0
            prec = math.sqrt(var) / math.sqrt(n)
        else:
            score = prec = math.nan
        rows.append([int(c[top].sum()), int(c[mid].sum()), int(c[bottom].sum()), n, score, prec, a])
    rows.sort(key=lambda x: (x[3] == 0, -x[4] if x[3] else 0.0, x[6]))
    out = [list(SUMMARY_COLUMNS)]
    for rank, (f, sf, u, n, score, prec, a) in enumerate(rows, 1):
        out.append([rank, f, sf, u, n, "" if n == 0 else repr(score), "" if n == 0 else repr(prec), contest, texts[a]])
    return out


def _answer_response(query_id: str, label: str, reward: float) -> dict[str, Any]:
    return {"query_id": query_id, "status": "answered", "label": label, "reward": float(reward)}


def _iso(ms: int | None) -> str:
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms) % 1000:03d}Z"
