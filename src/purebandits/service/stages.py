"""Staged experiments: ratings over every item, then comparisons among stage 1's top m, one experiment id.

A staged experiment (``"query": "rating_then_pairwise"``, :func:`~purebandits.service.validation._validate_stages`)
is a rating experiment whose learner finds the top ``top_m`` items (its ``k``). When that learner stops (its top m
proven) or has been told ``ratings_budget`` ratings, the transaction that told it creates, before it commits, a
second experiment: a pairwise one over those m items (the Borda reduction, with the stage's own learner), whose
row points back (``experiments.stage_of``) and records the switch (``experiments.stages``: the m items, why, and
stage 1's version and answers then). The switch is therefore as durable as the answer that caused it: committed
with it, never without it. It is also a function of the log: replaying stage 1's log up to the recorded version
gives the same top m (:meth:`StageOperations.verify_stage_switch`).

Participants keep using the first experiment's id: an ask there after the switch is served by stage 2
(:meth:`StageOperations.stage_route`), so a page sees its next query take the pairwise shape and nothing else
changes. Answers go by query id to the experiment that issued the query: a stage 1 query answered after the
switch is stored and told to stage 1's learner as ever (its ranking may still move; stage 2's items do not).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.service.errors import Conflict
from purebandits.service.eventlog import LogTx, apply_log, write_checkpoint, write_snapshot
from purebandits.service.experiment_meta import ExperimentMeta
from purebandits.service.models import experiments, images, items, learners
from purebandits.service.validation import PAIRWISE_LABELS, stage2_learner

__all__ = ["StageOperations", "stage1_over"]


def stage1_over(meta: ExperimentMeta, learner: Any) -> bool:
    """Whether a staged experiment's stage 1 is over: its learner stopped or was told ``ratings_budget`` ratings."""
    budget = (meta.stages or {}).get("ratings_budget")
    return bool(learner.done) or (budget is not None and learner.n_pulls >= int(budget))


