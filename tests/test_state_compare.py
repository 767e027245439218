"""``assert_same_state`` says "same" exactly when ``state_json()`` does (it replaces the JSON comparison in the
per-event equality tests of the fast paths)."""

from __future__ import annotations

import numpy as np
import pytest

from purebandits.registry import all_learners
from purebandits.testing.checks import _easy_model, _k_for, make_test_learner
from purebandits.testing.state import assert_same_state, state_difference


def _run(cls, seed: int, steps: int, stream_seed: int):
    n = 5
    lr = make_test_learner(cls, **_k_for(cls, n)).start(n, seed=seed)
    stream = _easy_model(n, lr.k_).stream(stream_seed)
    for _ in range(steps):
        arms = lr.ask(1)
        if not arms:
            break
        lr.tell(arms[0], stream.draw(arms[0]))
    return lr


@pytest.mark.parametrize("cls", list(all_learners().values()), ids=lambda c: c.__name__)
def test_state_difference_agrees_with_state_json(cls):
    cases = [((1, 30, 2), (1, 30, 2)), ((1, 30, 2), (1, 31, 2)), ((1, 30, 2), (3, 30, 2)), ((1, 30, 2), (1, 30, 4)),
             ((1, 0, 2), (1, 0, 2)), ((1, 0, 2), (2, 0, 2))]
    for x, y in cases:
        a, b = _run(cls, *x), _run(cls, *y)
        assert (state_difference(a, b) is None) == (a.state_json() == b.state_json()), (x, y)


def test_a_changed_attribute_is_named():
    cls = all_learners()["lucb1"]
    a, b = _run(cls, 1, 20, 2), _run(cls, 1, 20, 2)
    assert_same_state(a, b)
    b.counts_ = b.counts_.astype(np.int32)
    assert "counts_" in state_difference(a, b)
    b = _run(cls, 1, 20, 2)
    b.sums_ = b.sums_.copy()
    b.sums_[0] = -0.0 if a.sums_[0] == 0 else np.nextafter(a.sums_[0], 2.0)
    with pytest.raises(AssertionError, match="sums_"):
        assert_same_state(a, b, "step 3")
