"""The K_inf GLR stop for learners that keep their sampling rule (Track-and-Stop, top-two, lil-KLUCB, KL-RandLUCB).

A learner with ``stop="kinf"`` keeps its sampling rule and replaces its stopping statistic by the GLR of the
rewards' own model: every distribution on the known ``support`` (ratings: {0, 1/2, 1}),
:class:`purebandits.kinf_glr.KinfGLRStop`. With ``threshold="theory"`` each pair has its threshold
:func:`purebandits.glr_thresholds.kinf_kt_pair_threshold`, proven for this statistic whatever the sampling rule;
``"practical"`` keeps the learner's unproven ``log((log t + 1)/delta)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from purebandits.base import StoppingProgress
from purebandits.bounds import glr_threshold_s
from purebandits.kinf_glr import KinfGLRStop
from purebandits.stopping import statistic_progress

__all__ = ["KinfStopMixin", "check_support"]

#: the caption contests' ratings: unfunny, somewhat funny, funny
RATINGS = (0.0, 0.5, 1.0)


def check_support(support: object) -> tuple[float, ...]:
    """The support as a tuple of 2 or 3 increasing values in [0, 1]; ValueError naming the problem otherwise."""
    try:
        vals = tuple(float(x) for x in support)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(f"support must be a list of 2 or 3 numbers in [0, 1], got {support!r}") from None
    if not 2 <= len(vals) <= 3 or any(not 0.0 <= x <= 1.0 for x in vals) or any(
            b <= a for a, b in zip(vals, vals[1:], strict=False)):
        raise ValueError(f"support must be 2 or 3 increasing values in [0, 1] (the ratings' values), got {support!r}")
    return vals


def _practical(t: float, n_arms: int, delta: float, k: int = 1) -> float:
    """The unproven ``log((log t + 1)/delta)`` of GK16's experiments."""
    return float(glr_threshold_s(float(t), float(n_arms), float(delta), False))


class KinfStopMixin:
    """``stop="kinf"`` for a learner with ``stop``, ``support``, ``threshold`` and ``delta`` parameters.

    The stop object reads the learner's counts, sums and sums of squares (the label counts follow from them on a
    support of at most three values), so the learner's state, saving, loading and replay do not change.
    """

    # what the learner provides (annotations only: nothing here overrides the learner's own)
    counts_: np.ndarray
    sums_: np.ndarray
    sumsq_: np.ndarray
    t_: int
    delta: float
    threshold: str
    support: tuple[float, ...]
    _finish: Callable[[list[int]], None]

    _kstop: KinfGLRStop | None = None

    def _kinf_stop(self) -> KinfGLRStop:
        ks = self._kstop
        if ks is None or ks.counts is not self.counts_ or ks.sums is not self.sums_:
            thr = "kinf-kt-pairs" if self.threshold == "theory" else _practical
            ks = KinfGLRStop(self.counts_, self.sums_, self.sumsq_, self.support, self._kinf_delta(),
                             k=int(getattr(self, "k_", 1)), threshold=thr, settled=self._kinf_settled())
            self._kstop = ks
        return ks

    def _kinf_settled(self) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
        """Another valid test that settles pairs (a in the top k, b outside) one by one, or None (the learner's own
        intervals, for the LUCB family; a pair it settles needs no Z > beta)."""
        return None

    def _kinf_delta(self) -> float:
        """The error probability the K_inf test runs at (all of ``delta`` unless the learner keeps a second stop)."""
        return float(self.delta)

    def _kinf_check_reward(self, reward: float) -> None:
        r = float(reward)
        if not any(r == v for v in self.support):
            raise ValueError(f"reward {reward!r} is not on the support {list(self.support)} that stop='kinf' and "
                             "form='kinf' need (the K_inf statistic counts each value)")

    def _kinf_check_stop(self) -> None:
        rec = self._kinf_stop().check(float(self.t_))
        if rec is not None:
            self._finish(rec)

    def _kinf_progress(self, who: str) -> StoppingProgress:
        if np.any(self.counts_ <= 0):
            z, thr = 0.0, self._kinf_stop().beta(max(float(self.t_), 1.0))
        else:
            _, z, thr = self._kinf_stop().statistic(float(self.t_))
        k = int(getattr(self, "k_", 1))
        pairs = "(K-1)" if k == 1 else "(k (K-k))"
        beta = (f"log({pairs}/delta) + the two items' betting regrets (proven)" if self.threshold == "theory"
                else "log((log t + 1)/delta) (not proven)")
        what = "the leading item is best" if k == 1 else f"the leading {k} items are the top {k}"
        return statistic_progress(z if math.isfinite(z) else 0.0, thr, z > thr, (
            f"stops when the evidence that {what} (the GLR statistic of the ratings' own model, "
            f"K_inf) exceeds {beta}, delta = {self._kinf_delta():g} ({who})"))
