"""The incremental activity tally gives what the full recomputation gives, on SQLite and PostgreSQL.

:class:`purebandits.service.history.ActivityTally` reads only the answers logged since its last refresh
(and, for the participants answering in them, their answers up to the range's end); :func:`activity`
reads every answer. They are compared after every few answers of a crowd whose participants come back
across refreshes (their number of answers moves between histogram bins), with two learners (each tally
counts its own), expired queries, passed items, a clock that crosses several timeline widths, a refresh
after more answers than it had counted (a recount), a clock set back, and an experiment id reused after
a delete.
"""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
import svc_migrated
from study_support import Clock, open_study

from purebandits.service import history
from purebandits.service.errors import Gone
from purebandits.service.history import ActivityTally, activity
from purebandits.service.models import queries
from purebandits.testing.postgres import create_database, drop_database

#: conftest's per-test database, the SQLite file already migrated (a copy: see :mod:`svc_migrated`)
db_url = svc_migrated.db_url
ZERO_RATES = {"ask_rate_per_second": 0, "participant_rate_per_second": 0, "create_rate_per_second": 0}
LEARNERS = [{"label": "A", "algorithm": "lucb1", "params": {"delta": 0.1}},
            {"label": "B", "algorithm": "uniform_allocation", "params": {"budget": 100_000}}]
MEANS = np.linspace(0.2, 0.8, 12)


def _create(study):
    return study.create_experiment({"name": "tally", "seed": 3, "algorithms": LEARNERS,
                                    "items": [{"id": str(i), "text": f"caption {i}"} for i in range(len(MEANS))]})[0]


def _reference(study, eid, idx, lrn, now):
    with study.engine.connect() as conn:
        return activity(conn, eid, idx, lrn, study.meta(eid).created_ms, now)


def _tallied(study, tally, lrn, now):
    with study.engine.connect() as conn:
        tally.refresh(conn, now)
    return tally.activity(lrn)


def _crowd_step(study, eid, clock, rng, pool, pending):
    """One event of the crowd: a new or returning participant asks, an answer arrives, or a query is left to
    expire; the clock moves by a few seconds to minutes."""
    clock.ms += int(rng.exponential(20_000)) + 1
    if pending and rng.random() < 0.55:
        qid, pid, arm = pending.pop(int(rng.integers(len(pending))))
        if rng.random() < 0.08:  # never answered: expires once its time is up
            return
        try:
            study.answer(qid, pid, "funny" if rng.random() < MEANS[arm] else "unfunny")
        except Gone:  # answered too late: expired
            pass
        return
    if rng.random() < 0.05:
        study.expire_stale()
    pid = pool[int(rng.integers(len(pool)))] if pool and rng.random() < 0.7 else study.new_participant()
    if pid not in pool:
        pool.append(pid)
    q = study.next_query(eid, pid)
    if q["state"] == "ok" and all(q["query_id"] != p[0] for p in pending):  # a re-ask gives the pending one
        pending.append((q["query_id"], pid, int(q["item"]["id"])))


#: the response windows the tallies are checked at (the default; 50, so that the latest answers replace older ones
#: across refreshes)
WINDOWS = [history.RESPONSE_WINDOW, 50]


@pytest.fixture(scope="module", params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])
def crowd_checks(request, tmp_path_factory) -> dict[int, dict]:
    """One crowd of 1,500 events on a fresh database of the backend, with a tally per learner and window refreshed
    and compared with the full recount (under that window) after every 37 events and at the end; per window, what
    the test of that window checks.

    The crowd's events never read ``RESPONSE_WINDOW`` (only the activity of the tallies and of :func:`activity`
    does), so the crowd each window's test ran on its own was the same crowd: the windows' tallies share it,
    each refreshed and compared at the same points as before, with the window set to its own value (saves one
    crowd of the two per backend)."""
    if request.param == "sqlite":
        db_url = svc_migrated.fresh_sqlite_url(tmp_path_factory.mktemp("tally"))
    else:
        admin = request.getfixturevalue("pg_admin_url")
        db_url = create_database(admin)
        request.addfinalizer(lambda: drop_database(admin, db_url))
    clock = Clock()
    study = open_study(db_url, clock=clock, **ZERO_RATES)
    eid = _create(study)
    created = study.meta(eid).created_ms
    tallies = {w: [ActivityTally(eid, idx, created) for idx in range(2)] for w in WINDOWS}
    out: dict[int, dict] = {w: {"checks": []} for w in WINDOWS}
    rng = np.random.default_rng(7)
    pool: list[str] = []
    pending: list[tuple[str, str, int]] = []
    with pytest.MonkeyPatch.context() as mp:
        for step in range(1, 1_501):
            _crowd_step(study, eid, clock, rng, pool, pending)
            if step % 37 == 0 or step == 1_500:
                for idx in range(2):
                    lrn = study._learner_copy(eid, idx)[0]
                    for w in WINDOWS:
                        mp.setattr(history, "RESPONSE_WINDOW", w)
                        got, want = _tallied(study, tallies[w][idx], lrn, clock.ms), \
                            _reference(study, eid, idx, lrn, clock.ms)
                        out[w]["checks"].append((step, got == want, got, want))
        for w in WINDOWS:  # what the test read at the end, under its window
            mp.setattr(history, "RESPONSE_WINDOW", w)
            ref = _reference(study, eid, 0, study._learner_copy(eid, 0)[0], clock.ms)
            n_results = study.results(eid, timeline=False)["n_answers"] + \
                study.results(eid, timeline=False, learner="B")["n_answers"]
            out[w].update(ref=ref, width=tallies[w][0].width, n_answers=[t.n_answers for t in tallies[w]],
                          n_results=n_results,
                          n_participants=[a["n_participants"] for a in study.comparison(eid)["algorithms"]])
    # the comparison's participants per learner come from the service's tallies: the distinct count
    with study.engine.connect() as conn:
        distinct = [conn.execute(sa.select(sa.func.count(sa.distinct(queries.c.participant_id))).where(
            queries.c.experiment_id == eid, queries.c.learner == idx, queries.c.status == "answered")).scalar_one()
            for idx in range(2)]
    study.engine.dispose()
    for w in WINDOWS:
        out[w]["distinct"] = distinct
    return out


