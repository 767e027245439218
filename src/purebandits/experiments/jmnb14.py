"""What the lil'UCB paper's experiments share (Jamieson, Malloy, Nowak, Bubeck, COLT 2014, Sec. 5): the learners
and their parameters, the three Gaussian scenarios, and the raw-table row of a simulation."""

from __future__ import annotations

from typing import Any

from purebandits.instances import Instance, lil_exponential, one_sparse

NU = 0.1


#: label -> (registry name, parameters); all run with delta = nu (the learners split it with LS)
ALGORITHMS: dict[str, tuple[str, dict[str, Any]]] = {
    "Nonadaptive + LS": ("non_adaptive", {}),
    "ExpGap + LS": ("exp_gap_elimination", {"ls": True}),
    "Successive Elimination": ("successive_elimination", {}),
    "lil'UCB + LS": ("lil_ucb", {"preset": "faithful", "ls": True}),
    "lil'UCB Heuristic": ("lil_ucb", {"preset": "heuristic"}),
    "UCB1 + LS": ("ucb1", {}),
}


#: scenario label -> instance factory of n
SCENARIOS = {
    "1-sparse": lambda n: one_sparse(n),
    "alpha=0.3": lambda n: lil_exponential(n, 0.3),
    "alpha=0.6": lambda n: lil_exponential(n, 0.6),
}


def instance_for(scenario: str, n: int) -> Instance:
    """The Gaussian instance of ``scenario`` (1-sparse, alpha = 0.3 or 0.6) with ``n`` arms."""
    return SCENARIOS[scenario](n)
