"""Learners' states: the cached experiment settings, learners brought up to their stored version, replay
of the event log, verification against snapshots and verified checkpoints (:class:`LearnerStates`, a part
of :class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import Learner
from purebandits.service.crowd_settings import CrowdSettings
from purebandits.service.errors import (
    NotFound,
    ReplayError,
    Unavailable,
    WouldBlock,
)
from purebandits.service.eventlog import (
    EXCLUSION_KINDS,
    apply_event,
    apply_log,
    canonical_state,
    excluded_participants,
    learner_from_snapshot,
    read_checkpoint,
    read_snapshot,
    rebuild_without,
    replace_state,
    write_checkpoint,
    write_snapshot,
)
from purebandits.service.experiment_meta import CachedLearner, ExperimentMeta
from purebandits.service.models import (
    checkpoints,
    events,
    experiments,
    images,
    items,
    learners,
)
from purebandits.service.validation import (
    STAGED,
    LearnerSpec,
)

log = logging.getLogger("purebandits.service")

def _combine(flags: list[bool | None]) -> bool | None:
    """False if any is False, else True if any is True, else None (nothing was checked)."""
    return False if False in flags else (True if True in flags else None)


def _apply_forced(conn: Connection, meta: ExperimentMeta, idx: int, learner: Learner, after: int, upto: int) -> int:
    """:func:`~purebandits.service.eventlog.apply_log` for events handed out by another state than ``learner``'s:
    each logged ask is given to the learner as the arm the log says (an ask restricted to that arm), answers
    and cancellations as they are; ReplayError if the learner cannot take one."""
    eid = meta.id
    rows = conn.execute(
        sa.select(events.c.seq, events.c.kind, events.c.arm, events.c.reward, events.c.passed)
        .where(events.c.experiment_id == eid, events.c.learner == idx, events.c.seq > after, events.c.seq <= upto)
        .order_by(events.c.seq)).all()
    if len(rows) != upto - after:
        raise ReplayError(f"experiment {eid}, learner {idx}: event log has a gap after seq {after}")
    for ev in rows:
        if ev.kind in EXCLUSION_KINDS:
            replace_state(learner, rebuild_without(conn, eid, idx, meta.learners[idx].fresh(meta.n_arms), int(ev.seq),
                                                   excluded_participants(conn, eid, idx, int(ev.seq))))
            continue
        if ev.kind not in ("ask", "pass"):
            apply_event(learner, ev.kind, int(ev.arm), ev.reward, eid=eid, seq=int(ev.seq))
            continue
        skipped = [int(a) for a in ev.passed.split(",")] if ev.passed else []
        for want in skipped if ev.kind == "pass" else [*skipped, int(ev.arm)]:
            only = np.zeros(meta.n_arms, dtype=bool)
            only[want] = True
            if learner.ask(1, allowed=only) != [want]:
                raise ReplayError(f"experiment {eid}, seq {ev.seq}: the learner cannot be handed arm {want}")
        for cand in skipped:
            learner.cancel(cand)
    return upto - after


class _Stopped(Exception):
    """The server is shutting down: the startup verification stops between two slices of its replay."""


class Verification:
    """What the startup verification still has to do, read by ``/healthz`` and the request path (in memory only).

    ``pending`` maps each experiment to its learners not verified yet: a request for one of them is never served
    from its snapshot (see :meth:`LearnerStates._sync`). ``settling`` lists the learners served from their verified
    checkpoint whose snapshot disagreed, awaiting the low-priority whole-log replay that settles it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[int, set[int]] = {}
        self.urgent: list[int] = []  # experiments a request is waiting for: verified first
        self.settling: list[tuple[int, int]] = []
        self.events_done = 0
        self.events_total = 0
        self.phase = "verifying"  # then "settling", then "done"
        self.current: int | None = None  # the experiment being verified now
        self.stop = threading.Event()

    def count(self, n: int) -> None:
        with self.lock:
            self.events_done += n

    def progress(self) -> dict[str, int] | None:
        """``{"experiments_left", "events_done", "events_total", "settling"}`` while there is work left, else
        None (cheap: no database access)."""
        with self.lock:
            if self.phase == "done":
                return None
            return {"experiments_left": len(self.pending), "events_done": self.events_done,
                    "events_total": max(self.events_total, self.events_done), "settling": len(self.settling)}


