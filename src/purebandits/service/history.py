"""The results over time and the participants' activity: what an owner plots to watch a contest unfold.

A *history point* is written every ``history_every`` answers of a learner (and when it stops), in
the transaction of the answer that crossed the mark, so it describes exactly the committed state:
the leaders (the recommendation and the next best, as the ranking orders them) with the learner's
own intervals, and its stopping progress (:func:`purebandits.service.reports.stopping_progress`).
The activity (answers over time, answers per item, answers per participant, response times) is
kept by an :class:`ActivityTally` per learner, which reads only the answers logged since its last
refresh; :func:`activity` computes the same from every answer (the reference the tests hold it to).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import Learner
from purebandits.service.models import events, history, queries
from purebandits.service.reports import (
    iso_time,
    learner_intervals,
    rank_order,
    stopping_progress,
    timeline,
    timeline_buckets,
    timeline_of,
    timeline_width,
)

__all__ = ["n_leaders", "history_point", "write_point", "read_points", "thin", "history_rows", "activity",
           "ActivityTally", "RESPONSE_WINDOW"]

#: the response-time histogram describes at most this many of the latest answers
RESPONSE_WINDOW = 100_000


def n_leaders(k: int, n_arms: int) -> int:
    """How many leaders a history point keeps: the top ``k`` and enough of the next to see who challenges them."""
    return min(n_arms, max(5, k + 4, 2 * k))


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def history_point(learner: Learner, params: dict[str, Any], k: int) -> dict[str, Any]:
    """The learner's leaders with their means, intervals and answers, and its stopping progress, now."""
    n = len(learner.counts_)
    rec = list(learner.recommend())
    progress = stopping_progress(learner, params)
    means, counts = learner.means(), learner.counts_
    top = rank_order(learner, rec)[:n_leaders(k, n)]
    lo, hi = learner_intervals(learner, top)  # the leaders' bounds only
    leaders = [{"rank": r, "arm": int(a), "mean": _num(float(means[a])) if counts[a] else None,
                "lower": _num(float(lo[j])), "upper": _num(float(hi[j])), "count": int(counts[a])}
               for r, (j, a) in enumerate(enumerate(top.tolist()), 1)]
    margin = progress.get("margin")
    return {"n_answers": int(learner.n_pulls), "done": bool(learner.done), "fraction": float(progress["fraction"]),
            "margin": None if margin is None else _num(float(margin)), "leaders": leaders}


def write_point(conn: Connection, eid: int, idx: int, point: dict[str, Any], now: int) -> None:
    """Store one point, unless one is stored at that answer count already (a learner that stops on a cancel,
    without a new answer, may have had its point written at that count by the answer before)."""
    exists = conn.execute(sa.select(history.c.n_answers).where(
        history.c.experiment_id == eid, history.c.learner == idx, history.c.n_answers == point["n_answers"])).first()
    if exists is None:
        conn.execute(history.insert().values(
            experiment_id=eid, learner=idx, n_answers=point["n_answers"], created_ms=now, done=point["done"],
            fraction=point["fraction"], margin=point["margin"], leaders=point["leaders"]))


def read_points(conn: Connection, eid: int, idx: int | None = None, after: int = -1) -> dict[int, list[dict[str, Any]]]:
    """Every stored point of ``eid`` (of learner ``idx`` only if given; at more than ``after`` answers), by
    learner, in answer order."""
    where = [history.c.experiment_id == eid]
    if idx is not None:
        where.append(history.c.learner == idx)
    if after >= 0:
        where.append(history.c.n_answers > after)
    out: dict[int, list[dict[str, Any]]] = {}
    for r in conn.execute(sa.select(history).where(*where).order_by(history.c.learner, history.c.n_answers)):
        out.setdefault(int(r.learner), []).append({
            "n_answers": int(r.n_answers), "t": r.created_ms / 1000.0, "done": bool(r.done),
            "fraction": float(r.fraction), "margin": r.margin, "leaders": r.leaders})
    return out


