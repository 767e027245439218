"""Round-based elimination: Successive Elimination, Median Elimination, Exponential-Gap Elimination.

All three proceed in *stages*: a stage fixes a pull schedule (every arm of the stage's set
``m`` times), the schedule is handed out through ``ask`` (several participants at once get
different pulls of the same stage, cyclically over the stage's arms), and the stage closes
when all its pulls are answered. A cancelled pull goes back into the schedule and is
re-issued. ``ask`` returns ``[]`` only while the schedule is handed out and answers are
still missing. The stage-closing rules are Numba functions shared by the Python learner and
the compiled kernel.

Restricted asks (``ask(n, allowed=...)``, :meth:`_Staged._ask_allowed`): the next allowed pull of
the stage's schedule in the same cyclic scan; when none of the stage's remaining pulls is allowed,
an off-schedule ("extra") pull of the allowed arm still in play with the fewest pulls (answered +
pending), or of the allowed arm with the fewest pulls if no arm in play is allowed.
``extra_out_[arm]`` counts the arm's extras still out: an answer is the schedule's while the arm
has a scheduled pull out (``pending_[arm] > extra_out_[arm]`` before it) and goes into the stage's
sums then; an extra's answer is recorded in the counts and sums only (``extra_`` counts the extras
handed out and not cancelled); a cancel takes an extra first, which is not re-issued.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.ls_incremental import LSCheck
from purebandits.algorithms.kernels.rounds import fewest_pulls, first_from
from purebandits.base import Learner, StoppingProgress, check_param, top_k_by
from purebandits.bounds import edmm_radius_s, ls_delta, ls_radius_s
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.stopping import (
    LS_EPSILON,
    borrow_tracker,
    count_progress,
    either,
    ls_progress,
    ls_stop_arm,
    ls_tracker_fill,
    ls_tracker_update,
    ls_workspace,
)

__all__ = ["SuccessiveElimination", "MedianElimination", "ExpGapElimination",
           "me_stage_pulls", "expgap_stage_pulls"]


# ------------------------------------------------------------------------------ shared rules
@njit(cache=True)
def _sched_next(stage_arms, n_stage, need, ptr):  # pragma: no cover - compiled
    """Next scheduled pull: scan the stage's arms cyclically from position ``ptr``.

    Returns (arm, next position), or (-1, ptr) when nothing is left to hand out.
    """
    for s in range(n_stage):
        j = ptr + s
        if j >= n_stage:
            j -= n_stage
        a = stage_arms[j]
        if need[a] > 0:
            need[a] -= 1
            j += 1
            if j == n_stage:
                j = 0
            return a, j
    return -1, ptr


@njit(cache=True)
def _start_stage(stage_arms, n_stage, need, ssum, scnt, m):  # pragma: no cover - compiled
    """Schedule ``m`` fresh pulls of every stage arm; returns (left, remaining, ptr)."""
    for j in range(n_stage):
        a = stage_arms[j]
        need[a] = m
        ssum[a] = 0.0
        scnt[a] = 0
    return m * n_stage, m * n_stage, 0


@njit(cache=True)
def me_stage_pulls(epsilon: float, delta: float, stage: int, sigma: float) -> int:
    """Pulls per arm in round ``stage`` (1-based) of Median Elimination ME(S, epsilon, delta).

    EDMM02 (ALGORITHMS.md 2.2): ``eps_l = (eps/4) (3/4)^(l-1)``, ``delta_l = delta/2^l`` and
    ``ceil(4/eps_l^2 log(3/delta_l))`` pulls, for rewards in [0, 1]. For sigma-sub-Gaussian
    rewards the count is multiplied by ``4 sigma^2`` (Hoeffding's sample size scales with
    the variance proxy), which is 1 at sigma = 1/2.
    """
    eps_l = epsilon / 4.0 * 0.75 ** (stage - 1)
    delta_l = delta / 2.0**stage
    return int(math.ceil(4.0 * sigma * sigma * 4.0 / (eps_l * eps_l) * math.log(3.0 / delta_l)))


@njit(cache=True)
def expgap_stage_pulls(r: int, delta: float, sigma: float) -> int:
    """Pulls per arm in the sampling step of round ``r`` of Exponential-Gap Elimination.

    KKS13 (ALGORITHMS.md 2.3): ``eps_r = 2^-r/4``, ``delta_r = delta/(50 r^3)`` and
    ``ceil(2/eps_r^2 log(2/delta_r))`` pulls for rewards in [0, 1] (times ``4 sigma^2``).
    """
    eps_r = 0.25 / 2.0**r
    delta_r = delta / (50.0 * r * r * r)
    return int(math.ceil(4.0 * sigma * sigma * 2.0 / (eps_r * eps_r) * math.log(2.0 / delta_r)))


@njit(cache=True)
def median_keep_size(n_arms):  # pragma: no cover - compiled
    """Arms a Median Elimination round keeps out of ``n_arms``: ``ceil(n/2)``."""
    return (n_arms + 1) // 2


def me_schedule(n_arms: int, epsilon: float, delta: float, sigma: float) -> list[tuple[int, int]]:
    """Median Elimination's whole schedule: (arms, pulls per arm) of each round l = 1, 2, ...

    The rounds do not depend on the rewards (the set halves, :func:`median_keep_size`, and the
    pulls are :func:`me_stage_pulls`), so the total is known from the start.
    """
    out = []
    size, stage = int(n_arms), 1
    while size > 1:
        out.append((size, int(me_stage_pulls(epsilon, delta, stage, sigma))))
        size = int(median_keep_size(size))
        stage += 1
    return out


@njit(cache=True)
def _median_keep(arms, n_arms, ssum, scnt):  # pragma: no cover - compiled
    """Keep the better half (``ceil(n/2)``) of ``arms[:n_arms]`` by stage mean, in place.

    Ties go to the lower arm index, so a stage always halves the set (EDMM02 drops the arms
    below the median; with ties at the median this reading still terminates). The kept arms
    stay in ascending order. Returns the new size.
    """
    keep = median_keep_size(n_arms)
    key = np.empty(n_arms)
    for j in range(n_arms):
        a = arms[j]
        key[j] = -(ssum[a] / scnt[a])
    order = np.argsort(key, kind="mergesort")  # stable: arms are ascending, so ties -> lower arm
    chosen = np.empty(keep, dtype=np.int64)
    for j in range(keep):
        chosen[j] = arms[order[j]]
    chosen.sort()
    for j in range(keep):
        arms[j] = chosen[j]
    return keep


@njit(cache=True)
def _se_eliminate(act, n_act, sums, counts, use_ls, c, delta, d_ls, sigma, n):  # pragma: no cover
    """Successive Elimination step: drop every active arm whose upper bound is below the best lower bound.

    The best arm is the empirical best among the active arms (ties to the lower index); arm a
    is dropped when ``mu_best - rad(T_best) >= mu_a + rad(T_a)`` (= ``gap >= 2 alpha_t`` since
    active arms have equal counts). Returns the new number of active arms (compacted in place).

    The radius is a function of the count alone, and the active arms share their count (each is
    pulled once per round), so it is computed once per distinct count in the pass, not per arm: the
    same doubles, without a logarithm and a square root per arm and round (which made SE run at
    38 M pulls/s against 89 M for nonadaptive sampling in the paper-scale lil'UCB experiments).
    """
    best = act[0]
    best_m = -math.inf
    for j in range(n_act):
        a = act[j]
        m = sums[a] / counts[a]
        if m > best_m:
            best_m = m
            best = a
    rad_count = float(counts[best])
    if use_ls:
        rad = ls_radius_s(rad_count, d_ls, float(n), LS_EPSILON, sigma)
    else:
        rad = edmm_radius_s(rad_count, float(n), delta, c, sigma)
    lcb = best_m - rad
    keep = 0
    for j in range(n_act):
        a = act[j]
        if a != best:
            ca = float(counts[a])
            if ca != rad_count:
                rad_count = ca
                if use_ls:
                    rad = ls_radius_s(ca, d_ls, float(n), LS_EPSILON, sigma)
                else:
                    rad = edmm_radius_s(ca, float(n), delta, c, sigma)
            ucb = sums[a] / counts[a] + rad
            if lcb >= ucb:
                continue
        act[keep] = a
        keep += 1
    return keep


# ------------------------------------------------------------------------------ staged base
class _Staged(Learner):
    """Stage schedule shared by the elimination learners (not registered).

    State: ``need_`` (pulls of each arm still to hand out in this stage), ``ptr_`` (position
    of the cyclic scan in the stage's arm list), ``left_`` (pulls still to hand out),
    ``remaining_`` (pulls of the stage not yet answered), ``extra_out_`` and ``extra_``
    (off-schedule pulls of restricted asks: see the module docstring).
    """

    def _restore(self) -> None:
        if "extra_out_" not in self.__dict__:  # a new learner, or a state saved before restricted asks existed
            self.extra_out_ = np.zeros(self.n_arms_, dtype=np.int64)
            self.extra_ = 0

    def _play_arms(self) -> np.ndarray:
        """The arms still in play (an extra pull goes to one of them when it can)."""
        return self.act_[: self.n_act_]

    def _stage_arms(self) -> tuple[np.ndarray, int]:
        raise NotImplementedError

    def _close_stage(self) -> None:
        raise NotImplementedError

    def _ask_one(self) -> int:
        if self.left_ <= 0:
            return -1
        arms, n_stage = self._stage_arms()
        arm, ptr = _sched_next(arms, n_stage, self.need_, self.ptr_)
        self.ptr_ = int(ptr)
        self.left_ -= 1
        return int(arm)

    def _ask_allowed(self, mask: np.ndarray) -> int:
        if self.left_ <= 0:
            return -1  # the stage waits for answers (the unrestricted ask returns [] too)
        arms, n_stage = self._stage_arms()
        stage = arms[:n_stage]
        j = self.ptr_
        arm = stage[j]
        if not (mask[arm] and self.need_[arm] > 0):  # else the scan's first position is the answer: O(1)
            j = first_from(mask[stage] & (self.need_[stage] > 0), j)
        if j >= 0:
            arm = int(stage[j])
            self.need_[arm] -= 1
            self.ptr_ = (j + 1) % n_stage
            self.left_ -= 1
            return arm
        play = np.zeros(self.n_arms_, dtype=np.bool_)
        play[self._play_arms()] = True
        play &= mask
        arm = fewest_pulls(play if play.any() else mask, self.counts_, self.pending_)
        self.extra_out_[arm] += 1
        self.extra_ += 1
        return arm

    def _on_cancel(self, arm: int) -> None:
        if self.done_:
            return
        if self.extra_ and self.extra_out_[arm] > 0:  # an extra is dropped, not re-issued
            self.extra_out_[arm] -= 1
            self.extra_ -= 1
            return
        self.need_[arm] += 1  # re-issued later in the same stage
        self.left_ += 1

    def _on_tell(self, arm: int, reward: float) -> None:
        if self.done_:
            return
        if self.extra_ and self.extra_out_[arm] > self.pending_[arm]:  # every pull out of the arm was an extra:
            self.extra_out_[arm] -= 1  # recorded in the counts and sums only
            return
        self._stage_tell(arm, reward)
        self.remaining_ -= 1
        if self.remaining_ == 0:
            self._close_stage()

    def _stage_tell(self, arm: int, reward: float) -> None:
        self.ssum_[arm] += reward
        self.scnt_[arm] += 1

    def _set_stage(self, left: int, remaining: int, ptr: int) -> None:
        self.left_, self.remaining_, self.ptr_ = int(left), int(remaining), int(ptr)

    def _active_best(self, arms: np.ndarray, n_act: int) -> list[int]:
        """The empirical best of ``arms[:n_act]`` (all answered pulls), ties to the lower index."""
        vals = np.full(self.n_arms_, -np.inf)
        idx = arms[:n_act]
        vals[idx] = self.means()[idx]
        return top_k_by(vals, 1)

    def _decided_progress(self, desc: str, fraction: float | None = None) -> StoppingProgress:
        """Progress of "stop when one arm of the set is left": arms eliminated of ``n - 1``."""
        return count_progress(self.n_arms_ - int(self.n_act_), self.n_arms_ - 1, desc, fraction)

    def _check_kernel_ready(self) -> bool:
        if self.done_:
            return False
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        return True


# ------------------------------------------------------------------------------ SE
class SuccessiveElimination(_Staged):
    """Successive Elimination: pull every active arm once per round, drop arms clearly below the best.

    EDMM02 Sec. 3 ("unknown biases"): after round t (each active arm pulled t times), drop arm
    a if ``max_b mu_hat_b - mu_hat_a >= 2 alpha_t``; stop when one arm is left and output it.

    Parameters
    ----------
    delta : float, default=0.1
        Error probability.
    radius : {"ls", "edmm"}, default="ls"
        ``"edmm"``: ``alpha_t = sqrt(log(c n t^2/delta)/t)`` (EDMM02, c = 4; times
        ``2 sigma`` for sigma-sub-Gaussian rewards). ``"ls"``: the LIL stopping radius
        ``B(T)`` of JMNB14 Sec. 5 with ``d_LS`` from the whole ``delta`` (ALGORITHMS.md 0.2):
        JMNB14 Sec. 5 says SE's "usual stopping condition and the LIL stopping criterion are
        one and the same", which we read as SE run with B(T) as its elimination radius
        (ALGORITHMS.md 2.4, uncertain). On the LS event every arm stays inside its interval
        forever, so no elimination is ever wrong and the whole delta is the error budget.
    c : float, default=4.0
        Constant of the ``"edmm"`` radius.
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards.

    Notes
    -----
    The recommendation before the end is the empirical best active arm.

    Restricted asks (``ask(n, allowed=...)``): the round's next allowed pull (each active arm
    once per round, in the unrestricted ask's cyclic order); when none of the round's remaining
    pulls is allowed, an extra pull of the allowed active arm with the fewest pulls (answered +
    pending), else of the allowed arm with the fewest pulls (an eliminated arm: recorded, decides
    nothing, as the rule reads the active arms only). An extra's answer joins the arm's counts and
    sums, which the elimination test reads at each arm's own count. The guarantee holds as is:
    both radii are per-arm bounds at every count of the arm (LS: the anytime LIL bound; EDMM:
    failure at most ``delta/(c n t^2)`` at count t, summed over every count and arm), so on the
    same event every elimination is right, at equal counts or not and whatever chose the arms.
    A round waits for its scheduled pulls only, not for extras.

    References
    ----------
    E. Even-Dar, S. Mannor, Y. Mansour. PAC bounds for multi-armed bandit and Markov decision
    processes. COLT 2002. K. Jamieson et al., lil' UCB, COLT 2014, Sec. 5.
    """

    name = "successive_elimination"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Even-Dar, Mannor, Mansour, COLT 2002 (Successive Elimination); Jamieson et al. COLT 2014 Sec. 5"
    invalid_params = [("radius", "hoeffding"), ("c", 0.0), ("sigma", 0.0)]

    def __init__(self, delta: float = 0.1, *, radius: str = "ls", c: float = 4.0, sigma: float = 0.5) -> None:
        self.delta = delta
        self.radius = radius
        self.c = c
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("radius", self.radius, allowed=("ls", "edmm"))
        check_param("c", self.c, low=0.0, low_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        self._d_ls = ls_delta(float(self.delta), LS_EPSILON)

    def _start(self) -> None:
        n = self.n_arms_
        self.act_ = np.arange(n, dtype=np.int64)
        self.n_act_ = n
        self.need_ = np.zeros(n, dtype=np.int64)
        self.ssum_ = np.zeros(n)  # unused by SE's rule (it uses all samples); kept for the shared schedule
        self.scnt_ = np.zeros(n, dtype=np.int64)
        self._set_stage(*_start_stage(self.act_, n, self.need_, self.ssum_, self.scnt_, 1))

    def _stage_arms(self) -> tuple[np.ndarray, int]:
        return self.act_, self.n_act_

    def _stage_tell(self, arm: int, reward: float) -> None:
        pass

    def _close_stage(self) -> None:
        self.n_act_ = int(_se_eliminate(self.act_, self.n_act_, self.sums_, self.counts_, self.radius == "ls",
                                        float(self.c), float(self.delta), self._d_ls, float(self.sigma),
                                        self.n_arms_))
        if self.n_act_ == 1:
            self._finish([int(self.act_[0])])
            return
        self._set_stage(*_start_stage(self.act_, self.n_act_, self.need_, self.ssum_, self.scnt_, 1))

    def _recommend(self) -> list[int]:
        return self._active_best(self.act_, self.n_act_)

    def _stopping_progress(self) -> StoppingProgress:
        """Arms eliminated of ``n - 1`` (EDMM02 Sec. 3: stop when one active arm is left).

        ``statistic`` = arms eliminated, ``threshold = n - 1`` (fires at margin >= 0); arms are
        eliminated only when a round (one pull of every active arm) is answered.
        """
        radius = "LIL stopping radius B(T)" if self.radius == "ls" else "EDMM02 radius"
        return self._decided_progress(
            f"stops when one item is left: an item is dropped when its upper bound falls to or below the best "
            f"item's lower bound, checked after each round ({radius}, delta = {self.delta:g})")

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if not self._check_kernel_ready():
            return
        done, n_act, ptr, left, rem, t = _se_kernel(
            self.counts_, self.sums_, self.sumsq_, self.act_, self.n_act_, self.need_, self.ssum_, self.scnt_,
            self.ptr_, self.left_, self.remaining_, self.radius == "ls", float(self.c), float(self.delta),
            self._d_ls, float(self.sigma), int(max_pulls), *stream.args())
        self.n_act_, self.t_ = int(n_act), int(t)
        self._set_stage(left, rem, ptr)
        if done:
            self._finish([int(self.act_[0])])


@njit(cache=True)
def _se_kernel(counts, sums, sumsq, act, n_act, need, ssum, scnt, ptr, left, rem, use_ls, c, delta, d_ls,
               sigma, max_pulls, kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    counts, sums, sumsq, act = borrow(counts), borrow(sums), borrow(sumsq), borrow(act)
    need, ssum, scnt = borrow(need), borrow(ssum), borrow(scnt)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    while total < max_pulls:
        arm, ptr = _sched_next(act, n_act, need, ptr)
        left -= 1
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
        rem -= 1
        if rem == 0:
            n_act = _se_eliminate(act, n_act, sums, counts, use_ls, c, delta, d_ls, sigma, n)
            if n_act == 1:
                return True, n_act, ptr, left, rem, total
            left, rem, ptr = _start_stage(act, n_act, need, ssum, scnt, 1)
    return False, n_act, ptr, left, rem, total


# ------------------------------------------------------------------------------ ME
class MedianElimination(_Staged):
    """Median Elimination ME(S, epsilon, delta): an (epsilon, delta)-PAC best-arm learner.

    EDMM02 (ALGORITHMS.md 2.2): in round l pull every arm of S_l :func:`me_stage_pulls` times
    (fresh samples), keep the better half by the round's means, set ``eps_{l+1} = 3/4 eps_l``,
    ``delta_{l+1} = delta_l/2``; stop when one arm is left and output it. With probability at
    least ``1 - delta`` its mean is within ``epsilon`` of the best, after
    ``O(n/epsilon^2 log(1/delta))`` pulls; the schedule does not adapt to the gaps.

    Parameters
    ----------
    delta : float, default=0.1
        Error probability.
    epsilon : float, default=0.1
        Accuracy: the output is epsilon-optimal. The common checks use 0.19, below the 0.2
        gap of their error-rate instance, so that epsilon-optimal means best.
    sigma : float, default=0.5
        Sub-Gaussian scale; the pull counts scale with ``4 sigma^2`` (1 for rewards in [0, 1]).

    Notes
    -----
    "Below the median" with ties is read as "keep the ``ceil(|S|/2)`` best, ties to the lower
    index", so every round halves the set. The recommendation before the end is the
    empirical best surviving arm (all answered pulls).

    Restricted asks (``ask(n, allowed=...)``): the round's next allowed pull (the unrestricted
    ask's cyclic order); when none of the round's remaining pulls is allowed, an extra pull of
    the allowed surviving arm with the fewest pulls (answered + pending), else of the allowed arm
    with the fewest pulls. An extra's answer is recorded in the counts and sums (the
    recommendation before the end) but not in the round's means, which stay the schedule's
    ``me_stage_pulls`` fresh samples of each arm: EDMM02's proof (Hoeffding at exactly that
    many samples per arm and round) holds verbatim, the restriction only delays the rounds. Like
    the unrestricted bound, it assumes an answer's distribution does not depend on which
    participant gives it.

    References
    ----------
    E. Even-Dar, S. Mannor, Y. Mansour. PAC bounds for multi-armed bandit and Markov decision
    processes. COLT 2002.
    """

    name = "median_elimination"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Even-Dar, Mannor, Mansour, COLT 2002 (Median Elimination)"
    test_params = {"epsilon": 0.19}
    invalid_params = [("epsilon", 0.0), ("sigma", -1.0)]

    def __init__(self, delta: float = 0.1, *, epsilon: float = 0.1, sigma: float = 0.5) -> None:
        self.delta = delta
        self.epsilon = epsilon
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("epsilon", self.epsilon, low=0.0, low_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _start(self) -> None:
        n = self.n_arms_
        self.act_ = np.arange(n, dtype=np.int64)
        self.n_act_ = n
        self.l_ = 1
        self.need_ = np.zeros(n, dtype=np.int64)
        self.ssum_ = np.zeros(n)
        self.scnt_ = np.zeros(n, dtype=np.int64)
        m = me_stage_pulls(float(self.epsilon), float(self.delta), 1, float(self.sigma))
        self._set_stage(*_start_stage(self.act_, n, self.need_, self.ssum_, self.scnt_, m))

    def _stage_arms(self) -> tuple[np.ndarray, int]:
        return self.act_, self.n_act_

    def _close_stage(self) -> None:
        done, n_act, l_, left, rem, ptr = _me_close(self.act_, self.n_act_, self.l_, self.need_, self.ssum_,
                                                    self.scnt_, float(self.epsilon), float(self.delta),
                                                    float(self.sigma))
        self.n_act_, self.l_ = int(n_act), int(l_)
        if done:
            self._finish([int(self.act_[0])])
            return
        self._set_stage(left, rem, ptr)

    def _recommend(self) -> list[int]:
        return self._active_best(self.act_, self.n_act_)

    def _stopping_progress(self) -> StoppingProgress:
        """Median Elimination's fixed schedule (EDMM02): stop after the round that leaves one arm.

        ``fraction`` = pulls of the schedule answered / pulls of the whole schedule
        (:func:`me_schedule`; the rounds do not adapt, so this is exact progress). ``separated``
        = arms eliminated of ``n - 1``, and ``margin`` = eliminated - (n - 1) (fires at >= 0).
        """
        sched = me_schedule(self.n_arms_, float(self.epsilon), float(self.delta), float(self.sigma))
        total = sum(a * m for a, m in sched)
        if self.done_:
            answered = total
        else:
            size, m = sched[self.l_ - 1]
            answered = sum(a * mm for a, mm in sched[: self.l_ - 1]) + size * m - int(self.remaining_)
        return self._decided_progress(
            f"stops after its fixed schedule of {total} answers: rounds that keep the better half of the items "
            f"until one is left (Median Elimination, epsilon = {self.epsilon:g}, delta = {self.delta:g})",
            fraction=answered / total)

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if not self._check_kernel_ready():
            return
        done, n_act, l_, ptr, left, rem, t = _me_kernel(
            self.counts_, self.sums_, self.sumsq_, self.act_, self.n_act_, self.l_, self.need_, self.ssum_,
            self.scnt_, self.ptr_, self.left_, self.remaining_, float(self.epsilon), float(self.delta),
            float(self.sigma), int(max_pulls), *stream.args())
        self.n_act_, self.l_, self.t_ = int(n_act), int(l_), int(t)
        self._set_stage(left, rem, ptr)
        if done:
            self._finish([int(self.act_[0])])


@njit(cache=True)
def _me_close(act, n_act, l_, need, ssum, scnt, eps, delta, sigma):  # pragma: no cover - compiled
    """Close ME round ``l_``: halve the set; start round ``l_+1`` unless one arm is left.

    Returns (done, n_act, l, left, remaining, ptr).
    """
    n_act = _median_keep(act, n_act, ssum, scnt)
    if n_act == 1:
        return True, n_act, l_, 0, 0, 0
    l_ += 1
    left, rem, ptr = _start_stage(act, n_act, need, ssum, scnt, me_stage_pulls(eps, delta, l_, sigma))
    return False, n_act, l_, left, rem, ptr


@njit(cache=True)
def _me_kernel(counts, sums, sumsq, act, n_act, l_, need, ssum, scnt, ptr, left, rem, eps, delta, sigma,
               max_pulls, kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    counts, sums, sumsq, act = borrow(counts), borrow(sums), borrow(sumsq), borrow(act)
    need, ssum, scnt = borrow(need), borrow(ssum), borrow(scnt)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    while total < max_pulls:
        arm, ptr = _sched_next(act, n_act, need, ptr)
        left -= 1
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        ssum[arm] += r
        scnt[arm] += 1
        total += 1
        rem -= 1
        if rem == 0:
            done, n_act, l_, left2, rem2, ptr2 = _me_close(act, n_act, l_, need, ssum, scnt, eps, delta, sigma)
            if done:
                return True, n_act, l_, ptr, left, rem, total
            left, rem, ptr = left2, rem2, ptr2
    return False, n_act, l_, ptr, left, rem, total


# ------------------------------------------------------------------------------ ExpGap
class ExpGapElimination(_Staged):
    """Exponential-Gap Elimination, optionally with the LIL stopping rule ("ExpGap + LS").

    KKS13 (ALGORITHMS.md 2.3): in round r = 1, 2, ... with ``eps_r = 2^-r/4`` and
    ``delta_r = delta/(50 r^3)``, pull every arm of S_r :func:`expgap_stage_pulls` times
    (means ``p_hat^r``), find a reference arm ``i_r = ME(S_r, eps_r/2, delta_r)`` with
    Median Elimination, and keep ``{i : p_hat_i^r >= p_hat_{i_r}^r - eps_r}``. Output the
    last arm. O(sum_i Delta_i^-2 log(log(1/Delta_i)/delta)) pulls, with very large constants.

    Parameters
    ----------
    delta : float, default=0.1
        Target error probability nu of the whole procedure.
    ls : bool, default=True
        Also stop by LS (JMNB14 Sec. 5: "ExpGap (+LS)"); ExpGap then runs with nu/2 and LS gets
        the other nu/2; stop at whichever fires first, outputting its arm. The default is on
        because that is how JMNB14 ran it, and without LS the first round alone costs
        ~10^5 pulls per arm (ME at eps = 1/64).
    sigma : float, default=0.5
        Sub-Gaussian scale; pull counts scale with ``4 sigma^2``, LS uses sigma directly.

    Notes
    -----
    Median Elimination draws fresh samples in every one of its rounds, and the ExpGap
    sampling step draws its own, as in banditpylib's ``exp_gap.py`` (whether JMNB14 reused
    samples is unknown; ALGORITHMS.md 2.3). LS, in contrast, uses all answered pulls of each
    arm. The recommendation before the end is the empirical best arm of S_r.

    Restricted asks (``ask(n, allowed=...)``): the next allowed pull of the current stage (the
    sampling step's or the Median Elimination round's schedule, in the unrestricted ask's cyclic
    order); when none of the stage's remaining pulls is allowed, an extra pull of the allowed
    arm of S_r with the fewest pulls (answered + pending), else of the allowed arm with the
    fewest pulls. An extra's answer goes into the counts and sums only, never into a stage's
    means (``p_hat^r`` and ME's round means stay the schedule's fresh samples), so KKS13's
    bounds hold verbatim and the restriction only delays the stages. LS reads every answer,
    extras included (of an eliminated arm too): its event is that every arm stays within its
    anytime LIL bound at every count of its own (ALGORITHMS.md 0.2), whatever chose the arms,
    so an extra can make it fire sooner, not wrongly.

    References
    ----------
    Z. Karnin, T. Koren, O. Somekh. Almost optimal exploration in multi-armed bandits. ICML 2013.
    K. Jamieson et al., lil' UCB, COLT 2014, Sec. 5.
    """

    name = "exp_gap_elimination"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    paper = "Karnin, Koren, Somekh, ICML 2013 (Exponential-Gap Elimination, Alg. 2); Jamieson et al. Sec. 5 (+LS)"
    invalid_params = [("ls", "yes"), ("sigma", 0.0)]

    def __init__(self, delta: float = 0.1, *, ls: bool = True, sigma: float = 0.5) -> None:
        self.delta = delta
        self.ls = ls
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("ls", self.ls, allowed=(True, False))
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        nu = float(self.delta)
        self._delta_alg = nu / 2 if self.ls else nu
        self._d_ls = ls_delta(nu / 2, LS_EPSILON)

    def _start(self) -> None:
        n = self.n_arms_
        self.act_ = np.arange(n, dtype=np.int64)  # S_r
        self.n_act_ = n
        self.me_act_ = np.arange(n, dtype=np.int64)  # ME's surviving set
        self.me_n_act_ = 0
        self.r_ = 1
        self.phase_ = 0  # 0: ExpGap sampling step; 1: Median Elimination round l_
        self.l_ = 0
        self.phat_ = np.zeros(n)
        self.need_ = np.zeros(n, dtype=np.int64)
        self.ssum_ = np.zeros(n)
        self.scnt_ = np.zeros(n, dtype=np.int64)
        m = expgap_stage_pulls(1, self._delta_alg, float(self.sigma))
        self._set_stage(*_start_stage(self.act_, n, self.need_, self.ssum_, self.scnt_, m))

    def _stage_arms(self) -> tuple[np.ndarray, int]:
        if self.phase_ == 0:
            return self.act_, self.n_act_
        return self.me_act_, self.me_n_act_

    def _close_stage(self) -> None:
        out = _expgap_close(self.act_, self.n_act_, self.me_act_, self.me_n_act_, self.r_, self.phase_, self.l_,
                            self.phat_, self.need_, self.ssum_, self.scnt_, self._delta_alg, float(self.sigma))
        done, n_act, me_n, r, phase, l_, left, rem, ptr = out
        self.n_act_, self.me_n_act_, self.r_, self.phase_, self.l_ = int(n_act), int(me_n), int(r), int(phase), int(l_)
        self._set_stage(left, rem, ptr)
        if done:
            self._finish([int(self.act_[0])])

    #: test LS on the ask/tell path with the incremental tracker (False: the O(n) reference rule)
    _ls_incremental = True
    _lsc: LSCheck | None = None

    def _restore(self) -> None:
        super()._restore()
        self._lsc = LSCheck(self._d_ls, float(self.sigma))  # the ask/tell path's LS tracker, rebuilt on its next check

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_lsc", None)  # a cache holding memoryviews: rebuilt after unpickling
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "n_arms_" in state:
            self._restore()

    def _on_tell(self, arm: int, reward: float) -> None:
        self._lsc.told(arm, self.t_)
        super()._on_tell(arm, reward)

    def _check_stop(self) -> None:
        if self.ls:
            if self._ls_incremental:
                views = self._views()
                arm = self._lsc.check(self.sums_, self.counts_, self.t_, views[1], views[2])
            else:
                arm = self._check_stop_reference()
            if arm >= 0:
                self._finish([int(arm)])

    def _check_stop_reference(self) -> int:
        """LS's arm by the O(n) rule (:func:`purebandits.stopping.ls_stop_arm`), or -1."""
        return ls_stop_arm(self.sums_, self.counts_, self._d_ls, float(self.sigma))

    def _stopping_progress(self) -> StoppingProgress:
        """Arms of S_r eliminated of ``n - 1`` (KKS13 Alg. 2), and LS (JMNB14 Sec. 5) with ``ls=True``.

        ExpGap eliminates only when a round r (its sampling step and Median Elimination) is
        answered; ``statistic`` = arms eliminated, ``threshold = n - 1``. With LS, the rule nearer
        to firing is reported (:func:`purebandits.stopping.either`).
        """
        rule = ("stops when one item is left after rounds that drop the items clearly below a reference item "
                "(Exponential-Gap Elimination, Karnin et al. 2013)")
        gap = self._decided_progress(f"{rule}, delta = {self.delta:g}")
        if not self.ls:
            return gap
        ls = ls_progress(self.sums_, self.counts_, self._d_ls, float(self.sigma), float(self.delta) / 2)
        return either([("elimination rule", gap), ("LIL stopping rule", ls)],
                      f"{rule}, or by the LIL stopping rule LS; delta/2 each, delta = {self.delta:g}")

    def _recommend(self) -> list[int]:
        return self._active_best(self.act_, self.n_act_)

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if not self._check_kernel_ready():
            return
        out = _expgap_kernel(
            self.counts_, self.sums_, self.sumsq_, self.act_, self.n_act_, self.me_act_, self.me_n_act_, self.r_,
            self.phase_, self.l_, self.phat_, self.need_, self.ssum_, self.scnt_, self.ptr_, self.left_,
            self.remaining_, self._delta_alg, float(self.sigma), bool(self.ls), self._d_ls, ls_workspace(self.n_arms_),
            int(max_pulls), *stream.args())
        stop, n_act, me_n, r, phase, l_, ptr, left, rem, t = out
        self.n_act_, self.me_n_act_, self.r_, self.phase_, self.l_ = int(n_act), int(me_n), int(r), int(phase), int(l_)
        self.t_ = int(t)
        self._set_stage(left, rem, ptr)
        if stop >= 0:
            self._finish([int(stop)])


