"""Pairwise queries (issue 39): preference models, the Borda reduction, Bradley-Terry fits, and pairwise_hybrid."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from purebandits.instances import Bernoulli
from purebandits.pairwise import (
    ComparisonGraphError,
    DuelSampler,
    borda_arms,
    borda_scores,
    bradley_terry_preferences,
    check_preferences,
    comparison_graph_components,
    fit_bradley_terry,
    rating_preferences,
    win_matrix_frame,
    wins_from_pairs,
)
from purebandits.testing.checks import binomial_tolerance


def test_rating_preferences_split_ties_on_a_hand_computed_pair():
    # X1 ~ (0.2, 0.3, 0.5), X2 ~ (0.5, 0.3, 0.2) on {0, 1/2, 1}:
    # P(X1 > X2) = 0.3 * 0.5 + 0.5 * (0.5 + 0.3) = 0.55; P(X1 = X2) = 0.1 + 0.09 + 0.1 = 0.29
    P = rating_preferences([[0.2, 0.3, 0.5], [5, 3, 2]])  # counts are normalised
    assert P[0, 1] == pytest.approx(0.55 + 0.29 / 2, abs=1e-12)
    assert P[1, 0] == pytest.approx(0.16 + 0.29 / 2, abs=1e-12)  # P(X2 > X1) = 0.3 * 0.2 + 0.2 * 0.5
    assert np.diag(P).tolist() == [0.5, 0.5]


def test_preferences_are_complementary_and_equal_items_tie():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(3), size=7)
    p[4] = p[2]
    P = rating_preferences(p)
    off = ~np.eye(7, dtype=bool)
    np.testing.assert_allclose((P + P.T)[off], 1.0, atol=1e-12)
    assert P[2, 4] == pytest.approx(0.5, abs=1e-12)
    check_preferences(P)
    B = bradley_terry_preferences([0.0, math.log(3.0), -1.0])
    assert B[1, 0] == pytest.approx(3 / 4, abs=1e-12)  # strengths 3 and 1
    np.testing.assert_allclose((B + B.T)[~np.eye(3, dtype=bool)], 1.0, atol=1e-12)


def test_binary_ratings_give_preferences_linear_in_the_means():
    # On {0, 1}: P(i beats j) = p_i (1 - p_j) + (p_i p_j + (1 - p_i)(1 - p_j)) / 2 = 1/2 + (p_i - p_j) / 2
    p = np.array([0.9, 0.4, 0.1])
    P = rating_preferences(np.column_stack([1 - p, p]), values=(0.0, 1.0))
    np.testing.assert_allclose(P, 0.5 + (p[:, None] - p[None, :]) / 2, atol=1e-12)


def test_check_preferences_refuses_what_is_not_a_preference_matrix():
    with pytest.raises(ValueError, match=r"P\[i, j\] \+ P\[j, i\] = 1"):
        check_preferences([[0.5, 0.7], [0.7, 0.5]])
    with pytest.raises(ValueError, match="square"):
        check_preferences([[0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        check_preferences([[0.5, 1.2], [-0.2, 0.5]])


def test_borda_scores_on_a_hand_computed_matrix():
    P = np.array([[0.5, 0.8, 0.6], [0.2, 0.5, 0.9], [0.4, 0.1, 0.5]])
    np.testing.assert_allclose(borda_scores(P), [0.7, 0.55, 0.25], atol=1e-12)
    arms = borda_arms(P)
    assert isinstance(arms, Bernoulli)
    np.testing.assert_allclose(arms.means, [0.7, 0.55, 0.25], atol=1e-12)


def test_mean_and_borda_winners_can_differ():
    """A (0 or 1, mean 0.55), B (always 1/2), C (always 0): A has the best mean, B the best Borda score
    (A: (0.55 + 0.775) / 2 = 0.6625, B: (0.45 + 1) / 2 = 0.725); within the top 2 by mean, A beats B."""
    from purebandits.experiments.pairwise_hybrid import targets

    probs = np.array([[0.45, 0.0, 0.55], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    P = rating_preferences(probs)
    np.testing.assert_allclose(borda_scores(P), [0.6625, 0.725, 0.1125], atol=1e-12)
    t = targets(probs @ [0.0, 0.5, 1.0], P, m=2)
    assert (t["mean_winner"], t["borda_winner"], t["hybrid_winner"]) == (0, 1, 0)


def test_the_reduction_rewards_are_bernoulli_with_the_borda_score():
    P = bradley_terry_preferences([1.0, 0.3, 0.0, -0.5, -1.5])
    b = borda_scores(P)
    n = 4000
    for arm in (0, 3):
        s = DuelSampler(P, seed=11 + arm)
        wins = int(sum(s.draw(arm) for _ in range(n)))
        # a one-sided binomial test each way at level 1e-3: the seeded count is a Bin(n, b) draw
        assert wins <= binomial_tolerance(n, b[arm]) and n - wins <= binomial_tolerance(n, 1 - b[arm]), (wins, b[arm])
        opp = np.array(s.opponents_)
        assert arm not in opp and set(opp) == set(range(5)) - {arm}
        counts = np.bincount(opp, minlength=5)[np.arange(5) != arm]  # uniform over the 4 others
        assert counts.max() <= binomial_tolerance(n, 0.25)


def test_duels_are_seeded_and_recorded_as_a_win_matrix_and_crowd_kit_pairs():
    P = bradley_terry_preferences([0.5, 0.0, -0.5])
    a, b = DuelSampler(P, seed=5), DuelSampler(P, seed=5)
    ra = [a.draw(i % 3) for i in range(300)]
    assert ra == [b.draw(i % 3) for i in range(300)]
    W = a.wins()
    assert W.sum() == 300 and np.trace(W) == 0
    pairs = a.pairs(worker="w1", items=["x", "y", "z"])
    assert list(pairs.columns) == ["worker", "left", "right", "label"] and (pairs["worker"] == "w1").all()
    assert ((pairs["label"] == pairs["left"]) == np.array(ra, bool)).all()
    W2, names = wins_from_pairs(pairs)
    assert names == ["x", "y", "z"] and (W2 == W).all()
    frame = win_matrix_frame(W, names)
    assert frame.loc["x", "y"] == W[0, 1]
    back = pd.read_csv(pd.io.common.StringIO(frame.to_csv()), index_col=0)
    assert (back.to_numpy() == W).all()
    W3, _ = wins_from_pairs([("x", "y"), ("x", "y"), ("z", "x")], items=["x", "y", "z"])
    assert W3.tolist() == [[0, 2, 0], [0, 0, 0], [1, 0, 0]]
    with pytest.raises(ValueError, match="left or the right"):
        wins_from_pairs(pd.DataFrame({"left": ["x"], "right": ["y"], "label": ["z"]}))


def test_bradley_terry_fit_of_expected_counts_is_exact():
    """The score equations sum_j W_ij (1 - s_ij) = sum_j W_ji s_ij hold at the true theta when W = N * P: the MLE
    of the expected counts is the truth (up to the optimiser's tolerance)."""
    theta = np.array([1.2, 0.4, 0.0, -0.3, -1.3])
    theta -= theta.mean()
    W = 100.0 * bradley_terry_preferences(theta)
    np.fill_diagonal(W, 0.0)
    np.testing.assert_allclose(fit_bradley_terry(W), theta, atol=1e-6)


def test_bradley_terry_fit_recovers_strengths_within_their_standard_errors():
    """500 comparisons per pair of 6 items (seeded). The MLE is asymptotically normal with covariance the
    pseudo-inverse of the Fisher information, the Laplacian with weights N_ij s_ij (1 - s_ij) (mean-0 gauge);
    each coordinate must lie within 4 standard errors (two-sided 6.3e-5 each, < 4e-4 for all six)."""
    theta = np.array([1.0, 0.6, 0.1, 0.0, -0.7, -1.0])
    theta -= theta.mean()
    P = bradley_terry_preferences(theta)
    rng = np.random.default_rng(2024)
    n_pair, n = 500, theta.size
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            W[i, j] = rng.binomial(n_pair, P[i, j])
            W[j, i] = n_pair - W[i, j]
    fit = fit_bradley_terry(W)
    C = n_pair * P * (1 - P)
    np.fill_diagonal(C, 0.0)
    info = np.diag(C.sum(axis=1)) - C
    se = np.sqrt(np.diag(np.linalg.pinv(info)))
    assert abs(fit.mean()) < 1e-9
    assert np.all(np.abs(fit - theta) <= 4 * se), (fit - theta) / se
    assert not np.allclose(fit, theta, atol=se.min() / 10)  # the data are noisy: not the truth by accident


def test_a_graph_that_is_not_strongly_connected_is_refused_unless_regularised():
    # item 2 beat both others and never lost: its MLE strength is +infinity
    W = np.array([[0, 3, 0], [1, 0, 0], [2, 2, 0]])
    count, labels = comparison_graph_components(W)
    assert count == 2 and labels[0] == labels[1] != labels[2]
    with pytest.raises(ComparisonGraphError, match="strongly connected components.*alpha > 0"):
        fit_bradley_terry(W)
    fit = fit_bradley_terry(W, alpha=0.5)
    assert np.all(np.isfinite(fit)) and np.argmax(fit) == 2
    never = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])  # item 2 never compared
    with pytest.raises(ComparisonGraphError):
        fit_bradley_terry(never)
    assert comparison_graph_components(np.array([[0, 1], [1, 0]]))[0] == 1


