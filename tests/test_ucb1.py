"""UCB1 + LS: the index, virtual pulls, and the LS stop."""

import math

import numpy as np
import pytest

from purebandits.algorithms.ucb1 import LAZY_MIN_ARMS, UCB1, ucb1_index, ucb1_pick
from purebandits.bounds import lil_stopping_arm, ls_delta
from purebandits.heaps import keyheap_best_bonus, keyheap_init
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.stopping import LS_EPSILON
from purebandits.testing.checks import run_learner


def test_index_is_ucb1():
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(1, 50, size=6)
        pending = rng.integers(0, 3, size=6)
        sums = rng.random(6) * counts
        t = float(counts.sum() + pending.sum())
        idx = sums / counts + np.sqrt(2 * 1.0 * math.log(t) / (counts + pending))
        assert ucb1_pick(sums, counts, pending, t, 1.0) == int(np.argmax(idx))


def test_unpulled_arms_first_then_virtual_pulls_spread():
    learner = UCB1().start(3, seed=0)
    assert learner.ask(3) == [0, 1, 2]
    for arm in (0, 1, 2):
        learner.tell(arm, 0.5)
    # equal means: a pending pull lowers an arm's index, so concurrent asks differ
    assert sorted(learner.ask(3)) == [0, 1, 2]


def test_stops_exactly_when_ls_fires():
    learner = UCB1(delta=0.1).start(4, seed=0)
    stream = Bernoulli([0.8, 0.3, 0.3, 0.3]).stream(1)
    d_ls = ls_delta(0.05, LS_EPSILON)  # LS gets nu/2 (JMNB14 Sec. 5)
    while not learner.done:
        before = lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5)
        assert before == -1
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    assert lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5) == 0
    assert learner.recommend() == [0]


@pytest.mark.parametrize("growth", [0.0, 1e-3, 0.5])
def test_lazy_pick_equals_the_scan_ties_included(growth):
    """The heap walk returns the scan's arm, on states full of exact ties (integer sums, equal counts).

    With ``growth = 0`` the heap keys equal the indices, so a tied arm sits exactly at the
    pruning threshold: a walk that pruned on ``<=`` or broke ties the other way would differ.
    """
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(2, 60))
        counts = rng.integers(1, 4, size=n) * 5
        sums = rng.integers(0, 3, size=n) * counts / 2.0
        t = float(counts.sum())
        lt, lt1 = math.log(t), math.log(t * (1.0 + growth))
        key = np.array([ucb1_index(s / c, float(c), lt1, 1.0) for s, c in zip(sums, counts, strict=True)])
        hkey, harm, where = np.empty(n + 1), np.empty(n + 1, np.int64), np.empty(n, np.int64)
        keyheap_init(key, hkey, harm, where)
        want = ucb1_pick(sums, counts, np.zeros(n, np.int64), t, 1.0)
        got = keyheap_best_bonus(hkey, harm, n, np.empty(n + 1, np.int64), sums / counts, counts.astype(float),
                                 2.0 * lt)  # c = 2 sigma^2 log t with sigma = 1
        assert got == want


@pytest.mark.parametrize("gaussian", [False, True])
def test_kernel_on_the_lazy_path_matches_ask_tell(gaussian):
    """120 arms (past LAZY_MIN_ARMS): the compiled run equals the O(n)-scan ask/tell loop, state for state."""
    n = 120
    means = np.linspace(0.2, 0.8, n)
    means[-3:] = 0.8  # Bernoulli ties at the top
    model = Gaussian(means, 0.25) if gaussian else Bernoulli(means)
    ref = UCB1(delta=0.1).start(n, seed=4)
    run_learner(ref, model, 11, max_pulls=30_000)
    fast = UCB1(delta=0.1).start(n, seed=4)
    stream = model.stream(11)
    for checkpoint in (50, 120, 121, 5_000, 30_000):
        fast.run_compiled(stream, checkpoint)
    assert n >= LAZY_MIN_ARMS and fast.n_pulls == 30_000
    assert fast.state_json() == ref.state_json()
