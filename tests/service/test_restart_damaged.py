"""A restart with a damaged snapshot (and, separately, a damaged verified checkpoint too) of one big experiment:
``/healthz`` and the other experiments answer at once, the damaged one is served from an exact state (its
verified checkpoint plus the log, or a whole-log replay when the checkpoint is damaged too), and nothing
acknowledged is lost.

The big experiment's log is written by the restart benchmark's builder (``benchmarks/restart.py``: the log the
service would have written, fast). "At once" is measured in events, not seconds, so it holds on a loaded machine:
when /healthz (and the small experiment) first answer, the server has replayed less than a third of the big
log (the previous code replayed all of it first). The time a whole-log replay takes here only sizes the
generous deadlines.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import re
import sqlite3
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from study_support import open_study

from purebandits.service.eventlog import apply_log
from purebandits.service.models import checkpoints, learners, queries, snapshots

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "restart.py"
ITEMS, ANSWERS = 1_500, 50_000  # 100,000 events
ADMIN = "restart-admin-token"


def _build(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location("restart_benchmark", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(path, ITEMS, ANSWERS, seed=11, lag=400, per_participant=10)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(database file, big experiment id, small experiment id, seconds that size a whole-log replay of the big
    one, (the log's head, the learner that wrote the log, as it was at the head): what :func:`_replayed_state`
    carries on from)."""
    path = tmp_path_factory.mktemp("restart") / "built.sqlite"
    info = _build(path)
    url = f"sqlite:///{path}"
    study = open_study(url)
    # The reference for "the state a whole-log replay gives": the state of the learner that wrote the log, at
    # its head, which the builder stores as the snapshot (the head is a multiple of snapshot_every). A replay
    # of the log must give exactly that state (the service's startup check compares the two); rather than a
    # fourth whole-log replay here (~2 s of a core), the tests compare every replay the service makes with the
    # writer's own state, a reference independent of the replay code (test_a_request_never_gets_an_unverified_
    # snapshot checks the service's whole-log replay equals it). The build takes about as long as that replay
    # (the learner's ask and tell dominate both), so its seconds size the deadlines as the replay's did.
    big = info["experiment"]
    head = _head(url, big)
    assert info["snapshot_version"] == info["events"] == head == ANSWERS * 2, info
    with study.engine.connect() as conn:
        text = conn.execute(sa.select(snapshots.c.state).where(snapshots.c.experiment_id == big)).scalar_one()
    meta = study.meta(big)
    whole = meta.learners[0].fresh(meta.n_arms).load_state_dict(json.loads(text))
    assert whole.state_json() == text and whole.n_pulls == ANSWERS
    small, _ = study.create_experiment({"name": "small", "items": [{"id": f"s{i}", "text": f"small {i}"}
                                                                    for i in range(6)], "seed": 3})
    pid = study.new_participant()
    for _ in range(4):
        q = study.next_query(small, pid)
        study.answer(q["query_id"], pid, "funny")
    study.verify(small)  # its checkpoint at the head, as the running server's background task leaves it
    study.engine.dispose()
    return path, big, small, info["build_seconds"], (head, whole)


def _head(url: str, eid: int) -> int:
    """The version of ``eid``'s (first) learner: the seq of the last event of its log."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(learners.c.version).where(learners.c.experiment_id == eid,
                                                                        learners.c.idx == 0)).scalar_one())
    finally:
        engine.dispose()


def _replayed_state(study, built, upto: int | None = None) -> dict:
    """``json.loads(study.replay(big, upto).state_json())`` on a copy of the built file (``upto``: its head when
    None), without replaying the 100,000 events (~2 s of a core each time): the fixture's learner at the built
    file's head (the state of the learner that wrote its log, which a whole-log replay must give), whose log every
    copy holds event for event, carried on over the events after it by :func:`apply_log` (the step every replay
    of the service takes, in chunks of ``REPLAY_CHUNK`` events)."""
    big, (head, whole) = built[1], built[4]
    if upto is None:
        upto = _head(str(study.engine.url), big)
    if upto < head:
        return json.loads(study.replay(big, upto=upto).state_json())
    learner = copy.deepcopy(whole)
    meta = study.meta(big)
    with study.engine.connect() as conn:
        apply_log(conn, big, 0, learner, head, upto, lambda: meta.learners[0].fresh(meta.n_arms))
    return json.loads(learner.state_json())


def _copy(built, tmp_path: Path) -> str:
    """A copy of the built database through SQLite's backup API: every committed transaction, including those still
    in the write-ahead log (a plain file copy missed the small experiment once, its rows not yet checkpointed)."""
    dst = tmp_path / "service.sqlite"
    with contextlib.closing(sqlite3.connect(built[0])) as src, contextlib.closing(sqlite3.connect(dst)) as out:
        src.backup(out)
    return f"sqlite:///{dst}"


def _bump_count(text: str) -> str:
    state = json.loads(text)
    state["state"]["counts_"]["__ndarray__"][0] += 1
    return json.dumps(state)


def _damage(url: str, eid: int, checkpoint: bool) -> None:
    """One count wrong in the latest snapshot of ``eid`` (and in its verified checkpoint when ``checkpoint``: its
    SHA-256 no longer matches)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        where = (snapshots.c.experiment_id == eid)
        text = conn.execute(sa.select(snapshots.c.state).where(where)).scalar_one()
        conn.execute(snapshots.update().where(where).values(state=_bump_count(text)))
        if checkpoint:
            where = (checkpoints.c.experiment_id == eid)
            text = conn.execute(sa.select(checkpoints.c.state).where(where)).scalar_one()
            conn.execute(checkpoints.update().where(where).values(state=_bump_count(text)))
    engine.dispose()


