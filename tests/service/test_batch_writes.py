"""A batch's writes are buffered and sent one statement per kind; on PostgreSQL its transaction is pipelined.

:class:`~purebandits.service.eventlog.BatchWrites` holds a transaction's event rows and query inserts /
updates until the transaction reads or ends; a read sends them first. These tests hold the batch to what
the same requests give one at a time (outcomes, the rows in the database, the learner and its replay) in the
cases where a read follows the batch's own writes, check that nothing is committed when a buffered statement
fails, and that on PostgreSQL the statements a batch sends do not grow with its size.
"""

from __future__ import annotations

import itertools
import os
import socket
import tempfile
import uuid

import pytest
import sqlalchemy as sa
from psycopg.pq import Trace
from study_support import Clock, open_study

from purebandits.service import eventlog
from purebandits.service.models import events, queries

ITEMS = [f"caption {i}" for i in range(4)]


def _outcome(res):
    if isinstance(res, Exception):
        return type(res).__name__
    if "status" in res:
        return ("answer", res["status"], res["label"])
    return (res["state"], res.get("item", {}).get("id"), res.get("n_answered"))


def _rows(study, eid):
    with study.engine.connect() as conn:
        qs = conn.execute(sa.select(queries.c.participant_id, queries.c.arm, queries.c.status, queries.c.label,
                                    queries.c.ask_seq, queries.c.end_seq)
                          .where(queries.c.experiment_id == eid).order_by(queries.c.ask_seq)).all()
        evs = conn.execute(sa.select(events.c.seq, events.c.kind, events.c.arm, events.c.label, events.c.reward,
                                     events.c.passed)
                           .where(events.c.experiment_id == eid).order_by(events.c.seq)).all()
    return [tuple(r) for r in qs], [tuple(r) for r in evs]


def test_a_read_after_the_batchs_own_writes_sees_them(db_url, monkeypatch):
    """Successive elimination on 4 items hands out one round of 4 pulls, then waits; with
    ``reissue_after_seconds = 0`` the fifth ask of the SAME batch cancels the oldest pending query, which
    that batch inserted itself (still buffered: the read sends it first), and serves its arm again. A later
    batch expires the rest (lazy expiry's read goes out with the locks), asks, and answers two of the
    expired queries (410: the batch's view saw them pending and was told of the expiry). Outcomes, rows,
    the learner and its replay equal the same requests one at a time.
    Query ids count up (the oldest pending query is the first by creation time, then by id), so both runs
    reissue the same one."""
    clock = Clock()
    spec = {"name": "own writes", "items": ITEMS, "seed": 3, "algorithm": "successive_elimination",
            "repeats": "not_consecutive", "query_expiry_seconds": 60}
    got, rows, states = {}, {}, {}
    for one_by_one in (False, True):
        ids = itertools.count((1 + one_by_one) << 64)
        monkeypatch.setattr(uuid, "uuid4", lambda ids=ids: uuid.UUID(int=next(ids)))
        study = open_study(db_url, clock=clock, reissue_after_seconds=0)
        eid = study.create_experiment(spec)[0]
        pids = [study.new_participant(f"w{i}") for i in range(6)]
        clock.ms = 1_700_000_000_000

        def run(ops, study=study, eid=eid, one_by_one=one_by_one):
            return [study.run_batch(eid, [op])[0] for op in ops] if one_by_one else study.run_batch(eid, ops)

        first = run([(0, ("ask", p)) for p in pids[:5]])
        out = [_outcome(r) for r in first]
        assert out[4][0] == "ok" and out[4][1] == out[0][1]  # the first query's arm, served again
        clock.ms += 61_000  # every pending query is now past its expiry
        second = run([(0, ("ask", pids[5])), (0, ("answer", pids[1], first[1]["query_id"], "funny")),
                      (0, ("answer", pids[0], first[0]["query_id"], "funny"))])
        out += [_outcome(r) for r in second]
        got[one_by_one], rows[one_by_one] = out, _rows(study, eid)
        learner = study._cache[(eid, 0)].learner
        assert study.replay(eid).state_json() == learner.state_json()
        states[one_by_one] = learner.state_json()
        study.close()
        study.engine.dispose()
    assert got[False] == got[True]
    assert "Gone" in got[False]
    assert rows[False] == rows[True]
    assert states[False] == states[True]
    statuses = [r[2] for r in rows[False][0]]
    assert statuses.count("expired") >= 2  # the reissued one and the lazily expired ones


