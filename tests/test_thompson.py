"""Thompson sampling (NEXT form): exact posterior-argmax draws, identical drivers, LS/budget stop."""

import functools

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from purebandits.algorithms.thompson import LAZY_MIN_ARMS, ThompsonSampling, ts_pick
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.testing.checks import check_kernel_matches_reference, run_learner


def _beta_params(sums, counts, alpha):
    """NEXT's tempered (a_i, b_i) for every arm (ts_posterior, vectorised)."""
    return np.maximum(1.0, (1.0 + sums) / alpha), np.maximum(1.0, (1.0 + counts - sums) / alpha)


def _threshold(sums, counts, alpha, target_tail):
    """The y0 at which the tails P(y_i < y0) sum to ``target_tail``."""
    a, b = _beta_params(sums, counts, alpha)
    return optimize.brentq(lambda y: special.betainc(b, a, y).sum() - target_tail, 1e-12, 1 - 1e-12)


def _chi2(hits, probs):
    """(chi-square statistic, its 1 - 1e-4 quantile) over the arms with expected count >= 20, the rest pooled."""
    expected = probs * hits.sum()
    big = expected >= 20
    obs = np.append(hits[big], hits[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    return ((obs - exp) ** 2 / exp).sum(), stats.chi2.ppf(1 - 1e-4, len(obs) - 1)


def _numpy_pick(sums, counts, alpha, rng):
    a, b = _beta_params(sums, counts, alpha)
    y = np.array([rng.beta(b[i], a[i]) for i in range(len(a))])
    return int(np.argmin(y))


def _state(n):
    return np.zeros(n), np.full(n, -1, dtype=np.int64), np.zeros(2)


def test_small_n_draws_every_posterior_like_numpy():
    """Below LAZY_MIN_ARMS a pick is argmin of n draws y_i ~ Beta(b_i, a_i): the same numbers as NumPy."""
    data = np.random.default_rng(0)
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(500):
        counts = data.integers(0, 200, size=7)
        sums = np.floor(data.random(7) * (counts + 1))
        assert ts_pick(sums, counts, 2.0, r1, *_state(7)) == _numpy_pick(sums, counts, 2.0, r2)
    assert r1.bit_generator.state == r2.bit_generator.state


def _posteriors(n, seed):
    data = np.random.default_rng(seed)
    counts = data.integers(0, 40, size=n)
    counts[:6] = [30, 12, 25, 3, 0, 50]
    sums = np.round(data.random(n) * 0.6 * counts * 2) / 2  # half-integer sums, like 3-level votes
    sums[:6] = [24, 10, 19.5, 3, 0, 36]
    return sums, counts


@functools.cache
def _exact_argmax_probabilities(seed, n, alpha):
    """P(argmin_i y_i = i), y_i ~ Beta(b_i, a_i) independent, by quadrature of f_i(y) prod_j (1 - F_j(y))."""
    a, b = _beta_params(*_posteriors(n, seed), alpha)
    grid = np.linspace(0.0, 1.0, 40_001)  # a_i, b_i >= 1: bounded densities, no end singularities
    with np.errstate(divide="ignore", invalid="ignore"):
        log_surv = np.log(special.betainc(a, b, 1.0 - grid[:, None]))  # log P(y_i > y), (grid, n)
        total = log_surv.sum(axis=1)
        # the Beta(b_i, a_i) density by its formula (stats.beta.pdf's value to 1e-13, in a tenth of the time)
        log_pdf = special.xlogy(b - 1, grid[:, None]) + special.xlog1py(a - 1, -grid[:, None]) - special.betaln(b, a)
        dens = np.nan_to_num(np.exp(log_pdf + total[:, None] - log_surv))
    return integrate.simpson(dens, x=grid, axis=0)


@pytest.mark.parametrize("target_tail", [None, 3.3, 18.0])
@pytest.mark.slow  # many seeded draws
def test_thresholded_pick_has_thompson_distribution(target_tail):
    """The lazy pick (n = 120 >= LAZY_MIN_ARMS) is an exact TS draw for any threshold y0.

    ``None`` lets the learner draw y0 (first pick retunes); 3.3 puts y0 where no arm falls below
    it in about exp(-3.3) = 4% of picks (the conditioned fallback); 18 makes many inverse CDFs.
    Counts are frozen, so the same threshold serves all picks; a chi-square test at level 1e-4
    over the arms with expected count >= 20 (the rest pooled) compares 60,000 picks with the
    quadrature probabilities.
    """
    n, alpha, picks = 120, 2.0, 60_000
    assert n >= LAZY_MIN_ARMS
    sums, counts = _posteriors(n, 11)
    probs = _exact_argmax_probabilities(11, n, alpha)
    assert abs(probs.sum() - 1) < 1e-5  # quadrature error: under one pick in 60,000 in total
    tail, tail_counts, level = _state(n)
    if target_tail is not None:
        level[0] = _threshold(sums, counts, alpha, target_tail)
    rng = np.random.default_rng(2024)
    hits = np.zeros(n)
    for _ in range(picks):
        hits[ts_pick(sums, counts, alpha, rng, tail, tail_counts, level)] += 1
    if target_tail is not None:
        assert abs(level[1] - target_tail) < 1e-6  # the threshold was kept, not redrawn
    chi2, critical = _chi2(hits, probs)
    assert chi2 < critical, (chi2, critical)


def test_thresholded_pick_detects_a_wrong_fallback():
    """Power check for the test above: a pick that returns arm 0 whenever no arm falls below y0
    (instead of the conditioned draw) fails the same chi-square test."""
    n, alpha, picks = 120, 2.0, 60_000
    sums, counts = _posteriors(n, 11)
    probs = _exact_argmax_probabilities(11, n, alpha)
    a, b = _beta_params(sums, counts, alpha)
    tail = special.betainc(b, a, _threshold(sums, counts, alpha, 3.3))
    # the picks in blocks, vectorised: rng.random((m, n)) is m successive rng.random(n) (the same uniforms, pick for
    # pick), and the inverse CDF is needed only where u falls below the threshold
    rng = np.random.default_rng(2024)
    hits = np.zeros(n)
    block = 10_000
    for _ in range(picks // block):
        u = rng.random((block, n))
        below = u < tail
        y = np.full(u.shape, 2.0)
        rows, cols = np.nonzero(below)
        y[rows, cols] = special.betaincinv(b[cols], a[cols], u[rows, cols])
        pick = np.where(below.any(axis=1), np.argmin(y, axis=1), 0)  # the wrong fallback: arm 0
        hits += np.bincount(pick, minlength=n)
    chi2, critical = _chi2(hits, probs)
    assert chi2 > critical


def test_kernel_matches_reference_on_the_thresholded_path():
    """120 arms: the compiled run equals the ask/tell loop, state for state, through retunes."""
    means = np.linspace(0.2, 0.8, 120)
    ref = ThompsonSampling(delta=None, budget=6000).start(120, seed=3)
    run_learner(ref, Bernoulli(means), 9)
    fast = ThompsonSampling(delta=None, budget=6000).start(120, seed=3)
    stream = Bernoulli(means).stream(9)
    for checkpoint in (1, 64, 999, 6000):
        fast.run_compiled(stream, checkpoint)
    assert ref.tail_level_[0] > 0 and ref.n_pulls == 6000
    assert fast.state_json() == ref.state_json()


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