def _ask(client: httpx.Client, base: str, eid: int, deadline: float) -> dict:
    """A new participant's first query of ``eid``, retrying 503s (which must carry ``Retry-After``) until
    ``deadline``."""
    pid = client.post(f"{base}/api/participants").json()["participant_id"]
    while True:
        r = client.post(f"{base}/api/experiments/{eid}/queries", json={"participant_id": pid})
        if r.status_code == 200:
            q = r.json()
            assert q["state"] == "ok", q
            return {"pid": pid, **q}
        assert r.status_code == 503 and "Retry-After" in r.headers, (r.status_code, r.text)
        assert time.monotonic() < deadline, f"experiment {eid} was not served in time"
        # sooner than Retry-After asks (1 s while the verification replays it): the events replayed when it is
        # served are then those of its verification, not of the settling replay that runs on meanwhile
        time.sleep(0.05)


def _replayed_so_far(body: dict, log: str) -> int:
    """Events the server had replayed when it answered ``body`` (a /healthz answer): its verification progress,
    or, once none is left, every event its startup summary says it replayed."""
    if "verifying" in body:
        return int(body["verifying"]["events_done"])
    m = re.search(r"(\d+) event\(s\) replayed", log)
    assert m, "no startup summary in the server log"
    return int(m.group(1))


def _restart(server_cls, url: str, tmp_path: Path, big: int, small: int, full_s: float) -> dict:
    """Start a server on ``url``; the events it had replayed when /healthz first answered and when the small
    experiment's first query was served, then the big one's first query; answers one query of each (acknowledged),
    waits for the verification to end and returns the big experiment's state as the server has it."""
    srv = server_cls(url, "--log-level", "info", env={"PUREBANDITS_ADMIN_TOKEN": ADMIN}, log_dir=tmp_path)
    srv.start(timeout=120 + 4 * full_s)
    log_path = next(tmp_path.glob("server-*.log"))
    out = {"server": srv}
    deadline = time.monotonic() + 120 + 10 * full_s
    try:
        with httpx.Client(timeout=60) as client:
            out["at_healthz"] = _replayed_so_far(client.get(f"{srv.url}/healthz").json(), log_path.read_text())
            q = _ask(client, srv.url, small, deadline)
            out["at_small"] = _replayed_so_far(client.get(f"{srv.url}/healthz").json(), log_path.read_text())
            qb = _ask(client, srv.url, big, deadline)
            out["at_big"] = _replayed_so_far(client.get(f"{srv.url}/healthz").json(), log_path.read_text())
            answered = []
            for one in (q, qb):
                r = client.post(f"{srv.url}/api/queries/{one['query_id']}/answer",
                                json={"participant_id": one["pid"], "label": "funny"})
                assert r.status_code == 200, r.text
                answered.append(one["query_id"])
            out["answered"] = answered
            # the rest of the verification (the whole-log replay that settles the snapshot) ends in the background
            while "verifying" in client.get(f"{srv.url}/healthz").json():
                assert time.monotonic() < deadline, "the startup verification did not finish"
                time.sleep(0.2)
            out["state"] = client.get(f"{srv.url}/api/experiments/{big}/state",
                                      headers={"Authorization": f"Bearer {ADMIN}"}).json()
    finally:
        srv.stop()
    out["log"] = log_path.read_text()
    return out


def _check_exact(url: str, built, run: dict) -> None:
    """The big experiment's state equals a whole-log replay; every acknowledged answer is in the database."""
    study = open_study(url)
    try:
        replayed = _replayed_state(study, built, upto=run["state"]["version"])
        assert run["state"]["state"] == replayed
        with study.engine.connect() as conn:
            status = dict(conn.execute(sa.select(queries.c.id, queries.c.status)
                                       .where(queries.c.id.in_(run["answered"]))).all())
        assert status == {qid: "answered" for qid in run["answered"]}
    finally:
        study.engine.dispose()


