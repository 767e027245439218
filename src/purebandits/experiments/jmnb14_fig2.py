"""lil'UCB paper (Jamieson, Malloy, Nowak, Bubeck, COLT 2014), Figure 2: stopping time vs n.

Six algorithms of JMNB14 Sec. 5 (ALGORITHMS.md 2 and 14.1), input confidence nu = 0.1, on
Gaussian arms with variance 1/4 (sigma = 1/2) in three scenarios: "1-sparse" (mu_1 = 1/2, the
rest 0), "alpha = 0.3" and "alpha = 0.6" (mu_1 = 1, mu_i = 1 - ((i-1)/n)^alpha). Every
(scenario, n, algorithm) is run ``reps`` times (40 in the paper); UCB1 is skipped above
``ucb1_max_n`` (its O(n) per pull made the paper skip it at the largest n). The raw table has
one row per (scenario, n, algorithm): stopping-time summary, capped runs and error rate.

Seeds: configuration (scenario s, n index j) uses ``ctx.seed + 1000 s + 10 j`` for every
algorithm, so the algorithms see the same reward streams (common random numbers).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, summary_row, verdict_status
from purebandits.experiments.jmnb14 import ALGORITHMS, NU, SCENARIOS, instance_for
from purebandits.registry import make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def config_seed(ctx: Context, scenario_index: int, n_index: int) -> int:
    """The documented seed of one (scenario, n) configuration (shared by the algorithms)."""
    return ctx.seed + 1000 * scenario_index + 10 * n_index


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """Stopping-time summary per (scenario, n, algorithm) at nu = 0.1, UCB1 skipped above ``ucb1_max_n``;
    all algorithms of a configuration share its seed (:func:`config_seed`)."""
    rows = []
    for si, scenario in enumerate(SCENARIOS):
        for ni, n in enumerate(settings["ns"]):
            inst = instance_for(scenario, n)
            for label, (name, params) in ALGORITHMS.items():
                if name == "ucb1" and n > settings["ucb1_max_n"]:
                    continue
                learner = make_learner(name, delta=NU, **params)
                res = ctx.simulate(learner, inst, settings["reps"], seed=config_seed(ctx, si, ni),
                                   max_pulls=settings["max_pulls"])
                rows.append(summary_row(res, scenario=scenario, n=n, algorithm=label,
                                        H1=inst.hardness(1).H1, max_pulls=settings["max_pulls"]))
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """JMNB14 Fig. 2: mean stopping time vs n (log-log) per scenario, bars to the quartiles, x: runs capped."""
    import matplotlib.pyplot as plt

    scen = list(dict.fromkeys(df["scenario"]))
    fig, axes = plt.subplots(1, len(scen), figsize=(4.2 * len(scen), 3.6), squeeze=False)
    for ax, sc in zip(axes[0], scen, strict=True):
        g = df[df["scenario"] == sc]
        for i, label in enumerate(ALGORITHMS):
            a = g[g["algorithm"] == label].sort_values("n")
            if a.empty:
                continue
            err = [a["pulls_mean"] - a["pulls_q25"], a["pulls_q75"] - a["pulls_mean"]]
            err = [np.clip(e, 0, None) for e in err]
            ax.errorbar(a["n"], a["pulls_mean"], yerr=err, fmt="-o", ms=3, color=f"C{i}", label=label, capsize=2)
            cap = a[a["capped"] > 0]
            ax.plot(cap["n"], cap["pulls_mean"], "x", color="k", ms=7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of arms n")
        ax.set_title(sc)
    axes[0][0].set_ylabel("stopping time (total pulls)")
    axes[0][0].legend(fontsize=6)
    fig.suptitle("JMNB14 Fig. 2: stopping times, nu = 0.1 (x: some runs capped)", fontsize=9)
    fig.tight_layout()
    return fig


def _mean(df: pd.DataFrame, sc: str, n: int, label: str) -> float:
    a = df[(df["scenario"] == sc) & (df["n"] == n) & (df["algorithm"] == label)]
    return float(a["pulls_mean"].iloc[0]) if len(a) else math.nan


def assess(df: pd.DataFrame) -> Verdict:
    """The paper's five statements: at n >= 100, ExpGap+LS / Nonadaptive+LS in [0.5, 1.1], Successive Elimination
    below Nonadaptive+LS, lil'UCB+LS / UCB1+LS in [0.5, 2] with the better one ahead of Nonadaptive and ExpGap; at
    every n, the Heuristic never wrong and every error rate <= nu."""
    cells = [(sc, n) for sc in dict.fromkeys(df["scenario"]) for n in sorted(set(df["n"]))]
    big = [(sc, n) for sc, n in cells if n >= 100] or cells
    crit = []

    def ratio_cells(num: str, den: str, where: list) -> list[float]:
        return [_mean(df, sc, n, num) / _mean(df, sc, n, den) for sc, n in where
                if not math.isnan(_mean(df, sc, n, num) / _mean(df, sc, n, den))]

    r_eg = ratio_cells("ExpGap + LS", "Nonadaptive + LS", big)
    ok = bool(r_eg) and all(0.5 <= r <= 1.1 for r in r_eg)
    crit.append(("ExpGap+LS barely better than Nonadaptive+LS: mean ratio in [0.5, 1.1] for every n >= 100",
                 f"ratios {min(r_eg):.2f}-{max(r_eg):.2f}" if r_eg else "no data", ok))
    r_se = ratio_cells("Successive Elimination", "Nonadaptive + LS", big)
    ok = bool(r_se) and all(r < 1 for r in r_se)
    crit.append(("Successive Elimination performs well: fewer samples than Nonadaptive+LS for every n >= 100",
                 f"SE/Nonadaptive {min(r_se):.2f}-{max(r_se):.2f}" if r_se else "no data", ok))
    lead, ratios = [], []
    for sc, n in big:
        best_ucb = np.nanmin([_mean(df, sc, n, "lil'UCB + LS"), _mean(df, sc, n, "UCB1 + LS")])
        others = np.nanmin([_mean(df, sc, n, x) for x in ("Nonadaptive + LS", "ExpGap + LS")])
        lead.append(best_ucb <= others)
        r = _mean(df, sc, n, "lil'UCB + LS") / _mean(df, sc, n, "UCB1 + LS")
        if not math.isnan(r):
            ratios.append(r)
    ok = all(lead) and bool(ratios) and all(0.5 <= r <= 2 for r in ratios)
    crit.append(("lil'UCB+LS and UCB1+LS comparable (ratio in [0.5, 2]) and ahead of Nonadaptive/ExpGap, n >= 100",
                 f"lil'UCB+LS/UCB1+LS {min(ratios):.2f}-{max(ratios):.2f}; ahead in {sum(lead)}/{len(lead)} cells"
                 if ratios else f"ahead in {sum(lead)}/{len(lead)} cells", ok))
    h = df[df["algorithm"] == "lil'UCB Heuristic"]
    herr, hruns = int(h["errors"].sum()), int(h["reps"].sum())
    crit.append(("lil'UCB Heuristic never failed", f"{herr} wrong of {hruns} runs", herr == 0))
    fails = df[df["errors"] > 0]
    worst = df.loc[df["error_rate"].idxmax()]
    crit.append((f"every algorithm's error rate <= nu = {NU} (theory-backed ones guarantee it)",
                 f"max {worst['error_rate']:.3f} ({worst['algorithm']}, {worst['scenario']}, n={int(worst['n'])}); "
                 f"{len(fails)} cells with any error", bool((df["error_rate"] <= NU).all())))
    capped = int(df["capped"].sum())
    table = pd.DataFrame([{"criterion": c, "measured": m, "holds": "yes" if o else "no"} for c, m, o in crit])
    n_ok = sum(o for _, _, o in crit)
    status = verdict_status(n_ok, len(crit))
    largest = max(df["n"])
    means = "; ".join(f"{sc}: " + ", ".join(f"{lab.split(' ')[0]}{' H' if 'Heur' in lab else ''}="
                                            f"{_mean(df, sc, largest, lab):.3g}"
                                            for lab in ALGORITHMS if not math.isnan(_mean(df, sc, largest, lab)))
                      for sc in dict.fromkeys(df["scenario"]))
    summary = (f"{n_ok} of {len(crit)} criteria hold. Mean stopping times at n = {largest}: {means}. "
               f"{capped} run(s) hit the max_pulls cap (their stopping time is a lower bound).")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="jmnb14_fig2",
    paper="Jamieson, Malloy, Nowak, Bubeck (COLT 2014)",
    artefact="Figure 2",
    title="stopping times vs number of arms (1-sparse, alpha = 0.3, alpha = 0.6)",
    claim=("\"Exponential-Gap Elimination (+LS) appears to barely perform better than uniform sampling with "
           "the LIL stopping criterion\"; \"successive elimination performs so well\"; \"The lil'UCB+LS and "
           "UCB1+LS algorithms seem to behave comparably and lead the pack of algorithms with theoretical "
           "algorithms\"; \"over the course of all of our tens of thousands of experiments, the [lil'UCB "
           "Heuristic] never failed to terminate with the best arm\" (Sec. 5, 40 runs per point, nu = 0.1)."),
    scales={
        "quick": {"ns": [10, 30], "reps": 4, "max_pulls": 300_000, "ucb1_max_n": 30},
        "paper": {"ns": [10, 100, 1000, 10000], "reps": 40, "max_pulls": 10**9, "ucb1_max_n": 1000},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("n grid {10, 100, 1000, 10000} assumed (the text does not list it); UCB1 skipped at n = 10000 as in "
           "the paper. lil'UCB+LS: eps = 0.01, beta = 1, lambda = 9, delta = (sqrt(1+nu/2)-1)^2/(4 c_eps); "
           "Heuristic: eps = 0, beta = 1/2, lambda = 1 + 10/n, delta = nu/5, no LS; LS uses eps = 0.01 and "
           "nu/2 (all of nu for Nonadaptive; UCB1, whose index has no confidence, leaves its half unused). "
           "Successive Elimination uses the LS radius (ALGORITHMS.md 2.4). The paper's claim that LS helps "
           "the faithful lil'UCB a lot is tested in jmnb14_ls. Runs are capped at max_pulls; capped runs are "
           "counted and marked x in the plot."),
)
