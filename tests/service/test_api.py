"""HTTP API over SQLite and PostgreSQL (FastAPI TestClient, one app and database per test)."""

from __future__ import annotations

import csv
import io
import re

import pytest
import sqlalchemy as sa
import sqlalchemy.exc
from fastapi.testclient import TestClient

from purebandits.service.app import create_app
from purebandits.service.models import experiments
from purebandits.service.settings import Settings
from purebandits.service.validation import DEFAULT_ALGORITHM


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def make_client(url: str, clock=None, **kw) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, **kw), clock=clock))


ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(5)]


def create(client, **kw):
    body = {"name": "test", "items": ITEMS, "seed": 5}
    body.update(kw)
    r = client.post("/api/experiments", json=body)
    assert r.status_code == 201, r.text
    d = r.json()
    return d["id"], {"Authorization": f"Bearer {d['owner_token']}"}


def participant(client) -> str:
    r = client.post("/api/participants")
    assert r.status_code == 201
    return r.json()["participant_id"]


def test_full_flow(db_url):
    clock = Clock()
    with make_client(db_url, clock=clock) as c:
        eid, auth = create(c)
        pid = participant(c)
        n = 0
        for i in range(12):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            assert q["state"] == "ok" and q["labels"] == ["unfunny", "somewhat funny", "funny"]
            label = ["unfunny", "funny"][i % 2]
            r1 = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            r2 = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            assert r1.status_code == r2.status_code == 200 and r1.json() == r2.json()
            n += 1
            clock.ms += 1000
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert res["n_answers"] == n == sum(r["count"] for r in res["ranking"])
        assert sum(res["label_totals"].values()) == n and res["label_totals"]["funny"] == 6
        assert {"fraction", "done", "separated"} <= set(res["stopping"])
        assert len(res["recommendation"]) == 1
        assert sum(c for _, c in res["timeline"]["buckets"]) == n
        for row in res["ranking"]:
            if row["count"]:
                assert row["lower"] <= row["mean"] <= row["upper"]
        info = c.get(f"/api/experiments/{eid}", headers=auth).json()
        assert info["algorithm"] == DEFAULT_ALGORITHM and info["n_items"] == 5
        # an ask and an answer per rating, plus an ask and a cancel per candidate passed over
        # because this one participant had just seen it (the repeat policy)
        assert info["version"] >= 2 * n and (info["version"] - 2 * n) % 2 == 0
        assert [a["version"] for a in info["algorithms"]] == [info["version"]]
        answers = list(csv.reader(io.StringIO(c.get(f"/api/experiments/{eid}/answers.csv", headers=auth).text)))
        assert len(answers) == n + 1 and answers[0][:3] == ["seq", "query_id", "participant_id"]
        summary = list(csv.reader(io.StringIO(c.get(f"/api/experiments/{eid}/summary.csv", headers=auth).text)))
        assert summary[0] == ["rank", "item_id", "funny", "somewhat_funny", "unfunny", "count", "score",
                              "precision", "contest", "caption"]
        assert sum(int(r[5]) for r in summary[1:]) == n
        state = c.get(f"/api/experiments/{eid}/state", headers=auth).json()
        assert state["version"] == info["version"] and state["state"]["state"]["t_"] == n


def test_owner_endpoints_need_a_valid_token(db_url):
    with make_client(db_url) as c:
        eid, auth = create(c)
        eid2, auth2 = create(c)
        paths = ["", "/results", "/state", "/answers.csv", "/summary.csv"]
        for p in paths:
            for headers in ({}, {"Authorization": "Bearer wrong"}, auth2, {"Authorization": auth["Authorization"][7:]}):
                r = c.get(f"/api/experiments/{eid}{p}", headers=headers)
                assert r.status_code == 401, (p, headers)
                assert set(r.json()) == {"detail"} and "caption" not in r.text
        for action in ("pause", "resume", "stop"):
            assert c.post(f"/api/experiments/{eid}/{action}").status_code == 401
        assert c.get("/api/experiments/999/results", headers=auth).status_code == 401
        assert c.get(f"/api/experiments/{eid}/results", headers=auth).status_code == 200


