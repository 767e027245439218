"""Restricted asks (``ask(n, allowed=...)``) of the top-two, Track-and-Stop, UCB1, Thompson, random,
nonadaptive, fixed-budget round and elimination learners: the arm each rule picks among the allowed
arms against a brute-force computation, the unrestricted decision when every arm is allowed, the
round schedules' next allowed pull and their off-schedule ("extra") pulls as documented."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from purebandits.algorithms import (
    NSAR,
    NSE,
    UCB1,
    ExpGapElimination,
    MedianElimination,
    NonAdaptive,
    OptMAI,
    RandomSampling,
    SequentialHalving,
    SuccessiveAcceptsRejects,
    SuccessiveElimination,
    SuccessiveRejects,
    ThompsonSampling,
    TopTwo,
    TrackAndStop,
    UniformAllocation,
)
from purebandits.algorithms.kernels.rounds import ACTIVE
from purebandits.algorithms.thompson import ts_posterior
from purebandits.algorithms.track_and_stop import optimal_weights
from purebandits.bounds import glr_pair_cost_s
from purebandits.instances.rewards import Bernoulli

FIXED_BUDGET = [SuccessiveRejects, SuccessiveAcceptsRejects, NSE, NSAR, SequentialHalving, UniformAllocation, OptMAI]

# (factory, arms) of every learner of this file; the budgets are large enough to leave rounds to play
LEARNERS = [
    (lambda: TopTwo(0.1), 7),
    (lambda: TopTwo(0.1, leader="ts", cost="bernoulli"), 7),
    (lambda: TrackAndStop(0.1), 6),
    (lambda: UCB1(0.1), 8),
    (lambda: UCB1(0.1), 40),  # the key heap's classes (from 16 arms on the compiled driver; always on ask/tell)
    (lambda: ThompsonSampling(0.1, budget=5000), 8),
    (lambda: ThompsonSampling(0.1, budget=5000), 120),  # the thresholded draw (from 96 arms)
    (lambda: RandomSampling(k=2), 9),
    (lambda: NonAdaptive(0.1), 7),
    (lambda: SuccessiveElimination(0.1), 6),
    (lambda: SuccessiveElimination(0.1, radius="edmm"), 6),
    (lambda: MedianElimination(0.1, epsilon=0.3), 5),
    (lambda: ExpGapElimination(0.1), 5),
] + [(lambda cls=cls: cls(k=2, budget=900), 8) for cls in FIXED_BUDGET]
IDS = ["TopTwo-eb", "TopTwo-ts", "TrackAndStop", "UCB1", "UCB1-40", "Thompson", "Thompson-120", "RandomSampling",
       "NonAdaptive", "SE-ls", "SE-edmm", "ME", "ExpGap"] + [c.__name__ for c in FIXED_BUDGET]


def _means(n: int) -> np.ndarray:
    return np.linspace(0.8, 0.2, n)


# ------------------------------------------------------------------------------ every learner
@pytest.mark.parametrize("make,n", LEARNERS, ids=IDS)
def test_every_arm_allowed_is_the_unrestricted_rule(make, n):
    """``allowed`` = all arms gives the unrestricted decisions, draws and state, with concurrent pulls and cancels."""
    a = make().start(n, seed=5)
    b = make().start(n, seed=5)
    stream = Bernoulli(_means(n)).stream(6)
    rng = np.random.default_rng(7)
    full = np.ones(n, dtype=bool)
    out: list[int] = []
    for _ in range(600):
        m = int(rng.integers(1, 4))
        got = a.ask(m, allowed=full if rng.random() < 0.5 else list(range(n)))
        assert got == b.ask(m)
        out += got
        rng.shuffle(out)
        for arm in out[: int(rng.integers(0, len(out) + 1))]:
            out.remove(arm)
            if rng.random() < 0.1:
                a.cancel(arm)
                b.cancel(arm)
            else:
                r = stream.draw(arm)
                a.tell(arm, r)
                b.tell(arm, r)
        if a.done:
            break
    assert a.state_json() == b.state_json()


@pytest.mark.parametrize("make,n", LEARNERS, ids=IDS)
def test_restricted_asks_return_allowed_arms_and_wait_only_as_unrestricted(make, n):
    """Small allowed sets (one or two arms), concurrent pulls: always an allowed arm, [] only where ask() gives []."""
    learner = make().start(n, seed=11)
    stream = Bernoulli(_means(n)).stream(12)
    rng = np.random.default_rng(13)
    out: list[int] = []
    for _ in range(1500):
        if learner.done:
            break
        allowed = rng.choice(n, size=int(rng.integers(1, 3)), replace=False)
        before = copy.deepcopy(learner)
        got = learner.ask(int(rng.integers(1, 3)), allowed=allowed)
        assert all(arm in allowed for arm in got)
        if not got:
            assert before.ask(1) == []
        out += got
        rng.shuffle(out)
        for arm in out[: int(rng.integers(1, len(out) + 1))] if out else []:
            out.remove(arm)
            learner.tell(arm, stream.draw(arm))
        assert int(learner.pending_.sum()) == len(out)


# ------------------------------------------------------------------------------ index rules
def _warm(learner, n, pulls, seed=1):
    """Some answered pulls and a few pending ones (virtual counts), through unrestricted asks."""
    stream = Bernoulli(_means(n)).stream(seed)
    for _ in range(pulls):
        for arm in learner.ask(1):
            learner.tell(arm, stream.draw(arm))
    return learner.ask(3)


def _masks(n, seed, count=30):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        mask = rng.random(n) < rng.choice([0.15, 0.5, 0.9])
        if not mask.any():
            mask[int(rng.integers(n))] = True
        yield mask


def test_ucb1_is_the_allowed_argmax_of_the_index():
    n = 30
    learner = UCB1(0.1).start(n, seed=2)
    _warm(learner, n, 400)
    for mask in _masks(n, 3):
        N = learner.counts_ + learner.pending_
        t = learner.t_ + learner.pending_.sum()
        mu = learner.sums_ / np.maximum(learner.counts_, 1)
        idx = np.array([mu[i] + math.sqrt(2.0 * math.log(t) / N[i]) for i in range(n)])
        want = int(np.flatnonzero(mask)[np.argmax(idx[mask])])
        assert learner.ask(1, allowed=mask) == [want]
    # an allowed arm with no pull comes first (the rule's infinite index)
    fresh = UCB1(0.1).start(n, seed=2)
    fresh.ask(5)
    mask = np.zeros(n, dtype=bool)
    mask[[2, 9, 17]] = True
    assert fresh.ask(1, allowed=mask) == [9]


def test_ucb1_cache_follows_restricted_asks():
    """The key heap (incremental path) and the O(n) reference pick agree after restricted asks, tells and cancels."""
    n = 50
    fast = UCB1(0.1).start(n, seed=4)
    ref = UCB1(0.1).start(n, seed=4)
    ref._ask_incremental = False
    stream = Bernoulli(_means(n)).stream(5)
    rng = np.random.default_rng(6)
    out: list[int] = []
    for _ in range(3000):
        mask = rng.random(n) < 0.6 if rng.random() < 0.5 else None
        if mask is not None and not mask.any():
            mask = None
        got = fast.ask(2, allowed=mask)
        assert got == ref.ask(2, allowed=mask)
        out += got
        arm = out.pop(int(rng.integers(len(out))))
        if rng.random() < 0.1:
            fast.cancel(arm)
            ref.cancel(arm)
        else:
            r = stream.draw(arm)
            fast.tell(arm, r)
            ref.tell(arm, r)
    assert fast.state_json() == ref.state_json()


def test_track_and_stop_tracks_among_the_allowed_arms():
    n = 6
    learner = TrackAndStop(0.1).start(n, seed=3)
    _warm(learner, n, 300)
    checked = 0
    for mask in _masks(n, 4, 60):
        N = (learner.counts_ + learner.pending_).astype(float)
        t = N.sum()
        allowed = np.flatnonzero(mask)
        lo = allowed[np.argmin(N[allowed])]
        if N[lo] <= max(math.sqrt(t) - n / 2, 0):
            want = int(lo)
        else:
            w = optimal_weights(learner.sums_ / learner.counts_)
            want = int(allowed[np.argmax(t * w[allowed] - N[allowed])])
            checked += 1
        got = learner.ask(1, allowed=mask)
        assert got == [want]
        learner.tell(got[0], float(got[0] < 2))
    assert checked > 20


def test_track_and_stop_forced_exploration_is_restricted():
    """An under-sampled arm that is not allowed forces nothing; an allowed one is pulled."""
    n = 6
    learner = TrackAndStop(0.1).start(n, seed=3)
    stream = Bernoulli([0.3, 0.8, 0.6, 0.5, 0.45, 0.4]).stream(4)
    for arm in range(1, n):
        for _ in range(40):
            learner.ask(1, allowed=[arm])
            learner.tell(arm, stream.draw(arm))
    learner.ask(1, allowed=[0])
    learner.tell(0, stream.draw(0))
    # arm 0 has 1 pull and t = 201: sqrt(t) - n/2 = 11.2 >= 1, so the unrestricted rule forces arm 0
    assert copy.deepcopy(learner).ask(1) == [0]
    N = learner.counts_.astype(float)
    w = optimal_weights(learner.sums_ / learner.counts_)
    want = int(2 + np.argmax(N.sum() * w[2:] - N[2:]))
    assert learner.ask(1, allowed=[2, 3, 4, 5]) == [want]
    assert learner.ask(1, allowed=[0, 3]) == [0]


def _top_two_expected(learner, mask):
    """(arm, leader) by a direct reading of the rule, on a copy of the learner's generator."""
    n = learner.n_arms_
    rng = copy.deepcopy(learner.rng_)
    N = learner.counts_ + learner.pending_
    if (N == 0).any():
        allowed = np.flatnonzero(mask)
        return int(allowed[np.argmin(N[allowed])]), -1
    mu = learner.sums_ / learner.counts_
    if learner.leader == "ts":
        draws = []
        for i in range(n):
            s = min(max(learner.sums_[i], 0.0), float(learner.counts_[i]))
            draws.append(rng.beta(1.0 + s, 1.0 + learner.counts_[i] - s))
        leader = int(np.argmax(draws))
    else:
        leader = int(np.argmax(mu))
    if rng.random() < learner.beta and mask[leader]:
        return leader, leader
    cands = [j for j in np.flatnonzero(mask) if j != leader]
    if not cands:
        return leader, leader
    gauss = learner.cost == "gaussian"
    costs = [glr_pair_cost_s(mu[leader], float(N[leader]), mu[j], float(N[j]), gauss, learner.sigma) for j in cands]
    return int(cands[int(np.argmin(costs))]), leader


