"""Best-K paper (Jiang, Li, Qiao 2017), Figure 2: best-1 samples vs N, with lil'UCB.

The five algorithms of :mod:`purebandits.experiments.jlq17_fig1` at K = 1 plus lil'UCB
(JMNB14; faithful preset without LS, and the heuristic preset), faithful and heuristic
versions, nu = 0.01, Gaussian rewards with variance 1/4, on JMNB14's instances: "1-sparse"
(mu_1 = 1/2, the rest 0) and "lil-exponential" (mu_1 = 1, mu_i = 1 - ((i-1)/N)^alpha) with
alpha in {0.3, 0.6}. One raw row per (instance, N, version, algorithm).

Seeds: instance c (in the order above) and N index j use ``ctx.seed + 200000 + 1000 c + j``
for every algorithm and version (common random numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.experiments.jlq17 import BEST_1_INSTANCES, BEST_K, fewest_rows, plot_grid, run_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BEST_1 = {**BEST_K, "lil'UCB": "lil_ucb"}
INSTANCES = BEST_1_INSTANCES


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """JLQ17's five algorithms plus lil'UCB at K = 1, faithful and heuristic, on 1-sparse and lil-exponential
    alpha = 0.3, 0.6 for every N of ``settings["ns"]`` (seeds ``ctx.seed + 200000 + 1000 c + j``)."""
    cells = [(label, "K=1", f) for label, f in INSTANCES.items()]
    return run_grid(ctx, settings, cells, BEST_1, ctx.seed + 200000)


def plot(df: pd.DataFrame) -> Figure:
    """JLQ17 Fig. 2: samples vs N per instance, faithful row above heuristic row."""
    return plot_grid(df, ["instance"], list(BEST_1), "JLQ17 Fig. 2: best-1, nu = 0.01")


def assess(df: pd.DataFrame) -> Verdict:
    """Six criteria at N >= 100: lil'RandLUCB fewest on 1-sparse and alpha = 0.3, within [0.8, 1.25] of LUCB++ at
    alpha = 0.6; LUCB, lil'CLUCB and heuristic lil'LUCB >= 1.5x its samples, faithful lil'UCB >= 10x; no errors."""
    min_n = 100
    rivals = [x for x in BEST_1 if x != "lil'RandLUCB"]
    table = pd.DataFrame(fewest_rows(df, rivals, ["instance"], min_n))
    ratio_cols = [c for c in table.columns if c.endswith("/Rand")]
    easy = table[table["instance"].isin(["1-sparse", "alpha=0.3"])]
    best_ok = (easy[ratio_cols] > 1).all(axis=1)
    hard = table[table["instance"] == "alpha=0.6"]
    eq = hard["LUCB++/Rand"].between(0.8, 1.25) if "LUCB++/Rand" in hard else pd.Series(False, index=hard.index)
    slow = [c for c in ("LUCB/Rand", "lil'CLUCB/Rand") if c in table]
    much = (table[slow] >= 1.5).all(axis=1) if slow else pd.Series(False, index=table.index)
    heur = table[table["version"] == "heuristic"]
    lil_lucb = heur["lil'LUCB/Rand"] >= 1.5 if "lil'LUCB/Rand" in heur else pd.Series(False, index=heur.index)
    faith = table[table["version"] == "faithful"]
    ucb_f = faith["lil'UCB/Rand"] if "lil'UCB/Rand" in faith else pd.Series(dtype=float)
    oom = ucb_f >= 10
    errors, runs, capped = int(df["errors"].sum()), int(df["reps"].sum()), int(df["capped"].sum())
    crit = [bool(best_ok.all()), bool(eq.all()), bool(much.all()), bool(lil_lucb.all()), bool(oom.all()),
            errors == 0]
    n_ok = sum(crit)
    status = verdict_status(n_ok, len(crit))
    capped_ucb = int(df[(df["algorithm"] == "lil'UCB") & (df["version"] == "faithful")]["capped"].sum())
    n_used = int(table["N"].min()) if len(table) else min_n
    summary = (f"N >= {n_used}: lil'RandLUCB uses the fewest samples on 1-sparse and alpha = 0.3 in "
               f"{int(best_ok.sum())}/{len(best_ok)} (instance, version, N) cells; at alpha = 0.6 it is within "
               f"[0.8, 1.25] of LUCB++ in {int(eq.sum())}/{len(eq)}; LUCB and lil'CLUCB take >= 1.5x its samples in "
               f"{int(much.sum())}/{len(much)}; heuristic lil'LUCB >= 1.5x in {int(lil_lucb.sum())}/{len(lil_lucb)}; "
               f"faithful lil'UCB >= 10x faithful lil'RandLUCB in {int(oom.sum())}/{len(oom)} (ratios "
               f"{ucb_f.min():.1f}-{ucb_f.max():.1f}; {capped_ucb} of its runs capped). "
               f"Wrong answers: {errors} of {runs} runs; capped runs: {capped}." if len(ucb_f) else
               f"{n_ok} of {len(crit)} criteria hold; wrong answers {errors} of {runs}; capped {capped}.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="jlq17_fig2",
    paper="Jiang, Li, Qiao (2017)",
    artefact="Figure 2",
    title="best-1 samples vs N (1-sparse, lil-exponential alpha = 0.3 and 0.6), with lil'UCB",
    claim=("\"the performance of the faithful version of lil'UCB is worse than those of other algorithms by an "
           "order of magnitude [...] lil'RandLUCB significantly outperforms all the other algorithms on the "
           "'1-sparse' and 'alpha=0.3' instances, especially when the number of arms gets larger. In the "
           "'alpha=0.6' scenario, lil'RandLUCB and LUCB++ have similar performances. All these algorithms take "
           "much fewer samples than LUCB and lil'CLUCB do, and have much better performance than lil'LUCB when "
           "the heuristic versions are considered\" (Sec. 5.2, nu = 0.01)."),
    scales={
        "quick": {"ns": [8, 16], "reps": 2, "max_pulls": 2_000_000},
        "paper": {"ns": [10, 30, 100, 300, 1000], "reps": 20, "max_pulls": 10**9},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("N grid and repetitions are not stated in the paper: N in {10, 30, 100, 300, 1000}, 20 runs. lil'UCB "
           "faithful = JMNB14's eps = 0.01, beta = 1, lambda = 9 without LS; lil'UCB heuristic = JMNB14's "
           "(eps = 0, beta = 1/2, lambda = 1 + 10/N, delta = nu/5) with nu = 0.01, our reading of "
           "ALGORITHMS.md 14.4. 'Much fewer'/'much better' = ratio >= 1.5, 'order of magnitude' = ratio >= 10, "
           "'similar' = ratio in [0.8, 1.25], all judged at N >= 100. Other settings as in jlq17_fig1."),
)