def thin(points: list[dict[str, Any]], max_points: int) -> list[dict[str, Any]]:
    """At most ``max_points`` of ``points``, evenly spaced in answers, always with the first, the last and the
    point where the learner stopped."""
    if len(points) <= max_points:
        return points
    keep = set(np.unique(np.linspace(0, len(points) - 1, max(2, max_points - 1)).round().astype(int)).tolist())
    keep.update(i for i, p in enumerate(points) if p["done"])
    first_done = next((i for i, p in enumerate(points) if p["done"]), None)
    keep = {i for i in keep if first_done is None or i <= first_done or i == len(points) - 1}
    return [points[i] for i in sorted(keep)][:max_points]


def history_rows(series: dict[int, list[dict[str, Any]]], labels_of: dict[int, str],
                 items: list[dict[str, Any]]) -> list[list[Any]]:
    """CSV rows (with header): one per (learner, point, leader)."""
    out: list[list[Any]] = [["algorithm", "n_answers", "time", "done", "stopping_fraction", "stopping_margin",
                             "rank", "item_id", "arm", "mean", "lower", "upper", "answers", "text"]]
    for idx, points in series.items():
        for p in points:
            for ld in p["leaders"]:
                out.append([labels_of.get(idx, str(idx)), p["n_answers"], iso_time(int(p["t"] * 1000)),
                            int(p["done"]), p["fraction"], "" if p["margin"] is None else p["margin"], ld["rank"],
                            items[ld["arm"]]["id"], ld["arm"], _blank(ld["mean"]), _blank(ld["lower"]),
                            _blank(ld["upper"]), ld["count"], items[ld["arm"]]["text"]])
    return out


def _blank(x: float | None) -> Any:
    return "" if x is None else x


