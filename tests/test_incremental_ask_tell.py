"""The incremental ask/tell paths make the O(n) reference rules' decisions, bit for bit.

Each learner runs twice on the same scripted events: once as shipped (incremental workspace:
``purebandits.algorithms.kernels.lucb_incremental`` for the LUCB family, ``kernels.top_two_incremental`` for
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

from purebandits.algorithms.kernels.lucb_incremental import inc_note, inc_pair
from purebandits.algorithms.lucb import KLRandLUCB, LilKLUCB, LilLUCB, LilRandLUCB, LUCBPlusPlus
from purebandits.algorithms.top_two import TopTwo
from purebandits.base import Learner
from purebandits.instances.rewards import Bernoulli, Categorical
from purebandits.simulate.engine import _advance_reference
from purebandits.testing.state import assert_same_state

CONFIGS = [
    (KLRandLUCB, {"form": "simplified"}),
    (KLRandLUCB, {}),
    (KLRandLUCB, {"k": 3, "form": "simplified"}),
    (KLRandLUCB, {"form": "simplified", "stop": "kinf"}),
    (KLRandLUCB, {"k": 2, "stop": "kinf"}),
    (KLRandLUCB, {"form": "kt"}),
    (KLRandLUCB, {"k": 2, "form": "kt"}),
    (LilKLUCB, {"form": "kt"}),
    (KLRandLUCB, {"form": "kinf"}),
    (KLRandLUCB, {"k": 3, "form": "kinf"}),
    (LilKLUCB, {"form": "kinf", "k": 2}),
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
@pytest.mark.slow  # long runs of the kernel against its rules
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
@pytest.mark.slow  # long runs of the kernel against its rules
def test_sequential_runs_match_reference_and_kernel(cls, params):
    """ask(1)/tell until the stop (or a cap): the same arms as the reference rule, and the state the kernel leaves."""
    n = 25
    probs = np.tile([[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.3, 0.5]], (9, 1))[:n]
    model = Categorical(probs)  # graded answers, three groups of tied arms
    for seed in range(2):
        new = _sequential(cls, params, model, seed, False, 4000)
        assert new == _sequential(cls, params, model, seed, True, 4000)
        if params.get("stop") == "kinf":
            continue  # no compiled kernel with the K_inf stop (the ask/tell loop runs it)
        kernel = cls(**params).start(n, seed=seed)
        stream = model.stream(seed)
        _advance_reference(kernel, stream, 2000)  # the incremental path, then the kernel from its state
        kernel.run_compiled(stream, 4000)
        if kernel.n_pulls < 4000 and not kernel.done:
            pytest.fail("the kernel stopped early")
        ref = cls(**params).start(n, seed=seed)
        ref.run_compiled(model.stream(seed), 4000)
        assert_same_state(kernel, ref)


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
        assert_same_state(learner, twin)


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
    assert_same_state(learner, twin)


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
        code, bp, k, _, c, s, q, p, fw, iw, top = learner._inc_state()[:11]
        for _ in range(150):
            arm = int(rng.integers(n))
            delta = 1 if learner.pending_[arm] == 0 or rng.random() < 0.5 else -1
            inc_note(c, p, fw, iw, arm, delta)
            assert tuple(inc_pair(code, bp, k, c, s, q, p, fw, iw, top)) == learner._select(c + p)


# ------------------------------------------------------------------ top-two: challenger classes, Bernoulli bound, stop
def _tt_state(rng, n: int, nasty: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """counts, sums, pending with many equal (count, mean) pairs, some means equal to the largest and,
    with ``nasty``, means a few floats apart and near 0 and 1 (costs that may round to equal values)."""
    counts = rng.choice([1, 2, 3, 4, 5, 8, 13, 40, 1000], n).astype(np.int64)
    if nasty:
        base = rng.choice([0.3, 0.5, 1.0 - 2.0 ** -40, 2.0 ** -30, 0.999999999], n)
        mu = base - rng.integers(0, 4, n) * np.spacing(base)
        counts[rng.random(n) < 0.2] = 10 ** 12
    else:
        mu = np.round(rng.uniform(0.0, 1.0, n) * 4) / 4
        mu[rng.random(n) < 0.1] = mu.max()
    sums = mu * counts
    pending = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), 0).astype(np.int64)
    return counts, sums, pending


def _tt_reference_challenger(counts, sums, pending, gaussian: bool) -> tuple[int, int]:
    """(challenger, leader) of the O(n) rule (beta = 0: always the challenger)."""
    from purebandits.algorithms.top_two import top_two_pick

    arm, lead = top_two_pick(sums, counts, pending, False, gaussian, 0.5, 0.0, np.random.default_rng(0))
    return int(arm), int(lead)


@pytest.mark.parametrize("gaussian", [True, False], ids=["gaussian", "bernoulli"])
@pytest.mark.parametrize("nasty", [False, True], ids=["graded", "nasty"])
def test_top_two_challenger_matches_scan_as_the_state_moves(gaussian, nasty):
    """The class walk returns the reference's challenger (ties to the lower arm) while pending pulls come
    and go (classes split, merge, appear and vanish) and answers change means, on states full of ties."""
    from purebandits.algorithms.kernels import top_two_incremental as tti

    rng = np.random.default_rng(11 + nasty)
    for n in (3, 60, 700):
        counts, sums, pending = _tt_state(rng, n, nasty)
        fw, iw = tti.tt_new(counts, sums, pending)
        for step in range(300):
            arm = int(rng.integers(n))
            u = rng.random()
            before = int(counts[arm] + pending[arm])
            if u < 0.4:
                pending[arm] += 1
                tti.tt_note(counts, pending, fw, iw, arm, before)
            elif u < 0.6 and pending[arm] > 0 and before > 1:
                pending[arm] -= 1
                tti.tt_note(counts, pending, fw, iw, arm, before)
            elif pending[arm] > 0:  # an answer: the virtual count stays, the mean moves
                pending[arm] -= 1
                counts[arm] += 1
                sums[arm] += rng.choice([0.0, 0.5, 1.0]) if not nasty else sums[arm] / (counts[arm] - 1)
                tti.tt_told(counts, sums, pending, fw, iw, arm)
            want, lead = _tt_reference_challenger(counts, sums, pending, gaussian)
            assert int(iw[tti._TI, 1]) == lead
            got, w = tti.tt_challenger(counts, pending, fw, iw, lead, gaussian, 0.5)
            assert got == want, (n, step)
            if step % 50 == 0:  # the classes partition the arms by virtual count, in order
                seen = []
                r = iw[tti._SCAL, tti._HEAD]
                while r >= 0:
                    arms = iw[tti._AT, iw[tti._RLO, r]:iw[tti._RHI, r]]
                    assert len(arms) and set((counts + pending)[arms]) == {iw[tti._RN, r]}
                    seen += list(arms)
                    r = iw[tti._RNEXT, r]
                assert sorted(seen) == list(range(n)) and list(np.diff((counts + pending)[seen]) >= 0).count(False) == 0


def test_bern_lower_is_below_every_computed_cost_at_lower_means():
    """bern_lower(m_a, n_a, m, n_b) <= the computed Bernoulli cost at every mean <= m, including the
    neighbouring floats (where rounding could make a lower mean cost less) and extreme counts and means."""
    from purebandits.algorithms.kernels.top_two_incremental import bern_lower
    from purebandits.bounds import glr_pair_cost_s

    rng = np.random.default_rng(3)
    means = [0.0, 1e-300, 2.0 ** -30, 1e-9, 0.1, 1 / 3, 0.5, 0.7, 0.9, 1.0 - 1e-9, 1.0 - 2.0 ** -40, 1.0]
    counts = [1.0, 2.0, 7.0, 1000.0, 123456.0, 1e9, 1e13]
    checked = 0
    for _ in range(4000):
        ma = float(rng.choice(means)) if rng.random() < 0.5 else float(rng.random())
        m = float(rng.choice(means)) if rng.random() < 0.5 else float(rng.uniform(0.0, ma))
        na, nb = float(rng.choice(counts)), float(rng.choice(counts))
        low = bern_lower(ma, na, m, nb)
        assert low >= 0.0
        below = [m, *np.nextafter(m, -np.inf) - np.arange(4) * np.spacing(max(m, 1e-300)), m * (1 - 1e-12),
                 m * rng.random(), 0.0]
        for mj in below:
            assert low <= glr_pair_cost_s(ma, na, float(mj), nb, False, 0.5)
        checked += low > 0.0
    assert checked > 1000  # the bound is not vacuous
    # and tight enough to prune: relative slack far below one class's spread of costs
    w = glr_pair_cost_s(0.6, 20000.0, 0.3, 12.0, False, 0.5)
    assert 0.0 < w - bern_lower(0.6, 20000.0, 0.3, 12.0) < 1e-8 * w


@pytest.mark.parametrize("gaussian", [True, False], ids=["gaussian", "bernoulli"])
def test_top_two_stop_matches_glr_statistic(gaussian):
    """tt_stop's answer is the reference's ``Z > threshold`` with pending pulls and without, at thresholds
    on both sides of Z and at Z itself (hint, class walk, witness and full scan paths)."""
    from purebandits.algorithms.kernels import top_two_incremental as tti
    from purebandits.bounds import glr_statistic_s, glr_threshold_s

    rng = np.random.default_rng(5)
    for trial in range(150):
        n = int(rng.choice([2, 9, 80]))
        counts, sums, pending = _tt_state(rng, n, trial % 3 == 2)
        if trial % 2:
            pending[:] = 0
        fw, iw = tti.tt_new(counts, sums, pending)
        best, z = glr_statistic_s(sums, counts, gaussian, 0.5)
        for thr in (z, np.nextafter(z, -np.inf), np.nextafter(z, np.inf), z * 0.5, z * 2.0 + 1.0):
            if not np.isfinite(thr):
                continue
            # the threshold glr_threshold_s gives at this t, for the "theory" form with n = 2 and delta = 1:
            # log(2 t) = thr, so t = exp(thr) / 2
            if not 0.7 <= thr < 600:
                continue
            t = float(np.exp(thr) / 2.0)
            real = glr_threshold_s(t, 2.0, 1.0, True)
            got = tti.tt_stop(counts, sums, pending, fw, iw, gaussian, 0.5, t, 2.0, 1.0, True)
            assert got == (best if z > real else -1)


@pytest.mark.parametrize("params", [{}, {"cost": "bernoulli"}], ids=["gaussian", "bernoulli"])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_top_two_contest_scale_graded_answers_match_reference(params):
    """1,500 arms with graded answers (many arms share a count and a mean, as in the contests): the
    service's events (asks of 1-3, answers out of order, cancels) give the reference's asks and stop."""
    n = 1500
    rng = np.random.default_rng(2)
    probs = rng.dirichlet([0.6, 0.3, 0.3], n)
    probs[:3] = [0.2, 0.3, 0.5]  # a clear best arm, so that the run stops within the test
    model = Categorical(probs)
    runs = []
    for reference in (False, True):
        learner = TopTwo(delta=0.1, **params).start(n, seed=7)
        if reference:
            _reference(learner)
        stream = model.stream(7)
        ev = np.random.default_rng(9)
        pending: list[int] = []
        log = []
        for _ in range(40_000):
            if learner.done:
                break
            if pending and ev.random() < 0.5:
                arm = pending.pop(int(ev.integers(len(pending))))
                if ev.random() < 0.03:
                    learner.cancel(arm)
                else:
                    learner.tell(arm, stream.draw(arm))
            else:
                arms = learner.ask(int(ev.integers(1, 4)))
                pending += arms
                log.append(tuple(arms))
        runs.append((log, learner.done, learner.state_json()))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("gaussian", [True, False], ids=["gaussian", "bernoulli"])
def test_top_two_challenger_when_a_lower_mean_rounds_to_a_cost_as_low(gaussian):
    """Means a few floats apart can round to the same cost (Gaussian) or even to a lower one (Bernoulli):
    the arm with the lower mean, listed first, is then the reference's challenger and must be found
    although the class's best mean belongs to another arm."""
    from purebandits.algorithms.kernels import top_two_incremental as tti
    from purebandits.bounds import glr_pair_cost_s

    rng = np.random.default_rng(0)
    cases = 0
    while cases < 40:
        mb, nb, big = float(rng.uniform(0.5, 1.0)), int(rng.integers(1, 10**6)), int(rng.integers(1, 10**6))
        base = float(rng.uniform(0.0, mb))
        low = base - int(rng.integers(1, 4)) * float(np.spacing(base))
        if glr_pair_cost_s(mb, float(nb), low, float(big), gaussian, 0.5) > glr_pair_cost_s(
                mb, float(nb), base, float(big), gaussian, 0.5):
            continue
        cases += 1
        n = 12
        counts = np.ones(n, dtype=np.int64)  # one answer each: the mean is the sum, exactly
        sums = np.concatenate([[low, base, mb], rng.uniform(0.0, low, n - 3)])
        pending = np.full(n, big - 1, dtype=np.int64)
        pending[2] = nb - 1
        fw, iw = tti.tt_new(counts, sums, pending)
        want, lead = _tt_reference_challenger(counts, sums, pending, gaussian)
        assert lead == 2 and want == 0
        assert tti.tt_challenger(counts, pending, fw, iw, lead, gaussian, 0.5)[0] == want
