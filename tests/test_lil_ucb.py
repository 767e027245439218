"""lil'UCB's Python ask/tell path: the float heap with tie lists picks the brute-force argmax."""

import copy
import json
import math
import pickle

import numpy as np
import pytest

import purebandits.algorithms.lil_ucb as lil
from purebandits import LilUCB
from purebandits.bounds import lil_ucb_index_s
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.testing.checks import run_learner


def _expected_arm(learner: LilUCB) -> int:
    """argmax of the index over all arms (pending pulls count in T), ties to the lowest arm."""
    best, best_key = -1, -math.inf
    for a in range(learner.n_arms_):
        c, t = int(learner.counts_[a]), int(learner.counts_[a] + learner.pending_[a])
        if t == 0:
            key = math.inf
        else:
            mean = learner.sums_[a] / c if c > 0 else 0.0
            key = lil_ucb_index_s(mean, float(t), learner._delta_int, learner._eps, learner._beta, learner._sigma)
        if best < 0 or key > best_key:
            best, best_key = a, key
    return best


@pytest.mark.parametrize("params", [{}, {"preset": "faithful"}, {"ls": True}, {"beta": 0.1}])
@pytest.mark.parametrize("n", [2, 5, 40])
@pytest.mark.parametrize("bernoulli", [True, False])
def test_asks_are_the_brute_force_argmax_under_concurrency(params, n, bernoulli):
    """Random asks (1 to 4 arms), shuffled tells, cancels, JSON and pickle round trips.

    Bernoulli rewards make many arms tie (equal counts and sums), which exercises the tie
    lists, their lazy cleanup and the rebuild; non-int arms and int rewards take the checked path.
    """
    _check_concurrent_run(params, n, bernoulli)


def _check_concurrent_run(params: dict, n: int, bernoulli: bool) -> None:
    rng = np.random.default_rng(n + 100 * bernoulli)
    learner = LilUCB(delta=0.1, **params).start(n, seed=1)
    out: list[int] = []
    for _ in range(1500):
        if learner.done and not out:
            break
        r = rng.random()
        if r < 0.03:
            learner = LilUCB(delta=0.1, **params).load_state_dict(json.loads(json.dumps(learner.state_dict())))
        elif r < 0.05:
            learner = pickle.loads(pickle.dumps(learner)) if r < 0.04 else copy.deepcopy(learner)
        if not out or rng.random() < 0.5:
            for _ in range(1 if rng.random() < 0.6 else int(rng.integers(2, 5))):
                expected = -1 if learner.done else _expected_arm(learner)
                got = learner.ask(1)
                assert got == ([] if learner.done else [expected])
                out += got
        rng.shuffle(out)
        for _ in range(int(rng.integers(0, len(out) + 1))):
            arm = out.pop()
            if rng.random() < 0.1:
                learner.cancel(arm)
            elif bernoulli:
                reward = float(rng.random() < (0.7 if arm == 0 else 0.5))
                learner.tell(*((np.int64(arm), int(reward)) if rng.random() < 0.1 else (arm, reward)))
            else:
                learner.tell(arm, float(rng.normal(0.5 if arm == 0 else 0.0, 0.5)))
        assert int(learner.pending_.sum()) == len(out)
        assert learner.n_pulls == int(learner.counts_.sum())


def test_ask_many_matches_repeated_ask_one():
    a = LilUCB().start(30, seed=0)
    b = LilUCB().start(30, seed=0)
    stream = Bernoulli(np.linspace(0.2, 0.8, 30)).stream(3)
    for _ in range(200):
        many = a.ask(4)
        ones = [x for _ in range(4) for x in b.ask(1)]
        assert many == ones
        for arm in many:
            r = stream.draw(arm)
            a.tell(arm, r)
            b.tell(arm, r)
    assert a.state_json() == b.state_json()


def test_radius_beyond_the_table_matches_the_kernel(monkeypatch):
    """Past the radius table the Python path evaluates the index directly: same doubles as the kernel."""
    monkeypatch.setattr(lil, "_TABLE_SIZE", 3)
    model = Gaussian(np.array([0.5, 0.3, 0.3, 0.2]), 0.25)
    ref = run_learner(LilUCB().start(4, seed=5), model, 6)
    fast = LilUCB().start(4, seed=5)
    fast.run_compiled(model.stream(6), 10**6)
    assert ref.done and ref.state_json() == fast.state_json()
    _check_concurrent_run({}, 5, False)


def test_tell_errors_on_both_paths():
    learner = LilUCB().start(3, seed=0)
    with pytest.raises(ValueError, match="no pending pull"):
        learner.tell(0, 0.5)  # heap not built yet: checked path
    (arm,) = learner.ask(1)
    for bad in (math.inf, -math.inf, math.nan, np.float64(math.nan)):
        with pytest.raises(ValueError, match="reward must be finite"):
            learner.tell(arm, bad)
    for bad_arm in (3, -1, 1.0, True):
        with pytest.raises(ValueError, match="arm must be"):
            learner.tell(bad_arm, 0.5)
    with pytest.raises(ValueError, match="no pending pull"):
        learner.tell((arm + 1) % 3, 0.5)
    learner.tell(arm, 0.5)
    with pytest.raises(ValueError, match="no pending pull"):
        learner.tell(arm, 0.5)
    assert learner.n_pulls == 1 and int(learner.pending_.sum()) == 0


def test_late_answers_after_the_ls_stop_do_not_change_the_recommendation():
    """With LS on, answers that were out when a rule fired used to re-fire lil'UCB's own rule
    and overwrite the frozen recommendation (seeds 6, 16 and 35 did before the fix)."""
    for seed in (6, 16, 35):
        learner = LilUCB(delta=0.1, ls=True).start(3, seed=seed)
        stream = Bernoulli(np.array([0.55, 0.5, 0.45])).stream(seed)
        out: list[int] = []
        while not learner.done:
            out += learner.ask(8)
            arm = out.pop(0)
            learner.tell(arm, stream.draw(arm))
        rec, pulls = learner.recommend(), learner.n_pulls
        for arm in out:
            learner.tell(arm, stream.draw(arm))
        assert learner.done and learner.recommend() == rec
        assert learner.n_pulls == pulls + len(out)
