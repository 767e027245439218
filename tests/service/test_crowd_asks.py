"""Asks among the items a participant may rate, and several items per request (``n``), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from study_support import Clock, open_study

from purebandits.service.app import create_app
from purebandits.service.crowd import excluded_arms
from purebandits.service.eventlog import decode_excluded, encode_excluded
from purebandits.service.models import events
from purebandits.service.settings import Settings

LABELS = ["unfunny", "somewhat funny", "funny"]


def items(n: int) -> list[dict]:
    return [{"id": f"i{j}", "text": f"caption {j}"} for j in range(n)]


def test_excluded_arms_by_policy():
    assert excluded_arms("never", 5, {1}, {3}, 3) == {1, 3}
    assert excluded_arms("never", 3, {0, 1, 2}, set(), 2) == {2}  # rated everything: anything but the last
    assert excluded_arms("never", 3, {0, 1}, {2}, 2) == {2}  # ... and nothing they hold a query for
    assert excluded_arms("not_consecutive", 5, {1}, {3, 4}, 3) == {3, 4}
    assert excluded_arms("never", 5, set(), set(), -1) == set()  # nothing yet: the learner's unrestricted ask


@given(st.integers(2, 9000).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1))))
@settings(max_examples=60, deadline=None)
def test_excluded_items_round_trip_through_the_log(case):
    """A list while short, a compressed bitmap beyond: a participant who has rated thousands of items costs an
    event about n_arms / 6 characters, not their whole history."""
    n, excluded = case
    stored = encode_excluded(sorted(excluded), n)
    assert np.flatnonzero(~decode_excluded(stored, n)).tolist() == sorted(excluded)
    assert len(stored) <= max(n // 8 + 16, 4 * ((n // 8 + 1) * 1.01 + 20) / 3 + 8)


def test_a_request_never_holds_an_item_twice(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(4), "seed": 2})
    p = study.new_participant()
    qs = study.next_query(eid, p, n=10)["queries"]
    assert sorted(q["item"]["id"] for q in qs) == ["i0", "i1", "i2", "i3"]  # 4 items: 4 queries, not 10
    for q in qs:
        study.answer(q["query_id"], p, "funny")
    again = study.next_query(eid, p, n=10)["queries"]  # all rated: repeats, distinct, never twice in a row
    ids = [q["item"]["id"] for q in again]
    assert len(ids) == len(set(ids)) == 4 and ids[0] != qs[-1]["item"]["id"]


def test_a_participant_rates_every_item_once_with_the_default_learner(db_url):
    """The default learner (KL-RandLUCB) wants its leader and challenger again and again; the participant is
    served its best allowed item instead, every item once, never "exhausted"."""
    clock = Clock()
    study = open_study(db_url, clock=clock, snapshot_every=7)
    eid, _ = study.create_experiment({"items": items(20), "seed": 5})
    pids = [study.new_participant() for _ in range(3)]
    shown: dict[str, list[str]] = {p: [] for p in pids}
    for step in range(60):
        p = pids[step % 3]
        q = study.next_query(eid, p)
        assert q["state"] == "ok", q
        shown[p].append(q["item"]["id"])
        study.answer(q["query_id"], p, "funny" if q["item"]["id"] == "i0" else LABELS[step % 2])
        clock.ms += 10
    for seq in shown.values():
        assert sorted(seq) == sorted(f"i{j}" for j in range(20))  # every item once
    q = study.next_query(eid, pids[0])  # everything rated: repeats again, never the item rated last
    assert q["state"] == "ok" and q["item"]["id"] != shown[pids[0]][-1]
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]
    assert open_study(db_url, clock=clock).verify(eid)["snapshot_matches"] is not False


def test_several_items_per_ask_pending_first_then_new(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock)
    eid, _ = study.create_experiment({"items": items(12), "seed": 6})
    p = study.new_participant()
    first = study.next_query(eid, p, n=5)
    assert first["state"] == "ok" and first["n_answered"] == 0
    qs = first["queries"]
    assert len(qs) == 5 and len({q["item"]["id"] for q in qs}) == 5 and len({q["query_id"] for q in qs}) == 5
    assert all(q["labels"] == LABELS and q["expires_at"] > 0 for q in qs)
    again = study.next_query(eid, p, n=5)  # a retried request: the same pending queries, none new
    assert [q["query_id"] for q in again["queries"]] == [q["query_id"] for q in qs]
    for q in qs[:2]:
        study.answer(q["query_id"], p, "funny")
    more = study.next_query(eid, p, n=5)
    assert [q["query_id"] for q in more["queries"][:3]] == [q["query_id"] for q in qs[2:]]
    new_items = {q["item"]["id"] for q in more["queries"][3:]}
    assert len(new_items) == 2 and not new_items & {q["item"]["id"] for q in qs}
    single = study.next_query(eid, p)  # without n: the single-query form, the oldest pending query
    assert single["query_id"] == qs[2]["query_id"] and "queries" not in single
    with study.engine.connect() as conn:
        pending = conn.execute(sa.text("SELECT count(*) FROM queries WHERE status = 'pending'")).scalar_one()
    assert pending == 5
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]


def test_n_is_capped_by_the_answers_per_participant(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(10), "seed": 7, "answers_per_participant": 3})
    p = study.new_participant()
    qs = study.next_query(eid, p, n=5)["queries"]
    assert len(qs) == 3
    for q in qs:
        study.answer(q["query_id"], p, "unfunny")
    done = study.next_query(eid, p, n=5)
    assert done["state"] == "complete" and done["completion_code"]


def test_restricted_asks_are_logged_and_replay_after_expiry(sqlite_url):
    """Expired queries give their items back to the participant; every ask's excluded set is logged and replays."""
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, query_expiry_seconds=10, snapshot_every=5)
    eid, _ = study.create_experiment({"items": items(6), "seed": 8})
    p = study.new_participant()
    qs = study.next_query(eid, p, n=3)["queries"]
    study.answer(qs[0]["query_id"], p, "funny")
    clock.ms += 11_000  # the other two expire unanswered
    later = study.next_query(eid, p, n=5)["queries"]
    ids = [q["item"]["id"] for q in later]
    assert qs[0]["item"]["id"] not in ids and len(set(ids)) == 5  # all but the one rated, expired ones included
    with study.engine.connect() as conn:
        rows = conn.execute(sa.select(events.c.kind, events.c.excluded).order_by(events.c.seq)).all()
    asks = [r.excluded for r in rows if r.kind == "ask"]
    assert asks[0] is None and asks[1] is not None and len(asks) == 8
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]
    assert open_study(sqlite_url, clock=clock).verify(eid)["snapshot_matches"] is not False


