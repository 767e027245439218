"""Where chunks of repetitions run: in this process, a local process pool, or a Dask cluster.

Every executor has one method, :meth:`Executor.map_unordered`, which runs ``fn(*args)`` for each
argument tuple and yields ``(index, result)`` pairs as they finish. The engine re-assembles
results by repetition index, so the output never depends on the executor, the number of jobs or
the chunking.

``get_executor`` accepts:

- ``"inprocess"`` (or ``"serial"``): run chunks one after the other in this process;
- ``None`` / ``"local"`` / ``"process"``: a local process pool with ``jobs`` workers (default: all
  cores); ``jobs=1`` runs in-process;
- ``"dask://host:port"`` or ``"tcp://host:port"``: a Dask distributed scheduler;
- an existing ``distributed.Client`` or ``concurrent.futures.Executor`` (not shut down here).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from purebandits._extras import require_extra

__all__ = ["Executor", "InProcessExecutor", "PoolExecutor", "DaskExecutor", "get_executor", "default_jobs"]


def default_jobs() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Executor:
    """Runs a function over argument tuples, yielding ``(index, result)`` as results arrive."""

    #: number of workers, used to size chunks
    workers: int = 1

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources this executor created (not ones it was given)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InProcessExecutor(Executor):
    """Run every call in this process, in order."""

    workers = 1

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        for i, a in enumerate(args):
            yield i, fn(*a)


def _pool_context():
    """Fork when this process has no other thread (fast, and scripts need no main guard);
    otherwise forkserver, since forking a threaded process can deadlock.

    The forkserver preloads the engine module, so its workers start without re-importing
    NumPy and Numba; like ``spawn`` it needs the ``if __name__ == "__main__":`` idiom in scripts.
    """
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["purebandits.simulate.engine"])
        return ctx
    return multiprocessing.get_context("spawn")  # pragma: no cover - Windows


class PoolExecutor(Executor):
    """A local process pool (``concurrent.futures.ProcessPoolExecutor``) or a given executor."""

    def __init__(self, jobs: int | None = None, pool: cf.Executor | None = None) -> None:
        self._own = pool is None
        self.workers = int(jobs or getattr(pool, "_max_workers", None) or default_jobs())
        self._pool = pool or cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=_pool_context())

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        # submit now (a plain method, not a generator): with fork, the workers start before the
        # caller opens a progress bar (a thread)
        futures = {self._pool.submit(fn, *a): i for i, a in enumerate(args)}
        return self._results(futures)

    @staticmethod
    def _results(futures):
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        if self._own:
            self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """Chunks as tasks on a Dask distributed cluster (``distributed.Client(address)``)."""

    def __init__(self, address: str | None = None, client: Any = None) -> None:
        require_extra("dask", "the Dask executor (--executor dask://host:port)")
        import distributed

        self._own = client is None
        self._client = client if client is not None else distributed.Client(address, set_as_default=False)
        try:
            n = sum(self._client.nthreads().values())
        except Exception:  # pragma: no cover - scheduler without workers yet
            n = 1
        self.workers = max(1, int(n))

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        futures = [self._client.submit(fn, *a, pure=False) for a in args]
        return self._results(futures)

    def _results(self, futures):
        import distributed

        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut, result in distributed.as_completed(futures, loop=self._client.loop, with_results=True):
                yield index[fut.key], result
        finally:
            self._client.cancel(futures)

    def close(self) -> None:
        if self._own:
            self._client.close()


def get_executor(executor: Any = None, jobs: int | None = None) -> Executor:
    """The :class:`Executor` for ``executor`` (see the module docstring)."""
    if isinstance(executor, Executor):
        return executor
    if executor is None or executor in ("local", "process"):
        jobs = default_jobs() if jobs is None else int(jobs)
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        return InProcessExecutor() if jobs == 1 else PoolExecutor(jobs)
    if executor in ("inprocess", "serial"):
        return InProcessExecutor()
    if isinstance(executor, cf.Executor):
        return PoolExecutor(jobs, pool=executor)
    if isinstance(executor, str):
        if executor.startswith("dask://"):
            return DaskExecutor("tcp://" + executor[len("dask://"):])
        if "://" in executor:
            return DaskExecutor(executor)
        raise ValueError(f"unknown executor {executor!r}; use 'inprocess', 'local' or 'dask://host:port'")
    if type(executor).__name__ == "Client" and hasattr(executor, "submit"):
        return DaskExecutor(client=executor)
    raise ValueError(f"unknown executor {executor!r}")
