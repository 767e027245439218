"""Every registered learner through every common check (purebandits.testing.checks)."""

import subprocess
import sys

import pytest

from purebandits.registry import all_learners
from purebandits.testing.checks import ERROR_CHECK_LOOKS, _trace, parametrize_with_checks


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


def _curtailed_fail_probability(p: float, runs: int, target: float, **design) -> tuple[float, float]:
    """Exactly, by dynamic programming over the error count: P(the curtailed check fails) for a learner erring with
    probability p per run, and the same for the full fixed-size test. ``design``: the looks' keywords of
    :func:`curtailed_error_count` (the defaults when empty)."""
    import numpy as np
    from scipy.stats import binom

    from purebandits.testing.checks import ALTERNATIVE_FACTOR, binomial_tolerance, curtailed_looks

    tol = binomial_tolerance(runs, target)
    levels = curtailed_looks(runs, **design)
    assert sum(levels.values()) == pytest.approx(1e-3)  # the union bound's beta, however it is split
    alive = np.zeros(runs + 2)
    alive[0] = 1.0  # P(still running with this many errors)
    failed = 0.0
    for m in range(1, runs + 1):
        alive = np.concatenate([[alive[0] * (1 - p)], alive[1:] * (1 - p) + alive[:-1] * p])
        failed += alive[tol + 1:].sum()
        alive[tol + 1:] = 0.0
        if m in levels:
            alive[binom.cdf(np.arange(alive.size), m, ALTERNATIVE_FACTOR * target) <= levels[m]] = 0.0
    return failed, float(binom.sf(tol, runs, p))


@pytest.mark.parametrize("design", [{}, ERROR_CHECK_LOOKS], ids=["default", "error_checks"])
def test_curtailed_error_check_keeps_the_full_tests_level_and_power(design):
    """The early stops never make a correct learner fail more often, and cost at most 1e-3 of power against an
    error rate 2.5 times the target (the union bound of :func:`curtailed_error_count`): with the default equal
    split of the looks' levels and with the common error-rate checks' :data:`ERROR_CHECK_LOOKS`."""
    for runs in (200, 300):
        for p in (0.0, 0.05, 0.1):
            curtailed, full = _curtailed_fail_probability(p, runs, 0.1, **design)
            assert curtailed <= full + 1e-12 and full <= 1e-3
        curtailed, full = _curtailed_fail_probability(0.25, runs, 0.1, **design)
        assert full - 1e-3 <= curtailed <= full and curtailed >= 0.99


def test_curtailed_error_count_stops_early_only_when_the_verdict_is_clear():
    from purebandits.testing.checks import curtailed_error_count

    assert curtailed_error_count(lambda r: False, 200, 0.1)[:2] == (0, 40)  # 0.75 ** 40 < 1e-3 / 17 < 0.75 ** 30
    errors, done, tol = curtailed_error_count(lambda r: True, 200, 0.1)
    assert (errors, done) == (tol + 1, tol + 1)  # fails as soon as the full test must fail
    errors, done, tol = curtailed_error_count(lambda r: r % 5 == 0, 200, 0.1)  # 20 %: never passes early
    assert (errors, done, tol) == (35, 171, 34)  # run 171 is the 35th error: the full test is then lost
    # the common checks' looks: 0.75 ** 25 = 7.5e-4 <= 0.8e-3, one error passes at 55 (not 45), the rest as above
    assert curtailed_error_count(lambda r: False, 200, 0.1, **ERROR_CHECK_LOOKS)[:2] == (0, 25)
    assert curtailed_error_count(lambda r: r == 3, 200, 0.1, **ERROR_CHECK_LOOKS)[:2] == (1, 55)
    errors, done, tol = curtailed_error_count(lambda r: True, 200, 0.1, **ERROR_CHECK_LOOKS)
    assert (errors, done) == (tol + 1, tol + 1)
    assert curtailed_error_count(lambda r: r % 5 == 0, 200, 0.1, **ERROR_CHECK_LOOKS) == (35, 171, 34)
