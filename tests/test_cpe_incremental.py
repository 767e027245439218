"""CLUCB and lil'CLUCB on the top-K class: the incremental paths make the O(n) rule's decisions, bit for bit.

Two learners run in lockstep on the same events, one as shipped (the incremental workspace of
``purebandits.algorithms.kernels.cpe_incremental``), one with ``_incremental = False`` (every ask through
``cpe_pick`` on both ``topk_mask`` oracle calls, every stop test through ``cpe_stops``). After every
event the asks, M, M~ and ``state_json`` must be equal. The events are the service's: asks of one to
three arms, answers out of order, cancels, answers with a NumPy arm or an ``int`` reward (the checked
path), JSON reloads, pickling and deep copies in the middle of a run, answers after the stop.
Instances are tie-heavy: 1-sparse Bernoulli (all arms but one always answer 0, so they tie in mean
and, pull by pull, in count) and graded 0 / 0.5 / 1 answers from a few groups of equal arms; K = 1,
K > 1 and K above the selection's insertion limit, and K with fewer outside arms than K. The compiled
incremental kernel is compared with the reference kernel ``_cpe_topk_kernel`` on whole runs at
n = 1,000 (state digests), resumed at checkpoints, and with the incremental ask/tell loop.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle

import numpy as np
import pytest

from purebandits.algorithms import CLUCB, LilCLUCB, cpe
from purebandits.algorithms.kernels import cpe_incremental as ci
from purebandits.algorithms.kernels.arm_classes import check_classes
from purebandits.algorithms.kernels.cpe_incremental import _SMALL
from purebandits.base import Learner
from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian
from purebandits.simulate.engine import _advance_reference
from purebandits.testing.state import assert_same_state

CLASSES = [LilCLUCB, CLUCB]


@pytest.fixture(autouse=True)
def _incremental_kernel_at_every_k(monkeypatch):
    """The compiled driver takes the incremental kernel at every K here (it is what these tests compare);
    as shipped it leaves K above 16 and above n / INCREMENTAL_SHARE to the reference kernel (tested below)."""
    monkeypatch.setattr(cpe, "INCREMENTAL_SHARE", 0)


def _reference(learner: Learner) -> Learner:
    learner._incremental = False
    learner._inc = None
    return learner


def _reload(learner: Learner, reference: bool) -> Learner:
    """A new learner from ``learner``'s state through JSON, as the service's snapshots do."""
    fresh = type(learner)(**learner.get_params()).load_state_dict(json.loads(learner.state_json()))
    return _reference(fresh) if reference else fresh


def _sparse(n: int, best: float = 0.6) -> np.ndarray:
    means = np.zeros(n)
    means[n // 3] = best
    return means


def _graded(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 3) probabilities of 0 / 0.5 / 1 answers: three groups of identical arms."""
    groups = np.array([[0.6, 0.3, 0.1], [0.3, 0.4, 0.3], [0.1, 0.3, 0.6]])
    return groups[rng.integers(0, 3, n)]


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Exact equality of two arrays (same dtype, shape and values): the per-event checks below run some 300,000
    times, and ``np.testing.assert_array_equal`` costs ~28 us a call against ~0.5 us here (~9 s of this file)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same(fast: Learner, ref: Learner, where: object) -> None:
    assert_same_state(fast, ref, where)
    assert fast.done_ == ref.done_ and fast.final_ == ref.final_, where
    if ref._m is not None and fast._m is not None and not ref.done_:
        assert _equal(fast._m, ref._m), f"M at {where}: {fast._m} against {ref._m}"
        assert _equal(fast._mt, ref._mt), f"M~ at {where}: {fast._mt} against {ref._mt}"


@functools.cache
def _minus_ones(size: int, dtype: np.dtype) -> bytes:
    """The bytes of ``size`` integers -1: an integer array equals them iff every entry is -1 (one memcmp, not a
    comparison array and its reduction, after every event)."""
    return np.full(size, -1, dtype=dtype).tobytes()


