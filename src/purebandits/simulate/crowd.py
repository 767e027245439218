"""A crowd of raters for the simulator: sessions, concurrent participants, pending answers, fatigue, careless raters.

``simulate(learner, instance, crowd=Crowd(...))`` (CLI ``purebandits simulate --crowd sessions=25,...``)
replaces the one-pull-at-a-time loop by the way a caption contest is rated (issue 37): people
arrive, each rates a session of *distinct* items, many of them at once, and their answers come
back after the learner has already handed out other items. The learner is driven exactly as the
service drives it: every query is ``learner.ask(1, allowed=mask)`` with the participant's rated
and currently held items excluded (the ``"never"`` repeat policy of
:func:`purebandits.service.crowd.excluded_arms`).

The event loop (:class:`CrowdRun`). ``concurrency`` participants are active at a time, kept in
a queue. A turn takes the participant at the head: it receives the answer to its oldest pending
pull (``tell``), then asks again until it holds ``batch`` pending pulls, and goes to the back of
the queue (round robin, so answers arrive after a delay of about ``concurrency`` answers: the
learner always has up to ``concurrency * batch`` pulls pending). A participant leaves when it
holds nothing and may get nothing more: its session is complete, it has rated every item, the
learner returned nothing, or the run's budget of asks is spent. Free places are taken by new
participants before each turn; a newcomer who gets nothing leaves at once, and new arrivals
wait for the next turn. No more than ``budget`` pulls are ever asked, so a run that is not
stopped by the learner ends with exactly ``budget`` ratings and nothing pending.

Assumptions (documented in docs/simulate.md):

- **Session length** ~ Geometric(1 / sessions) on {1, 2, ...} (mean ``sessions``; sessions = 1
  is one rating per person). The bundled summary files have no per-participant answer counts,
  so the distribution is assumed, not NEXT's measured one.
- **Fatigue** (:func:`fatigue_share`): at position j (0 = first rating of a session) a rater
  answers the lowest label with probability ``f_j = 1 - R ** (fatigue * j / 4)``, otherwise
  from the item's vote shares, where ``R = (1 - 0.718) / (1 - 0.638)``. With fatigue = 1 an item
  whose share of "unfunny" is 0.638 is rated unfunny with probability 0.638 on the first
  position and exactly 0.718 on the fifth: NEXT's contest 540 (issue 37).
- **Careless raters**: a share ``careless`` of the participants answers uniformly at random
  over the labels, whatever the item; a share ``straightline`` gives one label to everything (the
  label drawn uniformly per participant: "straight-lining"). Fatigue applies to neither.
- Labels: a categorical model's values (caption contests {0, 1/2, 1}) or {0, 1} for Bernoulli
  arms. Gaussian arms have no labels: fatigue or careless > 0 raises ``ValueError``.

Randomness: the rewards come from the run's reward stream as without a crowd; session lengths,
careless flags and fatigue draws from a separate Generator (``SeedSequence(seed,
spawn_key=(rep, 2))``, see :func:`crowd_seed`), so the same seed gives the same run.

This is a Python loop (about a learner's ask/tell cost plus a few microseconds per rating); a
compiled crowd loop is a later optimisation.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from purebandits.base import Learner
from purebandits.instances.rewards import BERNOULLI, CATEGORICAL, RewardModel, RewardStream

__all__ = ["Crowd", "CrowdRun", "parse_crowd", "fatigue_share", "crowd_seed", "FATIGUE_RATIO"]

#: NEXT's contest 540: P(unfunny) on a participant's first caption and on the fifth (issue 37)
P_UNFUNNY_FIRST, P_UNFUNNY_FIFTH = 0.638, 0.718
#: the share of answers that are not the lowest label after four positions, relative to the first (fatigue = 1)
FATIGUE_RATIO = (1.0 - P_UNFUNNY_FIFTH) / (1.0 - P_UNFUNNY_FIRST)


def fatigue_share(position: int | np.ndarray, fatigue: float) -> float | np.ndarray:
    """Probability that the rating at ``position`` (0 = first of the session) is the lowest label.

    ``f_j = 1 - FATIGUE_RATIO ** (fatigue * j / 4)``: the mass of the other labels shrinks by the same
    factor at every position, so ``P(lowest at j) = f_j + (1 - f_j) p`` for an item whose lowest-label
    share is p; with fatigue = 1 and p = 0.638 that is 0.718 at j = 4 (NEXT, contest 540).
    """
    if isinstance(position, int):
        return 1.0 - FATIGUE_RATIO ** (fatigue * position / 4.0)
    return 1.0 - FATIGUE_RATIO ** (fatigue * np.asarray(position, dtype=float) / 4.0)


@dataclass(frozen=True)
class Crowd:
    """The crowd model: mean session length, participants at a time, pulls each holds, fatigue, the shares of careless
    (uniform labels) and straight-lining (one label always) participants."""

    sessions: float = 25.0
    concurrency: int = 32
    batch: int = 1
    fatigue: float = 0.0
    careless: float = 0.0
    straightline: float = 0.0

    def __post_init__(self) -> None:
        def bad(key: str, value: Any, need: str) -> ValueError:
            return ValueError(f"crowd key {key!r} must be {need}, got {value!r}")

        for key in ("concurrency", "batch"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise bad(key, v, "an integer >= 1")
        for key, low in (("sessions", 1.0), ("fatigue", 0.0), ("careless", 0.0), ("straightline", 0.0)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or \
                    not math.isfinite(v) or v < low:
                raise bad(key, v, f"a finite number >= {low:g}")
        if self.careless > 1:
            raise bad("careless", self.careless, "a share in [0, 1]")
        if self.careless + self.straightline > 1:
            raise bad("straightline", self.straightline, f"a share in [0, 1 - careless] = [0, {1 - self.careless:g}]")

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def spec(self) -> str:
        """The ``--crowd`` text of this crowd."""
        return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.as_dict().items())


def parse_crowd(spec: str | None) -> Crowd:
    """``"sessions=25,concurrency=32,batch=1,fatigue=0,careless=0"`` (every key optional) as a :class:`Crowd`.

    Errors name the key: an unknown key lists the known ones; a value that is not a number, or out of
    range, says what the key needs.
    """
    names = [f.name for f in fields(Crowd)]
    kwargs: dict[str, Any] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"--crowd: {item!r} is not KEY=VALUE (keys: {', '.join(names)})")
        if key not in names:
            raise ValueError(f"--crowd: unknown key {key!r} (keys: {', '.join(names)})")
        if key in kwargs:
            raise ValueError(f"--crowd: key {key!r} given twice")
        raw = raw.strip()
        try:
            kwargs[key] = int(raw) if key in ("concurrency", "batch") else float(raw)
        except ValueError:
            need = "an integer" if key in ("concurrency", "batch") else "a number"
            raise ValueError(f"--crowd: key {key!r} must be {need}, got {raw!r}") from None
    try:
        return Crowd(**kwargs)
    except ValueError as exc:
        raise ValueError(f"--crowd: {exc}") from None


def crowd_seed(seed: int, rep: int) -> np.random.SeedSequence:
    """The crowd's seed in repetition ``rep``: the third child of the repetition's SeedSequence (the first two
    seed the learner and the reward stream, :func:`purebandits.simulate.engine.rep_seeds`)."""
    return np.random.SeedSequence(seed, spawn_key=(int(rep), 2))


def crowd_labels(model: RewardModel, crowd: Crowd) -> np.ndarray | None:
    """The labels a careless or tired rater answers with (sorted, lowest first); None for Gaussian arms,
    which have none (an error when the crowd needs them)."""
    if model.kind == CATEGORICAL:
        return np.sort(np.asarray(model.values, dtype=float))
    if model.kind == BERNOULLI:
        return np.array([0.0, 1.0])
    if crowd.fatigue > 0 or crowd.careless > 0 or crowd.straightline > 0:
        raise ValueError(f"crowd fatigue, careless and straight-lining raters need labelled rewards (categorical or "
                         f"Bernoulli arms); {type(model).__name__} arms have none: use fatigue=0,careless=0,"
                         f"straightline=0")
    return None


class _Participant:
    __slots__ = ("length", "careless", "label", "allowed", "n_out", "held", "asked", "answered")

    def __init__(self, n: int, length: int, careless: bool, label: int = -1) -> None:
        self.length = length
        self.careless = careless
        self.label = label  # >= 0: straight-lining, the index of the one label it gives
        self.allowed = np.ones(n, dtype=np.bool_)  # neither rated nor held
        self.n_out = 0  # items rated or held (False in allowed)
        self.held: deque[int] = deque()
        self.asked = 0
        self.answered = 0


class CrowdRun:
    """One repetition's crowd driving ``learner`` (see the module docstring); :meth:`advance` runs it on.

    Counters: ``asked`` pulls handed out, ``answered`` told, ``participants`` served (a newcomer who
    got nothing is not counted); at any time ``asked - answered == pending`` (the pulls the active
    participants hold). ``trace``, when a list is given, receives ``(participant, position, arm,
    reward)`` for every rating (tests).
    """

    def __init__(self, learner: Learner, stream: RewardStream, crowd: Crowd, rng: np.random.Generator,
                 budget: int, trace: list | None = None) -> None:
        self.learner, self.stream, self.crowd, self.rng = learner, stream, crowd, rng
        self.budget = int(budget)
        self.n = int(learner.n_arms_)
        self.labels = crowd_labels(stream.model, crowd)
        self.active: deque[_Participant] = deque()
        self.asked = self.answered = self.participants = 0
        self.trace = trace
        self._ids: dict[int, int] = {}
        self._p_geom = 1.0 / float(crowd.sessions)

    @property
    def pending(self) -> int:
        """Pulls asked and not answered: those the active participants hold."""
        return sum(len(p.held) for p in self.active)

    def _top_up(self, p: _Participant) -> None:
        """Ask for ``p`` until it holds ``batch`` pulls, its session is out, it has nothing left or the learner
        gives nothing."""
        learner, n = self.learner, self.n
        while len(p.held) < self.crowd.batch and p.asked < p.length and p.n_out < n and self.asked < self.budget:
            got = learner.ask(1) if p.n_out == 0 else learner.ask(1, allowed=p.allowed)
            if not got:
                return
            arm = got[0]
            if not p.allowed[arm]:
                raise AssertionError(f"{type(learner).__name__} gave item {arm} twice to one participant")
            p.allowed[arm] = False
            p.n_out += 1
            p.held.append(arm)
            p.asked += 1
            self.asked += 1

    def _arrive(self) -> bool:
        """A new participant takes a free place; False if it got nothing (it leaves at once)."""
        rng, crowd = self.rng, self.crowd
        length = int(rng.geometric(self._p_geom)) if self._p_geom < 1.0 else 1
        careless, label = False, -1
        if crowd.careless > 0 or crowd.straightline > 0:
            u = rng.random()
            careless = u < crowd.careless
            if not careless and u < crowd.careless + crowd.straightline:
                label = int(rng.integers(self.labels.shape[0]))
        p = _Participant(self.n, length, careless, label)
        self._top_up(p)
        if not p.held:
            return False
        if self.trace is not None:
            self._ids[id(p)] = self.participants
        self.participants += 1
        self.active.append(p)
        return True

    def _rate(self, p: _Participant, arm: int) -> float:
        """The rating of ``arm`` by ``p`` at its current position: careless, tired or from the vote shares."""
        crowd, labels = self.crowd, self.labels
        if p.label >= 0:
            return float(labels[p.label])
        if p.careless:
            return float(labels[int(self.rng.integers(labels.shape[0]))])
        if crowd.fatigue > 0 and p.answered > 0 and self.rng.random() < fatigue_share(p.answered, crowd.fatigue):
            return float(labels[0])
        return self.stream.draw(arm)

    def advance(self, target: int) -> None:
        """Run until ``target`` ratings, the learner is done, or nothing more can be asked and nothing is pending."""
        learner, active, concurrency = self.learner, self.active, self.crowd.concurrency
        while self.answered < target and not learner.done_:
            while len(active) < concurrency:
                if not self._arrive():
                    break
            if not active:
                if self.asked >= self.budget or learner.done_:
                    return
                raise RuntimeError(f"{type(learner).__name__} asked for nothing with no pull pending "
                                   f"(t={learner.t_})")
            p = active.popleft()
            arm = p.held.popleft()
            reward = self._rate(p, arm)
            if self.trace is not None:
                self.trace.append((self._ids[id(p)], p.answered, arm, reward))
            learner.tell(arm, reward)
            p.answered += 1
            self.answered += 1
            if not learner.done_:
                self._top_up(p)
            if p.held:
                active.append(p)
