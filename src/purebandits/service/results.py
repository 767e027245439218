"""What owners read: a learner's ranking with intervals and counts, history, activity, the comparison of
learners, CSV exports and the experiment's info (:class:`ResultReads`, a part of
:class:`~purebandits.service.study.Study`)."""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import Learner
from purebandits.error_guarantee import error_guarantee
from purebandits.registry import make_learner
from purebandits.service.errors import (
    BadRequest,
    Conflict,
    NotFound,
)
from purebandits.service.experiment_meta import ExperimentMeta
from purebandits.service.history import ActivityTally, history_rows, read_points, thin
from purebandits.service.models import (
    experiments,
    learners,
    queries,
)
from purebandits.service.rater_quality import crowdkit_rows
from purebandits.service.reports import (
    agreement,
    answers_rows,
    label_counts,
    logged_label_counts,
    participants_rows,
    ranking_page,
    ranking_rows,
    stopping_progress,
    summary_rows,
)
from purebandits.service.validation import DEFAULT_DELTA

log = logging.getLogger("purebandits.service")

#: a learner's activity (a scan of its answered queries) is computed at most this often per process, however
#: many dashboards poll it
ACTIVITY_TTL_MS = 3000
#: learners whose activity tally and history points one server process keeps (the ones asked for last)
MAX_REPORT_CACHES = 64
#: a learner's forecast of the answers still needed is computed at most this often per process while answers
#: arrive (a few tens of milliseconds on 4,000 items, but every dashboard polls every second or two)
FORECAST_TTL_MS = 5000


