"""The round scheduler shared by every fixed-budget learner (UNI, SR/SAR/NSE/NSAR, SH, OptMAI).

A fixed-budget algorithm is a sequence of rounds. Each round asks for a target number of
further pulls of some arms (``todo_[arm]``); when every pull of the round has been answered,
the round's decision (reject / accept / halve / quartile-eliminate) is applied and the next
round is opened. :class:`_RoundLearner` maps that onto the ask/tell contract:

- ``ask`` hands out the round's remaining pulls round-robin over the round's arms
  (``order_[:m_]``, pointer ``ptr_``), so concurrent participants get different arms;
  it returns ``[]`` while the round waits for answers (``left_ == 0`` and ``out_ > 0``);
- ``cancel`` puts the pull back into the round (``todo_[arm] += 1``), to be handed out again;
- a round closes only when ``left_ == 0`` and ``out_ == 0`` (all pulls answered).

Budget: ``planned_`` counts every pull a round has committed to (asked or still to ask);
opening functions clip a round so ``planned_ <= budget``. A cancelled pull is re-issued, not
re-planned, so the answered pulls never exceed the budget.

Restricted asks (``ask(n, allowed=...)``, :meth:`_RoundLearner._ask_allowed`): the next allowed
pull of the round's schedule, found by the same round-robin scan; when none of the round's
remaining pulls is allowed, an off-schedule ("extra") pull of an allowed active arm with the
fewest pulls (answered + pending), or of any allowed arm with the fewest pulls if no active arm
is allowed. Extras are not charged to the schedule (``planned_``), which keeps its allocation:
the schedule's pulls stay within ``budget`` and the extras, counted in ``extra_``, come on top.
``extra_out_[arm]`` counts the arm's extras still out: an answer is the schedule's while the
arm has a scheduled pull out (``pending_[arm] > extra_out_[arm]`` before it), a cancel takes an
extra first (it is not re-issued), a scheduled pull is re-issued as before; ``out_`` counts the
schedule's pulls only, so a round does not wait for extras.

Both drivers run the same code: a family provides two ``@njit`` functions, ``open`` (fill
``todo_`` / ``order_`` for round ``round_``) and ``close`` (apply the decision; return True
when finished), called by the Python learner and by its compiled kernel, which hands out the
pulls in the same round-robin order as ``ask(1)`` (:func:`round_pulls`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.instances.rewards import (
    BERNOULLI,
    GAUSSIAN,
    RewardModel,
    RewardStream,
    reward_from_block,
    stream_refill,
)
from purebandits.stopping import budget_progress

ACTIVE, ACCEPTED, REJECTED = 0, 1, 2


# ------------------------------------------------------------------------- shared rule helpers
@njit(cache=True)
def round_pulls(counts, sums, sumsq, todo, order, m, ptr, left, total, max_pulls,
                kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Hand out and answer the round's pulls in ``ask(1)`` order until done or ``max_pulls``.

    Rewards are read from the stream's block as :func:`stream_draw` reads them (same refill,
    same mapping; ``check_kernel_matches_reference`` verifies it); the block position is kept
    in a local variable and the generator is touched only on refills, which makes the loop
    about ten times faster than calling ``stream_draw`` per pull.
    """
    p = pos[0]
    lim = pos[1]
    while left > 0 and total < max_pulls:
        arm = order[ptr]
        while todo[arm] == 0:
            ptr += 1
            if ptr == m:
                ptr = 0
            arm = order[ptr]
        ptr += 1
        if ptr == m:
            ptr = 0
        if p >= lim:
            pos[0] = p
            stream_refill(kind, block, pos, rng)
            p = pos[0]
            lim = pos[1]
        x = block[p]
        p += 1
        r = reward_from_block(kind, a, b, cdf, values, x, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        todo[arm] -= 1
        left -= 1
        total += 1
    pos[0] = p
    return ptr, left, total


@njit(cache=True)
def argmax_random_tie(values, rng):  # pragma: no cover - compiled
    """Index of the largest value; ties broken uniformly at random (one draw, only on a tie)."""
    best = values[0]
    for i in range(1, values.shape[0]):
        if values[i] > best:
            best = values[i]
    c = 0
    for i in range(values.shape[0]):
        if values[i] == best:
            c += 1
    j = 0
    if c > 1:
        j = int(rng.random() * c)
    for i in range(values.shape[0]):
        if values[i] == best:
            if j == 0:
                return i
            j -= 1
    return 0


@njit(cache=True)
def top_random_ties(values, keep, rng):  # pragma: no cover - compiled
    """Boolean mask of the ``keep`` largest ``values``; ties at the boundary drawn at random.

    Values strictly above the ``keep``-th largest are kept; among those equal to it, the
    missing number is chosen uniformly (partial Fisher-Yates with ``rng.random()``).
    """
    n = values.shape[0]
    mask = np.zeros(n, dtype=np.bool_)
    if keep <= 0:
        return mask
    if keep >= n:
        mask[:] = True
        return mask
    srt = np.sort(values)
    v = srt[n - keep]  # keep-th largest
    got = 0
    for i in range(n):
        if values[i] > v:
            mask[i] = True
            got += 1
    tied = np.empty(n, dtype=np.int64)
    c = 0
    for i in range(n):
        if values[i] == v:
            tied[c] = i
            c += 1
    need = keep - got
    if need < c:
        for i in range(need):
            r = i + int(rng.random() * (c - i))
            tmp = tied[i]
            tied[i] = tied[r]
            tied[r] = tmp
    for i in range(need):
        mask[tied[i]] = True
    return mask


@njit(cache=True)
def arm_means(counts, sums, flip):  # pragma: no cover - compiled
    """Empirical means (0 without samples); ``flip`` gives the means of ``1 - reward``."""
    n = counts.shape[0]
    out = np.zeros(n)
    for i in range(n):
        if counts[i] > 0:
            out[i] = (counts[i] - sums[i]) / counts[i] if flip else sums[i] / counts[i]
    return out


def ranked(arms: np.ndarray, means: np.ndarray) -> list[int]:
    """``arms`` ordered by decreasing mean, ties to the lower index."""
    arms = np.asarray(arms, dtype=np.int64)
    order = np.lexsort((arms, -means[arms]))
    return [int(a) for a in arms[order]]


def draw_round_sums(model: RewardModel, arms: np.ndarray, m: np.ndarray,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sum and sum of squares of ``m[i]`` rewards of ``arms[i]``, drawn from their exact law.

    Bernoulli: the sum is Binomial(m, p) (and equals the sum of squares). Gaussian: the sum
    is N(m mu, m sd^2) and, independently, the sum of squared deviations is sd^2 chi^2_{m-1},
    so ``sumsq = S^2/m + sd^2 chi^2_{m-1}``. Categorical: multinomial category counts give both.
    Vectorised over arms (one NumPy call per round), the per-arm form of
    :meth:`RewardModel.sample_sum`.
    """
    m = np.asarray(m, dtype=np.int64)
    if model.kind == BERNOULLI:
        s = rng.binomial(m, model.a[arms]).astype(np.float64)
        return s, s.copy()
    if model.kind == GAUSSIAN:
        mu, sd = model.a[arms], model.b[arms]
        s = m * mu + sd * np.sqrt(m) * rng.standard_normal(arms.shape[0])
        dev = sd**2 * 2.0 * rng.gamma(np.maximum(m - 1, 0) / 2.0, 1.0)  # chi^2_{m-1} = 2 Gamma((m-1)/2)
        return s, s * s / m + dev
    cnt = rng.multinomial(m, model.probabilities[arms])
    return cnt @ model.values, cnt @ (model.values**2)


def fewest_pulls(mask: np.ndarray, counts: np.ndarray, pending: np.ndarray) -> int:
    """The arm of ``mask`` (not empty) with the fewest pulls, answered + pending; ties to the lower index.

    It reads counts only, never rewards (the off-schedule pulls of the round and elimination
    learners, and NonAdaptive's, are chosen so).
    """
    return int(np.where(mask, counts + pending, np.iinfo(np.int64).max).argmin())


def first_from(ok: np.ndarray, p: int) -> int:
    """The first True position of ``ok`` at or after ``p``, cyclically (a round-robin scan); -1 if none."""
    if ok[p:].any():
        return p + int(ok[p:].argmax())
    if ok[:p].any():
        return int(ok[:p].argmax())
    return -1


# ------------------------------------------------------------------------- the base class
class _RoundLearner(Learner):
    """Base of the fixed-budget learners: rounds of pulls, a decision when a round is answered.

    Subclasses provide ``_open()`` (fill ``todo_``, ``order_``, ``m_``, ``left_``,
    ``planned_`` for round ``round_``), ``_close() -> bool`` (apply the round's decision;
    True when finished), ``_final() -> list`` (the k arms when finished) and
    ``_kernel(stream, max_pulls)`` (the compiled loop). ``status_`` holds 0 (active),
    1 (accepted) or 2 (rejected) per arm.

    Restricted asks (``ask(n, allowed=...)``): the round's next allowed pull, in the round-robin
    order of the unrestricted ask (the same arm when every arm is allowed); ``[]`` only while
    the round waits for answers, as without the restriction. When none of the round's remaining
    pulls is allowed: an extra pull of the allowed active arm with the fewest pulls (answered +
    pending, ties to the lower index), or, if no active arm is allowed, of the allowed arm with
    the fewest pulls; an accepted or rejected arm's answer is recorded but decides nothing (the
    rounds' rules read the active arms only, and the accepted set is fixed).

    How the extras are counted: not in the schedule. ``planned_`` and every round's allocation
    are those of the unrestricted run, so the schedule's answers stay within ``budget``; the
    extras (``extra_``, pulls handed out off schedule and not cancelled) come on top, so a run
    driven with restrictions may collect up to ``budget + extra_`` answers. Charging them to the
    budget instead would shorten the last rounds (their allocation is clipped to what is left),
    and the error bound is stated for the schedule's allocation.

    The guarantee: the papers' bounds (SR, SAR, SH, NSE, NSAR: ALGORITHMS.md 10; OptMAI: 12) rest
    on Hoeffding bounds for the active arms' means after each round, from the schedule's number
    of samples. Restricted, every active arm still gets all of its scheduled pulls in every round
    (a round closes only when they are answered); an extra only adds samples to an active arm's
    mean (the round's mean for SH and for OptMAI without reuse, the cumulative mean otherwise).
    Where it needs care: an arm's count is then random, and it may depend on earlier answers
    (through which arms are still active). Hoeffding's maximal inequality covers that: an arm's
    running mean from ``n`` samples on is a reverse martingale, so ``P(sup_{t >= n} |mean_t - mu|
    >= eps)`` obeys the bound at ``t = n``, and a mean from any random number ``N >= n`` of the
    arm's samples is as concentrated as one from ``n``. The papers bound the difference of two
    equal-count means in one step; from the two arms' bounds at half the gap each (rewards in
    [0, 1]) it has the same exponent and at most twice the factor in front. So each error bound
    holds restricted, with the same budget ``T`` and at most twice its constant. Two more
    caveats: the bound is for the schedule's ``T`` answers, not the ``T + extra_`` collected
    (the extras are spent without being planned), and it assumes, as the unrestricted one does,
    that an answer's distribution does not depend on which participant gives it (here, on the
    items that participant has already rated).
    """

    kind = "fixed_budget"
    tags = {"top_k": True}
    test_params = {"budget": 2000}
    invalid_params = [("budget", None)]

    k: int
    budget: Any

    # ------------------------------------------------------------------ lifecycle
    def _validate(self) -> None:
        n = self.n_arms_
        check_param("k", self.k, low=1, high=n - 1, integer=True)
        check_param("budget", self.budget, low=n, integer=True)

    def _start(self) -> None:
        n = self.n_arms_
        self.status_ = np.zeros(n, dtype=np.int64)
        self.todo_ = np.zeros(n, dtype=np.int64)
        self.order_ = np.arange(n, dtype=np.int64)
        self.m_ = 0
        self.ptr_ = 0
        self.left_ = 0
        self.out_ = 0
        self.round_ = 1
        self.planned_ = 0
        self.extra_out_ = np.zeros(n, dtype=np.int64)
        self.extra_ = 0
        self._start_rounds()
        self._open()
        self.ptr_ = 0
        if self.left_ == 0:
            self._cycle()

    def _restore(self) -> None:
        if "extra_out_" not in self.__dict__:  # a state saved before restricted asks existed: none were made
            self.extra_out_ = np.zeros(self.n_arms_, dtype=np.int64)
            self.extra_ = 0

    def _start_rounds(self) -> None:
        """Allocate family-specific state before the first round opens."""

    def _cycle(self) -> None:
        """Close answered rounds and open the next until one has pulls or the learner is done."""
        while not self.done_:
            if self._close():
                self._finish(self._final())
                return
            self.round_ += 1
            self._open()
            self.ptr_ = 0
            if self.left_ > 0:
                return

    # ------------------------------------------------------------------ ask / tell
    def _ask_one(self) -> int:
        if self.left_ == 0:
            return -1
        m, p, todo, order = self.m_, self.ptr_, self.todo_, self.order_
        while todo[order[p]] == 0:
            p = (p + 1) % m
        arm = int(order[p])
        todo[arm] -= 1
        self.left_ -= 1
        self.out_ += 1
        self.ptr_ = (p + 1) % m
        return arm

    def _ask_allowed(self, mask: np.ndarray) -> int:
        if self.left_ == 0:
            return -1  # the round waits for answers (the unrestricted ask returns [] too)
        m, j = self.m_, self.ptr_
        order = self.order_[:m]
        arm = order[j]
        if not (mask[arm] and self.todo_[arm] > 0):  # else the scan's first position is the answer: O(1)
            j = first_from(mask[order] & (self.todo_[order] > 0), j)
            if j < 0:
                return self._extra_pull(mask)
        arm = int(order[j])
        self.todo_[arm] -= 1
        self.left_ -= 1
        self.out_ += 1
        self.ptr_ = (j + 1) % m
        return arm

    def _extra_pull(self, mask: np.ndarray) -> int:
        """An off-schedule pull: the allowed active arm with the fewest pulls, else the allowed arm with the fewest."""
        play = mask & (self.status_ == ACTIVE)
        arm = fewest_pulls(play if play.any() else mask, self.counts_, self.pending_)
        self.extra_out_[arm] += 1
        self.extra_ += 1
        return arm

    def _on_tell(self, arm: int, reward: float) -> None:
        if not self.done_:
            if self.extra_ and self.extra_out_[arm] > self.pending_[arm]:  # every pull out of the arm was an extra
                self.extra_out_[arm] -= 1
            else:
                self.out_ -= 1

    def _on_cancel(self, arm: int) -> None:
        if not self.done_:
            if self.extra_ and self.extra_out_[arm] > 0:  # an extra is dropped, not re-issued
                self.extra_out_[arm] -= 1
                self.extra_ -= 1
                return
            self.out_ -= 1
            self.todo_[arm] += 1
            self.left_ += 1

    def _check_stop(self) -> None:
        if self.left_ == 0 and self.out_ == 0:
            self._cycle()

    def _stopping_progress(self) -> StoppingProgress:
        """A fixed-budget schedule: ``fraction`` = answered pulls / budget.

        The learner stops when its last round is answered (rounds close in :meth:`_check_stop`),
        which may leave part of the budget unused, so the fraction jumps to 1 then; no margin
        (statistic = answered pulls, threshold = budget). ``separated`` = arms accepted or
        rejected so far, of all n (every arm is decided at the end).
        """
        decided = int((self.status_ != ACTIVE).sum())
        return budget_progress(int(self.t_), int(self.budget),
                               f"stops when the last round of its fixed schedule is answered, within a budget of "
                               f"{int(self.budget)} answers; {self.paper}",
                               schedule_end=bool(self.done_), separated=decided, of=self.n_arms_)

    # ------------------------------------------------------------------ outputs
    def _means(self) -> np.ndarray:
        return self.means()

    def _recommend(self) -> list[int]:
        """Accepted arms, then the best active arms by mean (ties to the lower index)."""
        m = self._means()
        acc = np.flatnonzero(self.status_ == ACCEPTED)
        act = np.flatnonzero(self.status_ == ACTIVE)
        rest = ranked(act, m)[: self.k_ - acc.size]
        if len(rest) < self.k_ - acc.size:  # fill from the rejected arms (never when consistent)
            rest += ranked(np.flatnonzero(self.status_ == REJECTED), m)[: self.k_ - acc.size - len(rest)]
        return ranked(acc, m) + rest

    def _final(self) -> list[int]:
        return ranked(np.flatnonzero(self.status_ == ACCEPTED), self._means())

    @property
    def remaining_budget(self) -> int:
        """Pulls of the budget not yet committed to a round."""
        self._require_started()
        return int(self.budget) - int(self.planned_)

    # ------------------------------------------------------------------ drivers
    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Sequential compiled driver: same pulls, same state as ``ask(1)``/``tell``."""
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        finished, total, rnd, m, ptr, left, planned = self._kernel(stream, int(max_pulls))
        self.t_, self.round_, self.m_, self.ptr_ = int(total), int(rnd), int(m), int(ptr)
        self.left_, self.planned_ = int(left), int(planned)
        if finished:
            self._finish(self._final())

    def _kernel(self, stream: RewardStream, max_pulls: int) -> tuple:
        raise NotImplementedError

    def run_compiled_sums(self, model: RewardModel, rng: np.random.Generator | int | None) -> None:
        """Run to the end drawing each round's pulls of an arm at once as a sum.

        The per-arm round sums (and sums of squares) are drawn from their exact distribution
        (:func:`draw_round_sums`), which is valid because these learners decide from sums and
        counts only. The result has the law of a sequential run but is not state-identical to
        it (the rewards come from ``rng``, not from a reward stream).
        """
        if self.pending_.any():
            raise ValueError("run_compiled_sums needs a learner with no pending pulls")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        while not self.done_:
            arms = np.flatnonzero(self.todo_ > 0)
            m = self.todo_[arms]
            s, ss = draw_round_sums(model, arms, m, rng)
            self.counts_[arms] += m
            self.sums_[arms] += s
            self.sumsq_[arms] += ss
            self.t_ += int(m.sum())
            self.todo_[arms] = 0
            self.left_ = 0
            self._cycle()


@njit(cache=True)
def budget_clip(per_arm, n_active, budget, planned):  # pragma: no cover - compiled
    """Largest per-arm increment ``<= per_arm`` that keeps ``planned + n_active * inc <= budget``."""
    if n_active <= 0:
        return 0
    room = (budget - planned) // n_active
    return max(0, min(per_arm, room))


__all__: list[str] = []
