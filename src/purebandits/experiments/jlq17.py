"""What the experiments of Jiang, Li, Qiao (2017) share: the best-K learners in their two versions, the grid of
(instance, K, N) runs, the 'fewest samples' table and the plot."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from purebandits.experiments.base import Context, summary_row
from purebandits.instances import Instance
from purebandits.registry import all_learners, make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NU = 0.01


#: label -> registry name (the five best-K algorithms of JLQ17 Sec. 5.1)
BEST_K = {
    "LUCB": "lucb1",
    "lil'LUCB": "lil_lucb",
    "LUCB++": "lucb_plus_plus",
    "lil'RandLUCB": "lil_rand_lucb",
    "lil'CLUCB": "lil_clucb",
}


def learner_for(label: str, version: str, k: int, table: dict[str, str] = BEST_K) -> Any | None:
    """The learner of ``label`` in ``version`` ("faithful"/"heuristic"), or None if it has none.

    LUCB has no LIL parameters: it runs once (listed under "faithful") with its own radius.
    """
    name = table[label]
    if name not in all_learners():
        return None
    if name == "lucb1":
        return make_learner(name, k=k, delta=NU) if version == "faithful" else None
    params: dict[str, Any] = {"delta": NU, "preset": version}
    if name != "lil_ucb":
        params["k"] = k
    return make_learner(name, **params)


def run_grid(ctx: Context, settings: dict, cells: list[tuple[str, str, Any]], table: dict[str, str],
             base_seed: int) -> pd.DataFrame:
    """Simulate every algorithm of ``table`` in both versions on every (instance, k-label, builder)
    of ``cells`` and every N of ``settings["ns"]``."""
    rows = []
    for ci, (inst_label, k_label, build) in enumerate(cells):
        for ni, n in enumerate(settings["ns"]):
            inst: Instance = build(n)
            k = inst.k
            for version in ("faithful", "heuristic"):
                for label in table:
                    learner = learner_for(label, version, k, table)
                    if learner is None:
                        continue
                    cap = settings["max_pulls"]
                    res = ctx.simulate(learner, inst, settings["reps"], seed=base_seed + 1000 * ci + ni,
                                       max_pulls=cap)
                    rows.append(summary_row(res, instance=inst_label, K=k_label, N=n, k=k, version=version,
                                            algorithm=label, max_pulls=cap))
    return pd.DataFrame(rows)


def plot_grid(df: pd.DataFrame, panel_cols: list[str], labels: list[str], title: str) -> Figure:
    """Mean samples vs N (log-log), one column per value of ``panel_cols``, faithful versions on top and heuristic
    below; LUCB (one version) is drawn in both rows and x marks points with capped runs (JLQ17 Figs. 1-2)."""
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(zip(*(df[c] for c in panel_cols), strict=True)))
    fig, axes = plt.subplots(2, len(panels), figsize=(3.6 * len(panels), 6.0), squeeze=False)
    for c, key in enumerate(panels):
        sel = pd.Series(True, index=df.index)
        for col, v in zip(panel_cols, key, strict=True):
            sel &= df[col] == v
        for r, version in enumerate(("faithful", "heuristic")):
            ax = axes[r][c]
            g = df[sel & ((df["version"] == version) | ((df["algorithm"] == "LUCB") & (version == "heuristic")))]
            for i, label in enumerate(labels):
                a = g[g["algorithm"] == label].sort_values("N")
                if a.empty:
                    continue
                ax.plot(a["N"], a["pulls_mean"], "-o", ms=3, color=f"C{i}", label=label)
                cap = a[a["capped"] > 0]
                ax.plot(cap["N"], cap["pulls_mean"], "x", color="k", ms=7)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"({version}) " + ", ".join(str(v) for v in key), fontsize=8)
            if r == 1:
                ax.set_xlabel("number of arms N")
            if c == 0:
                ax.set_ylabel("samples")
    axes[0][0].legend(fontsize=6)
    fig.suptitle(title + " (LUCB, one version, drawn in both rows; x: some runs capped)", fontsize=9)
    fig.tight_layout()
    return fig


def mean_of(df: pd.DataFrame, label: str, version: str, **where: Any) -> float:
    """Mean samples of ``label`` (its ``version`` of parameters; LUCB has one) in the rows matching ``where``."""
    sel = df["algorithm"] == label
    if label != "LUCB":
        sel &= df["version"] == version
    for col, v in where.items():
        sel &= df[col] == v
    a = df[sel]
    return float(a["pulls_mean"].iloc[0]) if len(a) else math.nan


def fewest_rows(df: pd.DataFrame, rivals: list[str], keys: list[str], min_n: int) -> list[dict[str, Any]]:
    """Per (keys..., version, N >= min_n): lil'RandLUCB's mean samples and the ratio rival / RandLUCB."""
    rows = []
    big = df[df["N"] >= min_n] if (df["N"] >= min_n).any() else df
    for key, g in big.groupby([*keys, "N"], sort=False):
        w = dict(zip(keys, key[:-1], strict=True))
        for version in ("faithful", "heuristic"):
            rl = mean_of(g, "lil'RandLUCB", version)
            if math.isnan(rl):
                continue
            row: dict[str, Any] = {**w, "version": version, "N": key[-1], "lil'RandLUCB": round(rl)}
            for r in rivals:
                m = mean_of(g, r, version)
                if not math.isnan(m):
                    row[f"{r}/Rand"] = round(m / rl, 2)
            rows.append(row)
    return rows
