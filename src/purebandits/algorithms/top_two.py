"""Top-two sampling with a TC challenger and an EB or TS leader, stopped by the GLR statistic.

The ask/tell path keeps the means, the EB leader, the arms in classes of equal virtual count (the
challenger's search, both costs) and the GLR hint between calls
(:mod:`purebandits.algorithms.kernels.top_two_incremental`), with the decisions of the O(n) reference rule
(:meth:`TopTwo._reference_ask_one`, :func:`glr_statistic_s`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.kinf_stop import RATINGS, KinfStopMixin, check_support
from purebandits.algorithms.kernels.top_two_incremental import tt_ask, tt_new, tt_note, tt_stop, tt_tell, tt_told
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import glr_pair_cost_s, glr_statistic_s, glr_stop_s, glr_threshold_s
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.stopping import statistic_progress

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["TopTwo"]


@njit(cache=True)
def _leader(sums, counts, use_ts, gaussian, sigma, rng):  # pragma: no cover - compiled
    """(the empirical means, the leader B): the empirical best (EB) or the argmax of a posterior draw (TS: one
    draw per arm in index order); ties to the lower index. Shared by the free and the restricted pick."""
    n = counts.shape[0]
    mu = np.empty(n)
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
    leader = 0
    best_v = -math.inf
    for i in range(n):
        if use_ts:
            c = max(counts[i], 1)
            if gaussian:
                v = mu[i] + sigma / math.sqrt(c) * rng.standard_normal()
            else:
                s = min(max(sums[i], 0.0), float(counts[i]))
                v = rng.beta(1.0 + s, 1.0 + counts[i] - s)
        else:
            v = mu[i]
        if v > best_v:
            best_v = v
            leader = i
    return mu, leader


@njit(cache=True)
def top_two_pick(sums, counts, pending, use_ts, gaussian, sigma, beta, rng):  # pragma: no cover - compiled
    """One top-two decision; returns (arm to pull, leader), leader = -1 during initialisation.

    Arms with no answered or pending pull are pulled first (lowest index, no randomness).
    Then: leader B = empirical best (EB) or the argmax of a posterior draw (TS: Beta(1+S, 1+T-S)
    with the Bernoulli cost, N(mu_hat, sigma^2/T) with the Gaussian cost, one draw per arm in
    index order); challenger C = argmin_{j != B} W(B, j), the GLR transportation cost at the
    virtual counts ``N = counts + pending`` (TC); pull B if ``rng.random() < beta`` else C.
    Ties go to the lower index.
    """
    n = counts.shape[0]
    for i in range(n):
        if counts[i] + pending[i] == 0:
            return i, -1
    mu, leader = _leader(sums, counts, use_ts, gaussian, sigma, rng)
    if rng.random() < beta:  # the challenger draws no randomness: find it only when it is pulled
        return leader, leader
    chal = -1
    best_w = math.inf
    nb = float(counts[leader] + pending[leader])
    for j in range(n):
        if j != leader:
            w = glr_pair_cost_s(mu[leader], nb, mu[j], float(counts[j] + pending[j]), gaussian, sigma)
            if w < best_w:
                best_w = w
                chal = j
    return chal, leader


@njit(cache=True)
def top_two_pick_allowed(sums, counts, pending, mask, use_ts, gaussian, sigma, beta,
                         rng):  # pragma: no cover - compiled
    """:func:`top_two_pick` among the arms where ``mask`` is True (at least one): (arm, leader).

    While some arm has no answered or pending pull, the allowed arm with the fewest (``N``; ties
    to the lower index, so the first allowed arm with none), leader -1. Then the rule's leader B
    over all arms and its coin, with the same draws as top_two_pick: B if B is allowed and the
    coin picks it, else the allowed arm with the best challenger statistic, ``argmin_{j != B,
    allowed} W(B, j)`` at the virtual counts; B itself if it is the only allowed arm. With every
    arm allowed: top_two_pick's decision.
    """
    n = counts.shape[0]
    init = False
    lo = -1
    for i in range(n):
        N = counts[i] + pending[i]
        if N == 0:
            init = True
        if mask[i] and (lo < 0 or N < counts[lo] + pending[lo]):
            lo = i
    if init:
        return lo, -1
    mu, leader = _leader(sums, counts, use_ts, gaussian, sigma, rng)
    if rng.random() < beta and mask[leader]:
        return leader, leader
    chal = -1
    best_w = math.inf
    nb = float(counts[leader] + pending[leader])
    for j in range(n):
        if j != leader and mask[j]:
            w = glr_pair_cost_s(mu[leader], nb, mu[j], float(counts[j] + pending[j]), gaussian, sigma)
            if w < best_w or chal < 0:
                best_w = w
                chal = j
    return (chal if chal >= 0 else leader), leader


class TopTwo(KinfStopMixin, Learner):
    """Top-two sampling (EB-TC / TS-TC) with the GLR (Chernoff) stopping rule.

    ALGORITHMS.md 13.2: a leader B (empirical best, ``leader="eb"``, or Thompson sampling,
    ``leader="ts"``) and a Transportation-Cost challenger ``C = argmin_{j != B} W(B, j)``;
    pull B with probability ``beta`` (randomised with ``rng_.random()``), else C. Stop as
    Track-and-Stop: when ``Z(t) = min_{b != a_hat} W(a_hat, b)`` exceeds ``beta(t, delta)``,
    output ``a_hat``. With beta = 1/2 top-two rules are asymptotically beta-optimal
    (Russo 2016; Jourdan et al. 2022).

    Parameters
    ----------
    delta : float, default=0.1
        Error probability.
    leader : {"eb", "ts"}, default="eb"
        Empirical-best leader or a Thompson-sampling leader (TTTS-style; the challenger is
        still TC, not re-sampling).
    cost : {"gaussian", "bernoulli"}, default="gaussian"
        Transportation cost W for the challenger and the stop: Gaussian
        ``(mu_B - mu_j)^2/(2 sigma^2 (1/N_B + 1/N_j))`` (valid for any sigma-sub-Gaussian
        rewards, [0, 1] with sigma = 1/2), or the Bernoulli KL form (rewards in [0, 1]; means
        are clipped to [0, 1]). The Gaussian default keeps the learner usable on unbounded
        rewards.
    beta : float, default=0.5
        Probability of pulling the leader.
    threshold : {"practical", "theory"}, default="practical"
        ``log((log t + 1)/delta)`` (common in practice) or ``log(2 t (n-1)/delta)`` (proven for the
        Bernoulli cost, GK16); with ``stop="kinf"``, "theory" is
        :func:`~purebandits.glr_thresholds.kinf_kt_pair_threshold` per pair, proven for that statistic.
    sigma : float, default=0.5
        Sub-Gaussian scale of the Gaussian cost and of the TS leader's posterior.
    stop : {"glr", "kinf"}, default="glr"
        The stopping statistic: the GLR of ``cost``, or the GLR of the rewards' own model, every distribution on
        ``support`` (K_inf, :mod:`purebandits.kinf_glr`), which on ratings is 1.3-2 times larger for the same
        answers. The leader and challenger still use ``cost``. With "kinf" the ask/tell path is the O(n)
        reference rule (the incremental workspace keeps the cost's stop).
    support : tuple of 2 or 3 floats, default=(0.0, 0.5, 1.0)
        The values the rewards take (``stop="kinf"`` only; another reward is a ``ValueError``).

    Notes
    -----
    Every arm is pulled once first. Pending pulls count in the challenger's costs (virtual
    pulls), not in the means, the TS posterior or the stop.

    Restricted asks (``ask(n, allowed=...)``, :func:`top_two_pick_allowed`): the rule's leader
    and coin as unrestricted; the leader if the coin picks it and it is allowed, otherwise the
    allowed arm with the best challenger statistic ``argmin W(B, j)`` over the allowed ``j != B``
    (the leader if it is the only allowed arm); before every arm has a pull, the allowed arm with
    the fewest. With every arm allowed, the unrestricted decision. The GLR stop's correctness
    does not depend on the sampling rule (GK16 Thm 10 with ``threshold="theory"`` and the
    Bernoulli cost, "whatever the sampling strategy"; the practical threshold is not proven,
    restricted or not). What the restriction can cost is the allocation the top-two analysis
    needs for beta-optimality (the leader pulled a fraction beta of the time): a leader often
    excluded falls behind and the stop comes later.

    References
    ----------
    D. Russo. Simple Bayesian algorithms for best arm identification. COLT 2016.
    M. Jourdan, R. Degenne, D. Baudry, R. de Heide, E. Kaufmann. Top two algorithms revisited.
    NeurIPS 2022. A. Garivier, E. Kaufmann, COLT 2016 (GLR stopping).
    """

    name = "top_two"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Russo 2016 / Jourdan et al. NeurIPS 2022 (top-two, TC challenger) + Garivier-Kaufmann GLR stop"
    invalid_params = [("leader", "ucb"), ("cost", "poisson"), ("beta", 0.0), ("beta", 1.0),
                      ("threshold", "x"), ("sigma", 0.0), ("stop", "lucb"), ("support", (0.5,))]

    def __init__(self, delta: float = 0.1, *, leader: str = "eb", cost: str = "gaussian", beta: float = 0.5,
                 threshold: str = "practical", sigma: float = 0.5, stop: str = "glr",
                 support: tuple[float, ...] = RATINGS) -> None:
        self.delta = delta
        self.leader = leader
        self.cost = cost
        self.beta = beta
        self.threshold = threshold
        self.sigma = sigma
        self.stop = stop
        self.support = support

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("leader", self.leader, allowed=("eb", "ts"))
        check_param("cost", self.cost, allowed=("gaussian", "bernoulli"))
        check_param("beta", self.beta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("threshold", self.threshold, allowed=("practical", "theory"))
        check_param("sigma", self.sigma, low=0.0, low_open=True)
        check_param("stop", self.stop, allowed=("glr", "kinf"))
        check_support(self.support)

    def _resolve(self) -> None:
        self._ts = self.leader == "ts"
        self._gauss = self.cost == "gaussian"
        self._theory = self.threshold == "theory"
        self._last_leader = -1
        self._inc = None  # the incremental workspace: a cache of the state, rebuilt on first use

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_inc", None)  # holds a memoryview; __setstate__ -> _resolve resets it
        return state

    def _restore(self) -> None:
        self._inc = None  # code that writes the state arrays directly calls this to drop the workspace
        self._kstop = None  # the K_inf stop's cache of the state (KinfStopMixin): rebuilt from the arrays

    def _reference_ask_one(self) -> int:
        """The O(n) rule, :func:`top_two_pick` (the incremental path must agree with it)."""
        arm, lead = top_two_pick(self.sums_, self.counts_, self.pending_, self._ts, self._gauss,
                                 float(self.sigma), float(self.beta), self.rng_)
        self._last_leader = int(lead)  # for inspection and tests; not state
        return int(arm)

    def _ask_one(self) -> int:
        # Learner.ask's per-arm hook changes pending_ behind the workspace's virtual counts
        inc = self._inc
        if inc is not None and not self._ts:
            self._inc = None
        return self._reference_ask_one()

    # ------------------------------------------------------------------ incremental ask/tell
    # The workspace (purebandits.algorithms.kernels.top_two_incremental) keeps the means, the EB leader,
    # the challenger's classes and the GLR hint between calls: the same decisions as the reference
    # rule above, without its O(n) passes (the TS leader's n posterior draws per ask remain, and its
    # stop does not use the classes). A cache of counts_, sums_ and pending_: built on
    # first use, dropped by _resolve (start, load_state_dict, unpickling) and run_compiled, never
    # part of state_dict.

    #: False makes every call use the reference rule (for tests and comparisons)
    _incremental = True
    _inc: tuple | None = None  # class default: ask/tell before start take the checked path

    def _inc_state(self) -> tuple | None:
        """The workspace, built on first use; None where the reference rule runs."""
        inc = self._inc
        if inc is not None:
            return inc
        if not self._incremental or not hasattr(self, "n_arms_") or self.done_ or self.stop == "kinf":
            return None
        fw, iw = tt_new(self.counts_, self.sums_, self.pending_, not self._ts)
        inc = (self.counts_, self.sums_, self.sumsq_, self.pending_, fw, iw, memoryview(iw[-1]), self._gauss,
               float(self.sigma), float(self.beta), float(self.n_arms_), float(self.delta), self._theory, self._ts,
               self.n_arms_)
        self._inc = inc
        return inc

    def _ask_allowed(self, mask: np.ndarray) -> int:
        arm, lead = top_two_pick_allowed(self.sums_, self.counts_, self.pending_, mask, self._ts, self._gauss,
                                         float(self.sigma), float(self.beta), self.rng_)
        arm = int(arm)
        self._last_leader = int(lead)
        inc = self._inc
        if inc is not None and not self._ts:
            # the EB workspace follows every change of pending_; Learner.ask adds this pull right after
            # the hook returns (its contract), so the workspace is told now, with pending_ as it will be
            counts, pending = inc[0], inc[3]
            before = int(counts[arm] + pending[arm])
            pending[arm] += 1
            tt_note(counts, pending, inc[4], inc[5], arm, before)
            pending[arm] -= 1
        return arm

    def ask(self, n: int = 1, allowed: ArrayLike | None = None) -> list[int]:
        """Return up to ``n`` arms to pull next; ``[]`` once done (incremental path with the EB leader).

        ``allowed`` restricts the choice (:meth:`Learner.ask`, :func:`top_two_pick_allowed`).
        """
        if allowed is not None:
            return Learner.ask(self, n, allowed)
        inc = self._inc
        if inc is None:
            inc = self._inc_state() if hasattr(self, "n_arms_") else None
            if inc is None:
                return Learner.ask(self, n)
        if inc[13]:  # TS leader: n posterior draws per ask, the reference rule (the stop stays incremental)
            return Learner.ask(self, n)
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        if self.done_:
            return []
        counts, _, _, pending, fw, iw, scal, gauss, sigma, beta = inc[:10]
        out: list[int] = []
        for _ in range(n):
            u = self.rng_.random() if scal[0] == 0 else 0.0  # drawn only after the initialisation, as the rule does
            arm, self._last_leader = tt_ask(counts, pending, fw, iw, u, gauss, sigma, beta)
            out.append(arm)
        return out

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` that was asked before.

        With the workspace built, an ``int`` arm in range and a finite ``float`` reward, one
        compiled call records it and runs the stop test; anything else goes through
        :meth:`Learner.tell`.
        """
        if self.stop == "kinf":
            self._kinf_check_reward(reward)
        inc = self._inc
        if inc is None or arm.__class__ is not int or reward.__class__ is not float or self.done_ \
                or not 0 <= arm < inc[14] or reward - reward != 0.0:
            return Learner.tell(self, arm, reward)
        counts, sums, sumsq, pending, fw, iw, _, gauss, sigma, _, nf, delta, theory = inc[:13]
        r = tt_tell(counts, sums, sumsq, pending, fw, iw, arm, reward, gauss, sigma, float(self.t_ + 1), nf, delta,
                    theory)
        if r == -2:
            raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
        self.t_ += 1
        if r >= 0:
            self._finish([r])

    def _on_tell(self, arm: int, reward: float) -> None:
        inc = self._inc
        if inc is not None:
            if self.done_:
                self._inc = None  # no decision follows the stop
            else:
                tt_told(inc[0], inc[1], inc[3], inc[4], inc[5], arm)

    def _on_cancel(self, arm: int) -> None:
        inc = self._inc
        if inc is not None and not self._ts:  # (the TS leader's asks do not keep the virtual counts)
            before = int(self.counts_[arm] + self.pending_[arm]) + 1
            tt_note(inc[0], inc[3], inc[4], inc[5], arm, before)

    def _glr(self) -> tuple[int, float, float]:
        """(empirical best arm, GLR statistic Z(t), threshold beta(t, delta)) on the answered pulls."""
        best, z = glr_statistic_s(self.sums_, self.counts_, self._gauss, float(self.sigma))
        return int(best), float(z), float(glr_threshold_s(float(self.t_), float(self.n_arms_), float(self.delta),
                                                          self._theory))

    def _check_stop(self) -> None:
        if self.stop == "kinf":
            self._kinf_check_stop()
            return
        inc = self._inc_state()
        if inc is not None:
            best = tt_stop(inc[0], inc[1], inc[3], inc[4], inc[5], inc[7], inc[8], float(self.t_), inc[10], inc[11],
                           inc[12])
            if best >= 0:
                self._finish([int(best)])
            return
        best, z, thr = self._glr()
        if z > thr:
            self._finish([best])

    def _stopping_progress(self) -> StoppingProgress:
        """GLR stop (GK16 Sec. 3, as :class:`TrackAndStop`): ``statistic = Z(t)``, ``threshold = beta(t, delta)``.

        Strict (fires at margin > 0); ``fraction = min(1, Z/beta)``. ``Z = 0`` while an arm has no answer.
        """
        if self.stop == "kinf":
            return self._kinf_progress("top-two sampling")
        _, z, thr = self._glr()
        beta = "log(2 t (n-1)/delta)" if self._theory else "log((log t + 1)/delta)"
        return statistic_progress(z, thr, z > thr, (
            f"stops when the evidence that the leading item is best (the {self.cost} GLR statistic) exceeds "
            f"{beta}, delta = {self.delta:g} (Garivier and Kaufmann 2016)"))

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if self.stop == "kinf":
            raise NotImplementedError("top_two with stop='kinf' has no compiled kernel (the ask/tell loop decides "
                                      "it at amortised O(1) per answer)")
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        self._inc = None  # the kernel changes the state arrays in place
        stop, t = _top_two_kernel(self.counts_, self.sums_, self.sumsq_, self.pending_, self._ts, self._gauss,
                                  float(self.sigma), float(self.beta), float(self.delta), self._theory,
                                  int(max_pulls), self.rng_, *stream.args())
        self.t_ = int(t)
        if stop >= 0:
            self._finish([int(stop)])


@njit(cache=True)
def _top_two_kernel(counts, sums, sumsq, pending, use_ts, gaussian, sigma, beta, delta, theory, max_pulls,
                    own_rng, kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    hint = -1  # the GLR statistic's last minimiser (glr_stop_s: the same decisions as glr_statistic_s)
    while total < max_pulls:
        arm, _lead = top_two_pick(sums, counts, pending, use_ts, gaussian, sigma, beta, own_rng)
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        best, stop, hint = glr_stop_s(sums, counts, gaussian, sigma,
                                      glr_threshold_s(float(total), float(n), delta, theory), hint)
        if stop:
            return best, total
    return -1, total
