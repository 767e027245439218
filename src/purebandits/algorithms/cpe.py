"""Combinatorial pure exploration: CLUCB and (generalised) lil'CLUCB over decision classes.

A decision class is a family M of arm sets with a maximisation oracle
``oracle(w) = argmax_{M in M} sum_{i in M} w_i``. Both learners (Chen et al. 2014; Jiang, Li,
Qiao 2017, App. C/E) keep ``M_t = oracle(mu_hat)``, shift each arm's mean by its radius
against ``M_t`` (down inside, up outside), ``M~_t = oracle(mu_tilde)``, stop when the two
agree and otherwise pull the arm of ``M_t symdiff M~_t`` with the largest radius.

Decision classes (the learner's ``decision`` parameter, a JSON-serialisable dict; arms are
edges or cells in the given order):

- ``{"class": "top_k"}`` (default): the K-sets, K = the learner's ``k`` (uniform matroid);
- ``{"class": "spanning_tree", "edges": [[u, v], ...]}``: spanning trees of a connected
  simple undirected graph (a graphic matroid);
- ``{"class": "matching", "shape": [r, c]}``: maximum matchings of the complete bipartite
  graph K_{r,c} (perfect matchings / assignments when r = c), arm ``i*c + j`` = cell (i, j);
- ``{"class": "path", "edges": [[u, v], ...], "source": s, "target": t}``: s-t paths of a
  directed acyclic graph.

Oracles use SciPy (``linear_sum_assignment``, ``csgraph.minimum_spanning_tree``,
``csgraph.connected_components``), a partition for top-K and a longest-path dynamic programme
over a topological order computed once for paths.

Cost per pull: for the top-K class, ``run_compiled`` and ask/tell keep M_t, M~_t and the symmetric
difference between answers (:mod:`~purebandits.algorithms.kernels.cpe_incremental`: O(K + log n) per
answer, O(K) per ask, the same decisions as the two O(n) oracle calls of the reference rule,
:meth:`_CPELearner._ask_one` and :func:`~purebandits.algorithms.kernels.cpe_rules._cpe_topk_kernel`).
Other classes call their oracle twice per answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.algorithms.kernels.cpe_incremental import (
    _SMALL,
    IS_BUILT,
    IS_ROW,
    IS_STOP,
    cpe_inc_ask,
    cpe_inc_ask_allowed,
    cpe_inc_kernel,
    cpe_inc_new,
    cpe_inc_note,
    cpe_inc_reset,
    cpe_inc_tell,
    cpe_inc_told,
)
from purebandits.algorithms.kernels.cpe_rules import (
    CLUCB_RAD,
    LIL,
    _cpe_topk_kernel,
    cpe_differ,
    cpe_pick,
    cpe_radii,
    cpe_stops,
    cpe_tilde,
    cpe_weights,
)
from purebandits.algorithms.kernels.rounds import ranked
from purebandits.base import NOT_DONE_CAP, Learner, StoppingProgress, check_param
from purebandits.bounds import c_epsilon
from purebandits.instances.rewards import RewardStream
from purebandits.ranking import topk_mask

__all__ = ["CLUCB", "LilCLUCB", "TopKSets", "SpanningTrees", "Matchings", "Paths", "make_decision_class"]

# ----------------------------------------------------------------------------- decision classes
class DecisionClass:
    """A family of arm sets with a linear maximisation oracle and its width (CLUCB Sec. 3)."""

    n_arms: int
    #: width of the decision class: the size bound on exchange sets in CLUCB's analysis
    width: int

    def oracle(self, w: np.ndarray) -> np.ndarray:
        """Boolean mask of a decision maximising ``sum_{i in M} w_i``."""
        raise NotImplementedError

    def value(self, w: np.ndarray) -> float:
        """``max_M sum_{i in M} w_i``."""
        return float(np.asarray(w, dtype=float)[self.oracle(w)].sum())


class TopKSets(DecisionClass):
    """All K-subsets of n arms (uniform matroid); width 2 (swap one arm in, one out)."""

    def __init__(self, n_arms: int, k: int) -> None:
        self.n_arms, self.k, self.width = int(n_arms), int(k), 2

    def oracle(self, w: np.ndarray) -> np.ndarray:
        return topk_mask(np.asarray(w, dtype=np.float64), self.k)


def _edge_array(edges: Any, name: str = "decision") -> np.ndarray:
    try:
        arr = np.asarray(edges, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: edges must be a list of [u, v] integer pairs") from exc
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 1 or (arr < 0).any():
        raise ValueError(f"{name}: edges must be a non-empty list of [u, v] pairs of node ids >= 0")
    return arr


class SpanningTrees(DecisionClass):
    """Spanning trees of a connected simple undirected graph (graphic matroid); width 2.

    The oracle is a maximum spanning tree: SciPy's ``minimum_spanning_tree`` on the positive
    weights ``C - w`` (C = max w + 1; every spanning tree has |V| - 1 edges, so this is the
    same argmax, and SciPy reads zero weights as missing edges, which ``C - w >= 1`` avoids).
    """

    def __init__(self, edges: Any) -> None:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        e = _edge_array(edges)
        lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
        if (lo == hi).any():
            raise ValueError("decision: spanning_tree edges must not be self-loops")
        self.n_nodes = int(hi.max()) + 1
        key = lo * self.n_nodes + hi
        if np.unique(key).size != key.size:
            raise ValueError("decision: spanning_tree needs a simple graph (no parallel edges)")
        adj = csr_matrix((np.ones(len(e)), (lo, hi)), shape=(self.n_nodes, self.n_nodes))
        if connected_components(adj, directed=False)[0] != 1:
            raise ValueError("decision: spanning_tree graph must be connected (nodes 0..max id)")
        self.lo, self.hi, self.n_arms, self.width = lo, hi, len(e), 2
        self._index = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(lo, hi, strict=True))}

    def oracle(self, w: np.ndarray) -> np.ndarray:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import minimum_spanning_tree

        w = np.asarray(w, dtype=np.float64)
        cost = (w.max() + 1.0) - w
        g = csr_matrix((cost, (self.lo, self.hi)), shape=(self.n_nodes, self.n_nodes))
        tree = minimum_spanning_tree(g).tocoo()
        mask = np.zeros(self.n_arms, dtype=bool)
        for a, b in zip(tree.row, tree.col, strict=True):
            mask[self._index[(min(a, b), max(a, b))]] = True
        return mask


class Matchings(DecisionClass):
    """Maximum matchings of K_{r,c} (assignments); arm ``i*c + j`` is cell (i, j); width r + c.

    The oracle is ``scipy.optimize.linear_sum_assignment(W, maximize=True)`` (Hungarian /
    Jonker-Volgenant), which matches every row (r <= c) or every column.
    """

    def __init__(self, shape: Any) -> None:
        try:
            r, c = (int(x) for x in shape)
        except (TypeError, ValueError) as exc:
            raise ValueError("decision: matching shape must be [rows, cols]") from exc
        if r < 1 or c < 1:
            raise ValueError("decision: matching shape must be positive")
        self.shape, self.n_arms, self.width = (r, c), r * c, r + c

    def oracle(self, w: np.ndarray) -> np.ndarray:
        from scipy.optimize import linear_sum_assignment

        r, c = self.shape
        rows, cols = linear_sum_assignment(np.asarray(w, dtype=np.float64).reshape(r, c), maximize=True)
        mask = np.zeros(self.n_arms, dtype=bool)
        mask[rows * c + cols] = True
        return mask


@njit(cache=True)
def _dag_longest_path(w, src_sorted, dst_sorted, edge_sorted, tail, n_nodes, source, target):  # pragma: no cover
    """Max-weight source-target path by DP over edges sorted by the topological rank of their tail."""
    dist = np.full(n_nodes, -np.inf)
    pred = np.full(n_nodes, -1, dtype=np.int64)
    dist[source] = 0.0
    for j in range(src_sorted.shape[0]):
        u, v, e = src_sorted[j], dst_sorted[j], edge_sorted[j]
        if dist[u] > -np.inf and (pred[v] < 0 or dist[u] + w[e] > dist[v]):
            dist[v] = dist[u] + w[e]
            pred[v] = e
    mask = np.zeros(w.shape[0], dtype=np.bool_)
    v = target
    while v != source and pred[v] >= 0:
        mask[pred[v]] = True
        v = tail[pred[v]]
    return mask


class Paths(DecisionClass):
    """s-t paths of a directed acyclic graph (edges = arms, parallel edges allowed); width |V|.

    The topological order is computed once (Kahn's algorithm); the oracle is the longest-path
    dynamic programme over the edges sorted by the rank of their tail (O(|E|)).
    """

    def __init__(self, edges: Any, source: Any, target: Any) -> None:
        e = _edge_array(edges)
        n_nodes = int(e.max()) + 1
        for nm, v in (("source", source), ("target", target)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 0 <= v < n_nodes:
                raise ValueError(f"decision: path {nm} must be a node id in [0, {n_nodes})")
        if source == target:
            raise ValueError("decision: path source and target must differ")
        indeg = np.bincount(e[:, 1], minlength=n_nodes)
        out: list[list[int]] = [[] for _ in range(n_nodes)]
        for a, b in e:
            out[a].append(int(b))
        stack = [v for v in range(n_nodes) if indeg[v] == 0]
        rank = np.full(n_nodes, -1, dtype=np.int64)
        r = 0
        while stack:
            v = stack.pop()
            rank[v] = r
            r += 1
            for x in out[v]:
                indeg[x] -= 1
                if indeg[x] == 0:
                    stack.append(x)
        if r != n_nodes:
            raise ValueError("decision: path graph must be acyclic")
        order = np.argsort(rank[e[:, 0]], kind="stable")
        self.src, self.dst, self.edge = e[order, 0].copy(), e[order, 1].copy(), order.astype(np.int64)
        self.tail = e[:, 0].copy()
        self.n_nodes, self.source, self.target = n_nodes, int(source), int(target)
        self.n_arms, self.width = len(e), n_nodes
        if not self.oracle(np.zeros(self.n_arms)).any():
            raise ValueError("decision: path target is not reachable from source")

    def oracle(self, w: np.ndarray) -> np.ndarray:
        return _dag_longest_path(np.asarray(w, dtype=np.float64), self.src, self.dst, self.edge, self.tail,
                                 self.n_nodes, self.source, self.target)


def make_decision_class(spec: dict | None, n_arms: int, k: int = 1) -> DecisionClass:
    """Build a decision class from its JSON spec; ValueError (naming ``decision``) if invalid."""
    spec = {"class": "top_k"} if spec is None else spec
    if not isinstance(spec, dict) or "class" not in spec:
        raise ValueError(f"decision must be a dict with a 'class' key, got {spec!r}")
    cls = spec["class"]
    extra = set(spec) - {"class", "edges", "shape", "source", "target"}
    if extra:
        raise ValueError(f"decision has unknown keys {sorted(extra)}")
    if cls == "top_k":
        dec: DecisionClass = TopKSets(n_arms, k)
    elif cls == "spanning_tree":
        dec = SpanningTrees(spec.get("edges"))
    elif cls == "matching":
        dec = Matchings(spec.get("shape"))
    elif cls == "path":
        dec = Paths(spec.get("edges"), spec.get("source"), spec.get("target"))
    else:
        raise ValueError(f"decision class must be one of ['top_k', 'spanning_tree', 'matching', 'path'], got {cls!r}")
    if dec.n_arms != n_arms:
        raise ValueError(f"decision {cls!r} has {dec.n_arms} arms (edges/cells) but n_arms is {n_arms}")
    return dec


# ----------------------------------------------------------------------------- learners
#: the compiled driver takes the incremental kernel while K <= 16 or ``INCREMENTAL_SHARE * K <= n`` (see run_compiled)
INCREMENTAL_SHARE = 40


class _CPELearner(Learner):
    """What CLUCB and lil'CLUCB share: the oracle round (M_t, M~_t), the stop, and restricted asks.

    Restricted asks (``ask(n, allowed=...)``, a participant rates each item once): the allowed
    unanswered arm with the fewest pending pulls during the initialisation; then the allowed arm
    of ``M_t symdiff M~_t`` with the largest radius (answered + pending pulls, as unrestricted;
    ties to the lowest arm), which is the rule's own arm whenever it is allowed; if no arm of
    the symmetric difference is allowed, the allowed arm with the largest radius. Why that one:
    the arms outside the symmetric difference do not change the decision now, and the one with
    the largest radius is the one whose adjusted mean is furthest from its mean, the likeliest
    to enter M~ as the bounds tighten (CLUCB's analysis, Lemma 10, counts a pull of arm e as
    useful while its radius is at least ``Delta_e / (3 width)``: the largest radius is the
    likeliest to be). Why the guarantee holds: the stop compares M and M~ built from per-arm
    radii whose failure probability is a union over arms and time (counts up to the round t =
    answered pulls + 1), which holds whatever the sampling rule; the rule matters for the sample
    complexity only. Cost (top-K class, incremental workspace): O(K), one pass over the arms
    when no arm of the symmetric difference is allowed.
    """

    kind = "fixed_confidence"
    tags = {"top_k": True}
    _mode = LIL
    _sets_equal = True

    k: int
    delta: float
    decision: dict | None
    sigma: float

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("sigma", self.sigma, low=0.0, low_open=True)
        spec = {"class": "top_k"} if self.decision is None else self.decision
        if isinstance(spec, dict) and spec.get("class") == "top_k":
            check_param("k", self.k, low=1, high=self.n_arms_ - 1, integer=True)
        make_decision_class(self.decision, self.n_arms_, 1)

    def _resolve(self) -> None:
        self._dec = make_decision_class(self.decision, self.n_arms_, int(self.k))
        self._topk = isinstance(self._dec, TopKSets)
        self._conf, self._eps = self._confidence()
        self._inc = None  # the incremental workspace: a cache of the state, rebuilt on first use

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_inc", None)  # holds a memoryview; __setstate__ -> _resolve resets it
        return state

    def _confidence(self) -> tuple[float, float]:
        raise NotImplementedError

    def _restore(self) -> None:
        self._inc = None  # code that writes the state arrays directly calls this to drop the workspace
        self._m = self._mt = None
        if (self.counts_ > 0).all():
            self._update()

    def _radii(self, u: np.ndarray) -> np.ndarray:
        return cpe_radii(u.astype(np.float64), float(self.t_ + 1), self._mode, self._conf, self._eps,
                         float(self.sigma))

    def _decisions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(M_t, M~_t, adjusted means)`` from the answered pulls (every arm answered)."""
        mu = self.means()
        rad = self._radii(self.counts_)
        m = np.asarray(self._dec.oracle(mu), dtype=np.bool_)
        tilde = cpe_tilde(mu, rad, m)
        mt = np.asarray(self._dec.oracle(tilde), dtype=np.bool_)
        return m, mt, tilde

    def _update(self) -> bool:
        """Recompute M_t and M~_t from the answered pulls; True when the stopping rule holds."""
        m, mt, tilde = self._decisions()
        self._m, self._mt = m, mt
        return bool(cpe_stops(m, mt, tilde, self._sets_equal))

    def _stopping_progress(self) -> StoppingProgress:
        """CLUCB's stop ``w~(M~) <= w~(M)`` (Chen et al. 2014 Alg. 1) or lil'CLUCB's ``M~ == M`` (JLQ17 Alg. 2/3).

        CLUCB: ``statistic = w~(M)``, ``threshold = w~(M~)`` (fires at margin >= 0). lil'CLUCB:
        ``statistic`` = arms on which M and M~ agree, ``threshold = n`` (fires at margin >= 0,
        i.e. ``-|M symdiff M~|``). ``fraction``: for the top-K class, the share of the arms
        outside M whose upper bound ``mu + u`` is below (CLUCB: at most) the lowest lower bound
        ``mu - u`` in M, which is the rule met for that arm; for other decision classes, the
        overlap ``|M and M~| / |M or M~|``. Not defined before every arm has an answer.
        """
        of = self.n_arms_ - int(self.k) if self._topk else None
        if self._sets_equal:
            desc = "stops when the pessimistic-optimistic best set equals the empirical best set"
        else:
            desc = "stops when the empirical best set is also best for the pessimistic-optimistic weights"
        desc += f" ({type(self).__name__}, {self.paper.split(' (')[0]}, delta = {self.delta:g})"
        if (self.counts_ == 0).any():
            return StoppingProgress(fraction=0.0, separated=0 if self._topk else None, of=of, description=desc)
        m, mt, tilde = self._decisions()
        holds = bool(cpe_stops(m, mt, tilde, self._sets_equal))
        if self._sets_equal:
            stat, thr = float(self.n_arms_ - cpe_differ(m, mt)), float(self.n_arms_)
        else:
            stat, thr = (float(w) for w in cpe_weights(m, mt, tilde))
        n_sep = None
        if self._topk:
            low = float(tilde[m].min())  # mu - u is the adjusted mean inside M, mu + u outside
            out = tilde[~m]
            n_sep = int((out < low).sum() if self._sets_equal else (out <= low).sum())
            frac = n_sep / of
        else:
            frac = float((m & mt).sum() / (m | mt).sum())
        return StoppingProgress(fraction=1.0 if holds else min(frac, NOT_DONE_CAP), margin=stat - thr, statistic=stat,
                                threshold=thr, separated=n_sep, of=of, description=desc)

    def _ask_one(self) -> int:
        """The O(n) rule (both oracle calls from scratch; the incremental path must agree with it)."""
        self._inc = None  # Learner.ask changes pending_ behind the incremental workspace
        zero = np.flatnonzero(self.counts_ == 0)
        if zero.size:  # initialisation: one pull of every arm, spread over pending pulls
            return int(zero[np.argmin(self.pending_[zero])])
        arm = int(cpe_pick(self._m, self._mt, self._radii(self.counts_ + self.pending_)))
        return arm

    def _ask_allowed(self, mask: np.ndarray) -> int:
        """The restricted rule from scratch (class docstring, "Restricted asks"); the reference of the top-K
        class's workspace path. Learner.ask adds the pending pull (behind the workspace: it is dropped)."""
        self._inc = None
        zero = np.flatnonzero(mask & (self.counts_ == 0))
        if zero.size:  # initialisation: the allowed unanswered arm with the fewest pending (lowest index)
            return int(zero[np.argmin(self.pending_[zero])])
        rad = self._radii(self.counts_ + self.pending_)
        if (self.counts_ > 0).all():
            sel = mask & (self._m != self._mt)
            if sel.any():
                return int(np.flatnonzero(sel)[np.argmax(rad[sel])])  # argmax: the first, i.e. lowest, arm
        return int(np.flatnonzero(mask)[np.argmax(rad[mask])])

    # ------------------------------------------------------------------ incremental ask/tell
    # For the top-K class, ask, tell and cancel keep M, M~ and the symmetric difference between
    # calls (purebandits.algorithms.kernels.cpe_incremental): O(K + log n) per answer instead of two O(n)
    # oracle calls, the same arms bit for bit (tests/test_cpe_incremental.py holds them to the
    # reference rule above). The workspace is a cache of counts_, sums_, pending_ and t_: built on
    # first use, dropped by _resolve (start, load_state_dict, unpickling), _restore, run_compiled
    # and the stop, and never part of state_dict. Other decision classes keep the SciPy oracles.

    #: False makes every call use the O(n) reference rule (for tests and comparisons)
    _incremental = True
    _inc: tuple | None = None  # class default: ask/tell before start take the checked path

    def _inc_state(self) -> tuple | None:
        """The incremental workspace, built on first use; None where the reference rule runs."""
        inc = self._inc
        if inc is not None:
            return inc
        if not self._incremental or not hasattr(self, "n_arms_") or self.done_ or not self._topk:
            return None
        fw, iw, bw = cpe_inc_new(self.n_arms_, int(self.k), self._mode, self._conf, self._eps, float(self.sigma),
                                 self._sets_equal)
        cpe_inc_reset(self.counts_, self.sums_, self.pending_, fw, iw, bw, self.t_ + 1)
        self._m, self._mt = bw[0], bw[1]  # M and M~ as the workspace keeps them (valid once every arm has an answer)
        inc = (self.counts_, self.sums_, self.sumsq_, self.pending_, fw, iw, bw, memoryview(iw[IS_ROW]), self.n_arms_)
        self._inc = inc
        return inc

    def ask(self, n: int = 1, allowed: ArrayLike | None = None) -> list[int]:
        """Return up to ``n`` arms to pull next; ``[]`` once done (incremental path for the top-K class).

        ``allowed`` restricts the choice (class docstring, "Restricted asks"; :meth:`Learner.ask`).
        """
        if allowed is not None:
            return self._ask_restricted(n, allowed)
        inc = self._inc
        if inc is None:
            inc = self._inc_state() if hasattr(self, "n_arms_") else None
            if inc is None:
                return Learner.ask(self, n)
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        if self.done_:
            return []
        counts, pending, fw, iw = inc[0], inc[3], inc[4], inc[5]
        out: list[int] = []
        for _ in range(n):
            arm = cpe_inc_ask(counts, pending, fw, iw)
            if arm < 0:
                break
            out.append(arm)
        return out

    def _ask_restricted(self, n: int, allowed: ArrayLike) -> list[int]:
        """:meth:`ask` with ``allowed``: :meth:`Learner.ask`'s contract and checks, on the workspace when there is one
        (the same arms as :meth:`_ask_allowed`; the pending pull is noted in the workspace, not dropped)."""
        inc = self._inc
        if inc is None:
            inc = self._inc_state() if hasattr(self, "n_arms_") else None
            if inc is None:
                return Learner.ask(self, n, allowed)
        if n.__class__ is not int or n < 1:
            check_param("n", n, low=1, integer=True)
            n = int(n)
        mask = self.allowed_mask(allowed)
        if self.done_ or not mask.any():
            return []
        mask = np.ascontiguousarray(mask)
        counts, pending, fw, iw, scal = inc[0], inc[3], inc[4], inc[5], inc[7]
        out: list[int] = []
        for _ in range(n):
            if scal[0] > 0:  # an arm has no answer: the reference rule, then the workspace notes the pull
                arm = self._restricted_reference(mask)
                cpe_inc_note(counts, pending, fw, iw, arm, 1)
            else:
                arm = int(cpe_inc_ask_allowed(counts, pending, fw, iw, mask))
            out.append(arm)
        return out

    def _restricted_reference(self, mask: np.ndarray) -> int:
        """:meth:`_ask_allowed` keeping the workspace (the caller notes the pending pull in it)."""
        inc = self._inc
        arm = self._ask_allowed(mask)
        self._inc = inc
        return arm

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` that was asked before.

        With the workspace built, an ``int`` arm in range and a finite ``float`` reward, one
        compiled call records it and runs the stop test; anything else goes through
        :meth:`Learner.tell` (which validates, converts, and keeps the workspace in step).
        """
        inc = self._inc
        if inc is None or arm.__class__ is not int or reward.__class__ is not float or self.done_ \
                or not 0 <= arm < inc[8] or reward - reward != 0.0:
            return Learner.tell(self, arm, reward)
        # the answer's stop test is at round t_ + 2: t_ + 1 once t_ counts the answer (as Learner.tell's)
        r = cpe_inc_tell(inc[0], inc[1], inc[2], inc[3], inc[4], inc[5], inc[6], arm, reward, self.t_ + 2)
        if r == -2:
            raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
        self.t_ += 1
        if r > 0:
            self._finish(self._recommend())
            self._inc = None  # no decision follows the stop

    def _on_tell(self, arm: int, reward: float) -> None:
        inc = self._inc
        if inc is not None:
            if self.done_:
                self._inc = None  # no decision follows the stop
            else:
                cpe_inc_told(inc[0], inc[1], inc[3], inc[4], inc[5], inc[6], arm, self.t_ + 1)

    def _on_cancel(self, arm: int) -> None:
        inc = self._inc
        if inc is not None:
            cpe_inc_note(inc[0], inc[3], inc[4], inc[5], arm, 0)

    def _check_stop(self) -> None:
        inc = self._inc_state()
        if inc is not None:
            if inc[7][IS_BUILT] and inc[7][IS_STOP]:
                self._finish(self._recommend())
                self._inc = None
            return
        if (self.counts_ > 0).all() and self._update():
            self._finish(self._recommend())

    def _recommend(self) -> list[int]:
        mu = self.means()
        arms = np.flatnonzero(self._dec.oracle(mu))
        return ranked(arms, mu) if self._topk else [int(a) for a in arms]

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean -+ the learner's own radius (infinite before an arm's first answer)."""
        self._require_started()
        rad = self._radii(self.counts_)
        m = self.means()
        return m - rad, m + rad

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        """Compiled driver (top-K decision class only; other classes use SciPy oracles).

        The incremental kernel when K <= ``_SMALL`` (16, its insertion paths) or ``INCREMENTAL_SHARE * K <=
        n``, else the O(n) reference kernel: the same decisions either way (tests/test_cpe_incremental.py),
        but above 16 the incremental round keeps a heap of at least K found classes and selects M~ from
        about 2K candidates, so once K is a sizeable share of the arms the two plain O(n) oracle calls are
        cheaper (measured with ``benchmarks/bench_top_k.py``: at n = 1,000 the reference is faster from
        K ~ 30, at n = 5,000 from K ~ 150; docs/BENCHMARKS.md, "CLUCB and lil'CLUCB at K = N/2").
        """
        if not self._topk:
            raise NotImplementedError("the compiled CPE kernel covers the top_k decision class only")
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        self._inc = None  # the kernel changes the state arrays in place
        k = int(self.k)
        if self._incremental and (k <= _SMALL or INCREMENTAL_SHARE * k <= self.n_arms_):
            fw, iw, bw = cpe_inc_new(self.n_arms_, k, self._mode, self._conf, self._eps, float(self.sigma),
                                     self._sets_equal)
            stop, t = cpe_inc_kernel(self.counts_, self.sums_, self.sumsq_, fw, iw, bw, int(max_pulls),
                                     *stream.args())
        else:  # the O(n) reference kernel
            stop, t = _cpe_topk_kernel(self.counts_, self.sums_, self.sumsq_, k, self._mode, self._conf,
                                       self._eps, float(self.sigma), self._sets_equal, int(max_pulls), *stream.args())
        self.t_ = int(t)
        self._restore()
        if stop:
            self._finish(self._recommend())


class LilCLUCB(_CPELearner):
    """lil'CLUCB: CLUCB's sampling rule with the finite-LIL radius ``U(T_i, delta/N)``.

    With the default top-K decision class this is the lil'CLUCB of the best-K paper (JLQ17
    App. C, Alg. 2); with another class it is the generalised lil'CLUCB (App. E, Alg. 3): every
    arm's radius is ``u_i = U(T_i, delta/N)`` (ALGORITHMS.md 0.1, "+2" form), ``M_t`` is the
    oracle on the means, ``M~_t`` the oracle on ``mu - u`` inside / ``mu + u`` outside
    ``M_t``; return ``M_t`` when ``M_t == M~_t``, else pull the arm of the symmetric
    difference with the largest radius (pending pulls count in that radius so concurrent
    participants spread). Every arm is pulled once first. Sample complexity
    ``O(width^2 sigma^2 sum_i Delta_i^-2 (log 1/delta + log N + log log 1/Delta_i))`` (Thm 4.2).

    Restricted asks: see :class:`_CPELearner`.

    Parameters
    ----------
    k : int, default=1
        Size of the top set (top_k class only).
    delta : float, default=0.1
        Target error nu.
    decision : dict or None, default=None
        Decision class spec (module docstring); None is ``{"class": "top_k"}``.
    preset : {"heuristic", "faithful"}, default="heuristic"
        ``"faithful"``: eps = 0.01 and ``delta' = (nu N^eps / (2 c_eps))^(1/(1+eps))`` so that
        the Thm 4.1 error bound with both tails counted, ``2 c_eps delta'^(1+eps)/N^eps``,
        equals nu (the paper's bound omits the 2; Notes). ``"heuristic"`` (JLQ17 Sec. 5):
        eps = 0, ``delta' = nu``.
    epsilon : float or None
        Override the preset's eps.
    sigma : float, default=0.5
        Sub-Gaussian scale (1/2 for [0, 1] rewards or N(mu, 1/4)).

    Notes
    -----
    Deviation from JLQ17 (faithful preset only). Lemma D.1 states that
    ``|mu_i - mu_hat_{i,T_i(t)}| < U(T_i(t), delta/N)`` for every arm and t with probability
    ``>= 1 - c_eps delta^(1+eps)/N^eps = 1 - N c_eps (delta/N)^(1+eps)``: a union over the N
    arms of Lemma 2.1, which bounds **one** tail by ``c_eps w^(1+eps)``. The event is
    two-sided, so the union over both tails of every arm is
    ``2 N c_eps (delta/N)^(1+eps) = 2 c_eps delta^(1+eps)/N^eps``, and the paper's faithful
    choice (bound = nu) only guarantees 2 nu. We solve ``2 c_eps delta'^(1+eps)/N^eps = nu``
    instead; the paper's literal constant is not offered as an option (it is
    ``preset="heuristic", epsilon=0.01, delta=(nu N^eps/c_eps)^(1/(1+eps))`` if ever needed).
    (The wrong-answer event alone needs one tail per arm: OPT arms' lower and the others'
    upper tails; the other tails serve the sample bound, CLUCB Lemma 10.)

    References
    ----------
    T. Jiang, J. Li, Y. Qiao. Practical Algorithms for Best-K Identification in Multi-Armed
    Bandits. 2017 (App. C Alg. 2; App. E Alg. 3). S. Chen, T. Lin, I. King, M. R. Lyu,
    W. Chen. Combinatorial Pure Exploration of Multi-Armed Bandits. NIPS 2014.
    """

    name = "lil_clucb"
    paper = ("Jiang, Li, Qiao 2017 (lil'CLUCB, App. C Alg. 2; generalised, App. E Alg. 3; faithful delta' from "
             "2 c_eps delta'^(1+eps)/N^eps = nu, both tails)")
    invalid_params = [("preset", "fast"), ("decision", {"class": "tree"}), ("decision", {"class": "matching",
                                                                                          "shape": [2, 2]})]

    def __init__(self, k: int = 1, delta: float = 0.1, *, decision: dict | None = None, preset: str = "heuristic",
                 epsilon: float | None = None, sigma: float = 0.5) -> None:
        self.k = k
        self.delta = delta
        self.decision = decision
        self.preset = preset
        self.epsilon = epsilon
        self.sigma = sigma

    def _validate(self) -> None:
        super()._validate()
        check_param("preset", self.preset, allowed=("heuristic", "faithful"))
        if self.epsilon is not None:
            check_param("epsilon", self.epsilon, low=0.0, high=1.0, high_open=True)

    def _confidence(self) -> tuple[float, float]:
        nu, n = float(self.delta), self.n_arms_
        if self.preset == "faithful":
            eps = 0.01 if self.epsilon is None else float(self.epsilon)
            if eps <= 0:
                raise ValueError("epsilon must be > 0 with preset='faithful' (c_eps is infinite at 0)")
            # both tails of every arm: 2 c_eps d^(1+eps) / N^eps = nu (JLQ17 Lemma D.1 corrected; Notes)
            d = (nu * n**eps / (2.0 * c_epsilon(eps))) ** (1.0 / (1.0 + eps))
        else:
            eps = 0.0 if self.epsilon is None else float(self.epsilon)
            d = nu
        return d / n, eps


class CLUCB(_CPELearner):
    """CLUCB (Chen et al. 2014) with radius ``R sqrt(2 log(4 n t^3/delta) / T_i)``.

    Same construction as :class:`LilCLUCB` with CLUCB's radius (t = the round, i.e. answered
    pulls + 1; R = sigma) and CLUCB's stopping rule ``w~(M~_t) == w~(M_t)``. Sample complexity
    ``O(width^2 R^2 H log(n R^2 H/delta))``.

    Restricted asks: see :class:`_CPELearner`.

    Parameters
    ----------
    k : int, default=1
        Size of the top set (top_k class only).
    delta : float, default=0.1
    decision : dict or None, default=None
        Decision class spec (see :mod:`purebandits.algorithms.cpe`).
    sigma : float, default=0.5
        Sub-Gaussian scale R.

    References
    ----------
    S. Chen, T. Lin, I. King, M. R. Lyu, W. Chen. Combinatorial Pure Exploration of
    Multi-Armed Bandits. NIPS 2014 (Alg. 1, CLUCB).
    """

    name = "clucb"
    paper = "Chen, Lin, King, Lyu, Chen, NIPS 2014 (CLUCB, Alg. 1)"
    _mode = CLUCB_RAD
    _sets_equal = False
    invalid_params = [("decision", {"class": "path", "edges": [[0, 1]], "source": 0, "target": 1})]

    def __init__(self, k: int = 1, delta: float = 0.1, *, decision: dict | None = None, sigma: float = 0.5) -> None:
        self.k = k
        self.delta = delta
        self.decision = decision
        self.sigma = sigma

    def _confidence(self) -> tuple[float, float]:
        return float(self.delta), 0.0
