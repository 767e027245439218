"""Test-wide settings and shared fixtures.

Hypothesis' per-example deadline is off: the first example of a property test often triggers a
Numba compilation (seconds on a fresh cache, as in CI), which says nothing about the code's speed.
Speed is measured by ``benchmarks/``, never by tests.

Under pytest-xdist the controller fills numba's on-disk cache with every learner's kernels before the
workers start (:func:`pytest_configure`): otherwise each worker, each ``purebandits serve`` a test starts
and each fresh interpreter a test runs compiles the same kernels on its own (25-40 s of a core per learner
family on a fresh checkout, as in CI). Once the cache holds them (the service's warm-up stamp says so) this
costs nothing; set ``PUREBANDITS_TEST_PREWARM=0`` to skip it.

The suite writes Python's bytecode caches even under ``PYTHONDONTWRITEBYTECODE`` (set in some CI images): it starts
a hundred and more interpreters (the xdist workers, ``purebandits serve`` processes, fresh interpreters) that import
the same modules, and without the caches each compiles them and rewrites the test modules' asserts again (a
worker's collection took 15.5 s of a core without them, 8.6 s with them). They go where Python puts them
(``__pycache__`` beside each source, or under ``PYTHONPYCACHEPREFIX``), as numba's cache does.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = False  # this process (pytest's assert rewriting reads it at each import) ...
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # ... and the xdist workers and the interpreters the tests start

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# the compiled helpers of the tests (``@njit(cache=True)`` in test modules) call the package's kernels: their cache
# entries are stamped with the tests' and the package's sources, so an edit to either compiles them again
# (numba's own stamp is the helper's file alone: it would run stale machine code after an edit to a kernel)
try:
    from purebandits import kernel_cache
except ImportError:  # numba missing: the tests that need it fail on their own
    pass
else:
    kernel_cache.stamp_package_kernels(Path(__file__).parent, extra=kernel_cache.PACKAGE_DIGEST)

settings.register_profile("purebandits", deadline=None)
settings.load_profile("purebandits")


@pytest.fixture
def caption_summary(tmp_path):
    """A factory of a user's caption-contest summary file (the bundled files' columns): ``n`` captions whose
    funny votes grow with their index, so caption n - 1 is the funniest."""
    def write(n: int, name: str = "my_contest.csv") -> Path:
        path = tmp_path / name
        rows = ["caption,funny,somewhat_funny,unfunny,count"]
        for i in range(n):
            f, s, u = 5 + i, 20, 75 - i
            rows.append(f"caption {i},{f},{s},{u},{f + s + u}")
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        return path

    return write


def _prewarm_kernel_cache(jobs: int) -> None:
    """Compile every registered learner into numba's on-disk cache in ``jobs`` processes, then write the service's
    warm-up stamp (so no ``purebandits serve`` of the tests starts its own background warm-up).

    What the service's background warm-up (``python -m purebandits.service.warmup``) does, split over the cores: a
    pool of ``jobs`` processes takes the learners a family at a time, heaviest first
    (``_prewarm_kernels.compile_families``), and each exercises them as the service does and runs their compiled
    drivers on Bernoulli and Gaussian rewards as the common checks do (``tests/_prewarm_kernels.py``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        from purebandits.registry import all_learners
        from purebandits.service import warmup
    except ImportError:  # no service extra: the tests that need it are skipped, and nothing here is worth doing
        return
    import _prewarm_kernels

    stamp = warmup._stamp_path()
    if stamp.exists():
        return
    families = _prewarm_kernels.compile_families(all_learners())
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_prewarm_kernels.quiet) as pool:
        done = [pool.submit(_prewarm_kernels.main, [(n, warmup._params_for(n)) for n in family])
                for family in families]
        failed = [family for family, future in zip(families, done, strict=True) if future.exception() is not None]
    if failed:
        sys.stderr.write(f"purebandits: pre-warming numba's cache failed for {failed}; the tests compile them\n")
        return
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_name(stamp.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"learners": [n for family in families for n in family]}) + "\n")
    os.replace(tmp, stamp)
    sys.stderr.write(f"purebandits: compiled every learner's kernels into numba's cache in {jobs} processes in "
                     f"{time.perf_counter() - started:.0f} s (once per checkout and version of the kernels)\n")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: a run with -p no:xdist does not know it
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: the cores plus as many again (at most four more). A third of the suite's worker time is spent
    waiting (server processes starting and being killed, Chromium rendering, PostgreSQL restarts, a crowd's
    pauses), which the extra workers fill; the cap bounds the PostgreSQL clusters and browsers (one per worker)."""
    cores = os.cpu_count() or 1
    return cores + min(cores, 4)


def pytest_cmdline_main(config):
    """Under ``-n``, deal the tests by work stealing unless ``--dist`` was given: the suite mixes thousands of
    sub-second tests with a few of 20-40 s, which xdist's default chunks leave to one worker at the end."""
    args = config.invocation_params.args
    if getattr(config.option, "numprocesses", None) and not any(str(a).startswith("--dist") for a in args):
        config.option.dist = "worksteal"


