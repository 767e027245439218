"""The service compiles its learners' kernels at startup and on create, not inside a participant's request."""

from __future__ import annotations

import pytest

from purebandits.registry import all_learners
from purebandits.service import warmup
from purebandits.service.warmup import warm_learners


@pytest.mark.parametrize("name", sorted(all_learners()))
def test_every_learner_runs_through_the_warmup(name):
    """Each registered learner goes through the calls the service makes (fixed-budget ones with a budget, as an
    experiment gives them); an exception here would mean its kernels still compile in a request."""
    cls = all_learners()[name]
    params = {"budget": 600} if cls.kind == "fixed_budget" else {}
    warmup._exercise(name, params)


def test_warming_is_once_per_process_and_never_raises():
    spec = ("lil_ucb", {"delta": 0.05, "preset": "heuristic"})
    assert warm_learners([spec]) == 1
    assert warm_learners([spec, spec]) == 0  # already warm in this process
    assert warm_learners([("lil_ucb", {"delta": 7.0})]) == 1  # refused by the learner: skipped, not raised
    assert warm_learners([("no_such_learner", {})]) == 1
