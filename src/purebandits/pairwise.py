"""Pairwise queries ("which caption is funnier?"): preference models, the Borda reduction, Bradley-Terry fits.

A preference matrix ``P`` holds ``P[i, j]``, the probability that item ``i`` beats item ``j`` in one comparison
(``P + P.T = 1`` off the diagonal; the diagonal is 1/2 by convention and never used). It is built from
Bradley-Terry strengths (:func:`bradley_terry_preferences`) or from each caption's rating distribution
(:func:`rating_preferences`: two independent ratings, the higher wins, ties split).

**The Borda reduction** (Jamieson, Katariya, Deshpande, Nowak, "Sparse Dueling Bandits", AISTATS 2015, Sec. 3;
NEXT's ``DuelingBanditsPureExploration`` app). A learner picks an arm ``i``; the opponent ``j`` is drawn uniformly
among the other ``n - 1`` items; the reward is 1 if ``i`` wins. That reward is Bernoulli with mean the Borda score
``b_i = mean_{j != i} P[i, j]`` (:func:`borda_scores`), and successive pulls of ``i`` are independent (a fresh
opponent and a fresh comparison each time). Arm ``i``'s rewards therefore have exactly the law of a Bernoulli(b_i)
arm, so every cardinal learner of :mod:`purebandits.algorithms` identifies the Borda winner (or top k) with its own
guarantee unchanged: its proof uses only that each arm's rewards are i.i.d. in [0, 1] with mean b_i.
:func:`borda_arms` is that reward model for the simulator; :class:`DuelSampler` draws the same rewards while
recording every opponent and outcome (for a win matrix or a crowd-kit table of pairs).

**Fitting.** :func:`fit_bradley_terry` fits Bradley-Terry log-strengths to a win matrix by maximum likelihood
(``scipy.optimize``). The maximum exists and is unique (up to a common shift) if and only if the directed
comparison graph, with an edge i -> j when i beat j at least once, is strongly connected (Zermelo 1929; Ford 1957;
Hunter, Ann. Statist. 2004, Assumption 1); otherwise some strength runs off to infinity, and the fit raises
:class:`ComparisonGraphError` unless asked for a ridge penalty (``alpha > 0``, a Gaussian prior on the
log-strengths), with which the maximum always exists. :func:`comparison_graph_components` is the check
(``scipy.sparse.csgraph``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, sparse
from scipy.sparse import csgraph

from purebandits.exceptions import PureBanditsError
from purebandits.instances.rewards import Bernoulli

__all__ = [
    "ComparisonGraphError",
    "check_preferences",
    "bradley_terry_preferences",
    "rating_preferences",
    "borda_scores",
    "borda_arms",
    "DuelSampler",
    "wins_from_pairs",
    "win_matrix_frame",
    "comparison_graph_components",
    "fit_bradley_terry",
]


class ComparisonGraphError(PureBanditsError, ValueError):
    """The comparison graph is not strongly connected, so the Bradley-Terry maximum likelihood does not exist."""


def check_preferences(preferences: Any, atol: float = 1e-9) -> np.ndarray:
    """``preferences`` as a float (n, n) array with the diagonal set to 1/2, after checking it is one.

    ValueError unless it is square with n >= 2, entries in [0, 1] and ``P[i, j] + P[j, i] = 1`` off the
    diagonal (within ``atol``).
    """
    P = np.array(preferences, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] < 2:
        raise ValueError(f"preferences must be a square (n, n) array with n >= 2, got shape {P.shape}")
    if not np.all(np.isfinite(P)) or np.any(P < 0) or np.any(P > 1):
        raise ValueError("preferences must be probabilities in [0, 1]")
    np.fill_diagonal(P, 0.5)
    worst = float(np.max(np.abs(P + P.T - 1.0)))
    if worst > atol:
        raise ValueError(f"preferences must satisfy P[i, j] + P[j, i] = 1 (off by {worst:.3g})")
    return P


def bradley_terry_preferences(log_strengths: Sequence[float] | np.ndarray) -> np.ndarray:
    """``P[i, j] = 1 / (1 + exp(theta_j - theta_i))``: the Bradley-Terry model (Bradley and Terry, Biometrika 1952)
    with log-strengths ``theta`` (strength ``exp(theta_i)``)."""
    theta = np.asarray(log_strengths, dtype=np.float64)
    if theta.ndim != 1 or theta.size < 2 or not np.all(np.isfinite(theta)):
        raise ValueError("log_strengths must be a 1-D array of at least 2 finite numbers")
    P = 0.5 * (1.0 + np.tanh(0.5 * (theta[:, None] - theta[None, :])))  # the logistic function, overflow-free
    np.fill_diagonal(P, 0.5)
    return P


def rating_preferences(probabilities: Any, values: Sequence[float] = (0.0, 0.5, 1.0)) -> np.ndarray:
    """``P[i, j] = P(X_i > X_j) + 1/2 P(X_i = X_j)`` for independent ratings ``X_i``, ``X_j`` on ``values``.

    ``probabilities`` is (n, len(values)), row i the distribution of caption i's rating (vote counts are
    normalised): a comparison is modelled as two independent ratings, the higher one wins and a tie is a coin
    flip. The caption contest's {unfunny 0, somewhat funny 1/2, funny 1} are the default ``values``.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] < 2 or p.shape[1] != v.size:
        raise ValueError("probabilities must be (n, len(values)) with n >= 2")
    if np.any(p < 0) or np.any(p.sum(axis=1) <= 0):
        raise ValueError("probabilities must be >= 0 with a positive sum in every row")
    if np.any(np.diff(v) <= 0):
        raise ValueError("values must be strictly increasing")
    p = p / p.sum(axis=1, keepdims=True)
    below = np.cumsum(p, axis=1) - p  # below[j, l] = P(X_j < v_l)
    P = p @ below.T + 0.5 * (p @ p.T)  # sum_l P(X_i = v_l) (P(X_j < v_l) + P(X_j = v_l) / 2)
    np.fill_diagonal(P, 0.5)
    return P


