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
