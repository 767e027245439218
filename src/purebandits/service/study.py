"""The crowdsourcing protocol, independent of HTTP: experiments, their learners, queries, answers.

One :class:`Study` per process drives registered learners through the ask/tell contract. It is
assembled from parts that each own one concern, found by name:

- :mod:`~purebandits.service.transactions`: connections, locks and the one transaction that locks
  learners, syncs them to the log and writes back versions, snapshots and history points;
- :mod:`~purebandits.service.learner_states`: cached experiment settings, learner caches, replay of
  the event log, verification and checkpoints;
- :mod:`~purebandits.service.owners`: creation, tokens, status, listing and deletion;
- :mod:`~purebandits.service.crowd`: participants, asks and answers in group-committed batches, expiry;
- :mod:`~purebandits.service.results`: rankings, history, activity, comparisons and CSV exports;
- :mod:`~purebandits.service.pairwise_results`: a pairwise experiment's win matrix, Bradley-Terry strengths and
  crowd-kit pairs;
- :mod:`~purebandits.service.done_hooks`: auto-stop and webhooks when every learner has stopped;
- :mod:`~purebandits.service.stages`: a staged experiment's switch from ratings to comparisons;
- :mod:`~purebandits.service.experiment_meta`: what they share (settings, cached learners, tokens).

Spec validation lives in :mod:`~purebandits.service.validation`, the event log and its replay in
:mod:`~purebandits.service.eventlog`, and the report builders in :mod:`~purebandits.service.reports`.

Several learners per experiment
-------------------------------
An experiment runs one or more learners on the same items, as NEXT ran several algorithms
side by side in the caption contests. Each has its own event log, version and snapshot; each
participant is assigned to one of them by share, sticky (a hash of experiment and participant
id, so every process agrees without storing anything).

Consistency
-----------
Every change to a learner happens in ONE database transaction that first locks it
(PostgreSQL ``SELECT ... FOR UPDATE`` on its ``learners`` row; SQLite ``BEGIN IMMEDIATE``,
the database's single write lock), then brings the process's cached learner up to the stored
``version`` by applying the events other processes appended since, then calls ``ask`` /
``tell`` / ``cancel``, appends the matching events and bumps the version. An answer is
acknowledged only after that transaction commits. If anything fails the cached learner is
dropped (it may hold uncommitted changes) and rebuilt from the log next time.

Repeats
-------
A participant is never handed the same item twice in a row and, with the default policy
``repeats="never"``, at most once per experiment while items they have not rated remain. The
learner still decides: the protocol asks it for its most useful item among those the
participant may be given (``Learner.ask(1, allowed=...)``, each learner in the terms of its own
rule; ``docs/algorithms.md`` says why each guarantee holds under the restriction), so nobody is
turned away while items they have not rated remain. The items that were not allowed are stored
with the ask's event (``events.excluded``), so replay asks with the same restriction and stays
exact. Logs written before restricted asks existed replay as they were written: their asks walked
the learner's candidates, and ``events.passed`` keeps the ones passed over. A participant with
pending queries gets them again rather than new ones; an ask may request several items at once
(``n``), which the rating page uses to prefetch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection, Engine

from purebandits.service.crowd import MAX_ITEMS_PER_ASK, MAX_KNOWN_PARTICIPANTS, CrowdOperations
from purebandits.service.done_hooks import DoneHooks
from purebandits.service.eventlog import HotStatements
from purebandits.service.experiment_meta import hash_token, now_ms
from purebandits.service.learner_states import LearnerStates
from purebandits.service.lru import LRU
from purebandits.service.owners import OwnerOperations
from purebandits.service.pairwise_results import PairwiseReads
from purebandits.service.participant_quality import ParticipantOperations
from purebandits.service.reports import SUMMARY_COLUMNS, summary_rows
from purebandits.service.results import MAX_REPORT_CACHES, ResultReads
from purebandits.service.settings import Settings
from purebandits.service.stages import StageOperations
from purebandits.service.storage import is_sqlite
from purebandits.service.transactions import Transactions
from purebandits.service.validation import DEFAULT_LABELS, parse_items_csv

__all__ = ["Study", "DEFAULT_LABELS", "parse_items_csv", "hash_token", "SUMMARY_COLUMNS", "summary_rows",
           "MAX_ITEMS_PER_ASK"]



class Study(Transactions, LearnerStates, OwnerOperations, CrowdOperations, ParticipantOperations, ResultReads,
            PairwiseReads, DoneHooks, StageOperations):
    """Experiments over a SQL database, driving registered learners; one per process.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        SQLite or PostgreSQL engine from :func:`purebandits.service.storage.make_engine`.
    settings : Settings
        Expiry, snapshot frequency, admin token.
    clock : callable, optional
        Returns the time in epoch milliseconds (tests inject a fake clock).
    """

    def __init__(self, engine: Engine, settings: Settings, clock: Callable[[], int] | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock or now_ms
        self._sqlite = is_sqlite(engine)
        # bounded: a miss only costs a reload from the database (settings.cache_experiments)
        items_budget = max(1, int(settings.cache_items))
        self._meta: LRU = LRU(max(1, int(settings.cache_experiments)), items_budget, lambda m: m.n_arms)
        self._cache: LRU = LRU(max(1, int(settings.cache_experiments)), items_budget,
                               lambda c: c.learner.n_arms_)
        self._locks: dict[tuple[int, int], threading.Lock] = {}
        self._global = threading.Lock()
        self._known_participants: LRU = LRU(MAX_KNOWN_PARTICIPANTS)
        self._last_expire: dict[tuple[int, int], int] = {}
        self._activity: dict[tuple[int, int], tuple[int, dict[str, Any]]] = {}  # (eid, idx) -> (when, activity)
        # what the owners' reports keep per learner, for the MAX_REPORT_CACHES learners asked for last (a
        # contest of a million answers: ~1 MB of tally and ~30 MB of history points): (eid, idx) -> its
        # activity tally, and -> (the experiment's created_ms, its history points read so far, their lock)
        self._tallies: LRU = LRU(MAX_REPORT_CACHES)
        self._points: LRU = LRU(MAX_REPORT_CACHES)
        self._reports_lock = threading.Lock()
        # (eid, idx) -> (version, answers per (arm, label) at that version): the owners' polls add the
        # answers logged since instead of counting every answer again
        self._counts: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        # (eid, idx) -> (created_ms, version, when, done, forecast fields): the forecast of the answers still
        # needed (purebandits.forecast) is computed at most every FORECAST_TTL_MS while answers arrive
        self._forecasts: LRU = LRU(MAX_REPORT_CACHES)
        # pending queries issued here: id -> (eid, pid, learner); entries leave on answer / expiry,
        # so the map stays as large as the pending set (memory must not grow with the answers)
        self._query_owner: dict[str, tuple[int, str, int]] = {}
        # staged experiments that have switched: stage 1's id -> stage 2's (final, so never evicted; one int each)
        self._stage_children: dict[int, int] = {}
        self._x = HotStatements(engine)
        self._hot: tuple[int, Connection] | None = None  # (thread id, connection): see _loop_connection
        self._local = threading.local()  # .nowait: see nowait()
        self._wait = max(0.001, float(settings.db_wait_seconds))

