"""The compiled top-k: the k largest entries, ties to the lower index (selection paths and the incremental tracker)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from purebandits.base import top_k_by
from purebandits.ranking import SMALL_K, topk_mask, topk_tracker_fill, topk_tracker_update, topk_workspace


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=40), st.data())
def test_topk_mask_is_top_k_by_with_ties(values, data):
    """Few distinct values, so ties straddle the k-th place; k covers the passes and the partition."""
    w = np.array(values, dtype=np.float64) / 4.0
    k = data.draw(st.integers(1, len(w) - 1))
    assert np.flatnonzero(topk_mask(w, k)).tolist() == sorted(top_k_by(w, k))


def test_both_paths_are_exercised():
    w = np.zeros(30)
    assert np.flatnonzero(topk_mask(w, SMALL_K)).tolist() == list(range(SMALL_K))
    assert np.flatnonzero(topk_mask(w, SMALL_K + 1)).tolist() == list(range(SMALL_K + 1))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.data())
def test_topk_tracker_follows_single_value_changes(n, data):
    """After each change of one value (few distinct values: ties everywhere) the tracker's set is topk_mask's."""
    k = data.draw(st.integers(1, n - 1))
    w = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.float64)
    tr = topk_workspace(n, k)
    topk_tracker_fill(tr, w, k)
    for arm, value in data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 3)), max_size=40)):
        before = tr[0].copy()
        w[arm] = value
        out, inn = topk_tracker_update(tr, w, arm)
        want = topk_mask(w, k)
        assert tr[0].tolist() == want.tolist()
        assert sorted(tr[1].tolist()) == np.flatnonzero(want).tolist()
        assert (out, inn) == ((-1, -1) if (before == want).all() else (int(np.flatnonzero(before & ~want)[0]),
                                                                          int(np.flatnonzero(want & ~before)[0])))
