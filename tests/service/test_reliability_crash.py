"""CI-sized crash test: SIGKILL the server processes 20 times under load (and crash PostgreSQL twice).

Full-size runs and their numbers: ``benchmarks/reliability/crash.py``, ``docs/RELIABILITY.md``.
"""

from __future__ import annotations

import json

import pytest
from reliability_support import crash, pg_cluster

pytestmark = pytest.mark.reliability


def _check(rep: dict) -> None:
    detail = json.dumps({k: v for k, v in rep.items() if k != "experiments"}, default=str)[:3000]
    assert rep["ok"], detail
    assert rep["answers_lost"] == 0 and rep["double_counted"] == 0 and rep["wrong_label"] == 0, detail
    assert rep["stored_never_sent"] == 0 and rep["n_contract_violations"] == 0, detail
    assert rep["after_full_restart_ok"], detail
    assert rep["kills"] == 20
    assert rep["answers_acked"] > 0 and rep["in_doubt_retried"] > 0  # the kills did hit requests in flight
    for e in rep["experiments"].values():
        assert e["state_equals_replay"] and e["recommendation_equals_replay"], e
        assert e["counts_equal_stored_answers"] and e["sums_equal_stored_answers"], e


def test_sigkill_servers_sqlite(tmp_path):
    rep = crash.run_crash("sqlite", servers=2, participants=6, kills=20, kill_every=(0.8, 1.8), seed=1,
                          workdir=tmp_path)
    _check(rep)


@pytest.mark.postgres
def test_sigkill_servers_and_crash_postgres(tmp_path):
    with pg_cluster() as pg:
        rep = crash.run_crash("postgres", servers=2, participants=6, kills=20, kill_every=(0.8, 1.8),
                              pg_restarts=2, pg_down=2.0, seed=2, workdir=tmp_path, pg=pg)
    _check(rep)
    # while the database was down the service answered 503 with a clear message (no 500, no hang:
    # every request got an answer), and it took answers again after each restart by itself
    assert rep["pg_restarts"] == 2
    assert rep["responses_503_while_db_down"] > 0
    assert all(n > 0 for n in rep["acks_after_each_db_restart"])