def _check_classes(learner: Learner) -> None:
    """The workspace's classes (once built) are consistent and hold the arms outside M, each by its mean and count."""
    if learner._inc is None:
        return
    counts, fw, iw, bw, n = learner._inc[0], learner._inc[4], learner._inc[5], learner._inc[6], learner._inc[8]
    if iw[ci._IS, ci.IS_BUILT] == 0:
        return
    size = int(iw[ci._IS, ci._TABMASK]) + 1
    table = iw[ci._TAB:].reshape(-1)
    rest = table[size:]
    assert rest.dtype.kind == "i" and rest.tobytes() == _minus_ones(rest.size, rest.dtype), "table beyond its size"
    check_classes(iw, ci._ROWS, table[:size], iw[ci._IS, ci._NFREE], n, fw[ci._MU, :n].view(np.int64), counts)
    inside = iw[ci._CLS, :n] >= 0
    assert _equal(inside, ~bw[0]), f"arms in a class {inside} against arms outside M {~bw[0]}"


def _lockstep(cls: type, params: dict, n: int, seed: int, events: int, answer) -> tuple[Learner, Learner]:
    """Service-style events on a shipped learner and a reference one; equal after every event."""
    rng = np.random.default_rng(seed)
    fast = cls(**params).start(n, seed=seed)
    ref = _reference(cls(**params).start(n, seed=seed))
    out: list[int] = []  # asked, not answered yet
    for step in range(events):
        if fast.done_ and not out:
            break
        u = rng.random()
        if (u < 0.42 or not out) and not fast.done_:
            m = int(rng.integers(1, 4))
            a = fast.ask(np.int64(m) if rng.random() < 0.05 else m)
            b = ref.ask(m)
            assert a == b, (step, a, b)
            out += a
            if not a:
                assert not out or fast.done_
        elif u < 0.93 or fast.done_:
            arm = out.pop(int(rng.integers(len(out))))  # out of order
            r = answer(arm, rng)
            if rng.random() < 0.05:  # the checked path: a NumPy arm and an int or NumPy reward
                fast.tell(np.int64(arm), int(r) if r in (0.0, 1.0) else np.float64(r))
            else:
                fast.tell(arm, r)
            ref.tell(arm, r)
        else:
            arm = out.pop(int(rng.integers(len(out))))
            fast.cancel(arm)
            ref.cancel(arm)
        v = rng.random()
        if v < 0.003:
            fast, ref = _reload(fast, False), _reload(ref, True)
        elif v < 0.005:
            fast = pickle.loads(pickle.dumps(fast))
        elif v < 0.007:
            fast = copy.deepcopy(fast)
        _same(fast, ref, step)
        _check_classes(fast)
    return fast, ref


CASES = [(1, 30), (3, 30), (_SMALL + 4, 40), (7, 9), (1, 2)]


