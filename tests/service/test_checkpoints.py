"""Verified checkpoints: a restart replays only the events after the last one, and still checks the snapshot."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa
from study_support import Clock, open_study

from purebandits.service.app import startup_summary
from purebandits.service.eventlog import read_checkpoint, read_snapshot, state_digest
from purebandits.service.models import checkpoints, snapshots


def spec(n=8, **kw):
    out = {"name": "t", "items": [{"id": f"i{i}", "text": f"item {i}"} for i in range(n)], "seed": 5,
           "repeats": "not_consecutive"}
    out.update(kw)
    return out


def traffic(study, eid, n, rng, clock):
    """``n`` answered queries from a few participants (labels at random)."""
    pids = [study.new_participant() for _ in range(3)]
    for i in range(n):
        p = pids[i % len(pids)]
        q = study.next_query(eid, p)
        assert q["state"] == "ok"
        study.answer(q["query_id"], p, ["unfunny", "somewhat funny", "funny"][int(rng.integers(3))])
        clock.ms += 50


def version(study, eid):
    return study.experiment_info(eid)["version"]


def test_incremental_verify_replays_only_the_tail(db_url):
    clock, rng = Clock(), np.random.default_rng(0)
    study = open_study(db_url, clock=clock, snapshot_every=10)
    eid, _ = study.create_experiment(spec())
    traffic(study, eid, 30, rng, clock)
    v1 = version(study, eid)
    first = open_study(db_url, clock=clock).verify(eid)  # from the checkpoint written at creation (version 0)
    assert first["snapshot_matches"] is True and first["replayed"] == v1
    assert first["learners"][0]["replayed_from"] == 0 and not first["learners"][0]["full_replay"]
    traffic(study, eid, 7, rng, clock)
    v2 = version(study, eid)
    again = open_study(db_url, clock=clock).verify(eid)  # a restart: only the 14 events since the last one
    row = again["learners"][0]
    assert again["replayed"] == v2 - v1 == 14
    assert row["replayed_from"] == v1 and row["checkpoint"] == "ok" and not row["full_replay"]
    assert row["snapshot_matches"] is True and row["version"] == v2
    # nothing new: nothing replayed; the full check replays everything and agrees
    assert open_study(db_url, clock=clock).verify(eid)["replayed"] == 0
    full = open_study(db_url, clock=clock).verify(eid, full=True)
    assert full["replayed"] == v2 and full["snapshot_matches"] is True and full["learners"][0]["full_replay"]
    assert full["learners"][0]["checkpoint"] == "skipped"


def test_background_advance_keeps_the_checkpoint_at_the_head(db_url):
    clock, rng = Clock(), np.random.default_rng(1)
    study = open_study(db_url, clock=clock, snapshot_every=10)
    eid, _ = study.create_experiment(spec(algorithms=[{"algorithm": "lil_ucb", "label": "L", "share": 1},
                                                      {"algorithm": "random_sampling", "label": "R", "share": 1}]))
    traffic(study, eid, 40, rng, clock)
    heads = [a["version"] for a in study.experiment_info(eid)["algorithms"]]
    done = study.advance_checkpoints()  # (participants are assigned at random: a learner may have had none)
    assert done["learners"] == sum(h > 0 for h in heads) and done["repaired"] == 0 and done["replayed"] == sum(heads)
    with study.engine.connect() as conn:
        for idx in range(2):
            ck = read_checkpoint(conn, eid, idx)
            head = study.experiment_info(eid)["algorithms"][idx]["version"]
            assert ck.version == head and ck.intact and ck.claim_ms is None
            assert json.loads(ck.state) == json.loads(study.replay(eid, learner=idx).state_json())
    assert study.advance_checkpoints()["learners"] == 0  # at the head: nothing to do
    report = open_study(db_url, clock=clock).verify_all()
    assert report[eid]["replayed"] == 0
    assert "0 event(s) replayed (2 learner(s) from their verified checkpoint, 0 from the start" in \
        startup_summary(report, 0.1)
    # at most max_events per learner and call: the checkpoint moves forward in steps
    before = [a["version"] for a in study.experiment_info(eid)["algorithms"]]
    traffic(study, eid, 10, rng, clock)
    after = [a["version"] for a in study.experiment_info(eid)["algorithms"]]
    steps = sum(min(3, a - b) for a, b in zip(after, before, strict=True))
    assert study.advance_checkpoints(max_events=3)["replayed"] == steps
    # a learner another process is advancing (a fresh claim) is skipped; a stale claim is taken over
    with study.engine.begin() as conn:
        conn.execute(checkpoints.update().values(claim_ms=clock.ms))
    assert study.advance_checkpoints()["learners"] == 0
    clock.ms += study.CHECKPOINT_CLAIM_MS + 1
    assert study.advance_checkpoints()["learners"] >= 1
    with study.engine.connect() as conn:
        assert [read_checkpoint(conn, eid, i).version for i in range(2)] == after


def _corrupt_snapshot(study):
    with study.engine.begin() as conn:
        state = json.loads(conn.execute(sa.select(snapshots.c.state)).scalar_one())
        state["state"]["sums_"]["__ndarray__"][0] += 7.0
        conn.execute(snapshots.update().values(state=json.dumps(state)))


@pytest.mark.parametrize("how", ["restart", "background"])
def test_wrong_snapshot_is_detected_and_repaired(db_url, how, caplog):
    clock, rng = Clock(), np.random.default_rng(2)
    study = open_study(db_url, clock=clock, snapshot_every=4)
    eid, _ = study.create_experiment(spec(algorithm="lil_ucb"))
    traffic(study, eid, 20, rng, clock)
    study.verify(eid)  # the checkpoint at the head
    traffic(study, eid, 5, rng, clock)  # a snapshot after it
    good = study.learner_state(eid)
    with study.engine.connect() as conn:
        assert read_snapshot(conn, eid, 0)[0] > read_checkpoint(conn, eid, 0).version
    _corrupt_snapshot(study)
    if how == "restart":
        fresh = open_study(db_url, clock=clock)
        rep = fresh.verify(eid)
        assert rep["snapshot_matches"] is False and rep["learners"][0]["full_replay"]
        assert fresh.learner_state(eid) == good
    else:
        done = study.advance_checkpoints()
        assert done["repaired"] == 1
    assert "differs from the replay" in caplog.text
    with study.engine.connect() as conn:
        snap = read_snapshot(conn, eid, 0)
        ck = read_checkpoint(conn, eid, 0)
    assert json.loads(snap[1]) == good["state"] and snap[0] == good["version"]
    assert ck.version == good["version"] and json.loads(ck.state) == good["state"]
    assert open_study(db_url, clock=clock).verify(eid)["snapshot_matches"] is True


@pytest.mark.parametrize("how", ["bytes", "rehashed", "past_end", "unloadable"])
def test_corrupt_checkpoint_falls_back_to_a_full_replay(db_url, how, caplog):
    clock, rng = Clock(), np.random.default_rng(3)
    study = open_study(db_url, clock=clock, snapshot_every=4)
    eid, _ = study.create_experiment(spec(algorithm="lil_ucb"))
    traffic(study, eid, 12, rng, clock)
    study.verify(eid)
    traffic(study, eid, 5, rng, clock)
    good, head = study.learner_state(eid), version(study, eid)
    with study.engine.begin() as conn:
        ck = read_checkpoint(conn, eid, 0)
        state = json.loads(ck.state)
        state["state"]["sums_"]["__ndarray__"][1] += 3.0
        text = json.dumps(state)
        values = {"bytes": {"state": text}, "rehashed": {"state": text, "sha256": state_digest(text)},
                  "past_end": {"version": head + 100},
                  "unloadable": {"state": "{}", "sha256": state_digest("{}")}}[how]
        conn.execute(checkpoints.update().values(**values))
    fresh = open_study(db_url, clock=clock)
    rep = fresh.verify(eid)
    row = rep["learners"][0]
    assert row["full_replay"] and row["replayed"] >= head
    # the snapshot was right all along: the full replay agrees with it
    assert rep["snapshot_matches"] is True
    # a wrong state with a matching digest (written wrong) shows as a replay that fails or disagrees
    assert row["checkpoint"] in {"bytes": {"corrupt"}, "rehashed": {"ok", "unusable"}, "past_end": {"corrupt"},
                                 "unloadable": {"unusable"}}[how]
    assert "replaying the whole log" in caplog.text
    assert fresh.learner_state(eid) == good
    with study.engine.connect() as conn:
        ck = read_checkpoint(conn, eid, 0)
    assert ck.intact and ck.version == head and json.loads(ck.state) == good["state"]
    assert open_study(db_url, clock=clock).verify(eid)["replayed"] == 0


def test_corrupt_checkpoint_is_repaired_in_the_background(db_url):
    clock, rng = Clock(), np.random.default_rng(4)
    study = open_study(db_url, clock=clock, snapshot_every=4)
    eid, _ = study.create_experiment(spec(algorithm="lil_ucb"))
    traffic(study, eid, 10, rng, clock)
    with study.engine.begin() as conn:
        conn.execute(checkpoints.update().values(sha256="0" * 64))
    assert study.advance_checkpoints()["repaired"] == 1
    with study.engine.connect() as conn:
        assert read_checkpoint(conn, eid, 0).intact


@pytest.mark.parametrize("advanced", [True, False])
def test_restart_serves_the_same_next_ask(db_url, advanced):
    """A restarted process (verified from the checkpoint, replaying the tail) hands out the query a process that
    never restarted would have."""
    clock, rng = Clock(), np.random.default_rng(5)
    study = open_study(db_url, clock=clock, snapshot_every=6)
    eid, _ = study.create_experiment(spec(n=12))  # the default learner
    traffic(study, eid, 25, rng, clock)
    study.verify(eid)
    traffic(study, eid, 9, rng, clock)  # a tail after the checkpoint, past a snapshot
    if advanced:
        study.advance_checkpoints()
    learner, _v, _status = study._learner_copy(eid, 0)
    expected = learner.ask(1)[0]  # what the running process would hand a new participant
    restarted = open_study(db_url, clock=clock)
    rep = restarted.verify_all()[eid]
    assert rep["snapshot_matches"] is not False and not rep["learners"][0]["full_replay"]
    assert rep["replayed"] == (0 if advanced else 18)
    q = restarted.next_query(eid, restarted.new_participant())
    assert q["state"] == "ok" and q["item"]["id"] == restarted.meta(eid).items[expected]["id"]
    assert json.loads(restarted.replay(eid).state_json()) == restarted.learner_state(eid)["state"]


def test_deleting_an_experiment_removes_its_checkpoints(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment(spec())
    study.delete_experiment(eid)
    with study.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(checkpoints)).scalar_one() == 0


def test_verify_command_checks_from_the_checkpoint_or_the_whole_log(db_url, capsys, monkeypatch):
    from purebandits.cli import main

    monkeypatch.delenv("PUREBANDITS_DATABASE_URL", raising=False)
    clock, rng = Clock(), np.random.default_rng(6)
    study = open_study(db_url, clock=clock, snapshot_every=4)
    eid, _ = study.create_experiment(spec(algorithm="lil_ucb"))
    traffic(study, eid, 10, rng, clock)
    head = version(study, eid)
    assert main(["experiment", "verify", "--db", db_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[str(eid)]
    assert report["snapshot_matches"] is True and report["replayed"] == head  # from the checkpoint at creation
    assert main(["experiment", "verify", str(eid), "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "1 experiment(s) verified" in out and f"from {head}" in out
    assert main(["experiment", "verify", str(eid), "--db", db_url, "--full"]) == 0
    assert "whole log" in capsys.readouterr().out
    _corrupt_snapshot(study)
    assert main(["experiment", "verify", "--db", db_url]) == 1  # a wrong snapshot was found (and replaced)
    assert f"wrong snapshots or checkpoints replaced in [{eid}]" in capsys.readouterr().out
    assert main(["experiment", "verify", "--db", db_url]) == 0
    assert main(["experiment", "verify", "99", "--db", db_url]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_server_logs_what_it_verified_and_advances_checkpoints_in_the_background(db_url, caplog):
    import logging
    import time

    from fastapi.testclient import TestClient

    from purebandits.service.app import create_app
    from purebandits.service.settings import Settings

    study = open_study(db_url, snapshot_every=4)
    eid, _ = study.create_experiment(spec(algorithm="lil_ucb"))
    traffic(study, eid, 6, np.random.default_rng(7), Clock())
    settings = Settings(database_url=db_url, snapshot_every=4, verify_interval_seconds=0.05,
                        ask_rate_per_second=0, participant_rate_per_second=0)
    with caplog.at_level(logging.INFO, logger="purebandits.service"), TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 60
        while "verifying" in client.get("/healthz").json():  # the verification runs once the server serves
            assert time.monotonic() < deadline, "the startup verification did not finish"
            time.sleep(0.05)
        assert "verified 1 experiment(s), 1 learner(s)" in caplog.text
        assert "12 event(s) replayed (1 learner(s) from their verified checkpoint, 0 from the start" in caplog.text
        pid = client.post("/api/participants").json()["participant_id"]
        for _ in range(5):
            q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            client.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
        head = version(study, eid)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the background task catches up with the head
            with study.engine.connect() as conn:
                if read_checkpoint(conn, eid, 0).version == head:
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("the checkpoint did not reach the head")
    assert open_study(db_url).verify(eid)["replayed"] == 0
