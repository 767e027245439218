"""Issue #41 item 6: admin actions and participants never deadlock.

An outside probe deleted an experiment under load on PostgreSQL and got ``DeadlockDetected`` (five
requests answered 503): the delete locked the experiment's rows in another order than the asks and
answers running on it. Here participants ask and answer at full speed on several multi-learner
experiments of a real server while an admin thread pauses, resumes, sets the on-done action of,
archives and deletes them, round after round: no request may fail with 503 (the lock wait is long,
so only a deadlock can produce one), the server log must not mention a deadlock, every acknowledged
answer is stored exactly once, and the deleted experiments leave no row behind.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import httpx
import pytest
import sqlalchemy as sa

from purebandits.service.models import events, experiments, learners, queries

ITEMS = [f"caption {i}" for i in range(12)]
LEARNERS = [{"label": "A", "algorithm": "random_sampling"}, {"label": "B", "algorithm": "random_sampling"},
            {"label": "C", "algorithm": "random_sampling"}]
#: a long lock wait: a lock held by a legitimate (slow, the machine is loaded) transaction is waited for, so a
#: 503 can only come from a deadlock the database broke
ENV = {"PUREBANDITS_DB_WAIT_SECONDS": "20", "PUREBANDITS_VERIFY_ON_START": "0"}
ROUNDS = 6
PER_ROUND = 4
PARTICIPANTS = 16


def _create(client: httpx.Client, name: str) -> tuple[int, str]:
    r = client.post("/api/experiments", json={"name": name, "items": ITEMS, "algorithms": LEARNERS})
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["owner_token"]


@pytest.mark.slow  # a live server under 16 participants at full speed for six rounds of admin actions
def test_admin_actions_under_participant_load_never_deadlock(db_url, server_cls, tmp_path):
    live: dict[int, str] = {}           # experiment id -> name, while participants may use it
    deleted: set[str] = set()           # names of the deleted experiments (SQLite reuses a deleted one's id)
    acked: dict[str, set[str]] = defaultdict(set)  # experiment name -> query ids whose answers were acknowledged
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def participant(url: str, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=url, timeout=120) as c:
            pid = c.post("/api/participants").json()["participant_id"]
            while not stop.is_set():
                with lock:
                    choices = list(live.items())
                if not choices:
                    time.sleep(0.01)
                    continue
                eid, name = rng.choice(choices)
                r = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid})
                if r.status_code >= 500:
                    failures.append(f"ask {eid}: {r.status_code} {r.text}")
                    continue
                if r.status_code != 200 or r.json().get("state") != "ok":
                    continue  # gone (404), paused, archived, exhausted: all fine
                qid = r.json()["query_id"]
                r = c.post(f"/api/queries/{qid}/answer", json={"participant_id": pid, "label": "funny"})
                if r.status_code >= 500:
                    failures.append(f"answer {eid}: {r.status_code} {r.text}")
                elif r.status_code == 200:
                    with lock:
                        acked[name].add(qid)

    def admin_call(c: httpx.Client, method: str, path: str, token: str, **kw) -> None:
        r = c.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)
        if r.status_code >= 500:
            failures.append(f"{method} {path}: {r.status_code} {r.text}")
        # 409 (archived / stopped) is an answer, not a failure
        assert r.status_code in (200, 409) or r.status_code >= 500, (method, path, r.status_code, r.text)

    srv = server_cls(db_url, env=ENV, log_dir=tmp_path).start(timeout=300)  # a cold start compiles learners
    try:
        threads = [threading.Thread(target=participant, args=(srv.url, i), daemon=True) for i in range(PARTICIPANTS)]
        for t in threads:
            t.start()
        try:
            with httpx.Client(base_url=srv.url, timeout=120) as c:
                for rnd in range(ROUNDS):
                    batch, names = {}, {}
                    for i in range(PER_ROUND):
                        eid, token = _create(c, f"round {rnd} #{i}")
                        batch[eid], names[eid] = token, f"round {rnd} #{i}"
                    with lock:
                        live.update(names)
                    time.sleep(0.5)  # participants get going on them
                    for eid, token in batch.items():
                        admin_call(c, "POST", f"/api/experiments/{eid}/pause", token)
                        admin_call(c, "POST", f"/api/experiments/{eid}/resume", token)
                        admin_call(c, "POST", f"/api/experiments/{eid}/on-done", token,
                                   json={"auto_stop": bool(rnd % 2)})
                    time.sleep(0.3)
                    first, *rest = batch
                    admin_call(c, "POST", f"/api/experiments/{first}/archive", batch[first])
                    for eid in rest:  # deleted while the participants still hit them
                        admin_call(c, "DELETE", f"/api/experiments/{eid}", batch[eid])
                        deleted.add(names[eid])
                    with lock:
                        live.clear()  # the next round's experiments get the whole load
        finally:
            stop.set()
            for t in threads:
                t.join(120)
    finally:
        srv.stop()
    log = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("server-*.log"))

    deadlocks = [line for line in log.splitlines() if "deadlock" in line.lower()]
    assert not deadlocks, deadlocks[:5]
    assert not failures, failures[:10]
    assert sum(len(v) for v in acked.values()) > 0
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            gone = conn.execute(sa.select(sa.func.count()).select_from(experiments)
                                .where(experiments.c.name.in_(deleted))).scalar()
            assert gone == 0, gone
            known = sa.select(experiments.c.id)
            for table in (learners, queries, events):  # no row of a deleted experiment left behind
                left = conn.execute(sa.select(sa.func.count()).select_from(table)
                                    .where(table.c.experiment_id.not_in(known))).scalar()
                assert left == 0, (table.name, left)
            ids = dict(conn.execute(sa.select(experiments.c.name, experiments.c.id)).all())
            kept = [name for name in acked if name not in deleted]
            assert kept
            for name in kept:
                eid = ids[name]
                stored = dict(conn.execute(sa.select(queries.c.id, queries.c.status)
                                           .where(queries.c.experiment_id == eid)).all())
                answer_events = defaultdict(int)
                for (qid,) in conn.execute(sa.select(events.c.query_id).where(
                        events.c.experiment_id == eid, events.c.kind == "answer")):
                    answer_events[qid] += 1
                for qid in acked[name]:
                    assert stored.get(qid) == "answered", (eid, qid, stored.get(qid))
                    assert answer_events[qid] == 1, (eid, qid, answer_events[qid])
    finally:
        engine.dispose()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-x", "-q"])
