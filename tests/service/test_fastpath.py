"""The participant fast path answers exactly as the FastAPI routes it bypasses.

A body sent as ``application/x+json`` is JSON to FastAPI but not taken by the fast path
(it only takes ``application/json``), so one app serves both paths and each request can be
made both ways and the responses compared: status, body bytes and the headers that matter.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from purebandits.service.app import create_app
from purebandits.service.fastpath import dumps, query_body
from purebandits.service.schemas import AnswerOut, QueryOut
from purebandits.service.settings import Settings

FAST = {"content-type": "application/json"}
SLOW = {"content-type": "application/x+json"}
ITEMS = [{"id": "c0", "text": "plain"}, {"id": "c1", "text": 'qu"ote \\ é ✓ \t tab', "image_url": "/img/1.png"},
         {"id": "c2", "text": "third"}]


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_123

    def __call__(self) -> int:
        return self.ms


def post(c: TestClient, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return c.post(path, content=content, headers=headers)


def same(fast: httpx.Response, slow: httpx.Response) -> None:
    """Same status, body bytes and the headers clients read."""
    assert fast.status_code == slow.status_code, (fast.text, slow.text)
    assert fast.content == slow.content
    for name in ("content-type", "retry-after", "www-authenticate"):
        assert fast.headers.get(name) == slow.headers.get(name), name


@pytest.fixture
def client(sqlite_url: str) -> Any:
    clock = Clock()
    app = create_app(Settings(database_url=sqlite_url, ask_rate_per_second=0), clock=clock)
    with TestClient(app) as c:
        c.clock = clock  # type: ignore[attr-defined]
        yield c


def make_experiment(c: TestClient, **extra: Any) -> tuple[int, dict[str, str]]:
    r = c.post("/api/experiments", json={"name": "fp", "items": ITEMS, "seed": 3, **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}


def test_ask_and_answer_match_fastapi(client: TestClient) -> None:
    c = client
    eid, auth = make_experiment(c)
    pid = c.post("/api/participants").json()["participant_id"]
    seen_image = False
    for i in range(6):
        fast = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST)
        slow = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, SLOW)
        assert fast.status_code == slow.status_code == 200
        qf, qs = fast.json(), slow.json()
        # different queries, same shape and bytes once the query ids and items are aligned
        assert list(qf) == list(qs) and qf["state"] == "ok"
        seen_image |= "image_url" in qf["item"] or "image_url" in qs["item"]
        expected = QueryOut.model_validate(qf).model_dump_json(exclude_none=True).encode()
        assert fast.content == expected
        label = ["funny", "unfunny"][i % 2]
        a_fast = post(c, f"/api/queries/{qf['query_id']}/answer", {"participant_id": pid, "label": label}, FAST)
        a_slow = post(c, f"/api/queries/{qs['query_id']}/answer", {"participant_id": pid, "label": label}, SLOW)
        assert a_fast.status_code == a_slow.status_code == 200
        assert a_fast.json().keys() == a_slow.json().keys()
        assert a_fast.content == AnswerOut.model_validate(a_fast.json()).model_dump_json().encode()
        # idempotent resubmission, through the other path
        same(post(c, f"/api/queries/{qf['query_id']}/answer", {"participant_id": pid, "label": label}, SLOW),
             a_fast)
        same(post(c, f"/api/queries/{qs['query_id']}/answer", {"participant_id": pid, "label": label}, FAST),
             a_slow)
    assert seen_image


def test_errors_match_fastapi(client: TestClient) -> None:
    c = client
    eid, auth = make_experiment(c)
    pid = c.post("/api/participants").json()["participant_id"]
    other = c.post("/api/participants").json()["participant_id"]
    q = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST).json()
    url = f"/api/queries/{q['query_id']}/answer"
    cases: list[tuple[str, Any]] = [
        (url, {"participant_id": other, "label": "funny"}),  # 403 another participant's query
        (url, {"participant_id": pid, "label": "hilarious"}),  # 422 label outside the set
        ("/api/queries/nope/answer", {"participant_id": pid, "label": "funny"}),  # 404
        (f"/api/experiments/{eid}/queries", {"participant_id": "made-up"}),  # 403 unknown participant
        ("/api/experiments/999/queries", {"participant_id": pid}),  # 404 unknown experiment
        # malformed: FastAPI answers these on both paths (the fast path hands them on)
        (f"/api/experiments/{eid}/queries", {"participant_id": pid, "extra": 1}),
        (f"/api/experiments/{eid}/queries", {"participant_id": 5}),
        (f"/api/experiments/{eid}/queries", {"participant_id": "x" * 65}),
        (f"/api/experiments/{eid}/queries", [pid]),
        (f"/api/experiments/{eid}/queries", b"{not json"),
        (f"/api/experiments/{eid}/queries", b"\xff\xfe"),
        ("/api/experiments/0/queries", {"participant_id": pid}),
        ("/api/experiments/0099/queries", {"participant_id": pid}),
        (f"/api/experiments/{2**31}/queries", {"participant_id": pid}),
        (url, {"participant_id": pid}),
        (url, {"participant_id": pid, "label": "x" * 101}),
        ("/api/queries/" + "q" * 65 + "/answer", {"participant_id": pid, "label": "funny"}),
    ]
    for path, body in cases:
        same(post(c, path, body, FAST), post(c, path, body, SLOW))
    assert post(c, url, {"participant_id": pid, "label": "funny"}, FAST).status_code == 200
    same(post(c, url, {"participant_id": pid, "label": "unfunny"}, FAST),  # 409 different label
         post(c, url, {"participant_id": pid, "label": "unfunny"}, SLOW))
    c.post(f"/api/experiments/{eid}/pause", headers=auth)
    same(post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST),
         post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, SLOW))


def test_rate_limited_matches_fastapi(sqlite_url: str) -> None:
    """429 with the same body and Retry-After on both paths (a bucket that cannot refill in the test)."""
    with TestClient(create_app(Settings(database_url=sqlite_url, ask_rate_per_second=0.001, ask_burst=2))) as c:
        eid, _ = make_experiment(c)
        pid = c.post("/api/participants").json()["participant_id"]
        assert [post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST).status_code
                for _ in range(2)] == [200, 200]
        fast = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST)
        assert fast.status_code == 429 and fast.headers["retry-after"].isdigit()
        same(fast, post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, SLOW))


def test_expired_answer_matches_fastapi(client: TestClient) -> None:
    c = client
    eid, _ = make_experiment(c, query_expiry_seconds=1)
    pid = c.post("/api/participants").json()["participant_id"]
    q1 = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST).json()
    q2 = post(c, f"/api/experiments/{eid}/queries", {"participant_id": pid}, FAST).json()
    c.clock.ms += 5000  # type: ignore[attr-defined]
    fast = post(c, f"/api/queries/{q1['query_id']}/answer", {"participant_id": pid, "label": "funny"}, FAST)
    slow = post(c, f"/api/queries/{q2['query_id']}/answer", {"participant_id": pid, "label": "funny"}, SLOW)
    assert fast.status_code == 410
    same(fast, slow)


@pytest.mark.parametrize("result", [
    {"state": "ok", "query_id": "q", "experiment_id": 1, "item": {"id": "a", "text": "t é\n\x01", "image_url": None},
     "labels": ["x", "y"], "expires_at": 1700000000.123},
    {"state": "ok", "query_id": "q", "experiment_id": 1, "item": {"id": "a", "text": "t", "image_url": "/i.png"},
     "labels": ["x"], "expires_at": 1700000300.0},
    {"state": "waiting", "retry_after": 1.0},
    {"state": "paused", "retry_after": 5.0},
])
def test_query_body_is_the_response_model(result: dict[str, Any]) -> None:
    """The bytes the fast path writes are what FastAPI's ``response_model_exclude_none`` writes."""
    assert dumps(query_body(result)) == QueryOut.model_validate(result).model_dump_json(exclude_none=True).encode()


