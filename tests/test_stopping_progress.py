"""Learner.stopping_progress: the learner's own stopping rule, measured on its state, agrees with done."""

from __future__ import annotations

import json

import numpy as np
import pytest

from purebandits.base import NOT_DONE_CAP, Learner, StoppingProgress
from purebandits.bounds import lil_stopping_arm, ls_delta
from purebandits.registry import all_learners
from purebandits.stopping import LS_EPSILON, ls_stop_arm
from purebandits.testing.checks import make_test_learner

#: a small Bernoulli instance every learner separates (top-2 gap 0.2)
MEANS = np.array([0.9, 0.7, 0.5, 0.3, 0.1])
#: pulls after which a run is cut (every learner that stops does so well before on MEANS)
CAP = 20_000
#: parameters that keep the runs short (Median Elimination's fixed schedule at epsilon = 0.19 is 150k pulls)
EXTRA = {"median_elimination": {"epsilon": 0.6}}
#: rules that fire only when the margin is > 0 (the others at >= 0)
STRICT = {"lucb1", "kl_lucb", "lil_lucb", "lucb_plus_plus", "lil_kl_ucb", "at_lucb", "top_two", "track_and_stop"}

LEARNERS = all_learners()


def _make(name: str, **params) -> Learner:
    cls = LEARNERS[name]
    kw = dict(EXTRA.get(name, {}))
    if cls.tags.get("top_k"):
        kw["k"] = 2
    kw.update(params)
    return make_test_learner(cls, **kw).start(len(MEANS), seed=3)


def _fires(name: str, margin: float) -> bool:
    return margin > 0 if name in STRICT else margin >= 0


def _check(name: str, learner: Learner, p: StoppingProgress | None, sequential: bool) -> None:
    assert isinstance(p, StoppingProgress), name
    assert 0.0 <= p.fraction <= 1.0
    assert (p.fraction == 1.0) == learner.done, (name, p)
    if not learner.done:
        assert p.fraction <= NOT_DONE_CAP
    assert isinstance(p.description, str) and p.description
    if p.reason is not None:
        assert p.margin is None and p.fraction == (1.0 if learner.done else 0.0)
        return
    if p.separated is not None:
        assert p.of is not None and 0 <= p.separated <= p.of
    if p.margin is None:
        return
    assert p.statistic is not None and p.threshold is not None
    assert p.margin == p.statistic - p.threshold
    if learner.done:
        assert _fires(name, p.margin), (name, p)
    elif sequential and not (name == "at_lucb" and learner.queue_):
        # the test ran on this very state after the last answer and did not fire (AT-LUCB tests
        # only between the two pulls of a pair)
        assert not _fires(name, p.margin), (name, learner.n_pulls, p)


def test_every_registered_learner_implements_it():
    for name, cls in LEARNERS.items():
        assert cls._stopping_progress is not Learner._stopping_progress, name


def test_base_class_default_is_none():
    class Bare(Learner):
        name = "bare"

        def _ask_one(self) -> int:
            return 0

    learner = Bare().start(3, seed=0)
    assert learner.stopping_progress() is None


@pytest.mark.parametrize("name", list(LEARNERS))
def test_progress_agrees_with_done_at_every_step(name):
    learner = _make(name)
    rng = np.random.default_rng(4)
    _check(name, learner, learner.stopping_progress(), True)
    fractions = []
    while not learner.done and learner.n_pulls < CAP:
        arms = learner.ask(1)
        assert arms, name
        for a in arms:
            learner.tell(a, float(rng.random() < MEANS[a]))
        p = learner.stopping_progress()
        _check(name, learner, p, True)
        fractions.append(p.fraction)
    if not LEARNERS[name].tags.get("never_stops"):
        assert learner.done and fractions[-1] == 1.0, (name, learner.n_pulls)
    assert len(set(fractions)) > 1 or LEARNERS[name].tags.get("never_stops"), name  # it moves


