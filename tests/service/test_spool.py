"""The download spool: every byte in order, errors after the bytes before them, and a client gone early
stops the producer and closes its rows (their transaction)."""

from __future__ import annotations

import threading
import time

import pytest

from purebandits.service.spool import Spool


def _file_gone(spool: Spool) -> bool:
    return spool._fd is None  # its descriptor closed (the file was unlinked at creation)


def test_every_byte_in_order_in_pieces_of_at_most_read_size():
    chunks = [bytes([i % 251]) * (1 + 37 * i % 500) for i in range(300)]
    spool = Spool(iter(chunks), read_size=256)
    pieces = list(spool)
    assert b"".join(pieces) == b"".join(chunks) and max(map(len, pieces)) <= 256
    assert spool.produced and _file_gone(spool)  # the file is gone with the last byte
    assert next(spool, None) is None


def test_an_error_reaches_the_reader_after_the_bytes_before_it():
    def chunks():
        yield b"abc"
        yield b"def"
        raise RuntimeError("the database went away")

    spool = Spool(chunks())
    got = b""
    with pytest.raises(RuntimeError, match="went away"):
        for piece in spool:
            got += piece
    assert got == b"abcdef"


def test_a_reader_gone_early_stops_the_producer_and_closes_the_rows():
    closed = threading.Event()
    release = threading.Event()
    produced = []

    def chunks():
        try:
            for i in range(1_000_000):
                if i == 2:
                    release.wait(10)  # the rows are still being read when the client goes
                produced.append(i)
                yield b"x" * 100
        finally:
            closed.set()  # where an export's connection and transaction end

    spool = Spool(chunks())
    assert next(spool).startswith(b"x")
    spool.close()
    release.set()
    assert spool.wait_produced(10) and closed.is_set()
    assert len(produced) <= 4  # stopped at the chunk after the close, not at the millionth
    assert _file_gone(spool) and next(spool, None) is None


def test_a_spool_never_read_never_starts_its_rows():
    started = []

    def chunks():
        started.append(True)
        yield b"x"

    gen = chunks()
    spool = Spool(gen)
    spool.close()
    assert started == [] and gen.gi_frame is None  # closed without running
    assert next(spool, None) is None and started == []


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_producer_uses_at_most_its_share_of_a_core():
    """With ``cpu_share`` s, every CPU second of producing is followed by (1/s - 1) seconds of pause, so the
    production takes at least 1/s times its CPU time (a lower bound: a loaded machine only adds to it)."""
    def chunks():
        for _ in range(10):
            _burn(0.01)
            yield b"y" * 10

    spool = Spool(chunks(), cpu_share=0.25)
    t = time.monotonic()
    assert b"".join(spool) == b"y" * 100
    assert time.monotonic() - t >= 0.9 * 10 * 0.01 / 0.25
    with pytest.raises(ValueError, match="cpu_share"):
        Spool(iter([]), cpu_share=0.0)


def test_a_close_cuts_the_producers_pause_short():
    def chunks():
        _burn(0.2)  # then a pause of 0.2 * 99 s
        yield b"z"
        yield b"never"

    spool = Spool(chunks(), cpu_share=0.01)
    assert next(spool) == b"z"
    t = time.monotonic()
    spool.close()
    assert spool.wait_produced(10) and time.monotonic() - t < 10  # not the 20 s pause
    assert next(spool, None) is None


def test_sqlite_truncates_its_log_back_once_checkpointed(tmp_path):
    from purebandits.service.storage import WAL_SIZE_LIMIT, make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_size_limit").scalar() == WAL_SIZE_LIMIT > 0
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_a_close_from_another_thread_ends_a_waiting_read():
    """The server closes a download's spool from the event loop when its client hangs up, while a worker
    thread may be waiting in ``next`` for the producer: that read ends instead of waiting on."""
    release = threading.Event()

    def chunks():
        yield b"a"
        release.wait(10)  # the rows are slow to come
        yield b"b"

    spool = Spool(chunks())
    assert next(spool) == b"a"
    got = []
    reader = threading.Thread(target=lambda: got.append(next(spool, None)))
    reader.start()
    time.sleep(0.1)  # the reader waits for the second chunk
    spool.close()
    reader.join(5)
    assert not reader.is_alive() and got == [None]
    release.set()
    assert spool.wait_produced(10) and _file_gone(spool)