def test_loop_connection_is_reused_and_recovers(sqlite_url: str) -> None:
    """In nowait mode (the event loop) SQLite transactions share one connection; refusals and a broken
    connection do not wedge it."""
    import asyncio

    from purebandits.service.errors import Conflict
    from purebandits.service.storage import make_engine, upgrade
    from purebandits.service.study import Study

    engine = make_engine(sqlite_url)
    upgrade(engine)

    async def main() -> None:
        study = Study(engine, Settings(database_url=sqlite_url, ask_rate_per_second=0))
        eid, _ = study.create_experiment({"name": "loop", "items": ["a", "b", "c"], "seed": 1})
        pid = study.new_participant()
        assert study._hot is None  # outside nowait: pool connections
        with study.nowait():
            q = study.next_query(eid, pid)
            assert study._hot is not None
            first = study._hot[1]
            assert study.answer(q["query_id"], pid, "funny")["status"] == "answered"
            assert study._hot[1] is first and not first.in_transaction()
            with pytest.raises(Conflict):
                study.answer(q["query_id"], pid, "unfunny")
            assert study.next_query(eid, pid)["state"] == "ok"
            first.invalidate()  # as after a driver error: the next transaction still works
            q3 = study.next_query(eid, pid)
            assert study.answer(q3["query_id"], pid, "unfunny")["status"] == "answered"
        study.close()
        assert study._hot is None
        # the log replays to the learner the loop connection's transactions built
        assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()

    asyncio.run(main())
    engine.dispose()
