"""The protocol (Study) over SQLite and PostgreSQL, without HTTP."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import sqlalchemy as sa
import svc_migrated
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from study_support import Clock, open_study

from purebandits.instances.real import _data_path, caption_contest
from purebandits.registry import all_learners
from purebandits.service.errors import BadRequest, Conflict, Forbidden, Gone, NotFound, Unauthorized
from purebandits.service.models import experiments, metadata, snapshots
from purebandits.service.study import DEFAULT_LABELS, summary_rows

#: conftest's per-test SQLite file, already migrated (a copy: see :mod:`svc_migrated`)
sqlite_url = svc_migrated.sqlite_url


def spec(n=6, **kw):
    out = {"name": "t", "items": [{"id": f"i{i}", "text": f"item {i}"} for i in range(n)], "seed": 3}
    out.update(kw)
    return out


def test_migrations_match_models(db_url):
    study = open_study(db_url)
    with study.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []


def test_ask_answer_replay_and_idempotence(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock, snapshot_every=7)
    # 4 participants x 8 items: with repeats="never" they would run out of unseen items
    eid, token = study.create_experiment(spec(n=8, repeats="not_consecutive"))
    study.check_owner(eid, token)
    with pytest.raises(Unauthorized):
        study.check_owner(eid, token + "x")
    pids = [study.new_participant() for _ in range(4)]
    # four concurrent participants: pending pulls spread them over items (lil'UCB's eps = 0
    # index stays infinite up to 2 pulls, so each item is sent to at most two of them)
    first = [study.next_query(eid, p) for p in pids]
    assert all(q["state"] == "ok" for q in first)
    sent = [q["item"]["id"] for q in first]
    assert max(sent.count(i) for i in sent) <= 2 and len(set(sent)) >= 2
    rng = np.random.default_rng(0)
    acked = 0
    for _ in range(30):
        for p, q in zip(pids, first, strict=True):
            label = ["unfunny", "somewhat funny", "funny"][int(rng.integers(3))]
            r = study.answer(q["query_id"], p, label)
            assert r == {"query_id": q["query_id"], "status": "answered", "label": label,
                         "reward": {"unfunny": 0.0, "somewhat funny": 0.5, "funny": 1.0}[label]}
            assert study.answer(q["query_id"], p, label) == r  # idempotent, counted once
            acked += 1
        first = [study.next_query(eid, p) for p in pids]
        clock.ms += 10
    res = study.results(eid)
    assert res["n_answers"] == acked == res["n_told"]
    assert sum(row["count"] for row in res["ranking"]) == acked
    assert res["n_pending"] == 4
    live = study.learner_state(eid)
    assert json.loads(study.replay(eid).state_json()) == live["state"]
    # a second Study (another process) rebuilds the same state from snapshot + log
    other = open_study(db_url, clock=clock)
    assert other.learner_state(eid) == live
    assert other.verify(eid)["snapshot_matches"] is True
    q = first[0]
    with pytest.raises(Forbidden):
        study.answer(q["query_id"], pids[1], "funny")
    with pytest.raises(BadRequest, match="not in this experiment's label set"):
        study.answer(q["query_id"], pids[0], "hilarious")
    with pytest.raises(NotFound):
        study.answer("nope", pids[0], "funny")
    study.answer(q["query_id"], pids[0], "funny")
    with pytest.raises(Conflict):
        study.answer(q["query_id"], pids[0], "unfunny")
    with pytest.raises(Forbidden):
        study.next_query(eid, "not-a-participant")


def test_expiry_cancels_in_learner(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock, query_expiry_seconds=10)
    eid, _ = study.create_experiment(spec(n=3))
    p = study.new_participant()
    q = study.next_query(eid, p)
    arm = [it["id"] for it in study.meta(eid).items].index(q["item"]["id"])
    assert study.learner_state(eid)["state"]["state"]["pending_"]["__ndarray__"][arm] == 1
    clock.ms += 10_001
    with pytest.raises(Gone):
        study.answer(q["query_id"], p, "funny")
    state = study.learner_state(eid)["state"]["state"]
    assert state["pending_"]["__ndarray__"] == [0, 0, 0]
    assert state["t_"] == 0
    with pytest.raises(Gone):  # still expired the second time
        study.answer(q["query_id"], p, "funny")
    # the periodic sweep expires abandoned queries too
    q2 = study.next_query(eid, p)
    assert q2["state"] == "ok"
    clock.ms += 20_000
    assert study.expire_stale() == 1
    assert study.results(eid)["n_pending"] == 0
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]


def test_pause_resume_stop(db_url):
    study = open_study(db_url)
    eid, _ = study.create_experiment(spec(n=3))
    p = study.new_participant()
    q = study.next_query(eid, p)
    study.set_status(eid, "paused")
    assert study.next_query(eid, p)["state"] == "paused"
    study.answer(q["query_id"], p, "funny")  # answers to issued queries still count
    study.set_status(eid, "active")
    assert study.next_query(eid, p)["state"] == "ok"
    study.set_status(eid, "stopped")
    assert study.next_query(eid, p)["state"] == "stopped"
    with pytest.raises(Conflict):
        study.set_status(eid, "active")
    assert study.results(eid)["n_answers"] == 1


@pytest.mark.parametrize("bad, message", [
    ({"algorithm": "no_such_algo"}, "unknown algorithm 'no_such_algo'"),
    ({"params": {"delta": 2.0}}, "delta must be in"),
    ({"params": {"bogus": 1}}, "unknown parameter"),
    ({"items": []}, "item list is empty"),
    ({"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "duplicate item id 'a'"),
    ({"labels": [{"name": "bad"}, {"name": "good", "reward": 1}]}, "label 'bad' has no reward"),
    ({"labels": [{"name": "x", "reward": 0}, {"name": "x", "reward": 1}]}, "duplicate label 'x'"),
    ({"items": [{"text": ""}, {"text": "b"}]}, "item 0: 'text' must be a non-empty string"),
    ({"items_csv": "foo,bar\n1,2\n"}, "needs a 'text'"),
])
def test_bad_input_creates_nothing(sqlite_url, bad, message):
    study = open_study(sqlite_url)
    s = spec(n=3)
    s.update(bad)
    if "items_csv" in bad:
        del s["items"]
    with pytest.raises(BadRequest, match=message):
        study.create_experiment(s)
    with study.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(experiments)).scalar_one() == 0


def test_items_from_csv(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items_csv": "id,text,image_url\na,first,https://x/a.png\nb,second,\n"})
    its = study.meta(eid).items  # in the seeded order the learners see them, not the file's
    assert sorted((i["id"], i["text"], i["image_url"]) for i in its) == [("a", "first", "https://x/a.png"),
                                                                         ("b", "second", None)]


def test_learners_see_items_in_a_seeded_order_not_the_files(sqlite_url):
    study = open_study(sqlite_url)
    file_order = [f"i{j}" for j in range(50)]
    eid, _ = study.create_experiment({"items": file_order, "seed": 3})
    again, _ = study.create_experiment({"items": file_order, "seed": 3})
    ids = [it["text"] for it in study.meta(eid).items]
    assert sorted(ids) == sorted(file_order) and ids != file_order
    assert ids == [it["text"] for it in study.meta(again).items]  # the seed fixes it


def _learner_cases():
    for name, cls in all_learners().items():
        yield pytest.param(name, dict(getattr(cls, "test_params", {}) or {}), id=name)


@pytest.mark.parametrize("name, params", list(_learner_cases()))
def test_every_registered_learner_is_served(sqlite_url, name, params):
    """Any learner of the registry runs through the service and its state equals the replay."""
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, query_expiry_seconds=5, snapshot_every=13)
    cls = all_learners()[name]
    n = 6
    if cls.tags.get("top_k"):
        params.setdefault("k", 2)
    eid, _ = study.create_experiment(spec(n=n, algorithm=name, params=params))
    pids = [study.new_participant() for _ in range(3)]
    rng = np.random.default_rng(1)
    means = np.linspace(0.1, 0.9, n)
    labels = ["unfunny", "funny"]
    for step in range(120):
        p = pids[step % 3]
        q = study.next_query(eid, p)
        if q["state"] != "ok":
            clock.ms += 6000  # let abandoned queries expire
            continue
        arm = int(q["item"]["id"][1:])
        if rng.random() < 0.1:
            continue  # abandoned: expires later
        study.answer(q["query_id"], p, labels[int(rng.random() < means[arm])])
        clock.ms += 100
    res = study.results(eid)
    assert len(res["recommendation"]) == study.meta(eid).k
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]
    assert open_study(sqlite_url, clock=clock).verify(eid)["snapshot_matches"] is True


def test_corrupt_snapshot_is_detected_and_replaced(sqlite_url):
    study = open_study(sqlite_url, snapshot_every=1)
    eid, _ = study.create_experiment(spec(n=4))
    p = study.new_participant()
    for _ in range(5):
        study.answer(study.next_query(eid, p)["query_id"], p, "funny")
    good = study.learner_state(eid)
    with study.engine.begin() as conn:
        state = json.loads(conn.execute(sa.select(snapshots.c.state)).scalar_one())
        state["state"]["sums_"]["__ndarray__"][0] += 7.0
        conn.execute(snapshots.update().values(state=json.dumps(state)))
    fresh = open_study(sqlite_url)
    assert fresh.verify(eid)["snapshot_matches"] is False
    assert fresh.learner_state(eid) == good


def test_summary_matches_public_caption_contest_file():
    """Given contest 559's vote counts, the summary export reproduces the public file."""
    cc = caption_contest("559")
    counts = cc.votes  # columns unfunny, somewhat_funny, funny
    items = [{"id": f"c{i}", "text": text} for i, text in enumerate(cc.captions)]
    rows = summary_rows(counts, DEFAULT_LABELS, items, "559")
    with open(_data_path("caption_contest", "559_summary_RandomSamping.csv"), newline="", encoding="utf-8") as fh:
        public = list(csv.reader(fh))
    # the public columns, with the item id after the rank
    assert rows[0] == [public[0][0], "item_id", *public[0][1:]]
    by_caption = {r[8].strip(): r for r in public[1:]}
    for row in rows[1:]:
        pub = [row[0], *row[2:]]  # the row without its item id
        ref = by_caption[pub[8]]
        assert row[1] == items[cc.captions.index(pub[8])]["id"]
        assert [str(x) for x in pub[1:5]] == ref[1:5]
        assert float(pub[5]) == pytest.approx(float(ref[5]), rel=1e-12)
        assert float(pub[6]) == pytest.approx(float(ref[6]), rel=1e-9)
    # ranks follow the score, as in the public file
    scores = [float(r[6]) for r in rows[1:]]
    assert scores == sorted(scores, reverse=True)