def test_pairwise_hybrid_runs_at_quick_scale_and_judges_its_checks():
    from purebandits.experiments import pairwise_hybrid as ph
    from purebandits.experiments.base import Context

    exp = ph.EXPERIMENT
    ctx = Context(scale="quick", jobs=1, progress=False)
    df = exp.compute(ctx, ctx.settings(exp))
    s = ph.summarise(df)
    assert list(s["approach"][:3]) == [ph.RATINGS, ph.COMPARISONS, ph.HYBRID]
    assert (df.loc[df["approach"] == ph.RATINGS, "comparisons"] == 0).all()
    assert (df.loc[df["approach"] == ph.COMPARISONS, "ratings"] == 0).all()
    hyb = df[df["approach"] == ph.HYBRID]
    assert (hyb["answers"] == hyb["ratings"] + hyb["comparisons"]).all() and (hyb["comparisons"] > 0).all()
    v = exp.assess(df)
    assert v.status in ("holds", "partly") and "Targets:" in v.summary

    # the verdict logic on doctored tables: both checks pass, then each fails
    good = df.copy()
    good.loc[good["approach"] == ph.HYBRID, "answers"] = 1
    assert exp.assess(good).status == "holds"
    wrong = good.copy()
    wrong.loc[wrong["approach"] == ph.RATINGS, "correct"] = False  # 4 of 4 wrong: Wilson low > 0.05
    assert exp.assess(wrong).status == "partly" and "delta: no" in exp.assess(wrong).summary
    both = wrong.copy()
    both.loc[both["approach"] == ph.HYBRID, "answers"] = 10**9
    assert exp.assess(both).status == "does not hold"
    capped = good.copy()
    capped.loc[capped["approach"] == ph.COMPARISONS, "stopped"] = False
    assert exp.assess(capped).status == "partly"
