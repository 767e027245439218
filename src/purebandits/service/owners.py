"""What owners and the admin do to experiments: create, tokens, status, delete, list, image
(:class:`OwnerOperations`, a part of :class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from contextlib import ExitStack
from typing import Any

import sqlalchemy as sa

from purebandits.service.errors import (
    BadRequest,
    Conflict,
    NotFound,
    Unauthorized,
)
from purebandits.service.eventlog import (
    write_checkpoint,
    write_snapshot,
)
from purebandits.service.experiment_meta import hash_token, new_token, origin_hash
from purebandits.service.models import (
    checkpoints,
    events,
    exclusions,
    experiments,
    gold_queries,
    history,
    images,
    items,
    learners,
    platform_sessions,
    queries,
    snapshots,
)
from purebandits.service.validation import (
    validate_spec,
)
from purebandits.service.warmup import warm_learners

log = logging.getLogger("purebandits.service")

STATUSES = ("active", "paused", "stopped", "archived")



class OwnerOperations:
    """Creation and administration of experiments in :class:`~purebandits.service.study.Study`."""

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
                code_secret=secrets.token_hex(32), crowd=s.crowd.to_json(),
                query_kind="rating" if s.stages is not None else s.query, stages=s.stages,
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
        warm_learners([(ls.algorithm, ls.params) for ls in s.learners]
                      + ([(s.stages["stage2"]["algorithm"], s.stages["stage2"]["params"])] if s.stages else []))
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
            # a staged experiment's stage 2 is its owner's too
            conn.execute(experiments.update().where(experiments.c.stage_of == eid)
                         .values(owner_token_hash=hash_token(token)))

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
        child = self.stage_child(eid) if meta.staged else None
        if child is not None:  # a staged experiment's status is its stage 2's too (that is what participants get)
            self.set_status(child, status)
        for idx in range(len(meta.learners)):
            with self._locked(eid, idx) as (conn, _row, tx):
                write_snapshot(conn, eid, idx, tx.version, tx.learner, self.clock())
        return {"id": eid, "status": status}

    def delete_experiment(self, eid: int) -> dict[str, Any]:
        """Remove the experiment and every row of it (items, learners, events, queries, snapshots, image); a staged
        experiment's stage 2 with it. A stage 2 alone cannot be deleted (Conflict): its stage 1 would lose it."""
        meta = self.meta(eid)
        if meta.stage_of is not None:
            raise Conflict(f"experiment {eid} is stage 2 of experiment {meta.stage_of}: delete that one (both go)")
        child = self.stage_child(eid) if meta.staged else None
        if child is not None:
            self._delete_one(child)
        return self._delete_one(eid)

    def _delete_one(self, eid: int) -> dict[str, Any]:
        """:meth:`delete_experiment` of one experiment row and its rows."""
        meta = self.meta(eid)
        with ExitStack() as held:
            # the lock order ("Lock order" in transactions.py): every learner (this process's locks, then the rows), in
            # index order, then the experiment's row, then its other rows. It held only learner 0's in-process
            # lock and deleted the rows under the batches of the other learners: on PostgreSQL a batch holding
            # learner 1's row waited for a query row the delete had removed while the delete waited for
            # learner 1's row (DeadlockDetected, 503s). Now no batch of the experiment runs meanwhile.
            conn = self._lock_every_learner(held, eid, len(meta.learners))
            conn.execute(sa.select(experiments.c.id).where(experiments.c.id == eid).with_for_update())
            # children first: the same on every backend, whatever its foreign-key enforcement
            for table in (events, queries, gold_queries, platform_sessions, exclusions, snapshots, checkpoints, history,
                          images, items, learners):
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
                                .where(experiments.c.stage_of.is_(None))  # a stage 2 is shown by its stage 1
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

