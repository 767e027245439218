"""Restricted asks (``ask(n, allowed=...)``) of the LUCB family, lil'UCB, AT-LUCB and CLUCB / lil'CLUCB.

The rules are in each class docstring ("Restricted asks"). These tests hold the fast paths (the incremental
workspaces) to the O(n) reference rules, and the reference rules to brute-force computations from the learners'
own bounds.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from purebandits.algorithms.kernels.lucb_rules import RULE_PAIR, family_bound_s, family_time_term
from purebandits.algorithms.lucb import KLLUCB, LUCB1, KLRandLUCB, LilKLUCB, LilLUCB, LilRandLUCB, LUCBPlusPlus
from purebandits.base import top_k_by

LUCB_FAMILY = [LUCB1, KLLUCB, LilLUCB, LUCBPlusPlus, LilRandLUCB, LilKLUCB, KLRandLUCB]


def _mask(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random non-empty mask, its density drawn from sparse to nearly full."""
    m = rng.random(n) < rng.choice([0.1, 0.3, 0.6, 0.9])
    if not m.any():
        m[int(rng.integers(n))] = True
    return m


def _drive_pair(a, b, n: int, seed: int, steps: int, means: np.ndarray, p_none: float = 0.2) -> None:
    """Drive ``a`` and ``b`` with the same asks (restricted or not), answers and cancels; assert the same arms."""
    rng = np.random.default_rng(seed)
    out: list[int] = []
    for step in range(steps):
        if a.done:
            break
        mask = None if rng.random() < p_none else _mask(rng, n)
        allowed = mask if mask is None or rng.random() < 0.5 else np.flatnonzero(mask).tolist()
        m = int(rng.integers(1, 4))
        got_a = a.ask(m, allowed=allowed)
        got_b = b.ask(m, allowed=allowed)
        assert got_a == got_b, (step, got_a, got_b)
        if mask is not None:
            assert all(mask[x] for x in got_a)
        out += got_a
        rng.shuffle(out)
        for arm in out[: int(rng.integers(0, len(out) + 1))]:
            if rng.random() < 0.05:
                a.cancel(arm)
                b.cancel(arm)
            else:
                r = float(rng.random() < means[arm])
                a.tell(arm, r)
                b.tell(arm, r)
            out.remove(arm)
        assert a.done == b.done


# ------------------------------------------------------------------------------------------------ LUCB family
@pytest.mark.parametrize("cls", LUCB_FAMILY)
@pytest.mark.parametrize("n,k", [(7, 1), (12, 3)])
def test_lucb_incremental_matches_reference_under_restriction(cls, n, k):
    """The workspace path (inc / rinc) makes the reference's restricted decisions, mixed with unrestricted asks,
    pending pulls and cancels, and leaves the same state (queued_, rounds_, rng_ included)."""
    means = np.linspace(0.8, 0.3, n)
    means[1] = means[2]  # ties in the means: equal bounds must break to the same arms
    fast = cls(k, delta=0.1).start(n, seed=5)
    ref = cls(k, delta=0.1).start(n, seed=5)
    ref._incremental = False
    _drive_pair(fast, ref, n, seed=11 + n, steps=1500, means=means)
    assert fast.state_json() == ref.state_json()


