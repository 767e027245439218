"""What the experiments of Shahrampour and Tarokh (2017) share: the fixed-budget learners, their runs, and the
paired test that compares algorithms run on common random numbers."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from purebandits.experiments.base import Context
from purebandits.instances import Instance
from purebandits.metrics import misidentified, wilson_interval
from purebandits.registry import all_learners, make_learner
from purebandits.simulate import rep_seeds

P_VALUES = (0.7, 0.85, 1.1, 1.2, 1.3)

#: one character per run in the ``outcomes`` column: the recommendation was wrong / right
WRONG, RIGHT = "x", "o"


AT_LUCB_PARAMS = {"delta1": 0.5, "alpha": 0.99, "epsilon": 0.0}


# --------------------------------------------------------------------------- shared helpers
def fixed_budget_runs(learner: Any, instance: Instance, reps: int, seed: int) -> dict[str, np.ndarray]:
    """``reps`` runs of a round-based fixed-budget learner on its exact-sums path.

    Repetition r starts ``learner.clone()`` with the learner seed of ``rep_seeds(seed, r)`` and
    draws the per-round sums from a Generator on its stream seed, so the result depends only on
    (learner, instance, seed, r). Returns ``recommended`` (reps, k), ``counts`` (reps, n) and
    ``pulls`` (reps,).
    """
    n = instance.n_arms
    probe = learner.clone().start(n, seed=0)
    k = probe.k_
    rec = np.full((reps, k), -1, dtype=np.int64)
    counts = np.zeros((reps, n), dtype=np.int64)
    pulls = np.zeros(reps, dtype=np.int64)
    for r in range(reps):
        s_learner, s_stream = rep_seeds(seed, r)
        lr = learner.clone().start(n, seed=s_learner)
        lr.run_compiled_sums(instance.model, np.random.default_rng(s_stream))
        out = lr.recommend()[:k]
        rec[r, : len(out)] = out
        counts[r] = lr.counts_
        pulls[r] = lr.t_
    return {"recommended": rec, "counts": counts, "pulls": pulls}


def have_learner(name: str) -> bool:
    """Is ``name`` registered (AT-LUCB may land on main after this module)?"""
    return name in all_learners()


def error_row(wrong: np.ndarray) -> dict[str, float]:
    """Misidentification estimate, count and 95% Wilson interval of a boolean per-run array."""
    x, n = int(np.sum(wrong)), int(np.size(wrong))
    lo, hi = wilson_interval(x, n)
    return {"errors": x, "runs": n, "p_err": x / n if n else math.nan, "ci_low": lo, "ci_high": hi}


def algorithm_specs(include_uni: bool = True, ps: tuple[float, ...] = P_VALUES) -> list[tuple[str, str, dict]]:
    """(label, registry name, parameters) in the paper's bar order."""
    specs = [(f"NSAR p={p}", "nsar", {"p": p}) for p in ps]
    specs.append(("SAR", "sar", {}))
    specs.append(("AT-LUCB", "at_lucb", dict(AT_LUCB_PARAMS)))
    if include_uni:
        specs.append(("UNI", "uniform_allocation", {}))
    return specs


def encode_outcomes(wrong: np.ndarray) -> str:
    """Per-run outcomes as text for a CSV cell: ``"x"`` wrong, ``"o"`` right, in repetition order (letters, so
    that a CSV reader never takes the cell for a number)."""
    return "".join(WRONG if w else RIGHT for w in np.asarray(wrong, dtype=bool))


def decode_outcomes(text: Any) -> np.ndarray:
    """The boolean ``wrong`` array of :func:`encode_outcomes` (an empty or missing cell gives no runs)."""
    if not isinstance(text, str):
        return np.zeros(0, dtype=bool)
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord(WRONG)


def mcnemar_fewer(wrong_a: np.ndarray, wrong_b: np.ndarray, alpha: float) -> dict[str, Any]:
    """Exact one-sided McNemar test of "A errs less often than B" on paired runs (run r of A and of B share seeds).

    Only discordant pairs carry information: ``wins`` (A right, B wrong) and ``losses`` (A wrong, B right);
    under equal error probabilities each is a fair coin flip, so the p-value is
    ``P(Binomial(wins + losses, 1/2) >= wins)`` (:func:`scipy.stats.binomtest`). With fewer than
    ``log2(1/alpha)`` discordant pairs even all of them in A's favour cannot reach ``alpha``: the comparison
    is then not ``judgeable`` (neither a success nor a failure). ``fewer`` is None when not judgeable, else
    whether ``p_value <= alpha``. Runs beyond the shorter array are not paired and are left out.
    """
    from scipy.stats import binomtest

    n = min(len(wrong_a), len(wrong_b))
    a, b = np.asarray(wrong_a[:n], dtype=bool), np.asarray(wrong_b[:n], dtype=bool)
    wins, losses = int(np.sum(~a & b)), int(np.sum(a & ~b))
    d = wins + losses
    p = float(binomtest(wins, d, 0.5, alternative="greater").pvalue) if d else 1.0
    judgeable = 0.5 ** d <= alpha
    return {"pairs": n, "wins": wins, "losses": losses, "p_value": p, "judgeable": judgeable,
            "fewer": (p <= alpha) if judgeable else None}


