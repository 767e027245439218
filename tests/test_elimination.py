"""Successive, Median and Exponential-Gap Elimination: schedules, constants and eliminations."""

import math

import numpy as np
import pytest

from purebandits.algorithms.elimination import (
    ExpGapElimination,
    MedianElimination,
    SuccessiveElimination,
    expgap_stage_pulls,
    me_stage_pulls,
)
from purebandits.bounds import edmm_radius, ls_delta, ls_radius
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.stopping import LS_EPSILON
from purebandits.testing.checks import check_kernel_matches_reference, run_learner


@pytest.mark.parametrize("eps, delta", [(0.1, 0.1), (0.19, 0.05), (0.5, 0.01)])
def test_me_stage_sizes_follow_edmm(eps, delta):
    e, d = eps / 4, delta / 2
    for stage in range(1, 8):
        assert me_stage_pulls(eps, delta, stage, 0.5) == math.ceil(4 / e**2 * math.log(3 / d))
        e, d = 0.75 * e, d / 2


def test_me_learner_schedules_and_halves():
    n, eps, delta = 5, 0.5, 0.1
    m1, m2 = me_stage_pulls(eps, delta, 1, 0.5), me_stage_pulls(eps, delta, 2, 0.5)
    learner = MedianElimination(delta=delta, epsilon=eps).start(n, seed=0)
    assert learner.need_.tolist() == [m1] * n
    stream = Bernoulli([0.9, 0.1, 0.8, 0.2, 0.3]).stream(1)
    for _ in range(n * m1):
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    # the better half (ceil(5/2) = 3) survives with fresh round-2 counts
    assert learner.l_ == 2 and learner.n_act_ == 3
    assert sorted(learner.act_[:3].tolist()) == [0, 2, 4]
    assert learner.need_[[0, 2, 4]].tolist() == [m2] * 3 and learner.scnt_[[0, 2, 4]].tolist() == [0] * 3
    run_learner(learner, Bernoulli([0.9, 0.1, 0.8, 0.2, 0.3]), 2)
    assert learner.done and learner.recommend() == [0]
    assert learner.n_pulls == n * m1 + 3 * m2 + 2 * me_stage_pulls(eps, delta, 3, 0.5)


def test_stage_handout_waits_and_reissues_cancelled_pulls():
    learner = MedianElimination(epsilon=0.5, delta=0.1).start(3, seed=0)
    m = int(learner.need_[0])
    got = learner.ask(3)
    assert got == [0, 1, 2]  # several participants get different pulls of the stage
    rest = learner.ask(3 * m)  # the whole remaining schedule
    assert len(rest) == 3 * m - 3 and learner.ask(1) == []  # waiting for answers, not done
    assert not learner.done and learner.pending_.sum() == 3 * m
    learner.cancel(1)
    assert learner.ask(5) == [1]  # the cancelled pull is re-issued, nothing more
    for arm in [0, 2] + rest[:-1] + [1]:
        learner.tell(arm, 1.0 if arm == 0 else 0.0)
    assert learner.l_ == 1  # one pull still out: the stage stays open
    learner.tell(rest[-1], 0.0)
    assert learner.l_ == 2


def test_expgap_round_constants():
    for r in (1, 2, 3, 5):
        eps_r, delta_r = 2.0**-r / 4, 0.1 / (50 * r**3)
        assert expgap_stage_pulls(r, 0.1, 0.5) == math.ceil(2 / eps_r**2 * math.log(2 / delta_r))


def test_expgap_runs_me_with_half_eps_and_delta_r():
    """Low-noise Gaussian arms: round 1 alone eliminates every arm; pulls follow the schedule exactly."""
    sigma, delta = 0.05, 0.1
    learner = ExpGapElimination(delta=delta, ls=False, sigma=sigma).start(3, seed=0)
    run_learner(learner, Gaussian([0.9, 0.5, 0.1], sigma**2), 1)
    assert learner.done and learner.recommend() == [0] and learner.r_ == 1
    d1 = delta / 50  # delta_1 = delta/(50 r^3)
    me = [me_stage_pulls(1 / 16, d1, stage, sigma) for stage in (1, 2)]  # ME(S_1, eps_1/2, delta_1)
    assert learner.n_pulls == 3 * expgap_stage_pulls(1, delta, sigma) + 3 * me[0] + 2 * me[1]


