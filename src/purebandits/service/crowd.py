"""The participants' side: registration and rate limits, asks and answers in group-committed batches,
expiry of abandoned queries (:class:`CrowdOperations`, a part of :class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from contextlib import suppress
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.service.crowd_settings import SKIP_LABEL
from purebandits.service.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    RateLimited,
    ServiceError,
)
from purebandits.service.eventlog import (
    HotStatements,
    LogTx,
    Rows,
)
from purebandits.service.experiment_meta import ExperimentMeta, origin_hash
from purebandits.service.models import (
    experiments,
    gold_queries,
    participants,
    queries,
)
from purebandits.service.stages import stage1_over
from purebandits.service.validation import (
    check_participant_id,
    has_control,
)

log = logging.getLogger("purebandits.service")

#: lazy expiry on ask runs at most this often per learner and process (the sweep also runs)
LAZY_EXPIRE_EVERY_MS = 1000
#: the most items one ask may request (``n``): a page prefetches a few, not a session's worth
MAX_ITEMS_PER_ASK = 10
#: participant ids a process remembers as registered (others are looked up in the database)
MAX_KNOWN_PARTICIPANTS = 100_000
#: the learner index of a gold item's query in a batch (no learner: :meth:`CrowdOperations._gold_op`)
GOLD = -1
#: how long a process trusts its copy of an experiment's excluded participants (another process's change)
EXCLUSIONS_TTL_MS = 2000


class _Query:
    """One ``queries`` row as a batch sees it (kept current as the batch's ops change it)."""

    __slots__ = ("id", "arm", "status", "expires_ms", "label", "reward", "answered_ms", "opponent", "left_arm")

    def __init__(self, id: str, arm: int, status: str, expires_ms: int, label: str | None = None,
                 reward: float | None = None, answered_ms: int | None = None, opponent: int | None = None,
                 left_arm: int | None = None) -> None:
        self.id, self.arm, self.status, self.expires_ms, self.label, self.reward, self.answered_ms = \
            id, arm, status, expires_ms, label, reward, answered_ms
        self.opponent, self.left_arm = opponent, left_arm


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
        self.gold_ids: set[str] = set()  # the gold items' queries the batch's asks handed out
        self._pids = sorted({op[1] for op in ops if op[0] == "ask"}) if prefetch else []
        self._qids = sorted({op[2] for op in ops if op[0] in ("answer", "release")}) if prefetch else []

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
                q = _Query(r.id, r.arm, r.status, r.expires_ms, answered_ms=r.answered_ms, opponent=r.opponent,
                           left_arm=r.left_arm)
                self._seen[r.participant_id].append(q)
                self._by_id[q.id] = q
        if self._qids:
            for r in next(it).rows:
                q = self._by_id.get(r.id)
                if q is None:
                    self._by_id[r.id] = _Query(r.id, r.arm, r.status, r.expires_ms, r.label, r.reward,
                                               opponent=r.opponent, left_arm=r.left_arm)
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

    def asked(self, pid: str, qid: str, arm: int, expires_ms: int, opponent: int | None = None,
              left_arm: int | None = None) -> None:
        if self.prefetch:
            q = self._by_id[qid] = _Query(qid, arm, "pending", expires_ms, opponent=opponent, left_arm=left_arm)
            self._seen.setdefault(pid, []).append(q)

    def answered(self, qid: str, label: str, reward: float | None, now: int) -> None:
        q = self._by_id.get(qid)
        if q is not None:
            q.status, q.label, q.reward, q.answered_ms = "answered", label, reward, now

    def expired(self, qid: str, released_ms: int | None = None) -> None:
        q = self._by_id.get(qid)
        if q is not None:
            q.status, q.answered_ms = "expired", released_ms



#: what stage 1 of a staged experiment answers an ask once stage 2 has started: ask there (never sent to a client)
NEXT_STAGE = "next_stage"


def _raise_or_return(result: Any) -> Any:
    if isinstance(result, BaseException):
        raise result
    return result



def _answer_response(query_id: str, label: str, reward: float | None) -> dict[str, Any]:
    """An answer's acknowledgement; a skip or a gold item's answer has no reward (nothing is told to a learner)."""
    return {"query_id": query_id, "status": "answered", "label": label,
            "reward": None if reward is None else float(reward)}



class CrowdOperations:
    """Participants, asks, answers and expiry of :class:`~purebandits.service.study.Study`."""

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
        in the last ``burst / rate`` seconds: a sliding window every process reads from the same table.

        The count and the caller's insert must not interleave with another transaction's for the same
        source (under READ COMMITTED both would count ``burst - 1`` and insert): on PostgreSQL a
        transaction-scoped advisory lock keyed by table and source serializes them; SQLite's write
        transaction (``BEGIN IMMEDIATE``) already holds the database's single write lock."""
        if rate <= 0 or burst <= 0:
            return
        if conn.dialect.name == "postgresql":
            digest = hashlib.sha256(f"purebandits-admit:{table.name}:{source}".encode()).digest()
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                         {"key": int.from_bytes(digest[:8], "big", signed=True)})
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

    def next_query(self, eid: int, pid: str, n: int | None = None) -> dict[str, Any]:
        """Ask the participant's learner for items they may rate and record each as a pending query.

        Without ``n``: ``{"state": "ok", "query_id", "item", "labels", "expires_at", "n_answered"}``.
        With ``n`` (1..:data:`MAX_ITEMS_PER_ASK`): ``{"state": "ok", "queries": [...], "n_answered"}``
        with up to ``n`` queries, each as above (its own id and expiry): the participant's pending
        queries first (a reload or a retried request gets them again, not new ones), then new ones,
        distinct items. Or a ``state`` without a query: ``"paused"``, ``"stopped"``, ``"archived"``,
        ``"done"`` (the learner stopped), ``"waiting"`` (the learner needs answers to come back
        first) or ``"complete"`` (``answers_per_participant`` reached, with its ``completion_code``).
        """
        n = check_items_per_ask(n)
        for _ in range(2):  # a staged experiment's stage 1 may answer "ask stage 2" (once)
            eid, idx = self.prepare_ask(eid, pid)
            res = _raise_or_return(self.run_ops(eid, idx, [("ask", pid) if n is None else ("ask", pid, n)])[0])
            if res.get("state") != NEXT_STAGE:
                return res
            eid = self.next_stage(eid)
        raise RuntimeError(f"experiment {eid}: stage 2 asked for a next stage")

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
        """Check an ask before it takes the learner's lock; returns (experiment, learner index) to run it on: a
        staged experiment's stage 2 once this process knows it has started (:mod:`~purebandits.service.stages`)."""
        eid = self.stage_route(eid)
        meta = self.meta(eid)
        if pid not in self._known_participants:
            try:
                pid.encode("utf-8")
            except UnicodeEncodeError:
                raise Forbidden("unknown participant id: get one from POST /api/participants") from None
            with self._connect(False) as conn:
                self._check_participant(conn, pid)
        return eid, meta.assign(pid)

    def release(self, query_id: str, pid: str) -> dict[str, Any]:
        """Give back a pending query its participant will not answer (the rating page, when it closes, for the item
        it fetched ahead): the learner's pull is cancelled now instead of at expiry, so it stops counting as a
        virtual pull. Idempotent; returns ``{"query_id", "status"}``: ``"released"`` (now or before),
        ``"answered"`` or ``"expired"`` (nothing to do)."""
        eid, idx = self.prepare_release(query_id, pid)
        return _raise_or_return(self.run_ops(eid, idx, [("release", pid, query_id)])[0])

    def prepare_release(self, query_id: str, pid: str) -> tuple[int, int]:
        """Check a release before it takes the learner's lock; returns (experiment, learner index) to run it on."""
        return self._owned(query_id, pid)

    def prepare_answer(self, query_id: str, pid: str, label: str) -> tuple[int, int]:
        """Check an answer before it takes the learner's lock; returns (experiment, learner index) to run it on."""
        eid, idx = self._owned(query_id, pid)
        meta = self.meta(eid)
        if not meta.accepts(label):
            allowed = [*meta.answer_labels, SKIP_LABEL] if meta.crowd.allow_skip else meta.answer_labels
            raise BadRequest(f"label {label!r} is not in this experiment's label set {allowed}")
        return eid, idx

    def _owned(self, query_id: str, pid: str) -> tuple[int, int]:
        """(experiment, learner index) of query ``query_id`` if it was issued to ``pid``; NotFound / Forbidden."""
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
                if found is None:  # a gold item's query (its id looks like any other)
                    found = conn.execute(sa.select(gold_queries.c.experiment_id, gold_queries.c.participant_id,
                                                   sa.literal(GOLD).label("learner"))
                                         .where(gold_queries.c.id == query_id)).first()
            if found is None:
                raise NotFound(f"unknown query {query_id!r}")
            owner = (int(found.experiment_id), found.participant_id, int(found.learner))
        eid, owner_pid, idx = owner
        if not hmac.compare_digest(owner_pid.encode(), (pid or "").encode("utf-8", "replace")):
            raise Forbidden("this query was issued to another participant")
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
        if any(idx == GOLD for idx, _ in ops):  # gold items' answers: no learner, their own short transactions
            res: dict[int, Any] = {}
            for i, (idx, op) in enumerate(ops):
                if idx == GOLD:
                    try:
                        res[i] = self._gold_op(eid, op)
                    except ServiceError as exc:
                        res[i] = exc
            rest = [(i, x) for i, x in enumerate(ops) if x[0] != GOLD]
            for (i, _), r in zip(rest, self.run_batch(eid, [x for _, x in rest]) if rest else [], strict=True):
                res[i] = r
            return [res[i] for i in range(len(ops))]
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
                        out.append(self._ask_locked(meta, conn, row, tx, op[1], view, op[2] if len(op) > 2 else None))
                    else:
                        out.append(self._answer_locked(meta, conn, row, tx, op[2], op[3], view) if op[0] == "answer"
                                   else self._release_locked(conn, tx, op[2], view))
                except ServiceError as exc:
                    out.append(exc)
        # committed: remember the new pending queries' owners; answered or expired ones leave the map
        if len(self._query_owner) > 100_000:  # pending queries of other processes' lifetimes: a bound
            self._query_owner.clear()
        for (idx, op), res in zip(ops, out, strict=True):
            if op[0] == "ask":
                if isinstance(res, dict):
                    for q in res.get("queries") or ([res] if res.get("query_id") else []):
                        qid = q["query_id"]
                        self._query_owner[qid] = (eid, op[1], GOLD if qid in view.gold_ids else idx)
            elif not isinstance(res, ServiceError) or isinstance(res, Gone):
                self._query_owner.pop(op[2], None)
        return out

    def _ask_locked(self, meta: ExperimentMeta, conn: Connection, row: Any, tx: LogTx, pid: str,
                    view: _BatchQueries, n: int | None = None) -> dict[str, Any]:
        """One participant's ask (``n`` items, or one in the single-query form) in the learner's transaction.

        Every new item is the learner's own choice among the items this participant may rate
        (:meth:`~purebandits.base.Learner.ask` with ``allowed``; see :func:`excluded_arms`), so a
        participant is never turned away while they have items left to rate.
        """
        now = self.clock()
        if row.status != "active":
            return {"state": row.status, "retry_after": 5.0}
        if meta.staged and stage1_over(meta, tx.learner):
            # handed over in the transaction that made it so: the caller asks stage 2 (found outside this
            # transaction, which may be in PostgreSQL's pipeline mode)
            return {"state": NEXT_STAGE, "experiment_id": meta.id}
        eid, idx = meta.id, tx.idx
        if self.is_excluded(eid, pid, conn):
            return {"state": "excluded", "retry_after": 3600.0}
        rated: set[int] = set()
        rated_pairs: set[frozenset[int]] = set()  # pairwise: the pairs answered, the pair shown last
        last_pair: frozenset[int] | None = None
        last, n_answered, abandoned = -1, 0, 0
        live: list[Any] = []
        for q in view.seen(pid):
            last = q.arm
            if q.opponent is not None:
                last_pair = frozenset((q.arm, q.opponent))
            if q.status == "answered":  # a skip too: the participant has seen it
                n_answered += 1
                rated.add(q.arm)
                if last_pair is not None and q.opponent is not None:
                    rated_pairs.add(last_pair)
            elif q.status == "pending":
                if q.expires_ms > now:
                    live.append(q)
                else:
                    abandoned += 1  # past its expiry, not swept yet
            elif q.answered_ms is None:  # cancelled by reissue or expiry, not given back (a release has its time)
                abandoned += 1
        crowd = meta.crowd
        golds = self._x(conn, "sel_gold_seen", eid, pid).rows if crowd.gold else []
        n_answered += sum(1 for g in golds if g.answered_ms is not None)  # a session's answers count gold ones
        gold_live = [g for g in golds if g.answered_ms is None]
        quota = meta.answers_per_participant
        if quota is not None and n_answered >= quota:
            return self._completed(meta, pid, n_answered, "complete")
        want = 1 if n is None else n
        if quota is not None:
            want = max(1, min(want, quota - n_answered))
        out = [self._gold_response(meta, g.id, g.gold, now, n_answered) for g in gold_live[:want]]
        view.gold_ids.update(q["query_id"] for q in out)
        out += [self._query_response(meta, q.id, q.arm, q.expires_ms, n_answered, q.opponent, q.left_arm)
                for q in live[:want - len(out)]]
        held = {q.arm for q in live}
        held_pairs = {frozenset((q.arm, q.opponent)) for q in live if q.opponent is not None}
        blocked: dict[int, set[int]] = {}
        gold_positions = {g.position for g in golds}
        position = n_answered + len(live) + len(gold_live)  # the session positions taken (answered or held)
        reissued = False
        while len(out) < want:
            gold = crowd.gold_at(position + 1) if crowd.gold else None
            if gold is not None and position + 1 not in gold_positions:
                gid = str(uuid.uuid4())
                position += 1
                self._x(conn, "ins_gold_query", gid, eid, pid, gold, position, now)
                gold_positions.add(position)
                view.gold_ids.add(gid)
                out.append(self._gold_response(meta, gid, gold, now, n_answered))
                continue
            if meta.pairwise:
                blocked = blocked_opponents(meta.repeats, meta.n_arms, rated_pairs, held_pairs, last_pair)
                excluded = {a for a, others in blocked.items() if len(others) >= meta.n_arms - 1}
            else:
                excluded = excluded_arms(meta.repeats, meta.n_arms, rated, held, last)
            if len(excluded) >= meta.n_arms:
                break  # every item is out to this participant already
            if excluded:
                allowed = np.ones(meta.n_arms, dtype=np.bool_)
                allowed[list(excluded)] = False
                got = tx.learner.ask(1, allowed=allowed)
            else:
                got = tx.learner.ask(1)
            if not got:
                if out or reissued or tx.learner.done or \
                        not self._reissue_oldest(conn, tx, now, view, pid, n_answered, abandoned):
                    break
                reissued = True  # the learner waits for pulls that are out; the oldest was abandoned: ask again
                continue
            arm = got[0]
            opponent = left = None
            if meta.pairwise:  # the Borda reduction: a uniform opponent, sides at random
                opponent = draw_opponent(meta.n_arms, arm, blocked.get(arm, set()))
                left = arm if secrets.randbits(1) else opponent
                last_pair = frozenset((arm, opponent))
                held_pairs.add(last_pair)
            qid = str(uuid.uuid4())
            expires = now + int(meta.expiry_s * 1000)
            seq = tx.append("ask", qid, arm, None, None, now, excluded=sorted(excluded) if excluded else None)
            self._x(conn, "ins_query", qid, eid, pid, idx, arm, now, expires, seq, opponent, left)
            view.asked(pid, qid, arm, expires, opponent, left)
            held.add(arm)
            last = arm
            position += 1
            out.append(self._query_response(meta, qid, arm, expires, n_answered, opponent, left))
        if not out:
            if tx.learner.done:
                if self._all_done(conn, meta):  # the study is complete: recruitment can close
                    return self._completed(meta, pid, n_answered, "done")
                return {"state": "done", "retry_after": 5.0, "n_answered": n_answered, "study_complete": False}
            return {"state": "waiting", "retry_after": 1.0, "n_answered": n_answered}
        if n is None:
            return out[0]
        return {"state": "ok", "queries": out, "n_answered": n_answered}

    def _reissue_oldest(self, conn: Connection, tx: LogTx, now: int, view: _BatchQueries | None = None,
                        pid: str | None = None, n_answered: int = 1, abandoned: int = 0) -> bool:
        """Cancel this learner's oldest pending query for participant ``pid`` to take its pull, if the rule lets
        them; whether it did.

        Called when the learner has nothing to hand out until pulls come back (a round-based
        rule such as successive elimination or sequential halving): a query left unanswered for
        ``reissue_after_seconds`` is treated as abandoned (its late answer gets 410, as after expiry),
        so a few participants who ask and walk away cannot hold the round up for
        ``query_expiry_seconds``. The pull goes to a participant who answers, so that ids which ask
        and never answer cannot take every reissued pull and hold the round up for ever:

        - never to an id with ``abandoned`` queries in this experiment (cancelled by a reissue or
          an expiry unanswered; a query given back by ``POST /api/queries/{id}/release`` is not
          abandoned): it abandoned a pull before;
        - to an id that has answered (``n_answered``), once the query is ``reissue_after_seconds``
          old, or at once if its holder abandoned a query of the experiment before (its pulls are
          not waited for); to one with no answer yet, only once it is twice that old, so
          participants who answer get it first while a fresh honest crowd still makes progress;
        - never to an id whose registering address has ``reissue_abandoned_per_address`` abandoned
          queries in this experiment (fresh ids minted from one address, each abandoning one).

        The event log is unchanged: a reissue is a ``cancel`` then the asker's ``ask``. The holders'
        and the address's abandoned queries are read on this path only (a learner waiting for its
        round); the asker's come from its own queries, which every ask reads.
        """
        if abandoned:
            return False
        after = int(max(0.0, float(self.settings.reissue_after_seconds)) * 1000)
        if n_answered:
            oldest = self._x(conn, "sel_oldest_reissuable", tx.eid, tx.idx, now - after).rows
        else:
            oldest = self._x(conn, "sel_oldest_pending", tx.eid, tx.idx, now - 2 * after).rows
        if not oldest:
            return False
        cap = int(self.settings.reissue_abandoned_per_address)
        if cap > 0 and pid is not None and \
                self._x(conn, "sel_abandoned_from", tx.eid, pid, cap).one().n >= cap:
            return False
        self._cancel_queries(conn, tx, oldest, now, view)
        return True

    @staticmethod
    def _completed(meta: ExperimentMeta, pid: str, n_answered: int, state: str) -> dict[str, Any]:
        """A session's end: ``"complete"`` (``answers_per_participant`` reached) or ``"done"`` with ``study_complete``
        (every learner has stopped). The completion code (and the crowd platform's completion URL) come with it when
        the participant reached the quota, or answered anything before the study was complete: their work is paid
        for."""
        out: dict[str, Any] = {"state": state, "n_answered": n_answered, "retry_after": 3600.0 if state == "complete"
                               else 5.0}
        if state == "done":
            out["study_complete"] = True
        if state == "complete" or (n_answered > 0 and meta.answers_per_participant is not None):
            code = meta.completion_code(pid)
            out["completion_code"] = code
            out["completion_url"] = meta.crowd.completion_redirect(code)
        return out

    def _all_done(self, conn: Connection, meta: ExperimentMeta) -> bool:
        """Whether every learner of the experiment has stopped (read when the participant's learner has)."""
        if len(meta.learners) == 1:
            return True
        return self._x(conn, "sel_running", meta.id).one().n == 0

    @staticmethod
    def _gold_response(meta: ExperimentMeta, qid: str, gold: int, now: int, n_answered: int) -> dict[str, Any]:
        """A gold item's query, shaped as any other (its item id is the query's: nothing tells it apart); it does not
        expire (``expires_at`` is only the usual horizon)."""
        return {
            "state": "ok", "query_id": qid, "experiment_id": meta.id,
            "item": {"id": qid, "text": meta.crowd.gold[gold]["text"], "image_url": None},
            "labels": [lab["name"] for lab in meta.labels], "expires_at": (now + meta.expiry_s * 1000) / 1000.0,
            "n_answered": n_answered,
        }

    def _gold_op(self, eid: int, op: tuple[str, ...]) -> dict[str, Any]:
        """An answer to (or a release of) a gold item's query: recorded in ``gold_queries``, never told to a learner.
        Idempotent as a learner query's answer; a release leaves it pending (it is listed again at the next ask)."""
        qid = op[2]
        if op[0] == "release":
            return {"query_id": qid, "status": "released"}
        label = op[3]
        with self._connect(True) as conn:
            row = conn.execute(sa.select(gold_queries.c.label, gold_queries.c.experiment_id)
                               .where(gold_queries.c.id == qid)).one()
            if row.label is not None:
                if row.label != label:
                    raise Conflict(f"query already answered with label {row.label!r}")
                return _answer_response(qid, label, None)
            status = conn.execute(sa.select(experiments.c.status).where(experiments.c.id == eid)).scalar_one()
            if status == "archived":
                raise Conflict("experiment is archived (read-only); answers are no longer accepted")
            conn.execute(gold_queries.update().where(gold_queries.c.id == qid)
                         .values(label=label, answered_ms=self.clock()))
        self._query_owner.pop(qid, None)
        return _answer_response(qid, label, None)

    def is_excluded(self, eid: int, pid: str, conn: Connection) -> bool:
        """Whether the owner excluded participant ``pid`` from experiment ``eid`` (:meth:`set_excluded`).

        Read from ``exclusions`` in the caller's transaction ``conn`` at most every :data:`EXCLUSIONS_TTL_MS` per
        experiment and process (this process's own changes at once): another process's exclusion reaches this one
        within that time."""
        cache = self.__dict__.setdefault("_exclusion_cache", {})
        now = self.clock()
        hit = cache.get(eid)
        if hit is None or now - hit[0] >= EXCLUSIONS_TTL_MS:
            hit = cache[eid] = (now, frozenset(r.participant_id for r in self._x(conn, "sel_excluded", eid).rows))
        return pid in hit[1]

    @staticmethod
    def _query_response(meta: ExperimentMeta, qid: str, arm: int, expires_ms: int, n_answered: int,
                        opponent: int | None = None, left_arm: int | None = None) -> dict[str, Any]:
        """A query as the participant gets it: ``item`` (a rating), or ``items`` = [left, right] (a pairwise
        query; which of them is the learner's is not said), with the labels to answer with."""
        def shown(a: int) -> dict[str, Any]:
            item = meta.items[a]
            return {"id": item["id"], "text": item["text"], "image_url": item["image_url"]}

        out: dict[str, Any] = {"state": "ok", "query_id": qid, "experiment_id": meta.id}
        if opponent is None:
            out["item"] = shown(arm)
        else:
            out["items"] = [shown(left_arm), shown(arm + opponent - left_arm)]  # type: ignore[operator]
        out.update({"labels": meta.answer_labels, "expires_at": expires_ms / 1000.0, "n_answered": n_answered})
        return out

    def _answer_locked(self, meta: ExperimentMeta, conn: Connection, row: Any, tx: LogTx, query_id: str,
                       label: str, view: _BatchQueries) -> dict[str, Any] | Gone:
        rewards = meta.rewards
        q = view.query(query_id)
        told = label  # what the learner is told: the label, or in a pairwise query whether its item won
        if q.opponent is not None and label != SKIP_LABEL:
            told = "won" if (label == "left") == (q.left_arm == q.arm) else "lost"
        if q.status == "answered":
            if q.label != told:
                given = pair_choice(q.label, q) if q.opponent is not None else q.label
                raise Conflict(f"query already answered with label {given!r}")
            return _answer_response(query_id, label, q.reward)
        if q.status == "expired":
            raise Gone("query expired; ask for a new one")
        if row.status == "archived":
            raise Conflict("experiment is archived (read-only); answers are no longer accepted")
        now = self.clock()
        if q.expires_ms <= now:
            self._expire(conn, tx, now, view)
            return Gone("query expired; ask for a new one")  # after the expiry commits
        if label == SKIP_LABEL and label not in rewards:  # recorded, never told to the learner (a cancel to it)
            seq = tx.append("skip", query_id, int(q.arm), label, None, now)
            self._x(conn, "upd_answered", now, label, None, seq, query_id)
            view.answered(query_id, label, None, now)
            return _answer_response(query_id, label, None)
        reward = rewards[told]
        seq = tx.append("answer", query_id, int(q.arm), told, reward, now)
        self._x(conn, "upd_answered", now, told, reward, seq, query_id)
        view.answered(query_id, told, reward, now)
        return _answer_response(query_id, label, reward)

    def _release_locked(self, conn: Connection, tx: LogTx, query_id: str, view: _BatchQueries) -> dict[str, Any]:
        q = view.query(query_id)
        if q.status == "pending":
            self._cancel_queries(conn, tx, [_Query(query_id, int(q.arm), q.status, int(q.expires_ms))], self.clock(),
                                 view, released=True)
            return {"query_id": query_id, "status": "released"}
        return {"query_id": query_id, "status": "released" if q.status == "expired" else q.status}

    def _expire(self, conn: Connection, tx: LogTx, now: int, view: _BatchQueries | None = None) -> int:
        stale = self._x(conn, "sel_stale", tx.eid, tx.idx, now).rows
        self._cancel_queries(conn, tx, stale, now, view)
        return len(stale)

    def _cancel_queries(self, conn: Connection, tx: LogTx, rows: list[Any], now: int,
                        view: _BatchQueries | None = None, released: bool = False) -> None:
        """Cancel pending queries in the learner (a ``cancel`` event each) and mark them expired; ``released``:
        their participant gave them back (kept as the time in ``answered_ms``: not abandoned, see
        :meth:`_reissue_oldest`)."""
        for q in rows:
            self._query_owner.pop(q.id, None)
            seq = tx.append("cancel", q.id, int(q.arm), None, None, now)
            if released:
                self._x(conn, "upd_released", now, seq, q.id)
            else:
                self._x(conn, "upd_expired", seq, q.id)
            if view is not None:
                view.expired(q.id, now if released else None)

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


