"""The incremental ask/tell paths of Nonadaptive + LS, ExpGap + LS and UCB1 + LS against the O(n) rules.

Each learner runs twice on the same service-style event stream (asks of 1-3 arms, answers out of
order, cancels, state_json round trips and deep copies mid-run): once with the incremental LS
tracker (and UCB1's key-heap pick), once with the reference rules (``_ls_incremental`` /
``_ask_incremental`` False). The asks and the state_json must be identical after every event.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from purebandits.registry import make_learner
from purebandits.testing.state import assert_same_state

CASES = [
    ("non_adaptive", {}),
    ("exp_gap_elimination", {}),
    ("exp_gap_elimination", {"ls": False}),
    ("ucb1", {}),
]


def _reference(learner):
    learner._ls_incremental = False
    learner._ask_incremental = False
    return learner


def _reload(learner, name, params, ref):
    new = make_learner(name, **params).load_state_dict(json.loads(learner.state_json()))
    return _reference(new) if ref else new


def _run(name, params, means, seed, events, roundtrip=True):
    rng = np.random.default_rng(seed)
    n = len(means)
    fast = make_learner(name, **params).start(n, seed=seed)
    ref = _reference(make_learner(name, **params).start(n, seed=seed))
    out: list[tuple[int, float]] = []  # pulls asked and not answered yet: (arm, reward)
    for step in range(events):
        if fast.done_ and not out:
            break
        u = rng.random()
        if u < 0.45 or not out:
            k = int(rng.integers(1, 4))
            a, b = fast.ask(k), ref.ask(k)
            assert a == b, (step, a, b)
            for arm in a:
                out.append((arm, float(rng.random() < means[arm]) if rng.random() < 0.8
                            else float(rng.choice([0.0, 0.5, 1.0]))))
        elif u < 0.93:
            arm, r = out.pop(int(rng.integers(len(out))))  # out of order
            fast.tell(arm, r)
            ref.tell(arm, r)
        else:
            arm, _ = out.pop(int(rng.integers(len(out))))
            fast.cancel(arm)
            ref.cancel(arm)
        if roundtrip and rng.random() < 0.002:
            fast, ref = _reload(fast, name, params, False), _reload(ref, name, params, True)
        if rng.random() < 0.001:
            fast = copy.deepcopy(fast)
        assert_same_state(fast, ref, step)
    return fast, ref


@pytest.mark.slow  # thousands of steps, the whole state compared after each
@pytest.mark.parametrize(("name", "params"), CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_path_equals_reference(name, params, seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 12))
    means = rng.uniform(0.0, 0.2, n)
    means[int(rng.integers(n))] = 1.0  # a clear best, so LS fires within the run
    fast, ref = _run(name, dict(params, delta=0.2), means, seed, 20000)
    assert_same_state(fast, ref)
    assert fast.done_ == ref.done_ and fast.final_ == ref.final_


@pytest.mark.parametrize(("name", "params"), CASES)
def test_incremental_path_many_arms_sequential_prefix(name, params):
    # a longer run at more arms, with the literal ask(1)/tell loop and no round trips: the
    # steady-state path (UCB1's keys rebuilt many times, the LS certificate rescanned)
    means = np.linspace(0.2, 0.9, 300)
    fast = make_learner(name, **params).start(300, seed=5)
    ref = _reference(make_learner(name, **params).start(300, seed=5))
    rng = np.random.default_rng(5)
    for _ in range(20000):
        if fast.done_:
            break
        a, b = fast.ask(1), ref.ask(1)
        assert a == b
        r = float(rng.random() < means[a[0]])
        fast.tell(a[0], r)
        ref.tell(a[0], r)
    assert_same_state(fast, ref)


def test_ucb1_cancel_back_to_zero():
    # a cancel that leaves an arm with no pulls at all (after the keys were built) sends the
    # pick back to the scan, and the keys are rebuilt once every arm has a pull again
    fast = make_learner("ucb1").start(5, seed=0)
    ref = _reference(make_learner("ucb1").start(5, seed=0))
    a = fast.ask(5)
    assert a == ref.ask(5)
    for arm in a[:4]:
        fast.tell(arm, 1.0 if arm == 2 else 0.0)
        ref.tell(arm, 1.0 if arm == 2 else 0.0)
    b = fast.ask(1)  # every T_i > 0: the key heap is built here
    assert b == ref.ask(1)
    assert fast._ub.classes and fast._ub.hz[0] > 0
    fast.cancel(a[4])
    ref.cancel(a[4])
    assert fast._ub.n_zero == 1 and not fast._ub.classes
    fast.tell(b[0], 0.5)
    ref.tell(b[0], 0.5)
    rng = np.random.default_rng(0)
    for _ in range(5000):
        if fast.done_:
            break
        a = fast.ask(2)
        assert a == ref.ask(2)
        fast.cancel(a[0])
        ref.cancel(a[0])
        r = float(rng.random() < (1.0 if a[1] == 2 else 0.1))
        fast.tell(a[1], r)
        ref.tell(a[1], r)
        assert_same_state(fast, ref)
    assert fast.done_


@pytest.mark.parametrize("seed", [0, 1])
def test_ucb1_many_tied_arms(seed):
    # graded rewards on 200 arms: many arms share (mu, T) exactly, so classes form, merge, empty
    # and reappear; the asks must still be the scan's (the lowest arm among the tied best)
    rng = np.random.default_rng(seed)
    fast = make_learner("ucb1").start(200, seed=seed)
    ref = _reference(make_learner("ucb1").start(200, seed=seed))
    out: list[int] = []
    for step in range(15000):
        u = rng.random()
        if u < 0.5 or not out:
            k = int(rng.integers(1, 4))
            a = fast.ask(k)
            assert a == ref.ask(k), step
            out.extend(a)
        elif u < 0.95:
            arm = out.pop(int(rng.integers(len(out))))
            r = float(rng.choice([0.0, 0.5, 1.0], p=[0.5, 0.3, 0.2]))
            fast.tell(arm, r)
            ref.tell(arm, r)
        else:
            arm = out.pop(int(rng.integers(len(out))))
            fast.cancel(arm)
            ref.cancel(arm)
    assert_same_state(fast, ref)
    ub = fast._ub
    assert ub.classes and len(ub.cls) < 200  # ties were collapsed