def test_a_failing_buffered_write_commits_nothing(db_url, monkeypatch):
    """If a buffered statement fails when it is sent, the whole batch fails: no event, no query, no version."""
    study = open_study(db_url)
    eid = study.create_experiment({"name": "fail", "items": ITEMS, "seed": 1, "repeats": "not_consecutive"})[0]
    pids = [study.new_participant(f"p{i}") for i in range(3)]
    before = _rows(study, eid)
    sql = dict(eventlog._BULK_SQL)
    sql["ins_query"] = sql["ins_query"].replace("INSERT INTO queries", "INSERT INTO no_such_table")
    monkeypatch.setattr(eventlog, "_BULK_SQL", sql)
    bad = dict(study._x.sql)
    bad["ins_query"] = bad["ins_query"].replace("INSERT INTO queries", "INSERT INTO no_such_table")
    monkeypatch.setattr(study._x, "sql", bad)
    with pytest.raises(sa.exc.DBAPIError):
        study.run_batch(eid, [(0, ("ask", p)) for p in pids])
    monkeypatch.undo()
    assert _rows(study, eid) == before
    assert (eid, 0) not in study._cache  # the learner that took the asks is dropped, rebuilt from the log
    res = study.run_batch(eid, [(0, ("ask", p)) for p in pids])  # and the service goes on
    assert all(r["state"] == "ok" for r in res)
    assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()


def _client_messages(study, run) -> dict[str, int]:
    """libpq's protocol trace of ``run()`` on the study's one pooled connection: messages sent, by type."""
    with tempfile.NamedTemporaryFile("w+") as f:
        with study.engine.connect() as c:
            pgconn = c.connection.driver_connection.pgconn
            pgconn.trace(f.fileno())
            pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)  # lines: direction, length, message
        run()
        with study.engine.connect() as c:
            c.connection.driver_connection.pgconn.untrace()
        f.seek(0)
        counts: dict[str, int] = {}
        for line in f:
            parts = line.split("\t")
            if len(parts) > 2 and parts[0] == "F":
                kind = parts[2].split()[0]
                counts[kind] = counts.get(kind, 0) + 1
        return counts


@pytest.mark.postgres
def test_postgres_batch_statements_do_not_grow_with_its_size(pg_admin_url):
    """On PostgreSQL a batch of 16 asks (or answers) executes as many statements as a batch of 2, and waits
    for the server only at the pool's ping, the first flight (BEGIN, lock, reads) and the commit."""
    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine, upgrade
    from purebandits.service.study import Study
    from purebandits.testing.postgres import create_database, drop_database

    url = create_database(pg_admin_url)
    try:
        settings = Settings(database_url=url, history_every=0, snapshot_every=10**9)
        engine = make_engine(settings.url, pool_size=1, max_overflow=0)  # one connection: the traced one
        upgrade(engine)
        study = Study(engine, settings)
        eid = study.create_experiment({"name": "size", "items": [f"c{i}" for i in range(200)], "seed": 2,
                                       "repeats": "not_consecutive"})[0]
        pids = [study.new_participant(f"p{i}") for i in range(16)]
        for _ in range(6):  # past psycopg's prepare threshold, so every statement is already prepared
            res = study.run_batch(eid, [(0, ("ask", p)) for p in pids])
            study.run_batch(eid, [(0, ("answer", p, r["query_id"], "funny")) for p, r in zip(pids, res, strict=True)])
        sent = {}
        for b in (2, 16):
            got: list = []
            sent[("ask", b)] = _client_messages(
                study, lambda b=b, got=got: got.extend(study.run_batch(eid, [(0, ("ask", p)) for p in pids[:b]])))
            sent[("answer", b)] = _client_messages(
                study, lambda b=b, got=got: study.run_batch(
                    eid, [(0, ("answer", p, r["query_id"], "unfunny")) for p, r in zip(pids[:b], got, strict=True)]))
        for kind in ("ask", "answer"):
            assert sent[(kind, 2)].get("Execute") == sent[(kind, 16)].get("Execute"), sent
            # flights the client waits for: the ping (a simple query, also the trace's second checkout), the
            # first flight (a Flush to read the locks' and reads' rows) and the closing Sync with the COMMIT
            assert sent[(kind, 16)].get("Query", 0) <= 2 and sent[(kind, 16)].get("Flush", 0) <= 2, sent
        study.close()
        engine.dispose()
    finally:
        drop_database(pg_admin_url, url)


