"""What the experiments of Zhou, Chen, Li (ICML 2014) share: the learners, the regret grid and its panels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context
from purebandits.instances import Instance
from purebandits.metrics import aggregate_regret, precision
from purebandits.registry import make_learner

#: label, registry name, parameters (the budget is added per run)
ALGORITHMS: list[tuple[str, str, dict[str, Any]]] = [
    ("OptMAI beta=0.8", "optmai", {"beta": 0.8}),
    ("OptMAI beta=0.9", "optmai", {"beta": 0.9}),
    ("SAR", "sar", {}),
    ("LUCB", "lucb1", {"delta": 0.1}),
    ("uniform", "uniform_allocation", {}),
]


def learner_for(name: str, params: dict[str, Any], k: int, budget: int) -> Any:
    """The learner of one algorithm; LUCB gets no budget (it is capped by ``max_pulls``)."""
    if name == "lucb1":
        return make_learner(name, k=k, **params)
    return make_learner(name, k=k, budget=budget, **params)


def regret_grid(ctx: Context, make: Callable[[int], Instance], label: str, qs: list[int], ks: list[int],
                reps: int, seed: int, keep_counts: tuple[int, int] | None = None,
                algorithms: list[tuple[str, str, dict[str, Any]]] = ALGORITHMS) -> tuple[list[dict], dict]:
    """Regret and precision per (Q multiple, K, algorithm); optionally the counts of one (Q, K).

    Returns the rows and ``{algorithm label: (reps, n) counts}`` for ``keep_counts = (q, K)``.
    """
    rows, kept = [], {}
    for qi, q in enumerate(qs):
        for k in ks:
            inst = make(k)
            n = inst.n_arms
            budget = q * n
            for a, (alg, name, params) in enumerate(algorithms):
                s = seed + 1_000_000 * qi + 1000 * k + a
                res = ctx.simulate(learner_for(name, params, k, budget), inst, reps, seed=s, max_pulls=budget)
                reg = aggregate_regret(res.recommended, inst.means)
                prec = precision(res.recommended, inst.means)
                per_max, per_min = res.counts.max(axis=1), res.counts.min(axis=1)
                rows.append({"instance": label, "n": n, "Q/n": q, "Q": budget, "K": k, "algorithm": alg,
                             "seed": s, "runs": reps, "regret": float(reg.mean()),
                             "regret_sem": float(reg.std(ddof=1) / np.sqrt(reps)) if reps > 1 else 0.0,
                             "precision": float(prec.mean()), "pulls_mean": float(res.pulls.mean()),
                             "stopped_early": int((res.stopped & (res.pulls < budget)).sum()),
                             "max_count_mean": float(per_max.mean()), "max_count": int(per_max.max()),
                             "min_count_mean": float(per_min.mean()), "min_count": int(per_min.min())})
                if keep_counts == (q, k):
                    kept[alg] = res.counts
    return rows, kept


def plot_regret_panels(df: pd.DataFrame, axes_row: Any, title: str) -> None:
    """Aggregate regret vs K (+- 1 s.e.) per algorithm, one panel of ``axes_row`` per budget Q/n (ZCL14 Figs. 1-2)."""
    for ax, (q, g) in zip(axes_row, df.groupby("Q/n"), strict=False):
        for i, (alg, _, _) in enumerate(ALGORITHMS):
            h = g[g["algorithm"] == alg].sort_values("K")
            if len(h):
                ax.errorbar(h["K"], h["regret"], yerr=h["regret_sem"], fmt="-o", ms=2, lw=1, color=f"C{i}",
                            label=alg, capsize=0)
        ax.set_title(f"{title}, Q={q}n", fontsize=8)
        ax.set_xlabel("K", fontsize=7)
        ax.set_ylabel("aggregate regret", fontsize=7)
        ax.tick_params(labelsize=6)


def appendix_means(dist: str, n: int, seed: int = 0, **params: float) -> np.ndarray:
    """Arm means drawn once for the ZCL14 appendix instances ("truncated normal and Beta", Sec. 6.1).

    ``dist = "truncnorm"``: N(``mean``, ``sd``^2) restricted to [0, 1] (rejection sampling, defaults 0.5 / 0.2);
    ``dist = "beta"``: Beta(``a``, ``b``) (defaults 2 / 5). The appendix's parameters are not in the seed text:
    these defaults are our choice (see :mod:`purebandits.experiments.zcl14_appendix`).
    """
    rng = np.random.default_rng(seed)
    if dist == "truncnorm":
        mean, sd = float(params.get("mean", 0.5)), float(params.get("sd", 0.2))
        out = np.empty(0)
        while out.size < n:  # keep the draws that fall in [0, 1], in order
            x = rng.normal(mean, sd, 2 * n)
            out = np.concatenate([out, x[(x >= 0.0) & (x <= 1.0)]])
        return out[:n]
    if dist == "beta":
        return rng.beta(float(params.get("a", 2.0)), float(params.get("b", 5.0)), n)
    raise ValueError(f"dist must be 'truncnorm' or 'beta', got {dist!r}")


def cell_comparisons(df: pd.DataFrame, z: float = 2.0) -> pd.DataFrame:
    """Per (instance, Q/n, K) cell of a :func:`regret_grid` table, the ZCL14 Fig. 1 comparisons with Monte Carlo
    error: the better OptMAI against min(SAR, LUCB) and uniform against the best other algorithm.

    Runs of different algorithms are independent, so a difference of means has s.e. ``sqrt(se_a^2 + se_b^2)``;
    "tied" means within ``z`` of them. Columns: ``opt_minus_best`` (better OptMAI minus min(SAR, LUCB)),
    ``opt_se``, ``opt_not_worse`` (difference <= z s.e.), ``opt_lower`` (difference < 0),
    ``uni_worst`` (uniform has the highest mean), ``uni_sig_worst`` (uniform above every other by > z s.e.),
    ``b08_minus_b09`` and ``b_se``.
    """
    rows = []
    for (inst, q, k), g in df.groupby(["instance", "Q/n", "K"]):
        r = g.set_index("algorithm")
        reg, se = r["regret"], r["regret_sem"]
        opt = min(("OptMAI beta=0.8", "OptMAI beta=0.9"), key=lambda a: reg.get(a, np.inf))
        base = min(("SAR", "LUCB"), key=lambda a: reg.get(a, np.inf))
        d = float(reg[opt] - reg[base])
        d_se = float(np.hypot(se[opt], se[base]))
        others = reg.drop(index="uniform")
        gaps = reg["uniform"] - others
        gap_se = np.hypot(se["uniform"], se.drop(index="uniform"))
        b = float(reg["OptMAI beta=0.8"] - reg["OptMAI beta=0.9"])
        rows.append({"instance": inst, "Q/n": q, "K": k, "opt_minus_best": d, "opt_se": d_se,
                     "opt_not_worse": d <= z * d_se, "opt_lower": d < 0,
                     "uni_worst": bool((gaps > 0).all()), "uni_sig_worst": bool((gaps > z * gap_se).all()),
                     "b08_minus_b09": b, "b_se": float(np.hypot(se["OptMAI beta=0.8"], se["OptMAI beta=0.9"]))})
    return pd.DataFrame(rows)