@pytest.mark.parametrize("params", [{}, {"leader": "ts", "cost": "bernoulli"}, {"cost": "bernoulli", "beta": 0.7}])
def test_top_two_is_leader_or_the_allowed_challenger(params):
    n = 9
    learner = TopTwo(0.01, **params).start(n, seed=8)
    _warm(learner, n, 250)
    seen = set()
    for mask in _masks(n, 9, 80):
        want, leader = _top_two_expected(learner, mask)
        got = learner.ask(1, allowed=mask)
        assert got == [want]
        assert learner._last_leader == leader
        seen.add((want == leader, bool(mask[leader])))
        learner.tell(got[0], float(got[0] < 3))
    assert {(True, True), (False, True), (False, False)} <= seen


def test_top_two_initialisation_pulls_the_least_pulled_allowed_arm():
    learner = TopTwo(0.1).start(5, seed=1)
    assert learner.ask(1, allowed=[3, 1]) == [1]
    assert learner.ask(2, allowed=[1, 3]) == [3, 1]  # 3 has no pull; then 1 (one pending) against 3 (one)
    assert learner._last_leader == -1


def test_top_two_workspace_follows_restricted_asks():
    """The EB leader's incremental workspace and the reference rule agree after restricted asks, tells and cancels."""
    n = 40
    fast = TopTwo(0.05).start(n, seed=4)
    ref = TopTwo(0.05).start(n, seed=4)
    ref._incremental = False
    stream = Bernoulli(_means(n)).stream(5)
    rng = np.random.default_rng(6)
    out: list[int] = []
    for _ in range(3000):
        mask = rng.random(n) < 0.5 if rng.random() < 0.6 else None
        if mask is not None and not mask.any():
            mask = None
        got = fast.ask(2, allowed=mask)
        assert got == ref.ask(2, allowed=mask)
        out += got
        arm = out.pop(int(rng.integers(len(out))))
        if rng.random() < 0.1:
            fast.cancel(arm)
            ref.cancel(arm)
        else:
            r = stream.draw(arm)
            fast.tell(arm, r)
            ref.tell(arm, r)
        assert fast.done == ref.done
        if fast.done:
            break
    assert fast._inc is not None or fast.done  # the workspace was kept, not rebuilt at every ask
    assert fast.state_json() == ref.state_json()


