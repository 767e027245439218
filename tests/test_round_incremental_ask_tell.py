"""LUCB1 and KL-LUCB's incremental ask/tell path makes the O(n) reference rule's decisions, bit for bit.

:mod:`purebandits.algorithms.kernels.lucb_round_asktell` replaces :func:`family_select` (an O(n) pass over
bounds that move with the round) by window keys over classes of equal arms, with a stop set on
answered counts and a sampling set on answered + pending counts. Each learner runs twice on the
same scripted events, once as shipped and once with ``_incremental = False`` (every ask and every
stop test through :func:`family_select`), and the asks and the whole state must agree after every
event: asks of one to three arms and bursts of many (so that many answers fall in one round),
answers out of order (some with a NumPy arm or a NumPy reward: the checked path), cancels,
JSON / pickle / deepcopy round trips, answers after the stop. Rewards: Bernoulli arms with tied
means, 1-sparse Bernoulli arms (all but k arms always answer 0, so whole classes tie at every
round) and graded 0 / 0.5 / 1 answers from a few vote profiles, as in the contests; k = 1 and
k > 1; the pair rule of LUCB1 and KL-LUCB and, through test subclasses, the randomised rule.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import pickle

import numpy as np
import pytest

from purebandits.algorithms import lucb as lucb_mod
from purebandits.algorithms.kernels import lucb_round_asktell as rat
from purebandits.algorithms.kernels import lucb_round_incremental as ri
from purebandits.algorithms.kernels.arm_classes import check_classes
from purebandits.algorithms.kernels.lucb_round_asktell import rat_note, rat_pair, rat_stop, rat_told
from purebandits.algorithms.kernels.lucb_rules import RULE_RANDOM, stop_test
from purebandits.algorithms.lucb import KLLUCB, LUCB1
from purebandits.instances.rewards import Categorical
from purebandits.testing.state import assert_same_state


class RandomLUCB1(LUCB1):
    """LUCB1's bounds with lil'RandLUCB's randomised rule and non-strict stop (not a shipped learner: it
    exercises the workspace's random branch)."""

    _rule = RULE_RANDOM
    _strict = False


class RandomKLLUCB(KLLUCB):
    """KL-LUCB's bounds with the randomised rule."""

    _rule = RULE_RANDOM


CONFIGS = [
    (LUCB1, {}),
    (LUCB1, {"k": 2}),
    (LUCB1, {"k": 3, "epsilon": 0.05, "sigma": 1.0}),
    (KLLUCB, {}),
    (KLLUCB, {"k": 2}),
    (KLLUCB, {"k": 3, "alpha": 2.0, "epsilon": 0.02}),
    (RandomLUCB1, {}),
    (RandomKLLUCB, {"k": 2}),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for c, p in CONFIGS]
REWARDS = ["ties", "one_sparse", "graded"]
#: vote profiles over (0, 1/2, 1): few of them, so many arms share their answers
PROFILES = np.array([[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.3, 0.5], [0.8, 0.15, 0.05]])


def _reference(learner):
    learner._incremental = False
    learner._inc = None
    learner._rinc = None
    return learner


def _sampler(kind: str, n: int, k: int, rng: np.random.Generator):
    """A function arm -> reward for the instance ``kind``."""
    if kind == "ties":
        means = np.round(rng.uniform(0.1, 0.9, n), 1)
        return lambda arm: float(rng.random() < means[arm])
    if kind == "one_sparse":
        means = np.r_[np.full(k, 0.6), np.zeros(n - k)]
        return lambda arm: float(rng.random() < means[arm])
    probs = PROFILES[rng.integers(0, len(PROFILES), n)]
    cdf = np.cumsum(probs, axis=1)
    return lambda arm: float(np.searchsorted(cdf[arm], rng.random(), side="right")) / 2.0


def _copy(learner, how: int):
    """The learner through JSON (as the service's snapshots), pickle, or deepcopy."""
    if how == 0:
        return type(learner)(**learner.get_params()).load_state_dict(json.loads(learner.state_json()))
    if how == 1:
        return pickle.loads(pickle.dumps(learner))
    return copy.deepcopy(learner)