def borda_scores(preferences: Any) -> np.ndarray:
    """``b_i = mean_{j != i} P[i, j]``: the probability that item i beats an opponent drawn uniformly from the
    others (the Borda score of Jamieson et al., AISTATS 2015, Sec. 3)."""
    P = check_preferences(preferences)
    n = P.shape[0]
    return (P.sum(axis=1) - 0.5) / (n - 1)


def borda_arms(preferences: Any) -> Bernoulli:
    """The Borda reduction's arms for the simulator: :class:`~purebandits.instances.Bernoulli` with the Borda scores.

    Exactly the reduction's law, not an approximation: a pull of arm i (a uniform opponent, then one comparison)
    is 1 with probability ``b_i``, independently of every other pull, so each arm's rewards are i.i.d.
    Bernoulli(b_i), which is all a learner sees. The reward model therefore is :class:`Bernoulli` itself, with its
    compiled reward stream; :class:`DuelSampler` draws the same law when the opponents are wanted too.
    """
    return Bernoulli(borda_scores(preferences))


class DuelSampler:
    """Duels of the Borda reduction, seeded, recording each opponent and outcome.

    ``draw(arm)`` draws an opponent uniformly among the other items and a comparison with ``P[arm, opponent]``,
    and returns the reduction's reward (1.0 if ``arm`` won), so it stands where a reward stream's ``draw`` does in
    an ask/tell loop. Every duel is kept: :meth:`wins` is the win matrix, :meth:`pairs` the crowd-kit table.

    Parameters
    ----------
    preferences : (n, n) array
        ``P[i, j]``, the probability that i beats j.
    seed : int, SeedSequence or Generator, optional
        Source of every opponent and outcome; the same seed gives the same duels.

    Attributes
    ----------
    arms_, opponents_, outcomes_ : list of int
        The arm pulled, its opponent, and 1 if the arm won, per duel in order.
    """

    def __init__(self, preferences: Any, seed: int | np.random.SeedSequence | np.random.Generator | None = None):
        self.preferences = check_preferences(preferences)
        self.rng_ = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.arms_: list[int] = []
        self.opponents_: list[int] = []
        self.outcomes_: list[int] = []

    @property
    def n_items(self) -> int:
        """Number of items."""
        return int(self.preferences.shape[0])

    def duel(self, arm: int) -> tuple[int, bool]:
        """One duel of ``arm`` against a uniform other item: ``(opponent, arm won)``, recorded."""
        n = self.n_items
        if not 0 <= arm < n:
            raise ValueError(f"arm must be in [0, {n - 1}], got {arm}")
        opponent = int(self.rng_.integers(n - 1))
        opponent += opponent >= arm  # uniform over the n - 1 others
        won = bool(self.rng_.random() < self.preferences[arm, opponent])
        self.arms_.append(int(arm))
        self.opponents_.append(opponent)
        self.outcomes_.append(int(won))
        return opponent, won

    def draw(self, arm: int) -> float:
        """The reduction's reward of ``arm``: 1.0 if it won a duel against a uniform opponent, else 0.0."""
        return float(self.duel(arm)[1])

    def wins(self) -> np.ndarray:
        """``W[i, j]``: how many recorded duels i won against j (int64, (n, n))."""
        W = np.zeros((self.n_items, self.n_items), dtype=np.int64)
        a, o, y = (np.asarray(x, dtype=np.int64) for x in (self.arms_, self.opponents_, self.outcomes_))
        np.add.at(W, (np.where(y == 1, a, o), np.where(y == 1, o, a)), 1)
        return W

    def pairs(self, worker: str = "simulated", items: Sequence[Any] | None = None) -> pd.DataFrame:
        """The duels in crowd-kit's pairwise format: columns ``worker``, ``left``, ``right``, ``label`` (the winner).

        ``left`` is the arm the learner asked for, ``right`` its drawn opponent; ``items`` names the items
        (default: their indices).
        """
        names = np.asarray(items if items is not None else np.arange(self.n_items), dtype=object)
        a, o, y = (np.asarray(x, dtype=np.int64) for x in (self.arms_, self.opponents_, self.outcomes_))
        return pd.DataFrame({"worker": worker, "left": names[a], "right": names[o],
                             "label": names[np.where(y == 1, a, o)]})


