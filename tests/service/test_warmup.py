"""The service compiles its learners' kernels at startup and on create, not inside a participant's request."""

from __future__ import annotations

import re

import pytest

from purebandits.registry import all_learners
from purebandits.service import warmup
from purebandits.service.warmup import warm_learners


@pytest.mark.parametrize("name", sorted(all_learners()))
def test_every_learner_runs_through_the_warmup(name):
    """Each registered learner goes through the calls the service makes (fixed-budget ones with a budget, as an
    experiment gives them); an exception here would mean its kernels still compile in a request."""
    cls = all_learners()[name]
    params = {"budget": 600} if cls.kind == "fixed_budget" else {}
    warmup._exercise(name, params)


def test_a_two_label_experiments_kinf_learner_runs_through_the_warmup():
    """A K_inf learner on a two-point support (as a two-label experiment creates it) is told answers on that support:
    graded ones would raise, and warm_learners would skip it silently."""
    warmup._exercise("kl_rand_lucb", {"form": "kinf", "support": [0.0, 1.0], "delta": 0.05})


def _kernel_signatures() -> dict[str, int]:
    """How many compiled signatures each of the package's numba kernels holds in this process (compiled or loaded
    from the on-disk cache: either way, something a request would otherwise have paid for)."""
    import sys

    import numba.core.registry

    out = {}
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("purebandits"):
            for attr, obj in vars(mod).items():
                if isinstance(obj, numba.core.registry.CPUDispatcher):
                    out[f"{modname}.{attr}"] = len(obj.signatures)
    return out


@pytest.mark.slow  # a fresh interpreter loads a learner's kernels
@pytest.mark.parametrize("name", ["kl_rand_lucb", "lil_ucb", "successive_elimination"])
def test_after_the_warmup_a_participants_calls_load_no_kernel(name):
    """After the warm-up, the calls a participant's request makes need no kernel the warm-up did not load: among
    them the restricted ask of someone who has rated items (``repeats``), which the warm-up once left to the first
    such request. Run in a fresh interpreter, so that no other test has loaded the kernels before."""
    import json
    import subprocess
    import sys

    code = f"""
import json, inspect, numpy as np
import tests.service.test_warmup as tw
from purebandits.registry import make_learner
from purebandits.service import warmup
warmup._exercise({name!r}, {{}})
before = tw._kernel_signatures()
lrn = make_learner({name!r}).start(40, seed=1)
rng = np.random.default_rng(1)
for step in range(200):
    allowed = np.ones(40, dtype=np.bool_)
    allowed[rng.choice(40, size=step % 13, replace=False)] = False
    for arm in lrn.ask(1, allowed=allowed):
        lrn.tell(arm, float(rng.integers(3)) / 2)
    if step % 50 == 49:
        lrn.stopping_progress()
        lrn.intervals_of([0, 1])
after = tw._kernel_signatures()
print(json.dumps(sorted(k for k, v in after.items() if v > before.get(k, 0))))
"""
    root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "PYTHONPATH": root + "/src:" + root})
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_compile_progress_speaks_only_when_numba_compiles():
    """The first start's long compile is announced (what, why once, how long it took); a warm start prints nothing.

    The output here is not a terminal, so tqdm's counter stays off and only the two lines are written."""
    import io

    from numba import njit

    @njit  # defined here, so nothing has compiled it yet
    def twice(x):
        return 2 * x

    out = io.StringIO()
    with warmup.compile_progress("testing", file=out):
        assert twice(21) == 42
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("purebandits: testing: compiling its kernels (only at the first start of this version")
    assert re.fullmatch(r"purebandits: testing: compiled [1-9][0-9]* kernels in [0-9]+ s", lines[1])

    quiet = io.StringIO()
    with warmup.compile_progress("testing", file=quiet):
        assert twice(4) == 8  # compiled above: nothing to say
    assert quiet.getvalue() == ""


def test_warming_is_once_per_process_and_never_raises():
    spec = ("lil_ucb", {"delta": 0.05, "preset": "heuristic"})
    assert warm_learners([spec]) == 1
    assert warm_learners([spec, spec]) == 0  # already warm in this process
    assert warm_learners([("lil_ucb", {"delta": 7.0})]) == 1  # refused by the learner: skipped, not raised
    assert warm_learners([("no_such_learner", {})]) == 1


CACHE_USE = """
import json, sys
import numba.core.registry
from purebandits.service import warmup
warmup._exercise("ucb1", {})
hits = misses = 0
for name, mod in list(sys.modules.items()):
    if name.startswith("purebandits"):
        for obj in vars(mod).values():
            if isinstance(obj, numba.core.registry.CPUDispatcher):
                hits += sum(obj.stats.cache_hits.values())
                misses += sum(obj.stats.cache_misses.values())
print(json.dumps({"hits": hits, "misses": misses}))
"""


@pytest.mark.slow  # compiles a learner into an empty cache in a fresh interpreter
def test_background_warm_fills_the_cache_once(tmp_path, monkeypatch):
    """The background process compiles into the cache the server then loads from, writes its stamp, and is
    not started again for the same sources."""
    import json
    import subprocess
    import sys

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    proc = warmup.warm_all_in_background(["ucb1"])
    assert proc is not None
    assert proc.wait(timeout=600) == 0
    stamp = warmup._stamp_path()
    assert json.loads(stamp.read_text()) == {"learners": ["ucb1"]}
    assert warmup.warm_all_in_background(["ucb1"]) is None  # finished for these sources: not again
    out = subprocess.run([sys.executable, "-c", CACHE_USE], capture_output=True, text=True, check=True, timeout=600)
    use = json.loads(out.stdout.strip().splitlines()[-1])
    assert use["hits"] > 0 and use["misses"] == 0  # every kernel the service calls came from the cache


def test_background_warm_runs_one_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    stamp = warmup._stamp_path()
    stamp.parent.mkdir(parents=True)
    fd = warmup._locked(stamp.with_name(stamp.name + ".lock"))
    assert fd is not None
    try:
        assert warmup.warm_all_in_background(["ucb1"]) is None  # another holds the lock
        assert warmup._main(["ucb1"]) == 0 and not stamp.exists()  # a child started anyway steps aside
    finally:
        import os

        os.close(fd)
