"""Results over time, participant activity, the ranking's search / sort / paging, and what happens when
the learners stop (auto-stop, the owner's webhook called once).

Every history point must describe exactly the state committed with it: it is compared with the
point computed from a replay of the event log up to the answer that wrote it.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
import sqlalchemy as sa
import svc_migrated
from fastapi.testclient import TestClient
from study_support import Clock, open_study

from purebandits.service import webhooks
from purebandits.service.app import create_app
from purebandits.service.errors import BadRequest, Forbidden
from purebandits.service.eventlog import apply_log
from purebandits.service.history import history_point, n_leaders
from purebandits.service.models import events
from purebandits.service.settings import Settings

MEANS = [0.9, 0.6, 0.3, 0.2, 0.1]


#: conftest's per-test SQLite file and per-test database, the SQLite file already migrated (a copy: see
#: :mod:`svc_migrated`)
sqlite_url, db_url = svc_migrated.sqlite_url, svc_migrated.db_url


def _spec(algorithm="lucb1", params=None):
    return {"name": "history test", "seed": 5, "algorithm": algorithm,
            "params": params if params is not None else {"delta": 0.1}}


def _run(study, eid, clock, means, rng, n_answers, wait_ms=None):
    """Participants answer ``funny`` with the item's mean (else ``unfunny``) until ``n_answers`` or done;
    each answers up to 20."""
    done = 0
    for p in range(100_000):
        pid = study.new_participant()
        for _ in range(20):
            q = study.next_query(eid, pid)
            if q["state"] in ("done", "stopped"):
                return done
            if q["state"] != "ok":
                break
            arm = int(q["item"]["id"])
            clock.ms += wait_ms(p) if wait_ms else 1000
            study.answer(q["query_id"], pid, "funny" if rng.random() < means[arm] else "unfunny")
            done += 1
            if done >= n_answers:
                return done
    return done


def _items(n):
    return [{"id": str(i), "text": f"caption number {i}"} for i in range(n)]


@pytest.mark.slow  # up to 5,000 answers through the study, every history point checked
def test_history_points_are_exactly_the_committed_states(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock, history_every=20)
    eid, _ = study.create_experiment({**_spec(), "items": _items(len(MEANS))})
    n = _run(study, eid, clock, MEANS, np.random.default_rng(1), 5000)
    res = study.results(eid)
    assert res["done"], "LUCB1 at delta 0.1 on these means stops well within 5,000 answers"
    hist = study.history(eid, max_points=100_000)
    assert hist["every"] == 20
    (series,) = hist["series"]
    points = series["points"]
    # one point per 20 answers, and one where it stopped
    assert [p["n_answers"] for p in points if p["n_answers"] % 20 == 0] == list(range(20, n + 1, 20))
    assert points[-1]["done"] and points[-1]["n_answers"] == n == res["learner_done"]["at_answers"]
    assert not any(p["done"] for p in points[:-1])
    with study._connect(False) as conn:
        answer_seqs = conn.execute(sa.select(events.c.seq).where(
            events.c.experiment_id == eid, events.c.kind == "answer").order_by(events.c.seq)).scalars().all()
    # the log replayed up to each point's answer: one learner carried on from point to point by apply_log (the
    # step every replay of the service takes, in chunks), not a replay from the start per point (quadratic)
    replayed, at = study.replay(eid, upto=0), 0
    meta = study.meta(eid)
    for p in points:
        with study._connect(False) as conn:
            at = apply_log(conn, eid, 0, replayed, at, answer_seqs[p["n_answers"] - 1],
                           lambda: meta.learners[0].fresh(meta.n_arms)) + at
        assert replayed.n_pulls == p["n_answers"]
        want = history_point(replayed, {"delta": 0.1}, k=1)
        assert p["fraction"] == want["fraction"] and p["margin"] == want["margin"] and p["done"] == want["done"]
        assert [{k: ld[k] for k in ("rank", "arm", "mean", "lower", "upper", "count")} for ld in p["leaders"]] \
            == want["leaders"]
        assert [ld["text"] for ld in p["leaders"]] == [f"caption number {ld['id']}" for ld in p["leaders"]]
        assert len(p["leaders"]) == n_leaders(1, len(MEANS))
    # the stopping progress stored with the last point is the learner's own: done and complete
    assert points[-1]["fraction"] == 1.0 and res["stopping"]["done"] and res["stopping"]["fraction"] == 1.0
    # thinned: at most max_points, the first, the last and the stopping point kept, in order
    few = study.history(eid, max_points=7)["series"][0]["points"]
    assert len(few) <= 7 and few[0] == points[0] and few[-1] == points[-1]
    assert [p["n_answers"] for p in few] == sorted(p["n_answers"] for p in few)


def test_history_keeps_every_learner_and_none_when_turned_off(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, history_every=10)
    spec = {**_spec(), "items": _items(len(MEANS)), "algorithms": [
        {"label": "a", "algorithm": "lil_ucb", "share": 1}, {"label": "b", "algorithm": "lucb1", "share": 1}]}
    spec.pop("algorithm")
    spec.pop("params")
    eid, _ = study.create_experiment(spec)
    _run(study, eid, clock, MEANS, np.random.default_rng(2), 200)
    hist = study.history(eid)
    assert [s["algorithm"] for s in hist["series"]] == ["a", "b"]
    for s in hist["series"]:
        assert s["points"] and all(p["n_answers"] % 10 == 0 for p in s["points"])
    only_b = study.history(eid, learner="b")
    assert [s["algorithm"] for s in only_b["series"]] == ["b"]
    rows = list(csv.reader(io.StringIO("\n".join(",".join(map(str, r)) for r in study.export_history(eid)))))
    assert rows[0][:7] == ["algorithm", "n_answers", "time", "done", "stopping_fraction", "stopping_margin", "rank"]
    assert {r[0] for r in rows[1:]} == {"a", "b"}

    off = open_study(sqlite_url.replace(".sqlite", "-off.sqlite"), clock=clock, history_every=0)
    eid2, _ = off.create_experiment({**_spec(), "items": _items(len(MEANS))})
    _run(off, eid2, clock, MEANS, np.random.default_rng(2), 100)
    assert off.history(eid2)["series"][0]["points"] == []


def test_activity_counts_participants_and_response_times(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock)
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 60}), "items": _items(len(MEANS))})
    # participant p waits (p % 3 + 1) seconds before each answer; each answers 20 (3 participants, 60 answers:
    # once every item is seen, the default repeat policy shows items again)
    n = _run(study, eid, clock, MEANS, np.random.default_rng(3), 60, wait_ms=lambda p: 1000 * (p % 3 + 1))
    assert n == 60
    act = study.activity(eid)
    assert sum(act["answers_per_item"]) == 60 and len(act["answers_per_item"]) == len(MEANS)
    assert act["answers_per_item"] == [12] * 5  # round-robin allocation
    part = act["participants"]
    assert part["n"] == 3 and sum(part["answers"]["counts"]) == 3
    assert part["answers"]["median"] == 20 and part["answers"]["max"] == 20
    assert part["answers"]["edges"][-2:] == [19.5, 20.5] and part["answers"]["counts"][-1] == 3
    rs = act["response_seconds"]
    assert rs["n"] == 60 and sum(rs["counts"]) + rs["above"] == 60
    assert rs["median"] == 2.0 and rs["p90"] == 3.0
    assert sum(b[1] for b in act["timeline"]["buckets"]) == 60
    rows = list(study.export_participants(eid))
    head = rows[0]
    means = sorted(float(r[head.index("mean_response_seconds")]) for r in rows[1:])
    assert means == [1.0, 2.0, 3.0]


def test_ranking_search_sort_and_paging(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock)
    n_items = 150
    means = np.linspace(0.05, 0.95, n_items)
    items = [{"id": f"c{i:03d}", "text": f"caption {i} about {'cats' if i % 10 == 0 else 'dogs'}"}
             for i in range(n_items)]
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 600}), "items": items})
    rng = np.random.default_rng(4)
    for _ in range(600):
        pid = study.new_participant()
        q = study.next_query(eid, pid)
        arm = int(q["item"]["id"][1:])
        study.answer(q["query_id"], pid, "funny" if rng.random() < means[arm] else "unfunny")
    full = study.results(eid)["ranking"]
    rank_of = {r["arm"]: r["rank"] for r in full}
    # paging reaches item 150
    last = study.results(eid, limit=30, offset=120)
    assert last["n_matching"] == 150 and [r["rank"] for r in last["ranking"]] == list(range(121, 151))
    # search: by text and by id, ranks stay the learner's
    cats = study.results(eid, q="CATS", limit=30)
    assert cats["n_matching"] == 15 and all("cats" in r["text"] for r in cats["ranking"])
    assert [r["rank"] for r in cats["ranking"]] == sorted(rank_of[r["arm"]] for r in cats["ranking"])
    assert [r["id"] for r in study.results(eid, q="c149")["ranking"]] == ["c149"]
    # sort by each column, both ways; missing values last
    for sort in ("text", "mean", "lower", "upper", "count", "label:funny"):
        for order in ("asc", "desc"):
            rows = study.results(eid, sort=sort, order=order)["ranking"]
            assert sorted(r["arm"] for r in rows) == list(range(n_items))
            key = {"text": lambda r: r["text"].casefold(), "count": lambda r: r["count"],
                   "label:funny": lambda r: r["labels"]["funny"]}.get(sort, lambda r, s=sort: r[s])
            vals = [key(r) for r in rows if key(r) is not None]
            assert vals == sorted(vals, reverse=order == "desc")
            assert all(key(r) is None for r in rows[len(vals):])
    with pytest.raises(BadRequest):
        study.results(eid, sort="nonsense")


class _Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 200

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    handler = type("Hook", (_Hook,), {"received": [], "status": 200})
    srv = HTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield handler, f"http://127.0.0.1:{srv.server_address[1]}/hook?key=abc"
    srv.shutdown()


def test_auto_stop_and_webhook_called_once(db_url, hook):
    handler, url = hook
    clock = Clock()
    hooks = {"webhooks": True, "webhook_allow_internal": True}  # the receiver is on the loopback
    study = open_study(db_url, clock=clock, **hooks)
    other = open_study(db_url, clock=clock, **hooks)  # a second server process on the same database
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 25}), "items": _items(len(MEANS))})
    on_done = study.set_on_done(eid, True, url)
    assert len(on_done.pop("webhook_secret")) >= 43  # 32 random bytes, shown this once
    assert on_done == {"auto_stop": True, "webhook_url": url, "webhook": None}
    _run(study, eid, clock, MEANS, np.random.default_rng(5), 24)
    assert study.call_webhooks() == 0 and study.results(eid)["status"] == "active"  # one answer to go
    _run(study, eid, clock, MEANS, np.random.default_rng(5), 1)
    res = study.results(eid)
    assert res["done"] and res["status"] == "stopped" and res["learner_done"]["at_answers"] == 25
    assert other.call_webhooks() + study.call_webhooks() + other.call_webhooks() == 1
    assert len(handler.received) == 1
    body = handler.received[0]
    assert body["event"] == "learners_stopped" and body["experiment_id"] == eid and body["status"] == "stopped"
    assert body["learners"][0]["stopped_at_answers"] == 25 and len(body["learners"][0]["recommendation"]) == 1
    done = study.results(eid)["on_done"]["webhook"]
    assert done["status"] == 200 and done["error"] is None
    # a new URL is called once more; the same URL again is not (and keeps its secret, not shown again)
    again = study.set_on_done(eid, True, url)
    assert again["webhook"] is not None and again["webhook_secret"] is None and study.call_webhooks() == 0
    study.set_on_done(eid, True, url + "&again=1")
    assert study.call_webhooks() == 1 and len(handler.received) == 2


def test_without_auto_stop_the_experiment_stays_active_until_asked(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock)
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 10}), "items": _items(len(MEANS))})
    _run(study, eid, clock, MEANS, np.random.default_rng(6), 10)
    res = study.results(eid)
    assert res["done"] and res["status"] == "active" and res["on_done"]["auto_stop"] is False
    study.set_on_done(eid, True, None)  # the learners have stopped already: the experiment stops now
    assert study.results(eid)["status"] == "stopped"


def test_failing_webhook_is_retried_then_recorded(sqlite_url, hook, monkeypatch):
    handler, url = hook
    handler.status = 503
    monkeypatch.setattr(webhooks.time, "sleep", lambda s: None)
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, webhooks=True, webhook_allow_internal=True)
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 5}), "items": _items(len(MEANS))})
    study.set_on_done(eid, False, url)
    _run(study, eid, clock, MEANS, np.random.default_rng(7), 5)
    assert study.call_webhooks() == 1
    assert len(handler.received) == webhooks.TRIES
    call = study.results(eid)["on_done"]["webhook"]
    assert call["status"] == 503 and "503" in call["error"]
    assert study.call_webhooks() == 0  # recorded: not called again


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "/relative", "ftp://x/y", "http://user:pw@host/x", "http://"])
def test_webhook_url_is_checked(sqlite_url, bad):
    study = open_study(sqlite_url, webhooks=True)
    eid, _ = study.create_experiment({**_spec(), "items": _items(3)})
    with pytest.raises(BadRequest):
        study.set_on_done(eid, False, bad)
    off = open_study(sqlite_url, webhooks=False)
    with pytest.raises(Forbidden):
        off.set_on_done(eid, False, "https://example.org/hook")


def test_http_endpoints_and_openapi(sqlite_url):
    with TestClient(create_app(Settings(database_url=sqlite_url, history_every=5, webhooks=True,
                                       create_rate_per_second=0))) as client:
        _http_checks(client)


def _http_checks(client):
    r = client.post("/api/experiments", json={**_spec("uniform_allocation", {"budget": 20}),
                                              "items": _items(len(MEANS))})
    assert r.status_code == 201, r.text
    eid, token = r.json()["id"], r.json()["owner_token"]
    auth = {"Authorization": f"Bearer {token}"}
    pid = client.post("/api/participants").json()["participant_id"]
    for _ in range(20):
        q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        if q["state"] != "ok":
            pid = client.post("/api/participants").json()["participant_id"]
            q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        a = client.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
        assert a.status_code == 200, a.text
    h = client.get(f"/api/experiments/{eid}/history", headers=auth)
    assert h.status_code == 200 and [p["n_answers"] for p in h.json()["series"][0]["points"]] == [5, 10, 15, 20]
    assert client.get(f"/api/experiments/{eid}/history").status_code == 401
    a = client.get(f"/api/experiments/{eid}/activity", headers=auth).json()
    assert sum(a["answers_per_item"]) == 20
    csv_text = client.get(f"/api/experiments/{eid}/history.csv", headers=auth).text
    assert csv_text.splitlines()[0].startswith("algorithm,n_answers,time,done")
    r = client.post(f"/api/experiments/{eid}/on-done", headers=auth, json={"auto_stop": True, "webhook_url": None})
    assert r.status_code == 200 and client.get(f"/api/experiments/{eid}/results", headers=auth).json()["status"] \
        == "stopped"
    assert client.post(f"/api/experiments/{eid}/on-done", headers=auth,
                       json={"webhook_url": "javascript:x"}).status_code == 422
    res = client.get(f"/api/experiments/{eid}/results?sort=bogus", headers=auth)
    assert res.status_code == 422
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("history", "history.csv", "activity", "on-done"):
        assert f"/api/experiments/{{eid}}/{p}" in paths
    schema = paths["/api/experiments/{eid}/history"]["get"]["responses"]["200"]["content"]["application/json"]
    assert schema["schema"]["$ref"].endswith("HistoryOut")


def test_history_read_incrementally_equals_a_fresh_read(db_url):
    """A server process keeps the points it has read and reads only newer ones: after each batch of answers
    its history equals that of a process reading every point afresh, thinned or not."""
    clock = Clock()
    study = open_study(db_url, clock=clock, history_every=5)
    eid, _ = study.create_experiment({**_spec("uniform_allocation", {"budget": 600}), "items": _items(len(MEANS))})
    rng = np.random.default_rng(1)
    for batch in range(4):
        _run(study, eid, clock, MEANS, rng, 37)
        fresh = open_study(db_url, clock=clock, history_every=5)
        for max_points in (100_000, 7):
            got, want = study.history(eid, max_points=max_points), fresh.history(eid, max_points=max_points)
            assert got == want, (batch, max_points)
        fresh.engine.dispose()
    assert len(study.history(eid, max_points=100_000)["series"][0]["points"]) == (4 * 37) // 5
