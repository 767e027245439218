"""Learners' states: the cached experiment settings, learners brought up to their stored version, replay
of the event log, verification against snapshots and verified checkpoints (:class:`LearnerStates`, a part
of :class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import logging
import secrets
import time
from contextlib import suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import Learner
from purebandits.service.errors import (
    NotFound,
    ReplayError,
)
from purebandits.service.eventlog import (
    apply_log,
    canonical_state,
    learner_from_snapshot,
    read_checkpoint,
    read_snapshot,
    write_checkpoint,
    write_snapshot,
)
from purebandits.service.experiment_meta import CachedLearner, ExperimentMeta
from purebandits.service.models import (
    checkpoints,
    experiments,
    images,
    items,
    learners,
)
from purebandits.service.validation import (
    LearnerSpec,
)

log = logging.getLogger("purebandits.service")

def _combine(flags: list[bool | None]) -> bool | None:
    """False if any is False, else True if any is True, else None (nothing was checked)."""
    return False if False in flags else (True if True in flags else None)



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
        )
        self._meta[eid] = m
        return m

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
        self._cache[key] = CachedLearner(version, learner)
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

    def _verify_learner(self, meta: ExperimentMeta, idx: int, full: bool) -> dict[str, Any]:
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
            self._cache[(eid, idx)] = CachedLearner(head, learner)
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