def _lockstep(cls, params: dict, n: int, kind: str, seed: int, steps: int, also_at: int = -1) -> dict | tuple:
    """Drive the incremental learner and the reference with the same events, comparing after every one.

    With ``also_at``, also what a run of ``also_at`` steps returns: (that, this run's); the events do not depend
    on ``steps``, so such a run is this run's first ``also_at`` steps, and its end checks are made there.
    """
    rng = np.random.default_rng(seed)
    k = params.get("k", 1)
    draw = _sampler(kind, n, k, rng)
    fast = cls(**params).start(n, seed=seed)
    ref = _reference(cls(**params).start(n, seed=seed))
    out: list[int] = []
    seen = {"workspace": 0, "live": 0, "stopped": False, "pending_pairs": 0}
    early = None
    for step in range(steps):
        if step == also_at:
            early = _end_of_run(seen, fast, ref)
        u = rng.random()
        if ref.done and not out:
            break
        seen["live"] += not ref.done
        if (u < 0.45 and not ref.done) or not out:
            m = int(rng.integers(1, 4)) if rng.random() > 0.02 else int(rng.integers(n, 3 * n))
            a = fast.ask(np.int64(m) if rng.random() < 0.1 else m)
            b = ref.ask(m)
            assert a == b, (step, a, b)
            seen["pending_pairs"] += int(ref.pending_.sum()) > len(a)
            out += a
        elif u < 0.93 or rng.random() < 0.2:
            # one answer, out of order; now and then every outstanding pull at once (many answers in one round)
            for _ in range(len(out) if rng.random() < 0.03 else 1):
                arm = out.pop(int(rng.integers(len(out))))
                r = draw(arm)
                if rng.random() < 0.1:
                    fast.tell(np.int64(arm), np.float64(r))  # the checked path
                else:
                    fast.tell(arm, r)
                ref.tell(arm, r)
                assert fast.done == ref.done, step
        else:
            arm = out.pop(int(rng.integers(len(out))))
            fast.cancel(arm)
            ref.cancel(arm)
        seen["workspace"] += fast._rinc is not None and not fast.done
        if fast._rinc is not None:
            _check_classes(fast)
            if step % 10 == 0:
                _check_keys(fast)
        assert fast.done == ref.done, step
        assert_same_state(fast, ref, step)
        if step % 97 == 50:
            twin = _copy(fast, step % 3)
            assert_same_state(twin, fast)
            progress = ref.stopping_progress()
            assert fast.stopping_progress() == progress and copy.deepcopy(fast).stopping_progress() == progress
            arms = rng.integers(0, n, 5)
            for x, y in zip(fast.intervals_of(arms), ref.intervals_of(arms), strict=True):
                assert np.array_equal(x, y)
            if step % 2:
                fast = twin  # go on with the copy (its workspace is rebuilt on first use)
    final = _end_of_run(seen, fast, ref)
    return final if also_at < 0 else (final if early is None else early, final)


def _end_of_run(seen: dict, fast, ref) -> dict:
    """The last checks of a lockstep run (stopping_progress reads the state only) and what it returns."""
    assert fast.stopping_progress() == ref.stopping_progress()
    return {**seen, "stopped": ref.done}


@functools.cache
def _stop_run(config: int, seed: int) -> tuple[dict, dict]:
    """test_runs_reach_the_stop's run of CONFIGS[config] (n = 7, 1-sparse, 4,000 steps) and its first 1,500 steps,
    which are test_concurrent_events_match_reference's run of the same case and seed: made once for both tests
    (in one process; a failure is not cached, so both tests fail)."""
    cls, params = CONFIGS[config]
    return _lockstep(cls, params, 7, "one_sparse", seed, 4000, also_at=1500)


@pytest.mark.slow  # long event streams, the state compared with the reference after each
@pytest.mark.parametrize("cls,params", CONFIGS, ids=IDS)
@pytest.mark.parametrize("kind", REWARDS)
@pytest.mark.parametrize("n", [2, 7, 40])
def test_concurrent_events_match_reference(cls, params, kind, n):
    if params.get("k", 1) >= n:
        pytest.skip("k must be below n")
    seen = []
    for seed in range(3):
        if n == 7 and kind == "one_sparse":  # the first steps of test_runs_reach_the_stop's runs (same events)
            seen.append(_stop_run(CONFIGS.index((cls, params)), seed)[0])
        else:
            seen.append(_lockstep(cls, params, n, kind, seed, 1500))
    # the incremental path was in use, and sampling with pending pulls was exercised
    live = sum(s["live"] for s in seen)
    assert sum(s["workspace"] for s in seen) > 0.8 * live
    assert live < 300 or sum(s["pending_pairs"] for s in seen) > 10


