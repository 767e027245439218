"""The incremental ask/tell paths make the O(n) reference rules' decisions, bit for bit.

Each learner runs twice on the same scripted events: once as shipped (incremental workspace:
``purebandits.algorithms._lucb_incremental`` for the LUCB family, ``_top_two_incremental`` for
top-two) and once with ``_incremental = False`` (every ask and every stop test through the O(n)
rule the learners used before: :func:`family_select`, :func:`top_two_pick` and
:func:`glr_statistic_s`). The
events are those the service produces: asks of one to three arms, answers out of order, cancels,
answers with a NumPy arm or an ``int`` reward (the checked path), ``state_dict`` / JSON / load
round trips and pickling in the middle of a run, answers after the stop. Instances have tied
means (rounded Bernoulli means) and k > 1.
"""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

from purebandits.algorithms._lucb_incremental import inc_note, inc_pair
from purebandits.algorithms.lucb import KLRandLUCB, LilKLUCB, LilLUCB, LilRandLUCB, LUCBPlusPlus
from purebandits.algorithms.top_two import TopTwo
from purebandits.base import Learner
from purebandits.instances.rewards import Bernoulli, Categorical
from purebandits.simulate.engine import _advance_reference

CONFIGS = [
    (KLRandLUCB, {"form": "simplified"}),
    (KLRandLUCB, {}),
    (KLRandLUCB, {"k": 3, "form": "simplified"}),
    (LilKLUCB, {}),
    (LilKLUCB, {"form": "simplified", "k": 2}),
    (LilKLUCB, {"bound": "sg1"}),
    (LilKLUCB, {"bound": "sg2", "delta": 0.05}),
    (LUCBPlusPlus, {"k": 2}),
    (LUCBPlusPlus, {"preset": "faithful", "plus2": False}),
    (LilRandLUCB, {}),
    (LilRandLUCB, {"k": 3, "preset": "faithful"}),
    (LilLUCB, {"k": 2}),
    (TopTwo, {}),
    (TopTwo, {"delta": 0.3, "beta": 0.3, "threshold": "theory"}),
    (TopTwo, {"cost": "bernoulli", "delta": 0.2}),
    (TopTwo, {"leader": "ts", "delta": 0.2}),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for c, p in CONFIGS]
LUCB_CONFIGS = [(c, p) for c, p in CONFIGS if c is not TopTwo]
LUCB_IDS = [i for (c, _), i in zip(CONFIGS, IDS, strict=True) if c is not TopTwo]


def _reference(learner: Learner) -> Learner:
    learner._incremental = False
    learner._inc = None
    return learner


def _reload(learner: Learner, reference: bool) -> Learner:
    """A new learner from ``learner``'s state through JSON, as the service's snapshots do."""
    fresh = type(learner)(**learner.get_params()).load_state_dict(json.loads(learner.state_json()))
    return _reference(fresh) if reference else fresh


def _script(cls: type, params: dict, n: int, seed: int, steps: int, reference: bool) -> list:
    """Run scripted concurrent events; return everything observable (asks, stop, state) along the way."""
    rng = np.random.default_rng(seed)
    means = np.round(rng.uniform(0.1, 0.9, n), 1)  # ties between arms
    learner = cls(**params).start(n, seed=seed)
    if reference:
        _reference(learner)
    log: list = []
    pending: list[int] = []
    for step in range(steps):
        u = rng.random()
        if pending and (u < 0.5 or learner.done):
            arm = pending.pop(int(rng.integers(len(pending))))
            v = rng.random()
            if v < 0.12:
                learner.cancel(arm)
                log.append(("cancel", arm))
            else:
                r = float(rng.random() < means[arm])
                if v < 0.2:  # the checked path: a NumPy arm and an int reward
                    learner.tell(np.int64(arm), int(r))
                else:
                    learner.tell(arm, r)
                log.append(("tell", arm, r, learner.done))
        elif not learner.done:
            m = int(rng.integers(1, 4))
            arms = learner.ask(np.int64(m) if rng.random() < 0.1 else m)
            pending += arms
            log.append(("ask", arms))
        else:
            break
        if step % 151 == 75:
            learner = _reload(learner, reference)
        elif step % 151 == 140:
            learner = pickle.loads(pickle.dumps(learner)) if step % 2 else copy.deepcopy(learner)
        if step % 50 == 0:
            log.append(learner.state_json())
    log.append(learner.state_json())
    log.append(learner.stopping_progress().as_dict())
    return log


@pytest.mark.parametrize("cls,params", CONFIGS, ids=IDS)
@pytest.mark.parametrize("n", [2, 7, 40])
def test_concurrent_events_match_reference(cls, params, n):
    if params.get("k", 1) >= n:
        pytest.skip("k must be below n")
    for seed in range(3):
        new = _script(cls, params, n, seed, 1500, reference=False)
        ref = _script(cls, params, n, seed, 1500, reference=True)
        assert new == ref


