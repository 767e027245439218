"""The numba cache of a package's kernels goes stale when any compiled source of the package changes.

numba alone checks only the file of the function it loads: a caller whose file did not change keeps
running its cached copy of an edited callee. Each test builds a two-module package in a temporary
directory and runs it in fresh interpreters sharing one cache directory, as two runs of an
installed copy would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from purebandits.kernel_cache import sources_digest

CALLER = """
from numba import njit

from {pkg}.callee import value


@njit(cache=True)
def call():
    return value()
"""

CALLEE = """
from numba import njit


@njit(cache=True)
def value():
    return {value}
"""

RUN = """
import json
from {pkg}.caller import call
out = call()
print(json.dumps({{"out": out, "hits": sum(call.stats.cache_hits.values()),
                  "locator": type(call._cache._impl.locator).__name__}}))
"""


def make_package(root: Path, pkg: str, stamped: bool) -> None:
    d = root / pkg
    d.mkdir()
    init = ("from pathlib import Path\n\nfrom purebandits.kernel_cache import stamp_package_kernels\n\n"
            "stamp_package_kernels(Path(__file__).parent)\n") if stamped else ""
    (d / "__init__.py").write_text(init)
    (d / "caller.py").write_text(CALLER.format(pkg=pkg))
    (d / "callee.py").write_text(CALLEE.format(value=1))


def run(root: Path, pkg: str, cache: Path) -> dict:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), src]), "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)
    proc = subprocess.run([sys.executable, "-c", RUN.format(pkg=pkg)], env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def edit_callee(root: Path, pkg: str, value: int) -> None:
    (root / pkg / "callee.py").write_text(CALLEE.format(value=value))


@pytest.mark.parametrize("stamped", [True, False])
@pytest.mark.slow  # compiles kernels in fresh interpreters
def test_an_edited_callee_is_recompiled_only_when_stamped(tmp_path: Path, stamped: bool) -> None:
    pkg = "stamped_pkg" if stamped else "plain_pkg"
    make_package(tmp_path, pkg, stamped)
    cache = tmp_path / "cache"
    first = run(tmp_path, pkg, cache)
    assert first["out"] == 1 and first["hits"] == 0
    again = run(tmp_path, pkg, cache)
    assert again["out"] == 1 and again["hits"] == 1  # an unchanged tree loads from the cache
    assert again["locator"] == ("PackageStampedUserProvidedCacheLocator" if stamped else "UserProvidedCacheLocator")
    edit_callee(tmp_path, pkg, 2)  # the caller's file is untouched
    after = run(tmp_path, pkg, cache)
    if stamped:
        assert after["out"] == 2 and after["hits"] == 0  # recompiled with the new callee
        assert run(tmp_path, pkg, cache)["hits"] == 1  # the new entry replaced the stale one
    else:  # numba's own stamp: the old machine code, the hazard this module closes
        assert after["out"] == 1 and after["hits"] == 1


def test_digest_covers_compiled_sources_only(tmp_path: Path) -> None:
    make_package(tmp_path, "pkg", stamped=True)
    base = sources_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "notes.py").write_text("X = 1\n")  # no numba: cannot reach a kernel
    assert sources_digest(tmp_path / "pkg") == base
    # numba named, or imported inside a function (a report of its version): no kernel there either
    (tmp_path / "pkg" / "report.py").write_text('"""Uses numba\'s cache."""\n\ndef version():\n'
                                                 '    import numba\n    return numba.__version__\n')
    assert sources_digest(tmp_path / "pkg") == base
    edit_callee(tmp_path, "pkg", 3)
    assert sources_digest(tmp_path / "pkg") != base


def test_package_kernels_are_stamped_and_others_are_not(tmp_path: Path) -> None:
    from numba import njit

    from purebandits.bounds import kl_bernoulli_s

    kl_bernoulli_s(0.5, 0.25)
    assert type(kl_bernoulli_s._cache._impl.locator).__name__.startswith("PackageStamped")
    mod = tmp_path / "outside_mod.py"
    mod.write_text(textwrap.dedent("def f():\n    return 1\n"))
    sys.path.insert(0, str(tmp_path))
    try:
        import outside_mod

        f = njit(cache=True)(outside_mod.f)
        assert not type(f._cache._impl.locator).__name__.startswith("PackageStamped")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("outside_mod", None)


def test_the_tests_compiled_helpers_are_stamped_with_the_package_sources():
    """tests/conftest.py stamps the tests' cached helpers with their sources and the package's: a kernel edit
    compiles them again (numba's own stamp would keep their stale machine code)."""
    from purebandits import kernel_cache

    tests_dir = Path(__file__).parent
    digest = kernel_cache.stamped_digest(tests_dir)
    assert digest == kernel_cache.sources_digest(tests_dir) + kernel_cache.PACKAGE_DIGEST


def test_the_prewarm_compiles_each_learner_once_a_family_per_process_heaviest_first():
    """``_prewarm_kernels.compile_families``: every registered learner in exactly one family, a family's learners
    from one module (they share kernels, so one process compiles them one after another), KL-LUCB's family first
    with KL-LUCB at its head."""
    from _prewarm_kernels import compile_families
    from purebandits.registry import all_learners

    learners = all_learners()
    families = compile_families(learners)
    flat = [name for family in families for name in family]
    assert sorted(flat) == sorted(learners) and len(flat) == len(set(flat))
    assert all(len({learners[n].__module__ for n in family}) == 1 for family in families)
    assert len({learners[family[0]].__module__ for family in families}) == len(families)
    assert families[0][0] == "kl_lucb" and {"lucb1", "kl_rand_lucb"} <= set(families[0])