def excluded_arms(repeats: str, n_arms: int, rated: set[int], out: set[int], last: int) -> set[int]:
    """The items a participant may not be given now, under the experiment's repeat policy.

    ``rated``: the items they answered; ``out``: the items they hold a pending query for (an item
    is never given twice at once); ``last``: the item they were given last (-1 if none). With
    ``"never"``, every item rated or out while some item is neither; once they have rated every
    item, the ones out and ``last``. With ``"not_consecutive"``, the ones out and ``last``. The
    learner chooses among the others, so a participant is served while any item is allowed; an
    empty set means the learner's unrestricted ask, as the papers' rules were written.
    """
    if repeats == "never":
        both = rated | out
        if len(both) < n_arms:
            return both
    return out | {last} if last >= 0 else set(out)


def blocked_opponents(repeats: str, n_arms: int, rated: set[frozenset[int]], out: set[frozenset[int]],
                      last: frozenset[int] | None) -> dict[int, set[int]]:
    """The repeat policy for pairs: per item, the items it may not be paired with for this participant now.

    A pair is unordered (the sides are drawn anew each time). ``rated``: the pairs they answered (a skip
    too); ``out``: the pairs they hold a pending query for; ``last``: the pair shown last. With ``"never"``
    every pair rated or out, while some pair of the ``n (n - 1) / 2`` is neither; then (and with
    ``"not_consecutive"``) the ones out and ``last``. An item with every other item blocked is not allowed to
    the learner's ask (:meth:`~purebandits.base.Learner.ask` with ``allowed``); for the item it picks, the
    opponent is drawn uniformly among the items not blocked (:func:`draw_opponent`).
    """
    pairs = out | {last} if last is not None else set(out)
    if repeats == "never":
        both = rated | out
        if len(both) < n_arms * (n_arms - 1) // 2:
            pairs = both
    blocked: dict[int, set[int]] = {}
    for pair in pairs:
        a, b = tuple(pair)
        blocked.setdefault(a, set()).add(b)
        blocked.setdefault(b, set()).add(a)
    return blocked


