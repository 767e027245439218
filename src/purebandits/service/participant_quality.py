"""The owner's side of the crowd: where participants came from, how well they rated, and excluding one.

:class:`ParticipantOperations` is a part of :class:`~purebandits.service.study.Study`:

- :meth:`~ParticipantOperations.register_session` records how a participant came from a crowd platform
  (Prolific's ``STUDY_ID`` / ``SESSION_ID``, Mechanical Turk's ``hitId`` / ``assignmentId``).
- :meth:`~ParticipantOperations.participant_quality` computes each participant's quality measures and flags
  (:func:`purebandits.service.rater_quality.participant_quality`) from the answers and the gold items' answers.
- :meth:`~ParticipantOperations.set_excluded` excludes a participant (or includes them again). The change is an
  ``exclude`` / ``include`` event in every learner's log, and each learner is rebuilt by replaying its log
  without the excluded participants' answers (:func:`~purebandits.service.eventlog.rebuild_without`); the log
  and the exports keep every answer, and a restart's replay rebuilds the same learners.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from purebandits.service.crowd_settings import SKIP_LABEL
from purebandits.service.errors import BadRequest, Conflict, ReplayError
from purebandits.service.eventlog import rebuild_without, replace_state
from purebandits.service.models import exclusions, gold_queries, items, platform_sessions, queries
from purebandits.service.rater_quality import AnswerRecord, GoldRecord, ParticipantQuality, participant_quality
from purebandits.service.validation import check_participant_id

__all__ = ["ParticipantOperations", "PLATFORMS"]

#: the crowd platforms a rating page recognises from its link's parameters
PLATFORMS = ("prolific", "mturk")
MAX_PLATFORM_FIELD = 100


class ParticipantOperations:
    """Platform sessions, rater quality and exclusions of :class:`~purebandits.service.study.Study`."""

    def register_session(self, eid: int, pid: str, platform: str, study: str | None, session: str) -> None:
        """Record that participant ``pid`` came to experiment ``eid`` from ``platform`` in ``session`` of ``study``
        (idempotent: the same session again changes nothing)."""
        self.meta(eid)
        pid = check_participant_id(pid)
        if platform not in PLATFORMS:
            raise BadRequest(f"platform must be one of {list(PLATFORMS)}, got {platform!r}")
        for name, value in (("session", session), ("study", study)):
            if value is not None and (not isinstance(value, str) or not 1 <= len(value) <= MAX_PLATFORM_FIELD
                                      or not value.isprintable()):
                raise BadRequest(f"{name} must be 1..{MAX_PLATFORM_FIELD} printable characters")
        if not session:
            raise BadRequest("session is required (Prolific's SESSION_ID or MTurk's assignmentId)")
        with self._connect(True) as conn:
            exists = conn.execute(sa.select(platform_sessions.c.session).where(
                platform_sessions.c.experiment_id == eid, platform_sessions.c.participant_id == pid,
                platform_sessions.c.session == session)).first()
            if exists is None:
                conn.execute(platform_sessions.insert().values(
                    experiment_id=eid, participant_id=pid, session=session, platform=platform, study=study,
                    created_ms=self.clock()))

    def excluded(self, eid: int) -> set[str]:
        """The participants excluded from experiment ``eid`` now."""
        with self._connect(False) as conn:
            return set(conn.execute(sa.select(exclusions.c.participant_id)
                                    .where(exclusions.c.experiment_id == eid)).scalars())

    def set_excluded(self, eid: int, pid: str, exclude: bool, reason: str | None = None) -> dict[str, Any]:
        """Exclude participant ``pid`` from experiment ``eid`` (``exclude``), or include them again.

        In one transaction holding every learner: the participant's pending queries are cancelled (on exclusion),
        an ``exclude`` / ``include`` event is appended to every learner's log, and each learner is rebuilt from its
        seed by replaying its log without the answers of the participants excluded now (the logged asks are handed
        to it as they were). An excluded participant's asks get ``{"state": "excluded"}``. Conflict when a learner
        cannot be rebuilt so (a round-based rule whose rounds the answers decided); nothing changes then.
        Returns ``{"participant_id", "excluded", "changed", "excluded_answers"}``.
        """
        meta = self.meta(eid)
        pid = check_participant_id(pid)
        if reason is not None and (not isinstance(reason, str) or len(reason) > 200):
            raise BadRequest("reason must be text of at most 200 characters")
        now = self.clock()
        with self._locked_many(eid, list(range(len(meta.learners))), pipeline=False) as (conn, parts, _):
            now_excluded = set(conn.execute(sa.select(exclusions.c.participant_id)
                                            .where(exclusions.c.experiment_id == eid)).scalars())
            n_answers = conn.execute(sa.select(sa.func.count()).where(
                queries.c.experiment_id == eid, queries.c.participant_id == pid,
                queries.c.status == "answered", queries.c.label != SKIP_LABEL)).scalar_one()
            out = {"participant_id": pid, "excluded": exclude, "changed": (pid in now_excluded) != exclude,
                   "excluded_answers": int(n_answers) if exclude else 0}
            if not out["changed"]:
                return out
            if exclude:
                conn.execute(exclusions.insert().values(experiment_id=eid, participant_id=pid, changed_ms=now,
                                                        reason=reason))
                now_excluded.add(pid)
            else:
                conn.execute(exclusions.delete().where(exclusions.c.experiment_id == eid,
                                                       exclusions.c.participant_id == pid))
                now_excluded.discard(pid)
            for idx, (row, tx) in parts.items():
                pending = conn.execute(sa.select(queries.c.id, queries.c.arm).where(
                    queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.participant_id == pid,
                    queries.c.status == "pending").order_by(queries.c.created_ms, queries.c.id)).all() \
                    if exclude else []
                try:
                    # the log before this transaction, then what it appends (its cancellations): as a replay reads it
                    rebuilt = rebuild_without(conn, eid, idx, meta.learners[idx].fresh(meta.n_arms), int(row.version),
                                              now_excluded)
                    for q in pending:
                        if not rebuilt.done:
                            rebuilt.cancel(int(q.arm))
                except (ReplayError, ValueError) as exc:
                    raise Conflict(f"learner {meta.learners[idx].label} cannot be rebuilt without these answers: "
                                   f"{exc}") from None
                if pending:
                    self._cancel_queries(conn, tx, pending, now)
                tx.append("exclude" if exclude else "include", str(uuid.uuid4()), -1, pid, None, now)
                replace_state(tx.learner, rebuilt)
                if rebuilt.done != (row.done_ms is not None):  # stopped, or running again, without those answers
                    self._x(conn, "upd_done", now if rebuilt.done else None, rebuilt.n_pulls if rebuilt.done else None,
                            eid, idx)
        self.__dict__.setdefault("_exclusion_cache", {}).pop(eid, None)
        self._forget_reports(eid)
        return out

    def _forget_reports(self, eid: int) -> None:
        """Drop this process's incremental counts and reports of ``eid`` (an exclusion changed what they count)."""
        with self._reports_lock:
            for cache in (self._tallies, self._points, self._forecasts):
                for key in [k for k in cache if k[0] == eid]:
                    cache.pop(key, None)
        for key in [k for k in self._counts if k[0] == eid]:
            self._counts.pop(key, None)

    def participant_quality(self, eid: int) -> dict[str, ParticipantQuality]:
        """Each participant's quality measures and flags (:func:`~purebandits.service.rater_quality.participant_quality`
        with the default thresholds), from every answer and gold answer of the experiment."""
        meta = self.meta(eid)
        return participant_quality(self._answer_records(eid), self._gold_records(eid, meta))

    def _answer_records(self, eid: int) -> Iterator[AnswerRecord]:
        """Every answer as rater quality reads it: (participant, item, label, asked, answered). In a pairwise
        experiment the item is the unordered pair (its two ids, sorted, joined by ``" | "``) and the label the
        winner's id (or ``skip``), so agreement with the consensus is agreement on which of the two is better."""
        q = queries.c
        meta = self.meta(eid)
        if meta.pairwise:
            ids = [item["id"] for item in meta.items]
            with self._connect(False) as conn:
                rows = conn.execute(sa.select(q.participant_id, q.arm, q.opponent, q.label, q.reward, q.created_ms,
                                              q.answered_ms).where(q.experiment_id == eid, q.status == "answered"))
                for pid, arm, opp, label, reward, created, answered in rows:
                    pair = " | ".join(sorted((ids[arm], ids[opp])))
                    winner = label if reward is None else ids[arm if float(reward) > 0.5 else opp]
                    yield AnswerRecord(pid, pair, winner, int(created), int(answered))
            return
        with self._connect(False) as conn:
            rows = conn.execute(
                sa.select(q.participant_id, items.c.external_id, q.label, q.created_ms, q.answered_ms)
                .select_from(queries.join(items, sa.and_(items.c.experiment_id == q.experiment_id,
                                                         items.c.arm == q.arm)))
                .where(q.experiment_id == eid, q.status == "answered"))
            for pid, item, label, created, answered in rows:
                yield AnswerRecord(pid, item, label, int(created), int(answered))

    def _gold_records(self, eid: int, meta: Any) -> list[GoldRecord]:
        g = gold_queries.c
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(g.participant_id, g.gold, g.label, g.created_ms, g.answered_ms)
                                .where(g.experiment_id == eid, g.answered_ms.is_not(None))).all()
        gold = meta.crowd.gold
        return [GoldRecord(r.participant_id, gold[r.gold]["id"], r.label, gold[r.gold]["label"], int(r.created_ms),
                           int(r.answered_ms)) for r in rows if r.gold < len(gold)]

    def gold_rows(self, eid: int) -> list[tuple[Any, ...]]:
        """Every answered gold query: (participant, gold id, label, expected label, position, created, answered)."""
        meta = self.meta(eid)
        g = gold_queries.c
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(g.participant_id, g.gold, g.label, g.position, g.created_ms, g.answered_ms)
                                .where(g.experiment_id == eid, g.answered_ms.is_not(None))
                                .order_by(g.answered_ms)).all()
        gold = meta.crowd.gold
        return [(r.participant_id, gold[r.gold]["id"], r.label, gold[r.gold]["label"], r.position, r.created_ms,
                 r.answered_ms) for r in rows]

    def platform_of(self, eid: int) -> dict[str, tuple[str, str | None, str]]:
        """Each participant's latest platform session: participant -> (platform, study, session)."""
        p = platform_sessions.c
        with self._connect(False) as conn:
            rows = conn.execute(sa.select(p.participant_id, p.platform, p.study, p.session)
                                .where(p.experiment_id == eid).order_by(p.created_ms)).all()
        return {r.participant_id: (r.platform, r.study, r.session) for r in rows}

