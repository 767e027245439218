"""The classes of equal arms (:mod:`purebandits.algorithms.kernels.arm_classes`): lists, table, free list, guards,
checker.

The shared functions are driven directly on small workspaces (two layouts: with a side row, as
LUCB1/KL-LUCB's, and without, as CLUCB's) against a plain model (key -> sorted members), with
tables small enough that probes collide and wrap round, and :func:`check_classes` after every
operation; adds and removals at the head, the tail and the middle, deletions that wrap round the
table. Corruptions must raise (the guards) or be reported by the checker, never hang. AT-LUCB's
kernel (its classes are those of ``kernels.lucb_round_incremental``) is run on tie-heavy instances in
chunks of pulls and its classes checked after each chunk. The lockstep tests of CLUCB and LUCB1 /
KL-LUCB's ask/tell workspaces check the classes after every event
(tests/test_cpe_incremental.py, tests/test_round_incremental_ask_tell.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from purebandits.algorithms import ATLUCB
from purebandits.algorithms.at_lucb import CLASSES_ON, _at_lucb_workspace, _run_kernel
from purebandits.algorithms.kernels.arm_classes import (
    NO_SIDE,
    ClassRows,
    check_classes,
    class_find,
    class_hash,
    class_link,
    class_open,
    class_release,
    class_unlink,
    classes_clear,
)
from purebandits.algorithms.kernels.lucb_round_incremental import _ROWS as LUCB_ROWS
from purebandits.algorithms.kernels.lucb_round_incremental import _UPPER
from purebandits.instances import make_instance
from purebandits.instances.rewards import Bernoulli, Categorical

SIDED = ClassRows(cls=0, nxt=1, prv=2, head=3, tail=4, pb=5, t=6, side=7, slot=8, size=9, free=10)
UNSIDED = SIDED._replace(side=NO_SIDE)
LAYOUTS = {"sided": SIDED, "unsided": UNSIDED}
M64 = (1 << 64) - 1


class Classes:
    """A workspace of n arms (``iw``, the table, the free count) and the model it must agree with."""

    def __init__(self, rows: ClassRows, n: int, size: int) -> None:
        self.rows, self.n = rows, n
        self.iw = np.full((11, n + 1), -1, dtype=np.int64)
        self.iw[rows.size] = 0
        self.iw[rows.free, :n] = np.arange(n)[::-1]
        self.tab = np.full(size, -1, dtype=np.int64)
        self.nfree = n
        self.model: dict[tuple, list[int]] = {}
        self.key_of: dict[int, tuple] = {}

    def add(self, i: int, key: tuple) -> tuple[int, bool]:
        """Arm i into the class of ``key``: (class, i is its new head)."""
        pb, t, side = key
        r = self.rows
        slot, c = class_find(self.iw, r, self.tab, self.tab.size - 1, pb, t, side)
        if c < 0:
            c, self.nfree = class_open(self.iw, r, self.tab, slot, self.nfree, pb, t, side, i)
            head = True
        else:
            head = bool(class_link(self.iw, r, c, i))
        self.model.setdefault(key, []).append(i)
        self.model[key].sort()
        self.key_of[i] = key
        return int(c), head

    def remove(self, i: int) -> tuple[int, int, bool]:
        """Arm i out of its class (released if empty): (class, successor, i was the head)."""
        c, nx, was_head = class_unlink(self.iw, self.rows, i)
        if self.iw[self.rows.size, c] == 0:
            self.nfree = class_release(self.iw, self.rows, self.tab, self.tab.size - 1, c, self.nfree)
        key = self.key_of.pop(i)
        self.model[key].remove(i)
        if not self.model[key]:
            del self.model[key]
        return int(c), int(nx), bool(was_head)

    def clear(self) -> None:
        """:func:`classes_clear`, and the model emptied."""
        self.nfree = int(classes_clear(self.iw, self.rows, self.tab, self.n))
        self.model.clear()
        self.key_of.clear()

    def check(self) -> None:
        """The invariants, and the lists equal to the model's (heads = lowest members)."""
        r, iw = self.rows, self.iw
        check_classes(iw, r, self.tab, self.nfree, self.n)
        assert self.n - self.nfree == len(self.model)
        for (pb, t, side), members in self.model.items():
            slot, c = class_find(iw, r, self.tab, self.tab.size - 1, pb, t, side)
            assert c >= 0 and iw[r.slot, c] == slot
            got, m = [], iw[r.head, c]
            while m >= 0:
                got.append(int(m))
                m = iw[r.nxt, m]
            assert got == members


def _keys_with_home(rows: ClassRows, size: int, home: int, count: int, t: int = 3) -> list[tuple]:
    """``count`` keys (mean bits, count, side) whose home slot is ``home``."""
    out, pb = [], 0
    while len(out) < count:
        side = pb % 2 if rows.side >= 0 else 0
        if class_hash(pb, t, side, size - 1) == home:
            out.append((pb, t, side))
        pb += 1
    return out


