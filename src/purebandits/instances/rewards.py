"""Reward models and the reward streams both simulation drivers read.

A :class:`RewardModel` says what each arm's reward distribution is; ``model.stream(seed)``
makes a :class:`RewardStream`, the source of every reward of one simulated run. Rewards are
drawn in blocks from a NumPy ``Generator`` (standard normals for Gaussian arms, uniforms for
Bernoulli and categorical arms) and consumed in pull order, so the reference ask/tell loop
(``stream.draw(arm)`` in Python) and a compiled kernel (``stream_draw(*stream.args(), arm)``
in Numba) see exactly the same rewards when they pull arms in the same order: Numba's
``Generator`` produces the same numbers as NumPy's, and both compute
``mean + sd * z`` / ``u < p`` / ``first j with u < cdf_j`` in IEEE double precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

__all__ = ["RewardModel", "Bernoulli", "Gaussian", "Categorical", "RewardStream", "stream_draw"]

BERNOULLI, GAUSSIAN, CATEGORICAL = 0, 1, 2
BLOCK = 1 << 10
FIRST_BLOCK = 64


class RewardModel:
    """Per-arm reward distributions; subclasses fill the arrays below in ``__init__``."""

    kind: int = -1
    #: parameter arrays read by stream_draw: a (means or probabilities), b (sds), cdf, values
    a: np.ndarray
    b: np.ndarray
    cdf: np.ndarray
    values: np.ndarray

    @property
    def n_arms(self) -> int:
        return int(self.a.shape[0])

    @property
    def means(self) -> np.ndarray:
        """True mean reward of every arm."""
        raise NotImplementedError

    def stream(self, seed: int | np.random.SeedSequence | np.random.Generator | None) -> RewardStream:
        """A reward stream for one run, drawing from ``seed``."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return RewardStream(self, rng)

    def sample(self, arm: int, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent rewards of ``arm`` (not stream-ordered; for tests and bootstrap)."""
        raise NotImplementedError

    def sample_sum(self, arm: int, m: int, rng: np.random.Generator) -> float:
        """The sum of ``m`` rewards of ``arm``, drawn at once from its exact distribution.

        Binomial for Bernoulli, normal for Gaussian, multinomial counts for categorical arms:
        a fixed-budget round that only uses sums may draw them this way.
        """
        raise NotImplementedError

    def _empty(self, n: int) -> None:
        self.a = np.zeros(n)
        self.b = np.zeros(n)
        self.cdf = np.zeros((n, 1))
        self.values = np.zeros(1)


class Bernoulli(RewardModel):
    """Bernoulli arms with success probabilities ``means`` (rewards in {0, 1})."""

    kind = BERNOULLI

    def __init__(self, means: Any) -> None:
        means = np.asarray(means, dtype=np.float64)
        if means.ndim != 1 or means.size < 1:
            raise ValueError("means must be a non-empty 1-D array")
        if not np.all((means >= 0) & (means <= 1)):
            raise ValueError("Bernoulli means must lie in [0, 1]")
        self._empty(means.size)
        self.a = means.copy()

    @property
    def means(self) -> np.ndarray:
        return self.a.copy()

    def sample(self, arm: int, size: int, rng: np.random.Generator) -> np.ndarray:
        return (rng.random(size) < self.a[arm]).astype(np.float64)

    def sample_sum(self, arm: int, m: int, rng: np.random.Generator) -> float:
        return float(rng.binomial(m, self.a[arm]))


class Gaussian(RewardModel):
    """Gaussian arms ``N(mean_i, variance)``; the lil'UCB and lil'RandLUCB papers use variance 1/4."""

    kind = GAUSSIAN

    def __init__(self, means: Any, variance: float | Any = 0.25) -> None:
        means = np.asarray(means, dtype=np.float64)
        if means.ndim != 1 or means.size < 1:
            raise ValueError("means must be a non-empty 1-D array")
        var = np.broadcast_to(np.asarray(variance, dtype=np.float64), means.shape)
        if not np.all(var > 0) or not np.all(np.isfinite(means)):
            raise ValueError("variance must be > 0 and means finite")
        self._empty(means.size)
        self.a = means.copy()
        self.b = np.sqrt(var).copy()

    @property
    def means(self) -> np.ndarray:
        return self.a.copy()

    def sample(self, arm: int, size: int, rng: np.random.Generator) -> np.ndarray:
        return self.a[arm] + self.b[arm] * rng.standard_normal(size)

    def sample_sum(self, arm: int, m: int, rng: np.random.Generator) -> float:
        return float(m * self.a[arm] + self.b[arm] * np.sqrt(m) * rng.standard_normal())


class Categorical(RewardModel):
    """Arms with rewards in ``values`` (e.g. {0, 0.5, 1}) drawn with per-arm ``probabilities``.

    ``probabilities`` is (n_arms, len(values)), rows summing to 1 (or counts, normalised):
    the caption contest's unfunny / somewhat funny / funny votes bootstrapped per caption.
    """

    kind = CATEGORICAL

    def __init__(self, probabilities: Any, values: Any = (0.0, 0.5, 1.0)) -> None:
        p = np.asarray(probabilities, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if p.ndim != 2 or p.shape[0] < 1 or p.shape[1] != v.size:
            raise ValueError("probabilities must be (n_arms, len(values))")
        if np.any(p < 0) or np.any(p.sum(axis=1) <= 0):
            raise ValueError("probabilities must be >= 0 with a positive sum in every row")
        p = p / p.sum(axis=1, keepdims=True)
        self._empty(p.shape[0])
        self.probabilities = p
        self.values = v.copy()
        self.cdf = np.cumsum(p, axis=1)
        self.cdf[:, -1] = 1.0 + 1e-12  # u < 1 always lands in the last bin
        self.a = p @ v

    @property
    def means(self) -> np.ndarray:
        return self.a.copy()

    def sample(self, arm: int, size: int, rng: np.random.Generator) -> np.ndarray:
        idx = np.searchsorted(self.cdf[arm], rng.random(size), side="right")
        return self.values[idx]

    def sample_sum(self, arm: int, m: int, rng: np.random.Generator) -> float:
        return float(rng.multinomial(m, self.probabilities[arm]) @ self.values)


@njit(cache=True)
def stream_refill(kind, block, pos, rng):  # pragma: no cover - compiled
    """Draw the next block (see :func:`block_size`): normals for Gaussian arms, uniforms otherwise.

    Filled in place one value at a time (the same numbers as ``rng.standard_normal(m)``, which
    draws them one by one too) so a refill allocates nothing.
    """
    m = FIRST_BLOCK if pos[1] == 0 else min(2 * pos[1], block.shape[0])
    if kind == GAUSSIAN:
        for i in range(m):
            block[i] = rng.standard_normal()
    else:
        for i in range(m):
            block[i] = rng.random()
    pos[0] = 0
    pos[1] = m


@njit(cache=True, inline="always")
def stream_draw(kind, a, b, cdf, values, block, pos, rng, arm):  # pragma: no cover - compiled
    """Next reward of ``arm`` from the stream's block (compiled form of RewardStream.draw).

    Inlined into the calling kernel; borrow the arrays first (:func:`purebandits.jit.borrow_stream`)
    so the call costs no reference counting.
    """
    if pos[0] >= pos[1]:
        stream_refill(kind, block, pos, rng)
    p = pos[0]
    x = block[p]
    pos[0] = p + 1
    return reward_from_block(kind, a, b, cdf, values, x, arm)


@njit(cache=True, inline="always")
def reward_from_block(kind, a, b, cdf, values, x, arm):  # pragma: no cover - compiled
    """The reward of ``arm`` for the block value ``x`` (a normal or a uniform draw)."""
    if kind == GAUSSIAN:
        return a[arm] + b[arm] * x
    if kind == BERNOULLI:
        return 1.0 if x < a[arm] else 0.0
    m = cdf.shape[1]
    for j in range(m):
        if x < cdf[arm, j]:
            return values[j]
    return values[m - 1]


def block_size(previous: int) -> int:
    """Size of the next block after one of ``previous`` values (0 = none yet).

    Blocks grow from ``FIRST_BLOCK`` (64) by a factor 2 up to ``BLOCK`` (1,024), so a short run
    draws few numbers it never uses (a run stops mid-block; drawing the rest is wasted work, which
    dominated runs of a few hundred pulls with 16k blocks) and the block stays in the L1 cache.
    The sizes do not change the numbers: the generator produces the same sequence whether it is
    drawn in one block or several.
    """
    return FIRST_BLOCK if previous == 0 else min(2 * previous, BLOCK)


class RewardStream:
    """The ordered source of rewards of one simulated run (see the module docstring).

    ``block`` holds the current block of standard normals (Gaussian arms) or uniforms;
    ``pos = [next index, values in block]``.
    """

    def __init__(self, model: RewardModel, rng: np.random.Generator) -> None:
        self.model = model
        self.rng = rng
        self.block = np.empty(BLOCK, dtype=np.float64)
        self.pos = np.zeros(2, dtype=np.int64)  # empty: the first draw refills
        self._blockv = memoryview(self.block)
        self._posv = memoryview(self.pos)
        # the per-arm parameters as lists of floats (the same doubles; list indexing is the
        # cheapest scalar read in Python): draw() is called once per pull by the reference loop
        self._al: list[float] = model.a.tolist()
        self._bl: list[float] = model.b.tolist()
        self._kind = int(model.kind)
        self._gauss = self._kind == GAUSSIAN

    def args(self) -> tuple:
        """Arguments a compiled kernel passes to :func:`stream_draw` before ``arm``."""
        m = self.model
        return (m.kind, m.a, m.b, m.cdf, m.values, self.block, self.pos, self.rng)

    def _refill(self) -> None:
        m = block_size(int(self.pos[1]))
        if self._kind == GAUSSIAN:
            self.block[:m] = self.rng.standard_normal(m)
        else:
            self.block[:m] = self.rng.random(m)
        self.pos[0] = 0
        self.pos[1] = m

    def draw(self, arm: int) -> float:
        """Next reward of ``arm`` (Python form; same numbers as the compiled form)."""
        pos = self._posv
        p = pos[0]
        if p >= pos[1]:
            self._refill()
            p = 0
        x = self._blockv[p]
        pos[0] = p + 1
        if self._gauss:
            return self._al[arm] + self._bl[arm] * x
        if self._kind == BERNOULLI:
            return 1.0 if x < self._al[arm] else 0.0
        rows = self.model.__dict__.get("_cdf_rows")
        if rows is None:
            rows = self.model._cdf_rows = self.model.cdf.tolist()
        values = self.model.values
        row = rows[arm]
        for j, c in enumerate(row):
            if x < c:
                return float(values[j])
        return float(values[len(row) - 1])