@pytest.mark.slow  # whole runs to the stop
def test_runs_reach_the_stop():
    """Some scripted runs stop (the stop test fires at the same answer as the reference's)."""
    stopped = 0
    for config in range(len(CONFIGS)):
        for seed in range(4):
            stopped += _stop_run(config, seed)[1]["stopped"]
    assert stopped >= 8


@pytest.mark.parametrize("cls,params", CONFIGS, ids=IDS)
def test_pairs_and_stop_tests_as_the_state_moves(cls, params):
    """The workspace's sampling pair and stop test equal family_select's at every step, on states full of
    ties with pending pulls coming and going, answers changing means and sides, and the round index
    moving by 0 to 3 rounds or jumping by thousands (new key windows)."""
    rng = np.random.default_rng(5)
    n = 60
    for trial in range(4):
        lr = cls(**params).start(n, seed=trial)
        counts = rng.choice([1, 2, 3, 5, 8, 40, 1000], n)
        counts[rng.permutation(n)[:15]] = 12  # equal counts ...
        lr.counts_[:] = counts
        lr.sums_[:] = np.round(counts * rng.choice([0.0, 0.25, 0.5, 1.0], n))  # ... and tied means
        lr.sums_[:] = np.minimum(lr.sums_, counts)
        lr.pending_[:] = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), 0)
        lr.rounds_ = int(rng.integers(0, 5000))
        lr.t_ = int(counts.sum())
        ws = lr._rinc_state()
        assert ws is not None
        c, s, _, p, IW, FW, top = ws[:7]
        for step in range(400):
            arm = int(rng.integers(n))
            u = rng.random()
            if u < 0.4:
                rat_note(c, p, IW, FW, arm, 1 if p[arm] == 0 or rng.random() < 0.5 else -1)
            elif u < 0.7 and p[arm] > 0:  # an answer
                p[arm] -= 1
                c[arm] += 1
                s[arm] += rng.choice([0.0, 0.5, 1.0])
                rat_told(c, s, p, IW, FW, top, arm)
            v = rng.random()
            lr.rounds_ += int(rng.integers(0, 4)) if v < 0.97 else int(rng.integers(1000, 100_000))
            assert tuple(rat_pair(c, s, p, IW, FW, top, lr.rounds_)) == lr._select(c + p), (trial, step)
            pair = lr._select(c)
            want = stop_test(lr._lcb[pair[0]], lr._ucb[pair[1]], lr._eps, lr._strict)
            assert rat_stop(c, s, p, IW, FW, top, lr.rounds_) == int(want), (trial, step)


#: the workspace's views for _sets and _check_classes, by workspace (the tuple is kept, so its id is not reused)
_VIEWS: dict[int, tuple] = {}


def _views(learner) -> tuple:
    """Views into ``learner``'s workspace (IW, FW) and their offsets: they depend only on the workspace's arrays and
    its n, so they are made once per workspace instead of at every check."""
    rinc = learner._rinc
    IW, FW = rinc[4], rinc[5]
    hit = _VIEWS.get(id(rinc))
    if hit is not None and hit[0] is rinc and hit[1] == int(IW[rat._N]):
        return hit
    n = int(IW[rat._N])
    size, ne, w = rat._sizes(n)
    o = rat._HI + 2 * ri._N_IW * w
    iw = IW[rat._HI:o].reshape(2, ri._N_IW, w)
    fw = FW[rat._HF:rat._HF + 2 * ri._N_FW * w].reshape(2, ri._N_FW, w)
    sc = o + 2 * size + 2 * ne
    o2 = sc + 4 + 4 * n + w  # past the counts of free classes, the top-K heaps and zharm
    f = rat._HF + 2 * ri._N_FW * w
    views = (rinc, n, iw, fw, sc, IW[o:o + size], IW[o + size:o + 2 * size], IW[o2 + n:o2 + 2 * n],
             IW[o2 + 2 * n:o2 + 3 * n], FW[f:f + n].view(np.int64), iw[0][ri._CLS, :n])
    if len(_VIEWS) > 64:
        _VIEWS.clear()
    _VIEWS[id(rinc)] = views
    return views