@njit(cache=True)
def _expgap_close(act, n_act, me_act, me_n, r, phase, l_, phat, need, ssum, scnt, delta,
                  sigma):  # pragma: no cover - compiled
    """Close the current ExpGap stage and schedule the next one.

    Returns (done, n_act, me_n, r, phase, l, left, remaining, ptr).
    """
    eps_r = 0.25 / 2.0**r
    delta_r = delta / (50.0 * r * r * r)
    if phase == 0:
        for j in range(n_act):
            a = act[j]
            phat[a] = ssum[a] / scnt[a]
            me_act[j] = a
        me_n = n_act
        phase, l_ = 1, 1
        left, rem, ptr = _start_stage(me_act, me_n, need, ssum, scnt, me_stage_pulls(eps_r / 2.0, delta_r, 1, sigma))
        return False, n_act, me_n, r, phase, l_, left, rem, ptr
    me_n = _median_keep(me_act, me_n, ssum, scnt)
    if me_n > 1:
        l_ += 1
        left, rem, ptr = _start_stage(me_act, me_n, need, ssum, scnt, me_stage_pulls(eps_r / 2.0, delta_r, l_, sigma))
        return False, n_act, me_n, r, phase, l_, left, rem, ptr
    ref = phat[me_act[0]] - eps_r
    keep = 0
    for j in range(n_act):
        a = act[j]
        if phat[a] >= ref:
            act[keep] = a
            keep += 1
    n_act = keep
    if n_act == 1:
        return True, n_act, me_n, r, phase, l_, 0, 0, 0
    r += 1
    phase, l_ = 0, 0
    left, rem, ptr = _start_stage(act, n_act, need, ssum, scnt, expgap_stage_pulls(r, delta, sigma))
    return False, n_act, me_n, r, phase, l_, left, rem, ptr


