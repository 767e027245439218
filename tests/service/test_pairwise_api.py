"""Pairwise experiments through the HTTP API and the Python client (issue 39, items 1 and 3), over SQLite and
PostgreSQL: the Borda reduction's asks and answers, the repeat policy on pairs, results and exports, errors, a
restart."""

from __future__ import annotations

import csv
import io
from itertools import combinations

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from study_support import Clock, LiveApp, open_study

from purebandits.pairwise import bradley_terry_preferences
from purebandits.service.app import create_app
from purebandits.service.client import ApiError, ServiceClient, pair_label
from purebandits.service.crowd import blocked_opponents, draw_opponent
from purebandits.service.settings import Settings
from purebandits.service.storage import _alembic_config, upgrade

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(5)]
#: item c0 beats every other with probability 0.92; the others are even: Borda scores 0.92 and 0.395
P = bradley_terry_preferences([2.5, 0.0, 0.0, 0.0, 0.0])
INDEX = {item["id"]: i for i, item in enumerate(ITEMS)}


def make_client(url: str, clock=None, **kw) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, **kw), clock=clock))


def create(c: TestClient, **kw) -> tuple[int, dict[str, str]]:
    r = c.post("/api/experiments", json={"name": "duels", "items": ITEMS, "query": "pairwise", "seed": 5, **kw})
    assert r.status_code == 201, r.text
    return r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}


def participant(c: TestClient) -> str:
    return c.post("/api/participants").json()["participant_id"]


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def better(query: dict, rng: np.random.Generator) -> str:
    """A simulated participant's answer: the left item wins with probability P[left, right]."""
    left, right = (INDEX[item["id"]] for item in query["items"])
    return "left" if rng.random() < P[left, right] else "right"


