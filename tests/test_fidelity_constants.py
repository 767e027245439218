"""Error-budget constants of the "faithful" learners against the papers' union bounds.

UCB1 + LS: JMNB14 Sec. 5 gives LS the other nu/2. lil'RandLUCB and lil'CLUCB (JLQ17): the union
bound over **both** tails of every arm (Lemma 2.1 bounds one tail by ``c_eps w^(1+eps)``) must be
at most nu.
"""

import numpy as np
import pytest

from purebandits.algorithms.cpe import LilCLUCB
from purebandits.algorithms.lucb import LilRandLUCB
from purebandits.algorithms.ucb1 import UCB1
from purebandits.bounds import c_epsilon, lil_stopping_arm, ls_delta
from purebandits.instances import Bernoulli, Gaussian
from purebandits.stopping import LS_EPSILON
from purebandits.testing.checks import run_learner


def _one_tail(w: float, eps: float) -> float:
    """JLQ17 Lemma 2.1 / JMNB14 Lemma 1: one tail of U(., w) fails with probability c_eps w^(1+eps)."""
    return c_epsilon(eps) * w ** (1.0 + eps)


@pytest.mark.parametrize("nu", [0.1, 0.01])
def test_ucb1_ls_gets_half_the_budget(nu):
    """JMNB14 Sec. 5: "run the algorithm with nu/2 in place of nu and assign the other nu/2 confidence to the LIL
    stopping criterion"; LS's event fails with probability c_eps d_LS^(1+eps) (ALGORITHMS.md 0.2)."""
    learner = UCB1(delta=nu).start(5, seed=0)
    assert _one_tail(learner._d_ls, LS_EPSILON) == pytest.approx(nu / 2, rel=1e-12)


def test_ucb1_stops_exactly_when_ls_at_half_nu_fires():
    nu = 0.1
    d_ls = ls_delta(nu / 2, LS_EPSILON)
    learner = UCB1(delta=nu).start(4, seed=0)
    stream = Bernoulli([0.8, 0.3, 0.3, 0.3]).stream(1)
    while not learner.done:
        assert lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5) == -1
        (arm,) = learner.ask(1)
        learner.tell(arm, stream.draw(arm))
    assert lil_stopping_arm(learner.sums_, learner.counts_.astype(float), d_ls, LS_EPSILON, 0.5) == 0
    assert learner.recommend() == [0]


@pytest.mark.parametrize("nu", [0.1, 0.01])
@pytest.mark.parametrize("n,k", [(10, 1), (10, 2), (100, 50), (1000, 2)])
def test_lil_rand_lucb_faithful_union_bound_over_both_tails(nu, n, k):
    """JLQ17 App. B event E: K arms at delta'/(2K) and N - K arms at delta'/(2(N-K)), each two-sided."""
    bp = LilRandLUCB(k=k, delta=nu, preset="faithful").start(n, seed=0)._bparams
    w_top, w_bot, eps = bp[0], bp[1], bp[2]
    assert eps == 0.01 and w_top == pytest.approx(nu / (2 * c_epsilon(eps)) / (2 * (n - k)))
    union = 2 * (k * _one_tail(w_bot, eps) + (n - k) * _one_tail(w_top, eps))
    assert union <= nu
    assert union > 0.7 * nu  # not needlessly conservative


@pytest.mark.parametrize("nu", [0.1, 0.01])
@pytest.mark.parametrize("n,k", [(10, 1), (10, 2), (100, 50), (1000, 2)])
def test_lil_clucb_faithful_union_bound_over_both_tails(nu, n, k):
    """JLQ17 Lemma D.1: every arm uses U(T, delta'/N); both tails of all N arms sum to nu."""
    learner = LilCLUCB(k=k, delta=nu, preset="faithful").start(n, seed=0)
    w, eps = learner._conf, learner._eps
    assert eps == 0.01
    union = 2 * n * _one_tail(w, eps)
    assert union == pytest.approx(nu, rel=1e-9) and union <= nu * (1 + 1e-12)


@pytest.mark.parametrize("cls", [LilRandLUCB, LilCLUCB])
def test_heuristic_presets_unchanged(cls):
    """The correction is for the faithful presets only: heuristic is eps = 0, delta' = nu (JLQ17 Sec. 5)."""
    learner = cls(k=2, delta=0.01).start(10, seed=0)
    if cls is LilRandLUCB:
        np.testing.assert_allclose(learner._bparams[:3], [0.01 / 16, 0.01 / 4, 0.0])
    else:
        assert (learner._conf, learner._eps) == (pytest.approx(0.001), 0.0)


@pytest.mark.parametrize("make", [
    lambda: LilRandLUCB(k=2, delta=0.01, preset="faithful"),
    lambda: LilCLUCB(k=2, delta=0.01, preset="faithful"),
    lambda: UCB1(delta=0.1),
])
@pytest.mark.parametrize("n", [6, 20])
def test_kernels_use_the_same_constants_as_ask_tell(make, n):
    """The compiled drivers read the corrected constants: same pulls, counts and answer as ask(1)/tell."""
    model = Gaussian(np.linspace(1.0, 0.0, n))
    slow = run_learner(make().start(n, seed=3), model, 11, max_pulls=200_000)
    fast = run_learner(make().start(n, seed=3), model, 11, max_pulls=200_000, compiled=True)
    assert slow.done and fast.done
    assert slow.n_pulls == fast.n_pulls and (slow.counts_ == fast.counts_).all()
    assert slow.recommend() == fast.recommend()
