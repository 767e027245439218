"""The compiled top-k selection: the k largest entries, ties to the lower index, on both of its paths."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from purebandits.base import top_k_by
from purebandits.ranking import SMALL_K, topk_mask


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