@pytest.mark.parametrize("n", [0, 11, "5", True, 2.5, None])
def test_bad_n_is_refused_over_http(sqlite_url, n):
    with TestClient(create_app(Settings(database_url=sqlite_url))) as c:
        eid = c.post("/api/experiments", json={"items": items(4)}).json()["id"]
        pid = c.post("/api/participants").json()["participant_id"]
        r = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid, "n": n})
        if n is None:  # null is the single-query form
            assert r.status_code == 200 and r.json()["state"] == "ok" and "queries" not in r.json()
        else:
            assert r.status_code == 422, r.text


def test_n_over_http_fast_path_and_fastapi_agree(sqlite_url):
    """The fast path (a well-formed body) and FastAPI (the same body with its keys in another order and spaces,
    which the fast path also takes; and extra whitespace) render the same multi-item response."""
    with TestClient(create_app(Settings(database_url=sqlite_url))) as c:
        eid = c.post("/api/experiments", json={"items": items(8)}).json()["id"]
        pid = c.post("/api/participants").json()["participant_id"]
        a = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid, "n": 3})
        assert a.status_code == 200
        body = a.json()
        assert body["state"] == "ok" and len(body["queries"]) == 3
        assert list(body) == ["state", "queries", "n_answered"]
        assert list(body["queries"][0]) == ["state", "query_id", "experiment_id", "item", "labels", "expires_at",
                                            "n_answered"]
        # through FastAPI (the fast path hands on a body with a key it does not know)
        b = c.post(f"/api/experiments/{eid}/queries", content=json.dumps({"participant_id": pid, "n": 3}),
                   headers={"Content-Type": "application/json; charset=utf-8"})
        assert b.json() == body


def test_release_gives_a_pending_query_back_to_the_learner(db_url):
    """A page that closes gives back the item it fetched ahead: the learner's pull is cancelled at once (not at
    expiry), a late answer is refused as for an expired query, and a release is idempotent and owner-only."""
    from purebandits.service.errors import Forbidden, Gone

    study = open_study(db_url)
    eid, _ = study.create_experiment({"items": items(6), "seed": 9})
    p, other = study.new_participant(), study.new_participant()
    qs = study.next_query(eid, p, n=2)["queries"]
    study.answer(qs[0]["query_id"], p, "funny")
    pending = study.learner_state(eid)["state"]["state"]["pending_"]["__ndarray__"]
    assert sum(pending) == 1
    with pytest.raises(Forbidden):
        study.release(qs[1]["query_id"], other)
    assert study.release(qs[1]["query_id"], p) == {"query_id": qs[1]["query_id"], "status": "released"}
    assert study.release(qs[1]["query_id"], p)["status"] == "released"  # again: nothing more happens
    assert study.release(qs[0]["query_id"], p)["status"] == "answered"
    assert sum(study.learner_state(eid)["state"]["state"]["pending_"]["__ndarray__"]) == 0
    with pytest.raises(Gone):
        study.answer(qs[1]["query_id"], p, "funny")
    nxt = study.next_query(eid, p)  # the released item may come back to them: it was not rated
    assert nxt["state"] == "ok"
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]


def test_release_over_http(sqlite_url):
    with TestClient(create_app(Settings(database_url=sqlite_url))) as c:
        eid = c.post("/api/experiments", json={"items": items(4)}).json()["id"]
        pid = c.post("/api/participants").json()["participant_id"]
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        r = c.post(f"/api/queries/{q['query_id']}/release", json={"participant_id": pid})
        assert r.status_code == 200 and r.json() == {"query_id": q["query_id"], "status": "released"}
        assert c.post(f"/api/queries/{q['query_id']}/release", json={"participant_id": "nobody"}).status_code == 403
        assert c.post("/api/queries/nope/release", json={"participant_id": pid}).status_code == 404
        assert c.post(f"/api/queries/{q['query_id']}/answer",
                      json={"participant_id": pid, "label": "funny"}).status_code == 410