class LearnerStates:
    """Experiment settings, learner caches, replay and verification of :class:`~purebandits.service.study.Study`."""

    def meta(self, eid: int) -> ExperimentMeta:
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
        m = ExperimentMeta(
            id=row.id, name=row.name, k=row.k, n_arms=row.n_arms, labels=list(row.labels),
            created_ms=int(row.created_ms),
            expiry_s=float(row.query_expiry_seconds or self.settings.query_expiry_seconds),
            learners=[LearnerSpec(label=r.label, algorithm=r.algorithm, params=dict(r.params), share=float(r.share),
                                  seed=int(r.seed)) for r in lrs],
            instructions=row.instructions, repeats=row.repeats, answers_per_participant=row.answers_per_participant,
            code_secret=secret, has_image=has_image,
            items=[{"arm": r.arm, "id": r.external_id, "text": r.text, "image_url": r.image_url} for r in its],
            crowd=CrowdSettings.from_json(row.crowd), query=row.query_kind or "rating",
            stages=dict(row.stages) if row.stages else None, stage_of=row.stage_of,
        )
        if m.stages is not None and m.stages.get("kind") == STAGED:  # stored as "rating": the column is short
            m.query = STAGED
        self._meta[eid] = m
        return m

    @staticmethod
    def _fresh(meta: ExperimentMeta, idx: int) -> Callable[[], Learner]:
        """A maker of learner ``idx``'s fresh state (its seed): what an exclusion in its log rebuilds from."""
        return lambda: meta.learners[idx].fresh(meta.n_arms)

    def _cached_learner(self, meta: ExperimentMeta, idx: int, version: int) -> Learner | None:
        """The cached learner if it is at ``version`` (no database work), else None (:meth:`_sync` catches up)."""
        cached = self._cache.get((meta.id, idx))
        return cached.learner if cached is not None and cached.version == version else None

    def _sync(self, conn: Connection, meta: ExperimentMeta, idx: int, version: int) -> Learner:
        """The cached learner brought to ``version`` (catch-up, snapshot or full replay)."""
        key = (meta.id, idx)
        cached = self._cache.get(key)
        if cached is not None and cached.version == version:
            return cached.learner
        if cached is not None and cached.version < version:
            try:
                apply_log(conn, meta.id, idx, cached.learner, cached.version, version, self._fresh(meta, idx))
                cached.version = version
                return cached.learner
            except ReplayError:
                log.warning("experiment %s learner %s: catch-up replay diverged; rebuilding from the log", meta.id, idx)
        self._cache.pop(key, None)
        spec = meta.learners[idx]
        if self._unverified(meta.id, idx):
            learner = self._from_checkpoint(conn, meta, idx, version)
            self._cache[key] = CachedLearner(version, learner)
            return learner
        snap = read_snapshot(conn, meta.id, idx)
        if snap is not None and snap[0] <= version:
            learner, start = learner_from_snapshot(spec.algorithm, spec.params, snap[1]), snap[0]
        else:
            learner, start = spec.fresh(meta.n_arms), 0
        apply_log(conn, meta.id, idx, learner, start, version, self._fresh(meta, idx))
        self._cache[key] = CachedLearner(version, learner)
        return learner

    #: a request for a learner the startup verification has not reached yet replays at most this many events
    #: after its verified checkpoint itself (in its transaction); more, and it gets 503 until it is verified
    PENDING_TAIL_MAX = 10_000

    def _verification(self) -> Verification | None:
        return getattr(self, "_startup_verification", None)

    def _unverified(self, eid: int, idx: int) -> bool:
        v = self._verification()
        return v is not None and idx in v.pending.get(eid, ())

    def _from_checkpoint(self, conn: Connection, meta: ExperimentMeta, idx: int, version: int) -> Learner:
        """A learner the startup verification has not reached yet, for a request: its verified checkpoint (its
        SHA-256 checked) plus the log after it, which is exact (the log is the source of truth), never its
        snapshot (not checked yet). While the verification replays this experiment, :class:`Unavailable` with
        ``Retry-After: 1`` (it is nearly ready; the same work twice under the lock would slow both). Without a
        usable checkpoint, or with a tail over :attr:`PENDING_TAIL_MAX`, :class:`Unavailable` (503 with
        ``Retry-After``, at once: waiting here would hold the learner's lock, and on SQLite the write lock of
        every experiment) and the verification takes this experiment next."""
        if self._nowait():
            raise WouldBlock("experiment not verified yet: a worker thread loads it")
        eid, spec = meta.id, meta.learners[idx]
        v = self._verification()
        if v is not None and v.current == eid:  # the verification is doing this very work, without the lock
            raise Unavailable(f"experiment {eid} is being verified after a restart; retry shortly", retry_after=1.0)
        ck = read_checkpoint(conn, eid, idx)
        if ck is not None and ck.intact and ck.version <= version and version - ck.version <= self.PENDING_TAIL_MAX:
            try:
                learner = learner_from_snapshot(spec.algorithm, spec.params, ck.state)
                apply_log(conn, eid, idx, learner, ck.version, version, self._fresh(meta, idx))
                return learner
            except Exception as exc:  # the verification replays the whole log for it
                log.warning("experiment %s learner %s: not served from its verified checkpoint (%s); waiting for "
                            "the startup verification", eid, spec.label, exc)
        if v is not None:
            with v.lock:
                if eid not in v.urgent:
                    v.urgent.append(eid)
        raise Unavailable(f"experiment {eid} is being verified after a restart (its learner is rebuilt from its "
                          f"event log); retry shortly", retry_after=max(2.0, self._wait))

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
            apply_log(conn, eid, learner, out, 0, upto, self._fresh(meta, learner))
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

    #: events read per statement by a long replay (the whole log of a big experiment does not fit in memory;
    #: the startup verification's progress moves in these steps)
    REPLAY_CHUNK = 10_000

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
        progress = self._verification()
        for stop in stops:
            if progress is not None and progress.stop.is_set():
                raise _Stopped()
            with self._connect(False) as conn:
                apply_log(conn, eid, idx, learner, at, stop, self._fresh(self.meta(eid), idx))
            if progress is not None:
                progress.count(stop - at)
            at = stop
            if snap is not None and stop == snap[0] and stop != after:
                matches = canonical_state(snap[1]) == learner.state_json()
            if background and stop != upto:
                time.sleep(self.BACKGROUND_PAUSE_S)
        return upto - after, matches

    def _verify_learner(self, meta: ExperimentMeta, idx: int, full: bool, settle: bool = True,
                        defer: bool = False) -> dict[str, Any]:
        """Verify learner ``idx`` of ``meta`` (see :meth:`verify`). The startup verification passes ``defer``
        (a learner without a usable checkpoint is left for later: ``{"deferred": True}``, nothing done) and
        not ``settle`` (a snapshot that differs from the replay from the checkpoint is replaced by that replay,
        which is served, and the whole-log replay that settles it is left to :meth:`settle_pending`:
        ``"settle": True`` in the report)."""
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
        if learner is None and defer:
            return {"label": spec.label, "deferred": True, "checkpoint": status, "replayed": replayed}
        settle_later = learner is not None and matches is False and not settle
        if settle_later:
            log.warning("experiment %s learner %s: snapshot at version %s differs from the replay from the verified "
                        "checkpoint at version %s; serving that replay (the checkpoint is SHA-256 checked and the "
                        "log is the source of truth) and settling it by a whole-log replay in the background",
                        eid, spec.label, checked[0] if checked else None, start)
        elif learner is not None and matches is False:
            log.warning("experiment %s learner %s: snapshot at version %s differs from the replay from the verified "
                        "checkpoint at version %s; replaying the whole log to settle it", eid, spec.label,
                        checked[0] if checked else None, start)
        whole = learner is None or (matches is False and settle)
        if whole:
            from_checkpoint = learner
            learner, start = spec.fresh(meta.n_arms), 0
            n, full_matches = self._replay(eid, idx, learner, 0, version, checked)
            replayed += n
            if from_checkpoint is not None and from_checkpoint.state_json() != learner.state_json():
                log.warning("experiment %s learner %s: the verified checkpoint disagrees with the full replay; "
                            "both the snapshot and the checkpoint are replaced", eid, spec.label)
            matches = full_matches
        if matches is False and not settle_later:
            log.warning("experiment %s learner %s: snapshot at version %s differs from the replay of the event log; "
                        "using the replay", eid, spec.label, checked[0] if checked else None)
        assert learner is not None
        head, late, matches = self._install(meta, idx, learner, version, matches)
        replayed += late
        return {"label": spec.label, "version": head, "snapshot_version": None if snap is None else snap[0],
                "snapshot_matches": matches, "replayed": replayed, "replayed_from": start, "full_replay": whole,
                "checkpoint": status, "settle": settle_later}

    def _install(self, meta: ExperimentMeta, idx: int, learner: Learner, version: int, matches: bool | None,
                 forced_tail: bool = False) -> tuple[int, int, bool | None]:
        """The short locked step of a verification: replay into ``learner`` (at ``version``) what was appended
        since, store it as the checkpoint (and the snapshot, unless the stored one is at the head and matched),
        make it the cached learner and mark it verified; returns (head, events replayed, matches).

        ``forced_tail`` (a settling replay that disagreed with the checkpoint-based state that was served): the
        asks logged since ``version`` were handed out by that state, so the replay gives each the arm the log
        says (an ask restricted to it) when the learner would not have chosen it (see :meth:`settle_pending`)."""
        eid = meta.id
        replayed = 0
        with self._hold(self._lock(eid, idx)):
            self._cache.pop((eid, idx), None)
            with self._connect(True) as conn:
                row = self._x(conn, "lock_learner_update", eid, idx).first()
                if row is None:
                    self._forget(eid)
                    self._mark_verified(eid, idx)
                    raise NotFound(f"experiment {eid} does not exist")
                head = int(row.version)
                if head > version and forced_tail:
                    replayed += _apply_forced(conn, meta, idx, learner, version, head)
                elif head > version:
                    now_snap = read_snapshot(conn, eid, idx)
                    at = version
                    if now_snap is not None and version < now_snap[0] <= head:
                        replayed += apply_log(conn, eid, idx, learner, at, now_snap[0], self._fresh(meta, idx))
                        at = now_snap[0]
                        late = canonical_state(now_snap[1]) == learner.state_json()
                        matches = _combine([matches, late])
                    replayed += apply_log(conn, eid, idx, learner, at, head, self._fresh(meta, idx))
                state, now = learner.state_json(), self.clock()
                write_checkpoint(conn, eid, idx, head, state, now, force=True)
                current = read_snapshot(conn, eid, idx)
                if current is None or current[0] != head or matches is False or forced_tail:
                    write_snapshot(conn, eid, idx, head, learner, now)
            self._cache[(eid, idx)] = CachedLearner(head, learner)
            self._mark_verified(eid, idx)
        return head, replayed, matches

    def _mark_verified(self, eid: int, idx: int) -> None:
        v = self._verification()
        if v is None:
            return
        with v.lock:
            left = v.pending.get(eid)
            if left is not None:
                left.discard(idx)
                if not left:
                    del v.pending[eid]
                    with suppress(ValueError):
                        v.urgent.remove(eid)

    def verify_all(self, full: bool = False) -> dict[int, dict[str, Any]]:
        """:meth:`verify` of every experiment, by id (``purebandits experiment verify``; ``full`` replays every log
        whole). The server's startup runs :meth:`begin_verification`, :meth:`verify_pending` and
        :meth:`settle_pending` instead, while it serves."""
        with self._connect(False) as conn:
            ids = [r.id for r in conn.execute(sa.select(experiments.c.id).order_by(experiments.c.id))]
        out = {}
        for eid in ids:
            with suppress(NotFound):  # deleted meanwhile
                out[eid] = self.verify(eid, full=full)
        return out

    # ------------------------------------------------------------------ startup verification, while serving
    def begin_verification(self) -> Verification:
        """Mark every learner as not verified yet (one query), before the server answers requests.

        From then on a request never loads such a learner from its snapshot: :meth:`_sync` loads it from its
        verified checkpoint plus the log after it, or answers 503 until :meth:`verify_pending` reaches it.
        """
        v = Verification()
        with self._connect(False) as conn:
            rows = conn.execute(
                sa.select(learners.c.experiment_id, learners.c.idx, learners.c.version,
                          checkpoints.c.version.label("ck"))
                .select_from(learners.outerjoin(checkpoints, sa.and_(
                    checkpoints.c.experiment_id == learners.c.experiment_id, checkpoints.c.learner == learners.c.idx)))
                .order_by(learners.c.experiment_id, learners.c.idx)).all()
        for r in rows:
            v.pending.setdefault(int(r.experiment_id), set()).add(int(r.idx))
            head, ck = int(r.version), r.ck
            v.events_total += head - int(ck) if ck is not None and int(ck) <= head else head
        self._startup_verification = v
        return v

    def verification_progress(self) -> dict[str, int] | None:
        """The startup verification's progress for ``/healthz`` (:meth:`Verification.progress`), None when done."""
        v = self._verification()
        return None if v is None else v.progress()

    def stop_verification(self) -> None:
        """Make the startup verification stop between two slices of its replay (the server is shutting down)."""
        v = self._verification()
        if v is not None:
            v.stop.set()

    def _next_pending(self, v: Verification, skip: set[int]) -> int | None:
        with v.lock:
            for eid in [*v.urgent, *v.pending]:
                if eid in v.pending and eid not in skip:
                    return eid
        return None

    def verify_pending(self) -> dict[int, dict[str, Any]]:
        """The startup verification of :meth:`begin_verification`'s learners, while the server serves: first every
        learner whose verified checkpoint replays to the head (experiments a request waits for first), then those
        without a usable checkpoint (a whole-log replay each; requests for them get 503 meanwhile). A snapshot that
        differs from the replay from the checkpoint is replaced and the learner served from that replay; its
        settling whole-log replay is left to :meth:`settle_pending`. Returns :meth:`verify`'s reports by id."""
        v = self._verification()
        if v is None:
            return {}
        per: dict[int, dict[int, dict[str, Any]]] = {}
        deferred: dict[int, list[int]] = {}
        for quick in (True, False):  # quick pass, then the whole-log replays
            done: set[int] = set()
            while (eid := self._next_pending(v, done)) is not None:
                done.add(eid)
                with v.lock:
                    idxs = sorted(v.pending.get(eid, ()))
                try:
                    meta = self.meta(eid)
                    v.current = eid
                    for idx in idxs:
                        r = self._verify_pending_learner(meta, idx, quick)
                        if r.get("deferred"):
                            deferred.setdefault(eid, []).append(idx)
                            continue
                        per.setdefault(eid, {})[idx] = r
                        if r["settle"]:
                            with v.lock:
                                v.settling.append((eid, idx))
                                v.events_total += r["version"]
                except NotFound:  # deleted meanwhile
                    with v.lock:
                        v.pending.pop(eid, None)
                except _Stopped:
                    return {}
                finally:
                    v.current = None
            if quick and deferred:
                extra = self._deferred_extra(deferred)  # a whole-log replay each: the rest of their logs count
                with v.lock:
                    v.events_total += extra
        with v.lock:
            v.phase = "settling" if v.settling else "done"
        out = {}
        for eid, rows in per.items():
            report = [rows[i] for i in sorted(rows)]
            out[eid] = {"snapshot_matches": _combine([r["snapshot_matches"] for r in report]),
                        "replayed": sum(r["replayed"] for r in report), "learners": report}
        return out

    #: attempts at one learner's verification when its lock stays taken (requests hold it, 503 after
    #: ``db_wait_seconds``): the verification waits and tries again rather than giving up on the others
    VERIFY_ATTEMPTS = 30

    def _verify_pending_learner(self, meta: ExperimentMeta, idx: int, quick: bool) -> dict[str, Any]:
        for attempt in range(self.VERIFY_ATTEMPTS):
            try:
                return self._verify_learner(meta, idx, False, settle=False, defer=quick)
            except Unavailable:
                if attempt == self.VERIFY_ATTEMPTS - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def _deferred_extra(self, deferred: dict[int, list[int]]) -> int:
        """Events before the checkpoints of the learners left for a whole-log replay (counted in the progress)."""
        extra = 0
        with self._connect(False) as conn:
            for eid, idxs in deferred.items():
                for idx in idxs:
                    ck = read_checkpoint(conn, eid, idx)
                    with suppress(NotFound):
                        if ck is not None and ck.version <= self._version(conn, eid, idx):
                            extra += ck.version
        return extra

    def settle_pending(self) -> dict[str, int]:
        """The low-priority whole-log replays of the learners :meth:`verify_pending` served from their verified
        checkpoint because their snapshot disagreed (slices of :attr:`BACKGROUND_SLICE` events with a pause,
        without lock, while the learner is served). Each is compared with the verified checkpoint at the version
        it replayed to; if they differ, an error is logged and the learner switches to the full replay's state,
        caught up to the head under its lock. The queries handed out meanwhile are in the log, so the switched
        state includes them: their asks are replayed as the arms the log says (the state that was served chose
        them), their answers as answers. Returns ``{"settled", "agreed", "switched"}``."""
        v = self._verification()
        out = {"settled": 0, "agreed": 0, "switched": 0}
        if v is None:
            return out
        while True:
            with v.lock:
                if not v.settling:
                    v.phase = "done"
                    return out
                eid, idx = v.settling[0]
            try:
                agreed = self._settle(eid, idx)
            except NotFound:
                agreed = None
            except _Stopped:
                return out
            finally:
                with v.lock:
                    v.settling.pop(0)
            out["settled"] += 1
            out["agreed"] += int(agreed is True)
            out["switched"] += int(agreed is False)

    def _settle(self, eid: int, idx: int) -> bool | None:
        """One learner's share of :meth:`settle_pending`: True if the full replay agrees with the checkpoint,
        False if it did not (switched), None if there was nothing to compare."""
        meta = self.meta(eid)
        spec = meta.learners[idx]
        with self._connect(False) as conn:
            ck = read_checkpoint(conn, eid, idx)
            self._version(conn, eid, idx)
        if ck is None or not ck.intact:  # the background checkpoint task repairs it
            return None
        learner = spec.fresh(meta.n_arms)
        started = time.perf_counter()
        self._replay(eid, idx, learner, 0, ck.version, None, background=True)
        if canonical_state(ck.state) == learner.state_json():
            log.info("experiment %s learner %s: the whole-log replay (%d events, %.1f s) agrees with the verified "
                     "checkpoint it was served from; the wrong snapshot was the only damage", eid, spec.label,
                     ck.version, time.perf_counter() - started)
            return True
        log.error("experiment %s learner %s: the whole-log replay disagrees with the verified checkpoint at version "
                  "%s that it was served from; switching to the full replay's state (the queries handed out "
                  "meanwhile are in the log: replayed as handed out)", eid, spec.label, ck.version)
        try:
            self._install(meta, idx, learner, ck.version, False, forced_tail=True)
        except ReplayError as exc:
            log.error("experiment %s learner %s: the full replay's state cannot take the queries handed out since "
                      "version %s (%s); keeping the state they were handed out from", eid, spec.label, ck.version, exc)
        return False


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

