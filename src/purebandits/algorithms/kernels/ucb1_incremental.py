"""UCB1's pick on the Python ask/tell path without the O(n) scan (the compiled driver's key heap, over tie classes).

UCB1 pulls ``argmax_i mu_i + sqrt(2 s^2 log(t) / T_i)`` (ties to the lower index), and every index
moves with t. :func:`purebandits.algorithms.ucb1.ucb1_pick` scans the n arms. As in the compiled
driver, upper keys (the indices at a horizon t1 >= t, c inflated by
:data:`purebandits.heaps.UPPER_KEY_MARGIN`) sit in a key heap and a walk evaluates only the
entries whose key reaches the best index found. With graded rewards many arms share the same
``(mu_i, T_i)`` exactly (2,500 of 5,000 captions at times), hence the same index, and a walk over
arms visits every one of them to find the lowest. So the heap holds *classes*: the distinct
``(mu, T)`` pairs, each with the lowest arm of the class (``rep``) for the tie-break, and the
walk returns a class. An answer, a pull asked or a cancel moves one arm between two classes:
O(log n) (a heap push/pop on the class's arms, at most two key updates).
While some arm has ``T_i = 0`` the scan returns the first such arm: a heap of those arms.

The structure follows the learner's ``counts``/``sums``/``pending`` through :meth:`UCB1Cache.ask`,
:meth:`~UCB1Cache.asked` (a pull the learner chose itself: a restricted ask), :meth:`~UCB1Cache.tell`
and :meth:`~UCB1Cache.cancel`; the classes are kept only while every
arm has ``T_i > 0`` (built in O(n) when that starts). It is a cache, never part of the learner's state.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)
from purebandits.heaps import UPPER_KEY_MARGIN, keyheap_init, keyheap_update

__all__ = ["UCB1Cache"]


class UCB1Cache:
    """The lazy pick's state, built from the learner's arrays after ``t`` answers."""

    def __init__(self, counts: np.ndarray, sums: np.ndarray, pending: np.ndarray, t: int) -> None:
        n = counts.shape[0]
        self.n = n
        self.counts, self.sums, self.pending, self.t = counts, sums, pending, int(t)
        T = counts + pending
        self.u: list[float] = T.astype(np.float64).tolist()  # T_i = answered + pending pulls
        self.mu: list[float] = np.divide(sums, counts, out=np.zeros(n), where=counts > 0).tolist()
        self.n_zero = int((T == 0).sum())
        self.zeros: list[int] = np.flatnonzero(T == 0).tolist()  # a heap of the arms with T_i = 0 (and stale ones)
        self.pend = int(pending.sum())
        self.classes = False  # whether the classes below are kept (only while n_zero == 0)

    # ------------------------------------------------------------------ classes
    def _build(self) -> None:
        n = self.n
        self.smu, self.su = np.zeros(n), np.zeros(n)  # a class's (mu, T); T = 0: a free slot
        self.rep = np.zeros(n, np.int64)  # its lowest arm
        self.smv, self.suv, self.repv = memoryview(self.smu), memoryview(self.su), memoryview(self.rep)
        self.key, self.hkey = np.empty(n), np.empty(n + 1)
        self.harm, self.where, self.stack = np.empty(n + 1, np.int64), np.empty(n, np.int64), np.empty(n + 1, np.int64)
        self.hz = np.array([-1.0, 0.0])  # (horizon t1, c1); t1 <= 0: keys not built (the next pick builds them)
        self.hzv = memoryview(self.hz)
        self.cls: dict[tuple[float, float], int] = {}
        self.skey: list[tuple[float, float] | None] = [None] * n
        self.mem: list[list[int] | None] = [None] * n  # a class's arms: a heap, with stale entries
        self.cnt = [0] * n
        self.aslot = [-1] * n
        cls, skey, mem, cnt, aslot = self.cls, self.skey, self.mem, self.cnt, self.aslot
        nxt = 0
        for arm in range(n):  # arms ascending: every list is sorted, i.e. a heap
            key = (self.mu[arm], self.u[arm])
            s = cls.get(key)
            if s is None:
                s = cls[key] = nxt
                nxt += 1
                skey[s] = key
                self.smv[s], self.suv[s] = key
                mem[s] = [arm]
                self.repv[s] = arm
            else:
                mem[s].append(arm)
            cnt[s] += 1
            aslot[arm] = s
        self.free = list(range(n - 1, nxt - 1, -1))
        self.classes = True

    def _move(self, arm: int, m: float, T: float) -> None:
        """Move ``arm`` to the class ``(m, T)`` (classes kept)."""
        aslot = self.aslot
        s = aslot[arm]
        key = (m, T)
        if self.skey[s] == key:
            return
        aslot[arm] = -1
        cnt = self.cnt
        c = cnt[s] - 1
        cnt[s] = c
        built = self.hzv[0] > 0.0
        if c == 0:  # the class is gone
            del self.cls[self.skey[s]]
            self.skey[s] = None
            self.mem[s] = None
            self.suv[s] = 0.0
            self.free.append(s)
            if built:
                _class_key(self.smu, self.su, self.hkey, self.harm, self.where, self.hz, s)
        elif self.repv[s] == arm:
            h = self.mem[s]
            while aslot[h[0]] != s:
                heapq.heappop(h)
            self.repv[s] = h[0]
        s = self.cls.get(key)
        if s is None:
            s = self.free.pop()
            self.cls[key] = s
            self.skey[s] = key
            self.smv[s] = m
            self.suv[s] = T
            self.mem[s] = [arm]
            cnt[s] = 1
            self.repv[s] = arm
            if built:
                _class_key(self.smu, self.su, self.hkey, self.harm, self.where, self.hz, s)
        else:
            h = self.mem[s]
            c = cnt[s] + 1
            cnt[s] = c
            if len(h) > 2 * c + 16:  # drop the stale entries
                h = self.mem[s] = sorted({a for a in h if aslot[a] == s})
            heapq.heappush(h, arm)
            if arm < self.repv[s]:
                self.repv[s] = arm
        aslot[arm] = s

    # ------------------------------------------------------------------ the learner's events
    def ask(self, t: float, index_sigma: float) -> int:
        """The arm to pull at ``t`` (answered + pending pulls), recorded as pending."""
        self.pend += 1
        if self.n_zero > 0:  # ucb1_pick returns the first arm with T_i = 0
            u, zeros = self.u, self.zeros
            while u[zeros[0]] != 0.0:
                heapq.heappop(zeros)
            arm = heapq.heappop(zeros)
            self.n_zero -= 1
            u[arm] = 1.0
            return arm
        if not self.classes:
            self._build()
        s = _class_pick(self.smu, self.su, self.rep, self.key, self.hkey, self.harm, self.where, self.stack,
                        self.hz, t, index_sigma)
        arm = self.repv[s]
        T = self.u[arm] + 1.0
        self.u[arm] = T
        self._move(arm, self.mu[arm], T)
        return arm

    def asked(self, arm: int) -> None:
        """A pull of ``arm`` chosen by the caller (a restricted ask) is now pending."""
        self.pend += 1
        T = self.u[arm] + 1.0
        self.u[arm] = T
        if T == 1.0:  # the arm had no pull: its entry in ``zeros`` is now stale (ask skips it)
            self.n_zero -= 1  # the classes are not kept while an arm has none (n_zero > 0 before this)
        elif self.classes:
            self._move(arm, self.mu[arm], T)

    def tell(self, arm: int, m: float) -> None:
        """``arm`` was answered: its mean is now ``m`` (T unchanged)."""
        self.t += 1
        self.pend -= 1
        self.mu[arm] = m
        if self.classes:
            self._move(arm, m, self.u[arm])

    def cancel(self, arm: int) -> None:
        """A pending pull of ``arm`` was cancelled."""
        self.pend -= 1
        T = self.u[arm] - 1.0
        self.u[arm] = T
        if T == 0.0:
            self.n_zero += 1
            heapq.heappush(self.zeros, arm)
            self.classes = False  # the scan picks until every arm has a pull again
        elif self.classes:
            self._move(arm, self.mu[arm], T)


@njit(cache=True)
def _class_key(smu, su, hkey, harm, where, hz, s):  # pragma: no cover - compiled
    """Set the key of class slot ``s`` from its (mu, T) at c1 = ``hz[1]`` (-inf for a free slot)."""
    v = smu[s] + math.sqrt(hz[1] / su[s]) if su[s] > 0.0 else -math.inf
    keyheap_update(hkey, harm, where, smu.shape[0], s, v)


@njit(cache=True)
def _class_pick(smu, su, rep, key, hkey, harm, where, stack, hz, t, index_sigma):  # pragma: no cover - compiled
    """The class with the largest UCB1 index at ``t`` (ties: the lower ``rep``); its ``rep`` is ucb1_pick's arm.

    The index is :func:`purebandits.algorithms.ucb1.ucb1_index`'s ``m + sqrt(2 s^2 lt / T)``. The
    keys are (re)built when ``t`` passes the horizon ``hz[0]``, set at ``t + max(n/64, t/256)``
    (:func:`purebandits.heaps.bonus_horizon` takes n/8; a rebuild costs ~20 us at n = 5,000,
    and tighter keys make the walk shorter). The walk is
    :func:`purebandits.heaps.keyheap_best_bonus` with the classes' lowest arms as the tie-break.
    """
    n = smu.shape[0]
    if t > hz[0]:
        horizon = t + max(n / 64.0, t / 256.0)
        c1 = 2.0 * index_sigma * index_sigma * math.log(horizon) * UPPER_KEY_MARGIN
        for i in range(n):
            key[i] = smu[i] + math.sqrt(c1 / su[i]) if su[i] > 0.0 else -math.inf
        keyheap_init(key, hkey, harm, where)
        hz[0] = horizon
        hz[1] = c1
    lt = math.log(t) if t > 1.0 else 0.0
    c = 2.0 * index_sigma * index_sigma * lt
    best = -1
    best_v = -math.inf
    stack[0] = 0
    size = 1
    while size > 0:
        size -= 1
        p = stack[size]
        if hkey[p] < best_v:
            continue
        a = harm[p]
        v = smu[a] + math.sqrt(c / su[a])
        if v > best_v or (v == best_v and rep[a] < rep[best]):
            best_v = v
            best = a
        ch = 2 * p + 1
        if ch < n:
            d = ch + 1  # hkey[n] is the sentinel (-inf)
            if hkey[d] > hkey[ch]:
                ch, d = d, ch
            if d < n and hkey[d] >= best_v:
                stack[size] = d
                size += 1
            if hkey[ch] >= best_v:
                stack[size] = ch
                size += 1
    return best