def pytest_configure(config):
    """The xdist controller warms numba's cache once for all workers (see the module docstring)."""
    if hasattr(config, "workerinput") or os.environ.get("PUREBANDITS_TEST_PREWARM", "1") == "0":
        return
    jobs = getattr(config.option, "numprocesses", None)
    if not jobs or config.option.collectonly:
        return
    if jobs == "auto" or not isinstance(jobs, int):
        jobs = os.cpu_count() or 1
    _prewarm_kernel_cache(max(1, min(int(jobs), os.cpu_count() or 1)))


#: fixtures whose tests need a PostgreSQL server (a cluster per xdist worker, or one of their own) or Chromium
_POSTGRES_FIXTURES = {"pg_admin_url", "pg_url", "pg_with_password", "pg_cluster"}
_BROWSER_FIXTURES = {"browser"}
#: fixtures that start real ``purebandits serve`` processes (one per test, or one per module and worker; each start
#: imports the service and loads the default learner's kernels: about 3 s of a core)
_SLOW_FIXTURES = {"server_cls", "shared_server"}


def pytest_collection_modifyitems(config, items):
    """Mark at collection time, so ``-m`` can select on them: ``postgres`` for every test that reaches a PostgreSQL
    server (the ``postgres`` case of ``db_url``, or a fixture that starts or shares a cluster), ``browser`` for every
    test that drives Chromium, and ``slow`` for the tests that start real server processes and the reliability and
    packaging tests (server processes killed and restarted, fresh virtual environments)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if names & _POSTGRES_FIXTURES or params.get("db_url") == "postgres":
            item.add_marker(pytest.mark.postgres)
        if names & _BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("reliability") or item.get_closest_marker("packaging") or names & _SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
    _deal_to_workers(config, items)


def _cost(item) -> float:
    """A rough cost of a test in seconds of a worker, from its markers (measured means of a full run)."""
    for marker, seconds in (("reliability", 30.0), ("packaging", 20.0), ("browser", 6.0), ("slow", 1.5),
                            ("postgres", 0.4)):
        if item.get_closest_marker(marker):
            return seconds
    return 0.1


def _deal_to_workers(config, items) -> None:
    """Under xdist, order the tests so that each worker's first share holds an even part of the slow modules, at its
    front.

    The work-stealing scheduler hands worker i the i-th of ``workercount`` consecutive, equal-count ranges of the
    collection, and an idle worker later steals the back half of the longest queue. In collection order the slow
    modules (browsers, server processes, crashes) fall to one or two ranges and finish last, on one worker. Here
    whole modules (their module-scoped servers and browsers stay on one worker) are dealt, heaviest first, to the
    range with the least estimated cost and room left, at its front; the light modules fill the rest in collection
    order. Every worker computes the same order from the same collection, as xdist requires."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0) or 0)
    if workers < 2 or len(items) < 2 * workers:
        return
    sizes, left = [], len(items)
    for i in range(workers):  # the scheduler's split: len(pending) // nodes_remaining, in turn
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    costs = {name: sum(_cost(i) for i in its) for name, its in modules.items()}
    heavy = sorted((n for n in modules if costs[n] >= 10.0), key=lambda n: (-costs[n], n))
    front: list[list] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for name in heavy:
        fits = [w for w in range(workers) if sum(map(len, front[w])) + len(modules[name]) <= sizes[w]]
        if not fits:
            continue  # too big to place whole: it stays with the light ones
        w = min(fits, key=lambda w: (load[w], w))
        front[w].append(modules[name])
        load[w] += costs[name]
    placed = {id(i) for share in front for its in share for i in its}
    rest = iter([i for i in items if id(i) not in placed])
    ordered = []
    for w in range(workers):
        share = [i for its in front[w] for i in its]
        share += [next(rest) for _ in range(sizes[w] - len(share))]
        ordered += share
    assert len(ordered) == len(items)
    items[:] = ordered