def run_config(ctx: Context, instance: Instance, m: int, budget: int, reps: int, seed: int,
               specs: list[tuple[str, str, dict]], at_lucb_pulls: int | None = None, *, seed_step: int = 1000,
               outcomes: bool = False) -> list[dict]:
    """Misidentification of every algorithm in ``specs`` at one budget (one row each).

    ``at_lucb_pulls`` bounds AT-LUCB's total pulls per configuration: it runs
    ``min(reps, max(40, at_lucb_pulls // budget))`` times (its per-pull run is the dominant cost).
    Algorithm j uses seed ``seed + seed_step * j``: ``seed_step=0`` gives every algorithm the same seeds
    (common random numbers, for paired comparisons). ``outcomes=True`` adds each row's per-run outcomes
    (:func:`encode_outcomes`).
    """
    rows = []
    for j, (label, name, params) in enumerate(specs):
        s = seed + seed_step * j
        row: dict[str, Any] = {"algorithm": label, "budget": budget, "seed": s}
        if name == "at_lucb":
            if not have_learner(name):
                rows.append({**row, "errors": -1, "runs": 0, "p_err": math.nan, "ci_low": math.nan,
                             "ci_high": math.nan, "note": "at_lucb not registered",
                             **({"outcomes": ""} if outcomes else {})})
                continue
            at_reps = reps if at_lucb_pulls is None else min(reps, max(40, at_lucb_pulls // budget))
            res = ctx.simulate(make_learner(name, k=m, **params), instance, at_reps, seed=s, max_pulls=budget)
            wrong = ~res.correct
            note = f"capped at T: {int((~res.stopped).sum())}/{at_reps}"
        else:
            cpu = time.thread_time()
            out = fixed_budget_runs(make_learner(name, k=m, budget=budget, **params), instance, reps, s)
            ctx.count_work(int(out["pulls"].sum()), time.thread_time() - cpu)
            wrong = misidentified(out["recommended"], instance.means)
            note = "exact sums"
        rows.append({**row, **error_row(wrong), "note": note,
                     **({"outcomes": encode_outcomes(wrong)} if outcomes else {})})
    return rows


# --------------------------------------------------------------------------- bound complexities (Table I-III)
def c_p(n: int, p: float) -> float:
    """ST17 eq. (3): ``C_p = 2^-p + sum_{r=2}^n r^-p``; ``C_1`` is logbar(n) = 1/2 + sum_{i=2}^n 1/i (Table I)."""
    r = np.arange(2, int(n) + 1, dtype=float)
    return float(2.0 ** (-p) + np.sum(r ** (-p)))


def c_p_limit(p: float) -> float:
    """``lim_{n -> inf} C_p = zeta(p) - 1 + 2^-p`` for p > 1 (the convergent sum of ST17's proof of Corollary 3)."""
    from scipy.special import zeta

    if p <= 1:
        return math.inf
    return float(zeta(p, 1) - 1.0 + 2.0 ** (-p))


def sorted_gaps(means: Any, m: int) -> np.ndarray:
    """ST17 eq. (4)'s gaps ``Delta_i^(M)`` (``mu_i - mu_(M+1)`` for the top M, ``mu_(M) - mu_i`` otherwise) sorted
    increasingly, ``Delta_(1) <= ... <= Delta_(K)`` (the same as ``hardness(means, m).gaps``, without its other
    measures, which cost more at K = 10^4)."""
    mu = np.sort(np.asarray(means, dtype=float))[::-1]
    if not 1 <= m < mu.size:
        raise ValueError(f"m must be in [1, {mu.size - 1}], got {m}")
    g = np.concatenate([mu[:m] - mu[m], mu[m - 1] - mu[m:]])
    return np.sort(g)


def bound_complexity(means: Any, m: int, ps: tuple[float, ...]) -> dict[float, dict[str, float]]:
    """Per p: ``C_p``, ``H^(M)(p) = max_{i >= 2} i^p / Delta_(i)^2`` (ST17 eq. 4, sorted gaps) and their product
    ``C_p H^(M)(p)``, the sample complexity order of NSAR (Prop. 2, Table II) and, at p = 1, of SAR
    (``H_2^(M) logbar K``, Table II).

    For m = 1 the same products are Table I's alpha of NSE (``H(p) C_p``) and Successive Rejects
    (``H_2 logbar K``).
    """
    g = sorted_gaps(means, m)
    i = np.arange(1, g.size + 1, dtype=float)
    with np.errstate(divide="ignore"):
        inv = np.where(g[1:] > 0, 1.0 / np.maximum(g[1:], 1e-300) ** 2, np.inf)
    out = {}
    for p in ps:
        cp, hp = c_p(g.size, p), float(np.max(i[1:] ** p * inv))
        out[float(p)] = {"C_p": cp, "H_p": hp, "complexity": cp * hp}
    return out
