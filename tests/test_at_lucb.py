"""AT-LUCB: defaults, radius, stage/J rules, anytime improvement, kernel == reference without delta."""

import math

import numpy as np
import pytest
from scipy import stats

from purebandits.algorithms import ATLUCB
from purebandits.algorithms.at_lucb import (
    CLASSES_OFF,
    CLASSES_ON,
    _at_lucb_scale,
    _at_lucb_workspace,
    _rekey,
    at_lucb_radius,
)
from purebandits.algorithms.kernels.lucb_round_incremental import _UKEY, _UWHERE
from purebandits.bounds import lucb_radius_s
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.metrics import misidentified
from purebandits.testing.checks import run_learner


def test_defaults_are_the_papers():
    p = ATLUCB().get_params()
    assert (p["delta1"], p["alpha"], p["epsilon"], p["delta"]) == (0.5, 0.99, 0.0, None)
    assert ATLUCB.kind == "anytime"


def test_radius_is_lucb1_at_stage_confidence():
    for u, t, n in ((3, 10, 5), (100, 1000, 50)):
        assert math.isclose(at_lucb_radius(u, t, n, 0.5, 1, 0.99, 0.5), lucb_radius_s(u, t, n, 0.5, 1.25, 0.5))
        s = 40
        assert math.isclose(at_lucb_radius(u, t, n, 0.5, s, 0.99, 0.5),
                            lucb_radius_s(u, t, n, 0.5 * 0.99 ** (s - 1), 1.25, 0.5), rel_tol=1e-12)


def test_without_delta_it_never_stops_and_j_changes_only_at_stage_jumps():
    n = 6
    learner = ATLUCB(k=2).start(n, seed=0)
    stream = Bernoulli([0.9, 0.8, 0.3, 0.3, 0.2, 0.1]).stream(1)
    history = []
    for _ in range(6000):
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
        history.append((learner.stage_, tuple(learner.J_)))
    assert not learner.done
    assert learner.stage_ > 1, "Term never held on an easy instance"
    for (s0, j0), (s1, j1) in zip(history, history[1:], strict=False):
        if j1 != j0 and s0 > 1:
            assert s1 > s0, "J changed inside a stage > 1"
    assert sorted(learner.recommend()) == [0, 1]


def test_stops_at_target_delta():
    learner = ATLUCB(k=1, delta=0.05).start(4, seed=2)
    stream = Bernoulli([0.9, 0.2, 0.2, 0.2]).stream(3)
    while not learner.done:
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    assert learner.recommend() == [0]


def test_recommendation_improves_with_time():
    """Anytime: over 200 seeded runs, J is wrong less often at 3000 pulls than at 150 (Fisher, 1e-3)."""
    n, runs = 8, 200
    means = np.array([0.7, 0.6, 0.5, 0.5, 0.4, 0.4, 0.3, 0.3])
    model = Bernoulli(means)
    early, late = [], []
    for r in range(runs):
        learner = ATLUCB(k=2).start(n, seed=r)
        stream = model.stream(100 + r)
        learner.run_compiled(stream, 150)
        early.append(learner.recommend())
        learner.run_compiled(stream, 3000)
        late.append(learner.recommend())
        assert not learner.done and learner.n_pulls == 3000
    e_early, e_late = misidentified(np.array(early), means).sum(), misidentified(np.array(late), means).sum()
    assert e_late < e_early
    assert stats.fisher_exact([[e_late, runs - e_late], [e_early, runs - e_early]], alternative="less")[1] < 1e-3


def test_kernel_matches_reference_in_anytime_mode():
    for n, k, seed in ((5, 1, 0), (9, 3, 1)):
        model = Bernoulli(np.linspace(0.8, 0.3, n))
        ref = ATLUCB(k=k).start(n, seed=seed)
        stream = model.stream(seed + 10)
        for _ in range(2501):
            (arm,) = ref.ask(1)
            ref.tell(arm, stream.draw(arm))
        fast = ATLUCB(k=k).start(n, seed=seed)
        stream = model.stream(seed + 10)
        for checkpoint in (3, 40, 777, 2501):  # odd checkpoints stop inside a pair
            fast.run_compiled(stream, checkpoint)
        assert fast.state_json() == ref.state_json()