def _sets(learner):
    """The workspace's two class sets as NumPy views: [(iw, fw, exact-list length, epoch)], stop then sampling."""
    IW = learner._rinc[4]
    _, _, iw, fw, sc = _views(learner)[:5]
    return [(iw[0], fw[0], int(IW[sc + 1]), int(IW[rat._EPO_S])), (iw[1], fw[1], int(IW[sc + 3]), int(IW[rat._EPO_P]))]


def _check_classes(learner) -> None:
    """Both class sets are consistent (once built); every arm is in a stop class by its mean, answered count and
    side, and every sampling class member not marked stale by its mean, answered + pending count and side."""
    IW, top = learner._rinc[4], learner._rinc[6]
    if IW[rat._BUILT] == 0:
        return
    _, n, iw, _, sc, tab_s, tab_p, vc, dflag, mbits, cls_s = _views(learner)
    sides = np.where(top, ri._LOWER, ri._UPPER)
    check_classes(iw[0], ri._ROWS, tab_s, IW[sc], n, mbits, learner._rinc[0], sides)
    assert (cls_s >= 0).all()
    check_classes(iw[1], ri._ROWS, tab_p, IW[sc + 2], n, mbits, vc, sides, dflag == 0)


def _check_keys(learner) -> None:
    """Every class's representative is keyed by its exact bound if made exact in the set's round, else by its
    window key; other members are out of the heap (so no exact value of an earlier round is left as a key)."""
    # the rows as Python lists (the same values, and the same indexing, negative indices included): the walk below
    # reads them element by element, which NumPy scalar indexing made the slowest part of these tests
    for iw, fw, _, epoch in _sets(learner):
        live = np.flatnonzero(iw[ri._CSIZE, :-1] > 0).tolist()
        if not live:
            continue
        sides, heads, exeps, nxt = (iw[r].tolist() for r in (ri._CSIDE, ri._CHEAD, ri._CEXEP, ri._NXT))
        upper = (fw[ri._UKEY].tolist(), iw[ri._UWHERE].tolist())
        lower = (fw[ri._LKEY].tolist(), iw[ri._LWHERE].tolist())
        cexv, cukey = fw[ri._CEXV].tolist(), fw[ri._CUKEY].tolist()
        for c in live:
            side = sides[c]
            keys, where = upper if side == ri._UPPER else lower
            rep = heads[c]
            key = keys[where[rep]]
            if exeps[c] == epoch:
                exact = cexv[c]
                assert key == (exact if side == ri._UPPER else -exact), c
            else:
                assert key == cukey[c], c
            arm = nxt[rep]
            while arm >= 0:
                assert keys[where[arm]] == -np.inf
                arm = nxt[arm]


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_many_answers_in_one_round(cls):
    """Late in a run (key windows hundreds of rounds long) bursts of asks are answered in one round: the list of
    classes made exact that round fills past its flush point and must be emptied without losing a window key."""
    n = 12
    listed = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        fast, ref = cls(k=2).start(n, seed=seed), _reference(cls(k=2).start(n, seed=seed))
        counts = rng.integers(20, 60, n)
        sums = np.round(counts * rng.choice([0.3, 0.4, 0.5], n) * 2) / 2
        for lr in (fast, ref):
            lr.counts_[:], lr.sums_[:], lr.t_ = counts, sums, int(counts.sum())
            lr.rounds_ = 200_000 + seed
        probs = PROFILES[rng.integers(0, 3, n)]
        out: list[int] = []
        for step in range(500):
            if ref.done:
                break
            if rng.random() < 0.3 or not out:
                m = int(rng.integers(1, 3 * n))
                a = fast.ask(m)
                assert a == ref.ask(m), (seed, step)
                out += a
            else:
                for _ in range(int(rng.integers(1, len(out) + 1))):
                    arm = out.pop(int(rng.integers(len(out))))
                    r = float(rng.choice([0.0, 0.5, 1.0], p=probs[arm]))
                    fast.tell(arm, r)
                    ref.tell(arm, r)
                    assert fast.done == ref.done
                    if fast._rinc is not None:
                        listed = max(listed, _sets(fast)[0][2])
                        _check_keys(fast)
            assert_same_state(fast, ref, (seed, step))
    assert listed > n + 32  # the flush point was passed