class StageOperations:
    """The stage switch of a staged experiment and what reads it, in :class:`~purebandits.service.study.Study`."""

    def stage_child(self, eid: int, conn: Connection | None = None) -> int | None:
        """The id of ``eid``'s stage 2 experiment, or None before its switch (cached once found: it is final)."""
        child = self._stage_children.get(eid)
        if child is not None:
            return child
        query = sa.select(experiments.c.id).where(experiments.c.stage_of == eid)
        if conn is not None:
            child = conn.execute(query).scalar()
        else:
            with self._connect(False) as c:
                child = c.execute(query).scalar()
        if child is not None:
            self._stage_children[eid] = int(child)
        return None if child is None else int(child)

    def next_stage(self, eid: int) -> int:
        """Stage 2 of ``eid``, which stage 1 said has started (its ask answered "next stage")."""
        child = self.stage_child(eid)
        if child is None:
            raise RuntimeError(f"experiment {eid}: stage 1 is over but no stage 2 is stored")
        return child

    def comparisons_of(self, eid: int) -> int:
        """The experiment whose comparisons the pairwise reports of ``eid`` read: a staged experiment's stage 2
        (Conflict before it has started), else ``eid`` itself."""
        if not self.meta(eid).staged:
            return eid
        child = self.stage_child(eid)
        if child is None:
            raise Conflict(f"experiment {eid} is still in stage 1 (ratings): its comparisons start with stage 2")
        return child

    def current_stage(self, eid: int) -> int:
        """The experiment serving ``eid``'s participants now: a staged experiment's stage 2 once it has started,
        else ``eid`` (read from the database until the switch is known here)."""
        if not self.meta(eid).staged:
            return eid
        return self.stage_child(eid) or eid

    def stage_route(self, eid: int) -> int:
        """The experiment that serves asks made to ``eid``: its stage 2 once this process knows of the switch."""
        return self._stage_children.get(eid, eid)

    def _after_stage_changes(self, conn: Connection, meta: ExperimentMeta, parts: dict[int, tuple[Any, LogTx]]) -> None:
        """In the transaction that changed stage 1's learner: start stage 2 if stage 1 is now over and has not
        handed over yet (once: the unique ``stage_of`` index refuses a second)."""
        if not meta.staged or 0 not in parts:
            return
        row, tx = parts[0]
        if meta.id in self._stage_children or not stage1_over(meta, tx.learner):
            return
        if self.stage_child(meta.id, conn) is None:
            self._start_stage2(conn, meta, tx)

    def _start_stage2(self, conn: Connection, meta: ExperimentMeta, tx: LogTx) -> int:
        """Create stage 2 (a pairwise experiment over stage 1's top m) in the open transaction; returns its id.

        Its items are stage 1's recommendation now (the proven top m if its learner stopped, else its current
        top m), in catalogue-permutation order (sorted by stage 1 arm, which is already a seeded random order);
        it takes stage 1's status, owner, expiry, repeats, quota, crowd settings, context image and on-done
        settings."""
        stages = meta.stages or {}
        learner = tx.learner
        arms = sorted(int(a) for a in learner.recommend())
        parent = conn.execute(sa.select(experiments).where(experiments.c.id == meta.id)).one()
        now = self.clock()
        record = {"stage": 2, "of": meta.id, "arms": arms, "proven": bool(learner.done),
                  "reason": "stopped" if learner.done else "ratings_budget", "stage1_version": int(tx.version),
                  "stage1_answers": int(learner.n_pulls), "switched_ms": now}
        ls = stage2_learner(stages)
        child = conn.execute(experiments.insert().values(
            name=(meta.name[:180] + " (stage 2)"), k=int(stages["k"]), n_arms=len(arms),
            labels=[dict(lab) for lab in PAIRWISE_LABELS], status=parent.status,
            owner_token_hash=parent.owner_token_hash, query_expiry_seconds=parent.query_expiry_seconds,
            created_ms=now, instructions=stages["stage2"].get("instructions"), repeats=parent.repeats,
            answers_per_participant=parent.answers_per_participant, code_secret=parent.code_secret,
            auto_stop=parent.auto_stop, webhook_url=parent.webhook_url, webhook_secret=parent.webhook_secret,
            crowd=parent.crowd, query_kind="pairwise", stages=record, stage_of=meta.id,
        ).returning(experiments.c.id)).scalar_one()
        conn.execute(learners.insert().values(experiment_id=child, idx=0, label=ls.label, algorithm=ls.algorithm,
                                              params=ls.params, share=1.0, seed=ls.seed, version=0))
        conn.execute(items.insert(), [
            {"experiment_id": child, "arm": a, "external_id": meta.items[arm]["id"], "text": meta.items[arm]["text"],
             "image_url": meta.items[arm]["image_url"]} for a, arm in enumerate(arms)])
        if meta.has_image:
            conn.execute(images.insert().from_select(
                ["experiment_id", "content_type", "data"],
                sa.select(sa.literal(child), images.c.content_type, images.c.data)
                .where(images.c.experiment_id == meta.id)))
        fresh = ls.fresh(len(arms))
        write_snapshot(conn, child, 0, 0, fresh, now)
        write_checkpoint(conn, child, 0, 0, fresh.state_json(), now, force=True)
        return int(child)  # cached by stage_child once committed (a rolled-back switch must not be)

    def stage_info(self, eid: int) -> dict[str, Any] | None:
        """A staged experiment's stages for its owner (None for any other experiment): which stage runs, the
        settings, stage 1's top m as handed over (or its current top m), whether stage 1 was proven, and stage 2's
        experiment id, its recommendation and whether it stopped (``winner``: the final answer once it has)."""
        meta = self.meta(eid)
        if meta.stage_of is not None:
            return {"stage": 2, "stage_of": meta.stage_of, **(meta.stages or {})}
        if not meta.staged:
            return None
        stages = dict(meta.stages or {})
        child = self.stage_child(eid)
        out: dict[str, Any] = {
            "query": meta.query, "stage": 1 if child is None else 2, "top_m": stages["top_m"],
            "ratings_budget": stages.get("ratings_budget"), "delta": stages["delta"],
            "stage_delta": stages["stage_delta"], "k": stages["k"], "stage2_experiment_id": child,
            "stage1": None, "stage2": None, "winner": None, "proven": None}
        if child is None:
            with self._locked(eid, 0, write=False) as (_conn, _row, tx):
                top = sorted(int(a) for a in tx.learner.recommend())
                out["stage1"] = {"top_m": [meta.items[a]["id"] for a in top], "answers": tx.learner.n_pulls,
                                 "done": bool(tx.learner.done), "handed_over": False}
            return out
        cmeta = self.meta(child)
        record = cmeta.stages or {}
        out["stage1"] = {"top_m": [meta.items[a]["id"] for a in record["arms"]], "answers": record["stage1_answers"],
                         "done": record["proven"], "proven": record["proven"], "reason": record["reason"],
                         "handed_over": True, "switched_at": record["switched_ms"] / 1000.0,
                         "version": record["stage1_version"]}
        with self._locked(child, 0, write=False) as (_conn, _row, tx):
            rec = [cmeta.items[a]["id"] for a in tx.learner.recommend()]
            out["stage2"] = {"experiment_id": child, "answers": tx.learner.n_pulls, "done": bool(tx.learner.done),
                             "recommendation": rec}
            if tx.learner.done:
                out["winner"] = rec[0] if len(rec) == 1 else rec
                out["proven"] = bool(record["proven"])
        return out

    def verify_stage_switch(self, eid: int) -> bool:
        """Whether replaying stage 1's log from its start up to the recorded switch gives the same top m (and the
        same reason) as stage 2 was created with; True before any switch. What makes the switch a function of the
        logged events."""
        meta = self.meta(eid)
        child = self.stage_child(eid) if meta.staged else None
        if child is None:
            return True
        record = self.meta(child).stages or {}
        with self._connect(False) as conn:
            learner = meta.learners[0].fresh(meta.n_arms)
            apply_log(conn, eid, 0, learner, 0, int(record["stage1_version"]), self._fresh(meta, 0))
        arms = sorted(int(a) for a in learner.recommend())
        return bool(np.array_equal(arms, record["arms"]) and bool(learner.done) == bool(record["proven"])
                    and learner.n_pulls == record["stage1_answers"])