def test_thompson_full_draw_is_the_allowed_argmax():
    """Below 96 arms every posterior is drawn (in arm order, the same draws); the pick is the allowed argmax."""
    n = 10
    learner = ThompsonSampling(0.1, budget=10_000).start(n, seed=3)
    _warm(learner, n, 200)
    for mask in _masks(n, 4):
        rng = copy.deepcopy(learner.rng_)
        ys = np.array([rng.beta(*ts_posterior(learner.sums_[i], learner.counts_[i], 2.0)[::-1]) for i in range(n)])
        want = int(np.flatnonzero(mask)[np.argmin(ys[mask])])
        assert learner.ask(1, allowed=mask) == [want]


def test_thompson_thresholded_draw_has_the_restricted_law():
    """From 96 arms (the thresholded draw): the restricted pick's frequencies match P(argmax over the allowed arms)."""
    from scipy import stats

    n = 120
    learner = ThompsonSampling(None, budget=None).start(n, seed=2)
    rng = np.random.default_rng(3)
    p = np.linspace(0.3, 0.6, n)
    for arm in range(n):
        for _ in range(int(rng.integers(10, 30))):
            learner.ask(1, allowed=[arm])
            learner.tell(arm, float(rng.random() < p[arm]))
    mask = np.zeros(n, dtype=bool)
    mask[[5, 60, 100, 110, 119]] = True
    allowed = np.flatnonzero(mask)
    draws = 4000
    got = np.zeros(n)
    for _ in range(draws):
        arm = learner.ask(1, allowed=mask)[0]
        got[arm] += 1
        learner.cancel(arm)
    assert level_in_use(learner)
    # the exact law by Monte Carlo on the posteriors of the allowed arms
    mc = np.random.default_rng(9)
    theta = np.stack([mc.beta(*ts_posterior(learner.sums_[i], learner.counts_[i], 2.0), size=200_000)
                      for i in allowed])
    want = np.bincount(np.argmax(theta, axis=0), minlength=len(allowed)) / theta.shape[1]
    obs = got[allowed]
    keep = want * draws >= 5
    chi = stats.chisquare(obs[keep], want[keep] / want[keep].sum() * obs[keep].sum())
    assert chi.pvalue > 1e-4, (obs, want * draws)