def _old_hash(pb: int, t: int, mask: int, side: int = 0) -> int:
    """The kernels' hash before the merge (CLUCB's had no side term), in Python integers."""
    x = (pb & M64) ^ ((t * 0x9E3779B97F4A7C15) & M64) ^ side
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    return x & mask


def test_hash_is_both_kernels_old_hash():
    """Side 0 adds nothing: CLUCB's tables keep their slots; LUCB1's (with a side) too."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        pb = int(rng.integers(-(2**63), 2**63 - 1))
        t = int(rng.integers(1, 10**9))
        mask = (1 << int(rng.integers(2, 20))) - 1
        assert class_hash(pb, t, 0, mask) == _old_hash(pb, t, mask)
        assert class_hash(pb, t, 1, mask) == _old_hash(pb, t, mask, 1)
    pb = int(np.array([0.25]).view(np.int64)[0])
    assert class_hash(pb, 7, 0, 63) == _old_hash(pb, 7, 63)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_add_and_remove_at_head_tail_and_middle(layout):
    rows = LAYOUTS[layout]
    w = Classes(rows, 12, 32)
    key = (11, 2, 1 if rows.side >= 0 else 0)
    assert w.add(5, key)[1]  # a new class: 5 alone, its head
    c = w.add(9, key)[0]
    assert not w.add(9 - 2, key)[1]  # the middle: 5, 7, 9
    assert w.add(2, key) == (c, True)  # the head: the old head follows it
    assert w.iw[rows.nxt, 2] == 5
    assert not w.add(11, key)[1]  # the tail
    assert not w.add(6, key)[1]
    w.check()
    assert w.model[key] == [2, 5, 6, 7, 9, 11]
    assert w.remove(6) == (c, 7, False)  # middle
    assert w.remove(11) == (c, -1, False)  # tail
    assert w.remove(2) == (c, 5, True)  # head: 5 becomes the representative
    w.check()
    assert w.iw[rows.head, c] == 5 and w.iw[rows.tail, c] == 9
    for i in (7, 5, 9):
        w.remove(i)
        w.check()
    assert w.nfree == 12 and not (w.tab >= 0).any()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_release_wraps_round_the_table(layout):
    """Classes homed at the last slot spill to slots 0 and 1; taking one out shifts the others back round the end."""
    rows = LAYOUTS[layout]
    size = 16
    w = Classes(rows, 10, size)
    last = _keys_with_home(rows, size, size - 1, 3)
    first = _keys_with_home(rows, size, 0, 1)
    for arm, key in enumerate([*last, *first]):
        w.add(arm, key)
    slots = [int(w.iw[rows.slot, w.iw[rows.cls, arm]]) for arm in range(4)]
    assert slots == [size - 1, 0, 1, 2]
    w.check()
    w.remove(0)  # the hole at the end: the two wrapped classes and the one homed at 0 move back
    w.check()
    assert [int(w.iw[rows.slot, w.iw[rows.cls, arm]]) for arm in (1, 2, 3)] == [size - 1, 0, 1]
    w.remove(2)  # a hole at 0: the class homed at 0 moves back, not before its home
    w.check()
    assert int(w.iw[rows.slot, w.iw[rows.cls, 3]]) == 0
    w.add(0, last[0])
    w.check()


def _random_classes(rows: ClassRows, rng: np.random.Generator) -> tuple[Classes, list[tuple]]:
    """An empty workspace of 3 to 39 arms in the smallest table of at least 2n slots, and 1 to n keys."""
    n = int(rng.integers(3, 40))
    size = 4
    while size < 2 * n:
        size *= 2
    w = Classes(rows, n, size)
    nkeys = int(rng.integers(1, n + 1))
    keys = [(int(rng.integers(-4, 4)), int(rng.integers(1, 4)), int(rng.integers(0, 2)) if rows.side >= 0 else 0)
            for _ in range(nkeys)]
    return w, keys


def _churn(w: Classes, keys: list[tuple], rng: np.random.Generator, steps: int) -> None:
    """``steps`` random moves (a random arm out of its class, then into a random key's 7 times in 10), checked."""
    for _ in range(steps):
        i = int(rng.integers(w.n))
        if i in w.key_of:
            w.remove(i)
        if rng.random() < 0.7:
            w.add(i, keys[int(rng.integers(len(keys)))])
        w.check()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("seed", range(6))
def test_random_adds_and_removes_match_the_model(layout, seed):
    """Many arms on few keys in a small table (collisions, wrap-round), checked after every operation."""
    rng = np.random.default_rng(seed)
    w, keys = _random_classes(LAYOUTS[layout], rng)
    _churn(w, keys, rng, 1500)


def _assert_cleared(w: Classes, before: np.ndarray) -> None:
    """All n classes free (ids handed out 0, 1, ...), no arm in a class, the table empty; nothing else touched."""
    r, n = w.rows, w.n
    check_classes(w.iw, r, w.tab, w.nfree, n)
    assert w.nfree == n
    assert (w.iw[r.free, :n] == np.arange(n)[::-1]).all()
    assert (w.iw[r.cls, :n] == -1).all() and (w.iw[r.size, :n] == 0).all()
    assert (w.tab == -1).all()
    touched = np.zeros(w.iw.shape, dtype=np.bool_)
    touched[[r.cls, r.size, r.free], :n] = True
    assert (w.iw[~touched] == before[~touched]).all()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("seed", range(4))
def test_clear_leaves_every_class_free(layout, seed):
    """:func:`classes_clear` on garbage and after random operations: every class free, the table empty, the
    other rows and the column past the arms untouched (the kernels reset those themselves, or never read them);
    then the structure works again from there (adds and removes against the model)."""
    rng = np.random.default_rng(seed)
    w, keys = _random_classes(LAYOUTS[layout], rng)
    w.iw[:] = rng.integers(-5, 2 * w.n, size=w.iw.shape)  # a free class's other rows are never read
    w.tab[:] = rng.integers(-1, w.n, size=w.tab.size)
    for _ in range(4):
        # the free list past nfree is dead (ids handed out since): any value there, not only the start's
        w.iw[w.rows.free, w.nfree:w.n] = rng.integers(-1, w.n, size=w.n - w.nfree)
        before = w.iw.copy()
        w.clear()
        _assert_cleared(w, before)
        _churn(w, keys, rng, int(rng.integers(1, 400)))


def _linked(rows: ClassRows, members: list[int], n: int = 10) -> Classes:
    w = Classes(rows, n, 32)
    for i in members:
        w.add(i, (1, 1, 0))
    return w


def test_corrupted_lists_raise_instead_of_looping():
    """The middle walk is bounded by the class's size; a full table, an empty free list and an arm in no class
    raise too."""
    w = _linked(SIDED, [1, 4, 8])
    w.iw[SIDED.nxt, 4] = 1  # a cycle 1 -> 4 -> 1 -> ...
    with pytest.raises(RuntimeError, match="increasing order"):
        class_link(w.iw, SIDED, w.iw[SIDED.cls, 1], 6)
    w = _linked(SIDED, [1, 4, 8])
    w.iw[SIDED.nxt, 4] = -1  # the list ends before the tail: the walk would go on at column -1
    with pytest.raises(RuntimeError, match="increasing order"):
        class_link(w.iw, SIDED, w.iw[SIDED.cls, 1], 6)
    w = _linked(SIDED, [1, 4, 8])
    with pytest.raises(RuntimeError, match="already a member"):
        class_link(w.iw, SIDED, w.iw[SIDED.cls, 1], 4)
    w = _linked(SIDED, [1])
    w.tab[:] = w.iw[SIDED.cls, 1]  # no empty slot, no match
    with pytest.raises(RuntimeError, match="no empty slot"):
        class_find(w.iw, SIDED, w.tab, w.tab.size - 1, 99, 1, 0)
    with pytest.raises(RuntimeError, match="no free class"):
        class_open(w.iw, SIDED, w.tab, 0, 0, 99, 1, 0, 2)
    with pytest.raises(RuntimeError, match="in no class"):
        class_unlink(w.iw, SIDED, 3)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda w, r: w.iw.__setitem__((r.prv, 8), 1), "prv does not point back"),
    (lambda w, r: w.iw.__setitem__((r.nxt, 4), 1), "increasing index order"),
    (lambda w, r: w.iw.__setitem__((r.size, w.iw[r.cls, 1]), 4), "shorter than"),
    (lambda w, r: w.iw.__setitem__((r.size, w.iw[r.cls, 1]), 2), "longer than"),
    (lambda w, r: w.iw.__setitem__((r.tail, w.iw[r.cls, 1]), 4), "tail is not the last"),
    (lambda w, r: w.iw.__setitem__((r.cls, 5), w.iw[r.cls, 1]), "does not hold it"),
    (lambda w, r: w.tab.__setitem__(w.iw[r.slot, w.iw[r.cls, 1]], -1), "does not hold it"),
    (lambda w, r: w.iw.__setitem__((r.free, 0), w.iw[r.cls, 1]), "free class is not empty"),
])
def test_checker_reports_each_corruption(damage, message):
    w = _linked(SIDED, [1, 4, 8])
    w.add(2, (7, 1, 1))
    w.check()
    damage(w, SIDED)
    with pytest.raises(AssertionError, match=message):
        check_classes(w.iw, SIDED, w.tab, w.nfree, w.n)


