"""Compile the learners' kernels before participants need them.

The learners' hot paths are numba functions compiled on first use (or loaded from numba's on-disk
cache). In a fresh installation the first ask, answer, history point and dashboard poll of a
learner would compile them inside a request, under the learner's lock: about 25 s for KL-RandLUCB's
incremental ask/tell and 4 s more for its stopping progress, during which every participant of
the experiment waits and times out (measured: a contest-size load test on a fresh source tree
answered nothing). :func:`warm_learners` runs each learner through the calls the service makes,
on a small instance, so that this happens at startup and when an experiment is created; with a
warm cache it costs milliseconds, and a learner already warmed in this process costs nothing.

Creating an experiment with a learner that nothing has compiled yet still waits for its compile
(measured with an empty cache, one idle core: KL-LUCB and LUCB1 42 s, KL-RandLUCB 25 s, CLUCB and
lil'CLUCB 22 s, top-two 8 s, AT-LUCB 8 s; every learner together about 2 minutes). So at startup
:func:`warm_all_in_background` also compiles every registered learner into numba's on-disk cache
in a separate, low-priority process (``python -m purebandits.service.warmup``): it holds neither
this process's GIL nor its cores while requests run, and a later create loads the compiled code
from the cache in well under a second. It runs once per installation (a stamp file named after
the digest this process's kernels carry, :func:`purebandits.kernel_cache.stamped_digest`, their
location, numba and Python records that it finished) and one at a time (a lock file); it
outlives the server that started it if need be, as it only fills a cache.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: no lock, so no background warm (a create compiles what it needs)
    fcntl = None

import purebandits
from purebandits.registry import all_learners, make_learner

__all__ = ["compile_progress", "warm_all_in_background", "warm_learners", "warm_now"]

log = logging.getLogger("purebandits.service")

_warmed: set[tuple[str, str]] = set()
_lock = threading.Lock()


@contextmanager
def compile_progress(what: str, *, file: IO[str] | None = None) -> Iterator[None]:
    """Show that numba is compiling while the body runs, and only if it does.

    On a fresh installation the first start compiles the default learner for about 25 s (two idle
    cores) before it prints the demo's URL or listens; with a warm cache nothing compiles and this
    prints nothing. At the first compile it writes one line saying what is happening and why it
    happens only once, then (on a terminal) a tqdm counter of the kernels compiled so far with the
    elapsed time, refreshed every second even while one long compile runs.
    """
    from numba.core import event
    from tqdm import tqdm

    out = file if file is not None else sys.stderr
    state: dict[str, Any] = {"bar": None, "done": 0}
    guard = threading.Lock()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(1.0):
            with guard:
                state["bar"].refresh()

    class Shown(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            with guard:
                if state["bar"] is not None:
                    return
                gc.enable()  # ``purebandits serve`` starts with it off; a compile makes garbage by the 100 MB
                print(f"purebandits: {what}: compiling its kernels (only at the first start of this version, "
                      "about half a minute; later starts load them from numba's cache)", file=out, flush=True)
                state["bar"] = tqdm(desc="compiling", unit=" kernels", file=out, disable=None, leave=False)
                if not state["bar"].disable:
                    threading.Thread(target=tick, name="compile-progress", daemon=True).start()

        def on_end(self, ev: event.Event) -> None:
            with guard:
                state["done"] += 1
                state["bar"].update(1)  # a no-op when tqdm is off (not a terminal)

    started = time.perf_counter()
    try:
        with event.install_listener("numba:compile", Shown()):
            yield
    finally:
        stop.set()
        with guard:
            bar = state["bar"]
            if bar is not None:
                bar.close()
                print(f"purebandits: {what}: compiled {state['done']} kernels in {time.perf_counter() - started:.0f} s",
                      file=out, flush=True)


def warm_learners(specs: Iterable[tuple[str, dict[str, Any]]]) -> int:
    """Run each (algorithm, params) once through start, ask, tell, cancel, stopping progress, intervals,
    a deep copy and a state round trip; returns how many were new to this process.

    Never raises: a learner that cannot run on the small instance (a parameter that needs more items,
    say) is skipped with a debug message and compiles on first use as before.
    """
    new = 0
    for algorithm, params in specs:
        key = (algorithm, json.dumps(params, sort_keys=True, default=str))
        with _lock:
            if key in _warmed:
                continue
            _warmed.add(key)
        new += 1
        try:
            _exercise(algorithm, params)
        except Exception as exc:  # noqa: BLE001 - warming is an optimisation; the request path reports errors
            log.debug("warming %s %s skipped: %s", algorithm, params, exc)
    return new


def _exercise(algorithm: str, params: dict[str, Any]) -> None:
    """The service's calls on a 12-arm (or 2k + 2) instance with graded rewards, until every arm has
    answers and the incremental paths are built: free and restricted asks (a participant's rated items
    left out), tells, cancels, stopping progress, intervals, the forecast, copies and a state round trip."""
    # numba: here, not at import (a worker starts without it)
    from purebandits.forecast import Forecast, forecast_or_reason

    k = params.get("k", 1)
    n = max(12, 2 * int(k) + 2) if isinstance(k, int) else 12
    lrn = make_learner(algorithm, **params).start(n, seed=0)
    rng = np.random.default_rng(0)
    # graded answers, or those of the learner's own support (a two-label experiment's K_inf learner refuses others)
    values = sorted(float(v) for v in params.get("support", (0.0, 0.5, 1.0)))
    out: list[int] = []
    forecast = False  # the forecast's kernels ran (later forecasts would only repeat its pure-Python K_inf solves)
    for step in range(30 * n):
        if lrn.done:
            break
        if step % 5 == 2:  # the restricted ask of a participant who rated some items (its own kernels)
            allowed = np.ones(n, dtype=np.bool_)
            allowed[rng.choice(n, size=n // 3, replace=False)] = False
            got = lrn.ask(1, allowed=allowed)
        else:
            got = lrn.ask(2 if step % 3 == 0 else 1)
        out += got
        if len(out) > 3 or (out and not got):  # a round rule that waits for its pulls gets them back
            arm = out.pop(0)
            if step % 17 == 0:
                lrn.cancel(arm)
            else:
                # graded, a third of the arms better: round rules get to eliminate (their own kernels too)
                lrn.tell(arm, values[min(len(values) - 1, int(rng.integers(len(values))) + (arm < n // 3))])
        if step % 40 == 39:
            lrn.stopping_progress()
            lrn.intervals_of([0, 1])
            copy.deepcopy(lrn).stopping_progress()
            if not forecast:  # the owners' forecast (its bisection over the learner's bound compiles)
                forecast = isinstance(forecast_or_reason(lrn), Forecast)
    lrn.recommend()
    make_learner(algorithm, **params).load_state_dict(json.loads(lrn.state_json()))


def _stamp_path() -> Path:
    """Where the background warm records that it finished for this installation: its sources, their
    location (numba caches per source path, so a second installation of the same version has its
    own cache), numba and Python. Beside numba's cache when ``NUMBA_CACHE_DIR`` says where that is,
    else in the user's cache directory."""
    root = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "purebandits")
    import numba  # here, not at import: a service worker starts without numba

    from purebandits.kernel_cache import stamped_digest

    package = Path(purebandits.__file__).resolve().parent
    key = f"{stamped_digest(package)} {package} numba {numba.__version__} {sys.version}"
    return Path(root) / f"purebandits-warmed-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def _locked(lock_path: Path) -> int | None:
    """An open descriptor holding the exclusive lock on ``lock_path``, or None if another process holds it."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def warm_all_in_background(algorithms: list[str] | None = None) -> subprocess.Popen | None:
    """Start the low-priority process that compiles every registered learner (or ``algorithms``)
    into numba's on-disk cache; None when it has already finished for these sources, another is
    running, or the cache directory cannot be written."""
    if fcntl is None:
        return None
    try:
        stamp = _stamp_path()
        if stamp.exists():
            return None
        stamp.parent.mkdir(parents=True, exist_ok=True)
        fd = _locked(stamp.with_name(stamp.name + ".lock"))
    except OSError as exc:
        log.debug("background warm not started: %s", exc)
        return None
    if fd is None:
        return None
    os.close(fd)  # the child takes the lock itself; a start in between is turned away by it
    proc = subprocess.Popen([sys.executable, "-m", "purebandits.service.warmup", *(algorithms or [])],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)
    threading.Thread(target=proc.wait, name="purebandits-warm-reaper", daemon=True).start()  # no zombie
    return proc


def _params_for(algorithm: str) -> dict[str, Any]:
    """Parameters that let ``algorithm`` run on the small instance (a budget for fixed-budget learners)."""
    cls = all_learners()[algorithm]
    return {"budget": 400} if cls.kind == "fixed_budget" and "budget" in cls._param_names() else {}


def _main(algorithms: list[str]) -> int:
    """The background process: take the lock, exercise each learner, write the stamp; 0 if another holds it."""
    stamp = _stamp_path()
    fd = _locked(stamp.with_name(stamp.name + ".lock"))
    if fd is None or stamp.exists():
        return 0
    names = algorithms or list(all_learners())
    warm_learners((name, _params_for(name)) for name in names)
    tmp = stamp.with_name(stamp.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"learners": names}) + "\n")
    os.replace(tmp, stamp)
    return 0


def warm_now(specs: list[tuple[str, dict[str, Any]]]) -> int:
    """Compile ``specs`` into numba's on-disk cache in a child process, in the foreground, showing progress on
    stderr; its exit code.

    What ``purebandits serve --workers N`` runs before it starts the workers: each worker then loads the
    kernels from the cache instead of compiling them itself, N compiles of the same kernels at once
    (about 25 s of one core each for the default learner; on a fresh install on two cores, four workers
    answered their first ``/healthz`` after 103 s that way, against 28 s: ``benchmarks/startup.py --cold``).
    When the background warm has finished for these sources (its stamp file), every learner is in the
    cache and the child exits at once. The child keeps numba out of the supervising process, which lives
    as long as the server.
    """
    return subprocess.call([sys.executable, "-m", "purebandits.service.warmup", "--now", json.dumps(specs)],
                           stdin=subprocess.DEVNULL)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--now"]:
        if not _stamp_path().exists():  # else every learner is in the cache already: nothing to wait for
            with compile_progress("preparing the workers"):
                warm_learners((name, params) for name, params in json.loads(sys.argv[2]))
        sys.exit(0)
    os.nice(10)  # behind the server's requests
    sys.exit(_main(sys.argv[1:]))