def level_in_use(learner) -> bool:
    return learner.tail_level_[0] > 0.0


def test_random_sampling_is_uniform_over_the_allowed_arms():
    learner = RandomSampling().start(10, seed=1)
    mask = np.zeros(10, dtype=bool)
    mask[[1, 4, 7]] = True
    for _ in range(20):
        rng = copy.deepcopy(learner.rng_)
        assert learner.ask(1, allowed=mask) == [[1, 4, 7][int(rng.integers(3))]]
    counts = np.bincount([learner.ask(1, allowed=mask)[0] for _ in range(3000)], minlength=10)
    assert counts[mask].min() > 900 and counts[~mask].sum() == 0


# ------------------------------------------------------------------------------ nonadaptive
def test_non_adaptive_keeps_one_pull_per_pass():
    """The first allowed arm still due is swapped to the pass's position: each arm once per pass."""
    n = 9
    learner = NonAdaptive(0.01).start(n, seed=3)
    rng = np.random.default_rng(4)
    for _ in range(5):
        assert learner.next_ == 0
        pulled = []
        for _ in range(n):
            due = learner.order_[learner.next_:].copy()
            mask = rng.random(n) < 0.4
            mask[due[int(rng.integers(len(due)))]] = True  # some arm still due is allowed
            first = next(a for a in due if mask[a])
            got = learner.ask(1, allowed=mask)
            assert got == [int(first)]
            pulled += got
            learner.tell(got[0], 0.5)
        assert sorted(pulled) == list(range(n))
    assert (learner.counts_ == 5).all()


def test_non_adaptive_extra_pull_when_no_arm_still_due_is_allowed():
    n = 6
    learner = NonAdaptive(0.01).start(n, seed=3)
    for _ in range(4):
        learner.tell(learner.ask(1)[0], 0.5)
    order, nxt = learner.order_.copy(), learner.next_
    done_arms = order[:nxt]
    mask = np.zeros(n, dtype=bool)
    mask[done_arms[1:]] = True  # only arms already pulled in this pass
    got = learner.ask(1, allowed=mask)  # each pulled once: the fewest, ties to the lower index
    assert got == [int(min(done_arms[1:]))]
    assert learner.next_ == nxt and (learner.order_ == order).all()  # the pass is unchanged
    learner.tell(got[0], 0.5)
    assert learner.ask(1, allowed=mask) == [int(sorted(done_arms[1:])[1])]  # fewest pulls now