def _histogram_of_tally(tally: np.ndarray) -> dict[str, Any]:
    """Counts of the positive integers ``v`` that ``tally[v]`` counts: one bin per value up to 40, else about
    30 bins of growing width, with their mean, median and largest (the numbers ``np.histogram``, ``mean`` and
    ``median`` give on the values themselves: the sums, the mean's division and the median's two middle values
    are exact in doubles)."""
    size = int(tally.sum())
    if size == 0:
        return {"edges": [], "counts": [], "mean": None, "median": None, "max": 0}
    top = int(np.flatnonzero(tally)[-1])
    if top <= 40:
        edges = np.arange(0.5, top + 1.5)
    else:
        edges = np.unique(np.round(np.geomspace(1, top + 1, 31))) - 0.5
    values = np.arange(top + 1)
    counts, _ = np.histogram(values, bins=edges, weights=tally[:top + 1])
    cum = np.cumsum(tally[:top + 1])
    lo, hi = np.searchsorted(cum, [(size - 1) // 2, size // 2], side="right")
    return {"edges": edges.tolist(), "counts": counts.astype(np.int64).tolist(),
            "mean": float(np.dot(values, tally[:top + 1])) / size, "median": float((int(lo) + int(hi)) / 2),
            "max": top}


def _seconds_histogram(seconds: np.ndarray) -> dict[str, Any]:
    """30 equal bins from 0 to the 99th percentile; the slower rest counted in ``above``."""
    if seconds.size == 0:
        return {"edges": [], "counts": [], "median": None, "p90": None, "above": 0, "n": 0}
    top = float(np.quantile(seconds, 0.99))
    top = top if top > 0 else float(seconds.max()) or 1.0
    edges = np.linspace(0.0, top, 31)
    counts, _ = np.histogram(seconds[seconds <= top], bins=edges)
    return {"edges": edges.tolist(), "counts": counts.tolist(), "median": float(np.median(seconds)),
            "p90": float(np.quantile(seconds, 0.9)), "above": int((seconds > top).sum()), "n": int(seconds.size)}


def _answered(eid: int, idx: int, upto: int | None) -> list[Any]:
    where = [queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.status == "answered"]
    if upto is not None:
        where.append(queries.c.end_seq <= upto)
    return where


def _participants_by_answers(conn: Connection, eid: int, idx: int, upto: int | None = None) -> np.ndarray:
    """How many participants gave each number of answers to learner ``idx`` (index = answers), counting the
    answers logged up to sequence number ``upto`` if given."""
    per = np.array(conn.execute(sa.select(sa.func.count()).where(*_answered(eid, idx, upto))
                                .group_by(queries.c.participant_id)).scalars().all(), dtype=np.int64)
    return np.bincount(per) if per.size else np.zeros(1, dtype=np.int64)


def _latest_waits(conn: Connection, eid: int, idx: int, upto: int | None = None) -> np.ndarray:
    """Seconds from query to answer of the latest ``RESPONSE_WINDOW`` answers (up to ``upto``), in log order."""
    return np.array(conn.execute(
        sa.select(queries.c.answered_ms - queries.c.created_ms).where(*_answered(eid, idx, upto))
        .order_by(queries.c.end_seq.desc()).limit(RESPONSE_WINDOW)).scalars().all(), dtype=float)[::-1] / 1000.0


def _activity_of(learner: Learner, timeline: dict[str, Any], by_answers: np.ndarray, waits: np.ndarray
                 ) -> dict[str, Any]:
    order = rank_order(learner, list(learner.recommend()))
    return {
        "timeline": timeline,
        "answers_per_item": learner.counts_[order].astype(int).tolist(),
        "participants": {"n": int(by_answers[1:].sum()), "answers": _histogram_of_tally(by_answers)},
        "response_seconds": {**_seconds_histogram(waits), "window": RESPONSE_WINDOW},
    }


def activity(conn: Connection, eid: int, idx: int, learner: Learner, created_ms: int, now: int) -> dict[str, Any]:
    """Answers over time, answers per item (in rank order), answers per participant and response times (of
    the latest ``RESPONSE_WINDOW`` answers in the log's order) of learner ``idx``, from every answer: the
    reference of :class:`ActivityTally`, which the service uses."""
    return _activity_of(learner, timeline(conn, eid, idx, created_ms, now),
                        _participants_by_answers(conn, eid, idx), _latest_waits(conn, eid, idx))


class ActivityTally:
    """One learner's activity kept up to date from its event log: a refresh reads only the answers after the
    last one it counted.

    :func:`activity` reads every answered query at each call: 2.0 s at 1,000,000 answers on SQLite (grouping
    the answers by participant 1.4 s, sorting them for the latest response times 0.55 s, the timeline 0.4 s),
    which a dashboard asks for every few seconds while a contest runs. The tally reads the learner's answer
    events after the last sequence number it counted (a range of the log's primary key) with their queries,
    so a refresh costs what was answered since the last one, and keeps

    - the answers per timeline bucket, at the width the time since the start calls for (each width divides
      the next, so widening merges buckets exactly);
    - how many participants have given each number of answers: for the participants answering in the new
      range it reads their answers up to its end (``end_seq``, the answer's sequence number, so answers
      committed meanwhile do not count twice) and moves each from its old count to its new one;
    - the response times of the latest ``RESPONSE_WINDOW`` answers, in the log's order.

    Its :meth:`activity` equals :func:`activity` on the same log (``tests/service/test_activity_tally.py``).
    The first refresh in a process counts everything with the database's aggregates once, as
    :func:`activity` does; so does a refresh whose new range holds more answers than everything counted
    before (one pass is then cheaper than the lookups). Everything a refresh reads is bounded by the
    last answer's sequence number when it began. Callers serialise refreshes through :attr:`lock`.
    """

    #: participants looked up per statement (well under every backend's limit on bound parameters)
    CHUNK = 500

    def __init__(self, eid: int, idx: int, created_ms: int) -> None:
        self.eid, self.idx, self.created_ms = eid, idx, created_ms
        self.lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self.seq = 0  # answer events up to this sequence number are counted
        self.n_answers = 0
        self.by_answers = np.zeros(1, dtype=np.int64)  # participants by their number of answers
        self.waits = np.zeros(0)  # seconds from query to answer, the latest RESPONSE_WINDOW answers
        self.width = 0  # the buckets' width (ms); 0: none yet
        self.buckets: Counter[int] = Counter()  # created_ms // width -> answers

    def refresh(self, conn: Connection, now: int) -> None:
        """Count the answers logged since the last refresh (call under :attr:`lock`)."""
        width = timeline_width(self.created_ms, now)
        if width < self.width:  # a clock set back: start again at the narrower width
            self._clear()
        where = [events.c.experiment_id == self.eid, events.c.learner == self.idx, events.c.kind == "answer"]
        upto = conn.execute(sa.select(sa.func.max(events.c.seq)).where(*where)).scalar_one()
        if upto is None or upto <= self.seq:
            self._widen(width)
            return
        new = [*where, events.c.seq > self.seq, events.c.seq <= upto]
        if self.seq == 0 or conn.execute(sa.select(sa.func.count()).where(*new)).scalar_one() > self.n_answers:
            self._count_all(conn, upto, width)
            return
        self._widen(width)
        rows = conn.execute(
            sa.select(events.c.created_ms, queries.c.participant_id, queries.c.answered_ms - queries.c.created_ms)
            .select_from(events.join(queries, queries.c.id == events.c.query_id)).where(*new)
            .order_by(events.c.seq)).all()
        created, pids, waits = zip(*rows, strict=True)
        self.buckets.update(int(c) // width for c in created)
        fresh = Counter(pids)
        total = self._answers_of(conn, list(fresh), upto)
        self._move([(total[p] - m, total[p]) for p, m in fresh.items()])
        latest = np.asarray(waits[-RESPONSE_WINDOW:], dtype=float) / 1000.0
        self.waits = np.concatenate([self.waits, latest])[-RESPONSE_WINDOW:]
        self.seq = int(upto)
        self.n_answers += len(rows)

    def _count_all(self, conn: Connection, upto: int, width: int) -> None:
        """Everything up to sequence number ``upto`` by aggregates in the database (the first refresh), with
        the queries of :func:`activity`."""
        self._clear()
        self.by_answers = _participants_by_answers(conn, self.eid, self.idx, upto)
        self.waits = _latest_waits(conn, self.eid, self.idx, upto)
        self.buckets = Counter(timeline_buckets(conn, self.eid, self.idx, width, upto))
        self.width = width
        self.seq = int(upto)
        self.n_answers = int(np.dot(np.arange(self.by_answers.size), self.by_answers))

    def _widen(self, width: int) -> None:
        if self.width and width > self.width:
            merged: Counter[int] = Counter()
            for b, c in self.buckets.items():
                merged[b * self.width // width] += c
            self.buckets = merged
        self.width = width

    def _move(self, moves: list[tuple[int, int]]) -> None:
        """Participants from their old number of answers to their new one."""
        top = max(new for _, new in moves)
        if top >= self.by_answers.size:
            self.by_answers = np.concatenate([self.by_answers, np.zeros(top + 1 - self.by_answers.size, np.int64)])
        for old, new in moves:
            if old > 0:
                self.by_answers[old] -= 1
            self.by_answers[new] += 1

    def _answers_of(self, conn: Connection, pids: list[str], upto: int) -> dict[str, int]:
        """Each participant's answers to this learner logged up to sequence number ``upto``."""
        out: dict[str, int] = {}
        for i in range(0, len(pids), self.CHUNK):
            out.update(conn.execute(
                sa.select(queries.c.participant_id, sa.func.count())
                .where(queries.c.experiment_id == self.eid, queries.c.participant_id.in_(pids[i:i + self.CHUNK]),
                       queries.c.learner == self.idx, queries.c.status == "answered", queries.c.end_seq <= upto)
                .group_by(queries.c.participant_id)).all())
        return out

    @property
    def n_participants(self) -> int:
        """Participants with at least one answer counted."""
        return int(self.by_answers[1:].sum())

    def timeline(self) -> dict[str, Any]:
        """What :func:`purebandits.service.reports.timeline` gives for this learner at the last refresh."""
        return timeline_of(self.buckets, self.width)

    def activity(self, learner: Learner) -> dict[str, Any]:
        """What :func:`activity` gives at the last refresh (``learner``: the state the answers per item are of)."""
        return _activity_of(learner, self.timeline(), self.by_answers, self.waits)
