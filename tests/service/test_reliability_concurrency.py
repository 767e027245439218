"""Several server processes on one database under concurrent load: counts equal acknowledged answers.

PostgreSQL: three processes (row lock per experiment). SQLite: three processes on one file (one
writer at a time through BEGIN IMMEDIATE and busy_timeout): no 'database is locked' may reach a
participant, so every response must be a 2xx (a locked database would surface as a 503).
"""

from __future__ import annotations

import pytest
from reliability_support import crash, pg_cluster

pytestmark = pytest.mark.reliability


def _check(rep: dict) -> None:
    assert rep["ok"], rep["problems"]
    assert rep["answers_lost"] == 0 and rep["double_counted"] == 0 and rep["stored_never_sent"] == 0
    # no kills: every answer sent was acknowledged and stored once, nothing was ever refused
    assert rep["answers_acked"] == rep["answers_stored"] == rep["ledger"]["answers_sent"] > 100
    assert rep["queries_stored"] == rep["queries_issued_to_client"]
    statuses = rep["ledger"]["status"]
    assert all(k.split()[1] in ("200", "201") for k in statuses), statuses
    for e in rep["experiments"].values():
        assert e["state_equals_replay"] and e["recommendation_equals_replay"], e
        assert e["counts_equal_stored_answers"] and e["pending_equals_stored_pending"], e


def test_three_processes_sqlite(tmp_path):
    _check(crash.run_crash("sqlite", servers=3, participants=12, experiments=2, kills=0, min_seconds=12,
                           seed=3, workdir=tmp_path))


@pytest.mark.postgres
def test_three_processes_postgres(tmp_path):
    with pg_cluster() as pg:
        _check(crash.run_crash("postgres", servers=3, participants=12, experiments=2, kills=0, min_seconds=12,
                               seed=4, workdir=tmp_path, pg=pg))
