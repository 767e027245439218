"""RandomSampling: uniform i.i.d. arms, never done, state and replay, parameter errors.

It is tagged ``never_stops``: the common checks (two arms, Gaussian rewards, pending and
cancelled pulls, replay, ...) run a fixed number of pulls instead of waiting for a stop and
check that it is still running and recommends the best arms; the tests here add what is
particular to it.
"""

import json

import numpy as np
import pytest
from scipy.stats import chi2

from purebandits import RandomSampling, make_learner
from purebandits.instances import Bernoulli, make_instance
from purebandits.registry import all_learners
from purebandits.simulate import simulate
from purebandits.simulate.engine import _advance_reference

#: significance level of the chi-square tests: the seeds are fixed, so a pass is deterministic,
#: and a uniform sampler would fail one of them with probability 1e-3 over the choice of seed
ALPHA = 1e-3


def _chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def test_registered_as_anytime_top_k():
    assert all_learners()["random_sampling"] is RandomSampling
    assert RandomSampling.kind == "anytime" and RandomSampling.tags["top_k"] is True
    assert isinstance(make_learner("random_sampling", k=3, delta=0.1), RandomSampling)
    assert RandomSampling().get_params() == {"k": 1, "delta": 0.05}


def test_arm_frequencies_are_uniform():
    n, pulls = 10, 200_000
    learner = RandomSampling().start(n, seed=2024)
    stream = Bernoulli(np.linspace(0.1, 0.9, n)).stream(1)
    _advance_reference(learner, stream, pulls)
    assert learner.n_pulls == pulls
    stat = _chi_square(learner.counts_)
    # threshold from the chi-square distribution with n - 1 degrees of freedom (27.88 at 1e-3)
    assert stat < chi2.ppf(1 - ALPHA, n - 1), stat


def test_consecutive_pairs_are_uniform():
    """i.i.d.: the pair (arm at ask t, arm at ask t + 1) is uniform on n x n cells."""
    n, asks = 6, 72_000
    learner = RandomSampling().start(n, seed=7)
    arms = np.array([learner.ask(1)[0] for _ in range(asks)])  # never told: all stay pending
    pairs = np.bincount(arms[:-1:2] * n + arms[1::2], minlength=n * n)
    assert _chi_square(pairs) < chi2.ppf(1 - ALPHA, n * n - 1)


def test_choice_is_independent_of_pending_and_rewards():
    """Asks with many pulls out, or after lopsided rewards, draw the same numbers as a fresh generator."""
    n = 8
    learner = RandomSampling().start(n, seed=5)
    ref = np.random.default_rng(5)
    got = learner.ask(50)  # 50 pending pulls, none answered
    assert got == [int(ref.integers(n)) for _ in range(50)]
    for arm in got[:25]:
        learner.tell(arm, 1.0 if arm == 0 else 0.0)
    for arm in got[25:40]:
        learner.cancel(arm)
    assert learner.ask(30) == [int(ref.integers(n)) for _ in range(30)]
    assert int(learner.pending_.sum()) == 10 + 30


def test_batch_asks_spread_by_chance_only():
    """ask(m) returns m valid arms; with m = n some arm is repeated (no de-duplication)."""
    n = 20
    learner = RandomSampling().start(n, seed=3)
    batch = learner.ask(n)
    assert len(batch) == n and all(isinstance(a, int) and 0 <= a < n for a in batch)
    assert len(set(batch)) < n  # P(all distinct) = 20!/20^20 ~ 2e-8 for any seed


def test_never_done_and_recommends_the_empirical_best():
    n = 6
    means = np.array([0.3, 0.8, 0.2, 0.75, 0.1, 0.2])
    learner = RandomSampling(k=2).start(n, seed=11)
    stream = Bernoulli(means).stream(12)
    _advance_reference(learner, stream, 30_000)
    assert not learner.done and learner.n_pulls == 30_000
    assert learner.recommend() == [1, 3]  # best first
    assert learner.ask(3) != []  # still asking
    learner.run_compiled(stream, 2_000_000)  # compiled driver: still not done at the cap
    assert not learner.done and learner.n_pulls == 2_000_000
    assert learner.recommend() == [1, 3]
    lo, hi = learner.intervals()
    assert lo.shape == hi.shape == (n,) and np.all(lo <= learner.means()) and np.all(learner.means() <= hi)
    assert np.all(lo <= means) and np.all(means <= hi)


