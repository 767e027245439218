"""Every registered learner through every common check (purebandits.testing.checks)."""

import subprocess
import sys

from purebandits.registry import all_learners
from purebandits.testing.checks import _trace, parametrize_with_checks


@parametrize_with_checks(all_learners().values())
def test_common(learner_class, check):
    check(learner_class)


def test_reproducible_across_processes():
    """The same seed gives the same asks and recommendation in another interpreter."""
    code = (
        "from purebandits.registry import all_learners\n"
        "from purebandits.testing.checks import _trace\n"
        "for name, cls in all_learners().items(): print(name, _trace(cls, 3))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = "".join(f"{name} {_trace(cls, 3)}\n" for name, cls in all_learners().items())
    assert out == here


def test_algorithms_all_lists_every_learner():
    import purebandits
    import purebandits.algorithms as A

    assert sorted(A.__all__) == sorted(c.__name__ for c in all_learners().values())
    for name in purebandits.__all__:
        assert hasattr(purebandits, name)
