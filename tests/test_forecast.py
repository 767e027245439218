"""The forecast of the answers a learner still needs to decide (purebandits.forecast) and what its delta promises
(purebandits.error_guarantee)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from purebandits.error_guarantee import error_guarantee
from purebandits.forecast import Forecast, answers_to_decision, forecast_or_reason
from purebandits.instances.rewards import Bernoulli
from purebandits.registry import make_learner


def _feed(learner, arm: int, rewards: list[float]) -> None:
    """Answer ``arm`` with ``rewards``, one asked pull each (the ask/tell contract, restricted to the arm)."""
    for r in rewards:
        assert learner.ask(1, allowed=[arm]) == [arm]
        learner.tell(arm, r)


def _two_arms(learner, mean0: float, mean1: float, n: int = 10):
    """``learner`` started on 2 arms with ``n`` answers each whose means are exactly ``mean0`` and ``mean1``."""
    learner.start(2, seed=0)
    for arm, mean in ((0, mean0), (1, mean1)):
        ones = round(mean * n)
        assert ones / n == pytest.approx(mean)
        _feed(learner, arm, [1.0] * ones + [0.0] * (n - ones))
    return learner


# ------------------------------------------------------------------------------------------- GLR
def test_glr_two_gaussian_arms_equal_the_hand_computation() -> None:
    """Two Gaussian arms, sigma = 1/2: w* = (1/2, 1/2), so T* = 8 sigma^2 / Delta^2 (GK16's cost at w*:
    (1/2)(1/2)/(1/2 + 1/2) Delta^2/(2 sigma^2) = Delta^2/(8 sigma^2)); the plug-in stop is the smallest whole t'
    with t' >= T* log((log t' + 1)/delta) (the practical threshold), found here by counting up."""
    delta, sigma = 0.1, 0.5
    lrn = _two_arms(make_learner("top_two", delta=delta, cost="gaussian", sigma=sigma), 0.6, 0.4)
    assert not lrn.done and lrn.n_pulls == 20
    t_star = 8 * sigma**2 / 0.2**2
    t = 1
    while t < t_star * math.log((math.log(t) + 1) / delta):
        t += 1
    f = answers_to_decision(lrn)
    assert isinstance(f, Forecast)
    assert f.mid == t - 20
    assert f.low <= f.mid <= f.high and not f.exact
    assert "if the current estimates are right" in f.method


def test_glr_theory_threshold_hand_computation() -> None:
    """The same with GK16's proven threshold log(2 t (n-1)/delta) and the Bernoulli statistic of Track-and-Stop:
    T* of two Bernoulli arms is 1/(w d(mu_1, m) + (1-w) d(mu_2, m)) at the optimum, which the forecast takes from
    lower_bound; here only the fixed point is recomputed by hand from that T*."""
    from purebandits.lower_bound import characteristic_time

    lrn = _two_arms(make_learner("track_and_stop", delta=0.05, threshold="theory"), 0.7, 0.3)
    t_star = characteristic_time(Bernoulli([0.7, 0.3]))
    t = 1
    while t < t_star * math.log(2 * t * 1 / 0.05):
        t += 1
    assert answers_to_decision(lrn).mid == t - 20


def test_glr_clearer_gap_needs_fewer_answers() -> None:
    mids = [answers_to_decision(_two_arms(make_learner("top_two", delta=0.1), 0.5 + g, 0.5 - g)).mid
            for g in (0.1, 0.2, 0.3)]
    assert mids[0] > mids[1] > mids[2] >= 1


def test_glr_range_moves_the_means_one_standard_error() -> None:
    """The ends are the mid's computation with each mean one standard error (sample sd / sqrt(n); 0.6 of 10 0/1
    answers: sqrt(0.24 * 10/9 / 10) = 0.1633) farther from / closer to the midpoint 0.5 (closer by at most half
    the distance, 0.05 here): gaps 0.2 + 2 x 0.1633 and 0.2 - 2 x 0.05, the same fixed point by hand."""
    delta, sigma = 0.1, 0.5
    f = answers_to_decision(_two_arms(make_learner("top_two", delta=delta, sigma=sigma), 0.6, 0.4))
    se = math.sqrt(0.24 * 10 / 9 / 10)

    def stop(gap: float) -> int:
        t_star, t = 8 * sigma**2 / gap**2, 1
        while t < t_star * math.log((math.log(t) + 1) / delta):
            t += 1
        return t - 20

    assert (f.low, f.high) == (max(stop(0.2 + 2 * se), 1), stop(0.1))
    assert f.low < f.mid < f.high


# ------------------------------------------------------------------------------------------- intervals
def test_interval_clearer_gap_needs_fewer_answers() -> None:
    mids = [answers_to_decision(_two_arms(make_learner("kl_rand_lucb", delta=0.025), 0.5 + g, 0.5 - g, n=20)).mid
            for g in (0.1, 0.2, 0.3)]
    assert mids[0] > mids[1] > mids[2] >= 1


def test_interval_forecast_is_the_learner_bound_crossing() -> None:
    """LUCB1's radius sqrt(tterm / u) has a closed form: an item clears the midpoint b when its radius is below
    its distance to b, u > tterm / d^2; the forecast's sum must match it (to the bisection's 1 %), with the
    round term at the forecast's own final round."""
    from purebandits.algorithms.kernels.lucb_rules import family_time_term

    lrn = _two_arms(make_learner("lucb1", delta=0.1), 0.7, 0.3, n=10)
    f = answers_to_decision(lrn)
    # by hand: both items are 0.2 from b = 0.5; find the fixed point of the round term as the forecast does
    rounds_per_answer = (lrn.rounds_ + 1) / lrn.n_pulls
    remaining = 0.0
    for _ in range(50):
        tterm = family_time_term(lrn._code, lrn._bparams, lrn.rounds_ + 1 + rounds_per_answer * remaining)
        remaining = 2 * (tterm / 0.2**2 - 10)
    assert f.mid == pytest.approx(remaining, rel=0.03)


