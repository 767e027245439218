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

* **Pages and owner endpoints** (:func:`bounded`) run in threads of their own (``db_threads`` more,
  so a long export never takes a participant batch's thread) through :meth:`Dispatcher.owner_call`:
  the same bounded wait, except that a request of theirs may take longer than the bound while the
  database answers (a large create, the delete of a million answers): it gets 503 only once it has
  waited twice ``db_wait_seconds`` and the database has been silent for ``db_wait_seconds``
  (:class:`~purebandits.service.storage.Liveness`, which probes it when nothing else was heard).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from fastapi import Request

from purebandits.service.crowd import NEXT_STAGE, check_items_per_ask
from purebandits.service.errors import Unavailable, WouldBlock
from purebandits.service.settings import Settings
from purebandits.service.storage import is_sqlite, liveness
from purebandits.service.study import Study

__all__ = ["Dispatcher", "bounded"]

T = TypeVar("T")


class Dispatcher:
    """Awaitable asks, answers and other database calls of one :class:`Study` (see the module docstring)."""

    def __init__(self, study: Study, settings: Settings) -> None:
        self.study = study
        self.wait = max(0.001, float(settings.db_wait_seconds))
        self.timeout = 2.0 * self.wait
        self._inline_batches = is_sqlite(study.engine)
        self._pool = ThreadPoolExecutor(max(1, int(settings.db_threads)), thread_name_prefix="purebandits-db")
        self._owner_pool = ThreadPoolExecutor(max(4, int(settings.db_threads)), thread_name_prefix="purebandits-owner")
        self._liveness = liveness(study.engine)
        self._queues: dict[int, list[tuple[tuple[int, tuple[str, ...]], asyncio.Future]]] = {}
        self._draining: set[int] = set()

    def close(self) -> None:
        """Stop the worker threads (running calls finish; queued ones are dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._owner_pool.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., T], *args: Any, inline: bool = True) -> T:
        """``fn(*args)``: inline if it need not wait (``inline``), else in a worker thread, 503 after the timeout."""
        if inline:
            try:
                with self.study.nowait():
                    return fn(*args)
            except WouldBlock:
                pass
        return await self._bounded(asyncio.get_running_loop().run_in_executor(self._pool, fn, *args))

    async def owner_call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` for a page or an owner endpoint: in an owner thread, 503 once it has waited
        ``self.timeout`` while the database was silent for ``db_wait_seconds`` (see the module docstring)."""
        job = self._owner_pool.submit(fn, *args)
        fut = asyncio.wrap_future(job)
        if self._liveness is None:  # SQLite: every wait is bounded by busy_timeout and the in-process locks
            return await fut
        try:
            return await self._bounded(fut, patient=True)
        except Unavailable:
            job.add_done_callback(_discard)  # runs now if it has finished meanwhile
            raise

    async def _bounded(self, fut: asyncio.Future, patient: bool = False) -> Any:
        """``fut``'s result, or :class:`Unavailable` after the timeout; ``fut`` is then cancelled: a call not
        started never runs, an op still queued is skipped by its batch, a running one's result is dropped.

        ``patient``: past the timeout, wait on while the database answers (:class:`Liveness`)."""
        started = time.monotonic()
        step = self.timeout if not patient else min(0.25, self.wait / 4)
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(fut), step)
            except TimeoutError:
                pass
            live = self._liveness
            if not patient or live is None:
                break
            silent = live.silent_for()
            if time.monotonic() - started >= self.timeout and silent >= self.wait:
                break
            if silent >= self.wait / 2:
                live.probe()  # nothing heard lately: is the server there at all?
        fut.cancel()
        raise Unavailable(f"the database did not answer within {self.timeout:g} s; retry shortly")

    async def ask(self, eid: int, pid: str, n: int | None = None) -> dict[str, Any]:
        """:meth:`Study.next_query` (``n`` items, or the single-query form), batched with concurrent requests for the
        same learner."""
        n = check_items_per_ask(n)
        for _ in range(2):  # a staged experiment's stage 1 may answer "ask stage 2" (service.stages), once
            eid, idx = await self.call(self.study.prepare_ask, eid, pid)
            res = await self._submit(eid, (idx, ("ask", pid) if n is None else ("ask", pid, n)))
            if res.get("state") != NEXT_STAGE:
                return res
            eid = await self.call(self.study.next_stage, eid)
        raise RuntimeError(f"experiment {eid}: stage 2 asked for a next stage")

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


def _discard(job: Future) -> None:
    """The result of an owner call whose request got 503 before it finished: a download's response holds an
    export slot and a spool (see ``routes.experiments._csv``) that no client will read; close it."""
    if job.cancelled() or job.exception() is not None:
        return
    close = getattr(getattr(job.result(), "spool", None), "close", None)
    if close is not None:
        close()


def bounded(endpoint: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """A plain ``def`` endpoint (a page, an owner endpoint) run by the app's :meth:`Dispatcher.owner_call`
    instead of Starlette's thread pool, so that a hung database answers it with 503 and ``Retry-After`` within
    the bound instead of holding it for as long as the database is gone.

    Put it under the route decorator. The wrapper has the endpoint's signature (annotations resolved, plus a
    ``Request`` parameter if the endpoint has none), so FastAPI sees the same parameters and response model.
    """
    sig = inspect.signature(endpoint, eval_str=True)
    params = list(sig.parameters.values())
    own = next((p.name for p in params if p.annotation is Request), None)
    name = own or "_bounded_request"
    if own is None:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Request))

    @functools.wraps(endpoint)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        request: Request = kwargs[name] if own else kwargs.pop(name)
        return await request.app.state.dispatcher.owner_call(functools.partial(endpoint, *args, **kwargs))

    del wrapper.__wrapped__  # FastAPI unwraps: it must see the coroutine function and this signature
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper
