"""What happens when every learner of an experiment has stopped: it stops too (``auto_stop``) and/or a
webhook is called once (:class:`DoneHooks`, a part of :class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import logging
import secrets
from contextlib import ExitStack
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.service.errors import (
    Forbidden,
    NotFound,
)
from purebandits.service.models import (
    experiments,
    learners,
)
from purebandits.service.validation import (
    check_webhook_url,
)
from purebandits.service.webhooks import FAILED, post_json

log = logging.getLogger("purebandits.service")

_OFF_EXPLAINED = ("webhooks are off on this server: it has no admin token, so anyone may create an experiment, "
                  "and the server itself makes the call. An operator turns them on with an admin token "
                  "(PUREBANDITS_ADMIN_TOKEN) or explicitly with PUREBANDITS_WEBHOOKS=1")


class DoneHooks:
    """Auto-stop and webhooks of :class:`~purebandits.service.study.Study`."""

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
        ``webhook_url`` gets one signed POST (see :meth:`call_webhooks`).

        Set after the learners stopped, ``auto_stop`` stops the experiment now and a webhook is called
        at the next sweep; a new URL is called once even if the previous one was. A new URL (or one that
        has no secret yet) gets a new random secret that keys the calls' signatures: it is in this
        answer's ``webhook_secret`` and never shown again (None otherwise).

        Raises Forbidden when webhooks are off on this server (``settings.webhooks_on``), BadRequest for a
        URL that is not http(s) or whose host is not public (unless ``webhook_allow_internal``).
        """
        if webhook_url is not None:
            if not self.settings.webhooks_on:
                raise Forbidden(_OFF_EXPLAINED if self.settings.webhooks is None else
                                "webhooks are turned off on this server (PUREBANDITS_WEBHOOKS=0)")
            webhook_url = check_webhook_url(webhook_url, allow_internal=self.settings.webhook_allow_internal)
        meta = self.meta(eid)
        with ExitStack() as held:
            # every learner locked, in index order as everywhere: a learner stopping now either sees the new
            # auto_stop or has committed its stop before the check below
            conn = self._lock_every_learner(held, eid, len(meta.learners))
            row = conn.execute(sa.select(experiments.c.webhook_url, experiments.c.webhook_secret)
                               .where(experiments.c.id == eid)).first()
            if row is None:
                self._forget(eid)
                raise NotFound(f"experiment {eid} does not exist")
            values: dict[str, Any] = {"auto_stop": bool(auto_stop), "webhook_url": webhook_url}
            if webhook_url != row.webhook_url:
                values.update(webhook_ms=None, webhook_status=None, webhook_error=None, webhook_secret=None)
            new_secret = None
            if webhook_url is not None and (webhook_url != row.webhook_url or row.webhook_secret is None):
                new_secret = values["webhook_secret"] = secrets.token_urlsafe(32)
            conn.execute(experiments.update().where(experiments.c.id == eid).values(**values))
            all_done = conn.execute(sa.select(sa.func.count()).select_from(learners).where(
                learners.c.experiment_id == eid, learners.c.done_ms.is_(None))).scalar_one() == 0
            # a staged experiment's settings are its stage 2's too (copied at the switch, and here after it);
            # its stage 1 stopping hands over, it does not end the experiment
            child = self.stage_child(eid, conn) if meta.staged else None
            if child is not None:
                conn.execute(experiments.update().where(experiments.c.id == child).values(
                    **values, webhook_secret=conn.execute(sa.select(experiments.c.webhook_secret)
                                                          .where(experiments.c.id == eid)).scalar()))
            if auto_stop and all_done and not meta.staged:
                conn.execute(experiments.update().where(
                    experiments.c.id == eid, experiments.c.status.in_(("active", "paused"))).values(status="stopped"))
            return {**self._on_done(conn, eid), "webhook_secret": new_secret}

    #: a claimed webhook call that recorded nothing for this long (its process died) is claimed again
    WEBHOOK_RECLAIM_MS = 300_000

    def call_webhooks(self) -> int:
        """POST to the webhook of every experiment whose learners have all stopped, once; returns how many.

        A process first claims the call (``webhook_ms``, set only where it is NULL: one process wins),
        then POSTs signed JSON (experiment, learners, where each stopped, its recommendation) with up to 3
        tries (:func:`~purebandits.service.webhooks.post_json`: public addresses only unless
        ``webhook_allow_internal``), and records the HTTP status or the error in coarse words. Whatever
        goes wrong with one call is recorded for it and the sweep goes on with the next. A claim left
        without a result for :attr:`WEBHOOK_RECLAIM_MS` (the process died mid-call) is claimed again.
        """
        if not self.settings.webhooks_on:
            return 0
        now = self.clock()
        stale = now - self.WEBHOOK_RECLAIM_MS
        undone = sa.select(learners.c.idx).where(learners.c.experiment_id == experiments.c.id,
                                                 learners.c.done_ms.is_(None)).exists()
        # a staged experiment's stage 1 stopping only hands over: its stage 2 (which has the webhook) calls
        stage2 = experiments.alias("stage2")
        handed_over = sa.select(stage2.c.id).where(stage2.c.stage_of == experiments.c.id).exists()
        unclaimed = sa.or_(experiments.c.webhook_ms.is_(None), sa.and_(
            experiments.c.webhook_ms < stale, experiments.c.webhook_status.is_(None),
            experiments.c.webhook_error.is_(None)))
        with self._connect(False) as conn:
            due = [(r.id, r.webhook_url, r.webhook_secret) for r in conn.execute(
                sa.select(experiments.c.id, experiments.c.webhook_url, experiments.c.webhook_secret)
                .where(experiments.c.webhook_url.is_not(None), unclaimed, ~undone, ~handed_over)
                .order_by(experiments.c.id))]
        n = 0
        for eid, url, secret in due:
            try:
                n += self._call_webhook(eid, url, secret, now, unclaimed)
            except Exception as exc:  # noqa: BLE001 (one experiment's trouble must not skip the others' calls)
                log.warning("webhook of experiment %d failed: %r", eid, exc)
        return n

    def _call_webhook(self, eid: int, url: str, secret: str | None, now: int, unclaimed: Any) -> int:
        """Claim, make and record one experiment's call; 1 if this process made it, 0 if another had claimed it."""
        with self._connect(True) as conn:
            won = conn.execute(experiments.update().values(webhook_ms=now).where(
                experiments.c.id == eid, experiments.c.webhook_url == url, unclaimed)).rowcount
        if won != 1:
            return 0
        try:
            payload = self._webhook_payload(eid)
        except Exception as exc:  # noqa: BLE001 (recorded once, like a failed call: never claimed again)
            log.warning("webhook of experiment %d: its payload failed: %r", eid, exc)
            status, error = None, f"{FAILED}: the server could not build the call"
        else:
            status, error = post_json(url, payload, float(self.settings.webhook_timeout_seconds), secret=secret,
                                      allow_internal=self.settings.webhook_allow_internal,
                                      event_id=f"experiment-{eid}-{now}")
        with self._connect(True) as conn:
            conn.execute(experiments.update().where(experiments.c.id == eid, experiments.c.webhook_ms == now)
                         .values(webhook_status=status, webhook_error=error[:300] if error else None))
        log.info("webhook of experiment %d: %s", eid, error or f"HTTP {status}")
        return 1

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
