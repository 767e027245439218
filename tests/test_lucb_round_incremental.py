"""LUCB1 and KL-LUCB's incremental compiled driver equals the O(n) reference driver, pull for pull.

:mod:`purebandits.algorithms.kernels.lucb_round_incremental` replaces the O(n) pass of
``_round_dependent_kernel`` by windowed keys and heaps; these tests run both drivers from the
same state on instances with exact ties (Bernoulli arms of equal or 0/1 means, so whole classes of
arms share their bounds) and near-ties (Gaussian arms on a coarse grid), k = 1 and k > 1,
resuming at checkpoints, and compare every state array and the outcome.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from purebandits.algorithms.kernels.lucb_driver import family_kernel
from purebandits.algorithms.kernels.lucb_round_incremental import (
    _kl_bracket,
    _tight_key,
    _window_key,
    round_incremental_kernel,
    round_incremental_supported,
)
from purebandits.algorithms.kernels.lucb_rules import BOUND_KL_LUCB, BOUND_LUCB, _round_dependent_kernel
from purebandits.algorithms.lucb import KLLUCB, LUCB1
from purebandits.bounds import kl_lower_s, kl_upper_s
from purebandits.instances import make_instance
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.testing.state import assert_same_state


def _instance(kind: int, n: int, rng: np.random.Generator):
    """Reward models with ties (kinds 0, 1, 3) and near-ties (2, 4)."""
    if kind == 0:
        return Bernoulli(rng.choice([0.0, 0.3, 0.5, 1.0], n))
    if kind == 1:
        return Bernoulli(rng.choice([0.0, 0.5], n))
    if kind == 2:
        return Gaussian(np.round(rng.uniform(0.0, 1.0, n), 1), 0.25)
    if kind == 3:
        return Bernoulli(np.full(n, 0.4))
    return Bernoulli(np.round(rng.uniform(0.05, 0.95, n), 2))


def _run(kernel, cls, model, n: int, k: int, seed: int, checkpoints, **params):
    """Run ``kernel`` on a fresh learner up to each checkpoint; the learner and (done, queued, rounds, t)."""
    lr = cls(k=k, delta=0.1, **params).start(n, seed=seed)
    stream = model.stream(seed + 1)
    out = None
    for cp in checkpoints:
        out = kernel(lr._code, lr._rule, lr._strict, lr._eps, lr._bparams, lr.k_, lr.counts_, lr.sums_, lr.sumsq_,
                     int(lr.queued_), int(lr.rounds_), int(cp), lr.rng_, *stream.args())
        lr.queued_, lr.rounds_, lr.t_ = int(out[1]), int(out[2]), int(out[3])
        if out[0]:
            break
    return lr, (bool(out[0]), int(out[1]), int(out[2]), int(out[3]))


def _assert_same(cls, model, n, k, seed, checkpoints, **params):
    ref, ref_out = _run(_round_dependent_kernel, cls, model, n, k, seed, checkpoints, **params)
    new, new_out = _run(round_incremental_kernel, cls, model, n, k, seed, checkpoints, **params)
    assert new_out == ref_out
    np.testing.assert_array_equal(new.counts_, ref.counts_)
    np.testing.assert_array_equal(new.sums_, ref.sums_)
    np.testing.assert_array_equal(new.sumsq_, ref.sumsq_)
    for lr, out in ((ref, ref_out), (new, new_out)):
        if out[0]:
            lr._finish()
    assert_same_state(new, ref)  # the recommendation too, once stopped
    return ref_out


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_equal_to_reference_many_seeds(cls):
    """40 random instances per learner (n 2-40, every k), resumed at three checkpoints."""
    rng = np.random.default_rng(2024)
    stopped = 0
    for trial in range(40):
        n = int(rng.integers(2, 41))
        k = int(rng.integers(1, n)) if trial % 3 else 1
        model = _instance(trial % 5, n, rng)
        out = _assert_same(cls, model, n, k, trial, (n // 2, n + 7, 12_000))
        stopped += out[0]
    assert stopped >= 2  # runs that end with the stop test, not only capped ones


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
@pytest.mark.parametrize("k", [1, 3])
def test_equal_to_reference_many_tied_arms(cls, k):
    """1-sparse Bernoulli arms: all but k arms have mean 0 and tie class by class (the classes' case)."""
    n = 200
    model = Bernoulli(np.r_[np.full(k, 0.5), np.zeros(n - k)])
    _assert_same(cls, model, n, k, 7, (n, 30_000, 60_000))


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_equal_to_reference_long_run_near_ties(cls):
    """Long enough for many key windows, on arms whose means differ by 0.01 or tie."""
    rng = np.random.default_rng(9)
    n = 60
    model = Bernoulli(np.round(rng.uniform(0.3, 0.7, n), 2))
    _assert_same(cls, model, n, 4, 3, (5_000, 150_000))


def test_equal_to_reference_epsilon_and_sigma():
    """LUCB1 with a PAC tolerance and another sub-Gaussian scale; KL-LUCB with another alpha."""
    rng = np.random.default_rng(4)
    model = Gaussian(np.round(rng.uniform(0.0, 1.0, 30), 1), 0.25)
    _assert_same(LUCB1, model, 30, 2, 1, (40_000,), epsilon=0.05, sigma=1.0)
    model = Bernoulli(np.round(rng.uniform(0.0, 1.0, 30), 1))
    _assert_same(KLLUCB, model, 30, 2, 1, (40_000,), alpha=2.0)


@pytest.mark.parametrize("cls", [LUCB1, KLLUCB])
def test_run_compiled_uses_incremental_driver(cls):
    """family_kernel dispatches here, and run_compiled's state equals the reference's."""
    lr = cls(k=2, delta=0.1).start(50, seed=0)
    assert round_incremental_supported(lr._code, lr._bparams, 2, 50)
    assert not round_incremental_supported(lr._code, lr._bparams, 50, 50)
    model = Bernoulli(np.linspace(0.1, 0.9, 50))
    lr.run_compiled(model.stream(1), 20_000)
    ref, _ = _run(_round_dependent_kernel, cls, model, 50, 2, 0, (20_000,))
    # _run seeds the stream with seed + 1 = 1, as above
    assert_same_state(lr, ref)


def test_window_keys_bound_every_lower_level():
    """Upper keys >= the exact upper bound and lower keys <= the lower bound, at every level <= K."""
    rng = np.random.default_rng(1)
    ps = np.r_[0.0, 1.0, 1e-9, 1.0 - 1e-9, rng.uniform(0.0, 1.0, 300), rng.uniform(0.0, 1e-3, 50)]
    for p in ps:
        for T in (1.0, 3.0, 50.0, 4_000.0, 1e7):
            K = float(rng.uniform(5.0, 40.0))
            for frac in (1.0, 1.0 - 1e-12, 0.9999, 0.5):
                tterm = K * frac
                level = tterm / T
                up, _ = _window_key(BOUND_KL_LUCB, True, p, T, K)
                lo, _ = _window_key(BOUND_KL_LUCB, False, p, T, K)
                hi_exact = kl_upper_s(p, level)
                lo_exact = kl_lower_s(p, level)
                assert up >= hi_exact and lo <= lo_exact
                # the tightened keys, from the exact bound at a lower level (kl_upper_s itself is not
                # monotone in the level to the last ulp: at p = 1e-9 a level 1e-12 lower gives 1 ulp more)
                up_t = _tight_key(True, p, T, K, hi_exact, up)
                lo_t = _tight_key(False, p, T, K, lo_exact, lo)
                assert up_t >= hi_exact and up_t >= kl_upper_s(p, K / T) and up_t <= up
                assert lo_t <= lo_exact and lo_t <= kl_lower_s(p, K / T) and lo_t >= lo
                r = np.sqrt(tterm / T)
                assert _window_key(BOUND_LUCB, True, p, T, K)[0] >= p + r
                assert _window_key(BOUND_LUCB, False, p, T, K)[0] <= p - r


def test_tight_keys_are_tight():
    """A tightened KL key is within 1e-6 of the bound at its level (so few arms are candidates)."""
    for p in (0.05, 0.3, 0.5, 0.9):
        for T in (10.0, 1_000.0):
            K = 20.0
            up = _tight_key(True, p, T, K, kl_upper_s(p, 0.9999 * K / T), 1.0)
            lo = _tight_key(False, p, T, K, kl_lower_s(p, 0.9999 * K / T), 0.0)
            assert 0.0 <= up - kl_upper_s(p, K / T) < 1e-6
            assert 0.0 <= kl_lower_s(p, K / T) - lo < 1e-6


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.slow  # long runs of the kernel against its rules
def test_equal_to_reference_lil_exp_bernoulli(k):
    """lil_exp Bernoulli arms: means inside (0, 1) close to each other and to 1 (KL-LUCB's brackets decide)."""
    inst = make_instance("lil_exp:n=120,alpha=0.6,model=bernoulli")
    for seed in (0, 1, 2):
        _assert_same(KLLUCB, inst.model, 120, k, seed, (200, 3_000, 60_000))


def _whole_run_digest(cls, spec: str, k: int, seed: int, cap: int):
    """(stopped, pulls, sha256 prefix of counts, sums, sumsq and the outcome) of family_kernel's run."""
    inst = make_instance(spec)
    lr = cls(k=k, delta=0.1).start(inst.n_arms, seed=seed)
    stream = inst.model.stream(seed + 1)
    out = family_kernel(lr._code, lr._rule, lr._strict, lr._eps, lr._bparams, lr.k_, lr.counts_, lr.sums_, lr.sumsq_,
                        int(lr.queued_), int(lr.rounds_), int(cap), lr.rng_, *stream.args())
    h = hashlib.sha256()
    for arr in (lr.counts_, lr.sums_, lr.sumsq_):
        h.update(np.ascontiguousarray(arr).tobytes())
    h.update(repr((bool(out[0]), int(out[1]), int(out[2]), int(out[3]))).encode())
    return bool(out[0]), int(out[3]), h.hexdigest()[:16]


# recorded from the driver before KL-LUCB's bracket decisions (commit 18afe47: the same driver as f46981e),
# whole runs at n = 1,000
_DIGESTS = [
    (KLLUCB, "lil_exp:n=1000,alpha=0.6,model=bernoulli", 1, 0, 10**7, (True, 31118, "6471fb0efec729ca")),
    (KLLUCB, "lil_exp:n=1000,alpha=0.6,model=bernoulli", 1, 5, 10**7, (True, 31940, "9ae4f3dc5db17df3")),
    (KLLUCB, "lil_exp:n=1000,alpha=0.6,model=bernoulli", 3, 1, 10**7, (True, 489969, "ddc1f42dfea1e988")),
    (KLLUCB, "one_sparse:n=1000,model=bernoulli", 1, 0, 10**7, (True, 80920, "8f7e732af8286933")),
    (LUCB1, "lil_exp:n=1000,alpha=0.6,model=bernoulli", 2, 0, 400_000, (False, 400000, "d803534ea56ad520")),
]


@pytest.mark.parametrize(("cls", "spec", "k", "seed", "cap", "expected"), _DIGESTS)
def test_whole_run_digests(cls, spec, k, seed, cap, expected):
    """Contest-size runs end at the same pull in the same state as the exact-inversion driver did."""
    assert _whole_run_digest(cls, spec, k, seed, cap) == expected


def test_kl_brackets_hold_the_exact_bound():
    """_kl_bracket's ends enclose kl_upper_s / kl_lower_s, cold and warm-started, means near 0 and 1 too."""
    rng = np.random.default_rng(5)
    for i in range(6_000):
        if i % 3 == 0:
            p = float(rng.uniform(0.001, 0.999))
        elif i % 3 == 1:
            p = float(10.0 ** rng.uniform(-12.0, -0.01))
        else:
            p = 1.0 - float(10.0 ** rng.uniform(-12.0, -0.01))
        level = float(10.0 ** rng.uniform(-7.0, 1.5))
        for upper in (True, False):
            exact = kl_upper_s if upper else kl_lower_s
            lo, hi, x = _kl_bracket(upper, p, level, np.nan)
            assert lo <= exact(p, level) <= hi
            for f in (1.0 + 1e-9, 1.0 + 1e-6, 1.0 + 1e-3, 1.0 - 1e-4):
                lo2, hi2, _ = _kl_bracket(upper, p, level * f, x)
                assert lo2 <= exact(p, level * f) <= hi2
    # and they are tight where the kernel uses them (so the exact inversion is rarely needed)
    lo, hi, _ = _kl_bracket(True, 0.7, 0.01, np.nan)
    assert 0.0 <= hi - lo < 1e-12