def test_checker_reports_unreachable_duplicate_and_leaked_classes():
    rows = SIDED
    key = _keys_with_home(rows, 32, 5, 1)[0]
    w = Classes(rows, 10, 32)
    w.add(0, key)
    w.add(1, (key[0], key[1] + 1, key[2]))
    c = w.iw[rows.cls, 0]
    w.tab[5], w.tab[9] = -1, c  # moved away from its home across an empty slot
    w.iw[rows.slot, c] = 9
    with pytest.raises(AssertionError, match="not reachable"):
        check_classes(w.iw, rows, w.tab, w.nfree, w.n)
    w = Classes(rows, 10, 32)
    w.add(0, key)
    c, nfree = class_open(w.iw, rows, w.tab, 6, w.nfree, *key, 1)  # the same key again, one slot on
    with pytest.raises(AssertionError, match="same key"):
        check_classes(w.iw, rows, w.tab, nfree, w.n)
    w = Classes(rows, 10, 32)
    w.add(0, key)
    class_unlink(w.iw, rows, 0)  # emptied, never released
    with pytest.raises(AssertionError, match="neither free nor live"):
        check_classes(w.iw, rows, w.tab, w.nfree, w.n)


def test_checker_compares_members_with_their_keys():
    w = Classes(SIDED, 6, 16)
    mbits = np.array([3, 3, 4, 3, 3, 3], dtype=np.int64)
    counts = np.array([2, 2, 2, 2, 5, 2], dtype=np.int64)
    sides = np.zeros(6, dtype=np.int64)
    for i in range(6):
        w.add(i, (int(mbits[i]), int(counts[i]), 0))
    check_classes(w.iw, SIDED, w.tab, w.nfree, 6, mbits, counts, sides)
    mbits[3] = 4
    with pytest.raises(AssertionError, match="arm 3"):
        check_classes(w.iw, SIDED, w.tab, w.nfree, 6, mbits, counts, sides)
    fresh = np.ones(6, dtype=np.bool_)
    fresh[3] = False
    check_classes(w.iw, SIDED, w.tab, w.nfree, 6, mbits, counts, sides, fresh)
    mbits[3] = 3
    counts[1] = 3
    with pytest.raises(AssertionError, match="arm 1"):
        check_classes(w.iw, SIDED, w.tab, w.nfree, 6, mbits, counts, sides)
    counts[1] = 2
    sides[5] = 1
    with pytest.raises(AssertionError, match="arm 5"):
        check_classes(w.iw, SIDED, w.tab, w.nfree, 6, mbits, counts, sides)


