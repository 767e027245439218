"""What ``proven_stopping`` and ``lower_bound`` share: the proven GLR learners, the Bernoulli cells and the floor of
a proven threshold (the samples a GLR stop needs with the optimal allocation)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize

from purebandits.glr_thresholds import gk16_threshold, kinf_kt_allocation_threshold
from purebandits.instances import Instance
from purebandits.instances.rewards import Bernoulli

DELTA = 0.01

#: label -> (registry name, parameters, statistic, threshold name, proven?)
LEARNERS: dict[str, tuple[str, dict[str, Any], str, str, bool]] = {
    "Track-and-Stop, practical": ("track_and_stop", {"threshold": "practical"}, "Bernoulli", "log((log t+1)/delta)",
                                  False),
    "Track-and-Stop, GK16": ("track_and_stop", {"threshold": "theory"}, "Bernoulli", "gk16", True),
    "Top-two EB-TC, GK16": ("top_two", {"threshold": "theory", "cost": "bernoulli"}, "Bernoulli", "gk16", True),
    "Track-and-Stop, K_inf stop": ("track_and_stop", {"threshold": "theory", "stop": "kinf"}, "K_inf",
                                   "kinf-kt-pairs", True),
    "Track-and-Stop, K_inf weights and stop": ("track_and_stop", {"threshold": "theory", "stop": "kinf",
                                                                  "weights": "kinf"}, "K_inf", "kinf-kt-pairs", True),
    "KL-RandLUCB, K_inf stop": ("kl_rand_lucb", {"stop": "kinf", "form": "simplified"}, "K_inf", "kinf-kt-pairs",
                                True),
    # LUCB stops on per-arm bounds at the KT level, not GLR stops (no GLR floor): the Bernoulli KL of the means, and
    # K_inf of the ratings' law (the service's default)
    "KL-RandLUCB, KT bounds": ("kl_rand_lucb", {"form": "kt"}, "Bernoulli-KL bounds", "kt-per-arm", True),
    "KL-RandLUCB, K_inf bounds (service default)": ("kl_rand_lucb", {"form": "kinf"}, "K_inf bounds", "kt-per-arm",
                                                    True),
}


def bernoulli_instance(n: int) -> Instance:
    """``n`` Bernoulli arms with means evenly spaced from 0.7 down to 0.2 (a unique best arm, gaps 0.5/(n-1))."""
    return Instance(f"bernoulli-{n}", Bernoulli(np.linspace(0.7, 0.2, n)), k=1)


def threshold_floor_samples(T_stat: float, n_arms: int, delta: float, statistic: str,
                            weights: np.ndarray | None = None) -> float:
    """The t with ``t = T_stat * beta(t)`` for the best proven threshold of ``statistic`` (k = 1).

    Bernoulli: GK16's ``beta(t, delta)``. K_inf: every pair (best a, rival b) must pass its own
    ``kinf_kt_pair_threshold(w_a t, w_b t)`` with the optimal proportions ``weights`` (all pairs' statistics grow
    like ``t / T*`` there), so beta(t) is the largest of them.
    """
    if statistic == "Bernoulli":
        beta = lambda t: gk16_threshold(t, n_arms, delta)  # noqa: E731
    else:
        if weights is None:
            raise ValueError("the K_inf floor needs the optimal proportions (weights)")
        a = int(np.argmax(weights))  # at k = 1 the best arm has the largest optimal proportion
        beta = lambda t: kinf_kt_allocation_threshold(t, weights, a, n_arms, delta)  # noqa: E731
    f = lambda t: t - T_stat * beta(t)  # noqa: E731  (increasing once t > T_stat)
    hi = max(T_stat * 10.0, 10.0)
    while f(hi) < 0:
        hi *= 2.0
    return float(optimize.brentq(f, 1.0, hi, xtol=1e-6 * hi)) if f(1.0) < 0 else 1.0


def min_pair_shortfall(probabilities: np.ndarray, values: np.ndarray, weights: np.ndarray, T_star: float, t: float,
                       draws: int = 20, seed: int = 0) -> float:
    """Mean over ``draws`` seeded samples of ``min_b Z_ab`` at the optimal allocation ``w* t``, over ``t / T*``.

    Without noise every pair's K_inf GLR statistic at ``w* t`` answers equals ``t / T*`` (the allocation equalises
    them), so a stop would come at the floor. With each arm's answers drawn (multinomial), each ``Z_ab`` fluctuates
    around it and the stop needs the *smallest* of the ``n - 1`` to pass the threshold: this ratio (below 1) is how
    much of the first-order statistic the weakest pair keeps, the main reason a GLR stop sits above its floor when
    many rivals are nearly tied with the best arm (all constraints active). k = 1.
    """
    from purebandits.kinf_glr import kinf_pair_cost

    P = np.asarray(probabilities, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    a = int(np.argmax(w))
    rng = np.random.default_rng(seed)
    mins = []
    for _ in range(draws):
        C = np.array([rng.multinomial(max(int(round(t * w[i])), 1), P[i]) for i in range(P.shape[0])], float)
        rivals = np.delete(np.arange(P.shape[0]), a)
        mins.append(float(kinf_pair_cost(np.repeat(C[a:a + 1], rivals.size, 0), C[rivals], values).min()))
    return float(np.mean(mins)) / (t / T_star)
