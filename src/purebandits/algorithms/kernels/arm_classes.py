"""Classes of equal arms: member lists in index order and a hash table of classes, for the compiled kernels.

A *class* is the set of arms that share a key: the bits of their mean, their count and, where the
kernel needs it, a side (LUCB1 and KL-LUCB keep the empirical top-K's lower bounds apart from the
other arms' upper bounds). Members of a class have the same bound bit for bit, so a kernel keeps
only the class's lowest-indexed member (its *representative*, the one that wins every tie) in its
bound heap. Without classes, the ties of 1-sparse instances cost one bound per tied arm: on a
1-sparse Bernoulli instance with 1,000 arms the 999 arms of mean 0 tie at every round.

Used by :mod:`purebandits.algorithms.kernels.lucb_round_incremental` (LUCB1, KL-LUCB, and through it the
ask/tell workspace and AT-LUCB) and :mod:`purebandits.algorithms.kernels.cpe_incremental` (CLUCB,
lil'CLUCB). Each kernel keeps its own keys (heap keys, window keys); this module keeps the lists,
the table and the free list, in rows of the kernel's int64 workspace ``iw`` named by a
:class:`ClassRows`, and empties them (:func:`classes_clear`) when a kernel builds its classes.
Class ids are ``0..n-1`` (never more classes than arms).

Invariants (:func:`check_classes` verifies every one):

- every arm is in at most one class (``iw[cls, i]``, -1 for none);
- a class's members form a doubly linked list (``nxt``/``prv``, -1 at the ends) in strictly
  increasing index order from ``head`` (the representative) to ``tail``, of ``size`` members;
- a live class (size > 0) sits in the linear-probing table at ``iw[slot, c]``, reachable from its
  home slot (:func:`class_hash`) without crossing an empty slot, so :func:`class_find` finds it
  (deletion is by backward shift, never by tombstones);
- the free list ``iw[free, :nfree]`` holds exactly the empty classes, none of them in the table.

The walks over a list or the table are bounded: a corrupted list or table raises
``RuntimeError`` instead of looping forever.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

__all__ = ["ClassRows", "NO_SIDE", "class_hash", "class_find", "class_open", "class_link", "class_unlink",
           "class_release", "classes_clear", "class_fault", "check_classes", "CLASS_FAULTS"]

#: ``ClassRows.side`` of a kernel whose classes have no side (every class's side is 0)
NO_SIDE = -1


class ClassRows(NamedTuple):
    """Rows of the int64 workspace that hold the classes (a kernel's layout; ``side`` may be :data:`NO_SIDE`).

    Per arm: ``cls`` (its class or -1), ``nxt`` and ``prv`` (its neighbours in the class, -1 at the
    ends). Per class: ``head``, ``tail``, ``pb`` (mean bits), ``t`` (count), ``side``, ``slot`` (in
    the table), ``size``. ``free``: the free list of class ids.
    """

    cls: int
    nxt: int
    prv: int
    head: int
    tail: int
    pb: int
    t: int
    side: int
    slot: int
    size: int
    free: int


@njit(cache=True, inline="always")
def class_hash(pb, T, side, mask):  # pragma: no cover - compiled
    """Home slot of the class (mean bits ``pb``, count ``T``, ``side``) in a table of ``mask + 1`` slots.

    ``side`` 0 adds nothing (``x ^ 0 == x``): kernels without sides hash (mean bits, count) alone.
    """
    x = np.uint64(pb) ^ (np.uint64(T) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(side)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    return np.int64(x & np.uint64(mask))


@njit(cache=True, inline="always")
def _side_of(iw, rows, c):  # pragma: no cover - compiled
    return iw[rows.side, c] if rows.side >= 0 else 0


@njit(cache=True, inline="always")
def class_find(iw, rows, tab, mask, pb, T, side):  # pragma: no cover - compiled
    """(slot, c): the slot of class (``pb``, ``T``, ``side``) and its id, or the empty slot where it goes and -1."""
    slot = class_hash(pb, T, side, mask)
    for _ in range(mask + 1):
        c = tab[slot]
        if c < 0 or (iw[rows.pb, c] == pb and iw[rows.t, c] == T and _side_of(iw, rows, c) == side):
            return slot, c
        slot = (slot + 1) & mask
    raise RuntimeError("classes: the hash table has no empty slot (corrupted)")


@njit(cache=True, inline="always")
def class_open(iw, rows, tab, slot, nfree, pb, T, side, i):  # pragma: no cover - compiled
    """(c, nfree): a class from the free list, at the empty ``slot`` of :func:`class_find`, holding arm i alone."""
    if nfree <= 0:
        raise RuntimeError("classes: no free class left (the free list is corrupted)")
    nfree -= 1
    c = iw[rows.free, nfree]
    tab[slot] = c
    iw[rows.slot, c] = slot
    iw[rows.pb, c] = pb
    iw[rows.t, c] = T
    if rows.side >= 0:
        iw[rows.side, c] = side
    iw[rows.head, c] = i
    iw[rows.tail, c] = i
    iw[rows.nxt, i] = -1
    iw[rows.prv, i] = -1
    iw[rows.size, c] = 1
    iw[rows.cls, i] = c
    return c, nfree


@njit(cache=True, inline="always")
def class_link(iw, rows, c, i):  # pragma: no cover - compiled
    """Put arm i in the non-empty class c, in index order; True if it became the head (the old one: ``nxt[i]``).

    Arms mostly join at the tail (counts grow, builds go in index order); a join in the middle walks
    from the head, at most ``size`` steps (more: the list is corrupted, which raises).
    """
    iw[rows.cls, i] = c
    iw[rows.size, c] += 1
    head = iw[rows.head, c]
    tail = iw[rows.tail, c]
    if i > tail:
        iw[rows.nxt, tail] = i
        iw[rows.prv, i] = tail
        iw[rows.nxt, i] = -1
        iw[rows.tail, c] = i
        return False
    if i < head:
        iw[rows.prv, head] = i
        iw[rows.nxt, i] = head
        iw[rows.prv, i] = -1
        iw[rows.head, c] = i
        return True
    j = head
    steps = 0
    while iw[rows.nxt, j] < i:
        j = iw[rows.nxt, j]
        steps += 1
        if steps >= iw[rows.size, c]:
            raise RuntimeError("classes: a member list is not in increasing order (corrupted)")
    nx = iw[rows.nxt, j]
    if nx == i:
        raise RuntimeError("classes: the arm is already a member of the class")
    iw[rows.nxt, j] = i
    iw[rows.prv, i] = j
    iw[rows.nxt, i] = nx
    iw[rows.prv, nx] = i
    return False


@njit(cache=True, inline="always")
def class_unlink(iw, rows, i):  # pragma: no cover - compiled
    """(c, nx, was_head): take arm i out of its class c; nx is its successor (the new head if i was the head).

    The class's size drops by one; an empty class stays in the table until :func:`class_release`.
    """
    c = iw[rows.cls, i]
    if c < 0:
        raise RuntimeError("classes: the arm is in no class")
    nx = iw[rows.nxt, i]
    pv = iw[rows.prv, i]
    if pv >= 0:
        iw[rows.nxt, pv] = nx
    else:
        iw[rows.head, c] = nx
    if nx >= 0:
        iw[rows.prv, nx] = pv
    else:
        iw[rows.tail, c] = pv
    iw[rows.cls, i] = -1
    iw[rows.size, c] -= 1
    return c, nx, pv < 0


@njit(cache=True, inline="always")
def class_release(iw, rows, tab, mask, c, nfree):  # pragma: no cover - compiled
    """The empty class c out of the table (backward-shift deletion) and onto the free list; returns the new nfree.

    Every class after the hole up to the next empty slot moves back into it unless its home lies
    cyclically in (hole, its slot]: each class stays reachable from its home without an empty slot.
    The scan ends at the latest when it wraps round to the hole (which is empty).
    """
    slot = iw[rows.slot, c]
    tab[slot] = -1
    j = slot
    while True:
        j = (j + 1) & mask
        c2 = tab[j]
        if c2 < 0:
            break
        home = class_hash(iw[rows.pb, c2], iw[rows.t, c2], _side_of(iw, rows, c2), mask)
        # move c2 back to the hole unless its home lies cyclically in (slot, j]
        if (j > slot and (home <= slot or home > j)) or (j < slot and home <= slot and home > j):
            tab[slot] = c2
            iw[rows.slot, c2] = slot
            tab[j] = -1
            slot = j
    iw[rows.free, nfree] = c
    return nfree + 1


@njit(cache=True)
def classes_clear(iw, rows, tab, n):  # pragma: no cover - compiled
    """Every class free and empty, no arm in a class, the table empty; returns the new nfree (n).

    Touches only what the invariants read of an empty structure: columns ``0..n-1`` of ``cls``,
    ``size`` and ``free``, and the whole table. The free list is ``n-1, ..., 0`` so that
    :func:`class_open` hands out ids 0, 1, 2, ... A free class's other rows (and an arm's ``nxt``
    and ``prv`` outside a class) are never read: :func:`class_open` and :func:`class_link` write
    them first. Not inlined: a reset per build, not per pull.
    """
    for j in range(n):
        iw[rows.cls, j] = -1
        iw[rows.size, j] = 0
        iw[rows.free, j] = n - 1 - j
    tab[:] = -1
    return n


#: what :func:`class_fault` finds, by code (0: nothing)
CLASS_FAULTS = (
    "none",
    "free count out of range",
    "free list holds an id out of range or twice",
    "a free class is not empty",
    "a class neither free nor live (size <= 0) or with a size beyond the arms",
    "an arm's class id is out of range",
    "the head has a predecessor",
    "members are not in strictly increasing index order",
    "a member's prv does not point back",
    "a member's class id is not its class",
    "the list is longer than the class's size",
    "the list is shorter than the class's size",
    "the tail is not the last member",
    "an arm names a class whose list does not hold it",
    "the table slot of a live class does not hold it",
    "the table holds an id out of range or a free class",
    "the table holds a class twice",
    "a class is not reachable from its home slot (empty slot on the way)",
    "two live classes have the same key",
)


@njit(cache=True)
def class_fault(iw, rows, tab, mask, nfree, n):  # pragma: no cover - compiled
    """(code, where): the first broken invariant of the classes (code in :data:`CLASS_FAULTS`, 0 if none).

    ``where`` is the class (or arm, or slot) concerned. O(n + table size); a debug check for tests.
    """
    if nfree < 0 or nfree > n:
        return 1, nfree
    free = np.zeros(n, dtype=np.bool_)
    for q in range(nfree):
        c = iw[rows.free, q]
        if c < 0 or c >= n or free[c]:
            return 2, q
        free[c] = True
        if iw[rows.size, c] != 0:
            return 3, c
    for c in range(n):
        if not free[c] and not 0 < iw[rows.size, c] <= n:
            return 4, c
    members = 0
    for i in range(n):
        c = iw[rows.cls, i]
        if c < -1 or c >= n:
            return 5, i
        if c >= 0:
            members += 1
    walked = 0
    for c in range(n):
        if free[c]:
            continue
        size = iw[rows.size, c]
        m = iw[rows.head, c]
        prev = -1
        count = 0
        while m >= 0:
            if m >= n or (prev >= 0 and m <= prev):
                return 7, c
            if iw[rows.prv, m] != prev:
                return 6 if prev < 0 else 8, c
            if iw[rows.cls, m] != c:
                return 9, c
            count += 1
            if count > size:
                return 10, c
            prev = m
            m = iw[rows.nxt, m]
        if count < size:
            return 11, c
        if iw[rows.tail, c] != prev:
            return 12, c
        walked += count
    if walked != members:
        return 13, -1
    seen = np.zeros(n, dtype=np.bool_)
    live = 0
    for s in range(mask + 1):
        c = tab[s]
        if c < 0:
            continue
        if c >= n or free[c]:
            return 15, s
        if seen[c]:
            return 16, c
        seen[c] = True
        live += 1
    for c in range(n):
        if free[c]:
            continue
        slot = iw[rows.slot, c]
        if slot < 0 or slot > mask or tab[slot] != c:
            return 14, c
        pb, T, side = iw[rows.pb, c], iw[rows.t, c], _side_of(iw, rows, c)
        s = class_hash(pb, T, side, mask)
        while s != slot:
            c2 = tab[s]
            if c2 < 0:
                return 17, c
            if iw[rows.pb, c2] == pb and iw[rows.t, c2] == T and _side_of(iw, rows, c2) == side:
                return 18, c
            s = (s + 1) & mask
    if live != n - nfree:
        return 15, -1
    return 0, -1


@njit(cache=True)
def _member_fault(iw: np.ndarray, rows: ClassRows, n: int, mbits: np.ndarray, counts: np.ndarray,
                  sides: np.ndarray, with_sides: bool, fresh: np.ndarray, all_fresh: bool) -> int:
    """The first arm (of those in a class, and ``fresh`` unless ``all_fresh``) whose class has another key than its
    own mean bits, count (and side with ``with_sides``), or -1: :func:`check_classes`' member check, compiled (the
    equality tests run it after every event)."""
    for a in range(n):
        c = iw[rows.cls, a]
        if c < 0 or not (all_fresh or fresh[a]):
            continue
        if iw[rows.pb, c] != mbits[a] or iw[rows.t, c] != counts[a]:
            return a
        if with_sides and iw[rows.side, c] != sides[a]:
            return a
    return -1


def check_classes(iw: np.ndarray, rows: ClassRows, tab: np.ndarray, nfree: int, n: int,
                  mbits: np.ndarray | None = None, counts: np.ndarray | None = None,
                  sides: np.ndarray | None = None, fresh: np.ndarray | None = None) -> None:
    """Raise AssertionError if the classes break an invariant (:func:`class_fault`), for tests.

    With ``mbits`` and ``counts`` (and ``sides`` where the classes have a side), also every member
    of a class where ``fresh`` (a mask, default all) must carry the class's key.
    """
    code, where = class_fault(iw, rows, tab, tab.shape[0] - 1, int(nfree), int(n))
    if code:
        raise AssertionError(f"classes: {CLASS_FAULTS[code]} (at {where})")
    if mbits is None or counts is None:
        return
    with_sides = sides is not None and rows.side >= 0
    arm = _member_fault(iw, rows, int(n), np.asarray(mbits, dtype=np.int64), np.asarray(counts, dtype=np.int64),
                        np.asarray(sides if with_sides else counts, dtype=np.int64), with_sides,
                        np.ones(1, dtype=np.bool_) if fresh is None else np.asarray(fresh, dtype=np.bool_),
                        fresh is None)
    if arm >= 0:
        raise AssertionError(f"classes: arm {arm} is in a class of another key")