@pytest.mark.postgres
@pytest.mark.parametrize("when", ["first read", "commit"])
def test_postgres_connection_lost_mid_batch_is_a_database_error(pg_admin_url, monkeypatch, when):
    """The batch's connection breaks in the middle of the batch (at its first read of a participant's queries,
    or just before the COMMIT goes out): the batch fails with SQLAlchemy's OperationalError (the service
    answers 503, safe to retry), nothing is committed, and the next batch runs on a new connection.
    (Unwinding must not touch the invalidated connection: SQLAlchemy then refuses even ``Connection.info``.)"""
    import psycopg

    from purebandits.service import crowd as study_module
    from purebandits.testing.postgres import create_database, drop_database

    url = create_database(pg_admin_url)
    try:
        study = open_study(url)
        eid = study.create_experiment({"name": "lost", "items": ITEMS, "seed": 4, "repeats": "not_consecutive"})[0]
        pid = study.new_participant("p")
        before = _rows(study, eid)

        def kill(conn) -> None:  # the server ends the session and the socket is gone, as when PostgreSQL crashes
            driver = conn.connection.driver_connection
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [driver.info.backend_pid])
            with socket.socket(fileno=os.dup(driver.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)

        if when == "first read":
            seen = study_module._BatchQueries.seen

            def seen_after_kill(self, p):
                kill(self.conn)
                return seen(self, p)

            monkeypatch.setattr(study_module._BatchQueries, "seen", seen_after_kill)
        else:
            commit = eventlog.HotStatements.commit

            def commit_after_kill(self, conn):
                kill(conn)
                return commit(self, conn)

            monkeypatch.setattr(eventlog.HotStatements, "commit", commit_after_kill)
        with pytest.raises(sa.exc.OperationalError):
            study.run_batch(eid, [(0, ("ask", pid))])
        monkeypatch.undo()
        assert _rows(study, eid) == before
        res = study.run_batch(eid, [(0, ("ask", pid))])
        assert res[0]["state"] == "ok"
        study.close()
        study.engine.dispose()
    finally:
        drop_database(pg_admin_url, url)


@pytest.mark.postgres
def test_postgres_pool_pings_a_connection_only_after_it_sat_idle(pg_admin_url, monkeypatch):
    """The pool pings a connection at checkout only when it sat idle over ``IDLE_PING_SECONDS`` (in steady use
    that round trip is saved; a dead connection then fails its next statement as a disconnect, 503): a
    connection whose server session ended while it waited in the pool is replaced by the ping when it was
    idle long enough, and fails its next statement (OperationalError, a 503) when it was not."""
    import psycopg

    from purebandits.service import storage
    from purebandits.testing.postgres import create_database, drop_database

    url = create_database(pg_admin_url)
    engine = storage.make_engine(url, pool_size=1, max_overflow=0)
    try:
        for idle, survives in ((0.0, True), (1e9, False)):
            with engine.connect() as conn:
                backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [backend])
            monkeypatch.setattr(storage, "IDLE_PING_SECONDS", idle)
            if survives:
                with engine.connect() as conn:
                    assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != backend
            else:
                with pytest.raises(sa.exc.OperationalError), engine.connect() as conn:
                    conn.exec_driver_sql("SELECT 1").scalar()
                with engine.connect() as conn:  # the dead connection was invalidated: a new one
                    assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        engine.dispose()
        drop_database(pg_admin_url, url)
