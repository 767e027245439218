"""Uniform random sampling that never stops: NEXT's "RandomSampling" baseline."""

from __future__ import annotations

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.stopping import never_stops_progress

__all__ = ["RandomSampling"]


class RandomSampling(Learner):
    """Pull an arm drawn uniformly at random, i.i.d. at every ask; never stop.

    NEXT ran "RandomSampling" next to the adaptive learners of the New Yorker caption contests
    (contest 559's bundled summary, ``559_summary_RandomSamping.csv``, was collected this way)
    to get an unbiased baseline: every arm's ratings are a uniform random sample of the crowd's,
    so its empirical mean is an unbiased estimate whatever the other arms did. This learner is
    that sampling rule behind the ask/tell contract, as an anytime learner: ``recommend()`` is
    the ``k`` best empirical means at any time and ``done`` stays False.

    Each ``ask`` draws ``rng_.integers(n_arms)``: independently of the past rewards, of the
    counts and of the pulls that are out but not yet answered (``pending_``). That independence
    is what makes the baseline unbiased; the price is that concurrent participants can be sent
    the same arm (two of m participants asking at once share one with probability about
    ``m (m - 1) / (2 n)`` while that is small).
    Cancelled pulls are simply forgotten (they are not re-asked).

    Restricted asks (``ask(n, allowed=...)``, a participant who rates each item once): an arm
    drawn uniformly among the allowed arms (``rng_.integers`` over their count, the arm of that
    rank), still independently of the rewards, the counts and ``pending_``; with every arm
    allowed it is the unrestricted draw. Nothing is stopped, so there is no guarantee to keep;
    what changes is what "unbiased" means: each answer is a rating from a participant who was
    shown the item, drawn without looking at any rating, so an item's mean is an unbiased
    estimate of the mean rating of the participants who could be shown it (the whole crowd when
    which items a participant has rated says nothing about how they rate).

    Parameters
    ----------
    k : int, default=1
        Size of the recommended set: the ``k`` arms with the largest empirical means (ties to
        the lower index; arms never answered count as mean 0). ``1 <= k < n_arms``.
    delta : float, default=0.05
        Used only by :meth:`intervals` (the base class's finite-LIL bound at ``delta`` split
        over arms and tails); it never stops the learner.

    Notes
    -----
    Never stopping is the point, so the learner has no stopping rule: drive it with a cap
    (``simulate(..., max_pulls=...)``, ``purebandits simulate --max-pulls``; without one the
    simulator's default cap is 1e9 pulls per repetition), a budget enforced by the caller, or the
    service's owner stopping the experiment. The compiled driver (:meth:`run_compiled`) draws the
    same numbers from the same generator as ``ask(1)`` (NumPy's ``Generator.integers`` and
    Numba's implementation of it agree bit for bit, tested), so both drivers leave the same state.

    Attributes
    ----------
    counts_, sums_, sumsq_, pending_, t_, rng_
        As in :class:`~purebandits.base.Learner`; the learner keeps no other state.

    References
    ----------
    NEXT (nextml/NEXT), the caption-contest app's RandomSampling algorithm; L. Jain, K. Jamieson,
    R. Mankoff, R. Nowak, S. Sievert. The New Yorker Cartoon Caption Contest Dataset, 2020.

    Examples
    --------
    >>> from purebandits import RandomSampling
    >>> learner = RandomSampling(k=2).start(n_arms=10, seed=0)
    >>> for _ in range(100):
    ...     for arm in learner.ask(1):
    ...         learner.tell(arm, 1.0 if arm < 2 else 0.0)
    >>> learner.done, learner.recommend()
    (False, [0, 1])
    """

    name = "random_sampling"
    kind = "anytime"
    tags = {"top_k": True, "never_stops": True}
    paper = "NEXT's RandomSampling baseline of the caption contests (Jain et al. 2020 dataset; uniform i.i.d. arms)"

    def __init__(self, k: int = 1, *, delta: float = 0.05) -> None:
        self.k = k
        self.delta = delta

    def _validate(self) -> None:
        check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)

    def _ask_one(self) -> int:
        # i.i.d. uniform, independent of pending_: the unbiased baseline (see the class docstring)
        return int(self.rng_.integers(self.n_arms_))

    def _ask_allowed(self, mask: np.ndarray) -> int:
        # uniform over the allowed arms (the draw of _ask_one when every arm is allowed)
        idx = np.flatnonzero(mask)
        return int(idx[self.rng_.integers(idx.size)])

    def _stopping_progress(self) -> StoppingProgress:
        """No stopping rule (the point of the baseline): a reason, no margin."""
        return never_stops_progress(bool(self.done_), "uniform random sampling: never stops",
                                    "this learner never stops by itself; the owner stops it")

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Pull uniform random arms from ``stream`` until ``max_pulls`` total pulls (the learner never stops).

        Pending pulls do not matter to the rule, so they are allowed and stay pending.
        """
        self._require_started()
        self.t_ = int(_rs_kernel(self.counts_, self.sums_, self.sumsq_, int(max_pulls), self.rng_, *stream.args()))


@njit(cache=True)
def _rs_kernel(counts, sums, sumsq, max_pulls, own_rng,
               kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Uniform random pulls until ``max_pulls``; returns the total pulls."""
    counts, sums, sumsq, own_rng = borrow(counts), borrow(sums), borrow(sumsq), borrow(own_rng)
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    total = 0
    for i in range(n):
        total += counts[i]
    while total < max_pulls:
        arm = own_rng.integers(0, n)  # the same draw as Generator.integers(n) in _ask_one
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        counts[arm] += 1
        sums[arm] += r
        sumsq[arm] += r * r
        total += 1
    return total
