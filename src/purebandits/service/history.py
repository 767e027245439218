"""The results over time and the participants' activity: what an owner plots to watch a contest unfold.

A *history point* is written every ``history_every`` answers of a learner (and when it stops), in
the transaction of the answer that crossed the mark, so it describes exactly the committed state:
the leaders (the recommendation and the next best, as the ranking orders them) with the learner's
own intervals, and its stopping progress (:func:`purebandits.service.reports.stopping_progress`).
The activity (answers over time, answers per item, answers per participant, response times) is
read from the queries table when asked for.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import Learner
from purebandits.service.models import history, queries
from purebandits.service.reports import iso_time, learner_intervals, rank_order, stopping_progress, timeline

__all__ = ["n_leaders", "history_point", "write_point", "read_points", "thin", "history_rows", "activity",
           "RESPONSE_WINDOW"]

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


def read_points(conn: Connection, eid: int, idx: int | None = None) -> dict[int, list[dict[str, Any]]]:
    """Every stored point of ``eid`` (of learner ``idx`` only if given), by learner, in answer order."""
    where = [history.c.experiment_id == eid]
    if idx is not None:
        where.append(history.c.learner == idx)
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


def _integer_histogram(values: np.ndarray) -> dict[str, Any]:
    """Counts of positive integers: one bin per value up to 40, else about 30 bins of growing width."""
    if values.size == 0:
        return {"edges": [], "counts": [], "mean": None, "median": None, "max": 0}
    top = int(values.max())
    if top <= 40:
        edges = np.arange(0.5, top + 1.5)
    else:
        edges = np.unique(np.round(np.geomspace(1, top + 1, 31))) - 0.5
    counts, _ = np.histogram(values, bins=edges)
    return {"edges": edges.tolist(), "counts": counts.tolist(), "mean": float(values.mean()),
            "median": float(np.median(values)), "max": top}


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


def activity(conn: Connection, eid: int, idx: int, learner: Learner, created_ms: int, now: int) -> dict[str, Any]:
    """Answers over time, answers per item (in rank order), answers per participant and response times of
    learner ``idx``."""
    answered = [queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.status == "answered"]
    per_participant = np.array(conn.execute(
        sa.select(sa.func.count()).where(*answered).group_by(queries.c.participant_id)).scalars().all(),
        dtype=np.int64)
    waits = np.array(conn.execute(
        sa.select(queries.c.answered_ms - queries.c.created_ms).where(*answered)
        .order_by(queries.c.answered_ms.desc()).limit(RESPONSE_WINDOW)).scalars().all(), dtype=float) / 1000.0
    order = rank_order(learner, list(learner.recommend()))
    return {
        "timeline": timeline(conn, eid, idx, created_ms, now),
        "answers_per_item": learner.counts_[order].astype(int).tolist(),
        "participants": {"n": int(per_participant.size), "answers": _integer_histogram(per_participant)},
        "response_seconds": {**_seconds_histogram(waits), "window": RESPONSE_WINDOW},
    }