@pytest.mark.parametrize("k", [1, 4, 12])
@pytest.mark.parametrize("case", ["near-tied", "separated", "tied", "stops"])
def test_kernel_matches_reference_at_size(k, case):
    """The compiled AT-LUCB (heaps for the top-k set and for l) == the ask/tell rule on 40 arms,
    resumed at checkpoints: near-tied Gaussian arms; Bernoulli arms with a clear top k (stage
    jumps); Bernoulli arms whose k-th place falls inside a group of equal means (exact ties of
    empirical means and bounds, so every tie-break is exercised); the separated arms again with
    delta = 0.05, where the stop test decides. k = 12 takes the partition path."""
    rng = np.random.default_rng(13)
    delta = 0.05 if case == "stops" else None
    if case in ("separated", "stops"):
        model = Bernoulli(np.r_[np.full(k, 0.95), np.full(40 - k, 0.05)])
    elif case == "tied":
        model = Bernoulli(np.r_[np.full(k // 2, 0.9), np.full(40 - k // 2, 0.5)])
    else:
        model = Gaussian(rng.uniform(0.0, 1.0, 40), 0.25)
    ref = ATLUCB(k=k, delta=delta).start(40, seed=5)
    run_learner(ref, model, 6, max_pulls=8_000)
    fast = ATLUCB(k=k, delta=delta).start(40, seed=5)
    stream = model.stream(6)
    for checkpoint in (40, 41, 2_000, 8_000):
        fast.run_compiled(stream, checkpoint)
    assert fast.state_json() == ref.state_json()
    if case == "separated":
        assert fast.stage_ > 1
    if case == "stops":
        assert fast.done and fast.n_pulls < 8_000


@pytest.mark.parametrize("mode", [CLASSES_ON, CLASSES_OFF])
def test_keys_bound_every_walk_until_the_horizon(mode):
    """The kernel's heap holds a key for each arm outside the top-k (without classes) or for each class of
    equal (mean, count) among them, at the class's lowest-indexed arm, and that key is at least the UCB at
    the stage's confidence for every round up to the horizon (what makes the walk for l exact)."""
    rng = np.random.default_rng(2)
    n, k, stage = 30, 3, 4
    counts = rng.integers(1, 6, n)
    mu = rng.integers(0, 3, n) / counts  # many arms share (mean, count)
    u = counts.astype(float)
    top = np.zeros(n, dtype=bool)
    top[np.argsort(-mu, kind="stable")[:k]] = True
    ws, _ = _at_lucb_workspace(n, k)
    iw, fw, sc, tab, st = ws[3], ws[4], ws[5], ws[6], ws[7]
    st[0] = -1
    t = 5000.0
    horizon, c1 = _rekey(t, n, k, stage, 0.5, 0.99, 0.5, mode, st, iw, fw, tab, sc, mu, mu.view(np.int64), u,
                         counts, top)
    assert horizon > t and st[0] == (mode == CLASSES_ON)
    key = fw[_UKEY][iw[_UWHERE][:n]]  # each arm's heap key
    reps = np.isfinite(key)
    if mode == CLASSES_ON:
        classes = {(mu[i], counts[i]) for i in range(n) if not top[i]}
        assert reps.sum() == len(classes) < n - k
        for i in np.flatnonzero(~top):
            same = [j for j in range(n) if not top[j] and mu[j] == mu[i] and counts[j] == counts[i]]
            assert reps[i] == (i == min(same))
    else:
        assert np.array_equal(reps, ~top)
    assert not (reps & top).any()
    for tt in np.linspace(t, horizon, 7):
        c = _at_lucb_scale(float(tt), n, 0.5, stage, 0.99, 0.5)
        assert np.all(key[reps] >= mu[reps] + np.sqrt(c / u[reps]))