@pytest.mark.slow  # long event streams, the kernel's state compared with the reference after each
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(("k", "n"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_bernoulli_events_match_reference(cls, k, n, seed):
    """1-sparse Bernoulli: every arm but one answers 0 (ties in mean and count everywhere)."""
    means = _sparse(n)
    fast, ref = _lockstep(cls, {"k": k, "delta": 0.2}, n, seed, 6000,
                          lambda arm, rng: float(rng.random() < means[arm]))
    _same(fast, ref, "end")


@pytest.mark.slow  # long event streams, the kernel's state compared with the reference after each
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(("k", "n"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_graded_events_match_reference(cls, k, n, seed):
    """Graded 0 / 0.5 / 1 answers from three groups of identical arms."""
    probs = _graded(n, np.random.default_rng(50 + seed))
    cdf = np.cumsum(probs, axis=1)
    values = np.array([0.0, 0.5, 1.0])
    fast, ref = _lockstep(cls, {"k": k, "delta": 0.2}, n, seed, 6000,
                          lambda arm, rng: float(values[np.searchsorted(cdf[arm], rng.random(), side="right")]))
    _same(fast, ref, "end")


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", [1, 2])
def test_stops_and_late_answers_match_reference(cls, k):
    """An easy instance, so both stop; answers still out at the stop arrive after it."""
    means = np.array([0.95, 0.9 if k == 2 else 0.2, 0.1, 0.05, 0.1, 0.0, 0.05, 0.1])
    stopped = 0
    for seed in range(4):
        fast, ref = _lockstep(cls, {"k": k, "delta": 0.3}, len(means), seed, 20_000,
                              lambda arm, rng: float(rng.random() < means[arm]))
        stopped += fast.done_
        assert fast.ask(2) == ref.ask(2) == [] if fast.done_ else True
    assert stopped == 4


def _digest(cls: type, params: dict, model, seed: int, checkpoints: tuple[int, ...], incremental: bool) -> tuple:
    learner = cls(**params).start(model.n_arms, seed=seed)
    if not incremental:
        _reference(learner)
    stream = model.stream(seed)
    states = []
    for c in checkpoints:
        learner.run_compiled(stream, c)
        states.append((learner.t_, learner.done_, learner.state_json()))
    return tuple(states)


MODELS = {
    "sparse_bernoulli": lambda n: Bernoulli(_sparse(n, 0.5)),
    "graded": lambda n: Categorical(_graded(n, np.random.default_rng(5))),
    "gaussian": lambda n: Gaussian(np.linspace(1.0, 0.0, n) ** 3, 0.25),
}


@pytest.mark.slow  # whole runs of both kernels
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("model", list(MODELS))
def test_kernel_digests_match_reference_kernel(cls, k, model):
    """Whole runs at n = 1,000: the incremental kernel leaves the reference kernel's states at every checkpoint."""
    m = MODELS[model](1000)
    checkpoints = (1000, 1001, 40_000, 150_000)
    for seed in (0, 1):
        new = _digest(cls, {"k": k, "delta": 0.1}, m, seed, checkpoints, True)
        ref = _digest(cls, {"k": k, "delta": 0.1}, m, seed, checkpoints, False)
        assert new == ref


@pytest.mark.slow  # whole runs of both kernels
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("model", ["sparse_bernoulli", "gaussian"])
def test_kernel_digests_match_reference_kernel_at_half(cls, model):
    """K = N/2 (JLQ17 Fig. 1's second column), where the walk finds hundreds of classes a round and M~ is
    selected from ~2K candidates: the incremental kernel leaves the reference kernel's states."""
    m = MODELS[model](400)
    checkpoints = (400, 20_000, 120_000)
    for seed in (0, 1):
        new = _digest(cls, {"k": 200, "delta": 0.1}, m, seed, checkpoints, True)
        ref = _digest(cls, {"k": 200, "delta": 0.1}, m, seed, checkpoints, False)
        assert new == ref


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", [1, 3])
def test_kernel_matches_incremental_ask_tell_at_size(cls, k):
    """The ask(1)/tell loop on the incremental workspace ends where the compiled kernel does (1,000 graded arms)."""
    model = MODELS["graded"](1000)
    a = cls(k=k, delta=0.1).start(1000, seed=3)
    _advance_reference(a, model.stream(4), 30_000)
    assert a._inc is not None or a.done_
    b = cls(k=k, delta=0.1).start(1000, seed=3)
    b.run_compiled(model.stream(4), 30_000)
    assert_same_state(a, b)


def test_small_stop_instances_kernel_match():
    """Runs to the stop on small tie-heavy instances (both kernels, every K), including K = n - 1."""
    rng = np.random.default_rng(8)
    for trial in range(40):
        n = int(rng.integers(2, 9))
        k = int(rng.integers(1, n))
        means = np.round(rng.uniform(0.0, 1.0, n), 1)
        cls = CLASSES[trial % 2]
        new = _digest(cls, {"k": k, "delta": 0.3}, Bernoulli(means), trial, (50_000,), True)
        ref = _digest(cls, {"k": k, "delta": 0.3}, Bernoulli(means), trial, (50_000,), False)
        assert new == ref, (n, k, means)


@pytest.mark.parametrize(("k", "n", "incremental"), [(4, 100, True), (_SMALL, 100, True), (_SMALL + 1, 100, False),
                                                      (25, 1000, True), (26, 1000, False), (500, 1000, False)])
def test_the_compiled_driver_leaves_large_k_to_the_reference_kernel(monkeypatch, k, n, incremental):
    monkeypatch.setattr(cpe, "INCREMENTAL_SHARE", 40)
    calls = []
    real = cpe.cpe_inc_kernel
    monkeypatch.setattr(cpe, "cpe_inc_kernel", lambda *a: calls.append(1) or real(*a))
    model = Gaussian(np.linspace(1.0, 0.0, n), 0.25)
    learner = LilCLUCB(k=k, delta=0.1).start(n, seed=0)
    learner.run_compiled(model.stream(0), 2 * n)
    assert bool(calls) == incremental and learner.t_ == 2 * n


def _set_state(learner: Learner, counts: np.ndarray, sums: np.ndarray, pending: np.ndarray) -> Learner:
    learner.counts_[:] = counts
    learner.sums_[:] = sums
    learner.sumsq_[:] = sums
    learner.pending_[:] = pending
    learner.t_ = int(counts.sum())
    learner._restore()  # the state arrays were written directly
    return learner


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.slow  # runs of the kernel against its rules on every tie shape
def test_random_tie_heavy_states_match_reference(cls):
    """Built from a given state: the same stop, M, M~ and asks as the reference, on states full of ties.

    Half of the states have means of magnitude 2^54 (one ulp is 4, radii between 0.5 and 10): the
    tilde values of arms with different means and counts coincide, outside arms of lower index
    replace arms of M in M~, and CLUCB's sums of equal values in different arm orders decide the
    stop. The others have graded means (multiples of 1/2 over small counts). Some states have arms
    without an answer and pulls out (the initialisation's pick from a workspace built mid-way).
    """
    rng = np.random.default_rng(17)
    decided = {True: 0, False: 0}
    for trial in range(3000):
        n = int(rng.integers(2, 11))
        k = int(rng.integers(1, n))
        counts = rng.integers(1, 40, n)
        if trial % 2:
            means = 2.0**54 + 4.0 * rng.integers(0, 4, n)
            sums = means * counts
            params = {"k": k, "delta": 0.2, "sigma": float(rng.choice([1.0, 3.0, 6.0]))}
        else:
            sums = 0.5 * rng.integers(0, 2 * counts + 1)
            params = {"k": k, "delta": 0.2}
        pending = rng.integers(0, 3, n) * (rng.random(n) < 0.3)
        if trial % 7 == 0:  # arms without an answer yet (the initialisation, with pulls out)
            unanswered = rng.random(n) < 0.4
            counts[unanswered] = 0
            sums[unanswered] = 0.0
        fast = _set_state(cls(**params).start(n, seed=0), counts, sums, pending)
        ref = _set_state(_reference(cls(**params).start(n, seed=0)), counts, sums, pending)
        fast._check_stop()
        ref._check_stop()
        assert fast.done_ == ref.done_ and fast.final_ == ref.final_, trial
        decided[bool(ref.done_)] += 1
        if not ref.done_ and ref._m is not None:
            assert _equal(fast._m, ref._m), trial
            assert _equal(fast._mt, ref._mt), trial
        if not ref.done_:
            assert fast.ask(3) == ref.ask(3), trial
        assert_same_state(fast, ref, trial)
    assert min(decided.values()) > 300  # both outcomes are exercised


def test_other_decision_classes_keep_the_reference_rule():
    learner = LilCLUCB(decision={"class": "matching", "shape": [2, 2]}).start(4, seed=0)
    assert learner.ask(4) == [0, 1, 2, 3]
    assert learner._inc is None


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(("k", "n"), [(1, 12), (2, 12), (3, 40), (4, 9), (_SMALL + 9, 60), (30, 41)])
@pytest.mark.parametrize("best", ["first", "last"])
@pytest.mark.slow  # runs of the kernel against its rules on every tie shape
def test_ties_between_classes_match_reference(cls, k, n, best):
    """Arms of different counts with the same tilde (different classes that tie).

    Answers of magnitude 2^54 (one ulp is 4): k arms (the first or the last ones) always answer
    2^54 + 4, the others 2^54, and with sigma = 3 every radius between 2 and 6 rounds ``2^54 + rad``
    to the same value, so outside classes of many counts tie, and the walk must take every tied
    class (lowest indices). With the best arms last, outside arms that tie with an arm of M replace it
    in M~, and CLUCB's stop test compares sums of the same values added in different arm orders.
    K above ``_SMALL`` takes M~ by selection, not insertion, with tied values among its candidates.
    """
    x = 2.0**54
    top = range(k) if best == "first" else range(n - k, n)
    for seed in (0, 1):
        fast, ref = _lockstep(cls, {"k": k, "delta": 0.2, "sigma": 3.0}, n, seed, 3000,
                              lambda arm, rng: x + 4.0 if arm in top else x)
        _same(fast, ref, "end")