# ------------------------------------------------------------------------------ fixed-budget rounds
@pytest.mark.parametrize("cls", FIXED_BUDGET)
def test_round_serves_its_next_allowed_pull(cls):
    n = 8
    learner = cls(k=2, budget=800).start(n, seed=1)
    rng = np.random.default_rng(2)
    for _ in range(60):
        m, p = learner.m_, learner.ptr_
        order = learner.order_[:m]
        mask = rng.random(n) < 0.5
        ok = [j for j in list(range(p, m)) + list(range(p)) if learner.todo_[order[j]] > 0 and mask[order[j]]]
        if not ok or learner.left_ == 0:
            continue
        todo, left = learner.todo_.copy(), learner.left_
        got = learner.ask(1, allowed=mask)
        assert got == [int(order[ok[0]])]
        assert learner.todo_[got[0]] == todo[got[0]] - 1 and learner.left_ == left - 1
        assert learner.ptr_ == (ok[0] + 1) % m and learner.extra_ == 0
        learner.tell(got[0], 0.5)


@pytest.mark.parametrize("cls", FIXED_BUDGET)
def test_round_extra_pull_is_off_schedule(cls):
    """No remaining pull of the round allowed: an extra pull of the allowed active arm with the fewest pulls,
    not charged to the schedule, not waited for, dropped (not re-issued) when cancelled."""
    n = 8
    learner = cls(k=2, budget=800).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(3)
    while learner.left_ > 3:  # hand out the round but for its last three pulls, answer them
        arm = learner.ask(1)[0]
        learner.tell(arm, stream.draw(arm))
    due = np.flatnonzero(learner.todo_ > 0)
    mask = (learner.status_ == ACTIVE)
    mask[due] = False
    assert mask.any()
    planned, left, out, rnd = learner.planned_, learner.left_, learner.out_, learner.round_
    N = learner.counts_ + learner.pending_
    want = int(np.flatnonzero(mask)[np.argmin(N[mask])])
    got = learner.ask(1, allowed=mask)
    assert got == [want]
    assert (learner.planned_, learner.left_, learner.out_) == (planned, left, out)
    assert learner.extra_ == 1 and learner.extra_out_[want] == 1
    learner.cancel(want)  # dropped: not put back into the round
    assert learner.extra_ == 0 and learner.extra_out_.sum() == 0 and learner.left_ == left
    extra = learner.ask(1, allowed=mask)[0]
    # the round's own pulls, answered: the round closes with the extra still out
    while learner.round_ == rnd and not learner.done:
        arm = learner.ask(1)[0]
        learner.tell(arm, stream.draw(arm))
    assert learner.pending_[extra] == 1 and learner.extra_out_[extra] == 1
    learner.tell(extra, stream.draw(extra))  # recorded; the new round's accounting is untouched
    if not learner.done:
        assert learner.extra_out_[extra] == 0 and learner.out_ == int(learner.pending_.sum())
    assert learner.planned_ <= learner.budget


@pytest.mark.parametrize("cls", [c for c in FIXED_BUDGET if c is not UniformAllocation])  # UNI: one round
def test_round_extra_goes_to_an_inactive_arm_only_when_no_active_arm_is_allowed(cls):
    n = 8
    learner = cls(k=2, budget=800).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(3)
    while learner.round_ == 1 and not learner.done:
        arm = learner.ask(1)[0]
        learner.tell(arm, stream.draw(arm))
    inactive = np.flatnonzero(learner.status_ != ACTIVE)
    assert not learner.done and inactive.size > 0
    rec = learner.recommend()
    got = learner.ask(1, allowed=inactive)
    assert got[0] in inactive and learner.extra_ == 1
    learner.tell(got[0], 1.0)  # a decided arm's answer: recorded, no decision changes
    assert learner.counts_[got[0]] >= 1 and sorted(learner.recommend()) == sorted(rec)


@pytest.mark.parametrize("cls", FIXED_BUDGET)
def test_round_restricted_run_keeps_the_schedule_budget(cls):
    """Random half masks, concurrent answers and cancels: the schedule's pulls within the budget, extras on top."""
    n, budget = 8, 700
    learner = cls(k=2, budget=budget).start(n, seed=5)
    stream = Bernoulli(_means(n)).stream(6)
    rng = np.random.default_rng(7)
    out: list[int] = []
    while not learner.done:
        mask = rng.random(n) < 0.5
        if not mask.any():
            mask[0] = True
        got = learner.ask(int(rng.integers(1, 4)), allowed=mask)
        out += got
        assert out, "[] with nothing out"
        rng.shuffle(out)
        for arm in out[: int(rng.integers(1, len(out) + 1))]:
            out.remove(arm)
            if rng.random() < 0.1:
                learner.cancel(arm)
            else:
                learner.tell(arm, stream.draw(arm))
    for arm in out:
        learner.tell(arm, stream.draw(arm))
    assert learner.planned_ <= budget
    assert learner.extra_ > 0
    assert learner.n_pulls <= learner.planned_ + learner.extra_
    assert len(learner.recommend()) == 2