def draw_opponent(n_arms: int, arm: int, blocked: set[int]) -> int:
    """The Borda reduction's opponent of ``arm``: uniform among the other items that are not ``blocked``
    (:func:`blocked_opponents`; with nothing blocked, uniform among all ``n - 1`` others, the reduction's exact
    law). Drawn from the operating system's randomness: the draw is stored with the query, never replayed."""
    if not blocked:
        j = secrets.randbelow(n_arms - 1)
        return j + (j >= arm)
    others = [j for j in range(n_arms) if j != arm and j not in blocked]
    return others[secrets.randbelow(len(others))]


def pair_choice(told: str | None, q: Any) -> str | None:
    """The side a participant chose in pairwise query ``q`` from what its learner was told (``won`` / ``lost``):
    ``left`` when the learner's item won and was shown on the left, or lost and was shown on the right."""
    if told not in ("won", "lost"):
        return told
    return "left" if (told == "won") == (q.left_arm == q.arm) else "right"


def check_items_per_ask(n: Any) -> int | None:
    """``n`` as the number of items one ask requests (None: the single-query form); BadRequest otherwise."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_ITEMS_PER_ASK:
        raise BadRequest(f"n must be an integer from 1 to {MAX_ITEMS_PER_ASK}, got {n!r}")
    return n
