"""The LUCB family of fixed-confidence top-K learners: one machine, pluggable bounds and rules.

Every learner here is the same loop (KTAS12): after one pull of each arm, let TOP be the K
arms with the highest empirical means, ``h`` the arm of TOP with the lowest lower confidence
bound and ``l`` the other arm with the highest upper confidence bound; stop and output TOP
when ``lcb_h`` clears ``ucb_l``, else sample the critical pair. The learners differ only in

- the **confidence bound** (an integer code and a parameter vector, evaluated by the one
  compiled function :func:`~purebandits.algorithms.kernels.lucb_rules.family_bound_s`): LUCB1's
  Hoeffding-type radius, KL-LUCB's KL bound, the finite-LIL radius, the lil-KLUCB KL/SG bounds;
  and the confidence split between TOP (``w_top``) and the other arms (``w_bot``);
- the **sampling rule**: pull both h and l (LUCB1, KL-LUCB, lil'LUCB, LUCB++, lil-KLUCB), or
  one of them at random, h with probability ``T_l/(T_h+T_l)`` (lil'RandLUCB, KLRandLUCB);
- the **stop comparison**: strict (``ucb_l - lcb_h < epsilon``) or lil'RandLUCB's ``>=``.

So a new combination is a subclass that sets those three things, e.g. :class:`KLRandLUCB` (the
lil-KLUCB bound with the randomised rule). The compiled driver
(:func:`~purebandits.algorithms.kernels.lucb_driver.family_kernel`) is shared by all of them.

Concurrency: ``ask`` returns h and queues l (``queued_``); the next ``ask`` pops l. The
sampling decision uses answered plus pending pulls for the radius ("virtual pulls") and means
of answered pulls; the stopping rule uses answered pulls only, so it never trusts an answer
that has not arrived. The stop test runs after every answer, with the round index ``t`` of
the next round (``rounds_ + 1``).

Cost per call: ask, tell and cancel make the same decisions as the O(n) reference rule
:meth:`_LUCBFamily._reference_ask_one` without its pass over the n bounds: O(log n) for the
round-free bounds (every learner here but LUCB1 and KL-LUCB;
:mod:`~purebandits.algorithms.kernels.lucb_incremental`), and for LUCB1 and KL-LUCB, whose bounds move
with the round, amortised O(log n) with window keys over classes of equal arms
(:mod:`~purebandits.algorithms.kernels.lucb_round_asktell`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from purebandits.algorithms.kernels.kinf_stop import RATINGS, KinfStopMixin, check_support
from purebandits.algorithms.kernels.lucb_driver import family_kernel
from purebandits.algorithms.kernels.lucb_incremental import (
    inc_ask,
    inc_ask_allowed,
    inc_new,
    inc_note,
    inc_progress,
    inc_stop,
    inc_tell,
    inc_told,
    incremental_supported,
)
from purebandits.algorithms.kernels.lucb_round_asktell import (
    NZERO,
    rat_ask,
    rat_new,
    rat_note,
    rat_pair,
    rat_stop,
    rat_tell,
    rat_told,
    round_asktell_supported,
)
from purebandits.algorithms.kernels.lucb_rules import (
    BOUND_KINF_KT,
    BOUND_KL_KT,
    BOUND_KL_LUCB,
    BOUND_LIL,
    BOUND_LIL_KL,
    BOUND_LIL_KL_EXACT,
    BOUND_LUCB,
    BOUND_SG1,
    BOUND_SG2,
    N_BP,
    RULE_PAIR,
    RULE_RANDOM,
    family_bound_s,
    family_select,
    family_time_term,
    random_pick,
    separated_count,
    stop_test,
)
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import c_epsilon, lil_kl_c, lil_kl_kappa
from purebandits.instances.rewards import Bernoulli, Categorical, RewardStream
from purebandits.ranking import topk_fill
from purebandits.stopping import separation_progress

__all__ = ["LUCB1", "KLLUCB", "LilLUCB", "LUCBPlusPlus", "LilRandLUCB", "LilKLUCB", "KLRandLUCB"]


def _bp(**values: float) -> np.ndarray:
    """The bound parameter vector (layout in ``kernels.lucb_rules``); unset entries are 0."""
    names = ["w_top", "w_bot", "eps", "sigma", "offset", "k1", "alpha", "N", "kappa_top", "kappa_bot", "c_N",
             "n", "nv", "v0", "v1", "v2"]
    bp = np.zeros(N_BP)
    for key, val in values.items():
        bp[names.index(key)] = float(val)
    return bp


class _LUCBFamily(KinfStopMixin, Learner):
    """Shared machinery of the LUCB family (see the module docstring).

    Subclasses set ``_rule`` (pair or random), ``_strict`` (stop comparison) and implement
    :meth:`_bound` returning the bound code and its parameter vector; ``_eps_stop`` is the
    PAC tolerance (0 unless the learner has an ``epsilon`` in the PAC sense).

    Restricted asks (``ask(n, allowed=...)``, a participant rates each item once), for every
    learner of the family:

    1. the queued second arm of a pair, if allowed (else it stays queued, for the next ask that
       allows it: the pair rule's l is pulled as soon as some participant can rate it);
    2. during the initialisation, the allowed unanswered arm with the fewest pending pulls (lowest
       index);
    3. else a sampling decision (``rounds_`` + 1) on the sampling bounds (virtual pulls
       ``T = counts + pending``, as unrestricted) that pulls the allowed arm whose bound most
       decides the stop: the allowed top arm ``a`` with the lowest lower bound and the allowed
       other arm ``b`` with the highest upper bound, compared by their overlap with the other
       side, ``ucb_l - lcb_a`` and ``ucb_b - lcb_h`` (h and l: the unrestricted pair). h and l
       have the largest overlap, ``ucb_l - lcb_h``, so whenever one of them is allowed the arm is
       h or l (or an arm whose bound equals theirs). On a tie (``a = h`` and ``b = l`` when both
       are allowed) the family's own rule applies to the pair (a, b): the pair rule pulls a and
       queues b (if no arm is queued already), the random rule pulls a with probability
       ``T_b/(T_a + T_b)`` (``rng_``). So when h and l are both allowed the decision is the
       unrestricted one.

    Why the guarantee holds: the stop test compares per-arm anytime bounds whose failure
    probability is a union over arms and time (counts, and for LUCB1 and KL-LUCB rounds), which
    hold whatever the sampling rule; the sampling rule matters for the sample complexity only.
    LUCB1 and KL-LUCB's round-indexed bounds are unions over rounds t and counts ``u <= t``: each
    decision above counts a round, and a round gives an arm at most one pull (a pair is two
    distinct arms), so an arm's count never exceeds ``rounds_ + 1`` in a sequential run, as
    unrestricted. Cost: with the incremental workspace of the round-free bounds, O(log n) when h
    and l are both allowed, else a walk down the sampling heaps to the best allowed arm of each
    side (:func:`~purebandits.algorithms.kernels.lucb_incremental.inc_ask_allowed`); LUCB1 and KL-LUCB
    take the pair from their workspace when h and l are both allowed and the O(n) reference
    otherwise. The workspaces note the pending pull (they are not dropped).

    Attributes
    ----------
    queued_ : int
        The second arm of the current pair, asked next (-1 if none).
    rounds_ : int
        Number of sampling decisions made so far (pairs, or single pulls for random rules);
        the round index of LUCB1 / KL-LUCB bounds is ``rounds_ + 1``.
    """

    kind = "fixed_confidence"
    tags = {"top_k": True}
    _rule = RULE_PAIR
    _strict = True
    _kinf = False  # stop="kinf" (set from the parameters at start)
    _kinf_bounds = False  # form="kinf": the bounds read each arm's law on the support (set at start)

    # ------------------------------------------------------------------ parameters
    def _validate(self) -> None:
        check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)

    def _bound(self) -> tuple[int, np.ndarray]:
        raise NotImplementedError

    def _eps_stop(self) -> float:
        return 0.0

    def _resolve(self) -> None:
        self._code, self._bparams = self._bound()
        self._eps = float(self._eps_stop())
        self._in_top = np.zeros(self.n_arms_, dtype=np.bool_)
        self._lcb = np.empty(self.n_arms_)
        self._ucb = np.empty(self.n_arms_)
        self._inc = None  # the incremental workspace: a cache of the state, rebuilt on first use
        self._rinc = None  # the same for the round-dependent bounds (LUCB1, KL-LUCB)
        self._round_ws = round_asktell_supported(self._code, self._bparams, self.k_, self.n_arms_)
        self._kinf = getattr(self, "stop", "bounds") == "kinf"  # the K_inf GLR stop (_KinfStopMixin)
        self._kinf_bounds = self._code == BOUND_KINF_KT
        self._kstop = None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_inc", None)  # holds a memoryview; __setstate__ -> _resolve resets it
        state.pop("_rinc", None)
        return state

    def __deepcopy__(self, memo: dict) -> _LUCBFamily:
        """A copy with a copy of the incremental workspace, so that the owners' reports, which compute on a copy,
        reuse the exact bounds already found instead of root-finding every arm's again (the workspace is a cache of
        the state: copying it changes no decision)."""
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        inc = self._inc
        if inc is not None:
            fw, iw, top = inc[8].copy(), inc[9].copy(), inc[10].copy()
            new._inc = (inc[0], new._bparams, inc[2], inc[3], new.counts_, new.sums_, new.sumsq_, new.pending_,
                        fw, iw, top, memoryview(iw[-1]), inc[12], inc[13], inc[14])
        # LUCB1 and KL-LUCB's workspace (_rinc) is not copied: their reports are the O(n) reference's (it would
        # only be copied for nothing); a copy that asks rebuilds it
        return new

    def _restore(self) -> None:
        self._inc = None  # code that writes the state arrays directly calls this to drop the workspace
        self._rinc = None
        self._kstop = None  # the K_inf stop's cache of the state (KinfStopMixin): rebuilt from the arrays

    def _start(self) -> None:
        self.queued_ = -1
        self.rounds_ = 0

    # ------------------------------------------------------------------ rule
    def _select(self, T: np.ndarray, both_sides: bool = False) -> tuple[int, int]:
        tterm = family_time_term(self._code, self._bparams, float(self.rounds_ + 1))
        h, el = family_select(self._code, self._bparams, self.k_, self.sums_, self.sumsq_, self.counts_, T, tterm,
                              both_sides, self._in_top, self._lcb, self._ucb)
        return int(h), int(el)

    def _reference_ask_one(self) -> int:
        """The O(n) rule: :func:`family_select` from scratch (the incremental path must agree with it)."""
        if self.queued_ >= 0:
            arm, self.queued_ = int(self.queued_), -1
            return arm
        zero = np.flatnonzero(self.counts_ == 0)
        if zero.size:
            # initialisation: each arm once (KTAS12, JLQ17 Alg. 1); with concurrent asks,
            # spread over the arms still unanswered (fewest pending, then lowest index)
            return int(zero[np.argmin(self.pending_[zero])])
        T = self.counts_ + self.pending_  # virtual pulls shrink the radius, not the mean
        h, el = self._select(T)
        self.rounds_ += 1
        if self._rule == RULE_PAIR:
            self.queued_ = el
            return h
        return int(random_pick(h, el, int(T[h]), int(T[el]), self.rng_.random()))

    def _ask_one(self) -> int:
        # Learner.ask's per-arm hook: it changes pending_ behind the incremental workspace, so drop it
        self._inc = None
        self._rinc = None
        return self._reference_ask_one()

    # ------------------------------------------------------------------ restricted asks
    # ask(n, allowed=...) (see the class docstring, "Restricted asks"). The O(n) reference is
    # _reference_ask_allowed (family_select from scratch); ask() takes the workspaces' path
    # (_ask_allowed_inc, _ask_allowed_rinc), which makes the same decisions (tests/test_allowed_ask_lucb.py).

    def _ask_allowed(self, mask: np.ndarray) -> int:
        # Learner.ask's per-arm hook (the reference path, e.g. with _incremental = False): it changes pending_
        # behind the workspaces, so drop them, as _ask_one does
        self._inc = None
        self._rinc = None
        return self._reference_ask_allowed(mask)

    def _reference_ask_allowed(self, mask: np.ndarray) -> int:
        """The restricted rule from scratch (O(n)); changes ``queued_``, ``rounds_``, ``rng_`` but not ``pending_``."""
        q = self.queued_
        if q >= 0 and mask[q]:
            self.queued_ = -1
            return int(q)
        zero = np.flatnonzero(mask & (self.counts_ == 0))
        if zero.size:  # initialisation: the allowed unanswered arm with the fewest pending (lowest index)
            return int(zero[np.argmin(self.pending_[zero])])
        T = self.counts_ + self.pending_
        h, el = self._select(T)
        self.rounds_ += 1
        top = self._in_top
        a, b = -1, -1
        ma, mb = mask & top, mask & ~top
        if ma.any():
            a = int(np.flatnonzero(ma)[np.argmin(self._lcb[ma])])
        if mb.any():
            b = int(np.flatnonzero(mb)[np.argmax(self._ucb[mb])])
        crit_a = float(self._ucb[el] - self._lcb[a]) if a >= 0 else -math.inf
        crit_b = float(self._ucb[b] - self._lcb[h]) if b >= 0 else -math.inf
        return self._restricted_pick(a, b, crit_a, crit_b)

    def _restricted_pick(self, a: int, b: int, crit_a: float, crit_b: float) -> int:
        """The restricted decision from the best allowed top arm ``a`` (lowest lower bound) and other arm ``b``
        (highest upper bound), -1 when none is allowed, and their overlaps with the other side
        (``crit_a = ucb_l - lcb_a``, ``crit_b = ucb_b - lcb_h``): the larger overlap; on a tie (a = h and
        b = l when both are allowed) the family's own rule on the pair (a, b): the pair rule returns a and
        queues b (if no arm is queued already), the random rule draws h with probability T_b/(T_a + T_b)."""
        if b < 0 or (a >= 0 and crit_a > crit_b):
            return a
        if a < 0 or crit_b > crit_a:
            return b
        if self._rule == RULE_PAIR:
            if self.queued_ < 0:
                self.queued_ = b
            return a
        ta = int(self.counts_[a] + self.pending_[a])
        tb = int(self.counts_[b] + self.pending_[b])
        return int(random_pick(a, b, ta, tb, self.rng_.random()))

    # ------------------------------------------------------------------ incremental ask/tell
    # For round-free bounds, ask, tell and cancel keep the rule's quantities between calls
    # (purebandits.algorithms.kernels.lucb_incremental): O(log n) per call instead of an O(n) pass of
    # bound evaluations, the same arms bit for bit (tests/test_incremental_ask_tell.py holds them to
    # the reference rule above). The workspace is a cache of counts_, sums_ and pending_: built on
    # first use, dropped by _resolve (start, load_state_dict, unpickling) and run_compiled, and
    # never part of state_dict.

    # LUCB1 and KL-LUCB (bounds that move with the round) have their own workspace, ``_rinc``
    # (purebandits.algorithms.kernels.lucb_round_asktell): window keys over classes of equal arms, one
    # set for the stop test (answered pulls) and one for sampling (answered + pending), the same
    # arms bit for bit (tests/test_round_incremental_ask_tell.py). The round index is passed in
    # at each call: rounds_ + 1 at the ask for sampling, at the answer or cancel for the stop test.

    #: False makes every call use the O(n) reference rule (for tests and comparisons)
    _incremental = True
    _inc: tuple | None = None  # class default: ask/tell before start take the checked path
    _rinc: tuple | None = None

    def _inc_state(self) -> tuple | None:
        """The incremental workspace, built on first use; None where the reference rule runs."""
        inc = self._inc
        if inc is not None:
            return inc
        if not self._incremental or not hasattr(self, "n_arms_") or self.done_ \
                or not incremental_supported(self._code):
            return None
        fw, iw, top = inc_new(self.counts_, self.pending_)
        inc = (self._code, self._bparams, self.k_, self._rule, self.counts_, self.sums_, self.sumsq_, self.pending_,
               fw, iw, top, memoryview(iw[-1]), self._eps, self._strict, self.n_arms_)
        self._inc = inc
        return inc

    def _rinc_state(self) -> tuple | None:
        """The round-dependent bounds' workspace, built on first use; None where it does not apply."""
        rinc = self._rinc
        if rinc is not None:
            return rinc
        if not self._incremental or not getattr(self, "_round_ws", False) or self.done_:
            return None
        IW, FW, top = rat_new(self._code, self._bparams, self.k_, self._rule, self._eps, self._strict, self.counts_,
                              self.pending_)
        rinc = (self.counts_, self.sums_, self.sumsq_, self.pending_, IW, FW, top, memoryview(IW), self.n_arms_,
                self._rule)
        self._rinc = rinc
        return rinc

    def ask(self, n: int = 1, allowed: ArrayLike | None = None) -> list[int]:
        """Return up to ``n`` arms to pull next; ``[]`` once done (incremental path when it applies).

        ``allowed`` (a boolean mask or arm indices) restricts the choice: see the class docstring,
        "Restricted asks", and :meth:`Learner.ask`.
        """
        if allowed is not None:
            return self._ask_restricted(n, allowed)
        inc = self._inc
        if inc is None:
            rinc = self._rinc
            if rinc is None and hasattr(self, "n_arms_"):
                rinc = self._rinc_state()
            if rinc is not None:
                return self._ask_round(rinc, n)
            inc = self._inc_state() if hasattr(self, "n_arms_") else None
            if inc is None:
                return Learner.ask(self, n)
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        if self.done_:
            return []
        code, bp, k, rule, counts, sums, sumsq, pending, fw, iw, top, scal = inc[:12]
        out: list[int] = []
        for _ in range(n):
            q = self.queued_
            if q >= 0:
                self.queued_ = -1
                inc_note(counts, pending, fw, iw, q, 1)
                out.append(q)
            elif scal[0] > 0:  # initialisation: an arm has no answer yet
                out.append(inc_ask(code, bp, k, rule, counts, sums, sumsq, pending, fw, iw, top, 0.0)[0])
            else:
                u = self.rng_.random() if rule == RULE_RANDOM else 0.0
                arm, el = inc_ask(code, bp, k, rule, counts, sums, sumsq, pending, fw, iw, top, u)
                self.rounds_ += 1
                if rule == RULE_PAIR:
                    self.queued_ = el
                out.append(arm)
        return out

    def _ask_restricted(self, n: int, allowed: ArrayLike) -> list[int]:
        """:meth:`ask` with ``allowed``: :meth:`Learner.ask`'s contract and checks, on a workspace when there is one."""
        if not hasattr(self, "n_arms_"):
            return Learner.ask(self, n, allowed)  # raises NotStartedError
        inc = self._inc
        rinc = None
        if inc is None:
            rinc = self._rinc if self._rinc is not None else self._rinc_state()
            if rinc is None:
                inc = self._inc_state()
                if inc is None:  # the reference rule (_ask_allowed), e.g. with _incremental = False, or done
                    return Learner.ask(self, n, allowed)
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        mask = self.allowed_mask(allowed)
        if self.done_ or not mask.any():
            return []
        mask = np.ascontiguousarray(mask)
        if inc is not None:
            return [self._ask_allowed_inc(mask, inc) for _ in range(n)]
        return [self._ask_allowed_rinc(mask, rinc) for _ in range(n)]

    def _ask_allowed_inc(self, mask: np.ndarray, inc: tuple) -> int:
        """One restricted ask on the round-free bounds' workspace (the pending pull added and noted)."""
        code, bp, k, _, counts, sums, sumsq, pending, fw, iw, top, scal = inc[:12]
        q = self.queued_
        if q >= 0 and mask[q]:
            self.queued_ = -1
            arm = q
        elif scal[0] > 0:  # initialisation (an arm has no answer): the reference's O(n) rule
            arm = self._reference_ask_allowed(mask)
        else:
            a, b, crit_a, crit_b = inc_ask_allowed(code, bp, k, counts, sums, sumsq, pending, fw, iw, top, mask)
            self.rounds_ += 1
            arm = self._restricted_pick(int(a), int(b), crit_a, crit_b)
        inc_note(counts, pending, fw, iw, arm, 1)
        return arm

    def _ask_allowed_rinc(self, mask: np.ndarray, rinc: tuple) -> int:
        """One restricted ask with LUCB1 / KL-LUCB's workspace: the pair from it when h and l are both allowed
        (then the decision is the unrestricted rule's), else the O(n) reference; the pending pull is noted."""
        counts, sums, _, pending, IW, FW, top, scal = rinc[:8]
        q = self.queued_
        if q >= 0 and mask[q]:
            self.queued_ = -1
            arm = q
        elif scal[NZERO] > 0:
            arm = self._reference_ask_allowed(mask)
        else:
            h, el = rat_pair(counts, sums, pending, IW, FW, top, self.rounds_)
            if mask[h] and mask[el]:
                self.rounds_ += 1
                arm = self._restricted_pick(int(h), int(el), 0.0, 0.0)
            else:
                arm = self._reference_ask_allowed(mask)
        rat_note(counts, pending, IW, FW, arm, 1)
        return arm

    def _ask_round(self, rinc: tuple, n: int) -> list[int]:
        """:meth:`ask` on the round-dependent bounds' workspace."""
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        if self.done_:
            return []
        counts, sums, _, pending, IW, FW, top, scal, _, rule = rinc
        out: list[int] = []
        for _ in range(n):
            q = self.queued_
            if q >= 0:
                self.queued_ = -1
                rat_note(counts, pending, IW, FW, q, 1)
                out.append(q)
            elif scal[NZERO] > 0:  # initialisation: an arm has no answer yet
                out.append(rat_ask(counts, sums, pending, IW, FW, top, 0, 0.0)[0])
            else:
                u = self.rng_.random() if rule == RULE_RANDOM else 0.0
                arm, el = rat_ask(counts, sums, pending, IW, FW, top, self.rounds_, u)
                self.rounds_ += 1
                if rule == RULE_PAIR:
                    self.queued_ = el
                out.append(arm)
        return out

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` that was asked before.

        With the workspace built, an ``int`` arm in range and a finite ``float`` reward, one
        compiled call records it and runs the stop test; anything else goes through
        :meth:`Learner.tell` (which validates, converts, and keeps the workspace in step).
        """
        if self._kinf or self._kinf_bounds:  # rewards must be on the support: the checked path (_on_tell)
            self._kinf_check_reward(reward)
            return Learner.tell(self, arm, reward)
        inc = self._inc
        if inc is None:
            rinc = self._rinc
            if rinc is None or arm.__class__ is not int or reward.__class__ is not float or self.done_ \
                    or not 0 <= arm < rinc[8] or reward - reward != 0.0:
                return Learner.tell(self, arm, reward)
            r = rat_tell(*rinc[:7], arm, reward, self.rounds_)
            if r == -2:
                raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
            self.t_ += 1
            if r > 0:
                self._finish()
            return None
        if arm.__class__ is not int or reward.__class__ is not float or self.done_ \
                or not 0 <= arm < inc[14] or reward - reward != 0.0:
            return Learner.tell(self, arm, reward)
        code, bp, k, _, counts, sums, sumsq, pending, fw, iw, top, _, eps, strict, _ = inc
        r = inc_tell(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top, arm, reward)
        if r == -2:
            raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
        self.t_ += 1
        if r > 0:
            self._finish()

    def _on_tell(self, arm: int, reward: float) -> None:
        inc = self._inc
        if inc is not None:
            if self.done_:
                self._inc = None  # no decision follows the stop
            else:
                inc_told(*inc[:3], inc[4], inc[5], inc[6], inc[7], inc[8], inc[9], inc[10], arm)
        rinc = self._rinc
        if rinc is not None:
            if self.done_:
                self._rinc = None
            else:
                rat_told(rinc[0], rinc[1], rinc[3], rinc[4], rinc[5], rinc[6], arm)

    def _on_cancel(self, arm: int) -> None:
        inc = self._inc
        if inc is not None:
            inc_note(inc[4], inc[7], inc[8], inc[9], arm, 0)
        rinc = self._rinc
        if rinc is not None:
            rat_note(rinc[0], rinc[3], rinc[4], rinc[5], arm, 0)

    def _stop_pair(self) -> tuple[int, int] | None:
        """The stop test's pair (h, l) on the answered pulls (bounds left in ``_lcb``/``_ucb``).

        None before every arm has an answer (infinite bounds: the rule is not tested).
        """
        if (self.counts_ == 0).any():
            return None
        return self._select(self.counts_)

    def _check_stop(self) -> None:
        if self._kinf:  # every pair settled by the K_inf test or the bounds (_bounds_settle): covers the bounds' stop
            self._kinf_check_stop()
            return
        if self._round_ws:
            rinc = self._rinc_state()
            if rinc is not None:
                counts, sums, _, pending, IW, FW, top = rinc[:7]
                if rat_stop(counts, sums, pending, IW, FW, top, self.rounds_) > 0:
                    self._finish()
                return
        inc = self._inc_state()
        if inc is not None:
            code, bp, k, _, counts, sums, sumsq, pending, fw, iw, top, _, eps, strict, _ = inc
            if inc_stop(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw, top) > 0:
                self._finish()
            return
        pair = self._stop_pair()
        if pair is not None and stop_test(self._lcb[pair[0]], self._ucb[pair[1]], self._eps, self._strict):
            self._finish()

    def _stop_description(self) -> str:
        k = self.k_
        who = "the leader's lower bound" if k == 1 else f"the lowest lower bound among the top {k} items"
        cmp = "is above" if self._strict else "is at or above"
        eps = f" minus epsilon = {self._eps:g}" if self._eps > 0 else ""
        return (f"stops when {who} {cmp} every other item's upper bound{eps} "
                f"({self._bound_label()}, delta = {self.delta:g})")

    def _bound_label(self) -> str:
        return type(self).__name__ + " bounds"

    def _stopping_progress(self) -> StoppingProgress:
        """LUCB stop (KTAS12 Sec. 3; strict ``ucb_l - lcb_h < eps``, lil'RandLUCB's ``<=``).

        ``fraction`` = share of the arms outside the empirical top-K whose upper bound already
        passes the test against ``lcb_h`` (:func:`separated_count`; 1 exactly when the test
        holds), ``margin = eps - (ucb_l - lcb_h)``. The bounds are those of the stop test
        (answered pulls, round index ``rounds_ + 1``); before every arm has an answer the rule
        is not tested and nothing is separated.
        """
        if self._kinf:
            return self._kinf_progress(f"{type(self).__name__}'s sampling")
        of = self.n_arms_ - self.k_
        desc = self._stop_description()
        inc = self._inc_state()
        if inc is not None:
            # the workspace's stop bounds: exact values are computed only for the arms whose bracket
            # leaves the test open (at most those whose count changed since the last call)
            code, bp, k, _, counts, sums, sumsq, pending, fw, iw, top, _, eps, strict, _ = inc
            h, _el, lcb_h, ucb_l, n_sep = inc_progress(code, bp, k, eps, strict, counts, sums, sumsq, pending, fw, iw,
                                                       top)
            if h < 0:
                return StoppingProgress(fraction=0.0, separated=0, of=of, description=desc)
            holds = bool(stop_test(lcb_h, ucb_l, self._eps, self._strict))
            return separation_progress(float(lcb_h), float(ucb_l), holds, int(n_sep), of, self._eps, desc)
        pair = self._stop_pair()
        if pair is None:
            return StoppingProgress(fraction=0.0, separated=0, of=of, description=desc)
        lcb_h, ucb_l = float(self._lcb[pair[0]]), float(self._ucb[pair[1]])
        holds = bool(stop_test(lcb_h, ucb_l, self._eps, self._strict))
        n_sep = int(separated_count(lcb_h, self._ucb, self._in_top, self._eps, self._strict))
        return separation_progress(lcb_h, ucb_l, holds, n_sep, of, self._eps, desc)

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """This learner's own (lower, upper) bounds from the answered pulls.

        Arms in the empirical top-K use the top confidence level ``w_top``, the others
        ``w_bot``; the round index is ``rounds_ + 1``; arms never answered get (-inf, inf).
        """
        self._require_started()
        self._select(self.counts_, both_sides=True)
        return self._lcb.copy(), self._ucb.copy()

    def intervals_of(self, arms: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`intervals` of ``arms`` only: the same call per arm (:func:`family_bound_s`), so the same bits,
        with O(n) work for the top-K membership but bounds only for the arms asked."""
        self._require_started()
        idx = np.asarray(arms, dtype=np.int64)
        means = self.means()
        in_top = np.zeros(self.n_arms_, dtype=np.bool_)
        topk_fill(means, self.k_, in_top)
        tterm = family_time_term(self._code, self._bparams, float(self.rounds_ + 1))
        lo, hi = np.full(idx.shape, -np.inf), np.full(idx.shape, np.inf)
        for j, a in enumerate(idx.tolist()):
            c = int(self.counts_[a])
            if c > 0:
                lo[j], hi[j] = family_bound_s(self._code, self._bparams, float(means[a]), float(self.sumsq_[a] / c),
                                              float(c), bool(in_top[a]), tterm, 0)
        return lo, hi

    # ------------------------------------------------------------------ compiled driver
    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Sequential run with the family's compiled kernel (same state as ask(1)/tell)."""
        if self._kinf:
            raise NotImplementedError(f"{type(self).__name__} with stop='kinf' has no compiled kernel (the ask/tell "
                                      "loop runs it)")
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        if self._kinf_bounds:
            _check_stream_support(stream, self.support)
        self._inc = None  # the kernel changes the state arrays in place
        self._rinc = None
        done, queued, rounds, t = family_kernel(
            self._code, self._rule, self._strict, self._eps, self._bparams, self.k_, self.counts_, self.sums_,
            self.sumsq_, int(self.queued_), int(self.rounds_), int(max_pulls), self.rng_, *stream.args(),
        )
        self.queued_, self.rounds_, self.t_ = int(queued), int(rounds), int(t)
        if done:
            self._finish()


def _check_stream_support(stream: RewardStream, support: tuple[float, ...]) -> None:
    """ValueError unless every reward the stream can draw is on ``support`` (the K_inf bounds read each arm's law
    there from its count, sum and sum of squares): a Categorical model's values, or {0, 1} for Bernoulli arms."""
    model = stream.model
    values = {Bernoulli: (0.0, 1.0), Categorical: tuple(np.asarray(model.values).ravel())}.get(type(model))
    if values is None or any(not any(float(x) == v for v in support) for x in values):
        raise ValueError(f"form='kinf' needs rewards on the support {list(support)}; the instance draws "
                         f"{type(model).__name__} rewards")


# ====================================================================================== LUCB1
class LUCB1(_LUCBFamily):
    """LUCB1 (Kalyanakrishnan, Tewari, Auer, Stone, ICML 2012) for the top-K arms.

    Radius ``beta(u, t) = sqrt(2 sigma^2 log(k1 n t^4 / delta) / u)`` with ``k1 = 5/4``
    (KTAS12 Sec. 3, eq. for beta; sigma = 1/2 gives ``sqrt(log(k1 n t^4/delta)/(2u))`` for
    rewards in [0, 1]); u = the arm's pulls, t = the round index. Stop when
    ``(mu_l + beta_l) - (mu_h - beta_h) < epsilon`` and output the empirical top-K; otherwise
    pull both h and l.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"); each decision counts
    a round, so an arm's count stays within ``rounds_ + 1`` and the round-indexed bound (a union
    over rounds t and counts u <= t) still covers it: the guarantee is unchanged.

    Parameters
    ----------
    k : int, default=1
        Number of top arms to identify.
    delta : float, default=0.1
        Error probability.
    epsilon : float, default=0.0
        PAC tolerance (>= 0): the output is (epsilon, K)-optimal.
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards.
    k1 : float, default=1.25
        The constant of the exploration rate (KTAS12: 5/4).

    Notes
    -----
    The round index starts at t = 1 for the first round after the initial pull of every arm
    (KTAS12 do not fix the offset; ALGORITHMS.md 3). With epsilon = 0 the output is exactly
    the top-K.

    References
    ----------
    S. Kalyanakrishnan, A. Tewari, P. Auer, P. Stone. PAC Subset Selection in Stochastic
    Multi-armed Bandits. ICML 2012.
    """

    name = "lucb1"
    paper = "Kalyanakrishnan, Tewari, Auer, Stone, ICML 2012 (LUCB1, Sec. 3, beta(u,t) with k1 = 5/4)"

    def __init__(self, k: int = 1, *, delta: float = 0.1, epsilon: float = 0.0, sigma: float = 0.5,
                 k1: float = 1.25) -> None:
        self.k = k
        self.delta = delta
        self.epsilon = epsilon
        self.sigma = sigma
        self.k1 = k1

    def _validate(self) -> None:
        super()._validate()
        check_param("epsilon", self.epsilon, low=0.0)
        check_param("sigma", self.sigma, low=0.0, low_open=True)
        check_param("k1", self.k1, low=0.0, low_open=True)

    def _eps_stop(self) -> float:
        return float(self.epsilon)

    def _bound_label(self) -> str:
        return "LUCB1 bounds, KTAS12 beta(u, t)"

    def _bound(self) -> tuple[int, np.ndarray]:
        d = float(self.delta)
        return BOUND_LUCB, _bp(w_top=d, w_bot=d, sigma=self.sigma, k1=self.k1, n=self.n_arms_)


# ===================================================================================== KL-LUCB
class KLLUCB(_LUCBFamily):
    """KL-LUCB (Kaufmann and Kalyanakrishnan, COLT 2013) for the top-K arms, rewards in [0, 1].

    Bounds ``U_a = kl_up(mu_a, beta(t, delta)/T_a)`` and ``L_a = kl_low(mu_a, beta(t, delta)/T_a)``
    with the exploration rate ``beta(t, delta) = log(k1 n t^alpha / delta)`` (KK13 Sec. 2,
    Theorem 1 condition ``k1 > 2e + 1 + e/(alpha-1) + (e+1)/(alpha-1)^2``; the experiments use
    alpha = 1.1, k1 = 405.5). Stop when ``U_l - L_h < epsilon``; otherwise pull h and l.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"); each decision counts
    a round, so an arm's count stays within ``rounds_ + 1`` and the round-indexed bound (a union
    over rounds t and counts u <= t) still covers it: the guarantee is unchanged.

    Parameters
    ----------
    k : int, default=1
        Number of top arms.
    delta : float, default=0.1
        Error probability.
    epsilon : float, default=0.0
        PAC tolerance (>= 0).
    alpha : float, default=1.1
        Exponent of t in the exploration rate (> 1).
    k1 : float, default=405.5
        Constant of the exploration rate.

    References
    ----------
    E. Kaufmann, S. Kalyanakrishnan. Information Complexity in Bandit Subset Selection.
    COLT 2013.
    """

    name = "kl_lucb"
    tags = {"top_k": True, "bounded_rewards": True}
    paper = "Kaufmann & Kalyanakrishnan, COLT 2013 (KL-LUCB, Sec. 2, beta(t,delta) = log(k1 n t^alpha/delta))"

    def __init__(self, k: int = 1, *, delta: float = 0.1, epsilon: float = 0.0, alpha: float = 1.1,
                 k1: float = 405.5) -> None:
        self.k = k
        self.delta = delta
        self.epsilon = epsilon
        self.alpha = alpha
        self.k1 = k1

    def _validate(self) -> None:
        super()._validate()
        check_param("epsilon", self.epsilon, low=0.0)
        check_param("alpha", self.alpha, low=1.0, low_open=True)
        check_param("k1", self.k1, low=0.0, low_open=True)

    def _eps_stop(self) -> float:
        return float(self.epsilon)

    def _bound_label(self) -> str:
        return "KL-LUCB bounds, KK13"

    def _bound(self) -> tuple[int, np.ndarray]:
        d = float(self.delta)
        return BOUND_KL_LUCB, _bp(w_top=d, w_bot=d, alpha=self.alpha, k1=self.k1, n=self.n_arms_)


# ===================================================================================== LIL family
class _LilBase(_LUCBFamily):
    """LUCB with the finite-LIL radius U(T, w) (ALGORITHMS.md 0.1) and the JLQ17 presets.

    ``preset="faithful"`` (JLQ17 Sec. 5): eps = 0.01 and delta' = delta / c_eps, so that the
    union bound ``c_eps delta' <= delta`` of JLQ17 Thm 3.1 holds (4.73e-7 at delta = 0.01).
    ``preset="heuristic"`` (JLQ17 Sec. 5, JMNB14 Sec. 5): eps = 0, delta' = delta (no
    guarantee; "sufficient for any practical usage"). ``plus2=True`` uses
    ``log((1+eps) T + 2)`` inside the iterated logarithm (JLQ17 Sec. 5), which every
    comparison in JLQ17 used and which keeps U finite at T = 1 with eps = 0.
    """

    def __init__(self, k: int = 1, *, delta: float = 0.1, preset: str = "heuristic", epsilon: float | None = None,
                 sigma: float = 0.5, plus2: bool = True) -> None:
        self.k = k
        self.delta = delta
        self.preset = preset
        self.epsilon = epsilon
        self.sigma = sigma
        self.plus2 = plus2

    def _validate(self) -> None:
        super()._validate()
        check_param("preset", self.preset, allowed=("heuristic", "faithful"))
        if self.epsilon is not None:
            check_param("epsilon", self.epsilon, low=0.0, high=1.0, high_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)
        check_param("plus2", self.plus2, allowed=(True, False))
        if self.preset == "faithful" and self.epsilon is not None and self.epsilon <= 0:
            raise ValueError("epsilon must be > 0 with preset='faithful' (c_eps is infinite at 0)")

    def _lil_eps_delta(self) -> tuple[float, float]:
        if self.preset == "faithful":
            eps = 0.01 if self.epsilon is None else float(self.epsilon)
            return eps, float(self.delta) / c_epsilon(eps)
        eps = 0.0 if self.epsilon is None else float(self.epsilon)
        return eps, float(self.delta)

    def _split(self, d: float) -> tuple[float, float]:
        """(w_top, w_bot) for the internal confidence d."""
        raise NotImplementedError

    def _bound_label(self) -> str:
        return f"finite-LIL bounds of {self.name}, {self.preset} preset"

    def _bound(self) -> tuple[int, np.ndarray]:
        eps, d = self._lil_eps_delta()
        w_top, w_bot = self._split(d)
        return BOUND_LIL, _bp(w_top=w_top, w_bot=w_bot, eps=eps, sigma=self.sigma,
                              offset=2.0 if self.plus2 else 0.0, n=self.n_arms_)


class LilLUCB(_LilBase):
    """lil'LUCB (Jamieson and Nowak, CISS 2014): LUCB with ``U(T_i, delta/n)`` for every arm.

    h = the top arm with the lowest ``mu - U(T, delta'/n)``, l = the other arm with the highest
    ``mu + U(T, delta'/n)`` (JN14; JLQ17 Sec. 1 and footnote 4); stop when
    ``mu_h - U_h > mu_l + U_l`` (strict), else pull both. Top-K: the same delta'/n for every
    arm (JLQ17 footnote 2), so it coincides with :class:`LUCBPlusPlus` when K = n/2.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"): the queued l if
    allowed (else it waits for an ask that allows it), h and l when both are allowed, otherwise
    the allowed arm whose bound overlaps the other side most; the stop's anytime bounds hold
    whatever the sampling, so the guarantee is unchanged.

    Parameters
    ----------
    k : int, default=1
        Number of top arms.
    delta : float, default=0.1
        Target error probability nu.
    preset : {"heuristic", "faithful"}, default="heuristic"
        JLQ17 Sec. 5 settings (see ``_LilBase``): faithful eps = 0.01, delta' = nu/c_eps;
        heuristic eps = 0, delta' = nu.
    epsilon : float or None
        Override the preset's LIL epsilon (in [0, 1); > 0 for "faithful").
    sigma : float, default=0.5
        Sub-Gaussian scale.
    plus2 : bool, default=True
        Use ``log((1+eps)T + 2)`` in U (JLQ17 Sec. 5) instead of ``log((1+eps)T)``.

    Notes
    -----
    Uncertain (ALGORITHMS.md 6): that CISS14 used exactly delta/n per arm; it matches JLQ17
    and the MABFDR reimplementation.

    References
    ----------
    K. Jamieson, R. Nowak. Best-arm identification algorithms for multi-armed bandits in the
    fixed confidence setting. CISS 2014.
    """

    name = "lil_lucb"
    paper = "Jamieson & Nowak, CISS 2014 (lil'LUCB; U(T, delta/n), finite LIL of JMNB14 Lemma 1)"

    def _split(self, d: float) -> tuple[float, float]:
        w = d / self.n_arms_
        return w, w


class LUCBPlusPlus(_LilBase):
    """LUCB++ (Simchowitz, Jamieson, Recht, COLT 2017): LIL bounds with an asymmetric split.

    Top arms use ``U(T, delta'/(2(n-k)))`` for their lower bound, the others
    ``U(T, delta'/(2k))`` for their upper bound (SJR17 Sec. 5 "LUCB++"; ALGORITHMS.md 5);
    stop when ``mu_h - U_h > mu_l + U_l`` (strict), else pull both h and l.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"): the queued l if
    allowed (else it waits for an ask that allows it), h and l when both are allowed, otherwise
    the allowed arm whose bound overlaps the other side most; the stop's anytime bounds hold
    whatever the sampling, so the guarantee is unchanged.

    Parameters
    ----------
    k, delta, preset, epsilon, sigma, plus2
        As in :class:`LilLUCB` (the presets are those of JLQ17 Sec. 5).

    References
    ----------
    M. Simchowitz, K. Jamieson, B. Recht. The Simulator: Understanding Adaptive Sampling in
    the Moderate-Confidence Regime. COLT 2017.
    """

    name = "lucb_plus_plus"
    paper = "Simchowitz, Jamieson, Recht, COLT 2017 (LUCB++; U(T, delta/(2(n-k))) top, U(T, delta/(2k)) rest)"

    def _split(self, d: float) -> tuple[float, float]:
        return d / (2 * (self.n_arms_ - self.k)), d / (2 * self.k)


class LilRandLUCB(LUCBPlusPlus):
    """lil'RandLUCB (Jiang, Li, Qiao 2017, Algorithm 1): LUCB++ bounds, one randomised pull.

    Radii ``U(T_i, delta'/(2(N-K)))`` on High_t and ``U(T_i, delta'/(2K))`` on Low_t; return
    High_t once ``mu_h - u_h >= mu_l + u_l`` (non-strict, Alg. 1); otherwise pull **one** arm:
    h with probability ``T_l/(T_h+T_l)``, else l (the less-pulled arm is more likely),
    drawn with ``rng_.random()``. Theorem 3.1 as printed: correct with probability
    ``>= 1 - c_eps delta'``; with both tails counted it is ``>= 1 - 2 c_eps delta'`` (Notes).

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"): h with probability
    ``T_l/(T_h+T_l)``, else l, when both are allowed; otherwise the allowed arm whose bound
    overlaps the other side most (h or l if one of them is allowed). The stop's anytime bounds
    hold whatever the sampling, so the guarantee (error <= the same multiple of delta) is
    unchanged.

    Parameters
    ----------
    k, delta, preset, epsilon, sigma, plus2
        As in :class:`LilLUCB`. The presets are JLQ17 Sec. 5's, with the faithful constant
        corrected (Notes): "faithful" eps = 0.01, ``delta' = nu/(2 c_eps)`` (2.36e-7 at
        nu = 0.01); "heuristic" eps = 0, delta' = nu; U uses ``log((1+eps)T + 2)``.

    Notes
    -----
    Deviation from JLQ17 (faithful preset only). The proof of Thm 3.1 (App. B) defines the
    event E: ``|mu_hat_{i,j} - mu_i| < U(j, delta/(2K))`` for the K arms of OPT and
    ``< U(j, delta/(2(N-K)))`` for the N-K others, for all j, and bounds its failure by
    ``K c_eps (delta/(2K))^(1+eps) + (N-K) c_eps (delta/(2(N-K)))^(1+eps) <= c_eps delta``.
    Lemma 2.1 (JMNB14 Lemma 1) gives ``c_eps w^(1+eps)`` for **one** tail, and E is
    two-sided, so the union bound over both tails of every arm is twice that:
    ``P(not E) <= 2 [K c_eps (delta/(2K))^(1+eps) + (N-K) c_eps (delta/(2(N-K)))^(1+eps)]
    <= 2 c_eps delta``. The paper's preset ``delta' = nu/c_eps`` thus only guarantees about
    ``1.7 nu`` (the factor 2 times ``(delta'/2)^eps ~ 0.86`` at nu = 0.01). We use
    ``delta' = nu/(2 c_eps)``, so the two-tailed union bound is ``<= nu`` (0.84 nu at
    nu = 0.01, N = 10, K = 2). The paper's literal constant is not offered as an option; it
    is ``preset="heuristic", epsilon=0.01, delta=nu/c_eps(0.01)`` if ever needed.
    (The error event alone needs one tail per arm: a wrong answer needs a non-OPT arm's
    upper tail or an OPT arm's lower tail to fail; E's other tails serve the sample bound.)

    Uncertain (ALGORITHMS.md 7): the eps of the faithful runs is not stated; 0.01 is assumed.
    With pending pulls the probability uses answered plus pending pulls.

    References
    ----------
    T. Jiang, J. Li, M. Qiao. Practical Algorithms for Best-K Identification in Multi-Armed
    Bandits. arXiv:1705.06894, 2017.
    """

    name = "lil_rand_lucb"
    paper = ("Jiang, Li, Qiao 2017 (lil'RandLUCB, Alg. 1, Thm 3.1; U with log((1+eps)t+2); "
             "faithful delta' = nu/(2 c_eps), both tails)")
    _rule = RULE_RANDOM
    _strict = False

    def _lil_eps_delta(self) -> tuple[float, float]:
        """(eps, delta'); faithful: ``delta' = nu/(2 c_eps)`` so that ``P(not E) <= 2 c_eps delta' = nu``
        counting both tails of every arm (JLQ17 App. B union bound corrected; class Notes)."""
        eps, d = super()._lil_eps_delta()
        return (eps, d / 2) if self.preset == "faithful" else (eps, d)


# ================================================================================== lil-KLUCB
def _lil_kl_split(delta: float, n: int, k: int) -> tuple[float, float]:
    """TNM17's confidence split generalised like LUCB++: delta/(n-k) for TOP, delta/k for the rest.

    For k = 1 this is TNM17 Sec. 2 exactly (L_TOP at delta/(n-1), U_i at delta); LUCB++ uses
    delta/(2(n-k)) and delta/(2k), and TNM17 is LUCB++ with delta -> 2 delta (ALGORITHMS.md 9.1).
    """
    return delta / (n - k), delta / k


#: the KL bounds' ``form``: TNM17 eqs. (2)-(3), TNM17's L'/U', or the Krichevsky-Trofimov level (bounds.kt_kl_level_s)
_LIL_KL_FORMS = {"exact": BOUND_LIL_KL_EXACT, "simplified": BOUND_LIL_KL, "kt": BOUND_KL_KT, "kinf": BOUND_KINF_KT}


#: with ``stop="kinf"``, the share of delta kept by the lil-KL bounds, which settle a pair when the K_inf test does not:
#: that test needs every rival sampled enough, and a sampling rule driven by the bounds can leave a rival whose
#: bound is already clear of the best with too few answers for it (its pair statistic saturates while the threshold
#: grows with the best arm's answers)
KINF_BOUNDS_SHARE = 0.1


class _LilKLBase(_LUCBFamily):
    """Shared setup of the lil-KLUCB bounds (TNM17 Theorem 2)."""

    #: TNM17 Thm 1: the top arms' lower bounds and the others' upper bounds each fail with
    #: probability at most delta, so the error is at most 2 delta
    error_per_delta = 2.0
    #: the K_inf stop's threshold (``stop="kinf"``): the proven per-pair one (KinfStopMixin reads it)
    threshold = "theory"

    @classmethod
    def error_factor(cls, params: dict[str, Any]) -> float:
        """2 with the bounds' stop (TNM17 Thm 1); 1 with ``stop="kinf"``: each pair settled by the K_inf test at
        0.9 delta (proven whatever the sampling, docs/glr_stopping.md) or by the bounds at 0.1 delta."""
        return 1.0 if params.get("stop") == "kinf" else float(cls.error_per_delta)

    def _bounds_delta(self) -> float:
        """The bounds' delta: all of it with their own stop; with ``stop="kinf"`` the bounds settle the pairs the K_inf
        test does not and get :data:`KINF_BOUNDS_SHARE` of the error (their two families fail with probability at
        most ``2 x delta x share / 2``)."""
        if getattr(self, "stop", "bounds") == "kinf":
            return float(self.delta) * KINF_BOUNDS_SHARE / 2.0
        return float(self.delta)

    def _kinf_delta(self) -> float:
        return float(self.delta) * (1.0 - KINF_BOUNDS_SHARE)

    def _kinf_settled(self) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        return self._bounds_settle

    def _bounds_settle(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Pairs (a in the empirical top k, b outside) that the bounds' test settles: ``a``'s lower bound passes
        :func:`stop_test` against ``b``'s upper bound (the bounds of the stop test: answered pulls, the top
        arms' confidence for a, the others' for b). A wrong pair passes only if a bound fails (probability at most
        2 x the bounds' delta = ``KINF_BOUNDS_SHARE`` delta), so with the K_inf test on the other pairs the error
        is at most delta. One pair: two scalar bounds; more: the O(n) :meth:`intervals`."""
        if a.size == 1:
            ia, ib = int(a[0]), int(b[0])
            tterm = family_time_term(self._code, self._bparams, float(self.rounds_ + 1))
            ca, cb = float(self.counts_[ia]), float(self.counts_[ib])
            lo = family_bound_s(self._code, self._bparams, float(self.sums_[ia] / ca), float(self.sumsq_[ia] / ca),
                                ca, True, tterm, 1)[0]
            hi = family_bound_s(self._code, self._bparams, float(self.sums_[ib] / cb), float(self.sumsq_[ib] / cb),
                                cb, False, tterm, 2)[1]
            return np.array([bool(stop_test(lo, hi, self._eps, self._strict))])
        lcb, ucb = self.intervals()
        gap = ucb[b] - lcb[a]
        return gap < self._eps if self._strict else gap <= self._eps

    def _validate_lil_kl(self) -> None:
        check_param("N", self.N, low=1, integer=True)
        if self.N & (self.N - 1):
            raise ValueError(f"N must be a power of two (TNM17 Thm 2: N = 2^l), got {self.N}")
        check_param("form", self.form, allowed=tuple(_LIL_KL_FORMS))
        check_param("stop", self.stop, allowed=("bounds", "kinf"))
        check_support(self.support)

    def _bound_label(self) -> str:
        bound = getattr(self, "bound", "kl")
        if bound != "kl":
            return f"{bound.upper()} bounds, TNM17 Sec. 5"
        labels = {"kt": "KL bounds, Krichevsky-Trofimov level",
                  "kinf": "K_inf bounds of the ratings, Krichevsky-Trofimov level"}
        return labels.get(self.form, "lil-KL bounds, TNM17 Thm 2")

    def _lil_kl_bp(self, code: int) -> np.ndarray:
        w_top, w_bot = _lil_kl_split(self._bounds_delta(), self.n_arms_, self.k)
        sigma = float(getattr(self, "sigma", 0.5))
        v = check_support(self.support) if code == BOUND_KINF_KT else ()  # the K_inf bounds' support
        return _bp(w_top=w_top, w_bot=w_bot, sigma=sigma, N=self.N, kappa_top=lil_kl_kappa(self.N, w_top),
                   kappa_bot=lil_kl_kappa(self.N, w_bot), c_N=lil_kl_c(self.N), n=self.n_arms_, nv=len(v),
                   **{f"v{j}": x for j, x in enumerate(v)})


class LilKLUCB(_LilKLBase):
    """lil-KLUCB (Tanczos, Nowak, Mankoff, NIPS 2017): LUCB++ sampling with anytime KL bounds.

    Bounds (TNM17 Thm 2, Sec. 3): with ``level(T, w) = log(kappa(N, w) log2(2T) / w) / T``,
    ``bound="kl"`` uses eqs. (2)-(3) ``{m : d((N mu_hat + m)/(N+1), m) <= level}`` (``form="exact"``,
    the default) or L', U' = ``{m : d(mu_hat, m) <= c(N) level}`` (``form="simplified"``, the
    algorithm box's bounds); ``bound="sg1"`` and ``"sg2"`` are the sub-Gaussian comparisons of
    Sec. 5 ([SG1]: ``((N+1)/N) sqrt(2 sigma^2 log(kappa log2(2T)/w)/T)``; [SG2]: KCG16 Thm 8).
    Rule (TNM17 Sec. 2): pull both TOP and ``argmax_{i != TOP} U_i(T_i, delta)`` while
    ``L_TOP(T_TOP, delta/(n-1)) <= max_{i != TOP} U_i``; output TOP.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"): the queued l if
    allowed (else it waits for an ask that allows it), h and l when both are allowed, otherwise
    the allowed arm whose bound overlaps the other side most; the stop's anytime bounds hold
    whatever the sampling, so the guarantee is unchanged.

    Parameters
    ----------
    k : int, default=1
        Number of top arms. Top-K generalisation (ours, documented): LUCB++'s split with
        TNM17's 2-delta scaling, i.e. the K top arms' lower bounds at delta/(n-k) and the other
        arms' upper bounds at delta/k (k = 1 is TNM17 exactly); h and l as in LUCB++.
    delta : float, default=0.1
        Confidence of each bound; TNM17 Thm 1: correct with probability >= 1 - 2 delta.
    bound : {"kl", "sg1", "sg2"}, default="kl"
        The anytime bound.
    form : {"exact", "simplified", "kt", "kinf"}, default="exact"
        For ``bound="kl"``: eqs. (2)-(3), or L'/U' with c(N) (:func:`purebandits.bounds.lil_kl_c`).
        Both hold with the same delta (Thm 2; with our c(N), L' <= L and U' >= U for every
        (mu_hat, m), so eqs. (2)-(3) are never looser). Measured by the ``tnm17_bounds``
        experiment (TNM17's alpha profiles and Table 1 regimes, the 10-arm means (0.7, 0.6,
        0.55, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1, 0.05); delta 0.05 and 0.01; 20 paired runs per
        cell): eqs. (2)-(3) stop after 0.77-0.92 times the samples of L'/U' in all 12 cells
        and never need significantly more than [SG1] or [SG2], while L'/U' needs more than
        both on the 10-arm means (delta = 0.05: L'/U' 6,751, eqs. (2)-(3) 5,888, [SG1] 6,100,
        [SG2] 5,792 mean samples; no errors). Command: ``purebandits reproduce tnm17_bounds
        --set 'profiles=[[1.0,100],[0.5,1000],[0.25,100],[0.75,100],[1.5,30]]' --set reps=20
        --set max_pulls=5000000 --jobs 1`` (``--scale paper``: 100 runs). The price is a
        bisection per bound, about 4x the compiled cost per pull of L'/U'. ``form="kt"`` (with
        ``bound="kl"``): the anytime KL bound at the Krichevsky-Trofimov level
        (:func:`purebandits.bounds.kt_kl_level_s`), not TNM17's; ``form="kinf"``: K_inf of each
        arm's law on ``support`` at that level (:mod:`purebandits.kinf_bounds`). Each side holds
        with probability >= 1 - w as well, so Thm 1 applies unchanged.
    N : int, default=8
        The power of two of TNM17 Thm 2 (kappa(N, w) from :func:`purebandits.bounds.lil_kl_kappa`).
    sigma : float, default=0.5
        Sub-Gaussian scale for "sg1"/"sg2".
    stop : {"bounds", "kinf"}, default="bounds"
        ``"bounds"``: the LUCB stop on the KL bounds above (error <= 2 delta); ``"kinf"``: each pair settled
        by the K_inf GLR test or by the bounds, error <= delta (see :class:`KLRandLUCB`'s ``stop``).
    support : sequence of 2 or 3 floats, default=(0, 0.5, 1)
        The values the rewards take, for ``stop="kinf"`` and ``form="kinf"`` (see :class:`KLRandLUCB`).

    Notes
    -----
    Uncertain (ALGORITHMS.md 9.2): c(N) is not in the readable text; we use the smallest c
    making L'/U' valid whenever eqs. (2)-(3) are, ``(N+1)/(N - log(N+1))`` (1.5510 at N = 8).
    TNM17 breaks mean ties at random; we break them by the lower index (deterministic).
    The KL bounds need rewards in [0, 1]; [SG2] needs every confidence below 1/e.

    References
    ----------
    B. Tanczos, R. Nowak, B. Mankoff. A KL-LUCB algorithm for Large-Scale Crowdsourcing.
    NIPS 2017, arXiv:1709.03570.
    """

    name = "lil_kl_ucb"
    tags = {"top_k": True, "bounded_rewards": True}
    paper = "Tanczos, Nowak, Mankoff, NIPS 2017 (lil-KLUCB, Sec. 2 rule, Thm 2 bounds eqs. (2)-(3), L'/U')"

    def __init__(self, k: int = 1, *, delta: float = 0.1, bound: str = "kl", form: str = "exact", N: int = 8,
                 sigma: float = 0.5, stop: str = "bounds", support: tuple[float, ...] = RATINGS) -> None:
        self.k = k
        self.delta = delta
        self.bound = bound
        self.form = form
        self.N = N
        self.sigma = sigma
        self.stop = stop
        self.support = support

    def _validate(self) -> None:
        super()._validate()
        check_param("bound", self.bound, allowed=("kl", "sg1", "sg2"))
        self._validate_lil_kl()
        check_param("sigma", self.sigma, low=0.0, low_open=True)
        if self.bound == "sg2":
            w_top, w_bot = _lil_kl_split(self._bounds_delta(), self.n_arms_, self.k)
            if max(w_top, w_bot) >= 1.0 / math.e:
                raise ValueError(f"delta/min(k, n-k) must be < 1/e for bound='sg2' (KCG16 Thm 8), got delta="
                                 f"{self.delta}")

    def _bound(self) -> tuple[int, np.ndarray]:
        if self.bound == "sg1":
            code = BOUND_SG1
        elif self.bound == "sg2":
            code = BOUND_SG2
        else:
            code = _LIL_KL_FORMS[self.form]
        return code, self._lil_kl_bp(code)


class KLRandLUCB(_LilKLBase):
    """KL-RandLUCB: the lil-KLUCB anytime KL bound driving lil'RandLUCB's randomised sampling.

    A combination the two papers suggest but neither states: TNM17's KL bounds (Thm 2, eqs.
    (2)-(3) or L'/U') with the LUCB++-type split of :class:`LilKLUCB` (top arms' lower bounds at
    delta/(n-k), the others' upper bounds at delta/k), and JLQ17 Alg. 1's rule: one pull per
    step, h with probability ``T_l/(T_h+T_l)``, else l; stop when ``L_h >= U_l``. Correctness
    follows from the bounds alone (JLQ17's and TNM17's correctness proofs use only that all
    bounds hold, not the sampling rule): error <= 2 delta.

    Restricted asks: the family's rule (``_LUCBFamily``, "Restricted asks"): h with probability
    ``T_l/(T_h+T_l)``, else l, when both are allowed; otherwise the allowed arm whose bound
    overlaps the other side most (h or l if one of them is allowed). The stop's anytime bounds
    hold whatever the sampling, so the guarantee (error <= the same multiple of delta) is
    unchanged.

    Parameters
    ----------
    k : int, default=1
        Number of top arms.
    delta : float, default=0.1
        Confidence of each bound (error <= 2 delta, as for lil-KLUCB).
    form : {"exact", "simplified", "kt", "kinf"}, default="exact"
        TNM17 eqs. (2)-(3), or L'/U' with c(N); eqs. (2)-(3) are never looser at the same delta
        (see :class:`LilKLUCB`'s ``form``). ``"kt"``: ``{m : T d(mu_hat, m) <= log(1/w) + kt_regret(T)}``, the
        Krichevsky-Trofimov mixture's anytime bound (:func:`purebandits.bounds.kt_kl_level_s`; not TNM17's, proven
        for any rewards in [0, 1], N unused); on contests 512 and 558 at full size it stops after 0.51 and 0.69
        times the answers of eqs. (2)-(3) (docs/default_learner.md). ``"kinf"``: the same level with K_inf in
        place of the Bernoulli KL, ``{m : T K_inf(F_hat, m) <= log(1/w) + kt_regret(T)}`` for each arm's law on
        ``support`` (:mod:`purebandits.kinf_bounds`, proven by the same mixture argument; never wider than
        ``"kt"``, narrower when ratings vary less than 0/1 answers; on a two-point support ``kt_regret(T)`` is
        replaced by the mixture's exact regret on the arm's answers, :func:`purebandits.bounds.kt_regret_binary_s`);
        rewards off ``support`` are refused. Every form has the same error guarantee.
    N : int, default=8
        TNM17 Thm 2's power of two.
    stop : {"bounds", "kinf"}, default="bounds"
        ``"bounds"``: the LUCB stop on the KL bounds above (error <= 2 delta). ``"kinf"``: keep this
        sampling rule and stop when every pair (a in the top k, b outside) is settled by one of two tests,
        error <= delta in all (a union bound): the GLR statistic of the ratings' own model (every
        distribution on ``support``, K_inf) against the pair's proven Krichevsky-Trofimov threshold at
        ``0.9 delta`` (:class:`purebandits.kinf_glr.KinfGLRStop`, docs/glr_stopping.md; proven whatever the
        sampling, at k = 1 and k > 1 by a union over the k (n - k) pairs), or a's lower bound above b's
        upper bound with the bounds at ``0.05 delta`` (error <= 0.1 delta, :data:`KINF_BOUNDS_SHARE`). The
        bounds settle the rivals that the sampling, led by them, leaves with too few answers for the GLR
        statistic. Decided exactly after every answer at amortised O(1) cost plus a compiled O(n) pass for
        the empirical top k. Fewer answers than the bounds' stop on a few dozen items, more on thousands
        (docs/glr_stopping.md).
    support : sequence of 2 or 3 floats, default=(0, 0.5, 1)
        The values the rewards take (the caption ratings), for ``stop="kinf"`` and ``form="kinf"``; another
        reward is a ``ValueError`` with either.

    References
    ----------
    B. Tanczos, R. Nowak, B. Mankoff, NIPS 2017 (bounds); T. Jiang, J. Li, M. Qiao 2017,
    Alg. 1 (sampling rule).
    """

    name = "kl_rand_lucb"
    tags = {"top_k": True, "bounded_rewards": True}
    paper = "TNM17 Thm 2 KL bounds + Jiang, Li, Qiao 2017 Alg. 1 randomised sampling (our combination)"
    _rule = RULE_RANDOM
    _strict = False

    def __init__(self, k: int = 1, *, delta: float = 0.1, form: str = "exact", N: int = 8, stop: str = "bounds",
                 support: tuple[float, ...] = RATINGS) -> None:
        self.k = k
        self.delta = delta
        self.form = form
        self.N = N
        self.stop = stop
        self.support = support

    def _validate(self) -> None:
        super()._validate()
        self._validate_lil_kl()

    def _bound(self) -> tuple[int, np.ndarray]:
        code = _LIL_KL_FORMS[self.form]
        return code, self._lil_kl_bp(code)
