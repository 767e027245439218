"""Fixed-budget learners: budget accounting, schedules, SAR == NSAR(p=1), rounds under concurrency,
and the sums fast path (equal in distribution to the sequential kernel)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from purebandits.algorithms import (
    NSAR,
    NSE,
    OptMAI,
    SequentialHalving,
    SuccessiveAcceptsRejects,
    SuccessiveRejects,
    UniformAllocation,
)
from purebandits.algorithms.halving import halving_rounds
from purebandits.algorithms.successive_rejects import nsar_schedule
from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian

FIXED_BUDGET = [SuccessiveRejects, SuccessiveAcceptsRejects, NSE, NSAR, SequentialHalving, UniformAllocation, OptMAI]


def _run_concurrent(learner, model, seed, cancel_rate=0.1):
    """Many participants: random batch asks, shuffled answers, some cancellations."""
    rng = np.random.default_rng(seed)
    stream = model.stream(seed + 1)
    out = []
    while not learner.done:
        out += learner.ask(int(rng.integers(1, 8)))
        assert out, "ask() returned nothing while nothing is pending"
        rng.shuffle(out)
        m = int(rng.integers(1, len(out) + 1))
        for a in out[:m]:
            if rng.random() < cancel_rate:
                learner.cancel(a)
            else:
                learner.tell(a, stream.draw(a))
        out = out[m:]
    assert not out and learner.pending_.sum() == 0
    return learner


@pytest.mark.parametrize("cls", FIXED_BUDGET)
@pytest.mark.parametrize("n,k,budget", [(7, 1, 200), (12, 3, 1000), (30, 10, 777), (9, 5, 90)])
def test_budget_accounting_is_exact(cls, n, k, budget):
    model = Bernoulli(np.linspace(0.2, 0.8, n))
    learner = _run_concurrent(cls(k=k, budget=budget).start(n, seed=3), model, 4)
    assert learner.done and learner.ask(3) == []
    assert learner.n_pulls == learner.planned_ <= budget
    assert learner.n_pulls == learner.counts_.sum()
    rec = learner.recommend()
    assert len(rec) == k == len(set(rec))
    assert learner.remaining_budget == budget - learner.n_pulls


def test_uniform_spends_exactly_the_budget_evenly():
    learner = UniformAllocation(k=2, budget=1003).start(10, seed=0)
    _run_concurrent(learner, Bernoulli(np.linspace(0.1, 0.9, 10)), 1)
    assert learner.n_pulls == 1003
    assert list(learner.counts_) == [101, 101, 101] + [100] * 7


def _sar_spend(n, budget, p, k, accept):
    """Pulls the schedule plans when every phase runs: sum_r |A_r| (n_r - n_{r-1})."""
    nr = nsar_schedule(n, budget, p, k, accept)
    return sum((n + 1 - r) * (nr[r] - nr[r - 1]) for r in range(1, len(nr)))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 60), extra=st.integers(0, 5000), p=st.sampled_from([0.5, 0.7, 1.0, 1.3, 2.0]),
       k=st.integers(1, 59))
def test_schedule_never_exceeds_budget(n, extra, p, k):
    k = min(k, n - 1)
    budget = n + extra
    for accept in (True, False):
        nr = nsar_schedule(n, budget, p, k, accept)
        assert nr[0] == 0 and np.all(np.diff(nr) >= 0)
        assert _sar_spend(n, budget, p, k, accept) <= budget


def test_sr_schedule_matches_abm10():
    n, budget = 5, 1000
    logbar = 0.5 + sum(1 / i for i in range(2, n + 1))
    expected = [0] + [math.ceil((budget - n) / (logbar * (n + 1 - k))) for k in range(1, n)]
    assert list(nsar_schedule(n, budget, 1.0)) == expected


def test_successive_rejects_spends_the_schedule():
    n, budget = 8, 2000
    learner = SuccessiveRejects(budget=budget).start(n, seed=0)
    _run_concurrent(learner, Bernoulli(np.linspace(0.2, 0.8, n)), 5)
    assert learner.n_pulls == _sar_spend(n, budget, 1.0, 1, False)
    nr = nsar_schedule(n, budget, 1.0)
    # every arm rejected in phase r has exactly n_r pulls; the survivor has n_{n-1}
    assert sorted(learner.counts_) == sorted(list(nr[1:]) + [nr[-1]])


def test_sequential_halving_rounds_and_budget():
    assert halving_rounds(8) == 3 and halving_rounds(1000) == 10 and halving_rounds(9) == 4
    assert halving_rounds(16, 4) == 2 and halving_rounds(10, 3) == 2
    n, budget = 16, 4000
    learner = SequentialHalving(budget=budget).start(n, seed=1)
    _run_concurrent(learner, Bernoulli(np.linspace(0.2, 0.8, n)), 2)
    sizes = [16, 8, 4, 2]
    assert learner.n_pulls == sum(s * (budget // (s * 4)) for s in sizes)


def _trace(learner, model, seed):
    stream = model.stream(seed)
    asked = []
    while not learner.done:
        (arm,) = learner.ask(1)
        asked.append(arm)
        learner.tell(arm, stream.draw(arm))
    return asked


@pytest.mark.parametrize("n,k,seed", [(6, 1, 0), (10, 3, 1), (25, 7, 2)])
def test_sar_equals_nsar_with_p_one(n, k, seed):
    model = Bernoulli(np.random.default_rng(seed).uniform(0.3, 0.7, n))
    a = SuccessiveAcceptsRejects(k=k, budget=40 * n).start(n, seed=seed)
    b = NSAR(k=k, budget=40 * n, p=1.0).start(n, seed=seed)
    assert _trace(a, model, 9) == _trace(b, model, 9)
    assert a.recommend() == b.recommend()
    for attr in ("counts_", "sums_", "status_"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr))
    c = NSE(budget=40 * n, p=1.0).start(n, seed=seed)
    d = SuccessiveRejects(budget=40 * n).start(n, seed=seed)
    assert _trace(c, model, 9) == _trace(d, model, 9) and c.recommend() == d.recommend()


def test_nsar_p_changes_the_schedule():
    lo, hi = nsar_schedule(50, 5000, 0.7), nsar_schedule(50, 5000, 1.3)
    assert lo[1] > hi[1] and lo[-1] < hi[-1]  # p < 1 spends early, p > 1 late


@pytest.mark.parametrize("cls", [SuccessiveAcceptsRejects, SequentialHalving, OptMAI, UniformAllocation])
def test_round_hands_out_pulls_in_parallel_and_waits(cls):
    n = 8
    learner = cls(k=2, budget=800).start(n, seed=0)
    first = learner.ask(n)
    assert sorted(first) == list(range(n)), "concurrent participants get different arms"
    rest = []
    while True:
        got = learner.ask(5)
        if not got:
            break
        rest += got
    assert learner.ask(1) == [] and not learner.done  # the round waits for its answers
    round_pulls = first + rest
    round_no = learner.round_
    stream = Bernoulli(np.linspace(0.1, 0.9, n)).stream(1)
    cancelled = round_pulls.pop()
    learner.cancel(cancelled)
    assert learner.ask(3) == [cancelled]  # re-issued, nothing else: the round is not over
    round_pulls.append(cancelled)
    for arm in round_pulls[:-1]:
        learner.tell(arm, stream.draw(arm))
        assert learner.round_ == round_no
    learner.tell(round_pulls[-1], stream.draw(round_pulls[-1]))
    assert learner.done or learner.round_ > round_no  # the last answer closes the round


# ----------------------------------------------------------------------- the sums fast path
def _final_stats(cls, params, model, runs, fast):
    errors, sums0 = 0, []
    k = params.get("k", 1)
    for r in range(runs):
        learner = cls(**params).start(model.n_arms, seed=r)
        if fast:
            learner.run_compiled_sums(model, 10_000 + r)
        else:
            learner.run_compiled(model.stream(20_000 + r), 10**9)
        assert learner.done and learner.n_pulls <= params["budget"]
        errors += sorted(learner.recommend()) != list(range(k))
        sums0.append(learner.sums_[k])
    return errors, np.array(sums0)


@pytest.mark.parametrize("cls,params,model", [
    (NSAR, {"k": 2, "budget": 300, "p": 0.85}, Bernoulli([0.7, 0.65, 0.6, 0.5, 0.45, 0.4])),
    (SequentialHalving, {"budget": 200}, Gaussian([0.6, 0.5, 0.45, 0.4, 0.3], 0.25)),
    (OptMAI, {"k": 2, "budget": 400}, Categorical([[1, 1, 3], [1, 2, 2], [2, 2, 1], [3, 1, 1], [3, 2, 1],
                                                   [4, 1, 1], [2, 3, 1], [3, 3, 1]])),
])
def test_sums_path_equals_sequential_in_distribution(cls, params, model):
    """Same law: misidentification counts (Fisher exact) and the sums of one arm (KS), alpha = 1e-3.

    With fixed seeds a correct fast path fails with probability <= 2e-3 over the seed choice.
    """
    runs = 400
    e_seq, s_seq = _final_stats(cls, params, model, runs, fast=False)
    e_fast, s_fast = _final_stats(cls, params, model, runs, fast=True)
    assert 0 < e_seq < runs  # a race close enough for the error count to carry information
    _, p_err = stats.fisher_exact([[e_seq, runs - e_seq], [e_fast, runs - e_fast]])
    assert p_err > 1e-3, (e_seq, e_fast)
    assert stats.ks_2samp(s_seq, s_fast).pvalue > 1e-3


def test_sums_path_detects_a_wrong_law():
    """The distribution test can fail: a shifted arm gives a different law."""
    params = {"k": 2, "budget": 300, "p": 0.85}
    model = Bernoulli([0.7, 0.65, 0.6, 0.5, 0.45, 0.4])
    shifted = Bernoulli([0.7, 0.65, 0.5, 0.5, 0.45, 0.4])
    _, s_seq = _final_stats(NSAR, params, model, 400, fast=False)
    _, s_fast = _final_stats(NSAR, params, shifted, 400, fast=True)
    assert stats.ks_2samp(s_seq, s_fast).pvalue < 1e-3


def test_sums_path_budget_and_shape():
    model = Bernoulli(np.linspace(0.1, 0.9, 50))
    for cls in FIXED_BUDGET:
        learner = cls(k=5, budget=5000).start(50, seed=1)
        learner.run_compiled_sums(model, 2)
        assert learner.done and learner.n_pulls == learner.counts_.sum() <= 5000
        assert len(set(learner.recommend())) == 5
        assert np.array_equal(learner.sums_, learner.sumsq_)  # Bernoulli: x^2 = x
