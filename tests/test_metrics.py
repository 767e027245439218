"""purebandits.metrics: values on hand-made runs, Wilson coverage, tie conventions."""

import numpy as np
import pytest
from scipy import stats

from purebandits import metrics as M

MEANS = np.array([0.9, 0.8, 0.7, 0.5, 0.1])


def test_misidentification_and_precision_and_regret():
    rec = np.array([[0, 1], [1, 0], [0, 2], [3, 4]])
    assert list(M.misidentified(rec, MEANS)) == [False, False, True, True]
    assert list(M.precision(rec, MEANS)) == [1.0, 1.0, 0.5, 0.0]
    assert M.aggregate_regret(rec, MEANS) == pytest.approx([0.0, 0.0, 0.05, (1.7 - 0.6) / 2])
    rate = M.misidentification_rate(rec, MEANS)
    assert rate.estimate == 0.5 and rate.successes == 2 and rate.trials == 4
    assert rate.low < 0.5 < rate.high


def test_ties_in_true_means_count_as_top():
    means = np.array([0.9, 0.5, 0.5, 0.1])
    rec = np.array([[0, 2], [0, 1], [1, 2], [0, 0]])
    assert list(M.misidentified(rec, means)) == [False, False, True, True]
    assert list(M.precision(rec, means)) == [1.0, 1.0, 0.5, 0.5]


def test_error_probability_uses_first_arm():
    rate = M.error_probability(np.array([[0], [1], [0], [0]]), MEANS)
    assert rate.estimate == 0.25


def test_wilson_matches_formula_and_covers():
    lo, hi = M.wilson_interval(0, 20)
    assert lo == 0.0 and 0.1 < hi < 0.2  # 0.161 for z = 1.96
    lo, hi = M.wilson_interval(10, 20)
    assert lo == pytest.approx(0.2993, abs=1e-3) and hi == pytest.approx(0.7007, abs=1e-3)
    # coverage at p = 0.1, n = 50 over 2000 seeded draws: the nominal 95% +- binomial tolerance
    rng = np.random.default_rng(0)
    xs = rng.binomial(50, 0.1, 2000)
    cover = np.mean([lo <= 0.1 <= hi for lo, hi in (M.wilson_interval(int(x), 50) for x in xs)])
    assert cover >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / 2000) - 0.02  # Wilson is near-nominal here


def test_best_in_top_m_is_pessimistic_on_ties():
    means = np.array([0.9, 0.5, 0.4])
    emp = np.array([[0.8, 0.7, 0.1], [0.6, 0.7, 0.1], [0.5, 0.5, 0.5], [0.2, 0.7, 0.6]])
    assert list(M.best_in_top_m(emp, means, 1)) == [True, False, False, False]
    assert list(M.best_in_top_m(emp, means, 2)) == [True, True, False, False]
    assert list(M.best_in_top_m(emp, means, 3)) == [True, True, True, True]


def test_below_median_share():
    counts = np.array([[10, 10, 10, 10, 60], [25, 25, 25, 25, 0]])
    assert list(M.below_median_share(counts, MEANS)) == pytest.approx([0.7, 0.25])


def test_sample_count_distribution_and_complexity():
    counts = np.array([[1, 5, 9], [2, 2, 2]])
    s = M.sample_count_distribution(counts, bins=[0, 3, 6, 10])
    assert list(s.max) == [9, 2] and list(s.min) == [1, 2] and list(s.hist) == [4, 1, 1]
    x = np.random.default_rng(1).exponential(100, 5000)
    summ = M.sample_complexity_summary(x)
    assert summ["q50"] == pytest.approx(np.median(x))
    assert summ["mean"] == pytest.approx(x.mean()) and summ["sem"] == pytest.approx(stats.sem(x))


def test_decision_gap_ragged():
    means = np.array([0.5, 0.2, 0.9, 0.1])
    gaps = M.decision_gap([[0, 2], [1], [2]], means, optimal=[0, 2])
    assert gaps == pytest.approx([0.0, 1.2, 0.5])