class ResultReads:
    """Owners' reads and exports of :class:`~purebandits.service.study.Study`."""

    def learner_state(self, eid: int, learner: str | None = None) -> dict[str, Any]:
        """A learner's state (``state_dict``) and the version it belongs to (the first learner by default)."""
        idx = self.meta(eid).learner_index(learner)
        with self._locked(eid, idx, write=False) as (_conn, _row, tx):
            return {"version": tx.version, "state": json.loads(tx.learner.state_json())}

    def _learner_copy(self, eid: int, idx: int) -> tuple[Learner, int, str]:
        """(a copy of learner ``idx`` synced to the log, its version, the experiment's status).

        Owners' reports compute on the copy, outside the learner's lock: ranking 100,000 items
        every second held the lock (on SQLite, the one every write takes) for ~80 ms per poll.
        """
        with self._locked(eid, idx, write=False) as (_conn, row, tx):
            return copy.deepcopy(tx.learner), tx.version, row.status

    def results(self, eid: int, timeline: bool = True, learner: str | None = None, limit: int | None = None,
                offset: int = 0, q: str | None = None, sort: str = "rank", order: str = "asc") -> dict[str, Any]:
        """One learner's ranking with its intervals, label counts, stopping progress and recommendation.

        ``limit`` / ``offset`` page the ranking (``n_items`` is the total), so a dashboard polling a
        contest with many thousands of items does not serialise all of them every second; ``q``
        keeps the items whose text or id contains it (``n_matching`` of them) and ``sort`` / ``order``
        sort them by a column (:func:`purebandits.service.reports.ranking_page`).
        """
        if order not in ("asc", "desc"):
            raise BadRequest("order must be 'asc' or 'desc'")
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        spec = meta.learners[idx]
        names = [lab["name"] for lab in meta.labels]
        now = self.clock()
        lrn, version, status = self._learner_copy(eid, idx)
        with self._connect(False) as conn:
            counts = self._label_counts(conn, meta, idx, names, version)
            n_pending = int(conn.execute(sa.select(sa.func.count()).select_from(queries).where(
                queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.status == "pending")).scalar_one())
            tl = None
            if timeline:
                tally = self._tally(eid, idx, meta.created_ms)
                with tally.lock:
                    tally.refresh(conn, now)
                    tl = tally.timeline()
            done_ms, done_answers = conn.execute(sa.select(learners.c.done_ms, learners.c.done_answers).where(
                learners.c.experiment_id == eid, learners.c.idx == idx)).one()
            on_done = self._on_done(conn, eid)
        rec = lrn.recommend()
        progress = {**stopping_progress(lrn, spec.params), **error_guarantee(lrn).as_dict(),
                    **self._forecast(meta, idx, lrn, version, now)}
        try:
            ranking, n_matching = ranking_page(lrn, meta.items, counts, names, rec, limit=limit, offset=offset,
                                               q=q, sort=sort, descending=order == "desc")
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        done, n_told = bool(lrn.done), lrn.n_pulls
        return {
            "experiment_id": eid, "name": meta.name, "query": meta.query, "algorithm": spec.algorithm,
            "params": spec.params,
            "algorithm_label": spec.label, "algorithms": [ls.label for ls in meta.learners],
            "status": status, "done": done, "version": version,
            "n_answers": int(counts.sum()), "n_told": n_told, "n_pending": n_pending,
            "labels": meta.labels, "label_totals": {n: int(counts[:, j].sum()) for j, n in enumerate(names)},
            "recommendation": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]} for a in rec],
            "stopping": progress, "n_items": meta.n_arms, "offset": offset, "n_matching": n_matching,
            "sort": sort, "order": order, "ranking": ranking, "timeline": tl, "now": now / 1000.0,
            "learner_done": None if done_ms is None else {"at_answers": done_answers, "at": done_ms / 1000.0},
            "on_done": on_done,
            "stages": self.stage_info(eid) if meta.staged or meta.stage_of is not None else None,
        }

    def _forecast(self, meta: ExperimentMeta, idx: int, lrn: Learner, version: int, now: int) -> dict[str, Any]:
        """``forecast`` ({low, mid, high, method}: answers still needed, :mod:`purebandits.forecast`) and
        ``forecast_reason`` (why there is none) of learner ``idx``, a copy synced to ``version``.

        Kept per learner and recomputed when its state changed, at most every :data:`FORECAST_TTL_MS` (and at
        once when it stops), so dashboards polling every second do not each pay for it."""
        from purebandits.forecast import Forecast, forecast_or_reason  # numba: loaded on first use, not in every worker

        key = (meta.id, idx)
        done = bool(lrn.done)
        with self._reports_lock:
            kept = self._forecasts.get(key)
        if kept is not None and kept[0] == meta.created_ms and kept[3] == done \
                and (kept[1] == version or now - kept[2] < FORECAST_TTL_MS):
            return kept[4]
        try:
            result = forecast_or_reason(lrn)
        except (ValueError, RuntimeError, ArithmeticError) as exc:  # a forecast must not take the results down
            log.warning("forecast of experiment %s learner %s failed: %s", meta.id, idx, exc)
            result = "the forecast could not be computed on this state"
        out = ({"forecast": result.as_dict(), "forecast_reason": None} if isinstance(result, Forecast)
               else {"forecast": None, "forecast_reason": result})
        with self._reports_lock:
            self._forecasts[key] = (meta.created_ms, version, now, done, out)
        return out

    def _label_counts(self, conn: Connection, meta: ExperimentMeta, idx: int, names: list[str],
                      version: int) -> np.ndarray:
        """Answers per (arm, label) of learner ``idx`` at ``version`` (a committed version of its log).

        Each poll of a dashboard used to count every answer again (a GROUP BY over the answered queries,
        ~17 ms at 20,000 answers and growing with them); now the counts at the last version asked for are
        kept, and only the ``answer`` events logged since are added (:func:`logged_label_counts`). The
        first call in a process reads the whole log once; an older version than the kept one starts over.
        """
        key = (meta.id, idx)
        kept = self._counts.get(key)
        if kept is not None and kept[0] <= version:
            after, base = kept
        else:
            after, base = 0, np.zeros((meta.n_arms, len(names)), dtype=np.int64)
        counts = logged_label_counts(conn, meta.id, idx, names, base, after, version)
        if len(self._counts) >= max(1, int(self.settings.cache_experiments)) and key not in self._counts:
            with suppress(StopIteration, RuntimeError):  # polls run in threads: another may change the dict
                self._counts.pop(next(iter(self._counts)), None)  # bounded as the other per-experiment caches
        self._counts[key] = (version, counts)
        return counts.copy()

    def history(self, eid: int, learner: str | None = None, max_points: int = 500) -> dict[str, Any]:
        """Each learner's results over time (its ``learner`` only if given): at most ``max_points`` points each
        (see :mod:`purebandits.service.history`), with the leaders' item ids and texts."""
        meta = self.meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        out = []
        for i, spec in enumerate(meta.learners):
            if idx is not None and i != idx:
                continue
            out.append({"algorithm": spec.label, "points": thin(self._points_of(meta, i), max_points)})
        return {"every": int(self.settings.history_every), "series": out}

    def _points_of(self, meta: ExperimentMeta, idx: int) -> list[dict[str, Any]]:
        """Every history point of learner ``idx`` (a copy of the list), its leaders with their item ids and texts.

        Points are only ever added, at growing answer counts, so this process keeps those it has read and
        reads only the newer ones: a dashboard asks every few seconds, and a contest of a million answers has
        10,000 points per learner (decoding them all took 0.14-0.38 s per request)."""
        key = (meta.id, idx)
        with self._reports_lock:
            known = self._points.get(key)
            if known is None or known[0] != meta.created_ms:  # new, or an id reused by a later experiment
                known = self._points[key] = (meta.created_ms, [], threading.Lock())
        _, points, lock = known
        with self._connect(False) as conn, lock:  # the connection first, as everywhere
            new = read_points(conn, meta.id, idx, after=points[-1]["n_answers"] if points else -1).get(idx, [])
            for p in new:
                for ld in p["leaders"]:
                    ld["id"] = meta.items[ld["arm"]]["id"]
                    ld["text"] = meta.items[ld["arm"]]["text"]
            points.extend(new)
            return list(points)

    def export_history(self, eid: int, learner: str | None = None) -> list[list[Any]]:
        """CSV rows (with header) of every history point, one row per leader (see ``history_rows``)."""
        meta = self.meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        with self._connect(False) as conn:
            series = read_points(conn, eid, idx)
        return history_rows(series, {i: ls.label for i, ls in enumerate(meta.learners)}, meta.items)

    def activity(self, eid: int, learner: str | None = None) -> dict[str, Any]:
        """One learner's activity: answers over time, per item, per participant, and response times."""
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        now = self.clock()
        cached = self._activity.get((eid, idx))
        if cached is not None and now - cached[0] < ACTIVITY_TTL_MS:
            return cached[1]
        lrn, _version, _status = self._learner_copy(eid, idx)
        tally = self._tally(eid, idx, meta.created_ms)
        with self._connect(False) as conn, tally.lock:  # the connection first, as results() takes them
            tally.refresh(conn, now)
            out = {"algorithm": meta.learners[idx].label, **tally.activity(lrn)}
        if len(self._activity) > 1000:
            self._activity.clear()
        self._activity[(eid, idx)] = (now, out)
        return out

    def _tally(self, eid: int, idx: int, created_ms: int) -> ActivityTally:
        """The activity tally of learner ``idx`` of ``eid`` in this process (made on first use)."""
        key = (eid, idx)
        with self._reports_lock:
            tally = self._tallies.get(key)
            if tally is None or tally.created_ms != created_ms:  # new, or an id reused by a later experiment
                tally = self._tallies[key] = ActivityTally(eid, idx, created_ms)
        return tally

    def comparison(self, eid: int, top: int = 10) -> dict[str, Any]:
        """Every learner side by side: answers, participants, whether and when it stopped, its top items, and the
        pairwise agreement of their recommendations."""
        meta = self.meta(eid)
        names = [lab["name"] for lab in meta.labels]
        out, recs = [], {}
        for idx, spec in enumerate(meta.learners):
            lrn, version, _status = self._learner_copy(eid, idx)
            tally = self._tally(eid, idx, meta.created_ms)
            with self._connect(False) as conn:
                counts = self._label_counts(conn, meta, idx, names, version)
                with tally.lock:  # its participants (a distinct count of every answer took 1-2 s at a million)
                    tally.refresh(conn, self.clock())
                    n_participants = tally.n_participants
                rec = lrn.recommend()
                rows = ranking_rows(lrn, meta.items, counts, names, rec, limit=max(top, meta.k))
                done_ms, done_answers = conn.execute(
                    sa.select(learners.c.done_ms, learners.c.done_answers)
                    .where(learners.c.experiment_id == eid, learners.c.idx == idx)).one()
                out.append({
                    "label": spec.label, "algorithm": spec.algorithm, "params": spec.params, "share": spec.share,
                    "n_answers": int(counts.sum()), "n_participants": n_participants, "done": bool(lrn.done),
                    "stopped_at_answers": done_answers, "stopped_at": None if done_ms is None else done_ms / 1000.0,
                    "recommendation": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]}
                                       for a in rec],
                    "top": [{k: r[k] for k in ("rank", "arm", "id", "text", "mean", "lower", "upper", "count")}
                            for r in rows],
                })
                recs[spec.label] = rec
        return {"experiment_id": eid, "k": meta.k, "algorithms": out, "agreement": agreement(recs)}

    def export_answers(self, eid: int) -> Iterator[list[Any]]:
        """CSV rows (with header) of every answer, in the order they were applied, with each one's learner.

        Read as they are consumed, in one transaction (a consistent export), holding a connection until the
        last row or until the iterator is dropped; an unknown ``eid`` raises here, before any row."""
        meta = self.meta(eid)
        labels_of = {i: ls.label for i, ls in enumerate(meta.learners)}

        gold, excluded = self.gold_rows(eid), self.excluded(eid)

        def rows() -> Iterator[list[Any]]:
            with self._connect(False) as conn:
                yield from answers_rows(conn, eid, meta.items, labels_of, gold, excluded, pairwise=meta.pairwise)

        return rows()

    def export_crowdkit(self, eid: int) -> Iterator[list[Any]]:
        """The learners' answers in crowd-kit's long format (``task``, ``worker``, ``label``; skips left out), the
        table ``crowdkit.aggregation`` estimates rater quality from (Dawid-Skene, GLAD, MACE). A pairwise
        experiment's are crowd-kit's pairwise table instead (``worker``, ``left``, ``right``, ``label``: the winner,
        :meth:`~purebandits.service.pairwise_results.PairwiseReads.export_pairs`)."""
        if self.meta(eid).pairwise:
            return self.export_pairs(eid)
        return crowdkit_rows(self._answer_records(eid))

    def export_summary(self, eid: int, learner: str | None = None) -> list[list[Any]]:
        """One learner's per-item summary, rows with header (see ``summary_rows``): the public caption-contest
        columns plus ``item_id`` for the default labels, one count column per label and the mean reward
        for other label sets."""
        meta = self.meta(eid)
        idx = meta.learner_index(learner)
        names = [lab["name"] for lab in meta.labels]
        with self._connect(False) as conn:
            counts = label_counts(conn, eid, idx, meta.n_arms, names)
        return summary_rows(counts, meta.labels, meta.items, meta.name)

    def export_participants(self, eid: int) -> Iterator[list[Any]]:
        """CSV rows (with header): each participant's learner, answers, first and last answer, completion code;
        read as they are consumed, as :meth:`export_answers`."""
        meta = self.meta(eid)
        labels_of = {i: ls.label for i, ls in enumerate(meta.learners)}

        quality, platform, excluded = self.participant_quality(eid), self.platform_of(eid), self.excluded(eid)
        gold = Counter(row[0] for row in self.gold_rows(eid))

        def rows() -> Iterator[list[Any]]:
            with self._connect(False) as conn:
                yield from participants_rows(conn, eid, labels_of, meta.answers_per_participant,
                                             meta.completion_code, quality, platform, excluded, gold)

        return rows()

    def experiment_info(self, eid: int) -> dict[str, Any]:
        """What the owner API reports of an experiment: its spec, learners, status and versions."""
        meta = self.meta(eid)
        with self._connect(False) as conn:
            status = conn.execute(sa.select(experiments.c.status).where(experiments.c.id == eid)).scalar()
            if status is None:
                self._forget(eid)
                raise NotFound(f"experiment {eid} does not exist")
            lrows = conn.execute(sa.select(learners.c.version, learners.c.done_ms, learners.c.done_answers)
                                 .where(learners.c.experiment_id == eid).order_by(learners.c.idx)).all()
        first = meta.learners[0]
        return {"id": eid, "name": meta.name, "algorithm": first.algorithm, "params": first.params, "k": meta.k,
                "n_items": meta.n_arms, "labels": meta.labels, "status": status,
                "version": int(sum(r.version for r in lrows)), "seed": first.seed,
                "query_expiry_seconds": meta.expiry_s, "created_at": meta.created_ms / 1000.0,
                "instructions": meta.instructions, "has_image": meta.has_image, "repeats": meta.repeats,
                "answers_per_participant": meta.answers_per_participant, "crowd": meta.crowd.to_json(),
                "query": meta.query,
                "stages": self.stage_info(eid) if meta.staged or meta.stage_of is not None else None,
                "algorithms": [{"label": ls.label, "algorithm": ls.algorithm, "params": ls.params, "share": ls.share,
                                "seed": ls.seed, "version": int(r.version), "done": r.done_ms is not None,
                                "stopped_at_answers": r.done_answers,
                                "error": error_guarantee(make_learner(ls.algorithm, **ls.params)).as_dict()}
                               for ls, r in zip(meta.learners, lrows, strict=True)]}

    def asked_delta(self, eid: int, learner: str | None = None) -> tuple[float, str]:
        """(the error probability the owner asked of ``learner``, or of every learner when None; where it comes from).

        A learner stores the delta it runs with, the asked one divided by its class's ``error_per_delta``;
        :func:`purebandits.error_guarantee.error_guarantee` turns it back into the asked one. For several learners
        the smallest (the strictest asked); :data:`DEFAULT_DELTA` when no learner takes delta.
        """
        meta = self.meta(eid)
        specs = meta.learners if learner is None else [meta.learners[meta.learner_index(learner)]]
        asked = {ls.label: error_guarantee(make_learner(ls.algorithm, **ls.params)).error_probability for ls in specs}
        asked = {label: p for label, p in asked.items() if p is not None}
        if not asked:
            return DEFAULT_DELTA, f"no learner takes delta: the service's default error probability {DEFAULT_DELTA:g}"
        label = min(asked, key=asked.__getitem__)
        return asked[label], f"the error probability asked of learner {label}"

    def certificate(self, eid: int, learner: str | None = None, max_rivals: int = 100) -> dict[str, Any]:
        """The certificate (:func:`purebandits.certificate.certify`) of the experiment's answers, every learner's
        pooled (``learner``'s only, if given), at the asked error probability and k, for the empirical top k.

        Counted in the database as the summary export counts them (one GROUP BY); exact Z for the
        ``max_rivals`` weakest rivals, which are the ones listed (``n_rivals`` counts them all).
        """
        from purebandits.certificate import certify  # SciPy and numba: loaded on first use, not in every worker

        meta = self.meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        names = [lab["name"] for lab in meta.labels]
        delta, delta_source = self.asked_delta(eid, learner)
        with self._connect(False) as conn:
            counts = label_counts(conn, eid, idx, meta.n_arms, names)
        if counts.sum() == 0:
            raise Conflict("no answers yet: there is nothing to certify")
        try:
            cert = certify(counts, [float(lab["reward"]) for lab in meta.labels], delta, k=meta.k,
                           items=[item["id"] for item in meta.items], exact_rivals=max_rivals)
        except ValueError as exc:
            raise BadRequest(f"cannot certify this experiment: {exc}") from None
        return {"experiment_id": eid, "learner": None if idx is None else meta.learners[idx].label,
                "pooled": [ls.label for i, ls in enumerate(meta.learners) if idx is None or i == idx],
                "delta_source": delta_source,
                "recommendation_items": [{"arm": a, "id": meta.items[a]["id"], "text": meta.items[a]["text"]}
                                         for a in cert.recommendation],
                **cert.to_dict(max_rivals)}
