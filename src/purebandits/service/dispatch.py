"""Run the participant protocol for the event loop without ever blocking it, in group commits.

One :class:`Dispatcher` per app. The participant endpoints await it instead of calling
:class:`~purebandits.service.study.Study` directly:

* **Nothing waits on the event loop.** Work first runs inline inside
  :meth:`Study.nowait`, where anything that would wait (a lock another thread holds, SQLite's
  write lock held by another process, any PostgreSQL round trip) raises
  :class:`~purebandits.service.errors.WouldBlock` before anything is committed; the same call
  then runs in a worker thread (``db_threads``), where every wait is bounded by
  ``db_wait_seconds``. The request itself gives up after twice that with 503 and
  ``Retry-After`` (safe to retry: an ask re-serves the participant's pending query, an answer is
  idempotent), so a hung database, a lock held elsewhere or a slow statement delays only the
  requests that need it; ``/healthz``, pages and other experiments go on.
* **Group commit.** Asks and answers for one experiment queue while its previous batch runs, and
  the next batch runs them all in one transaction that locks each learner involved
  (:meth:`Study.run_batch`): one lock turn per learner, one version update each and, on
  PostgreSQL, one durable commit (one WAL flush) for the whole batch. No answer is acknowledged before its batch has
  committed, and the batch size grows with the load by itself.

SQLite runs batches inline on the loop (its own connection, no fsync: WAL with
``synchronous=NORMAL``), PostgreSQL in worker threads (each commit waits for its WAL flush).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from purebandits.service.crowd import check_items_per_ask
from purebandits.service.errors import Unavailable, WouldBlock
from purebandits.service.settings import Settings
from purebandits.service.storage import is_sqlite
from purebandits.service.study import Study

__all__ = ["Dispatcher"]

T = TypeVar("T")


class Dispatcher:
    """Awaitable asks, answers and other database calls of one :class:`Study` (see the module docstring)."""

    def __init__(self, study: Study, settings: Settings) -> None:
        self.study = study
        self.timeout = 2.0 * max(0.001, float(settings.db_wait_seconds))
        self._inline_batches = is_sqlite(study.engine)
        self._pool = ThreadPoolExecutor(max(1, int(settings.db_threads)), thread_name_prefix="purebandits-db")
        self._queues: dict[int, list[tuple[tuple[int, tuple[str, ...]], asyncio.Future]]] = {}
        self._draining: set[int] = set()

    def close(self) -> None:
        """Stop the worker threads (running calls finish; queued ones are dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., T], *args: Any, inline: bool = True) -> T:
        """``fn(*args)``: inline if it need not wait (``inline``), else in a worker thread, 503 after the timeout."""
        if inline:
            try:
                with self.study.nowait():
                    return fn(*args)
            except WouldBlock:
                pass
        return await self._bounded(asyncio.get_running_loop().run_in_executor(self._pool, fn, *args))

    async def _bounded(self, fut: asyncio.Future) -> Any:
        """``fut``'s result, or :class:`Unavailable` after the timeout; ``fut`` is then cancelled: a call not
        started never runs, an op still queued is skipped by its batch, a running one's result is dropped."""
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except TimeoutError:
            fut.cancel()
            raise Unavailable(f"the database did not answer within {self.timeout:g} s; retry shortly") from None

    async def ask(self, eid: int, pid: str, n: int | None = None) -> dict[str, Any]:
        """:meth:`Study.next_query` (``n`` items, or the single-query form), batched with concurrent requests for the
        same learner."""
        n = check_items_per_ask(n)
        eid, idx = await self.call(self.study.prepare_ask, eid, pid)
        return await self._submit(eid, (idx, ("ask", pid) if n is None else ("ask", pid, n)))

    async def answer(self, query_id: str, pid: str, label: str) -> dict[str, Any]:
        """:meth:`Study.answer`, batched with concurrent requests for the same learner."""
        eid, idx = await self.call(self.study.prepare_answer, query_id, pid, label)
        return await self._submit(eid, (idx, ("answer", pid, query_id, label)))

    async def release(self, query_id: str, pid: str) -> dict[str, Any]:
        """:meth:`Study.release`, batched with concurrent requests for the same learner."""
        eid, idx = await self.call(self.study.prepare_release, query_id, pid)
        return await self._submit(eid, (idx, ("release", pid, query_id)))

    async def _submit(self, key: int, op: tuple[int, tuple[str, ...]]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._queues.setdefault(key, []).append((op, fut))
        if key not in self._draining:
            self._draining.add(key)
            loop.create_task(self._drain(key))
        return await self._bounded(fut)

    async def _drain(self, key: int) -> None:
        """Run the experiment's queued ops batch after batch until none are left."""
        try:
            while True:
                batch = [(op, fut) for op, fut in self._queues.pop(key, ()) if not fut.done()]
                if not batch:
                    return
                try:
                    results = await self._run_batch(key, [op for op, _ in batch])
                except BaseException as exc:  # the whole batch failed (nothing committed)
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, fut), res in zip(batch, results, strict=True):
                    if fut.done():
                        continue
                    if isinstance(res, BaseException):
                        fut.set_exception(res)
                    else:
                        fut.set_result(res)
        finally:
            self._draining.discard(key)

    async def _run_batch(self, key: int, ops: list[tuple[int, tuple[str, ...]]]) -> list[Any]:
        return await self.call(self.study.run_batch, key, ops, inline=self._inline_batches)
