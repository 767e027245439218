"""What owners read: rankings with intervals, stopping progress, comparisons of learners, CSV exports.

Pure functions of the learner (a live object synced by the protocol) and of counts read from
the database; the protocol (:mod:`purebandits.service.study`) takes the locks and calls them.
"""

from __future__ import annotations

import heapq
import math
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.base import NOT_DONE_CAP, Learner
from purebandits.service.eventlog import EXCLUSION_KINDS
from purebandits.service.models import events, exclusions, queries
from purebandits.service.rater_quality import QUALITY_COLUMNS
from purebandits.service.validation import DEFAULT_LABELS

__all__ = ["PUBLIC_SUMMARY_COLUMNS", "SUMMARY_COLUMNS", "summary_columns", "stopping_progress", "summary_rows",
           "label_counts", "logged_label_counts", "rank_order", "ranking_page", "RANKING_SORTS",
           "ranking_rows", "timeline", "timeline_buckets", "timeline_of", "timeline_width", "TIMELINE_WIDTHS",
           "answers_rows", "participants_rows", "ANSWERS_COLUMNS", "PAIRWISE_ANSWER_COLUMNS", "agreement", "iso_time",
           "learner_intervals"]

#: columns of the public caption-contest summaries (nextml/caption-contest-data)
PUBLIC_SUMMARY_COLUMNS = ["rank", "funny", "somewhat_funny", "unfunny", "count", "score", "precision", "contest",
                          "caption"]
#: the summary CSV's columns for the default labels: the public ones, with ``item_id`` after ``rank``
SUMMARY_COLUMNS = ["rank", "item_id", *PUBLIC_SUMMARY_COLUMNS[1:]]
#: the summary CSV's columns for any other label set, around one count column per label
_CUSTOM_HEAD = ["rank", "item_id"]
_CUSTOM_TAIL = ["count", "mean_reward", "precision", "contest", "caption"]


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def iso_time(ms: int | None) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds ('' for None)."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms) % 1000:03d}Z"


def label_counts(conn: Connection, eid: int, idx: int | None, n_arms: int, labels: list[str]) -> np.ndarray:
    """Answered queries per (arm, label) of learner ``idx`` (all learners if None), counted in the database."""
    out = np.zeros((n_arms, len(labels)), dtype=np.int64)
    col = {name: j for j, name in enumerate(labels)}
    where = [queries.c.experiment_id == eid, queries.c.status == "answered", queries.c.label.in_(labels),
             queries.c.participant_id.not_in(sa.select(exclusions.c.participant_id)
                                             .where(exclusions.c.experiment_id == eid))]
    if idx is not None:
        where.append(queries.c.learner == idx)
    for arm, label, c in conn.execute(
        sa.select(queries.c.arm, queries.c.label, sa.func.count()).where(*where)
        .group_by(queries.c.arm, queries.c.label)
    ):
        out[arm, col[label]] = c
    return out


def logged_label_counts(conn: Connection, eid: int, idx: int, labels: list[str], counts: np.ndarray, after: int,
                        upto: int) -> np.ndarray:
    """``counts`` (answers per (arm, label) of learner ``idx`` up to its event ``after``) plus the ``answer``
    events ``after < seq <= upto`` of its log, as a new array.

    The log and the queries table say the same: an ``answer`` event is written in the transaction that
    marks its query answered, and neither ever changes afterwards; so this is :func:`label_counts` of
    the learner at version ``upto``, read from the events since the last count instead of every answer.
    """
    out = counts.copy()
    if upto <= after:
        return out
    if conn.execute(sa.select(events.c.seq).where(
            events.c.experiment_id == eid, events.c.learner == idx, events.c.seq > after, events.c.seq <= upto,
            events.c.kind.in_(EXCLUSION_KINDS)).limit(1)).first() is not None:
        return label_counts(conn, eid, idx, counts.shape[0], labels)  # an exclusion changed what is counted
    col = {name: j for j, name in enumerate(labels)}
    for arm, label, c in conn.execute(
        sa.select(events.c.arm, events.c.label, sa.func.count())
        .where(events.c.experiment_id == eid, events.c.learner == idx, events.c.seq > after, events.c.seq <= upto,
               events.c.kind == "answer")
        .group_by(events.c.arm, events.c.label)
    ):
        out[arm, col[label]] += c
    return out