@pytest.mark.parametrize("window", WINDOWS)
def test_tally_equals_the_full_recount_as_the_crowd_answers(crowd_checks, window):
    """(A window of 50 response times, so that the latest answers replace older ones across refreshes.) The crowd
    and the checks run in :func:`crowd_checks`, once for both windows."""
    got = crowd_checks[window]
    for step, equal, tallied, reference in got["checks"]:
        assert equal, (step, tallied, reference)
    # the crowd came back across refreshes, so participants moved between bins; the clock crossed widths
    ref = got["ref"]
    assert ref["participants"]["answers"]["max"] >= 5 and got["width"] > 60_000, (ref, got["width"])
    assert sum(got["n_answers"]) == got["n_results"]
    assert len(got["checks"]) == 2 * 41
    # the comparison's participants per learner come from the service's tallies: the distinct count
    assert got["n_participants"] == got["distinct"] and min(got["distinct"]) > 10


def test_tally_recounts_after_a_long_gap_and_a_clock_set_back(db_url, monkeypatch):
    clock = Clock()
    study = open_study(db_url, clock=clock, **ZERO_RATES)
    eid = _create(study)
    tally = ActivityTally(eid, 0, study.meta(eid).created_ms)
    rng = np.random.default_rng(11)
    pool: list[str] = []
    pending: list[tuple[str, str, int]] = []
    recounts = []
    real = ActivityTally._count_all

    def counted(self, *a, **kw):
        recounts.append(self.n_answers)
        return real(self, *a, **kw)

    monkeypatch.setattr(ActivityTally, "_count_all", counted)
    for stop in (60, 80, 600):  # a first count, a few more answers, then many more than counted: a recount
        while len(pool) < stop:
            _crowd_step(study, eid, clock, rng, pool, pending)
        lrn = study._learner_copy(eid, 0)[0]
        assert _tallied(study, tally, lrn, clock.ms) == _reference(study, eid, 0, lrn, clock.ms)
    assert len(recounts) == 2 and recounts[1] > 0
    clock.ms = study.meta(eid).created_ms + 1_000  # set back to the first second: the narrowest width again
    lrn = study._learner_copy(eid, 0)[0]
    assert _tallied(study, tally, lrn, clock.ms) == _reference(study, eid, 0, lrn, clock.ms)
    assert tally.width == 1_000 and len(recounts) == 3


def test_the_service_uses_a_fresh_tally_for_a_reused_experiment_id(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **ZERO_RATES)
    rng = np.random.default_rng(5)
    eid = _create(study)
    pool: list[str] = []
    pending: list[tuple[str, str, int]] = []
    for _ in range(200):
        _crowd_step(study, eid, clock, rng, pool, pending)
    assert study.activity(eid)["participants"]["n"] > 0
    study.delete_experiment(eid)
    clock.ms += 1_000
    again = _create(study)
    got = study.activity(again)
    if again == eid:  # SQLite reused the id: the old tally must not leak into the new experiment
        assert got["participants"]["n"] == 0
    assert got["participants"]["n"] == 0 and got["timeline"]["buckets"] == []


def test_histogram_of_a_tally_equals_numpy_on_the_values():
    rng = np.random.default_rng(0)
    for size in (1, 2, 3, 10, 41, 1_000):
        for top in (1, 5, 40, 41, 300):
            values = rng.integers(1, top + 1, size)
            by_value = np.bincount(values)
            got = history._histogram_of_tally(by_value)
            counts, _ = np.histogram(values, bins=np.asarray(got["edges"]))
            assert got["counts"] == counts.tolist()
            assert got["mean"] == float(values.mean()) and got["median"] == float(np.median(values))
            assert got["max"] == int(values.max())
    assert history._histogram_of_tally(np.zeros(1, dtype=np.int64))["counts"] == []