def test_pause_resume_stop(db_url):
    with make_client(db_url) as c:
        eid, auth = create(c)
        pid = participant(c)
        ask = lambda: c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()  # noqa: E731
        assert c.post(f"/api/experiments/{eid}/pause", headers=auth).json() == {"id": eid, "status": "paused"}
        assert ask() == {"state": "paused", "retry_after": 5.0}
        assert c.post(f"/api/experiments/{eid}/resume", headers=auth).json()["status"] == "active"
        assert ask()["state"] == "ok"
        assert c.post(f"/api/experiments/{eid}/stop", headers=auth).json()["status"] == "stopped"
        assert ask()["state"] == "stopped"
        r = c.post(f"/api/experiments/{eid}/resume", headers=auth)
        assert r.status_code == 409 and "stopped" in r.json()["detail"]


@pytest.mark.parametrize("body, status, message", [
    ({"algorithm": "nope"}, 422, "unknown algorithm 'nope'"),
    ({"params": {"delta": -1}}, 422, "delta must be in"),
    ({"delta": 1.5}, 422, "delta must be in"),
    ({"params": {"frobnicate": 3}}, 422, "unknown parameter"),
    ({"items": []}, 422, "item list is empty"),
    ({"items": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}, 422, "duplicate item id 'x'"),
    ({"labels": [{"name": "meh"}, {"name": "great", "reward": 1.0}]}, 422, "label 'meh' has no reward"),
    ({"items": None, "items_csv": "id,text\n1,a\n1,b\n"}, 422, "duplicate item id '1'"),
    ({"seed": -3}, 422, "seed must be"),
])
def test_bad_experiment_is_rejected_and_creates_nothing(sqlite_url, body, status, message):
    with make_client(sqlite_url) as c:
        payload = {"name": "bad", "items": ITEMS}
        payload.update(body)
        payload = {k: v for k, v in payload.items() if v is not None}
        r = c.post("/api/experiments", json=payload)
        assert r.status_code == status, r.text
        assert message in r.json()["detail"]
        with c.app.state.study.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(experiments)).scalar_one() == 0


def test_items_as_csv_and_custom_labels(sqlite_url):
    with make_client(sqlite_url) as c:
        csv_text = "id,text,image_url\na,first,https://example.org/a.png\nb,second,\nc,third,\n"
        labels = [{"name": "bad", "reward": 0}, {"name": "ok", "reward": 0.25}, {"name": "good", "reward": 0.75},
                  {"name": "great", "reward": 1}]
        eid, auth = create(c, items=None, items_csv=csv_text, labels=labels)
        pid = participant(c)
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["labels"] == ["bad", "ok", "good", "great"]
        assert c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "good"}).json()[
            "reward"] == 0.75
        summary = list(csv.reader(io.StringIO(c.get(f"/api/experiments/{eid}/summary.csv", headers=auth).text)))
        assert summary[0][2:8] == ["bad", "ok", "good", "great", "count", "mean_reward"]
        row = [r for r in summary[1:] if r[6] == "1"][0]
        assert row[2:6] == ["0", "0", "1", "0"] and float(row[7]) == pytest.approx(0.75)


def test_answer_errors(db_url):
    clock = Clock()
    with make_client(db_url, clock=clock, query_expiry_seconds=30) as c:
        eid, auth = create(c)
        pid, other = participant(c), participant(c)
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        url = f"/api/queries/{q['query_id']}/answer"
        r = c.post(url, json={"participant_id": pid, "label": "hilarious"})
        assert r.status_code == 422 and "not in this experiment's label set" in r.json()["detail"]
        r = c.post(url, json={"participant_id": other, "label": "funny"})
        assert r.status_code == 403
        r = c.post("/api/queries/00000000-0000-0000-0000-000000000000/answer", json={"participant_id": pid,
                                                                                   "label": "funny"})
        assert r.status_code == 404 and "unknown query" in r.json()["detail"]
        r = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": "made-up"})
        assert r.status_code == 403 and "unknown participant" in r.json()["detail"]
        clock.ms += 31_000
        r = c.post(url, json={"participant_id": pid, "label": "funny"})
        assert r.status_code == 410 and "expired" in r.json()["detail"]
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert res["n_answers"] == 0 and res["n_pending"] == 0
        assert all(row["pending"] == 0 for row in res["ranking"])
        # answered twice with another label: conflict, the first answer stands
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        url = f"/api/queries/{q['query_id']}/answer"
        assert c.post(url, json={"participant_id": pid, "label": "funny"}).status_code == 200
        r = c.post(url, json={"participant_id": pid, "label": "unfunny"})
        assert r.status_code == 409
        assert c.get(f"/api/experiments/{eid}/results", headers=auth).json()["label_totals"]["funny"] == 1