def test_pairwise_experiment_runs_to_the_borda_winner_through_the_client_and_survives_a_restart(db_url):
    """Simulated participants (sessions of 6 comparisons) answer from a Bradley-Terry preference matrix through the
    Python client over HTTP until the default learner stops: it stops on c0, every acknowledged answer is still
    there after a restart, and the results and exports agree with the answers."""
    rng = np.random.default_rng(11)
    acked: dict[str, tuple[str, str, str]] = {}  # query id -> (participant, label, winner id)
    sides: set[tuple[str, str]] = set()
    settings = Settings(database_url=db_url, ask_rate_per_second=0, participant_rate_per_second=0,
                        create_rate_per_second=0)
    with LiveApp(settings) as url:
        api = ServiceClient(url)
        created = api.create_experiment({"name": "duels", "items": ITEMS, "query": "pairwise", "seed": 5})
        eid, api.token = created["id"], created["owner_token"]
        assert api.experiment(eid)["query"] == "pairwise"
        assert api.get(f"/api/experiments/{eid}/public")["labels"] == ["left", "right"]
        state = "ok"
        while state == "ok":
            pid = api.new_participant()
            for _ in range(6):
                q = api.ask(eid, pid)
                state = q["state"]
                if state != "ok":
                    break
                ids = [item["id"] for item in q["items"]]
                assert len(set(ids)) == 2 and "item" not in q and q["labels"] == ["left", "right"]
                assert set(q["items"][0]) == {"id", "text"} and q["items"][0]["text"] == f"caption {ids[0][1:]}"
                sides.add(tuple(ids))
                label = better(q, rng)
                ack = api.answer(q["query_id"], pid, label)
                assert ack == {"query_id": q["query_id"], "status": "answered", "label": label,
                               "reward": ack["reward"]} and ack["reward"] in (0.0, 1.0)
                assert api.answer(q["query_id"], pid, label) == ack  # idempotent
                acked[q["query_id"]] = (pid, label, ids[0] if label == "left" else ids[1])
            assert len(acked) < 2000, "the learner should have stopped long before"
        assert state == "done"
        assert any((b, a) in sides for a, b in sides), "sides are drawn per query: some pair shown both ways"
    with LiveApp(settings) as url:  # a restart: every acknowledged answer is there
        api = ServiceClient(url, token=created["owner_token"])
        res = api.results(eid)
        assert res["query"] == "pairwise" and res["done"] and res["n_answers"] == len(acked)
        assert [r["id"] for r in res["recommendation"]] == ["c0"]
        assert res["params"] == {"form": "kinf", "support": [0.0, 1.0], "delta": 0.025}
        assert res["ranking"][0]["id"] == "c0" and res["stopping"]["fraction"] == 1.0
        assert sum(res["label_totals"].values()) == len(acked) and set(res["label_totals"]) == {"won", "lost"}
        answers = rows(api.export(eid, "answers").body.decode())
        head = answers[0]
        assert head[-5:] == ["opponent", "opponent_id", "left_id", "right_id", "winner_id"]
        col = {name: j for j, name in enumerate(head)}
        assert {r[col["query_id"]]: (r[col["participant_id"]], r[col["label"]], r[col["winner_id"]])
                for r in answers[1:]} == acked
        for r in answers[1:]:
            assert {r[col["item_id"]], r[col["opponent_id"]]} == {r[col["left_id"]], r[col["right_id"]]}
            won = float(r[col["reward"]]) == 1.0
            assert r[col["winner_id"]] == (r[col["item_id"]] if won else r[col["opponent_id"]])
        pairs = rows(api.export(eid, "pairs").body.decode())
        assert pairs[0] == ["worker", "left", "right", "label"] and len(pairs) == len(acked) + 1
        assert sorted(pairs[1:]) == sorted([r[col["participant_id"]], r[col["left_id"]], r[col["right_id"]],
                                            r[col["winner_id"]]] for r in answers[1:])
        wins = rows(api.export(eid, "wins").body.decode())
        assert wins[0][0] == "winner"
        ids = wins[0][1:]
        assert sorted(ids) == sorted(INDEX) and [r[0] for r in wins[1:]] == ids
        W = np.array([[int(x) for x in r[1:]] for r in wins[1:]])
        assert W.sum() == len(acked) and np.all(np.diag(W) == 0)
        bt = api.bradley_terry(eid)
        assert bt["n_comparisons"] == len(acked) and bt["items"][0]["id"] == "c0"
        assert bt["components"] >= 1 and bt["strongly_connected"] == (bt["components"] == 1)
        assert (bt["alpha"] == 0.0 and bt["note"] is None) if bt["strongly_connected"] else \
            (bt["alpha"] == 0.1 and "strongly connected components" in bt["note"])
        assert abs(sum(row["log_strength"] for row in bt["items"])) < 1e-6
        summary = rows(api.export(eid, "summary").body.decode())
        assert summary[0][:4] == ["rank", "item_id", "won", "lost"] and summary[1][1] == "c0"
        with pytest.raises(ApiError) as err:
            api.bradley_terry(eid, learner="nobody")
        assert err.value.status == 404 and "no learner 'nobody'" in err.value.detail


def test_pairs_are_not_repeated_while_others_remain(db_url):
    """repeats: never, on pairs: one participant sees the 10 pairs of 5 items once each, then is still served (not
    the pair shown last); asked with n, the queries held are distinct pairs."""
    rng = np.random.default_rng(3)
    with make_client(db_url) as c:
        eid, _auth = create(c)
        pid = participant(c)
        shown = []
        for _ in range(10):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            shown.append(frozenset(item["id"] for item in q["items"]))
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": better(q, rng)})
            assert r.status_code == 200
        assert len(set(shown)) == 10 == len(list(combinations(ITEMS, 2)))
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "ok" and frozenset(item["id"] for item in q["items"]) != shown[-1]
        other = participant(c)
        many = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": other, "n": 4}).json()
        held = [frozenset(item["id"] for item in query["items"]) for query in many["queries"]]
        assert len(held) == 4 and len(set(held)) == 4
        again = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": other, "n": 4}).json()
        assert [x["query_id"] for x in again["queries"]] == [x["query_id"] for x in many["queries"]]
        assert [x["items"] for x in again["queries"]] == [x["items"] for x in many["queries"]]


@pytest.mark.parametrize("body, message", [
    ({"query": "triplet"}, "query"),
    ({"items": [{"id": "a", "text": "alone"}]}, "at least 2 items"),
    ({"labels": [{"name": "a", "reward": 0}, {"name": "b", "reward": 1}]}, "labels are fixed"),
    ({"gold": [{"text": "known", "label": "left"}], "gold_positions": [2]}, "gold items"),
    ({"k": 5}, "bad parameter"),
])
def test_bad_pairwise_specs_are_refused_with_a_clear_message(sqlite_url, body, message):
    with make_client(sqlite_url) as c:
        r = c.post("/api/experiments", json={"name": "bad", "items": ITEMS, "query": "pairwise", **body})
        assert r.status_code == 422, r.text
        assert message in str(r.json()["detail"])
        assert c.get("/api/experiments/1/public").status_code == 404


