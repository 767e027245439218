"""The CSV downloads are streamed as they are read (a contest's million answers are 165 MB), with the same
rows and cells as the study's exports, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient
from study_support import Clock

from conftest import HTTP
from purebandits.service.app import create_app
from purebandits.service.routes import experiments as routes
from purebandits.service.settings import Settings

ZERO_RATES = {"ask_rate_per_second": 0, "participant_rate_per_second": 0, "create_rate_per_second": 0}


def test_csv_downloads_stream_in_chunks_with_every_row(db_url, monkeypatch):
    monkeypatch.setattr(routes, "CSV_CHUNK_ROWS", 7)  # many chunks for a few dozen rows
    clock = Clock()
    items = [{"id": "=HYPERLINK(1)" if i == 2 else f"c{i}", "text": f"caption {i}"} for i in range(6)]
    with TestClient(create_app(Settings(database_url=db_url, **ZERO_RATES), clock=clock)) as c:
        r = c.post("/api/experiments", json={"name": "streamed", "items": items, "seed": 2,
                                             "answers_per_participant": 4})
        eid, token = r.json()["id"], r.json()["owner_token"]
        auth = {"Authorization": f"Bearer {token}"}
        for p in range(12):
            pid = c.post("/api/participants", json={}).json()["participant_id"]
            for j in range(1 + p % 5):
                q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
                if q["state"] != "ok":
                    break
                clock.ms += 700 + 100 * j
                r = c.post(f"/api/queries/{q['query_id']}/answer",
                           json={"participant_id": pid, "label": ["unfunny", "funny"][(p + j) % 2]})
                assert r.status_code == 200, r.text
        study = c.app.state.study
        expected = {"answers.csv": list(study.export_answers(eid)),
                    "participants.csv": list(study.export_participants(eid))}
        assert len(expected["answers.csv"]) > 3 * 7 and len(expected["participants.csv"]) > 7
        for name, rows in expected.items():
            chunks = []
            with c.stream("GET", f"/api/experiments/{eid}/{name}", headers=auth) as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
                assert "content-length" not in r.headers  # streamed, not built whole
                assert r.headers["content-disposition"] == f'attachment; filename="experiment-{eid}-{name}"'
                chunks = list(r.iter_raw())
            got = list(csv.reader(io.StringIO(b"".join(chunks).decode())))
            assert got == [[str(routes.neutralize(v)) for v in row] for row in rows], name
            if name == "answers.csv":  # an item id a spreadsheet would run is written inert
                assert "'=HYPERLINK(1)" in {row[5] for row in got[1:]}
        r = c.get(f"/api/experiments/{eid + 1}/answers.csv", headers=auth)  # refused before any row
        assert r.status_code == 401 and r.headers["content-type"] == "application/json"


def test_csv_chunks_keep_every_row_and_cell():
    rows = [["a", "=1+1", 3, None, 2.5, "x,y", 'q"uote', "line\nbreak"]] * 2_501
    whole = io.StringIO()
    csv.writer(whole, lineterminator="\n").writerows([routes.neutralize(c) for c in row] for row in rows)
    chunks = list(routes.csv_chunks(iter(rows)))
    assert len(chunks) == 3 and b"".join(chunks).decode() == whole.getvalue()
    assert list(routes.csv_chunks(iter([]))) == []


def test_at_most_max_exports_stream_at_once_and_slots_come_back(monkeypatch):
    """Each streamed download holds a database connection until it is read, so a server streams at most
    MAX_EXPORTS at once (429 with Retry-After beyond, its rows never opened); a slot comes back when its
    download is read to the end or dropped unread (a client gone before the first byte)."""
    import asyncio
    import gc
    import threading

    from purebandits.service.errors import RateLimited

    monkeypatch.setattr(routes, "_exports", threading.BoundedSemaphore(2))
    opened = []

    def rows():
        opened.append(True)  # where an export takes its connection
        yield ["a", "b"]
        yield [1, 2]

    def refused() -> bool:
        gen = rows()
        try:
            routes._csv(gen, "x.csv")
        except RateLimited as exc:
            assert exc.retry_after > 0 and gen.gi_frame is None  # closed, never started
            return True
        return False

    async def drain(it):
        return b"".join([c async for c in it])

    first, second = routes._csv(rows(), "1.csv"), routes._csv(rows(), "2.csv")
    assert refused() and opened == []
    assert asyncio.run(drain(first.body_iterator)) == b"a,b\n1,2\n"  # read to the end: its slot is back
    third = routes._csv(rows(), "3.csv")
    assert refused()
    del second, third  # dropped unread
    gc.collect()
    kept = [routes._csv(rows(), f"{i}.csv") for i in range(2)]
    assert refused() and len(kept) == 2


def _open_transactions(study) -> int:
    """Read transactions other connections hold on the study's database: on SQLite, whether a reader keeps
    the write-ahead log from being checkpointed whole (``PRAGMA wal_checkpoint(TRUNCATE)`` is busy), on
    PostgreSQL the sessions with a transaction open."""
    import sqlite3

    import sqlalchemy as sa

    url = study.engine.url
    if url.get_backend_name() == "sqlite":
        con = sqlite3.connect(url.database, timeout=0.05)
        try:
            busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            con.close()
        return int(busy)
    with sa.create_engine(url, poolclass=sa.pool.NullPool).connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL")).scalar())


def test_a_slow_download_does_not_hold_its_transaction(db_url, monkeypatch):
    """A client that reads one chunk and then waits (a phone on a slow link) no longer keeps the export's
    read transaction open: once the server has read the rows, SQLite's log can be checkpointed whole and
    PostgreSQL has no transaction open, while the client still gets exactly the rows of the moment its
    download started (an answer given meanwhile is in the next download, not this one)."""
    import asyncio
    import time

    from purebandits.service import spool

    monkeypatch.setattr(routes, "CSV_CHUNK_ROWS", 3)
    monkeypatch.setattr(spool, "READ_SIZE", 64)  # the client takes a small piece at a time
    clock = Clock()
    with TestClient(create_app(Settings(database_url=db_url, **ZERO_RATES), clock=clock)) as c:
        eid = c.post("/api/experiments", json={"name": "slow", "items": [f"c{i}" for i in range(5)],
                                               "seed": 3}).json()["id"]

        def answer() -> None:
            pid = c.post("/api/participants", json={}).json()["participant_id"]
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            clock.ms += 900
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
            assert r.status_code == 200, r.text

        for _ in range(30):
            answer()
        study = c.app.state.study
        expected = b"".join(routes.csv_chunks(study.export_answers(eid)))
        loop = asyncio.new_event_loop()
        try:
            body = routes._csv(study.export_answers(eid), "answers.csv").body_iterator
            got = [loop.run_until_complete(body.__anext__())]  # the first piece, then the client waits
            deadline = time.monotonic() + 20
            answer()  # the contest goes on: the log gains frames the download's snapshot does not have
            while _open_transactions(study) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _open_transactions(study) == 0, "the slow download still holds its read transaction"

            async def rest() -> list[bytes]:
                return [piece async for piece in body]

            got += loop.run_until_complete(rest())
        finally:
            loop.close()
        assert len(got) > 10 and b"".join(got) == expected  # the rows of its start, none given meanwhile
        assert len(list(study.export_answers(eid))) == 1 + 31


def test_a_download_being_sent_holds_no_slot_and_what_downloads_hold_on_disk_is_capped(monkeypatch):
    """The MAX_EXPORTS slots guard the reading of rows (a connection and CPU), not the sending: a client that
    reads a byte a minute holds none once its rows are read. What the downloads being sent hold in their
    files is capped per process (MAX_SPOOLED_BYTES): beyond it, 429 until some are read or dropped."""
    import asyncio
    import gc
    import threading
    import time

    from purebandits.service import spool
    from purebandits.service.errors import RateLimited

    monkeypatch.setattr(routes, "_exports", threading.BoundedSemaphore(1))
    monkeypatch.setattr(spool, "READ_SIZE", 16)
    rows = [["row", i] for i in range(200)]
    whole = b"".join(routes.csv_chunks(iter(rows)))
    base = spool.spooled_bytes()  # spools other tests of this process may still hold
    loop = asyncio.new_event_loop()

    async def rest(it) -> bytes:
        return b"".join([c async for c in it])

    try:
        slow = routes._csv(iter(rows), "slow.csv").body_iterator
        got = loop.run_until_complete(slow.__anext__())  # one piece, then the client waits
        deadline = time.monotonic() + 10
        while not routes._exports.acquire(blocking=False):  # its rows are read into the file meanwhile
            assert time.monotonic() < deadline, "the slot never came back"
            time.sleep(0.01)
        routes._exports.release()
        assert spool.spooled_bytes() == base + len(whole)
        other = routes._csv(iter(rows), "other.csv")  # the one slot is free again although slow is being sent
        assert loop.run_until_complete(rest(other.body_iterator)) == whole
        monkeypatch.setattr(routes, "MAX_SPOOLED_BYTES", base + 10)
        opened = []

        def refused_rows():
            opened.append(True)
            yield ["x"]

        with pytest.raises(RateLimited, match="MB") as exc:
            routes._csv(refused_rows(), "refused.csv")
        assert exc.value.retry_after > 0 and opened == []
        got += loop.run_until_complete(rest(slow))  # read to its end: its file is removed
        assert got == whole and spool.spooled_bytes() == base
        kept = routes._csv(iter(rows), "kept.csv")  # accepted again
        del kept  # dropped unread: its slot comes back
        gc.collect()
        assert routes._exports.acquire(blocking=False)
        routes._exports.release()
    finally:
        loop.close()


def test_a_client_gone_mid_download_leaves_no_file_behind(sqlite_url, monkeypatch):
    """Under uvicorn, a client that reads part of a download and hangs up: the download's spool is closed
    when the response ends (Starlette leaves its iterator to the garbage collector, which on an idle server
    kept a million answers' 167 MB file, and before the spool the transaction, for as long as it liked)."""
    import socket
    import time

    from study_support import LiveApp

    from purebandits.service import spool
    from purebandits.service.study import Study

    real = Study.export_answers

    def many_rows(self, eid):  # what is tested is how the response ends, not the rows: many, quickly
        real(self, eid).close()  # an unknown experiment is still refused here
        return iter([["seq", "text"]] + [[i, "y" * 60] for i in range(200_000)])

    monkeypatch.setattr(Study, "export_answers", many_rows)
    base = spool.spooled_bytes()
    with LiveApp(Settings(database_url=sqlite_url, **ZERO_RATES)) as url:
        r = HTTP.post(f"{url}/api/experiments", json={"name": "gone", "items": ["a", "b"], "seed": 1})
        eid, token = r.json()["id"], r.json()["owner_token"]
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(f"GET /api/experiments/{eid}/answers.csv HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n".encode())
            got = 0
            while got < 100_000:
                got += len(s.recv(65536))
        deadline = time.monotonic() + 10
        while spool.spooled_bytes() > base and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spool.spooled_bytes() == base, "the spool of a download whose client hung up was not closed"