def _sequential(cls: type, params: dict, model, seed: int, reference: bool, max_pulls: int) -> tuple:
    learner = cls(**params).start(model.n_arms, seed=seed)
    if reference:
        _reference(learner)
    stream = model.stream(seed)
    asked = []
    while not learner.done and learner.n_pulls < max_pulls:
        (arm,) = learner.ask(1)
        asked.append(arm)
        learner.tell(arm, stream.draw(arm))
        if learner.n_pulls == max_pulls // 2:
            learner = _reload(learner, reference)
    return asked, learner.state_json()


@pytest.mark.parametrize("cls,params", CONFIGS, ids=IDS)
def test_sequential_runs_match_reference_and_kernel(cls, params):
    """ask(1)/tell until the stop (or a cap): the same arms as the reference rule, and the state the kernel leaves."""
    n = 25
    probs = np.tile([[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.3, 0.5]], (9, 1))[:n]
    model = Categorical(probs)  # graded answers, three groups of tied arms
    for seed in range(2):
        new = _sequential(cls, params, model, seed, False, 4000)
        assert new == _sequential(cls, params, model, seed, True, 4000)
        kernel = cls(**params).start(n, seed=seed)
        stream = model.stream(seed)
        _advance_reference(kernel, stream, 2000)  # the incremental path, then the kernel from its state
        kernel.run_compiled(stream, 4000)
        if kernel.n_pulls < 4000 and not kernel.done:
            pytest.fail("the kernel stopped early")
        ref = cls(**params).start(n, seed=seed)
        ref.run_compiled(model.stream(seed), 4000)
        assert kernel.state_json() == ref.state_json()


def test_workspace_is_not_state():
    """The workspace never reaches state_dict, survives no reload, and keeps working after run_compiled."""
    n = 30
    model = Bernoulli(np.linspace(0.8, 0.2, n))
    learner = KLRandLUCB(form="simplified").start(n, seed=1)
    stream = model.stream(1)
    _advance_reference(learner, stream, 500)
    assert learner._inc is not None
    before = learner.state_json()
    assert "_inc" not in before and json.loads(before)["state"].keys() == learner.state_dict()["state"].keys()
    fresh = _reload(learner, reference=False)
    assert fresh._inc is None and fresh.state_json() == before
    learner.run_compiled(stream, 800)
    assert learner._inc is None
    twin = _reload(learner, reference=True)
    for _ in range(300):
        if learner.done:
            break
        a, b = learner.ask(2), twin.ask(2)
        assert a == b
        for arm in a:
            r = stream.draw(arm)
            learner.tell(arm, r)
            twin.tell(arm, r)
        assert learner.state_json() == twin.state_json()


def test_direct_state_writes_before_first_ask():
    """Writing the arrays before the first ask (as test_rand_lucb_pull_probabilities does) is seen."""
    learner = KLRandLUCB(form="simplified").start(4, seed=0)
    twin = _reference(KLRandLUCB(form="simplified").start(4, seed=0))
    for lr in (learner, twin):
        lr.counts_[:] = [30, 10, 500, 500]
        lr.sums_[:] = lr.counts_ * np.array([0.6, 0.5, 0.0, 0.0])
        lr.t_ = int(lr.counts_.sum())
    for _ in range(200):
        a = learner.ask(1)
        assert a == twin.ask(1)
        learner.cancel(a[0])
        twin.cancel(a[0])
    assert learner.state_json() == twin.state_json()


@pytest.mark.parametrize("cls,params", LUCB_CONFIGS, ids=LUCB_IDS)
def test_sampling_pair_under_pending_pulls(cls, params):
    """The workspace's (h, l) equals family_select's on answered + pending counts, as pending pulls come and go."""
    n = 30
    rng = np.random.default_rng(5)
    for _ in range(4):
        learner = cls(**params).start(n, seed=0)
        counts = rng.integers(1, 40, n)
        counts[rng.permutation(n)[:8]] = 12  # equal counts ...
        learner.counts_[:] = counts
        learner.sums_[:] = np.round(counts * np.round(rng.uniform(0.1, 0.9, n), 1))  # ... and tied means
        learner.sums_[:] = np.minimum(learner.sums_, counts)
        learner.pending_[:] = rng.integers(0, 3, n)
        code, bp, k, _, c, s, _, p, fw, iw, top = learner._inc_state()[:11]
        for _ in range(150):
            arm = int(rng.integers(n))
            delta = 1 if learner.pending_[arm] == 0 or rng.random() < 0.5 else -1
            inc_note(c, p, fw, iw, arm, delta)
            assert tuple(inc_pair(code, bp, k, c, s, p, fw, iw, top)) == learner._select(c + p)
