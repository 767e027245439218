"""CPE: every oracle against brute force (hypothesis), widths, spec validation, lil'CLUCB/CLUCB on easy instances."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purebandits.algorithms import CLUCB, LilCLUCB
from purebandits.algorithms.cpe import Matchings, Paths, SpanningTrees, TopKSets, make_decision_class
from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.metrics import decision_gap
from purebandits.registry import get_learner_class
from purebandits.testing.checks import run_learner

weights = st.floats(-1.0, 1.0, allow_nan=False, width=32) | st.sampled_from([0.0, 0.5, -0.5])


def _is_spanning_tree(edges, chosen, n_nodes):
    if len(chosen) != n_nodes - 1:
        return False
    parent = list(range(n_nodes))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in chosen:
        a, b = find(edges[i][0]), find(edges[i][1])
        if a == b:
            return False
        parent[a] = b
    return True


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(2, 8))
def test_topk_oracle_is_optimal(data, n):
    k = data.draw(st.integers(1, n - 1))
    w = np.array(data.draw(st.lists(weights, min_size=n, max_size=n)))
    dec = TopKSets(n, k)
    m = dec.oracle(w)
    assert m.sum() == k
    best = max(w[list(c)].sum() for c in itertools.combinations(range(n), k))
    assert w[m].sum() == pytest.approx(best, abs=1e-9)


@st.composite
def connected_graphs(draw):
    n_nodes = draw(st.integers(2, 6))
    pairs = [(a, b) for a in range(n_nodes) for b in range(a + 1, n_nodes)]
    tree = [(draw(st.integers(0, v - 1)), v) for v in range(1, n_nodes)]  # a random spanning tree
    extra = draw(st.lists(st.sampled_from(pairs), max_size=6, unique=True))
    edges = sorted(set(tree) | set(extra))
    if draw(st.booleans()):
        edges = [(b, a) for a, b in edges]  # orientation must not matter
    return [list(e) for e in edges], n_nodes


@settings(max_examples=120, deadline=None)
@given(g=connected_graphs(), data=st.data())
def test_spanning_tree_oracle_is_optimal(g, data):
    edges, n_nodes = g
    w = np.array(data.draw(st.lists(weights, min_size=len(edges), max_size=len(edges))))
    dec = SpanningTrees(edges)
    m = dec.oracle(w)
    assert _is_spanning_tree(edges, list(np.flatnonzero(m)), n_nodes)
    best = max(w[list(c)].sum() for c in itertools.combinations(range(len(edges)), n_nodes - 1)
               if _is_spanning_tree(edges, c, n_nodes))
    assert w[m].sum() == pytest.approx(best, abs=1e-9)


@settings(max_examples=120, deadline=None)
@given(r=st.integers(1, 4), c=st.integers(1, 4), data=st.data())
def test_matching_oracle_is_optimal(r, c, data):
    w = np.array(data.draw(st.lists(weights, min_size=r * c, max_size=r * c)))
    dec = Matchings([r, c])
    m = dec.oracle(w)
    cells = np.flatnonzero(m)
    rows, cols = cells // c, cells % c
    assert len(cells) == min(r, c) and len(set(rows)) == len(set(cols)) == min(r, c)
    W = w.reshape(r, c)
    if r <= c:
        best = max(sum(W[i, p[i]] for i in range(r)) for p in itertools.permutations(range(c), r))
    else:
        best = max(sum(W[p[j], j] for j in range(c)) for p in itertools.permutations(range(r), c))
    assert w[m].sum() == pytest.approx(best, abs=1e-9)


def _all_paths(edges, s, t):
    out = []

    def walk(v, used):
        if v == t:
            out.append(list(used))
            return
        for i, (a, b) in enumerate(edges):
            if a == v:
                walk(b, used + [i])

    walk(s, [])
    return out


@st.composite
def dags(draw):
    n_nodes = draw(st.integers(2, 6))
    pairs = [(a, b) for a in range(n_nodes) for b in range(a + 1, n_nodes)]
    edges = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=10))  # parallel edges allowed
    edges = edges + [(0, n_nodes - 1)]  # the target is reachable
    perm = draw(st.permutations(range(n_nodes)))  # node ids need not be in topological order
    return [[perm[a], perm[b]] for a, b in edges], perm[0], perm[n_nodes - 1]


@settings(max_examples=150, deadline=None)
@given(g=dags(), data=st.data())
def test_path_oracle_is_optimal(g, data):
    edges, s, t = g
    w = np.array(data.draw(st.lists(weights, min_size=len(edges), max_size=len(edges))))
    dec = Paths(edges, s, t)
    m = dec.oracle(w)
    paths = _all_paths(edges, s, t)
    assert sorted(np.flatnonzero(m).tolist()) in [sorted(p) for p in paths]
    assert w[m].sum() == pytest.approx(max(w[p].sum() for p in paths), abs=1e-9)


def test_widths():
    assert TopKSets(10, 3).width == 2
    assert SpanningTrees([[0, 1], [1, 2], [0, 2]]).width == 2
    assert Matchings([3, 4]).width == 7
    assert Paths([[0, 1], [1, 2], [0, 2]], 0, 2).width == 3


@pytest.mark.parametrize("spec,n,msg", [
    ({"class": "tree"}, 3, "class"),
    ({"class": "matching", "shape": [2, 2]}, 3, "n_arms"),
    ({"class": "spanning_tree", "edges": [[0, 1], [2, 3]]}, 2, "connected"),
    ({"class": "spanning_tree", "edges": [[0, 1], [1, 0]]}, 2, "simple"),
    ({"class": "path", "edges": [[0, 1], [1, 0]], "source": 0, "target": 1}, 2, "acyclic"),
    ({"class": "path", "edges": [[1, 0], [1, 2]], "source": 0, "target": 2}, 2, "reachable"),
    ({"class": "top_k", "k": 2}, 3, "unknown"),
])
def test_invalid_decision_specs(spec, n, msg):
    with pytest.raises(ValueError, match=msg):
        make_decision_class(spec, n)
    with pytest.raises(ValueError, match="decision|n_arms"):
        LilCLUCB(decision=spec).start(n, seed=0)


def test_lil_clucb_is_registered_for_best_k():
    assert get_learner_class("lil_clucb") is LilCLUCB
    assert LilCLUCB().get_params()["decision"] is None  # default: the top-K class of JLQ17 Alg. 2


TREE_EDGES = [[0, 1], [1, 2], [2, 3], [3, 4], [0, 2], [1, 3], [2, 4], [0, 4]]
PATH_EDGES = [[0, 1], [1, 3], [0, 2], [2, 3], [0, 3], [1, 2]]
EASY = [
    ({"class": "top_k"}, np.array([0.9, 0.85, 0.2, 0.1, 0.15, 0.3]), 2),
    ({"class": "spanning_tree", "edges": TREE_EDGES}, np.array([0.9, 0.9, 0.9, 0.9, 0.1, 0.2, 0.1, 0.2]), 1),
    ({"class": "matching", "shape": [3, 3]}, np.where(np.eye(3).ravel() > 0, 0.9, 0.2), 1),
    ({"class": "path", "edges": PATH_EDGES, "source": 0, "target": 3}, np.array([0.9, 0.9, 0.1, 0.1, 0.3, 0.1]), 1),
]


@pytest.mark.parametrize("cls", [LilCLUCB, CLUCB])
@pytest.mark.parametrize("spec,means,k", EASY, ids=["top_k", "spanning_tree", "matching", "path"])
@pytest.mark.slow  # runs to the stop on every decision class
def test_returns_the_optimal_decision_on_easy_instances(cls, spec, means, k):
    n = len(means)
    dec = make_decision_class(spec, n, k)
    optimal = sorted(np.flatnonzero(dec.oracle(means)).tolist())
    for seed in range(3):
        learner = cls(k=k, delta=0.05, decision=spec).start(n, seed=seed)
        stream = Gaussian(means, 0.25).stream(seed + 10)
        out = []
        while not learner.done:
            out += learner.ask(3)  # three participants at once
            arm = out.pop(0)
            learner.tell(arm, stream.draw(arm))
        assert sorted(learner.recommend()) == optimal
        assert decision_gap([learner.recommend()], means, optimal)[0] == pytest.approx(0.0)


def test_symmetric_difference_rule_and_spreading():
    learner = LilCLUCB(k=2).start(6, seed=0)
    assert sorted(learner.ask(6)) == list(range(6))  # initialisation spreads over participants
    stream = Bernoulli([0.9, 0.8, 0.5, 0.5, 0.2, 0.1]).stream(1)
    for a in range(6):
        learner.tell(a, stream.draw(a))
    for _ in range(50):
        if learner.done:
            break
        (arm,) = learner.ask(1)
        assert learner._m[arm] != learner._mt[arm]  # only arms of M_t symdiff M~_t are pulled
        learner.tell(arm, stream.draw(arm))


def test_kernel_is_top_k_only():
    learner = LilCLUCB(decision={"class": "matching", "shape": [2, 2]}).start(4, seed=0)
    with pytest.raises(NotImplementedError):
        learner.run_compiled(Bernoulli([0.5] * 4).stream(0), 100)


def test_faithful_preset_is_more_conservative():
    means = np.array([0.7, 0.5, 0.45, 0.4])
    pulls = {}
    for preset in ("heuristic", "faithful"):
        learner = LilCLUCB(delta=0.05, preset=preset).start(4, seed=0)
        learner.run_compiled(Bernoulli(means).stream(1), 10**7)
        assert learner.done and learner.recommend() == [0]
        pulls[preset] = learner.n_pulls
    assert pulls["faithful"] > pulls["heuristic"]


@pytest.mark.parametrize("cls", [CLUCB, LilCLUCB])
@pytest.mark.parametrize("k", [1, 4])
def test_topk_kernel_matches_reference_at_size(cls, k):
    """The top-k kernel (one radius re-computed per pull for lil'CLUCB, one pass for k = 1) ==
    the ask/tell rule on 40 Gaussian arms with near-ties, resumed at checkpoints."""
    rng = np.random.default_rng(11)
    model = Gaussian(np.sort(rng.uniform(0.0, 1.0, 40))[::-1].copy(), 0.25)
    ref = cls(k=k, delta=0.1).start(40, seed=2)
    run_learner(ref, model, 9, max_pulls=5_000)
    fast = cls(k=k, delta=0.1).start(40, seed=2)
    stream = model.stream(9)
    for checkpoint in (40, 41, 1_000, 5_000):
        fast.run_compiled(stream, checkpoint)
    assert fast.state_json() == ref.state_json()
