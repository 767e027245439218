"""Ratings then comparisons (issue 39, item 4), over SQLite and PostgreSQL: a staged experiment rates every item
until its learner has found the top m (or at a ratings budget), then compares those m by itself through the Borda
reduction, under one experiment id; the switch survives a restart and replays from the log; bad specs are 422."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import svc_migrated
from fastapi.testclient import TestClient
from study_support import LiveApp, open_study

from purebandits.pairwise import bradley_terry_preferences
from purebandits.service.app import create_app
from purebandits.service.client import ServiceClient
from purebandits.service.settings import Settings

#: conftest's per-test SQLite file and per-test database, the SQLite file already migrated (a copy: see
#: :mod:`svc_migrated`)
sqlite_url, db_url = svc_migrated.sqlite_url, svc_migrated.db_url

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(6)]
LABELS = ["unfunny", "somewhat funny", "funny"]
#: each item's rating distribution over the default labels: c0 > c1 > c2 by mean, far above c3..c5
RATINGS = np.array([[0.0, 0.1, 0.9], [0.1, 0.3, 0.6], [0.2, 0.4, 0.4],
                    [0.9, 0.1, 0.0], [0.9, 0.1, 0.0], [0.95, 0.05, 0.0]])
#: comparisons: a Bradley-Terry matrix in the same order (c0 beats c1 with 0.82, c2 with 0.95): Borda winner c0
P = bradley_terry_preferences([3.0, 1.5, 0.0, -2.0, -2.0, -2.5])
INDEX = {item["id"]: i for i, item in enumerate(ITEMS)}
TOP = {"c0", "c1", "c2"}


def spec(**kw: Any) -> dict[str, Any]:
    return {"name": "hybrid", "items": ITEMS, "query": "rating_then_pairwise", "top_m": 3, "seed": 7, **kw}


def settings_for(url: str) -> Settings:
    return Settings(database_url=url, ask_rate_per_second=0, participant_rate_per_second=0, create_rate_per_second=0)


def respond(q: dict[str, Any], rng: np.random.Generator) -> str:
    """A simulated participant: a rating drawn from the item's distribution, or the side that wins under P."""
    if "items" in q:
        left, right = (INDEX[item["id"]] for item in q["items"])
        return "left" if rng.random() < P[left, right] else "right"
    return LABELS[rng.choice(3, p=RATINGS[INDEX[q["item"]["id"]]])]


def run(api: ServiceClient, eid: int, rng: np.random.Generator, until: str = "done",
        limit: int = 6000) -> dict[str, int]:
    """Sessions of 5 answers until the experiment says ``until`` (or stage 2 starts, with ``until="pairwise"``);
    returns how many ratings and comparisons were answered."""
    seen = {"rating": 0, "pairwise": 0}
    while True:
        pid = api.new_participant()
        for _ in range(5):
            q = api.ask(eid, pid)
            if q["state"] != "ok":
                assert q["state"] == until, q
                return seen
            kind = "pairwise" if "items" in q else "rating"
            if kind == "pairwise" and until == "pairwise":
                api.release(q["query_id"], pid)
                return seen
            if kind == "rating":
                assert seen["pairwise"] == 0, "no rating after the switch"
            seen[kind] += 1
            ack = api.answer(q["query_id"], pid, respond(q, rng))
            assert ack["status"] == "answered"
            assert sum(seen.values()) < limit, "the experiment should have stopped long before"


