"""UCB1 + LS: the index, virtual pulls, and the LS stop."""

import math

import numpy as np

from purebandits.algorithms.ucb1 import UCB1, ucb1_pick
from purebandits.bounds import lil_stopping_arm, ls_delta
from purebandits.instances.rewards import Bernoulli
from purebandits.stopping import LS_EPSILON


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
    d_ls = ls_delta(0.1, LS_EPSILON)
    while not learner.done:
        before = lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5)
        assert before == -1
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    assert lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5) == 0
    assert learner.recommend() == [0]