@pytest.mark.parametrize("checkpoint_too", [False, True], ids=["snapshot", "snapshot_and_checkpoint"])
def test_restart_with_a_damaged_snapshot_serves_at_once(built, server_cls, tmp_path, checkpoint_too):
    _path, big, small, full_s, _whole = built
    url = _copy(built, tmp_path)
    _damage(url, big, checkpoint_too)
    whole = ANSWERS * 2  # the big experiment's log
    run = _restart(server_cls, url, tmp_path, big, small, full_s)
    # /healthz and the small experiment do not wait for the big one's whole-log replay (the previous code did it
    # first): when they answered, the server had replayed less than a third of that log
    assert run["at_healthz"] < whole / 3, run
    assert run["at_small"] < whole / 3, run
    if not checkpoint_too:
        # served from its verified checkpoint and the log (400 events), before the whole-log replay
        assert run["at_big"] < whole / 3, run
        assert "settling it by a whole-log replay in the background" in run["log"]
        assert "agrees with the verified checkpoint" in run["log"]
    else:
        # nothing exact to serve it from but a whole-log replay: it waited for it (503 with Retry-After)
        assert "is corrupt" in run["log"] and run["at_big"] >= whole
    # the damaged experiment's state is the log's, and nothing acknowledged was lost
    _check_exact(url, built, run)
    study = open_study(url)
    try:
        with study.engine.connect() as conn:
            snap = conn.execute(sa.select(snapshots.c.version, snapshots.c.state)
                                .where(snapshots.c.experiment_id == big)).one()
        # the wrong snapshot was replaced by a right one
        assert json.loads(snap.state) == _replayed_state(study, built, upto=snap.version)
    finally:
        study.engine.dispose()


@pytest.mark.slow  # server state rebuilt from damaged snapshots
def test_a_request_never_gets_an_unverified_snapshot(built, tmp_path):
    """In process: between :meth:`begin_verification` and the verification, a request for the damaged experiment
    is served from the verified checkpoint and the log (its asks are the log's), never from the snapshot; with
    the checkpoint damaged too, it gets 503 until the whole-log replay is done."""
    from purebandits.service.errors import Unavailable

    _path, big, small, _full_s, _whole = built
    url = _copy(built, tmp_path)
    _damage(url, big, checkpoint=False)
    study = open_study(url)
    study.begin_verification()
    assert study.verification_progress()["experiments_left"] == 2
    state = study.learner_state(big)  # loaded from the checkpoint: the replay's state, not the damaged snapshot
    assert state["state"] == _replayed_state(study, built)
    report = study.verify_pending()
    assert report[big]["snapshot_matches"] is False and report[big]["learners"][0]["settle"]
    assert not report[big]["learners"][0]["full_replay"]
    assert study.verification_progress()["settling"] == 1
    assert study.settle_pending() == {"settled": 1, "agreed": 1, "switched": 0}
    assert study.verification_progress() is None
    study.engine.dispose()

    again = tmp_path / "again"
    again.mkdir()
    url = _copy(built, again)
    _damage(url, big, checkpoint=True)
    study = open_study(url)
    study.begin_verification()
    with pytest.raises(Unavailable):
        study.learner_state(big)
    assert study.learner_state(small)["version"] > 0  # the small one: from its checkpoint at once
    report = study.verify_pending()
    assert report[big]["learners"][0]["full_replay"] and report[big]["learners"][0]["checkpoint"] == "corrupt"
    assert study.learner_state(big)["state"] == _replayed_state(study, built)
    study.engine.dispose()


@pytest.mark.slow  # server state rebuilt from damaged snapshots
def test_a_settling_replay_that_disagrees_switches_to_it(built, tmp_path, caplog):
    """A checkpoint whose state is wrong but whose digest matches (written wrong): the learner is served from it,
    the settling whole-log replay disagrees, logs an error and switches; the queries handed out meanwhile are kept
    (replayed as the log says) and their answers count."""
    from purebandits.service.eventlog import state_digest

    _path, big, _small, _full_s, _whole = built
    url = _copy(built, tmp_path)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        text = _bump_count(conn.execute(sa.select(checkpoints.c.state).where(checkpoints.c.experiment_id == big))
                           .scalar_one())
        conn.execute(checkpoints.update().where(checkpoints.c.experiment_id == big)
                     .values(state=text, sha256=state_digest(text)))
    engine.dispose()
    study = open_study(url)
    study.begin_verification()
    report = study.verify_pending()
    assert report[big]["learners"][0]["settle"]  # the (right) snapshot differs from the (wrong) checkpoint's replay
    rng = np.random.default_rng(0)
    handed = []
    for _ in range(5):  # served from the wrong state meanwhile
        pid = study.new_participant()
        q = study.next_query(big, pid)
        study.answer(q["query_id"], pid, ["unfunny", "funny"][int(rng.integers(2))])
        handed.append(q["item"]["id"])
    counts_before = np.asarray(study.learner_state(big)["state"]["state"]["counts_"]["__ndarray__"])
    assert study.settle_pending()["switched"] == 1
    assert "disagrees with the verified checkpoint" in caplog.text
    after = study.learner_state(big)
    counts = np.asarray(after["state"]["state"]["counts_"]["__ndarray__"])
    # the full replay's counts: the wrong count is gone, the five answers handed out meanwhile are in
    assert counts.sum() == counts_before.sum() - 1 and counts[0] == counts_before[0] - 1
    study.engine.dispose()