def test_openapi_and_pages_escape_text(sqlite_url):
    with make_client(sqlite_url) as c:
        schema = c.get("/openapi.json").json()
        for path in ("/api/experiments", "/api/experiments/{eid}/results", "/api/experiments/{eid}/queries",
                     "/api/queries/{query_id}/answer", "/api/participants"):
            assert path in schema["paths"]
        evil = "<script>alert('x')</script>"
        eid, _ = create(c, name=evil, items=[{"text": evil}, {"text": "b"}])
        for page in ("/", f"/rate/{eid}", f"/dashboard/{eid}"):
            html = c.get(page).text
            assert evil not in html
        assert "&lt;script&gt;" in c.get("/").text
        pid = participant(c)
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["item"]["text"] in (evil, "b")


def test_body_limit_rate_limit_admin_token_and_db_errors(sqlite_url, monkeypatch):
    with make_client(sqlite_url, max_body_bytes=2000, ask_rate_per_second=0.001, ask_burst=3,
                     admin_token="s3cret") as c:
        big = {"items": [{"text": "x" * 100} for _ in range(50)]}
        r = c.post("/api/experiments", json=big, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 413 and "too large" in r.json()["detail"]
        assert c.post("/api/experiments", json={"items": ITEMS}).status_code == 401
        r = c.post("/api/experiments", json={"items": ITEMS}, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 201
        eid = r.json()["id"]
        # the admin token opens every experiment's owner endpoints
        assert c.get(f"/api/experiments/{eid}/results", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        pid = participant(c)
        codes = [c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).status_code
                 for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        study = c.app.state.study

        def down(*a, **k):
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))

        monkeypatch.setattr(study, "run_batch", down)
        r = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": participant(c)})
        assert r.status_code == 503 and r.json() == {"detail": "database unavailable, retry shortly"}


def test_api_docs_need_no_internet(sqlite_url):
    """/docs and /redoc load their JavaScript and CSS from the installed fastapi-offline package, never a CDN."""
    with make_client(sqlite_url) as c:
        for page in ("/docs", "/redoc"):
            html = c.get(page).text
            assert "cdn" not in html.lower() and "https://" not in html.split("<body")[0]
            assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', html)
            assert assets, html[:500]
            for url in assets:
                r = c.get(url)
                assert r.status_code == 200 and len(r.content) > 1000, url
        assert c.get("/openapi.json").json()["info"]["title"] == "purebandits service"


def test_results_ranking_is_paged(sqlite_url):
    """limit / offset page the ranking (a dashboard polling a large contest asks for a page, not every item)."""
    with make_client(sqlite_url) as c:
        items = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(40)]
        eid, auth = create(c, items=items)
        pid = participant(c)
        for _ in range(10):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
        url = f"/api/experiments/{eid}/results"
        full = c.get(url, headers=auth).json()
        assert full["n_items"] == 40 and len(full["ranking"]) == 40 and full["offset"] == 0
        page = c.get(url, headers=auth, params={"limit": 7, "offset": 5}).json()
        assert page["n_items"] == 40 and page["ranking"] == full["ranking"][5:12]
        assert [r["rank"] for r in page["ranking"]] == list(range(6, 13))
        assert page["stopping"] == full["stopping"] and page["n_answers"] == full["n_answers"] == 10
        for bad in ({"limit": 0}, {"offset": -1}, {"limit": 10**6}):
            assert c.get(url, headers=auth, params=bad).status_code == 422