def test_recommend_ties_go_to_the_lower_index():
    learner = RandomSampling(k=2).start(4, seed=0)
    assert learner.recommend() == [0, 1]  # nothing answered: every mean is 0
    for arm in learner.ask(200):
        learner.tell(arm, 0.5)
    assert learner.recommend() == [0, 1]


def test_state_roundtrip_through_json_continues_identically():
    n = 7
    model = Bernoulli(np.linspace(0.1, 0.7, n))
    a = RandomSampling(k=2, delta=0.1).start(n, seed=7)
    stream = model.stream(8)
    _advance_reference(a, stream, 500)
    pending = a.ask(3)
    state = json.loads(json.dumps(a.state_dict()))
    assert set(state["state"]) == {k for k in vars(a) if k.endswith("_") and not k.startswith("_")}
    b = RandomSampling(k=2, delta=0.1).load_state_dict(state)
    assert b.state_json() == a.state_json()
    sa, sb = model.stream(9), model.stream(9)
    for arm in pending:
        a.tell(arm, sa.draw(arm))
        b.tell(arm, sb.draw(arm))
    for _ in range(300):
        xa, xb = a.ask(1), b.ask(1)
        assert xa == xb
        a.tell(xa[0], sa.draw(xa[0]))
        b.tell(xb[0], sb.draw(xb[0]))
    assert a.state_json() == b.state_json() and a.recommend() == b.recommend()
    with pytest.raises(ValueError, match="parameters"):
        RandomSampling(k=3, delta=0.1).load_state_dict(state)


def test_compiled_driver_equals_the_ask_tell_loop():
    """On a caption contest (categorical rewards), resumed at checkpoints and after Python pulls."""
    inst = make_instance("caption:559")
    ref = RandomSampling(k=3).start(inst.n_arms, seed=21)
    fast = RandomSampling(k=3).start(inst.n_arms, seed=21)
    s_ref, s_fast = inst.model.stream(22), inst.model.stream(22)
    _advance_reference(ref, s_ref, 40_000)
    fast.run_compiled(s_fast, 7)
    _advance_reference(fast, s_fast, 1_000)
    fast.run_compiled(s_fast, 40_000)
    assert fast.state_json() == ref.state_json()


def test_simulate_needs_only_a_cap():
    kw = dict(reps=3, seed=0, jobs=1, max_pulls=4_000, checkpoints=[100, 1_000], progress=False)
    ref = simulate(RandomSampling(), "custom:means=0.9/0.5/0.4", driver="reference", **kw)
    fast = simulate(RandomSampling(), "custom:means=0.9/0.5/0.4", **kw)
    assert fast.driver == "compiled"
    for res in (ref, fast):
        assert not res.stopped.any() and (res.pulls == 4_000).all() and res.correct.all()
    np.testing.assert_array_equal(ref.counts, fast.counts)
    np.testing.assert_array_equal(ref.ckpt_recommended, fast.ckpt_recommended)


@pytest.mark.parametrize("params, name", [
    ({"k": 0}, "k"), ({"k": 10}, "k"), ({"k": 1.5}, "k"), ({"k": True}, "k"),
    ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"), ({"delta": -0.1}, "delta"),
    ({"delta": float("nan")}, "delta"), ({"delta": "0.05"}, "delta"), ({"delta": None}, "delta"),
])
def test_parameter_errors_name_what_is_allowed(params, name):
    learner = RandomSampling(**params)  # the constructor only stores them
    assert learner.get_params() == {"k": 1, "delta": 0.05, **params}
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        learner.start(10, seed=0)


def test_other_errors():
    with pytest.raises(ValueError, match="n_arms"):
        RandomSampling().start(1)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_learner("random_sampling", budget=100)
    learner = RandomSampling().start(3, seed=0)
    with pytest.raises(ValueError, match="no pending pull"):
        learner.tell(0, 1.0)
    with pytest.raises(ValueError, match="n must be"):
        learner.ask(0)
