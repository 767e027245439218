"""What the experiments of Jiang, Li, Qiao (2017) share: the best-K learners in their two versions, the grid of
(instance, K, N) runs, the 'fewest samples' table and the plot; for combinatorial pure exploration (App. E) the
lil'CLUCB / CLUCB learners, the matching instances and the judge of a decision against the oracle's best."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, summary_row
from purebandits.instances import Instance, alpha_exponential, lil_exponential, one_sparse
from purebandits.registry import all_learners, make_learner

#: JLQ17 Sec. 5's instances: best-K (Fig. 1), N arms with K best -> Instance
BEST_K_INSTANCES = {
    "1-sparse": lambda n, k: one_sparse(n, k),
    "0.3-exponential": lambda n, k: alpha_exponential(n, k, 0.3),
}
#: best-1 (Fig. 2), N arms -> Instance
BEST_1_INSTANCES = {
    "1-sparse": lambda n: one_sparse(n),
    "alpha=0.3": lambda n: lil_exponential(n, 0.3),
    "alpha=0.6": lambda n: lil_exponential(n, 0.6),
}

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


# ----------------------------------------------------------------------------- combinatorial pure exploration
#: label -> (registry name, preset or None): lil'CLUCB (JLQ17 App. E, Alg. 3) in its two versions and CLUCB
#: (Chen et al. 2014, Alg. 1), which has one version (its radius carries its own guarantee at delta = nu)
CPE_LEARNERS: dict[str, tuple[str, str | None]] = {
    "lil'CLUCB (faithful)": ("lil_clucb", "faithful"),
    "lil'CLUCB (heuristic)": ("lil_clucb", "heuristic"),
    "CLUCB": ("clucb", None),
}


def cpe_learner(label: str, decision: dict, k: int) -> Any:
    """The CPE learner of ``label`` (:data:`CPE_LEARNERS`) at nu = 0.01 on ``decision`` (a cpe.py spec).

    ``k`` is the size of a decision (for top-K the class's K; for a perfect matching of K_{r,r}, r): the simulator
    keeps the first ``k`` arms of a recommendation, so with it the whole decision is kept and can be judged.
    """
    name, preset = CPE_LEARNERS[label]
    params: dict[str, Any] = {"k": k, "delta": NU, "decision": decision}
    if preset is not None:
        params["preset"] = preset
    return make_learner(name, **params)


def on_diagonal(means: Any, r: int) -> np.ndarray:
    """Lay the ``r*r`` means of a best-K instance with K = r (sorted, best first) on the cells of K_{r,r}.

    The K best go to the diagonal cells ``i*r + i`` (in order), the others to the off-diagonal cells in row-major
    order. Every other perfect matching swaps at least two diagonal cells for off-diagonal ones, each below every
    diagonal mean, so the diagonal is the unique best matching and also the unique top-K set.
    """
    mu = np.asarray(means, dtype=np.float64).ravel()
    if mu.size != r * r:
        raise ValueError(f"need {r * r} means for K_{{{r},{r}}}, got {mu.size}")
    diag = np.arange(r) * (r + 1)
    off = np.setdiff1d(np.arange(r * r), diag)
    out = np.empty(r * r)
    out[diag], out[off] = mu[:r], mu[r:]
    return out


def cpe_gaps(dec: Any, means: Any) -> np.ndarray:
    """JLQ17 Sec. 4.2 CPE gaps: ``mu(OPT) - max_{M: i notin M} mu(M)`` for i in OPT, ``mu(OPT) - max_{M: i in M}
    mu(M)`` otherwise (inf if no decision excludes / includes i), with the class's oracle on shifted weights."""
    mu = np.asarray(means, dtype=np.float64)
    opt = np.asarray(dec.oracle(mu), dtype=bool)
    best = float(mu[opt].sum())
    big = 1e6 * (1.0 + float(np.abs(mu).max()))
    gaps = np.empty(mu.size)
    for i in range(mu.size):
        w = mu.copy()
        w[i] = -big if opt[i] else big
        m = np.asarray(dec.oracle(w), dtype=bool)
        gaps[i] = math.inf if m[i] != (not opt[i]) else best - float(mu[m].sum())
    return gaps


def cpe_correct(dec: Any, means: Any, recommended: Any) -> np.ndarray:
    """Per row of ``recommended`` (arms, -1 = padding): True iff its arm set is the class's optimal decision
    ``OPT = Oracle(mu)`` on the true means (JLQ17 Sec. 4.2). Needs a unique OPT (all :func:`cpe_gaps` > 0)."""
    mu = np.asarray(means, dtype=np.float64)
    opt = set(np.flatnonzero(dec.oracle(mu)).tolist())
    rows = np.atleast_2d(np.asarray(recommended, dtype=np.int64))
    return np.array([set(int(a) for a in row if a >= 0) == opt and len(row[row >= 0]) == len(opt) for row in rows],
                    dtype=bool)