# --------------------------------------------------------------------------------- AT-LUCB's kernel
AT_INSTANCES = {
    "one_sparse": (lambda: make_instance("one_sparse:n=80,model=bernoulli").model, 1, 20_000),
    "one_sparse_k3": (lambda: make_instance("one_sparse:n=60,k=3,model=bernoulli").model, 3, 15_000),
    "zero_one": (lambda: Bernoulli(np.r_[np.ones(3), np.zeros(40), np.ones(2), np.full(5, 0.5)]), 2, 10_000),
    # three reward values: arms join classes in the middle too (on the instances above mostly at the tail)
    "categorical": (lambda: Categorical(np.random.default_rng(7).dirichlet(np.ones(3), size=80),
                                        np.linspace(0.0, 1.0, 3)), 3, 12_000),
}


@pytest.mark.parametrize("name", list(AT_INSTANCES))
def test_at_lucb_kernel_keeps_its_classes_consistent(name):
    """AT-LUCB with classes on, in chunks of 1 to 300 pulls (each run builds its classes and keeps them up
    through the chunk): after each chunk the classes hold every arm outside the top-k, by its key."""
    make, k, pulls = AT_INSTANCES[name]
    model = make()
    n = model.n_arms
    rng = np.random.default_rng(3)
    for seed in (1, 2):
        lr = ATLUCB(k=k).start(n, seed=seed)
        stream = model.stream(seed)
        checked = 0
        while lr.t_ < pulls:
            ws, tk = _at_lucb_workspace(n, k)
            st = _run_kernel(lr, stream, lr.t_ + int(rng.integers(1, 300)), CLASSES_ON, workspace=(ws, tk))
            if st["classes"] != 1:
                continue
            mu, iw, sc, tab = ws[0], ws[3], ws[5], ws[6]
            top = tk[0]
            check_classes(iw, LUCB_ROWS, tab, sc[0], n, mu.view(np.int64), lr.counts_, np.full(n, _UPPER))
            assert ((iw[LUCB_ROWS.cls, :n] >= 0) == ~top).all()
            checked += 1
        assert checked > 20
