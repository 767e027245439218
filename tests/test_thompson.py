"""Thompson sampling (NEXT form): Beta parameters, identical draws in both drivers, LS/budget stop."""

import numpy as np

from purebandits.algorithms.thompson import ThompsonSampling, ts_pick
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.testing.checks import check_kernel_matches_reference, run_learner


def _numpy_pick(sums, counts, alpha, rng):
    a = np.maximum(1.0, (1.0 + sums) / alpha)
    b = np.maximum(1.0, (1.0 + counts - sums) / alpha)
    theta = np.array([rng.beta(a[i], b[i]) for i in range(len(a))])
    return int(np.argmax(theta))


def test_beta_draws_identical_between_numba_and_numpy():
    data = np.random.default_rng(0)
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(500):
        counts = data.integers(0, 200, size=7)
        sums = np.floor(data.random(7) * (counts + 1))
        assert ts_pick(sums, counts, 2.0, r1) == _numpy_pick(sums, counts, 2.0, r2)
    assert r1.bit_generator.state == r2.bit_generator.state


def test_budget_caps_pulls_even_with_concurrent_asks():
    learner = ThompsonSampling(delta=None, budget=20).start(3, seed=0)
    asked = learner.ask(50)
    assert len(asked) == 20 and learner.ask(1) == []
    for arm in asked[:-1]:
        learner.tell(arm, 1.0)
    assert not learner.done
    learner.tell(asked[-1], 0.0)
    assert learner.done and learner.n_pulls == 20


def test_without_delta_or_budget_it_never_stops():
    learner = ThompsonSampling(delta=None).start(2, seed=0)
    run_learner(learner, Bernoulli([0.9, 0.1]), 1, max_pulls=3000, compiled=True)
    assert not learner.done and learner.n_pulls == 3000 and learner.recommend() == [0]


def test_ls_stops_when_intervals_are_narrow():
    """LS stops TS once the starved arm's interval is narrow enough: low-noise arms, small sigma."""
    learner = ThompsonSampling(delta=0.1, sigma=0.02).start(2, seed=0)
    run_learner(learner, Gaussian([0.1, 0.9], 0.02**2), 1, compiled=True)
    assert learner.done and learner.recommend() == [1] and learner.n_pulls < 1000


class _TSNoLS(ThompsonSampling):
    test_params = {"delta": None, "budget": 3000, "alpha": 1.0}


def test_kernel_matches_reference_without_ls():
    check_kernel_matches_reference(_TSNoLS)