def _sequential(cls, params: dict, model, seed: int, reference: bool, max_pulls: int) -> tuple:
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
            learner = _copy(learner, 0)
            if reference:
                _reference(learner)
    return asked, learner.state_json()


@pytest.mark.parametrize("cls,params", CONFIGS[:6], ids=IDS[:6])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_sequential_runs_match_reference_and_kernel(cls, params):
    """ask(1)/tell until the stop (or a cap): the reference's arms, and the state the compiled driver leaves."""
    n = 25
    model = Categorical(np.tile(PROFILES[:3], (9, 1))[:n], (0.0, 0.5, 1.0))
    for seed in range(2):
        new = _sequential(cls, params, model, seed, False, 6000)
        assert new == _sequential(cls, params, model, seed, True, 6000)
        kernel = cls(**params).start(n, seed=seed)
        kernel.run_compiled(model.stream(seed), 6000)
        assert kernel.state_json() == new[1]


def test_workspace_is_not_state():
    """The workspace never reaches state_dict, pickles and copies drop it, and the O(n) rule stays reachable."""
    n = 30
    lr = KLLUCB(k=2).start(n, seed=1)
    rng = np.random.default_rng(0)
    for _ in range(400):
        for arm in lr.ask(2):
            lr.tell(arm, float(rng.random() < 0.5))
    assert lr._rinc is not None and lr._inc is None
    state = lr.state_dict()
    assert not any(key.startswith("_") for key in state["state"])
    assert copy.deepcopy(lr)._rinc is None and pickle.loads(pickle.dumps(lr))._rinc is None
    ref = _reference(copy.deepcopy(lr))
    for _ in range(50):
        a = ref.ask(1)
        assert ref._rinc is None and a == lr.ask(1)
        ref.cancel(a[0])
        lr.cancel(a[0])
    assert_same_state(ref, lr)
    # a level that is not positive at round 1 leaves the workspace out (the reference rule runs)
    small = LUCB1(k1=1e-9).start(4, seed=0)
    assert small.ask(3) == [0, 1, 2] and small._rinc is None


def _contest_run(cls, params: dict, reference: bool, events: int, n: int = 5000) -> tuple[str, bool, int]:
    """Service-style events on 5,000 arms with graded answers: a digest of every ask, the states along the way
    and the outcome."""
    rng = np.random.default_rng(11)
    probs = rng.dirichlet([0.6, 0.3, 0.3], n)
    probs[:4] = [0.05, 0.15, 0.8]  # a few clear leaders
    cdf = np.cumsum(probs, axis=1)
    lr = cls(**params).start(n, seed=3)
    if reference:
        _reference(lr)
    ev = np.random.default_rng(12)
    digest = hashlib.sha256()
    out: list[int] = []
    for step in range(events):
        if lr.done and not out:
            break
        u = ev.random()
        if (u < 0.5 and not lr.done) or not out:
            arms = lr.ask(int(ev.integers(1, 4)))
            out += arms
            digest.update(repr(arms).encode())
        elif u < 0.98:
            arm = out.pop(int(ev.integers(len(out))))
            lr.tell(arm, float(np.searchsorted(cdf[arm], ev.random(), side="right")) / 2.0)
        else:
            lr.cancel(out.pop(int(ev.integers(len(out)))))
        if step % 2000 == 0:
            digest.update(lr.state_json().encode())
    digest.update(lr.state_json().encode())
    return digest.hexdigest(), lr.done, lr.n_pulls


@pytest.mark.slow  # whole runs at contest scale
@pytest.mark.parametrize("cls,params,events", [(LUCB1, {}, 60_000), (LUCB1, {"k": 3}, 40_000),
                                               (KLLUCB, {}, 24_000)], ids=["LUCB1", "LUCB1-k3", "KLLUCB"])
def test_contest_scale_digest(cls, params, events, monkeypatch):
    """5,000 arms: the same asks, states and outcome as ``_incremental = False``, and no O(n) family_select."""
    ref = _contest_run(cls, params, True, events)

    def no_scan(*args):
        raise AssertionError("family_select called on the incremental path")

    monkeypatch.setattr(lucb_mod, "family_select", no_scan)
    new = _contest_run(cls, params, False, events)
    assert new == ref
    assert ref[2] > 10_000  # well past the initialisation (5,000 answers)