def _brute_bounds(lr, T: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(top-K membership, lower bounds of top arms, upper bounds of the others) from the scalar bound, per arm."""
    means = lr.means()
    top = np.zeros(lr.n_arms_, dtype=bool)
    top[top_k_by(means, lr.k_)] = True
    tterm = family_time_term(lr._code, lr._bparams, float(lr.rounds_ + 1))
    lcb = np.full(lr.n_arms_, np.nan)
    ucb = np.full(lr.n_arms_, np.nan)
    for i in range(lr.n_arms_):
        m2 = float(lr.sumsq_[i] / lr.counts_[i]) if lr.counts_[i] > 0 else 0.0
        lo, hi = family_bound_s(lr._code, lr._bparams, float(means[i]), m2, float(T[i]), bool(top[i]), tterm, 0)
        lcb[i], ucb[i] = lo, hi
    return top, lcb, ucb


@pytest.mark.parametrize("cls", LUCB_FAMILY)
def test_lucb_restricted_arm_maximises_the_overlap(cls):
    """The arm asked is allowed and its overlap with the other side (top arm a: ucb_l - lcb_a; other arm b:
    ucb_b - lcb_h) is the largest among the allowed arms, computed arm by arm from the scalar bound; when h and l
    are both allowed the arm is h or l (the pair rule returns h and queues l)."""
    n, k = 10, 2
    rng = np.random.default_rng(3)
    means = rng.uniform(0.2, 0.8, n)
    lr = cls(k, delta=0.1).start(n, seed=7)
    while (lr.counts_ == 0).any():
        for arm in lr.ask(1):
            lr.tell(arm, float(rng.random() < means[arm]))
    checked = both = 0
    for _ in range(400):
        if lr.done:
            break
        if lr.queued_ >= 0:  # serve the pair's second arm first (unrestricted)
            for arm in lr.ask(1):
                lr.tell(arm, float(rng.random() < means[arm]))
            continue
        pend = lr.ask(int(rng.integers(1, 3))) if rng.random() < 0.3 else []  # some pending pulls
        if lr.queued_ >= 0:
            pend += lr.ask(1)
        T = lr.counts_ + lr.pending_
        top, lcb, ucb = _brute_bounds(lr, T)
        h = int(np.flatnonzero(top)[np.argmin(lcb[top])])
        el = int(np.flatnonzero(~top)[np.argmax(ucb[~top])])
        crit = np.where(top, ucb[el] - lcb, ucb - lcb[h])
        mask = _mask(rng, n)
        (arm,) = lr.ask(1, allowed=mask)
        assert mask[arm]
        assert crit[arm] == crit[mask].max(), (arm, crit, mask)
        if mask[h] and mask[el]:
            both += 1
            assert arm in (h, el)
            if lr._rule == RULE_PAIR:
                assert arm == h and lr.queued_ == el
        checked += 1
        for a in pend + [arm]:
            lr.tell(a, float(rng.random() < means[a]))
    assert checked > 50 and both > 5


def test_lucb_queued_arm_waits_for_an_ask_that_allows_it():
    """Pair rule: the queued second arm stays queued through asks that do not allow it and is served first by the
    next one that does."""
    n = 6
    rng = np.random.default_rng(0)
    lr = LilKLUCB(1, delta=0.1).start(n, seed=1)
    for _ in range(3):
        for arm in lr.ask(n):
            lr.tell(arm, float(rng.random() < 0.5))
    h, el = lr.ask(2)  # the pair (h, l)
    lr.tell(h, 1.0)
    lr.tell(el, 0.0)
    (h,) = lr.ask(1)
    el = lr.queued_
    assert el >= 0
    without = np.ones(n, dtype=bool)
    without[el] = False
    for _ in range(3):
        (arm,) = lr.ask(1, allowed=without)
        assert arm != el and lr.queued_ == el
    assert lr.ask(1, allowed=[el]) == [el] and lr.queued_ == -1


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
def test_lucb_round_index_covers_every_count(cls):
    """Sequential restricted asks count a round per decision, so every arm's count stays within rounds_ + 1 (the
    range of counts that LUCB1 / KL-LUCB's bound at round t is a union over)."""
    n = 8
    rng = np.random.default_rng(2)
    means = np.linspace(0.7, 0.4, n)
    lr = cls(2, delta=0.1).start(n, seed=3)
    for _ in range(3000):
        if lr.done:
            break
        (arm,) = lr.ask(1, allowed=_mask(rng, n))
        lr.tell(arm, float(rng.random() < means[arm]))
        assert lr.counts_.max() <= lr.rounds_ + 1


def test_lucb_restricted_ask_keeps_the_workspace():
    """A restricted ask notes its pending pull in the workspace instead of dropping it (the next tell would rebuild
    it in O(n)), and unrestricted asks after it still match the reference."""
    n = 30
    rng = np.random.default_rng(4)
    lr = KLRandLUCB(delta=0.1).start(n, seed=2)
    for arm in lr.ask(n):
        lr.tell(arm, float(rng.random() < 0.5))
    lr.ask(1)
    inc = lr._inc
    assert inc is not None
    for _ in range(20):
        for arm in lr.ask(1, allowed=_mask(rng, n)):
            lr.tell(arm, float(rng.random() < 0.5))
    assert lr._inc is inc
    ref = copy.deepcopy(lr)
    ref._incremental = False
    ref._restore()
    for _ in range(200):
        assert lr.ask(1) == ref.ask(1)
        arm = int(np.flatnonzero(lr.pending_)[0])
        r = float(rng.random() < 0.5)
        lr.tell(arm, r)
        ref.tell(arm, r)


# ------------------------------------------------------------------------------------------------------ lil'UCB
def test_lil_ucb_restricted_arm_has_the_largest_index():
    """The allowed arm with the largest lil'UCB index at answered + pending pulls (ties to the lowest arm), from
    the scalar index arm by arm; with asks of several arms and pulls left pending."""
    from purebandits.algorithms.lil_ucb import LilUCB
    from purebandits.bounds import lil_ucb_index_s

    n = 9
    rng = np.random.default_rng(5)
    means = rng.uniform(0.3, 0.7, n)
    lr = LilUCB(delta=0.1).start(n, seed=1)
    pend: list[int] = []
    for _ in range(600):
        if lr.done:
            break
        T = lr.counts_ + lr.pending_
        mean = lr.means()
        index = np.array([np.inf if T[i] == 0 else lil_ucb_index_s(mean[i], float(T[i]), lr._delta_int, lr._eps,
                                                                   lr._beta, lr._sigma) for i in range(n)])
        mask = _mask(rng, n)
        (arm,) = lr.ask(1, allowed=mask)
        assert arm == int(np.flatnonzero(mask)[np.argmax(index[mask])])
        pend.append(arm)
        rng.shuffle(pend)
        for a in pend[: int(rng.integers(0, len(pend) + 1))]:
            lr.tell(a, float(rng.random() < means[a]))
            pend.remove(a)


def test_lil_ucb_restricted_asks_stop_with_ls_not_with_the_count_rule():
    """Every ask restricted to a random half of the arms: the count rule (one arm with lam/(1+lam) of all answers)
    does not fire, LS does, with the best arm (class docstring, "Restricted asks")."""
    from purebandits.algorithms.lil_ucb import LilUCB
    from purebandits.instances.rewards import Bernoulli
    from purebandits.testing.checks import run_learner_allowed

    model = Bernoulli(np.array([0.8, 0.3, 0.3, 0.2]))
    count = run_learner_allowed(LilUCB(delta=0.1).start(4, seed=1), model, 2, max_pulls=20_000)
    assert not count.done and count.counts_[0] < 0.6 * count.n_pulls
    ls = run_learner_allowed(LilUCB(delta=0.1, ls=True).start(4, seed=1), model, 2, max_pulls=20_000)
    assert ls.done and ls.recommend() == [0]


# ------------------------------------------------------------------------------------------------------ AT-LUCB
def test_at_lucb_restricted_arm_maximises_the_overlap():
    """AT-LUCB: after the round's stage update, the allowed arm with the largest overlap (top arm a: U_l - L_a,
    other arm b: U_b - L_h) at the stage's radius, from the scalar radius arm by arm; h (and l queued) when both
    are allowed, as the unrestricted ask; a queued arm that is not allowed is dropped."""
    from purebandits.algorithms.at_lucb import ATLUCB, at_lucb_radius

    n, k = 8, 2
    rng = np.random.default_rng(6)
    means = rng.uniform(0.2, 0.8, n)
    lr = ATLUCB(k, delta=0.05).start(n, seed=3)
    while (lr.counts_ == 0).any():
        for arm in lr.ask(1):
            lr.tell(arm, float(rng.random() < means[arm]))
    both = dropped = 0
    for _ in range(400):
        if lr.done:
            break
        if lr.queue_ and rng.random() < 0.5:
            q = lr.queue_[0]
            mask = _mask(rng, n)
            mask[q] = False
            if not mask.any():
                continue
            lr.ask(1, allowed=mask)
            assert lr.queue_[:1] != [q]  # dropped (a new pair's second arm is allowed, so it is not q)
            dropped += 1
            for a in np.flatnonzero(lr.pending_):
                lr.tell(int(a), float(rng.random() < means[a]))
            continue
        for arm in lr.ask(1) if lr.queue_ else []:  # finish the pair
            lr.tell(arm, float(rng.random() < means[arm]))
        free = copy.deepcopy(lr)
        free.ask(1)  # the unrestricted round: its stage and pair
        stage, t = free.stage_, float(free.round_)
        T = lr.counts_ + lr.pending_
        mu = lr.means()
        rad = np.array([at_lucb_radius(float(T[i]), t, n, lr.delta1, stage, lr.alpha, lr.sigma) for i in range(n)])
        top = np.zeros(n, dtype=bool)
        top[top_k_by(mu, k)] = True
        lcb, ucb = mu - rad, mu + rad
        h = int(np.flatnonzero(top)[np.argmin(lcb[top])])
        el = int(np.flatnonzero(~top)[np.argmax(ucb[~top])])
        crit = np.where(top, ucb[el] - lcb, ucb - lcb[h])
        mask = _mask(rng, n)
        (arm,) = lr.ask(1, allowed=mask)
        assert lr.stage_ == stage and mask[arm] and crit[arm] == crit[mask].max()
        if mask[h] and mask[el]:
            both += 1
            assert arm == h and lr.queue_ == [el] and free.queue_ == [el]
        for a in np.flatnonzero(lr.pending_):
            lr.tell(int(a), float(rng.random() < means[a]))
    assert both > 5 and dropped > 5


# ------------------------------------------------------------------------------------------------------ CLUCB
@pytest.mark.parametrize("name", ["CLUCB", "LilCLUCB"])
@pytest.mark.parametrize("n,k", [(7, 1), (12, 3)])
def test_cpe_incremental_matches_reference_under_restriction(name, n, k):
    """The top-K workspace path makes the reference's restricted decisions and keeps the same state."""
    import purebandits.algorithms.cpe as cpe

    cls = getattr(cpe, name)
    means = np.linspace(0.8, 0.3, n)
    fast = cls(k, delta=0.1).start(n, seed=5)
    ref = cls(k, delta=0.1).start(n, seed=5)
    ref._incremental = False
    _drive_pair(fast, ref, n, seed=31 + n, steps=1500, means=means)
    assert fast.state_json() == ref.state_json()


@pytest.mark.parametrize("name", ["CLUCB", "LilCLUCB"])
def test_cpe_restricted_arm_is_the_largest_radius_of_the_symmetric_difference(name):
    """The allowed arm of M symdiff M~ with the largest radius (answered + pending pulls), else the allowed arm with
    the largest radius, computed arm by arm from the scalar radius; also on a spanning-tree class (reference path)."""
    import purebandits.algorithms.cpe as cpe
    from purebandits.algorithms.kernels.cpe_rules import cpe_radius_s

    cls = getattr(cpe, name)
    edges = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]]
    inside = fallback = 0
    for decision, n, k in ((None, 10, 2), ({"class": "spanning_tree", "edges": edges}, 6, 1)):
        rng = np.random.default_rng(8)
        means = rng.uniform(0.2, 0.8, n)
        lr = cls(k, delta=0.1, decision=decision).start(n, seed=2)
        while (lr.counts_ == 0).any():
            for arm in lr.ask(1):
                lr.tell(arm, float(rng.random() < means[arm]))
        for _ in range(300):
            if lr.done:
                break
            pend = lr.ask(int(rng.integers(1, 3))) if rng.random() < 0.3 else []
            T = lr.counts_ + lr.pending_
            rad = np.array([cpe_radius_s(float(T[i]), float(lr.t_ + 1), lr._mode, lr._conf, lr._eps, lr.sigma, n)
                            for i in range(n)])
            m, mt, _ = lr._decisions()
            mask = _mask(rng, n)
            if rng.random() < 0.3 and (mask & (m == mt)).any():
                mask &= m == mt  # leave the symmetric difference out
            sel = mask & (m != mt)
            (arm,) = lr.ask(1, allowed=mask)
            if sel.any():
                inside += 1
                assert arm == int(np.flatnonzero(sel)[np.argmax(rad[sel])])
            else:
                fallback += 1
                assert arm == int(np.flatnonzero(mask)[np.argmax(rad[mask])])
            for a in pend + [arm]:
                lr.tell(a, float(rng.random() < means[a]))
    assert inside > 50 and fallback > 50