def test_ratings_then_comparisons_switch_by_themselves_and_end_on_the_winner(db_url):
    """Driven through the Python client over HTTP: stage 1 rates until its learner has proven the top 3, stage 2
    compares those 3 until it stops on c0; a stage 1 query answered after the switch is stored and told to stage 1;
    the switch and everything acknowledged survive a restart, and stage 1's log replays to the same top m."""
    rng = np.random.default_rng(4)
    settings = settings_for(db_url)
    with LiveApp(settings) as url:
        api = ServiceClient(url)
        created = api.create_experiment(spec())
        eid, api.token = created["id"], created["owner_token"]
        info = api.experiment(eid)
        assert info["query"] == "rating_then_pairwise" and info["k"] == 3
        assert info["params"]["delta"] == pytest.approx(0.025 / 2)  # delta/2 per stage, KL-RandLUCB errs <= 2 delta
        assert info["stages"]["stage"] == 1 and info["stages"]["stage2_experiment_id"] is None
        public = api.get(f"/api/experiments/{eid}/public")
        assert public["query"] == "rating" and public["labels"] == LABELS and not public["complete"]
        late_pid = api.new_participant()
        late = api.ask(eid, late_pid)  # held across the switch, answered after it
        assert "item" in late
        seen = run(api, eid, rng, until="pairwise")
        assert seen["rating"] > 0
        public = api.get(f"/api/experiments/{eid}/public")
        assert public["query"] == "pairwise" and public["labels"] == ["left", "right"] and public["id"] == eid
        res = api.results(eid)
        stages = res["stages"]
        assert stages["stage"] == 2 and stages["stage1"]["proven"] and stages["stage1"]["reason"] == "stopped"
        assert set(stages["stage1"]["top_m"]) == TOP
        child = stages["stage2_experiment_id"]
        before = res["n_answers"]
        ack = api.answer(late["query_id"], late_pid, "funny")  # a stage 1 query answered in stage 2
        assert ack["status"] == "answered"
        assert api.results(eid)["n_answers"] == before + 1
        more = run(api, eid, rng)
        assert more["rating"] == 0 and more["pairwise"] > 0
        res = api.results(eid)
        assert res["stages"]["winner"] == "c0" and res["stages"]["proven"] is True
        assert res["stages"]["stage2"]["done"] and res["stages"]["stage2"]["recommendation"] == ["c0"]
        child_res = api.results(child)
        assert child_res["query"] == "pairwise" and child_res["n_items"] == 3
        assert {r["id"] for r in child_res["ranking"]} == TOP
        assert child_res["stages"]["stage"] == 2 and child_res["stages"]["stage_of"] == eid
        assert child_res["params"]["delta"] == pytest.approx(0.025 / 2)
        bt = api.bradley_terry(eid)  # the staged experiment's comparisons are its stage 2's
        assert bt["items"][0]["id"] == "c0" and {row["id"] for row in bt["items"]} == TOP
        assert bt["n_comparisons"] == child_res["n_answers"] == more["pairwise"] + seen["pairwise"]
        n_stage1 = api.results(eid)["n_answers"]
        listed = [e["id"] for e in api.get("/api/experiments")["experiments"]]
        assert eid in listed and child not in listed
    with LiveApp(settings) as url:  # a restart in stage 2: nothing lost, the stage kept
        api = ServiceClient(url, token=created["owner_token"])
        res = api.results(eid)
        assert res["n_answers"] == n_stage1 and res["stages"]["stage"] == 2 and res["stages"]["winner"] == "c0"
        assert api.results(child)["n_answers"] == more["pairwise"] + seen["pairwise"]
        assert api.get(f"/api/experiments/{eid}/public")["query"] == "pairwise"
        pid = api.new_participant()
        q = api.ask(eid, pid)
        assert q["state"] == "done" and q.get("study_complete") is True
    study = open_study(db_url)
    try:
        assert study.verify_stage_switch(eid)
        record = study.meta(child).stages
        assert record["stage1_version"] > 0 and sorted(record["arms"]) == record["arms"]
    finally:
        study.engine.dispose()


def test_the_ratings_budget_hands_over_its_current_top_m_unproven(db_url):
    """With a ratings budget far below what stage 1 needs to stop, stage 2 starts at the budget with stage 1's
    current top 3, and the results say stage 1 was not proven."""
    rng = np.random.default_rng(9)
    with TestClient(create_app(settings_for(db_url))) as c:
        r = c.post("/api/experiments", json=spec(ratings_budget=30, delta=0.001))
        assert r.status_code == 201, r.text
        eid, auth = r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}
        ratings = 0
        while True:
            pid = c.post("/api/participants").json()["participant_id"]
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            assert q["state"] == "ok"
            if "items" in q:
                break
            ratings += 1
            c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": respond(q, rng)})
        assert ratings == 30
        stages = c.get(f"/api/experiments/{eid}/results", headers=auth).json()["stages"]
        assert stages["stage"] == 2 and stages["stage1"]["proven"] is False
        assert stages["stage1"]["reason"] == "ratings_budget" and stages["stage1"]["answers"] == 30
        assert len(stages["stage1"]["top_m"]) == 3 and stages["stage1"]["done"] is False


@pytest.mark.parametrize("extra, words", [
    ({"top_m": None}, "needs top_m"),
    ({"top_m": 1}, "top_m must be an integer in [2, 5]"),
    ({"top_m": 6}, "top_m must be an integer in [2, 5]"),
    ({"top_m": 2.5}, "body.top_m"),
    ({"ratings_budget": 0}, "ratings_budget must be an integer"),
    ({"k": 3}, "k (what stage 2 finds among the top_m)"),
    ({"delta": 1.5}, "delta must be in (0, 1)"),
    ({"budget": 100}, "'ratings_budget' ends stage 1"),
    ({"algorithms": [{"algorithm": "kl_rand_lucb"}]}, "one learner per stage"),
    ({"stage2": {"algorithm": "nope"}}, "stage2"),
    ({"stage2": {"colour": "red"}}, "stage2 must be an object"),
    ({"gold": [{"text": "a gold caption", "label": "funny"}], "gold_positions": [1]}, "gold items"),
    ({"params": {"k": 2}}, "given twice"),
])
def test_bad_staged_specs_are_422(sqlite_url, extra, words):
    """Each refused with a 422 that names the problem, nothing created."""
    body = {key: value for key, value in spec(**extra).items() if value is not None}
    with TestClient(create_app(settings_for(sqlite_url))) as c:
        r = c.post("/api/experiments", json=body)
        assert r.status_code == 422, r.text
        assert words in r.json()["detail"], r.json()["detail"]
        assert c.get("/api/experiments").json()["experiments"] == []


def test_a_spec_with_few_items_is_422(sqlite_url):
    """Two items leave nothing to cut down: refused."""
    with TestClient(create_app(settings_for(sqlite_url))) as c:
        r = c.post("/api/experiments", json=spec(items=ITEMS[:2], top_m=2))
        assert r.status_code == 422 and "at least 3 items" in r.json()["detail"]