def wins_from_pairs(pairs: pd.DataFrame | Iterable[tuple[Any, Any]],
                    items: Sequence[Any] | None = None) -> tuple[np.ndarray, list[Any]]:
    """The win matrix ``W[i, j]`` (times item i beat item j) and the item names, from comparisons.

    ``pairs`` is a crowd-kit table (``left``, ``right``, ``label`` = the winner; other columns ignored) or an
    iterable of ``(winner, loser)``. ``items`` fixes the order (default: sorted names seen); a name outside it,
    or a label that is neither side, is a ValueError.
    """
    if isinstance(pairs, pd.DataFrame):
        missing = {"left", "right", "label"} - set(pairs.columns)
        if missing:
            raise ValueError(f"pairs needs the columns left, right, label; missing {', '.join(sorted(missing))}")
        bad = ~((pairs["label"] == pairs["left"]) | (pairs["label"] == pairs["right"]))
        if bad.any():
            raise ValueError(f"label must be the left or the right item; row {int(np.flatnonzero(bad)[0])} is not")
        winners = pairs["label"].tolist()
        losers = np.where(pairs["label"] == pairs["left"], pairs["right"], pairs["left"]).tolist()
    else:
        rows = list(pairs)
        winners, losers = [w for w, _ in rows], [loser for _, loser in rows]
    names = list(items) if items is not None else sorted(set(winners) | set(losers))
    index = {name: i for i, name in enumerate(names)}
    unknown = (set(winners) | set(losers)) - set(index)
    if unknown:
        raise ValueError(f"items not in the list: {sorted(map(str, unknown))[:5]}")
    W = np.zeros((len(names), len(names)), dtype=np.int64)
    np.add.at(W, ([index[w] for w in winners], [index[x] for x in losers]), 1)
    return W, names


def win_matrix_frame(wins: Any, items: Sequence[Any] | None = None) -> pd.DataFrame:
    """The win matrix as a DataFrame (row: winner, column: loser), ready for ``to_csv``."""
    W = np.asarray(wins)
    names = list(items) if items is not None else list(range(W.shape[0]))
    return pd.DataFrame(W, index=pd.Index(names, name="winner"), columns=pd.Index(names, name="loser"))