def test_successive_elimination_hand_computation() -> None:
    """EDMM02's radius sqrt(log(c n t^2 / delta) / t) (sigma = 1/2, c = 4, n = 2): the worse item is dropped at
    the first round t with 2 radius(t) <= 0.4, by counting; both items are pulled up to it (to the 1 % of the
    bisection). A clearer gap needs fewer."""
    lrn = _two_arms(make_learner("successive_elimination", delta=0.05, radius="edmm"), 0.7, 0.3)
    t = 10
    while 2 * math.sqrt(math.log(4 * 2 * t * t / 0.05) / t) > 0.4:
        t += 1
    f = answers_to_decision(lrn)
    assert f.mid == pytest.approx(2 * (t - 10), rel=0.02)
    assert f.low <= f.mid <= f.high
    clearer = answers_to_decision(_two_arms(make_learner("successive_elimination", delta=0.05, radius="edmm"),
                                            0.8, 0.2))
    assert clearer.mid < f.mid


def _run(name: str, params: dict, means: np.ndarray, seed: int, upto: int | None = None):
    lrn = make_learner(name, **params).start(len(means), seed=seed)
    stream = Bernoulli(means).stream(seed=seed + 100)
    while not lrn.done and (upto is None or lrn.n_pulls < upto):
        for arm in lrn.ask(1):
            lrn.tell(arm, stream.draw(arm))
    return lrn


