"""A download written to a temporary file by a thread of its own and read back as fast as the client reads it.

A CSV export reads its rows in one database transaction, which is what makes it consistent. Streamed
straight to the client, that transaction stays open for as long as the client takes: an organiser on a
phone over a slow link holds it for an hour while the contest goes on. On SQLite an open reader keeps
the write-ahead log from being checkpointed, so the log grows with every answer of the hour; on
PostgreSQL it holds back vacuum. :class:`Spool` decouples the two: the transaction lasts as long as the
server needs to read and format the rows (7 CPU-seconds for a million answers, about 15 s at the half core
the service gives it), the client gets the first bytes as soon as they are written, and the rest comes
from the file at the client's pace.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

#: bytes handed to the server per read of the file
READ_SIZE = 256 * 1024

_held_lock = threading.Lock()
_held = 0  # bytes in the files of this process's spools not yet removed


def spooled_bytes() -> int:
    """Bytes this process's spools hold on disk now (files written and not yet removed)."""
    return _held


def _hold(n: int) -> None:
    global _held
    with _held_lock:
        _held += n


class Spool:
    """Iterator over the bytes of ``chunks``, produced into a temporary file by a thread started at the first
    read and handed out at most :data:`READ_SIZE` bytes at a time.

    The producer pauses between chunks so as to use at most ``cpu_share`` of a core: its thread shares the
    interpreter with the requests the server is serving meanwhile. ``close()`` (the client gone) stops the
    producer at its next chunk and closes ``chunks`` (ending its transaction); the file is removed once
    both sides are done with it. An error raised by ``chunks`` reaches the reader after the bytes written
    before it. ``on_produced`` is called once, when ``chunks`` is done with (read to its end, failed, cut
    short by a close, or closed unread): a server limits the downloads being read at once, not those being
    sent."""

    def __init__(self, chunks: Iterator[bytes], read_size: int | None = None, cpu_share: float = 1.0,
                 on_produced: Callable[[], None] | None = None) -> None:
        if not 0.0 < cpu_share <= 1.0:
            raise ValueError(f"cpu_share must be in (0, 1], got {cpu_share!r}")
        self._chunks = chunks
        self._on_produced = on_produced
        self._cpu_share = cpu_share
        self._read_size = READ_SIZE if read_size is None else read_size
        self._cond = threading.Condition()
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._written = 0  # bytes in the file
        self._offset = 0  # bytes handed to the reader
        self._produced = False  # the producer has finished (all chunks, an error, or cancelled)
        self._error: BaseException | None = None
        self._closed = False  # the reader is done
        self._size = 0  # bytes counted in :func:`spooled_bytes`

    def __iter__(self) -> Iterator[bytes]:
        return self

    def _start(self) -> None:
        self._fd, path = tempfile.mkstemp(prefix="purebandits-download-")
        os.unlink(path)  # anonymous: gone with its last descriptor, even if the process dies
        self._thread = threading.Thread(target=self._produce, name="purebandits-download", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        assert self._fd is not None
        rest = 1.0 / self._cpu_share - 1.0  # seconds of pause per CPU second of producing
        try:
            cpu = time.thread_time()
            for chunk in self._chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(self._fd, view):]
                _hold(len(chunk))
                with self._cond:
                    self._size += len(chunk)
                    self._written += len(chunk)
                    self._cond.notify_all()
                    if rest and not self._closed:  # leave the interpreter to the requests served meanwhile
                        self._cond.wait((time.thread_time() - cpu) * rest)  # woken early by a close only
                    if self._closed:
                        break
                cpu = time.thread_time()
        except BaseException as exc:  # handed to the reader
            self._error = exc
        finally:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()  # a generator's ``with`` blocks (its connection and transaction) end here
            with self._cond:
                self._produced = True
                self._cond.notify_all()
                if self._closed:
                    self._release()
            self._done_producing()

    def __next__(self) -> bytes:
        with self._cond:
            if self._closed:
                raise StopIteration
            if self._thread is None:
                self._start()
            while self._written == self._offset and not self._produced and not self._closed:
                self._cond.wait()
            if self._closed:  # closed from another thread meanwhile (the server, the client gone)
                raise StopIteration
            if self._written == self._offset:  # everything handed over
                error = self._error
                self._close_locked()
                if error is not None:
                    raise error
                raise StopIteration
            assert self._fd is not None
            # under the lock, so a close from another thread cannot close the file in the middle (a read
            # from the page cache: the producer waits for it at most the time of one read)
            data = os.pread(self._fd, min(self._written - self._offset, self._read_size), self._offset)
            self._offset += len(data)
            return data

    @property
    def produced(self) -> bool:
        """Whether the producer has finished, so the rows' transaction is over."""
        return self._produced

    def wait_produced(self, timeout: float | None = None) -> bool:
        """Block until the producer has finished (or ``timeout`` seconds); whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: self._produced, timeout)

    def close(self) -> None:
        """The reader is done: stop the producer at its next chunk and remove the file once it has stopped."""
        with self._cond:
            never_read = self._thread is None
            self._close_locked()
        if never_read:  # ``chunks`` never started: close it here (once closed, no read starts the producer)
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
            self._done_producing()

    def _done_producing(self) -> None:
        with self._cond:
            call, self._on_produced = self._on_produced, None
        if call is not None:
            call()

    def __del__(self) -> None:  # dropped unread: no producer holds a reference, so it never started or ended
        if "_cond" in self.__dict__:  # not an object whose __init__ refused its arguments
            self.close()

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cond.notify_all()
        if self._thread is None or self._produced:
            self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            _hold(-self._size)