def test_round_state_without_extras_loads():
    """A state saved before restricted asks existed (no extra_out_ / extra_) loads with no extras."""
    learner = SequentialHalving(k=1, budget=400).start(6, seed=1)
    state = learner.state_dict()
    del state["state"]["extra_out_"], state["state"]["extra_"]
    back = SequentialHalving(k=1, budget=400).load_state_dict(state)
    assert back.extra_ == 0 and back.extra_out_.tolist() == [0] * 6
    assert back.state_json() == learner.state_json()


# ------------------------------------------------------------------------------ eliminations
def _stage_end(learner, stream, keep=2):
    while learner.left_ > keep:
        arm = learner.ask(1)[0]
        learner.tell(arm, stream.draw(arm))


def test_successive_elimination_extras_feed_its_rule():
    n = 6
    learner = SuccessiveElimination(0.1).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(2)
    _stage_end(learner, stream)
    due = np.flatnonzero(learner.need_ > 0)
    mask = np.ones(n, dtype=bool)
    mask[due] = False
    rem = learner.remaining_
    got = learner.ask(1, allowed=mask)
    assert got == [int(np.flatnonzero(mask)[0])] and learner.extra_ == 1  # all have one pull: the lowest index
    c = learner.counts_[got[0]]
    learner.tell(got[0], 1.0)
    assert learner.counts_[got[0]] == c + 1 and learner.remaining_ == rem  # data, not a scheduled answer


def test_median_elimination_extras_stay_out_of_the_round_means():
    n = 5
    learner = MedianElimination(0.1, epsilon=0.5).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(2)
    _stage_end(learner, stream)
    due = np.flatnonzero(learner.need_ > 0)
    mask = np.ones(n, dtype=bool)
    mask[due] = False
    arm = learner.ask(1, allowed=mask)[0]
    scnt, ssum, rem = learner.scnt_.copy(), learner.ssum_.copy(), learner.remaining_
    learner.tell(arm, 1.0)
    assert (learner.scnt_ == scnt).all() and (learner.ssum_ == ssum).all() and learner.remaining_ == rem
    assert learner.counts_[arm] == scnt[arm] + 1
    # a cancelled extra is not re-issued; a cancelled scheduled pull is
    arm = learner.ask(1, allowed=mask)[0]
    left = learner.left_
    learner.cancel(arm)
    assert learner.left_ == left and learner.extra_ == 1
    sched = learner.ask(1, allowed=due)[0]
    learner.cancel(sched)
    assert learner.left_ == left


def test_elimination_scheduled_answers_come_first():
    """With an extra and a scheduled pull of the same arm out, the first answer is the schedule's."""
    n = 5
    learner = MedianElimination(0.1, epsilon=0.5).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(2)
    _stage_end(learner, stream, keep=1)
    last = int(np.flatnonzero(learner.need_ > 0)[0])
    other = (last + 1) % n
    extra = learner.ask(1, allowed=[other])  # the schedule wants `last` only: an extra of `other`...
    assert extra == [other] and learner.extra_out_[other] == 1
    assert learner.ask(1, allowed=[last]) == [last]
    rem = learner.remaining_
    stage = learner.l_
    learner.tell(other, 0.0)  # ...an extra: recorded only
    assert learner.remaining_ == rem and learner.l_ == stage
    learner.tell(last, 1.0)  # the stage's last scheduled answer closes it
    assert learner.l_ == stage + 1 or learner.done


def test_exp_gap_extra_of_an_eliminated_arm_feeds_ls_only():
    n = 5
    learner = ExpGapElimination(0.1).start(n, seed=1)
    stream = Bernoulli(_means(n)).stream(2)
    _stage_end(learner, stream)
    due = np.flatnonzero(learner.need_ > 0)
    mask = np.ones(n, dtype=bool)
    mask[due] = False
    got = learner.ask(1, allowed=mask)
    assert got[0] in learner.act_[: learner.n_act_] and learner.extra_ == 1
    t = learner.n_pulls
    learner.tell(got[0], 1.0)
    assert learner.n_pulls == t + 1 and learner.extra_out_.sum() == 0