def test_expgap_ls_splits_the_budget():
    learner = ExpGapElimination(delta=0.1, ls=True).start(4, seed=0)
    assert learner._delta_alg == 0.05 and learner._d_ls == ls_delta(0.05, LS_EPSILON)
    assert learner.need_[0] == expgap_stage_pulls(1, 0.05, 0.5)
    run_learner(learner, Bernoulli([0.9, 0.2, 0.2, 0.2]), 3)
    assert learner.done and learner.recommend() == [0] and learner.r_ == 1  # LS stops long before ExpGap


def test_edmm_radius_value():
    assert edmm_radius(10, 5, 0.1) == pytest.approx(math.sqrt(math.log(4 * 5 * 100 / 0.1) / 10))


@pytest.mark.parametrize("radius", ["ls", "edmm"])
def test_se_eliminates_a_clearly_bad_arm_first(radius):
    """Deterministic rewards: arm 1 (gap 1) goes at the first round with 2 rad(t) <= 1, arms 2, 3
    (gap 0.3) at the first round with 2 rad(t) <= 0.3; the best arm is never dropped."""
    reward = {0: 1.0, 1: 0.0, 2: 0.7, 3: 0.7}
    learner = SuccessiveElimination(delta=0.1, radius=radius).start(4, seed=0)
    while not learner.done:
        for arm in learner.ask(4):
            learner.tell(arm, reward[arm])
    ts = np.arange(1, 100_000)
    if radius == "ls":
        rad = ls_radius(ts, ls_delta(0.1, LS_EPSILON), 4)
    else:
        rad = edmm_radius(ts, 4, 0.1)
    t1 = int(ts[np.argmax(2 * rad <= 1.0)])
    t2 = int(ts[np.argmax(2 * rad <= 0.3 + 1e-12)])
    assert 1 < t1 < t2
    assert learner.counts_.tolist() == [t2, t1, t2, t2]
    assert learner.recommend() == [0]


class _SEEdmm(SuccessiveElimination):
    test_params = {"radius": "edmm"}


class _ExpGapNoLSLowNoise(ExpGapElimination):
    test_params = {"ls": False, "sigma": 0.1}


@pytest.mark.parametrize("cls", [_SEEdmm, _ExpGapNoLSLowNoise])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_kernel_matches_reference_other_settings(cls):
    check_kernel_matches_reference(cls)


@pytest.mark.parametrize("use_ls", [True, False])
def test_se_elimination_pass_equals_the_per_arm_rule(use_ls):
    """``_se_eliminate`` computes each radius once per distinct count; the kept arms (and their order) are those
    of the rule written per arm (EDMM02 Sec. 3: drop a when mu_best - rad(T_best) >= mu_a + rad(T_a)), on
    equal counts (every SE round) and on mixed ones, with near-ties at the boundary."""
    from purebandits.algorithms.elimination import _se_eliminate
    from purebandits.bounds import edmm_radius_s, ls_radius_s
    from purebandits.stopping import LS_EPSILON

    rng = np.random.default_rng(3)
    d_ls, delta, c, sigma = 0.01, 0.1, 4.0, 0.5
    dropped = kept = 0
    for trial in range(400):
        n = int(rng.integers(2, 40))
        n_act = int(rng.integers(1, n + 1))
        act = np.sort(rng.choice(n, n_act, replace=False)).astype(np.int64)
        counts = np.full(n, int(rng.integers(1, 50)), dtype=np.int64)
        if trial % 3 == 0:  # mixed counts: the radius changes between arms
            counts = rng.integers(1, 6, n).astype(np.int64) * (1 + trial % 7)
        sums = np.round(rng.normal(0.5, 0.3, n) * counts, int(rng.integers(0, 3)))  # rounded: ties

        rad = {int(a): ls_radius_s(float(counts[a]), d_ls, float(n), LS_EPSILON, sigma) if use_ls
               else edmm_radius_s(float(counts[a]), float(n), delta, c, sigma) for a in act}  # per arm
        means = {int(a): sums[a] / counts[a] for a in act}
        best = int(max(act, key=lambda a: (means[int(a)], -a)))
        lcb = means[best] - rad[best]
        want = [int(a) for a in act if a == best or not lcb >= means[int(a)] + rad[int(a)]]
        got_act = act.copy()
        keep = _se_eliminate(got_act, n_act, sums, counts, use_ls, c, delta, d_ls, sigma, n)
        assert got_act[:keep].tolist() == want, trial
        dropped += n_act - keep
        kept += keep
    assert dropped > 10 and kept > 100  # both outcomes exercised