def comparison_graph_components(wins: Any) -> tuple[int, np.ndarray]:
    """The strongly connected components of the comparison graph (edge i -> j when i beat j at least once).

    Returns ``(count, labels)`` as :func:`scipy.sparse.csgraph.connected_components` does; the Bradley-Terry
    maximum likelihood exists if and only if ``count == 1`` (Hunter 2004, Assumption 1).
    """
    W = np.asarray(wins, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"wins must be a square matrix, got shape {W.shape}")
    count, labels = csgraph.connected_components(sparse.csr_matrix(W > 0), directed=True, connection="strong")
    return int(count), labels


def fit_bradley_terry(wins: Any, *, alpha: float = 0.0) -> np.ndarray:
    """Bradley-Terry log-strengths ``theta`` (mean 0) maximising the likelihood of the win matrix ``wins``.

    Minimises ``-sum_ij W[i, j] log sigma(theta_i - theta_j) + alpha/2 |theta|^2`` (Newton-CG with the exact
    Hessian). With ``alpha = 0`` the comparison graph must be strongly connected, or
    :class:`ComparisonGraphError` is raised (the maximum is at infinity: an item that never lost to the rest
    has no finite strength). ``alpha > 0`` is a ridge penalty, a Gaussian prior N(0, 1/alpha) on each
    log-strength: the fit then always exists, shrunk towards 0 (use it on sparse or disconnected data).
    A table of pairs becomes ``wins`` by :func:`wins_from_pairs`.
    """
    W = np.asarray(wins, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1] or W.shape[0] < 2:
        raise ValueError(f"wins must be a square (n, n) matrix with n >= 2, got shape {W.shape}")
    if np.any(W < 0) or not np.all(np.isfinite(W)):
        raise ValueError("wins must be finite counts >= 0")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    W = W.copy()
    np.fill_diagonal(W, 0.0)
    n = W.shape[0]
    if alpha == 0:
        count, labels = comparison_graph_components(W)
        if count > 1:
            sizes = ", ".join(str(int(c)) for c in sorted(np.bincount(labels), reverse=True)[:5])
            raise ComparisonGraphError(
                f"the comparison graph has {count} strongly connected components (sizes {sizes}): "
                "some items never lost (or never won) to the others, so their maximum-likelihood strength is "
                "infinite; collect comparisons that join them, or fit with a ridge penalty alpha > 0")
    N = W + W.T
    # The likelihood does not change when every theta moves by the same amount; (sum theta)^2 / 2 picks the
    # representative with mean 0 without moving the maximum, and makes the objective strictly convex.
    gauge = 1.0 if alpha == 0 else 0.0

    def f(theta: np.ndarray) -> float:
        d = theta[:, None] - theta[None, :]
        return float(np.sum(W * np.logaddexp(0.0, -d)) + 0.5 * alpha * theta @ theta + 0.5 * gauge * theta.sum() ** 2)

    def grad(theta: np.ndarray) -> np.ndarray:
        d = theta[:, None] - theta[None, :]
        R = W * (0.5 * (1.0 - np.tanh(0.5 * d)))  # W[i, j] (1 - sigma(theta_i - theta_j))
        return -(R.sum(axis=1) - R.sum(axis=0)) + alpha * theta + gauge * theta.sum()

    def hess(theta: np.ndarray) -> np.ndarray:
        d = theta[:, None] - theta[None, :]
        s = 0.5 * (1.0 + np.tanh(0.5 * d))
        C = N * s * (1.0 - s)
        H = -C
        np.fill_diagonal(H, C.sum(axis=1))
        return H + alpha * np.eye(n) + gauge

    res = optimize.minimize(f, np.zeros(n), jac=grad, hess=hess, method="Newton-CG",
                            options={"xtol": 1e-10, "maxiter": 200})
    if not np.all(np.isfinite(res.x)):
        raise RuntimeError(f"the Bradley-Terry fit failed: {res.message}")
    theta = res.x - res.x.mean()
    return theta