def stopping_progress(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    """How close the learner is to stopping, in the terms of its own stopping rule.

    The figures come from :meth:`purebandits.base.Learner.stopping_progress`: the bounds,
    threshold, strictness and epsilon the learner's rule tests, on its current state, so they
    agree with ``done``: ``fraction`` in [0, 1] is exactly 1.0 when ``done`` and below 1 before;
    ``margin`` = ``statistic - threshold`` (the rule fires at >= 0, or > 0 for a strict rule, as
    ``description`` says; None before the rule is defined); ``separated`` of ``of`` for rules
    that decide arms one by one. ``source`` is ``"learner"``, or ``"none"`` when the learner
    cannot report progress (``reason`` says why: it never stops by itself, or it has no
    ``stopping_progress``); ``fraction`` is then 1.0 if done else 0.0. A learner with a budget
    also gets ``budget`` and ``budget_fraction`` (answers / budget). The learner's rule, not the
    displayed intervals, decides the stop.
    """
    n = learner.n_pulls
    done = bool(learner.done)
    out: dict[str, Any] = {"done": done, "kind": learner.kind, "n_pulls": n}
    budget = params.get("budget", getattr(learner, "budget", None))
    if isinstance(budget, int | float) and not isinstance(budget, bool) and budget > 0:
        out["budget"] = budget
        out["budget_fraction"] = min(1.0, n / budget)
    hook = getattr(learner, "stopping_progress", None)
    progress = hook() if callable(hook) else None
    if progress is None:
        out.update(source="none", fraction=1.0 if done else 0.0, margin=None, statistic=None, threshold=None,
                   separated=None, of=None, description="",
                   reason="this learner does not report the progress of its stopping rule")
        return out

    def num(x: float | None) -> float | None:
        return None if x is None else _finite_or_none(float(x))

    frac = float(progress.fraction)  # settled by Learner.stopping_progress; kept so for any override
    if done:
        frac = 1.0
    elif not frac >= 0.0:
        frac = 0.0
    out.update(
        source="learner" if progress.reason is None else "none",
        fraction=frac if done else min(frac, NOT_DONE_CAP),
        margin=num(progress.margin), statistic=num(progress.statistic), threshold=num(progress.threshold),
        separated=progress.separated, of=progress.of, description=progress.description, reason=progress.reason,
    )
    return out


def learner_intervals(learner: Learner, arms: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The learner's (lower, upper) of ``arms`` (:meth:`~purebandits.base.Learner.intervals_of`: a page or the
    leaders cost their own bounds, not all 7,500 of a contest), or (-inf, inf) for learners without intervals."""
    try:
        return learner.intervals_of(arms)
    except NotImplementedError:
        return np.full(len(arms), -np.inf), np.full(len(arms), np.inf)


def rank_order(learner: Learner, rec: list[int]) -> np.ndarray:
    """Every arm in the order the owner reads the ranking: the recommendation first (in its order), then
    the answered arms by decreasing empirical mean, then the unanswered ones, ties by arm index."""
    means, lcounts = learner.means(), learner.counts_
    n = len(lcounts)
    rec_pos = np.full(n, n, dtype=np.int64)
    rec_pos[np.asarray(rec, dtype=np.int64)] = np.arange(len(rec))
    answered = lcounts > 0
    key = np.where(answered, -np.asarray(means, dtype=float), np.inf)
    return np.lexsort((np.arange(n), key, rec_pos))


#: the columns the ranking can be sorted by (``label:<name>`` sorts by one label's count)
RANKING_SORTS = ("rank", "text", "mean", "lower", "upper", "count")


def ranking_page(learner: Learner, items: list[dict[str, Any]], counts: np.ndarray, names: list[str],
                 rec: list[int], limit: int | None = None, offset: int = 0,
                 q: str | None = None, sort: str = "rank",
                 descending: bool = False) -> tuple[list[dict[str, Any]], int]:
    """One page of the ranking and how many items match ``q``.

    ``rank`` is always the learner's rank (:func:`rank_order`); ``q`` keeps the items whose text or
    id contains it (case-insensitive); ``sort`` is one of :data:`RANKING_SORTS` or ``label:<name>``,
    with items that have no value (no answer, no bound) last in either direction. The learner's
    bounds are computed for the page's rows only, unless the page is sorted by one of them.
    """
    lo = hi = None
    order = rank_order(learner, rec)
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(1, len(order) + 1)
    arms = order.tolist()
    if q:
        needle = q.casefold()
        arms = [a for a in arms if needle in items[a]["text"].casefold() or needle in str(items[a]["id"]).casefold()]
    if sort != "rank" or descending:
        means, lcounts = learner.means(), learner.counts_
        if sort == "rank":
            value = rank_of.tolist()
        elif sort == "text":
            value = [it["text"].casefold() for it in items]
        elif sort == "mean":
            value = [float(means[a]) if lcounts[a] else None for a in range(len(items))]
        elif sort in ("lower", "upper"):
            lo, hi = learner_intervals(learner, np.arange(len(items)))
            value = [_finite_or_none(float(x)) for x in (lo if sort == "lower" else hi)]
        elif sort == "count":
            value = lcounts.tolist()
        elif sort.startswith("label:") and sort[6:] in names:
            value = counts[:, names.index(sort[6:])].tolist()
        else:
            raise ValueError(f"cannot sort by {sort!r}: one of {', '.join(RANKING_SORTS)} or label:<name>")
        have = [a for a in arms if value[a] is not None]
        have.sort(key=lambda a: (value[a], rank_of[a]), reverse=descending)
        arms = have + [a for a in arms if value[a] is None]
    n_matching = len(arms)
    page = arms[offset:] if limit is None else arms[offset:offset + limit]
    if lo is None or hi is None:
        lo, hi = learner_intervals(learner, np.asarray(page, dtype=np.int64))
    else:
        lo, hi = lo[page], hi[page]
    return _rows(learner, items, counts, names, lo, hi, rec, page, rank_of), n_matching


def _rows(learner: Learner, items: list[dict[str, Any]], counts: np.ndarray, names: list[str], lo: np.ndarray,
          hi: np.ndarray, rec: list[int], arms: list[int], rank_of: np.ndarray) -> list[dict[str, Any]]:
    """The rows of ``arms``, whose bounds are ``lo[j]``, ``hi[j]`` (in the order of ``arms``)."""
    means = learner.means()
    lcounts, pend = learner.counts_, learner.pending_
    rec_set = set(rec)
    out = []
    for j, a in enumerate(arms):
        it = items[a]
        out.append({
            "rank": int(rank_of[a]), "arm": a, "id": it["id"], "text": it["text"],
            "mean": float(means[a]) if lcounts[a] else None,
            "lower": _finite_or_none(lo[j]), "upper": _finite_or_none(hi[j]),
            "count": int(lcounts[a]), "pending": int(pend[a]),
            "labels": {nm: int(counts[a, j]) for j, nm in enumerate(names)},
            "recommended": a in rec_set,
        })
    return out


def ranking_rows(learner: Learner, items: list[dict[str, Any]], counts: np.ndarray, names: list[str],
                 rec: list[int], limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Items ranked as the owner reads them (:func:`rank_order`), ranks ``offset + 1 ..`` up to ``limit`` rows."""
    return ranking_page(learner, items, counts, names, rec, limit=limit, offset=offset)[0]


#: the timeline's bucket widths (ms); each divides the next, so counts re-bucket exactly to a wider one
TIMELINE_WIDTHS = (1000, 5000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000)


def timeline_width(created_ms: int, now: int) -> int:
    """The bucket width (ms) that covers the time since ``created_ms`` in at most ~120 buckets."""
    span = max(1, now - created_ms)
    width = TIMELINE_WIDTHS[0]
    for w in TIMELINE_WIDTHS:
        width = w
        if span / w <= 120:
            break
    return width


def timeline_buckets(conn: Connection, eid: int, idx: int | None, width: int, upto: int | None = None
                     ) -> dict[int, int]:
    """Answers per bucket of ``width`` ms (``created_ms // width`` -> answers), of learner ``idx`` (every
    learner if None), of the answer events up to sequence number ``upto`` if given."""
    bucket = (events.c.created_ms // width).label("b")
    where = [events.c.experiment_id == eid, events.c.kind == "answer"]
    if idx is not None:
        where.append(events.c.learner == idx)
    if upto is not None:
        where.append(events.c.seq <= upto)
    rows = conn.execute(sa.select(bucket, sa.func.count()).where(*where).group_by(bucket).order_by(bucket))
    return {int(b): int(c) for b, c in rows}


def timeline_of(buckets: dict[int, int], width: int) -> dict[str, Any]:
    """The timeline as the API gives it: bucket width in seconds, and [start in seconds, answers] in time order."""
    return {"bucket_seconds": width / 1000.0, "buckets": [[b * width / 1000.0, c] for b, c in sorted(buckets.items())]}


def timeline(conn: Connection, eid: int, idx: int | None, created_ms: int, now: int) -> dict[str, Any]:
    """Answers per time bucket (at most ~120 buckets since the experiment began)."""
    width = timeline_width(created_ms, now)
    return timeline_of(timeline_buckets(conn, eid, idx, width), width)


#: rows fetched at a time by the CSV exports
EXPORT_BATCH = 2_000


#: answers.csv's columns: the first ten as they always were, then each answer's position in its participant's
#: session (1 = their first answer, gold items included), the known label of a gold item, and whether the
#: participant is excluded now (their answers are kept; the learners are not told them)
ANSWERS_COLUMNS = ["seq", "query_id", "participant_id", "algorithm", "arm", "item_id", "label", "reward", "asked_at",
                   "answered_at", "position", "gold_label", "excluded"]
#: the columns answers.csv adds for a pairwise experiment: its ``arm`` / ``item_id`` are the learner's item, its
#: ``label`` the side the participant chose (``left``, ``right`` or ``skip``) and its ``reward`` 1 when the learner's
#: item won; then the item drawn against it, the items as shown and the winner (empty for a skip)
PAIRWISE_ANSWER_COLUMNS = ["opponent", "opponent_id", "left_id", "right_id", "winner_id"]


def answers_rows(conn: Connection, eid: int, items: list[dict[str, Any]], labels_of: dict[int, str],
                 gold: list[tuple[Any, ...]] = (), excluded: set[str] = frozenset(),
                 pairwise: bool = False) -> Iterator[list]:
    """CSV rows (with header :data:`ANSWERS_COLUMNS`) of every answer, in the order they were given: learners'
    answers (a skip has the label ``skip`` and no reward) and, merged in by time, the gold items' (``gold``:
    :meth:`~purebandits.service.participant_quality.ParticipantOperations.gold_rows`; algorithm ``gold``, no seq,
    arm or reward). Answers given in the same millisecond are ordered by when they were asked. A ``pairwise``
    experiment's rows have :data:`PAIRWISE_ANSWER_COLUMNS` too."""
    yield ANSWERS_COLUMNS + (PAIRWISE_ANSWER_COLUMNS if pairwise else [])
    position: dict[str, int] = {}
    merged = heapq.merge(_learner_answers(conn, eid, items, labels_of, pairwise), _gold_answers(gold),
                         key=lambda r: (r[-1], r[8]))
    for row in merged:
        pid = row[2]
        position[pid] = position.get(pid, 0) + 1
        yield [*row[:8], iso_time(row[8]), iso_time(row[9]), position[pid], row[10], int(pid in excluded), *row[11]]


def _gold_answers(gold: list[tuple[Any, ...]]) -> Iterator[list]:
    for pid, gid, label, expected, _position, created, answered in gold:
        yield ["", "", pid, "gold", "", gid, label, "", created, answered, expected, (), answered]


def _learner_answers(conn: Connection, eid: int, items: list[dict[str, Any]],
                     labels_of: dict[int, str], pairwise: bool = False) -> Iterator[list]:
    q = queries.c
    rows = conn.execute(
        sa.select(q.end_seq, q.id, q.participant_id, q.learner, q.arm, q.label, q.reward, q.created_ms,
                  q.answered_ms, q.opponent, q.left_arm).where(q.experiment_id == eid, q.status == "answered")
        .order_by(q.answered_ms, q.learner, q.end_seq)
        .execution_options(yield_per=EXPORT_BATCH)  # a server-side cursor on PostgreSQL: rows as they are read
    )
    ids = [item["id"] for item in items]
    none = ()
    for seq, qid, pid, idx, arm, label, reward, created, answered, opp, left in rows:  # rows unpack as tuples
        extra: Any = none
        if pairwise and opp is not None:
            right = arm + opp - left
            won = None if reward is None else float(reward) > 0.5
            if won is not None:  # the side chosen, from what the learner was told
                label = "left" if won == (left == arm) else "right"
            extra = (opp, ids[opp], ids[left], ids[right], "" if won is None else ids[arm if won else opp])
        yield [seq, qid, pid, labels_of.get(idx, str(idx)), arm, ids[arm], label, "" if reward is None else reward,
               created, answered, "", extra, answered]


def participants_rows(conn: Connection, eid: int, labels_of: dict[int, str], quota: int | None,
                      code: Any, quality: dict[str, Any] | None = None,
                      platform: dict[str, tuple[str, str | None, str]] | None = None,
                      excluded: set[str] = frozenset(), gold_answers: dict[str, int] | None = None,
                      ) -> Iterator[list[Any]]:
    """CSV rows (with header): per participant, learner, answers, first and last answer, completion code, and
    the mean and longest response time (seconds from a query's issue to its answer); then, appended so the
    earlier columns keep their positions, the rater-quality measures and flags (``quality``:
    :class:`~purebandits.service.rater_quality.ParticipantQuality` per participant), whether the owner
    excluded them, and the crowd platform they came from (platform, study, session). ``gold_answers``: each
    participant's answered gold items, which count toward ``quota`` as the rating page counts them."""
    wait = queries.c.answered_ms - queries.c.created_ms
    rows = conn.execute(
        sa.select(queries.c.participant_id, queries.c.learner, sa.func.count(),
                  sa.func.min(queries.c.answered_ms), sa.func.max(queries.c.answered_ms),
                  sa.func.avg(wait), sa.func.max(wait))
        .where(queries.c.experiment_id == eid, queries.c.status == "answered")
        .group_by(queries.c.participant_id, queries.c.learner).order_by(sa.func.min(queries.c.answered_ms))
        .execution_options(yield_per=EXPORT_BATCH)
    )
    yield ["participant_id", "algorithm", "answers", "first_answer_at", "last_answer_at", "completion_code",
           "mean_response_seconds", "max_response_seconds", *QUALITY_COLUMNS, "excluded", "platform", "study",
           "session"]
    quality, platform, gold_answers = quality or {}, platform or {}, gold_answers or {}
    for pid, idx, n, first, last, mean_wait, max_wait in rows:
        reached = quota is not None and n + gold_answers.get(pid, 0) >= quota
        q = quality.get(pid)
        yield [pid, labels_of.get(idx, str(idx)), int(n), iso_time(first), iso_time(last),
               code(pid) if reached else "", round(float(mean_wait) / 1000, 3), round(float(max_wait) / 1000, 3),
               *(q.csv_values() if q is not None else [""] * len(QUALITY_COLUMNS)), int(pid in excluded),
               *(platform.get(pid) or ("", "", ""))]


def agreement(recs: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Pairwise overlap and Jaccard index of the learners' recommended sets."""
    labels = list(recs)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            sa_, sb = set(recs[a]), set(recs[b])
            union = sa_ | sb
            both = len(sa_ & sb)
            out.append({"a": a, "b": b, "overlap": both, "jaccard": both / len(union) if union else 1.0})
    return out


def _is_default_labels(labels: list[dict[str, Any]]) -> bool:
    """Whether ``labels`` are the caption contest's (DEFAULT_LABELS: same names and rewards, in any order)."""
    return len(labels) == len(DEFAULT_LABELS) and (
        {(lab["name"], float(lab["reward"])) for lab in labels}
        == {(lab["name"], float(lab["reward"])) for lab in DEFAULT_LABELS})


def _label_columns(names: list[str]) -> list[str]:
    """One CSV column name per label, in order: lower-case, every run of characters other than letters,
    digits and ``_`` turned into one ``_`` (so none starts with ``=``, ``+``, ``-`` or ``@``), ``_`` trimmed
    from both ends, ``label_<j>`` (1-based) if nothing is left; then made unique, against the fixed
    columns too (a label named "count" or "Caption" does not shadow them), by appending ``_2``, ``_3``, ..."""
    taken = set(_CUSTOM_HEAD) | set(_CUSTOM_TAIL)
    out = []
    for j, name in enumerate(names, 1):
        base = re.sub(r"\W+", "_", name.strip().lower()).strip("_") or f"label_{j}"
        col, k = base, 2
        while col in taken:
            col, k = f"{base}_{k}", k + 1
        taken.add(col)
        out.append(col)
    return out


def summary_columns(labels: list[dict[str, Any]]) -> list[str]:
    """The summary CSV's header for a label set (see :func:`summary_rows`)."""
    if _is_default_labels(labels):
        return list(SUMMARY_COLUMNS)
    return [*_CUSTOM_HEAD, *_label_columns([lab["name"] for lab in labels]), *_CUSTOM_TAIL]


def summary_rows(counts: np.ndarray, labels: list[dict[str, Any]], items: list[dict[str, Any]],
                 contest: str) -> list[list[Any]]:
    """Summary CSV rows (header first), one per item: ``counts[arm, j]`` answers of label ``labels[j]``.

    **Default labels** (unfunny / somewhat funny / funny, rewards 0 / 0.5 / 1, in any order): the
    columns of the public caption-contest summaries (nextml/caption-contest-data) with the same
    names, meanings and values -- ``funny / somewhat_funny / unfunny`` are the label counts,
    ``score`` the mean on the 1 (unfunny) .. 3 (funny) scale (``1 + 2 reward``) and ``precision``
    its standard error (sample std / sqrt(count); 0 for one answer) -- plus ``item_id``, the
    item's id in the experiment::

        rank,item_id,funny,somewhat_funny,unfunny,count,score,precision,contest,caption

    ``item_id`` sits right after ``rank`` so that every file this service writes starts with
    ``rank,item_id`` and ends with ``contest,caption`` whatever its labels; the public columns
    keep their names and their order among themselves, so a reader of the public format that
    goes by column name (pandas, :func:`purebandits.instances.real.load_caption_summary`) reads
    the file unchanged. Only a reader going by position sees the public columns one place later.

    **Any other label set**: one count column per label, in the experiment's label order, named
    after the label (made a safe, unique header by :func:`_label_columns`: "Not sure" ->
    ``not_sure``)::

        rank,item_id,<label columns>,count,mean_reward,precision,contest,caption

    The 1..3 score only means something for the caption contest's labels, so these files give
    ``mean_reward``, the mean reward of the item's answers in the labels' own reward units, and
    ``precision`` its standard error (sample std / sqrt(count)).

    Both: the best mean first (items without answers last, in item order, with empty mean and
    precision); ties in item order. Counts are ints; means and precisions are floats (the CSV
    writer gives their shortest round-trip text; floats, not strings, so that the export's formula
    guard leaves a negative mean reward alone). ``contest`` is the experiment's name, ``caption``
    the item's text.
    """
    default = _is_default_labels(labels)
    header = summary_columns(labels)
    r = np.array([float(lab["reward"]) for lab in labels])
    if default:
        s = 1.0 + 2.0 * r  # the public 1..3 score of each label
        j_of = {lab["name"]: j for j, lab in enumerate(labels)}
        public = [j_of["funny"], j_of["somewhat funny"], j_of["unfunny"]]  # the public count columns' labels
    else:
        s = r
        public = list(range(len(labels)))
    stats = []
    for a in range(counts.shape[0]):
        c = counts[a]
        n = int(c.sum())
        if n:
            mean = float(c @ s) / n
            var = float(c @ (s - mean) ** 2) / (n - 1) if n > 1 else 0.0
            prec = math.sqrt(var) / math.sqrt(n)
        else:
            mean = prec = math.nan
        stats.append((n, mean, prec, a))
    stats.sort(key=lambda x: (x[0] == 0, -x[1] if x[0] else 0.0, x[3]))
    out = [header]
    for rank, (n, mean, prec, a) in enumerate(stats, 1):
        out.append([rank, items[a]["id"], *(int(counts[a, j]) for j in public), n,
                    "" if n == 0 else mean, "" if n == 0 else prec, contest, items[a]["text"]])
    return out