def test_answers_labels_skip_and_conflicts(db_url):
    clock = Clock()
    with make_client(db_url, clock=clock) as c:
        eid, auth = create(c, allow_skip=True)
        assert c.get(f"/api/experiments/{eid}/public").json()["allow_skip"] is True
        pid = participant(c)
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        # FastAPI's route (a body the fast path hands on) gives the same pending query, shaped the same
        assert c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid, "n": None}).json() == q
        url = f"/api/queries/{q['query_id']}/answer"
        for bad in ("funny", "won", "lost", "LEFT"):
            r = c.post(url, json={"participant_id": pid, "label": bad})
            assert r.status_code == 422 and "['left', 'right', 'skip']" in r.json()["detail"], r.text
        ok = c.post(url, json={"participant_id": pid, "label": "right"})
        assert ok.status_code == 200 and ok.json()["label"] == "right"
        r = c.post(url, json={"participant_id": pid, "label": "left"})
        assert r.status_code == 409 and "'right'" in r.json()["detail"]
        assert c.post(url, json={"participant_id": pid, "label": "right"}).json() == ok.json()
        clock.ms += 1000
        q2 = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        skip = c.post(f"/api/queries/{q2['query_id']}/answer", json={"participant_id": pid, "label": "skip"})
        assert skip.status_code == 200 and skip.json()["reward"] is None
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert res["n_answers"] == 1 and res["n_told"] == 1  # a skip is recorded, never told
        answers = rows(c.get(f"/api/experiments/{eid}/answers.csv", headers=auth).text)
        col = {name: j for j, name in enumerate(answers[0])}
        assert [r[col["label"]] for r in answers[1:]] == ["right", "skip"]
        assert answers[2][col["winner_id"]] == "" and answers[2][col["reward"]] == ""
        winner = answers[1][col["right_id"]]
        assert answers[1][col["winner_id"]] == winner
        pairs = rows(c.get(f"/api/experiments/{eid}/answers.csv?format=crowdkit", headers=auth).text)
        assert pairs == [["worker", "left", "right", "label"],
                         [pid, answers[1][col["left_id"]], winner, winner]]  # the skip left out
        bt = c.get(f"/api/experiments/{eid}/bradley-terry", headers=auth).json()
        assert bt["n_comparisons"] == 1 and bt["components"] == 5 and bt["alpha"] == 0.1
        assert bt["items"][0]["id"] == winner and bt["items"][0]["wins"] == 1
        r = c.get(f"/api/experiments/{eid}/bradley-terry?alpha=0", headers=auth)
        assert r.status_code == 409 and "strongly connected" in r.json()["detail"]
        # an excluded participant's comparisons leave the learner, the win matrix and the fit; the raw tables keep them
        r = c.post(f"/api/experiments/{eid}/exclusions", headers=auth, json={"participant_id": pid, "excluded": True})
        assert r.status_code == 200 and r.json()["excluded_answers"] == 1
        assert c.get(f"/api/experiments/{eid}/results", headers=auth).json()["n_told"] == 0
        r = c.get(f"/api/experiments/{eid}/bradley-terry", headers=auth)
        assert r.status_code == 409 and "no comparisons yet" in r.json()["detail"]
        wins = rows(c.get(f"/api/experiments/{eid}/wins.csv", headers=auth).text)
        assert sum(int(x) for r in wins[1:] for x in r[1:]) == 0
        assert len(rows(c.get(f"/api/experiments/{eid}/answers.csv?format=crowdkit", headers=auth).text)) == 2


def test_rating_experiments_are_unchanged_and_have_no_pairwise_reports(sqlite_url):
    with make_client(sqlite_url) as c:
        r = c.post("/api/experiments", json={"name": "ratings", "items": ITEMS, "seed": 1})
        eid, auth = r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}
        assert c.get(f"/api/experiments/{eid}", headers=auth).json()["query"] == "rating"
        pid = participant(c)
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert "item" in q and "items" not in q
        for path in ("bradley-terry", "wins.csv"):
            r = c.get(f"/api/experiments/{eid}/{path}", headers=auth)
            assert r.status_code == 409 and "pairwise" in r.json()["detail"]
        assert rows(c.get(f"/api/experiments/{eid}/answers.csv", headers=auth).text)[0][-1] == "excluded"


