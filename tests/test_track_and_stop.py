"""Track-and-Stop: optimal weights against a numerical oracle, tracking, and the GLR stop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from purebandits.algorithms.track_and_stop import TAS_CLIP, TrackAndStop, optimal_weights, tas_pick
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


def _reference_weights(mus, rtol=1e-14):
    """GK16 Theorem 5 by plain nested bisection (the former solver, in NumPy): y* and every
    x_a(y) to a relative bracket width of ``rtol``, for each instance of ``mus``.

    The instances are bisected side by side (one row each, padded) so that each NumPy call serves all of them:
    every row stops when it would alone and takes the same elementwise steps, so each row's weights are those of
    the bisection run on its instance by itself (4 s of NumPy calls on one instance at a time, 0.3 s together).
    """
    mus = [np.clip(np.asarray(mu, dtype=float), TAS_CLIP, 1 - TAS_CLIP) for mu in mus]
    best = [int(np.argmax(mu)) for mu in mus]
    size = [len(mu) - 1 for mu in mus]
    rows = len(mus)
    p = np.array([mu[b] for mu, b in zip(mus, best, strict=True)])[:, None]
    q = np.full((rows, max(size)), 0.5)  # the padding is never read: masked out of every test and sum
    valid = np.zeros(q.shape, dtype=bool)
    for r, (mu, b) in enumerate(zip(mus, best, strict=True)):
        q[r, :size[r]], valid[r, :size[r]] = np.delete(mu, b), True

    def g(x):  # g_a(x) for every a != b at once
        m = (p + x * q) / (1 + x)
        return kl_bernoulli(p, m) + x * kl_bernoulli(q, m)

    def x_of_y(y, on):
        hi = np.ones_like(q)
        while np.any(low := (g(hi) < y) & valid & on[:, None]):
            hi[low] *= 2
        lo = np.zeros_like(q)
        while np.any(on := on & ((hi - lo > rtol * hi) & valid).any(axis=1)):
            mid = (lo + hi) / 2
            below = g(mid) < y
            lo, hi = np.where(on[:, None] & below, mid, lo), np.where(on[:, None] & ~below, mid, hi)
        return (lo + hi) / 2

    def big_f(y, on):
        x = x_of_y(y, on)
        m = (p + x * q) / (1 + x)
        ratio = kl_bernoulli(p, m) / kl_bernoulli(q, m)
        return np.array([np.sum(ratio[r, :size[r]]) for r in range(rows)])  # each row's sum as alone

    lo = np.zeros(rows)
    hi = np.array([float(kl_bernoulli(p[r, 0], q[r, :size[r]].max())) for r in range(rows)])
    while np.any(on := hi - lo > rtol * hi):
        mid = (lo + hi) / 2
        below = big_f(mid[:, None], on) < 1
        lo, hi = np.where(on & below, mid, lo), np.where(on & ~below, mid, hi)
    x = x_of_y(((lo + hi) / 2)[:, None], np.ones(rows, dtype=bool))
    out = []
    for r in range(rows):
        w = np.insert(x[r, :size[r]], best[r], 1.0)
        out.append(w / w.sum())
    return out


def _instances(family, count=40, seed=2016):
    """Fixed-seed means, 2 to 50 arms, whose two best are resolvable in double precision."""
    rng = np.random.default_rng([seed, ["uniform", "near_tie", "near_0_1"].index(family)])
    out = []
    while len(out) < count:
        n = int(rng.integers(2, 51))
        if family == "uniform":
            mu = rng.uniform(0.01, 0.99, n)
        elif family == "near_tie":  # the best two (sometimes three) within 1e-3 to 1e-2
            mu = rng.uniform(0.01, 0.99, n)
            top = np.argsort(mu)[::-1]
            mu[top[1]] = mu[top[0]] - 10 ** rng.uniform(-3, -2)
            if n > 2 and rng.uniform() < 0.5:
                mu[top[2]] = mu[top[1]] - 10 ** rng.uniform(-3, -2)
        else:  # means in [1e-4, 1e-2] or [1 - 1e-2, 1 - 1e-4], plus a few inside
            tail = 10 ** rng.uniform(-4, -2, n)
            mu = np.where(rng.uniform(size=n) < 0.5, tail, 1 - tail)
            mu[rng.uniform(size=n) < 0.2] = rng.uniform(0.01, 0.99)
        s = np.sort(mu)
        if np.all(mu > 0) and np.all(mu < 1) and kl_bernoulli(s[-1], s[-2]) >= 1e-6:
            out.append(mu)
    return out


@pytest.mark.parametrize("family", ["uniform", "near_tie", "near_0_1"])
def test_weights_match_nested_bisection(family):
    # Tolerance: the reference brackets y* and each x_a(y) to a relative width of 1e-14; the
    # solver stops after Newton steps of relative size 1e-9 (quadratic convergence: O(1e-18)
    # left) or at the KLs' rounding noise. What remains in both is the rounding of the KLs:
    # absolute ~1e-16, so relative ~1e-16/d(mu_1, mu_2) <= ~1e-10 in the ratios of F for these
    # instances (d(mu_1, mu_2) >= 1e-6), less in the weights. The requirement is 1e-9 per weight.
    instances = _instances(family)
    for mu, ref in zip(instances, _reference_weights(instances), strict=True):
        w = optimal_weights(mu)
        assert np.all(w > 0) and w.sum() == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_allclose(w, ref, rtol=0, atol=1e-9, err_msg=f"mu={mu.tolist()}")


def test_weights_are_a_pure_function_of_the_means():
    # no state carried between calls (the learner and the kernel must make identical choices)
    a = np.array([0.3, 0.21, 0.2, 0.19, 0.18])
    b = np.array([0.9, 0.1, 0.5, 0.89, 0.2])
    first = optimal_weights(a)
    optimal_weights(b)
    assert np.array_equal(optimal_weights(a), first)


@pytest.mark.parametrize("mu, tied", [([0.5, 0.5 - 1e-12, 0.3], [0, 1]), ([0.2, 1.0, 1 - 1e-12], [1, 2])])
def test_weights_uniform_over_numerically_tied_best(mu, tied):
    # a KL from the best below its rounding error: the arms are tied for the solver
    expect = np.zeros(len(mu))
    expect[tied] = 1 / len(tied)
    assert np.array_equal(optimal_weights(mu), expect)


def test_weights_positive_for_far_arms_at_a_near_tie():
    # y* ~ 1e-12 here, so the x_a of the arm at 1e-9 is ~1e-12: it must stay > 0
    w = optimal_weights([0.5, 0.5 - 1e-6, 1e-9, 0.999 - 0.5])
    assert np.all(w > 0) and w.sum() == pytest.approx(1.0) and w[0] == pytest.approx(0.5, abs=1e-3)


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


@pytest.mark.parametrize("means", [[0.7, 0.4, 0.3], [0.7, 0.5, 0.5, 0.5, 0.45, 0.45, 0.3, 0.3, 0.3, 0.3]])
@pytest.mark.parametrize("threshold", ["practical", "theory"])
def test_stops_at_first_glr_crossing(threshold, means):
    """The ask/tell stop (glr_stop_s with the last minimiser as hint) fires exactly when the full GLR statistic
    first exceeds the threshold, on 3 arms and on 10 with tied challengers (the minimiser moves among them)."""
    n = len(means)
    learner = TrackAndStop(delta=0.05, threshold=threshold).start(n, seed=0)
    stream = Bernoulli(means).stream(1)
    while not learner.done:
        _, z = glr_statistic(learner.sums_, learner.counts_)
        if learner.n_pulls:
            assert z <= glr_threshold(learner.n_pulls, n, 0.05, threshold)
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    best, z = glr_statistic(learner.sums_, learner.counts_)
    assert z > glr_threshold(learner.n_pulls, n, 0.05, threshold) and learner.recommend() == [best]


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
