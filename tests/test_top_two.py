"""Top-two (EB/TS leader, TC challenger): leader frequency, challenger choice, both drivers."""

import math

import numpy as np
import pytest

from purebandits.algorithms.top_two import TopTwo, top_two_pick
from purebandits.bounds import glr_pair_cost
from purebandits.instances.rewards import Bernoulli
from purebandits.testing.checks import check_kernel_matches_reference


@pytest.mark.parametrize("leader", ["eb", "ts"])
def test_pulls_the_leader_about_half_the_time(leader):
    learner = TopTwo(delta=1e-9, leader=leader).start(5, seed=3)
    stream = Bernoulli([0.6, 0.55, 0.5, 0.45, 0.4]).stream(4)
    hits = total = 0
    for _ in range(4000):
        (arm,) = learner.ask(1)
        if learner._last_leader >= 0:
            total += 1
            hits += arm == learner._last_leader
        learner.tell(arm, stream.draw(arm))
    assert not learner.done and total == 4000 - 5
    # two-sided binomial test at level 1e-3 (z = 3.29) of P(leader) = beta = 1/2
    assert abs(hits - total / 2) <= 3.29 * math.sqrt(total / 4)


def test_challenger_minimises_the_transportation_cost():
    rng = np.random.default_rng(0)
    for gaussian in (True, False):
        for _ in range(30):
            counts = rng.integers(1, 40, size=5)
            pending = rng.integers(0, 2, size=5)
            sums = rng.random(5) * counts
            mu = sums / counts
            lead = int(np.argmax(mu))
            n = counts + pending
            cost = [glr_pair_cost(mu[lead], n[lead], mu[j], n[j], gaussian, 0.5) if j != lead else np.inf
                    for j in range(5)]
            r = np.random.default_rng(1)
            u = np.random.default_rng(1).random()
            arm, got_lead = top_two_pick(sums, counts, pending, False, gaussian, 0.5, 0.5, r)
            assert got_lead == lead
            assert arm == (lead if u < 0.5 else int(np.argmin(cost)))


class _TTBernoulliTS(TopTwo):
    tags = {"top_k": False, "bounded_rewards": True}
    test_params = {"leader": "ts", "cost": "bernoulli"}


class _TTGaussianTS(TopTwo):
    test_params = {"leader": "ts", "threshold": "theory"}


@pytest.mark.parametrize("cls", [_TTBernoulliTS, _TTGaussianTS])
def test_kernel_matches_reference_ts_leader(cls):
    check_kernel_matches_reference(cls)