def test_several_learners_side_by_side_and_before_any_comparison(db_url):
    """Two learners (the default and random sampling) share the participants; each is told its own comparisons."""
    rng = np.random.default_rng(5)
    with make_client(db_url) as c:
        eid, auth = create(c, algorithms=[{"label": "Default", "algorithm": "kl_rand_lucb"},
                                          {"label": "Random", "algorithm": "random_sampling"}])
        r = c.get(f"/api/experiments/{eid}/bradley-terry", headers=auth)
        assert r.status_code == 409 and "no comparisons yet" in r.json()["detail"]
        for _ in range(12):
            pid = participant(c)
            for _ in range(2):
                q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
                assert len({item["id"] for item in q["items"]}) == 2
                c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": better(q, rng)})
        counts = [c.get(f"/api/experiments/{eid}/results?algorithm={label}", headers=auth).json()["n_answers"]
                  for label in ("Default", "Random")]
        assert sum(counts) == 24 and min(counts) > 0
        pooled = c.get(f"/api/experiments/{eid}/bradley-terry", headers=auth).json()
        alone = c.get(f"/api/experiments/{eid}/bradley-terry?learner=Random", headers=auth).json()
        assert pooled["n_comparisons"] == 24 and alone["n_comparisons"] == counts[1]
        assert pooled["pooled"] == ["Default", "Random"] and alone["pooled"] == ["Random"]
        wins = rows(c.get(f"/api/experiments/{eid}/wins.csv?learner=Default", headers=auth).text)
        assert sum(int(x) for r in wins[1:] for x in r[1:]) == counts[0]


def test_pair_label_helper():
    q = {"items": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}
    assert pair_label(q, "a") == "left" and pair_label(q, "b") == "right"
    with pytest.raises(ValueError):
        pair_label(q, "c")


def test_the_opponent_is_uniform_among_the_others_and_the_repeat_policy_rules_out_pairs():
    n, arm = 5, 2
    draws = np.bincount([draw_opponent(n, arm, set()) for _ in range(4000)], minlength=n)
    assert draws[arm] == 0 and all(850 <= d <= 1150 for d in np.delete(draws, arm))  # 1000 each (sd 27)
    assert {draw_opponent(n, arm, {0, 1, 3}) for _ in range(50)} == {4}
    pair = frozenset
    rated = {pair((0, 1)), pair((0, 2)), pair((0, 3)), pair((0, 4))}
    blocked = blocked_opponents("never", n, rated, {pair((1, 2))}, pair((0, 4)))
    assert blocked[0] == {1, 2, 3, 4} and blocked[1] == {0, 2} and 3 not in blocked[2]
    # every pair done: only the pairs held and the last one are ruled out, as under not_consecutive
    every = {pair(p) for p in combinations(range(n), 2)}
    assert blocked_opponents("never", n, every, set(), pair((3, 4))) == {3: {4}, 4: {3}}
    assert blocked_opponents("not_consecutive", n, rated, set(), None) == {}


def test_downgrade_below_0010_keeps_the_experiments_and_upgrade_restores_the_columns(db_url):
    study = open_study(db_url)
    rating, _ = study.create_experiment({"name": "r", "items": ITEMS})
    pairwise, _ = study.create_experiment({"name": "p", "items": ITEMS, "query": "pairwise"})
    pid = study.new_participant()
    q = study.next_query(pairwise, pid)
    study.answer(q["query_id"], pid, "left")
    engine = study.engine
    cfg = _alembic_config(engine)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0009")
        conn.commit()
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM items")).scalar_one() == 2 * len(ITEMS)
        assert conn.execute(sa.text("SELECT count(*) FROM queries")).scalar_one() == 1
    upgrade(engine)
    with engine.connect() as conn:
        kinds = dict(conn.execute(sa.text("SELECT id, query_kind FROM experiments")).all())
    assert kinds == {rating: "rating", pairwise: "rating"}  # a downgrade forgets what it cannot store