@njit(cache=True)
def _expgap_kernel(counts, sums, sumsq, act, n_act, me_act, me_n, r, phase, l_, phat, need, ssum, scnt, ptr,
                   left, rem, delta, sigma, use_ls, d_ls, tr, max_pulls,
                   kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """ExpGap (+LS) pulls; ``tr`` is an LS workspace (:func:`purebandits.stopping.ls_workspace`)."""
    counts, sums, sumsq, act, me_act = borrow(counts), borrow(sums), borrow(sumsq), borrow(act), borrow(me_act)
    phat, need, ssum, scnt = borrow(phat), borrow(need), borrow(ssum), borrow(scnt)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    tr = borrow_tracker(tr)
    while total < max_pulls:
        if phase == 0:
            arm, ptr = _sched_next(act, n_act, need, ptr)
        else:
            arm, ptr = _sched_next(me_act, me_n, need, ptr)
        left -= 1
        x = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += x
        sumsq[arm] += x * x
        ssum[arm] += x
        scnt[arm] += 1
        total += 1
        rem -= 1
        if rem == 0:
            done, n_act, me_n, r, phase, l_, left, rem, ptr = _expgap_close(
                act, n_act, me_act, me_n, r, phase, l_, phat, need, ssum, scnt, delta, sigma)
            if done:
                return act[0], n_act, me_n, r, phase, l_, ptr, left, rem, total
        if use_ls:
            stop = ls_tracker_update(tr, sums, counts, arm, d_ls, sigma)
            if stop >= 0:
                return stop, n_act, me_n, r, phase, l_, ptr, left, rem, total
    return -1, n_act, me_n, r, phase, l_, ptr, left, rem, total
