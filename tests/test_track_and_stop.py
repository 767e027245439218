"""Track-and-Stop: optimal weights against a numerical oracle, tracking, and the GLR stop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from purebandits.algorithms.track_and_stop import TrackAndStop, optimal_weights, tas_pick
from purebandits.bounds import glr_statistic, glr_threshold, kl_bernoulli
from purebandits.instances.rewards import Bernoulli
from purebandits.testing.checks import check_kernel_matches_reference, run_learner


def _costs(w, mu):
    """f_a(w) = w_1 d(mu_1, x_a) + w_a d(mu_a, x_a) for every a != best."""
    b = int(np.argmax(mu))
    out = []
    for a in range(len(mu)):
        if a != b:
            s = w[b] + w[a]
            x = (w[b] * mu[b] + w[a] * mu[a]) / s if s > 0 else mu[b]
            out.append(w[b] * kl_bernoulli(mu[b], x) + w[a] * kl_bernoulli(mu[a], x))
    return np.array(out)


def _oracle(mu):
    """max_w min_a f_a(w) by scipy: a 1-D search for two arms, SLSQP on the epigraph for more."""
    n = len(mu)
    if n == 2:
        res = minimize_scalar(lambda p: -_costs(np.array([p, 1 - p]), mu).min(), bounds=(0, 1),
                              method="bounded", options={"xatol": 1e-12})
        return -res.fun
    best = -np.inf
    for start in (np.full(n, 1 / n), optimal_weights(mu) * 0.5 + 0.5 / n):
        x0 = np.append(start, _costs(start, mu).min())
        cons = [{"type": "eq", "fun": lambda z: z[:n].sum() - 1}]
        cons += [{"type": "ineq", "fun": (lambda z, k=k: _costs(z[:n], mu)[k] - z[n])} for k in range(n - 1)]
        res = minimize(lambda z: -z[n], x0, bounds=[(0, 1)] * n + [(0, None)], constraints=cons,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        w = np.clip(res.x[:n], 0, None)
        best = max(best, _costs(w / w.sum(), mu).min())
    return best


means = st.lists(st.floats(0.05, 0.95), min_size=2, max_size=4).filter(
    lambda m: np.diff(np.sort(m)).min() > 0.02)


@settings(max_examples=40, deadline=None)
@given(means)
def test_weights_maximise_the_min_cost(mu):
    mu = np.array(mu)
    w = optimal_weights(mu)
    assert w.sum() == pytest.approx(1.0, abs=1e-12) and np.all(w > 0)
    f = _costs(w, mu)
    assert f.max() - f.min() <= 1e-8 * f.max()  # at the optimum every constraint is active (GK16)
    assert f.min() >= _oracle(mu) * (1 - 1e-7)


def test_gk16_example_weights():
    # GK16 Sec. 5 / Table: mu = [0.3, 0.21, 0.2, 0.19, 0.18] gives w* ~ [0.336, 0.251, 0.177, 0.132, 0.104]
    w = optimal_weights([0.3, 0.21, 0.2, 0.19, 0.18])
    assert w == pytest.approx([0.336, 0.251, 0.177, 0.132, 0.104], abs=1e-3)


@pytest.mark.parametrize("mu", [[0.0, 0.0, 1.0], [1.0, 1.0, 0.2], [0.5, 0.5], [0.0, 0.0], [1.0, 0.0, 0.3]])
def test_weights_robust_at_edges_and_ties(mu):
    w = optimal_weights(mu)
    assert np.all(np.isfinite(w)) and w.sum() == pytest.approx(1.0)
    top = np.flatnonzero(np.array(mu) == max(mu))
    if len(top) > 1:
        assert w[top] == pytest.approx(np.full(len(top), 1 / len(top)))


def test_forced_exploration_then_tracking():
    counts = np.array([30, 30, 2], dtype=np.int64)
    sums = np.array([20.0, 10.0, 1.0])
    pending = np.zeros(3, dtype=np.int64)
    w = np.empty(3)
    # t = 62: sqrt(62) - 1.5 = 6.4 >= 2, arm 2 is under-sampled
    assert tas_pick(sums, counts, pending, w) == 2
    counts[2] = 30
    sums[2] = 15.0
    mu = sums / counts
    wstar = optimal_weights(mu)
    assert tas_pick(sums, counts, pending, w) == int(np.argmax(90 * wstar - counts))


@pytest.mark.parametrize("threshold", ["practical", "theory"])
def test_stops_at_first_glr_crossing(threshold):
    learner = TrackAndStop(delta=0.05, threshold=threshold).start(3, seed=0)
    stream = Bernoulli([0.7, 0.4, 0.3]).stream(1)
    while not learner.done:
        _, z = glr_statistic(learner.sums_, learner.counts_)
        if learner.n_pulls:
            assert z <= glr_threshold(learner.n_pulls, 3, 0.05, threshold)
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    best, z = glr_statistic(learner.sums_, learner.counts_)
    assert z > glr_threshold(learner.n_pulls, 3, 0.05, threshold) and learner.recommend() == [best]


def test_theory_threshold_stops_later():
    t = {}
    for th in ("practical", "theory"):
        runs = [run_learner(TrackAndStop(delta=0.05, threshold=th).start(3, seed=s), Bernoulli([0.7, 0.5, 0.3]),
                            100 + s, compiled=True).n_pulls for s in range(20)]
        t[th] = np.mean(runs)
    assert t["theory"] > t["practical"]


class _TaSTheory(TrackAndStop):
    test_params = {"threshold": "theory"}


def test_kernel_matches_reference_theory_threshold():
    check_kernel_matches_reference(_TaSTheory)
