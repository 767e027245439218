"""The ask/tell learner contract every algorithm keeps.

A learner is built in two steps, as in scikit-learn: the constructor only stores keyword
parameters, and :meth:`Learner.start` validates them and allocates the state::

    learner = LilUCB(delta=0.01).start(n_arms=5000, seed=7)
    while not learner.done:
        for arm in learner.ask(n=1):
            learner.tell(arm, reward_of(arm))
    learner.recommend()

State lives in attributes whose names end with an underscore (``counts_``, ``sums_``,
``pending_``, ``rng_`` ...). Those attributes, and only those, are what
:meth:`Learner.state_dict` serialises to JSON, so a learner can be stored in a database
and rebuilt. Caches that can be recomputed from the state (heaps, resolved presets) live
in attributes with a leading underscore and are rebuilt by :meth:`Learner._restore`.

Pending pulls: ``ask`` may be called many times before any ``tell`` (many crowd
participants at once). Each asked arm increments ``pending_[arm]``; ``tell`` and
``cancel`` decrement it. Algorithms are free to use ``pending_`` in their choice
(most treat an outstanding pull as a "virtual pull" that shrinks the arm's radius, so
concurrent participants are spread over arms).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from purebandits.exceptions import NotStartedError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from purebandits.instances.rewards import RewardStream

__all__ = ["Learner", "StoppingProgress", "check_param", "NOT_DONE_CAP"]

SeedLike = int | np.random.SeedSequence | None


def check_param(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    allowed: tuple[Any, ...] | None = None,
) -> None:
    """Raise ``ValueError`` naming ``name`` and the allowed range if ``value`` is invalid."""
    if allowed is not None:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
        return
    if integer:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    lo_ok = low is None or (value > low if low_open else value >= low)
    hi_ok = high is None or (value < high if high_open else value <= high)
    if not (lo_ok and hi_ok):
        lb = "-inf" if low is None else f"{low}"
        hb = "inf" if high is None else f"{high}"
        rng = f"{'(' if low_open or low is None else '['}{lb}, {hb}{')' if high_open or high is None else ']'}"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")


def _encode(value: Any) -> Any:
    if isinstance(value, np.random.Generator):
        return {"__rng__": value.bit_generator.state}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__rng__" in value:
            state = value["__rng__"]
            bitgen = getattr(np.random, state["bit_generator"])()
            bitgen.state = state
            return np.random.Generator(bitgen)
        if "__ndarray__" in value:
            arr = np.array(value["__ndarray__"], dtype=value["dtype"])
            return arr.reshape(value["shape"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


#: the largest ``StoppingProgress.fraction`` of a learner that has not stopped. A rule is tested only at
#: certain moments (after an answer; at the end of a round; between the two pulls of a pair), and a
#: measure may reach its end before the test runs: it is shown as this until the learner stops.
NOT_DONE_CAP = 0.999


@dataclasses.dataclass(frozen=True)
class StoppingProgress:
    """How close a learner's own stopping rule is to firing (:meth:`Learner.stopping_progress`).

    Computed from the rule the learner tests (its bounds, threshold, strictness and epsilon) on
    its current state, so it cannot tell a different story than ``done``.

    Attributes
    ----------
    fraction : float
        In [0, 1]: exactly 1.0 once the learner has stopped, below 1 before. What it measures
        depends on the rule family and is said in each learner's ``_stopping_progress``
        docstring (share of the other arms separated, arms decided, a statistic over its
        threshold, pulls over the budget).
    margin : float or None
        ``statistic - threshold``: the rule fires when it is >= 0 (or > 0 for a strict rule,
        which ``description`` says). None before the rule is defined (an arm with no answer yet)
        or when the rule compares no two numbers (a fixed-budget schedule).
    statistic, threshold : float or None
        The two numbers the rule compares.
    separated, of : int or None
        For rules that decide arms one by one: how many are separated / decided, of how many.
    description : str
        The rule in one sentence an organizer understands.
    reason : str or None
        Set when the learner cannot report progress (e.g. it never stops by itself); then
        ``fraction`` is 1.0 if done else 0.0 and ``margin`` is None.
    """

    fraction: float
    margin: float | None = None
    statistic: float | None = None
    threshold: float | None = None
    separated: int | None = None
    of: int | None = None
    description: str = ""
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return dataclasses.asdict(self)


class Learner:
    """Base class of all pure-exploration learners (the ask/tell contract).

    Subclasses implement :meth:`_start` (allocate algorithm state), :meth:`_ask_one`
    (choose one arm, or return ``-1`` when nothing is needed now), :meth:`_ask_allowed`
    (the same among allowed arms), :meth:`_recommend`,
    and optionally :meth:`_on_tell`, :meth:`_on_cancel`, :meth:`_check_stop`,
    :meth:`_stopping_progress`, :meth:`_validate`, :meth:`_restore` and :meth:`intervals`.

    Attributes
    ----------
    n_arms_ : int
        Number of arms given to :meth:`start`.
    counts_ : ndarray of int64
        Number of answered pulls of each arm.
    sums_, sumsq_ : ndarray of float64
        Sum and sum of squares of each arm's rewards.
    pending_ : ndarray of int64
        Pulls asked but not yet told or cancelled.
    t_ : int
        Total answered pulls (``counts_.sum()``).
    done_ : bool
        True once the stopping rule fired or the budget is spent; final.
    final_ : list of int or None
        The recommendation frozen when ``done_`` became true.
    rng_ : numpy.random.Generator
        All randomness of the learner.
    """

    #: registry key (lower snake case); subclasses set it
    name: ClassVar[str] = ""
    #: "fixed_confidence", "fixed_budget" or "anytime"
    kind: ClassVar[str] = "fixed_confidence"
    #: tags read by the common checks (see purebandits.testing.checks)
    tags: ClassVar[dict[str, Any]] = {}
    #: short citation of the paper (and equation) the learner follows, for docs/algorithms.md
    paper: ClassVar[str] = ""
    #: the proven error probability is at most ``error_per_delta * delta`` (2 for learners whose
    #: ``delta`` is the confidence of each of two families of bounds, as lil-KLUCB's); the service
    #: divides an owner's target error probability by it
    error_per_delta: ClassVar[float] = 1.0

    @classmethod
    def error_factor(cls, params: dict[str, Any]) -> float:
        """``error_per_delta`` of this class run with ``params`` (a learner whose parameters choose another stopping
        rule overrides it: KL-RandLUCB's ``stop="kinf"`` is proven to err at most delta, not 2 delta)."""
        return float(cls.error_per_delta)

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        cached = cls.__dict__.get("_param_names_cache")
        if cached is not None and cached[0] is cls.__init__:
            return list(cached[1])
        sig = inspect.signature(cls.__init__)
        kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [p.name for p in sig.parameters.values() if p.name != "self" and p.kind in kinds]
        cls._param_names_cache = (cls.__init__, tuple(names))  # inspect.signature is slow; clone() is per run
        return names

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters, as given (JSON-serialisable)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def clone(self) -> Self:
        """A fresh, unstarted learner with the same parameters."""
        return type(self)(**self.get_params())

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def __getstate__(self) -> dict[str, Any]:
        # memoryview caches (fast scalar access) cannot be pickled or deep-copied: drop them
        # and let __setstate__ rebuild the private settings
        return {k: v for k, v in self.__dict__.items() if k != "_mv" and not isinstance(v, memoryview)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "n_arms_" in state:
            self._resolve()

    # ------------------------------------------------------------------ lifecycle
    def start(self, n_arms: int, *, seed: SeedLike = None) -> Self:
        """Validate the parameters, allocate the state and return ``self``.

        Raises
        ------
        ValueError
            If ``n_arms`` or a parameter is out of its allowed range; the message names it.
        """
        check_param("n_arms", n_arms, low=self._min_arms(), integer=True)
        self.n_arms_ = int(n_arms)
        self._validate()
        self.counts_ = np.zeros(self.n_arms_, dtype=np.int64)
        self.sums_ = np.zeros(self.n_arms_, dtype=np.float64)
        self.sumsq_ = np.zeros(self.n_arms_, dtype=np.float64)
        self.pending_ = np.zeros(self.n_arms_, dtype=np.int64)
        self.t_ = 0
        self.done_ = False
        self.final_: list[int] | None = None
        self.rng_ = np.random.default_rng(seed)
        self._resolve()
        self._start()
        self._restore()
        return self

    def _min_arms(self) -> int:
        return 2

    def _validate(self) -> None:
        """Check the constructor parameters against ``n_arms_``; raise ValueError."""

    def _resolve(self) -> None:
        """Derive private settings (presets, constants) from parameters. Called on load too."""

    def _start(self) -> None:
        """Allocate algorithm-specific state (trailing-underscore attributes)."""

    def _restore(self) -> None:
        """Rebuild caches (leading-underscore attributes) from the state."""

    def _require_started(self) -> None:
        if not hasattr(self, "n_arms_"):
            raise NotStartedError(f"{type(self).__name__} is not started: call start(n_arms, seed=...) first")

    # ------------------------------------------------------------------ ask / tell
    def _views(self) -> tuple:
        """``(pending, counts, sums, sumsq)`` as memoryviews for fast scalar access.

        Reading or writing one element through a memoryview costs about half of NumPy scalar
        indexing, which matters in the per-pull ask/tell path. The views are rebuilt whenever
        one of the arrays has been replaced (``start``, ``load_state_dict``, a subclass).
        Raises ``AttributeError`` before ``start``.
        """
        p, c, s, q = self.pending_, self.counts_, self.sums_, self.sumsq_
        cached = self.__dict__.get("_mv")
        if cached is not None:
            a = cached[0]
            if a[0] is p and a[1] is c and a[2] is s and a[3] is q:
                return cached[1]
        arrays = (p, c, s, q)
        views = tuple(memoryview(a) if isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable
                      and a.dtype in (np.int64, np.float64) else a for a in arrays)
        self._mv = (arrays, views)
        return views

    def ask(self, n: int = 1, allowed: ArrayLike | None = None) -> list[int]:
        """Return up to ``n`` arms to pull next; ``[]`` when done or waiting for answers.

        ``allowed`` restricts the choice to some arms (a boolean mask over the arms, or the
        allowed arms' indices): a crowd participant may rate each item once, so the service asks
        for the learner's most useful arm among those the participant has not rated. Each
        learner answers in the terms of its own rule (:meth:`_ask_allowed`; its docstring says
        which arm and why the guarantee holds under the restriction). The contract: every arm
        returned is allowed; ``[]`` only when the learner is done, when the mask is empty, or when
        the learner would return ``[]`` without the restriction (it waits for answers). With every
        arm allowed, the arms are those of ``ask(n)``; like them, the arms of one call may repeat
        (a caller serving one participant asks one arm at a time and narrows the mask).
        """
        if allowed is None:
            return self._ask_free(n)
        self._require_started()
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
        mask = self.allowed_mask(allowed)
        out: list[int] = []
        if self.done_ or not mask.any():
            return out
        pending = self._views()[0]
        for _ in range(n):  # the mask is not changed by the rules: one check above covers every arm
            arm = int(self._ask_allowed(mask))
            if arm < 0:
                break
            if not mask[arm]:
                raise AssertionError(f"{type(self).__name__}._ask_allowed returned arm {arm}, which is not allowed")
            pending[arm] += 1
            out.append(arm)
        return out

    def allowed_mask(self, allowed: ArrayLike) -> np.ndarray:
        """``allowed`` (a boolean mask of length ``n_arms_`` or arm indices) as a boolean mask; ValueError otherwise."""
        if allowed.__class__ is np.ndarray and allowed.dtype == np.bool_ and allowed.shape == (self.n_arms_,):
            return allowed  # the common case, checked without a copy
        arr = np.asarray(allowed)
        if arr.dtype == np.bool_:
            if arr.shape != (self.n_arms_,):
                raise ValueError(f"allowed as a mask must have shape ({self.n_arms_},), got {arr.shape}")
            return arr
        if arr.size == 0:
            return np.zeros(self.n_arms_, dtype=np.bool_)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError("allowed must be a boolean mask over the arms or a list of arm indices")
        if arr.min() < 0 or arr.max() >= self.n_arms_:
            raise ValueError(f"allowed arms must be in [0, {self.n_arms_}), got {arr.min()}..{arr.max()}")
        mask = np.zeros(self.n_arms_, dtype=np.bool_)
        mask[arr] = True
        return mask

    def _ask_free(self, n: int) -> list[int]:
        """:meth:`ask` without a restriction (the path the papers' rules were written for)."""
        try:
            pending = self._views()[0]
        except AttributeError:
            self._require_started()
            raise
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
        out: list[int] = []
        if self.done_:
            return out
        for _ in range(n):
            arm = self._ask_one()
            if arm < 0:
                break
            arm = int(arm)
            pending[arm] += 1
            out.append(arm)
        return out

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` that was asked before."""
        try:
            pending, counts, sums, sumsq = self._views()
        except AttributeError:
            self._require_started()
            raise
        if arm.__class__ is not int or not 0 <= arm < self.n_arms_:
            arm = self._check_arm(arm)
        if pending[arm] <= 0:
            raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
        if reward.__class__ is not float:
            reward = float(reward)
        if not math.isfinite(reward):
            raise ValueError(f"reward must be finite, got {reward!r}")
        pending[arm] -= 1
        counts[arm] += 1
        sums[arm] += reward
        sumsq[arm] += reward * reward
        self.t_ += 1
        self._on_tell(arm, reward)
        if not self.done_:
            self._check_stop()

    def cancel(self, arm: int) -> None:
        """Return a pull of ``arm`` that will never be answered (an expired query)."""
        self._require_started()
        arm = self._check_arm(arm)
        if self.pending_[arm] <= 0:
            raise ValueError(f"arm {arm} has no pending pull to cancel")
        self.pending_[arm] -= 1
        self._on_cancel(arm)
        if not self.done_:
            self._check_stop()

    def _check_arm(self, arm: Any) -> int:
        if isinstance(arm, bool) or not isinstance(arm, int | np.integer):
            raise ValueError(f"arm must be an integer, got {arm!r}")
        if not 0 <= arm < self.n_arms_:
            raise ValueError(f"arm must be in [0, {self.n_arms_}), got {arm}")
        return int(arm)

    def _ask_one(self) -> int:
        raise NotImplementedError

    def _ask_allowed(self, mask: np.ndarray) -> int:
        """The arm the rule would pull next among ``mask``'s True arms (not empty), or -1.

        -1 only when the learner waits for answers (it would return -1 without the
        restriction). Called once per arm by :meth:`ask` with ``allowed``, which then counts
        the pull as pending. Every registered learner overrides it in the terms of its rule.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot choose among allowed arms")

    def _on_tell(self, arm: int, reward: float) -> None:
        """Algorithm-specific bookkeeping after an answer (counts are already updated)."""

    def _on_cancel(self, arm: int) -> None:
        """Algorithm-specific bookkeeping after a cancelled pull."""

    def _check_stop(self) -> None:
        """Evaluate the stopping rule; call :meth:`_finish` when it fires."""

    def _stopping_progress(self) -> StoppingProgress | None:
        """The stopping rule's progress on the current state (see :meth:`stopping_progress`).

        Every registered learner overrides it with the quantities its :meth:`_check_stop` tests
        (sharing the code of the test), with ``fraction`` exactly 1.0 when the rule holds on the
        current state and below 1 otherwise; the base class has no rule and returns None.
        """
        return None

    def stopping_progress(self) -> StoppingProgress | None:
        """How close the learner's own stopping rule is to firing, or None if it does not say.

        The learner's :meth:`_stopping_progress`, with ``fraction`` set to exactly 1.0 when
        :attr:`done` and kept in ``[0, NOT_DONE_CAP]`` before (a rule tested only at certain
        moments can be met between two tests). Answers that arrive after the stop (pulls that
        were out when the rule fired) still update the counts but are not tested: if the rule no
        longer holds on the current state, its figures (margin, statistic, threshold, separated)
        are dropped rather than shown next to ``done``, and the description says why. Reads the
        state only: calling it never changes a decision.
        """
        self._require_started()
        progress = self._stopping_progress()
        if progress is None:
            return None
        frac = float(progress.fraction)
        if self.done_:
            if frac < 1.0 and progress.reason is None:
                progress = dataclasses.replace(
                    progress, margin=None, statistic=None, threshold=None, separated=None,
                    description=progress.description + "; it fired at an earlier answer (answers that arrived "
                    "after the stop are recorded but not tested)")
            frac = 1.0
        elif not frac >= 0.0:  # negative or NaN
            frac = 0.0
        else:
            frac = min(frac, NOT_DONE_CAP)
        if frac != progress.fraction:
            progress = dataclasses.replace(progress, fraction=frac)
        return progress

    def _finish(self, recommendation: list[int] | None = None) -> None:
        """Stop and freeze the recommendation; a later call (a late answer re-firing a rule) changes nothing."""
        if self.done_:
            return
        rec = self._recommend() if recommendation is None else recommendation
        self.final_ = [int(a) for a in rec]
        self.done_ = True

    # ------------------------------------------------------------------ outputs
    @property
    def done(self) -> bool:
        """True once the learner has stopped (stopping rule met or budget spent)."""
        self._require_started()
        return bool(self.done_)

    @property
    def n_pulls(self) -> int:
        """Number of answered pulls so far."""
        self._require_started()
        return int(self.t_)

    @property
    def k_(self) -> int:
        """Size of the set to identify (1 for best-arm learners)."""
        return int(getattr(self, "k", 1))

    def means(self) -> np.ndarray:
        """Empirical means (0 for arms never pulled)."""
        self._require_started()
        return np.divide(self.sums_, self.counts_, out=np.zeros(self.n_arms_), where=self.counts_ > 0)

    def recommend(self) -> list[int]:
        """The current best arm (or best-K set) as a list of ``k`` distinct arms."""
        self._require_started()
        if self.final_ is not None:
            return list(self.final_)
        return [int(a) for a in self._recommend()]

    def _recommend(self) -> list[int]:
        return top_k_by(self.means(), self.k_)

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-arm (lower, upper) confidence bounds under the learner's own bound.

        The default is the finite-LIL bound (ALGORITHMS.md 0.1, "+2" variant, eps = 0.01,
        sigma = 1/2) at ``delta`` (0.05 if the learner has none) split over arms and tails.
        """
        from purebandits.bounds import lil_radius

        self._require_started()
        delta = float(getattr(self, "delta", None) or 0.05)
        w = delta / (2 * self.n_arms_)
        rad = lil_radius(np.maximum(self.counts_, 1), w, epsilon=0.01, sigma=0.5, plus2=True)
        rad = np.where(self.counts_ > 0, rad, np.inf)
        m = self.means()
        return m - rad, m + rad

    def intervals_of(self, arms: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`intervals` of the given arms only, the same values bit for bit.

        A dashboard shows the bounds of a page of 30 items or of the leaders, not of all 7,500
        captions of a contest; a learner whose bounds cost a root-finding each (lil-KLUCB's exact
        form) overrides this to compute only those. The default takes them from :meth:`intervals`.
        """
        idx = np.asarray(arms, dtype=np.int64)
        lo, hi = self.intervals()
        return lo[idx], hi[idx]

    # ------------------------------------------------------------------ state
    def _state_names(self) -> list[str]:
        return sorted(k for k in vars(self) if k.endswith("_") and not k.startswith("_"))

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: the class, the parameters and every ``*_`` attribute."""
        self._require_started()
        return {
            "learner": self.name or type(self).__name__,
            "params": _encode(self.get_params()),
            "state": {k: _encode(getattr(self, k)) for k in self._state_names()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> Self:
        """Restore a state produced by :meth:`state_dict` (possibly through JSON)."""
        params = _decode(state["params"])
        if params != _decode(_encode(self.get_params())):
            raise ValueError(f"state was saved with parameters {params}, this learner has {self.get_params()}")
        for k, v in state["state"].items():
            setattr(self, k, _decode(v))
        self._resolve()
        self._restore()
        return self

    def state_json(self) -> str:
        """``state_dict`` as a canonical JSON string (used to compare states)."""
        return json.dumps(self.state_dict(), sort_keys=True)

    # ------------------------------------------------------------------ compiled driver
    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Advance this learner in sequential mode with a compiled kernel.

        Pulls arms and draws rewards from ``stream`` until the learner is done or its total
        pulls reach ``max_pulls``; afterwards the learner is in exactly the state a plain
        ``ask(1)`` / ``tell`` loop over the same stream would leave it in. Learners that have
        no kernel raise ``NotImplementedError`` (the simulator then uses the reference loop).
        """
        raise NotImplementedError(f"{type(self).__name__} has no compiled kernel")

    @classmethod
    def has_kernel(cls) -> bool:
        """Whether this learner overrides :meth:`run_compiled` (the simulator then uses it)."""
        return cls.run_compiled is not Learner.run_compiled


def top_k_by(values: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` largest values, ties broken by the lower index, best first."""
    order = np.lexsort((np.arange(len(values)), -np.asarray(values, dtype=float)))
    return [int(a) for a in order[:k]]
