"""lil'UCB (Jamieson, Malloy, Nowak, Bubeck, COLT 2014), faithful and heuristic presets."""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.base import Learner, StoppingProgress, check_param
from purebandits.bounds import c_epsilon, lil_radius_s, lil_ucb_index_s, ls_delta
from purebandits.heaps import topheap_init, topheap_replace, topheap_size
from purebandits.instances.rewards import RewardStream, stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.stopping import (
    LS_EPSILON,
    borrow_tracker,
    either,
    ls_progress,
    ls_stop_arm,
    ls_tracker_fill,
    ls_tracker_update,
    ls_workspace,
    statistic_progress,
)

__all__ = ["LilUCB"]


class LilUCB(Learner):
    """lil'UCB: sample the arm with the largest LIL index, stop when one arm dominates the pulls.

    Index (JMNB14 Fig. 1): ``mu_hat_i + (1+beta) U(T_i, delta')`` with the finite-LIL radius
    ``U`` (ALGORITHMS.md 0.1) and sigma = 1/2. Stop once some arm has
    ``T_i >= 1 + lam * sum_{j != i} T_j`` and output the most-pulled arm; with ``ls=True``
    also stop by the LIL stopping rule LS (JMNB14 Sec. 5) and output its arm.

    Parameters
    ----------
    delta : float, default=0.1
        Target error probability nu of the whole procedure.
    preset : {"heuristic", "faithful"}, default="heuristic"
        ``"faithful"`` (JMNB14 Sec. 3/5): eps = 0.01, beta = 1, lam = ((2+beta)/beta)^2 = 9,
        delta' = (sqrt(1+nu)-1)^2/(4 c_eps) (from inverting the Theorem 2 probability
        1 - 4 sqrt(c_eps delta') - 4 c_eps delta'; nu/2 in place of nu with LS).
        ``"heuristic"`` (JMNB14 Sec. 5, no guarantee): eps = 0, beta = 1/2,
        lam = 1 + 10/n, delta' = nu/5.
    epsilon, beta, lam : float or None
        Override the preset's value.
    ls : bool, default=False
        Also stop with LS; the error budget is then split nu/2 + nu/2.
    sigma : float, default=0.5
        Sub-Gaussian scale of the rewards (1/2 for rewards in [0, 1] or N(mu, 1/4)).

    Notes
    -----
    With eps = 0 the index is ``+inf`` at T = 1 (log log 1 is undefined), so every arm is
    pulled twice first (banditpylib's reading). A pending pull counts in ``T_i`` of the index
    (not in the mean), so concurrent participants are spread over arms. Per pull the
    learner does O(log n) work: only the pulled arm's index changes, kept in a heap
    (JMNB14 Sec. 5 footnote).

    Restricted asks (``ask(n, allowed=...)``, a participant rates each item once): the allowed
    arm with the largest index (pending pulls counted in ``T_i`` as in the unrestricted ask; ties
    to the lowest arm). The stopping rules are unchanged, and that has a cost. The count rule has
    no confidence term: its correctness comes from the sampling rule, not from the LIL bounds
    alone. Theorem 2's proof bounds a suboptimal arm's pulls by comparing, at each of its pulls,
    its index with the best arm's (which stays above mu_1 on the LIL event); that comparison is
    where ``lam = ((2+beta)/beta)^2`` comes from. Under a restriction the comparison holds only
    for the pulls made while the best arm was allowed, and a pull made because it was not allowed
    escapes it. So restricted sampling affects correctness, not only the sample complexity:
    Theorem 2 does not cover a restricted run, and restrictions that often leave the best arm out
    could let a suboptimal arm meet the count rule. In practice the rule rather fails to fire: it
    needs one arm to hold ``lam/(1+lam)`` (at least half) of all answers, and an arm allowed in a
    smaller share of the asks never does. A crowd that rates each item once gives an item at most
    one answer per participant, so there the count rule practically never stops (nor under the
    common checks' random halves, which therefore run it with ``ls=True``). LS (``ls=True``)
    compares LIL bounds that hold for every arm at all times, whatever the sampling (a union over
    arms and times), so it keeps its nu/2 guarantee under restrictions: use ``ls=True`` with
    restricted asks.

    References
    ----------
    K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
    for Multi-Armed Bandits. COLT 2014, arXiv:1312.7308.
    """

    name = "lil_ucb"
    kind = "fixed_confidence"
    tags = {"top_k": False}
    #: the restricted-ask common checks run lil'UCB with LS: its count rule cannot fire when each participant rates
    #: an item once (class docstring, "Restricted asks")
    restricted_test_params = {"ls": True}
    paper = "Jamieson, Malloy, Nowak, Bubeck, COLT 2014 (Fig. 1, Thm 2, Sec. 5)"

    def __init__(
        self,
        delta: float = 0.1,
        *,
        preset: str = "heuristic",
        epsilon: float | None = None,
        beta: float | None = None,
        lam: float | None = None,
        ls: bool = False,
        sigma: float = 0.5,
    ) -> None:
        self.delta = delta
        self.preset = preset
        self.epsilon = epsilon
        self.beta = beta
        self.lam = lam
        self.ls = ls
        self.sigma = sigma

    def _validate(self) -> None:
        check_param("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_param("preset", self.preset, allowed=("heuristic", "faithful"))
        if self.epsilon is not None:
            check_param("epsilon", self.epsilon, low=0.0, high=1.0, high_open=True)
        if self.beta is not None:
            check_param("beta", self.beta, low=0.0, low_open=True)
        if self.lam is not None:
            check_param("lam", self.lam, low=0.0, low_open=True)
        check_param("ls", self.ls, allowed=(True, False))
        check_param("sigma", self.sigma, low=0.0, low_open=True)

    def _resolve(self) -> None:
        n, nu = self.n_arms_, float(self.delta)
        if self.preset == "faithful":
            eps, beta = 0.01, 1.0
            lam = ((2 + beta) / beta) ** 2
        else:
            eps, beta, lam = 0.0, 0.5, 1.0 + 10.0 / n
        eps = eps if self.epsilon is None else float(self.epsilon)
        beta = beta if self.beta is None else float(self.beta)
        lam = lam if self.lam is None else float(self.lam)
        if self.preset == "faithful":
            if eps <= 0:
                raise ValueError("epsilon must be > 0 with preset='faithful' (c_eps is infinite at 0)")
            target = nu / 2 if self.ls else nu
            delta_int = (math.sqrt(1 + target) - 1) ** 2 / (4 * c_epsilon(eps))
        else:
            delta_int = nu / 5
        self._eps, self._beta, self._lam, self._delta_int = eps, beta, lam, delta_int
        self._sigma = float(self.sigma)
        self._b1 = 1.0 + beta
        self._tab = memoryview(_radius_table(delta_int, eps, self._sigma))
        self._d_ls = ls_delta(nu / 2, LS_EPSILON)  # used only when ls=True

    # ------------------------------------------------------------------ Python ask/tell path
    # The arms' keys (-index) live in a heap of plain floats: ``_key[arm]`` is the key of each
    # arm, ``_owner[k]`` is the arm holding key ``k`` (an int) or, when several arms tie at
    # ``k`` (every arm at -inf before its second pull, equal counts and sums with Bernoulli
    # rewards), a heapq list of those arms, possibly with stale entries (arms that moved on:
    # ``_key[a] != k``). ``_heap`` holds at least one copy of every key in ``_owner`` and may
    # hold stale copies. The top is the smallest key, ties to the lowest arm: the order of the
    # compiled kernel (:mod:`purebandits.heaps`) and of the former ``(-index, arm)`` tuple heap.
    # Floats compare several times faster than tuples in ``heapq``, and in the sequential loop a
    # pull costs one ``heapreplace`` and four dict operations. Stale entries are dropped lazily;
    # ``_stale`` counts them and the structure is rebuilt from ``_key`` when it passes 2n + 64.
    _heap: list[float] | None = None  # class defaults: ask/tell before start take the checked path
    _fv: tuple | None = None
    _asked = -1

    def _index(self, arm: int) -> float:
        # only called once the heap exists, i.e. with the views _fv of the current arrays
        pending, counts, sums = self._fv[:3]
        c = counts[arm]
        t = c + pending[arm]
        if t == 0:
            return math.inf
        mean = sums[arm] / c if c > 0 else 0.0
        if t < _TABLE_SIZE:  # = lil_ucb_index_s(mean, t, ...), with U(t) from the shared cache
            tab = self._tab
            u = tab[t]
            if u != u:
                u = lil_radius_s(float(t), self._delta_int, self._eps, self._sigma, 0.0)
                tab[t] = u
            return mean + self._b1 * u
        return lil_ucb_index_s(mean, float(t), self._delta_int, self._eps, self._beta, self._sigma)

    def _restore(self) -> None:
        self._ws = None  # the compiled driver's heap: rebuilt on its next call
        self._n_zero = int((self.counts_ == 0).sum())
        self._heap = None  # the Python heap is built on the first ask (the compiled driver never needs it)
        # memoryviews of the arrays (taken with the heap: start and load replace the arrays), the
        # heap structures and constants, in one tuple: the fast path unpacks it in one step
        self._fv = None
        self._asked = -1  # the arm of the last ask, its pending pull not yet in its key

    def __getstate__(self) -> dict:
        # the heap is a cache of the state and _fv holds memoryviews: rebuild both after unpickling
        state = super().__getstate__()
        for name in ("_heap", "_fv", "_key", "_owner"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "n_arms_" in state:
            self._restore()

    def _build_heap(self) -> None:
        views = self._views()
        keys = _all_keys(self.counts_, self.pending_, self.sums_, self._delta_int, self._eps, self._beta,
                         self._sigma)
        self._key = (-keys).tolist()
        self._owner: dict[float, int | list[int]] = {}
        self._heap = []
        self._asked = -1
        self._rebuild()
        self._fv = (*views, self._key, self._owner, self._heap, self._tab, self._b1, self._lam, self.n_arms_)

    def _rebuild(self) -> None:
        """Rebuild ``_owner`` and ``_heap`` in place from ``_key`` (no stale entries); O(n)."""
        owner = self._owner
        owner.clear()
        for arm, k in enumerate(self._key):
            o = owner.get(k)
            if o is None:
                owner[k] = arm
            elif o.__class__ is int:
                owner[k] = [o, arm]
            else:
                o.append(arm)  # arms ascending: a sorted list is a heap
        self._heap[:] = owner
        heapq.heapify(self._heap)
        self._stale = 0

    def _top(self) -> int:
        """The arm with the smallest key (largest index), ties to the lowest arm."""
        heap, owner, key = self._heap, self._owner, self._key
        while True:
            k = heap[0]
            o = owner.get(k)
            if o is None:  # a stale copy
                heapq.heappop(heap)
                continue
            if o.__class__ is int:
                return o
            while o and key[o[0]] != k:
                heapq.heappop(o)
            if o:
                return o[0]
            del owner[k]
            heapq.heappop(heap)

    def _move(self, arm: int, old: float, new: float) -> None:
        """Give ``arm`` (which holds key ``old``) the key ``new`` != ``old``."""
        key, owner, heap = self._key, self._owner, self._heap
        key[arm] = new
        o = owner[old]
        gone = True  # no arm holds old any more
        if o.__class__ is int:
            del owner[old]
        elif o[0] == arm:
            heapq.heappop(o)
            if o:
                gone = False
            else:
                del owner[old]
        else:
            gone = False
            self._stale += 1  # arm stays in the tie list of old, stale
        o = owner.get(new)
        if o is None:
            owner[new] = arm
            if gone and heap[0] == old:
                heapq.heapreplace(heap, new)
            else:
                heapq.heappush(heap, new)
                self._stale += 1
        else:
            if o.__class__ is int:
                owner[new] = [o, arm] if o < arm else [arm, o]
            else:
                heapq.heappush(o, arm)
            if gone and heap[0] == old:
                heapq.heappop(heap)
        if self._stale > 2 * self.n_arms_ + 64:
            self._rebuild()

    def _rekey(self, arm: int) -> None:
        """Recompute the key of ``arm`` after its counts or pending pulls changed."""
        new = -self._index(arm)
        old = self._key[arm]
        if new != old:
            self._move(arm, old, new)

    def _ask_one(self) -> int:
        if self._heap is None:
            self._build_heap()
        if self._asked >= 0:  # its pending pull now counts in its index
            self._rekey(self._asked)
        arm = self._top()
        self._asked = arm  # re-keyed on the next ask, unless a tell or cancel does it first
        return arm

    def _ask_allowed(self, mask: np.ndarray) -> int:
        """The allowed arm with the largest index (pending pulls in ``T``, ties to the lowest arm): class docstring,
        "Restricted asks". Learner.ask adds the pending pull; it is keyed at the next call, as after ``_ask_one``."""
        if self._heap is None:
            self._build_heap()
        if self._asked >= 0:  # its pending pull now counts in its index
            self._rekey(self._asked)
        arm = self._top_allowed(mask)
        self._asked = arm
        return arm

    def _top_allowed(self, mask: np.ndarray) -> int:
        """:meth:`_top` among the allowed arms: the smallest key (largest index), ties to the lowest arm.

        The heap's top when it is allowed (O(1) amortised, as :meth:`_top`), else one pass over the keys
        (O(n) in NumPy: the heap holds stale copies of old keys, mostly small ones, so walking it in key
        order could visit many of them).
        """
        arm = self._top()
        if mask[arm]:
            return arm
        idx = np.flatnonzero(mask)
        keys = np.array(self._key)[idx]
        return int(idx[np.argmin(keys)])  # the first of equal keys: the lowest arm

    def ask(self, n: int = 1, allowed: ArrayLike | None = None) -> list[int]:
        """Return up to ``n`` arms to pull next; ``[]`` once done.

        ``ask(1)`` with the heap built takes a fast path (no call per arm through
        :meth:`Learner.ask`); it does what the general path does. ``allowed`` restricts the
        choice (class docstring, "Restricted asks"; :meth:`Learner.ask`).
        """
        if allowed is not None:
            return Learner.ask(self, n, allowed)
        fv = self._fv
        if fv is None or n.__class__ is not int or n != 1 or self.done_:
            return Learner.ask(self, n)
        if self._asked >= 0:
            self._rekey(self._asked)
        o = fv[5].get(fv[6][0])  # the owner of the smallest key
        arm = o if o.__class__ is int else self._top()
        fv[0][arm] += 1
        self._asked = arm
        return [arm]

    def tell(self, arm: int, reward: float) -> None:
        """Record the answer ``reward`` of a pull of ``arm`` that was asked before.

        The common case (heap built, ``int`` arm in range, ``float`` reward) is handled here in
        one call: counts, index from the radius table, heap update and stopping rule inlined.
        Anything else goes through :meth:`Learner.tell`, which validates and converts.
        """
        fv = self._fv
        if fv is None or arm.__class__ is not int or reward.__class__ is not float:
            return Learner.tell(self, arm, reward)
        pending, counts, sums, sumsq, key, owner, heap, tab, b1, lam, n = fv
        if not 0 <= arm < n:
            return Learner.tell(self, arm, reward)
        p = pending[arm] - 1
        if p < 0:
            raise ValueError(f"arm {arm} has no pending pull: tell only answers an asked pull")
        if reward - reward != 0.0:  # inf - inf and nan - nan are nan
            raise ValueError(f"reward must be finite, got {reward!r}")
        pending[arm] = p
        c = counts[arm] + 1
        counts[arm] = c
        s = sums[arm] + reward
        sums[arm] = s
        sumsq[arm] += reward * reward
        total = self.t_ + 1
        self.t_ = total
        if self._asked == arm:
            self._asked = -1
        # the new key: -index, as _index computes it (here c >= 1)
        t = c + p
        if t < _TABLE_SIZE:
            u = tab[t]
            if u != u:
                u = lil_radius_s(float(t), self._delta_int, self._eps, self._sigma, 0.0)
                tab[t] = u
            new = -(s / c + b1 * u)
        else:
            new = -lil_ucb_index_s(s / c, float(t), self._delta_int, self._eps, self._beta, self._sigma)
        old = key[arm]
        if new != old:
            # sequential loop: arm was the top, alone at its key, and its new key is not taken
            if heap[0] == old and owner[old].__class__ is int and new not in owner:
                key[arm] = new
                del owner[old]
                owner[new] = arm
                heapq.heapreplace(heap, new)
            else:
                self._move(arm, old, new)
        if c == 1:
            self._n_zero -= 1
        # as in _on_tell: only the told arm can newly satisfy T_i >= 1 + lam (t - T_i); the
        # threshold is _count_threshold(c), inlined on this fast path (tests hold them equal)
        if self._n_zero == 0 and c >= 1 + lam * (total - c):
            self._finish()
        if self.ls and not self.done_:
            self._check_stop()

    def _on_tell(self, arm: int, reward: float) -> None:
        # the checked path (Learner.tell); LilUCB.tell inlines the same work
        if self._heap is not None:
            if self._asked == arm:
                self._asked = -1
            self._rekey(arm)
        c = self._mv[1][1][arm]  # Learner.tell has just validated the views
        if c == 1:
            self._n_zero -= 1
        # the rule applies after the initial pull of every arm (JMNB14 Fig. 1); only the told
        # arm can newly satisfy T_i >= 1 + lam (t - T_i), so this is O(1) per pull
        if self._n_zero == 0 and c >= self._count_threshold(c):
            self._finish()

    def _count_threshold(self, c: int) -> float:
        """The pulls an arm with ``c`` of the ``t_`` answered pulls needs to stop: ``1 + lam (t - c)``.

        JMNB14 Fig. 1: stop once some arm has ``T_i >= 1 + lam sum_{j != i} T_j``.
        """
        return 1 + self._lam * (self.t_ - c)

    def _on_cancel(self, arm: int) -> None:
        if self._heap is not None:
            if self._asked == arm:
                self._asked = -1
            self._rekey(arm)

    def _check_stop(self) -> None:
        if self.ls:
            arm = ls_stop_arm(self.sums_, self.counts_, self._d_ls, float(self.sigma))
            if arm >= 0:
                self._finish([int(arm)])

    def _stopping_progress(self) -> StoppingProgress:
        """The count rule (JMNB14 Fig. 1), and LS (Sec. 5) with ``ls=True``.

        Count rule: ``statistic`` = the most-pulled arm's answers ``T``, ``threshold`` =
        :meth:`_count_threshold` ``= 1 + lam (t - T)``, fires at margin >= 0; ``fraction = T /
        threshold``. It applies once every arm has an answer (margin None before). With
        ``ls=True`` the rule nearer to firing is reported (:func:`purebandits.stopping.either`).
        """
        counts = self.counts_
        rule = f"stops when one item has at least 1 + {self._lam:.3g} x (the other items' answers) answers"
        source = f"(lil'UCB, Jamieson et al. 2014 Fig. 1, {self.preset} preset, delta = {self.delta:g})"
        desc = f"{rule} {source}"
        if (counts == 0).any():
            count = StoppingProgress(fraction=0.0, description=desc)
        else:
            c = int(counts.max())
            thr = self._count_threshold(c)
            count = statistic_progress(float(c), thr, c >= thr, desc, fraction=c / thr)
        if not self.ls:
            return count
        ls = ls_progress(self.sums_, counts, self._d_ls, float(self.sigma), float(self.delta) / 2)
        return either([("count rule", count), ("LIL stopping rule", ls)],
                      f"{rule}, or by the LIL stopping rule LS {source}")

    def _recommend(self) -> list[int]:
        # the most-pulled arm (JMNB14's output), ties to the higher mean then the lower index
        counts = self.counts_
        cand = np.flatnonzero(counts == counts.max())
        if cand.size == 1:
            return [int(cand[0])]
        return [int(cand[np.argmax(self.means()[cand])])]  # argmax: the first, i.e. lowest, index

    def run_compiled(self, stream: RewardStream, max_pulls: int) -> None:
        if self.done_:
            return
        if self.pending_.any():
            raise ValueError("run_compiled needs a learner with no pending pulls")
        n = self.n_arms_
        # the kernel's heap (and LS tracker) survive between calls while nothing else touched
        # the state (checkpoints resume in O(1) instead of rebuilding in O(n))
        cache = self.__dict__.get("_ws")
        init = cache is None or cache[0] != self.t_
        if init:
            m = topheap_size(n)
            ws = (np.empty(n), np.empty(m), np.empty(m, np.int64))
            tr = ls_workspace(n if self.ls else 1)
        else:
            ws, tr = cache[1], cache[2]
        done, final, t = _lil_ucb_kernel(
            self.counts_, self.sums_, self.sumsq_, ws, tr, self._tab.obj, init, self._delta_int, self._eps,
            self._beta, self._sigma, self._lam, self.ls, self._d_ls, int(max_pulls), *stream.args(),
        )
        self.t_ = int(t)
        self._restore()
        self._ws = (self.t_, ws, tr)
        if done:
            self._finish([int(final)])


#: radius tables U(t) for t < _TABLE_SIZE, per (delta', eps, sigma), filled lazily by the kernel
_TABLES: dict[tuple[float, float, float], np.ndarray] = {}
_TABLE_SIZE = 1 << 18


def _radius_table(delta: float, eps: float, sigma: float) -> np.ndarray:
    """A cache of ``lil_radius_s(t, delta, eps, sigma, 0)`` by ``t`` (NaN = not computed yet).

    The kernel and :meth:`LilUCB._index` read ``U(t)`` from it instead of evaluating two
    logarithms and a square root per pull; the value is the same double, so the index
    ``mean + (1+beta) U(t)`` is bit-identical to :func:`purebandits.bounds.lil_ucb_index_s`.
    """
    key = (float(delta), float(eps), float(sigma))
    tab = _TABLES.get(key)
    if tab is None:
        if len(_TABLES) >= 8:
            _TABLES.pop(next(iter(_TABLES)))
        tab = _TABLES[key] = np.full(_TABLE_SIZE, np.nan)
    return tab


@njit(cache=True)
def _all_keys(counts, pending, sums, delta, eps, beta, sigma):  # pragma: no cover - compiled
    """The index of every arm (``_index`` for all arms at once); +inf for arms never pulled."""
    n = counts.shape[0]
    key = np.empty(n)
    for i in range(n):
        t = counts[i] + pending[i]
        if t == 0:
            key[i] = math.inf
        else:
            mean = sums[i] / counts[i] if counts[i] > 0 else 0.0
            key[i] = lil_ucb_index_s(mean, float(t), delta, eps, beta, sigma)
    return key


@njit(cache=True)
def _lil_ucb_kernel(counts, sums, sumsq, ws, tr, tab, init, delta, eps, beta, sigma, lam, use_ls, d_ls, max_pulls,
                    kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Sequential lil'UCB: same index, same tie-break, same stop as the Python learner.

    ``ws`` = (key, hkey, harm): the keys by arm (used to build the heap) and a replace-top heap
    (:func:`purebandits.heaps.topheap_replace`: only the pulled arm, always the top, changes
    key); ``tr`` (an LS workspace, used when ``use_ls``) and ``tab`` (the radius cache of
    :func:`_radius_table`) are arrays allocated by the caller, so the kernel can borrow them
    (:mod:`purebandits.jit`); with ``init`` false they already hold the heap and tracker of the
    current state (a resumed run). Returns (done, recommended arm, total pulls); LS is tracked
    incrementally.
    """
    counts, sums, sumsq, tab = borrow(counts), borrow(sums), borrow(sumsq), borrow(tab)
    key, hkey, harm = borrow(ws[0]), borrow(ws[1]), borrow(ws[2])
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    n = counts.shape[0]
    if init:
        for i in range(n):
            if counts[i] == 0:
                key[i] = math.inf
            else:
                key[i] = lil_ucb_index_s(sums[i] / counts[i], float(counts[i]), delta, eps, beta, sigma)
        topheap_init(key, hkey, harm)
        if use_ls:
            ls_tracker_fill(tr, sums, counts, d_ls, sigma)
    total = 0
    n_zero = 0
    for i in range(n):
        total += counts[i]
        if counts[i] == 0:
            n_zero += 1
    trb = borrow_tracker(tr)
    n_tab = tab.shape[0]
    while total < max_pulls:
        arm = harm[0]
        r = stream_draw(kind, a, b, cdf, values, block, pos, rng, arm)
        c = counts[arm] + 1
        if c == 1:
            n_zero -= 1
        counts[arm] = c
        s = sums[arm] + r
        sums[arm] = s
        sumsq[arm] += r * r
        total += 1
        if c < n_tab:  # = lil_ucb_index_s(s / c, c, ...), with U(c) from the cache
            u = tab[c]
            if u != u:
                u = lil_radius_s(float(c), delta, eps, sigma, 0.0)
                tab[c] = u
            index = s / c + (1.0 + beta) * u
        else:
            index = lil_ucb_index_s(s / c, float(c), delta, eps, beta, sigma)
        topheap_replace(hkey, harm, n, index)
        if n_zero == 0 and c >= 1 + lam * (total - c):
            # the most-pulled arm, ties to the higher mean then the lower index (= _recommend)
            best = arm
            for j in range(n):
                if counts[j] > counts[best] or (counts[j] == counts[best] and (
                        sums[j] / counts[j] > sums[best] / counts[best]
                        or (sums[j] / counts[j] == sums[best] / counts[best] and j < best))):
                    best = j
            return True, best, total
        if use_ls:
            stop = ls_tracker_update(trb, sums, counts, arm, d_ls, sigma)
            if stop >= 0:
                return True, stop, total
    return False, -1, total