@pytest.mark.parametrize("name", list(LEARNERS))
def test_progress_with_pending_and_cancelled_pulls(name):
    """Batches of asks, answers in shuffled order, some cancelled: still fraction == 1 iff done."""
    learner = _make(name)
    rng = np.random.default_rng(7)
    for _ in range(400):
        if learner.done:
            break
        arms = learner.ask(3)
        rng.shuffle(arms)
        for a in arms:
            if rng.random() < 0.1:
                learner.cancel(a)
            else:
                learner.tell(a, float(rng.random() < MEANS[a]))
            _check(name, learner, learner.stopping_progress(), False)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_progress_changes_no_decision(name):
    """The same run with stopping_progress() after every answer asks the same arms and ends in the same state."""

    def run(probe: bool) -> tuple[list[int], str]:
        learner = _make(name)
        rng = np.random.default_rng(11)
        asked: list[int] = []
        while not learner.done and learner.n_pulls < 3000:
            arms = learner.ask(2)
            if not arms:
                break
            asked += arms
            for a in arms:
                learner.tell(a, float(rng.random() < MEANS[a]))
                if probe:
                    learner.stopping_progress()
        return asked, learner.state_json()

    assert run(True) == run(False)


def test_progress_of_never_stopping_learners_gives_a_reason():
    for name, params in (("random_sampling", {}), ("at_lucb", {"delta": None}),
                         ("thompson_sampling", {"delta": None, "budget": None})):
        p = _make(name, **params).stopping_progress()
        assert p.reason and p.fraction == 0.0 and p.margin is None, name


def test_ls_separation_matches_lil_stopping_arm():
    """The LS test every LS learner now calls decides as bounds.lil_stopping_arm (ties, unpulled arms too)."""
    rng = np.random.default_rng(0)
    d_ls = ls_delta(0.1, LS_EPSILON)
    fired = 0
    for trial in range(3000):
        n = int(rng.integers(2, 7))
        counts = rng.integers(0 if trial % 7 == 0 else 1, 400, size=n)
        means = rng.choice([0.1, 0.5, 0.9], size=n) if trial % 3 == 0 else rng.random(n)
        sums = np.round(means * counts)  # Bernoulli-like sums, with exact ties of the means
        want = lil_stopping_arm(sums, counts.astype(np.float64), d_ls, LS_EPSILON, 0.5)
        assert ls_stop_arm(sums, counts, d_ls, 0.5) == want, (trial, counts, sums)
        fired += want >= 0
    assert fired > 100


def test_lucb_progress_counts_the_arms_the_rule_separates():
    """For an LUCB learner, ``separated`` counts the other arms below the weakest top arm's bound."""
    learner = _make("lil_lucb")
    rng = np.random.default_rng(2)
    seen = set()
    while not learner.done:
        for a in learner.ask(1):
            learner.tell(a, float(rng.random() < MEANS[a]))
        p = learner.stopping_progress()
        lo, hi = learner.intervals()  # the same bounds on both sides
        top = set(learner.recommend())
        h_low = min(lo[a] for a in top)
        if (learner.counts_ > 0).all():
            assert p.separated == sum(1 for a in range(len(MEANS)) if a not in top and hi[a] < h_low)
            seen.add(p.separated)
    assert p.fraction == 1.0 and p.separated == p.of == 3
    assert len(seen) >= 2


def test_as_dict_is_json():
    p = _make("track_and_stop").stopping_progress()
    assert json.loads(json.dumps(p.as_dict()))["description"] == p.description


@pytest.mark.parametrize("name", ["top_two", "track_and_stop"])
@pytest.mark.parametrize("threshold", ["theory", "practical"])
def test_glr_learners_do_not_stop_on_a_cancel_before_any_answer(name, threshold):
    """beta(0, delta) = log 0 = -inf: the GLR test must not run before the first answer (a query the service
    cancels before anyone answered would otherwise stop the learner with no data)."""
    from purebandits.registry import get_learner_class

    cls = get_learner_class(name)
    learner = cls(delta=0.05, threshold=threshold)
    learner.start(4, seed=0)
    (arm,) = learner.ask(1)
    learner.cancel(arm)
    assert not learner.done
    assert learner.stopping_progress().fraction < 1.0
