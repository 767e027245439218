"""The owners' reports at contest size: ``stopping_progress`` from the LUCB family's incremental workspace and
``intervals_of`` for a page of arms give exactly the O(n) reference's figures (issue 24, target 3)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from purebandits.registry import all_learners, make_learner

#: the LUCB learners with an incremental workspace, with the bound forms the service and the library use
CONFIGS = [
    ("lil_kl_ucb", {}),
    ("lil_kl_ucb", {"form": "simplified"}),
    ("kl_rand_lucb", {"form": "simplified"}),
    ("kl_rand_lucb", {}),
    ("lucb_plus_plus", {}),
    ("lil_lucb", {}),
    ("lil_rand_lucb", {}),
]
MEANS = np.linspace(0.05, 0.95, 40)


def _reference(learner):
    """A copy that runs the O(n) rule (no workspace)."""
    ref = copy.deepcopy(learner)
    ref._inc = None
    ref._incremental = False
    return ref


def _drive(learner, rng, steps: int, probe) -> None:
    """Service-style traffic: asks of one arm, answers out of order, a cancel now and then."""
    out: list[int] = []
    for step in range(steps):
        if learner.done:
            return
        out += learner.ask(1)
        if len(out) > 4 or step % 5 == 0:
            arm = out.pop(int(rng.integers(len(out))))
            if step % 97 == 0:
                learner.cancel(arm)
            else:
                learner.tell(arm, float(rng.random() < MEANS[arm]))
        if step % 211 == 0:
            probe(learner)


@pytest.mark.parametrize(("name", "params"), CONFIGS)
@pytest.mark.parametrize("k", [1, 3])
def test_progress_from_the_workspace_equals_the_reference(name, params, k):
    rng = np.random.default_rng(7 + k)
    learner = make_learner(name, k=k, delta=0.05, **params).start(len(MEANS), seed=5)
    fractions = set()

    def probe(lrn):
        want = _reference(lrn).stopping_progress()
        got = lrn.stopping_progress()
        assert got == want
        assert copy.deepcopy(lrn).stopping_progress() == want  # the reports' copy keeps the workspace
        fractions.add(round(got.fraction, 1))
        arms = rng.integers(0, len(MEANS), 12)
        lo, hi = lrn.intervals_of(arms)
        all_lo, all_hi = lrn.intervals()
        assert np.array_equal(lo, all_lo[arms]) and np.array_equal(hi, all_hi[arms])

    _drive(learner, rng, 60_000, probe)
    assert len(fractions) >= 4, fractions  # the runs pass through partial separation, not only 0


@pytest.mark.parametrize(("name", "params"), CONFIGS[:3])
def test_probing_progress_and_copies_changes_no_decision(name, params):
    def run(probe: bool) -> str:
        lrn = make_learner(name, k=2, delta=0.05, **params).start(len(MEANS), seed=9)
        _drive(lrn, np.random.default_rng(3), 30_000,
               (lambda x: (x.stopping_progress(), copy.deepcopy(x).stopping_progress())) if probe else (lambda x: None))
        return lrn.state_json()

    assert run(True) == run(False)


@pytest.mark.parametrize("name", ["lil_ucb", "successive_elimination", "at_lucb", "top_two"])
def test_intervals_of_defaults_to_the_full_intervals(name):
    cls = all_learners()[name]
    kw = {"k": 2} if cls.tags.get("top_k") else {}
    lrn = make_learner(name, **kw).start(len(MEANS), seed=1)
    rng = np.random.default_rng(0)
    for _ in range(400):
        for a in lrn.ask(1):
            lrn.tell(a, float(rng.random() < MEANS[a]))
    arms = [3, 0, 39, 3]
    lo, hi = lrn.intervals_of(arms)
    all_lo, all_hi = lrn.intervals()
    assert np.array_equal(lo, all_lo[arms]) and np.array_equal(hi, all_hi[arms])


@pytest.mark.parametrize(("name", "params"), [("lil_kl_ucb", {}), ("kl_rand_lucb", {"form": "simplified"})])
def test_progress_resolves_brackets_that_leave_the_test_open(name, params):
    """A workspace may hold any certified bracket. Widened so that the test against ``lcb_h`` is open for every
    arm outside the top (from its mean up to midway between ``lcb_h`` and ``ucb_l``, below the pair's own bound,
    so the pair is unchanged), the separated count must still be the reference's."""
    from purebandits.algorithms.kernels import lucb_incremental as inc_mod

    rng = np.random.default_rng(4)
    lrn = make_learner(name, k=1, delta=0.05, **params).start(len(MEANS), seed=2)
    checked = 0
    for step in range(40_000):
        for a in lrn.ask(1):
            lrn.tell(a, float(rng.random() < MEANS[a]))
        if lrn.done:
            break
        if step % 1000 == 999 and lrn._inc is not None:
            ref = _reference(lrn)
            want = ref.stopping_progress()
            h, el = ref._stop_pair()
            lcb_h, ucb_l = ref._lcb[h], ref._ucb[el]
            fw, iw, top = lrn._inc[8], lrn._inc[9], lrn._inc[10]
            n = len(MEANS)
            for i in range(n):
                if not top[i] and i != el and ref._ucb[i] < lcb_h < ucb_l:
                    hi = max(ref._ucb[i], 0.5 * (lcb_h + ucb_l))
                    fw[inc_mod._SLO, i], fw[inc_mod._SHI, i] = fw[inc_mod._MEAN, i], hi
                    inc_mod._set(fw, iw, inc_mod._HSU, n, i, hi)
            got = lrn.stopping_progress()
            assert got == want
            checked += want.separated > 0
    assert checked >= 3
