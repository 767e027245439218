"""Real server processes: restart keeps the learner state; two processes on one database stay consistent."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from conftest import HTTP
from purebandits.service.settings import Settings
from purebandits.service.storage import make_engine
from purebandits.service.study import Study

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(12)]
LABELS = ["unfunny", "somewhat funny", "funny"]


def _create(url: str) -> tuple[int, dict[str, str]]:
    # 25 answers per participant on 12 items: repeats allowed, never twice in a row
    r = HTTP.post(url + "/api/experiments", json={"name": "p", "items": ITEMS, "seed": 11,
                                                   "params": {"delta": 0.05}, "repeats": "not_consecutive"})
    assert r.status_code == 201, r.text
    return r.json()["id"], {"Authorization": "Bearer " + r.json()["owner_token"]}


def _stable(results: dict) -> dict:
    return {k: v for k, v in results.items() if k not in ("now", "timeline")}


def test_restart_restores_state_counts_and_recommendation(db_url, tmp_path, server_cls):
    Server = server_cls
    with Server(db_url, log_dir=tmp_path) as srv:
        eid, auth = _create(srv.url)
        pids = [HTTP.post(srv.url + "/api/participants").json()["participant_id"] for _ in range(3)]
        pending = []
        for i in range(40):
            pid = pids[i % 3]
            if i % 9 == 4:  # a participant who leaves (their next ask would get the same query back)
                pid = HTTP.post(srv.url + "/api/participants").json()["participant_id"]
            q = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            assert q["state"] == "ok"
            if i % 9 == 4:
                pending.append((pid, q["query_id"]))  # left unanswered across the restart
                continue
            r = HTTP.post(f"{srv.url}/api/queries/{q['query_id']}/answer",
                           json={"participant_id": pid, "label": LABELS[(i * 7) % 3]})
            assert r.status_code == 200
        before_state = HTTP.get(f"{srv.url}/api/experiments/{eid}/state", headers=auth).json()
        before = _stable(HTTP.get(f"{srv.url}/api/experiments/{eid}/results", headers=auth).json())
    assert before["n_pending"] == len(pending)
    with Server(db_url, log_dir=tmp_path) as srv:
        after_state = HTTP.get(f"{srv.url}/api/experiments/{eid}/state", headers=auth).json()
        after = _stable(HTTP.get(f"{srv.url}/api/experiments/{eid}/results", headers=auth).json())
        assert after_state == before_state
        assert after == before
        # a query issued before the restart can still be answered
        pid, qid = pending[0]
        r = HTTP.post(f"{srv.url}/api/queries/{qid}/answer", json={"participant_id": pid, "label": "funny"})
        assert r.status_code == 200
        res = HTTP.get(f"{srv.url}/api/experiments/{eid}/results", headers=auth).json()
        assert res["n_answers"] == before["n_answers"] + 1


@pytest.mark.parametrize("n_threads", [6])
def test_two_processes_one_database(db_url, tmp_path, n_threads, server_cls):
    """Participants alternate between two server processes; every acknowledged answer counts once."""
    a = server_cls(db_url, log_dir=tmp_path).start()
    b = server_cls(db_url, log_dir=tmp_path).start()
    try:
        eid, auth = _create(a.url)
        acked: list[str] = []
        errors: list[str] = []
        lock = threading.Lock()

        def post(c: httpx.Client, url: str, body: dict) -> httpx.Response:
            """As the rating page does: a 503 (the database was busy past the bound; nothing acknowledged) is
            retried after its Retry-After; an ask then gets the same pending query, an answer counts once."""
            for _ in range(10):
                r = c.post(url, json=body)
                if r.status_code != 503:
                    return r
                time.sleep(min(2.0, float(r.headers.get("Retry-After", "1"))))
            return r

        def participant(t: int) -> None:
            servers = [a.url, b.url]
            with httpx.Client(timeout=60) as c:
                pid = c.post(servers[t % 2] + "/api/participants").json()["participant_id"]
                for i in range(25):
                    ask_url, answer_url = servers[(t + i) % 2], servers[(t + i + 1) % 2]
                    q = post(c, f"{ask_url}/api/experiments/{eid}/queries", {"participant_id": pid})
                    if q.status_code != 200 or q.json()["state"] != "ok":
                        errors.append(f"ask {q.status_code} {q.text}")
                        continue
                    qid = q.json()["query_id"]
                    r = post(c, f"{answer_url}/api/queries/{qid}/answer",
                             {"participant_id": pid, "label": LABELS[(t + i) % 3]})
                    if r.status_code == 200:
                        with lock:
                            acked.append(qid)
                    else:
                        errors.append(f"answer {r.status_code} {r.text}")

        threads = [threading.Thread(target=participant, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(acked) == len(set(acked)) == n_threads * 25
        state_a = HTTP.get(f"{a.url}/api/experiments/{eid}/state", headers=auth).json()
        state_b = HTTP.get(f"{b.url}/api/experiments/{eid}/state", headers=auth).json()
        res = HTTP.get(f"{b.url}/api/experiments/{eid}/results", headers=auth).json()
    finally:
        a.stop()
        b.stop()
    assert state_a == state_b
    # an ask and an answer per rating, and an ask and a cancel per candidate passed over (repeat policy)
    assert state_a["version"] >= 2 * len(acked) and state_a["version"] % 2 == 0
    assert res["n_answers"] == res["n_told"] == len(acked) and res["n_pending"] == 0
    study = Study(make_engine(Settings(database_url=db_url).url), Settings(database_url=db_url))
    assert study.replay(eid).state_dict() == state_a["state"]