@pytest.mark.slow  # many seeded runs
def test_interval_forecast_halfway_covers_the_actual_remaining() -> None:
    """KL-RandLUCB (the service's default learner, top 2 of 8 Bernoulli items) run to its stop, then again with the
    same seeds to half of that: the forecast made there against the answers it actually needed.

    Tolerance: the forecast assumes the halfway estimates are the true means, and the items next to the top-2
    boundary decide the sum through the square of their distance to it, so one run can miss by a factor of 2-3.
    Over 12 seeded runs we require the actual remaining inside [low, high] in at least 10 (measured: 11) and the
    median of actual / mid within [1/2, 2] (measured: about 1.0)."""
    means = np.array([0.7, 0.6, 0.55, 0.5, 0.45, 0.4, 0.3, 0.2])
    params = {"k": 2, "delta": 0.025, "form": "simplified"}
    inside, ratios = 0, []
    for seed in range(12):
        total = _run("kl_rand_lucb", params, means, seed).n_pulls
        half = _run("kl_rand_lucb", params, means, seed, upto=total // 2)
        assert not half.done
        f = answers_to_decision(half)
        actual = total - half.n_pulls
        inside += f.low <= actual <= f.high
        ratios.append(actual / f.mid)
    assert inside >= 10, (inside, ratios)
    assert 0.5 <= float(np.median(ratios)) <= 2.0, ratios


def test_forecast_is_fast_on_4000_items() -> None:
    """The dashboard's case: 4,000 captions, 20,000 answers (the compiled bisection, three passes, well under 1 s)."""
    import time

    rng = np.random.default_rng(5)
    n = 4000
    lrn = make_learner("kl_rand_lucb", k=10, delta=0.025, form="simplified").start(n, seed=1)
    means = rng.uniform(0.2, 0.6, n)
    while lrn.n_pulls < 5 * n:
        for arm in lrn.ask(1):
            lrn.tell(arm, float(rng.random() < means[arm]))
    answers_to_decision(lrn)  # compiles on a first run
    start = time.perf_counter()
    f = answers_to_decision(lrn)
    assert time.perf_counter() - start < 1.0
    assert f.mid > 0


# ------------------------------------------------------------------------------------------- budget, stops, bad input
def test_fixed_budget_is_exact() -> None:
    lrn = make_learner("sequential_halving", budget=400).start(4, seed=3)
    stream = Bernoulli([0.6, 0.5, 0.4, 0.3]).stream(seed=4)
    for _ in range(150):
        for arm in lrn.ask(1):
            lrn.tell(arm, stream.draw(arm))
    f = answers_to_decision(lrn)
    assert (f.low, f.mid, f.high, f.exact) == (250, 250, 250, True)


def test_no_forecast_and_why() -> None:
    with pytest.raises(ValueError, match="needs a Learner"):
        forecast_or_reason("kl_rand_lucb")
    unstarted = make_learner("kl_rand_lucb")
    assert answers_to_decision(unstarted) is None
    assert "not started" in forecast_or_reason(unstarted)
    fresh = make_learner("kl_rand_lucb").start(5, seed=0)
    assert answers_to_decision(fresh) is None and "no answers yet" in forecast_or_reason(fresh)
    partial = make_learner("top_two").start(3, seed=0)
    _feed(partial, 0, [1.0])
    assert "2 of 3 items have no answer yet" in forecast_or_reason(partial)
    never = make_learner("next_ucb").start(3, seed=0)
    _feed(never, 0, [1.0])
    assert "never stops" in forecast_or_reason(never)
    tied = _two_arms(make_learner("kl_rand_lucb"), 0.5, 0.5)
    assert answers_to_decision(tied) is None and "equal" in forecast_or_reason(tied)
    tied_glr = _two_arms(make_learner("top_two"), 0.5, 0.5)
    assert answers_to_decision(tied_glr) is None and "equal" in forecast_or_reason(tied_glr)
    kinf = _two_arms(make_learner("track_and_stop", stop="kinf"), 0.7, 0.3)
    assert answers_to_decision(kinf) is not None  # its own model (test_the_kinf_stop_is_forecast_from_its_own_model)
    other = make_learner("median_elimination").start(3, seed=0)
    _feed(other, 0, [1.0])
    assert "no forecast for the stopping rule" in forecast_or_reason(other)


def test_a_stopped_learner_needs_nothing() -> None:
    lrn = _run("kl_rand_lucb", {"delta": 0.05}, np.array([0.9, 0.1]), seed=0)
    assert lrn.done
    assert answers_to_decision(lrn) == Forecast(0, 0, 0, "the learner has stopped: no more answers are needed",
                                                exact=True)


# ------------------------------------------------------------------------------------------- error guarantee
def test_error_guarantee_in_the_owners_terms() -> None:
    g = error_guarantee(make_learner("kl_rand_lucb", delta=0.025))
    assert (g.error_probability, g.learner_delta, g.error_per_delta, g.proven) == (0.05, 0.025, 2.0, True)
    assert "delta = 0.025" in g.note and "2 x delta" in g.note and "Tanczos" in g.note
    assert set(g.as_dict()) == {"error_probability", "learner_delta", "error_per_delta", "proven", "delta_note"}
    lucb = error_guarantee(make_learner("lucb1", delta=0.05))
    assert (lucb.error_probability, lucb.proven) == (0.05, True)
    heuristic = error_guarantee(make_learner("lil_lucb", delta=0.05))
    assert not heuristic.proven and "not guaranteed" in heuristic.note and "heuristic" in heuristic.note
    assert error_guarantee(make_learner("lil_lucb", delta=0.05, preset="faithful")).proven
    practical = error_guarantee(make_learner("track_and_stop", delta=0.05))
    assert not practical.proven and "log((log t + 1)/delta)" in practical.note
    assert error_guarantee(make_learner("track_and_stop", delta=0.05, threshold="theory")).proven
    assert not error_guarantee(make_learner("top_two", delta=0.05, threshold="theory")).proven  # Gaussian cost
    kinf = error_guarantee(make_learner("top_two", delta=0.05, threshold="theory", stop="kinf"))
    assert kinf.proven and "Krichevsky-Trofimov" in kinf.note
    assert not error_guarantee(make_learner("track_and_stop", delta=0.05, stop="kinf")).proven
    budget = error_guarantee(make_learner("sequential_halving", budget=100))
    assert budget.error_probability is None and not budget.proven and "fixed budget" in budget.note
    contest = error_guarantee(make_learner("contest_ucb_2024"))
    assert not contest.proven and "never stops" in contest.note
    with pytest.raises(ValueError, match="needs a Learner"):
        error_guarantee(None)


def test_the_kinf_stop_is_forecast_from_its_own_model():
    """stop="kinf": the plug-in t' = T*_Kinf(F_hat) beta(t') with each pair's threshold at w* t', minus t; F_hat the
    add-1/2 estimates. Checked against the floor computed independently (proven_glr.threshold_floor_samples)."""
    from purebandits.algorithms.track_and_stop import TrackAndStop
    from purebandits.experiments.proven_glr import threshold_floor_samples
    from purebandits.forecast import _shift_categorical, forecast_or_reason
    from purebandits.instances.rewards import Categorical
    from purebandits.kinf_glr import label_counts_from_moments
    from purebandits.lower_bound import solve_characteristic_time

    inst = Categorical([[0.2, 0.2, 0.6], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1]])
    lrn = TrackAndStop(0.01, threshold="theory", stop="kinf").start(4, seed=1)
    stream = inst.stream(1)
    for _ in range(60):
        arm = lrn.ask(1)[0]
        lrn.tell(arm, float(stream.draw(arm)))
    f = forecast_or_reason(lrn)
    assert not isinstance(f, str) and f.low <= f.mid <= f.high and "K_inf" in f.method
    v = np.array([0.0, 0.5, 1.0])
    C = label_counts_from_moments(lrn.counts_, lrn.sums_, lrn.sumsq_, v) + 0.5
    sol = solve_characteristic_time(Categorical(C, v), 1, rtol=1e-3)
    hand = threshold_floor_samples(sol.T_star, 4, 0.01, "K_inf", sol.weights) - 60
    assert abs(f.mid - hand) <= 1.0 + 1e-6 * hand  # whole answers by bisection against a continuous root
    # the range's distributions: each mean moved to its target where the extreme ratings allow it
    P = C / C.sum(axis=1, keepdims=True)
    target = P @ v + np.array([0.05, -0.05, 0.0, -0.02])
    assert np.allclose(_shift_categorical(P, v, target) @ v, target)
    assert np.allclose(_shift_categorical(P, v, target).sum(axis=1), 1.0)

    # beyond 200 items (or k > 1) the upper estimate with T*_Bern >= T*_Kinf and the t-form threshold, which is at
    # least every pair's: never below the exact forecast where both exist
    from purebandits.forecast import _kinf_bernoulli_forecast

    upper = _kinf_bernoulli_forecast(lrn)
    assert not isinstance(upper, str) and "upper estimate" in upper.method and upper.mid >= f.mid
    many = TrackAndStop(0.01, stop="kinf").start(300, seed=0)
    for _ in range(300):
        arm = many.ask(1)[0]
        many.tell(arm, 1.0 if arm == 0 else (0.5 if arm % 2 else 0.0))  # one best item
    assert "upper estimate" in forecast_or_reason(many).method


def test_kl_rand_lucb_with_the_kinf_stop_gets_the_kinf_forecast():
    from purebandits.algorithms.lucb import KLRandLUCB
    from purebandits.forecast import forecast_or_reason
    from purebandits.instances.rewards import Categorical

    inst = Categorical([[0.2, 0.2, 0.6], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1]])
    for k, word in ((1, "T*_Kinf"), (2, "upper estimate")):
        lrn = KLRandLUCB(k, delta=0.01, stop="kinf").start(4, seed=1)
        stream = inst.stream(1)
        for _ in range(60):
            arm = lrn.ask(1)[0]
            lrn.tell(arm, float(stream.draw(arm)))
        f = forecast_or_reason(lrn)
        assert not isinstance(f, str) and word in f.method and f.low <= f.mid <= f.high
