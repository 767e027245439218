"""lil'UCB paper (Jamieson, Malloy, Nowak, Bubeck, COLT 2014), Sec. 5: what the LIL stopping rule (LS) adds.

The paper states without a figure ("not plotted") that LS has a large effect on the faithful lil'UCB and none on
the heuristic one. We run lil'UCB with the faithful preset (eps = 0.01, beta = 1, lambda = 9, delta' from Thm 2
at nu, or at nu/2 with LS) and the heuristic preset (eps = 0, beta = 1/2, lambda = 1 + 10/n, delta' = nu/5), each
without and with LS (``ls=True``: LS at nu/2, ALGORITHMS.md 0.2), nu = 0.1, on the three Gaussian scenarios of
Fig. 2 (1-sparse, alpha = 0.3, alpha = 0.6; sigma = 1/2) over a few n.

Metric: mean stopping time (total pulls) and error rate per (scenario, n, variant); for each preset the ratio
``mean(with LS) / mean(without LS)`` with its Monte Carlo standard error. Both variants of a preset share the
reward stream of every repetition (LS only adds a stopping test, so a run with LS follows the run without it up
to its earlier stop), hence the ratio's standard error is the paired delta-method one,
``sd(a - r b) / (sqrt(reps) mean(b))`` (a with LS, b without, r the ratio).

Seeds: configuration (scenario s, n index j) uses ``ctx.seed + 70000 + 1000 s + 10 j`` for all four variants
(repetition r of the simulator then draws the same stream in each: common random numbers, paired runs).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, summary_row, verdict_status
from purebandits.experiments.jmnb14 import NU, SCENARIOS, instance_for
from purebandits.registry import make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: variant label -> (lil'UCB preset, ls)
VARIANTS: dict[str, tuple[str, bool]] = {
    "lil'UCB": ("faithful", False),
    "lil'UCB + LS": ("faithful", True),
    "lil'UCB Heuristic": ("heuristic", False),
    "lil'UCB Heuristic + LS": ("heuristic", True),
}

#: "a large impact": LS at least halves the faithful lil'UCB's mean stopping time
LARGE = 0.5
#: "no impact": the heuristic's ratio is within this margin of 1 (plus two Monte Carlo standard errors)
NO_IMPACT = 0.05


def config_seed(ctx: Context, scenario_index: int, n_index: int) -> int:
    """The documented seed of one (scenario, n) configuration, shared by the four variants."""
    return ctx.seed + 70000 + 1000 * scenario_index + 10 * n_index


def paired_ratio(with_ls: np.ndarray, without: np.ndarray) -> tuple[float, float, int]:
    """(ratio of means, its paired delta-method standard error, runs where LS stopped strictly earlier)."""
    a, b = np.asarray(with_ls, float), np.asarray(without, float)
    r = a.mean() / b.mean()
    se = float(np.std(a - r * b, ddof=1) / (math.sqrt(a.size) * b.mean())) if a.size > 1 else math.nan
    return float(r), se, int((a < b).sum())


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """Stopping-time summary per (scenario, n, variant) at nu = 0.1; LS rows also carry the paired ratio to the
    same preset without LS (seeds :func:`config_seed`, shared by the variants)."""
    rows = []
    for si, scenario in enumerate(SCENARIOS):
        for ni, n in enumerate(settings["ns"]):
            inst = instance_for(scenario, n)
            pulls: dict[str, np.ndarray] = {}
            for label, (preset, ls) in VARIANTS.items():
                learner = make_learner("lil_ucb", delta=NU, preset=preset, ls=ls)
                res = ctx.simulate(learner, inst, settings["reps"], seed=config_seed(ctx, si, ni),
                                   max_pulls=settings["max_pulls"])
                pulls[preset, ls] = np.asarray(res.pulls)
                row = summary_row(res, scenario=scenario, n=n, algorithm=label, preset=preset, ls=ls,
                                  H1=inst.hardness(1).H1, max_pulls=settings["max_pulls"])
                row["ratio"] = row["ratio_se"] = math.nan
                row["ls_earlier"] = 0
                if ls:
                    row["ratio"], row["ratio_se"], row["ls_earlier"] = paired_ratio(pulls[preset, True],
                                                                                    pulls[preset, False])
                rows.append(row)
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """Mean stopping time vs n per scenario (four variants, bars to the quartiles), and the ratio with/without LS
    per preset with two standard errors."""
    import matplotlib.pyplot as plt

    scen = list(dict.fromkeys(df["scenario"]))
    fig, axes = plt.subplots(1, len(scen) + 1, figsize=(4.0 * (len(scen) + 1), 3.6), squeeze=False)
    style = {"lil'UCB": ("C0", "--"), "lil'UCB + LS": ("C0", "-"), "lil'UCB Heuristic": ("C1", "--"),
             "lil'UCB Heuristic + LS": ("C1", "-")}
    for ax, sc in zip(axes[0], scen, strict=False):
        g = df[df["scenario"] == sc]
        for label, (color, ls) in style.items():
            a = g[g["algorithm"] == label].sort_values("n")
            err = [np.clip(a["pulls_mean"] - a["pulls_q25"], 0, None),
                   np.clip(a["pulls_q75"] - a["pulls_mean"], 0, None)]
            ax.errorbar(a["n"], a["pulls_mean"], yerr=err, fmt="o", ls=ls, ms=3, color=color, label=label, capsize=2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of arms n")
        ax.set_title(sc)
    axes[0][0].set_ylabel("stopping time (total pulls)")
    axes[0][0].legend(fontsize=6)
    ax = axes[0][-1]
    for si, sc in enumerate(scen):
        for label, color in (("lil'UCB + LS", "C0"), ("lil'UCB Heuristic + LS", "C1")):
            a = df[(df["scenario"] == sc) & (df["algorithm"] == label)].sort_values("n")
            ax.errorbar(a["n"] * (1 + 0.06 * si), a["ratio"], yerr=2 * a["ratio_se"].fillna(0), fmt="os^"[si],
                        ls="-", ms=4, color=color, capsize=2, label=f"{label.replace(' + LS', '')}, {sc}")
    ax.axhline(1.0, color="k", lw=0.6)
    ax.axhline(LARGE, color="k", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.15)
    ax.set_xlabel("number of arms n")
    ax.set_ylabel("mean pulls with LS / without LS")
    ax.set_title("effect of LS (+-2 SE)")
    ax.legend(fontsize=5)
    fig.suptitle("JMNB14 Sec. 5: lil'UCB with and without the LIL stopping rule, nu = 0.1", fontsize=9)
    fig.tight_layout()
    return fig


def assess(df: pd.DataFrame) -> Verdict:
    """In every (scenario, n): faithful ratio + 2 SE <= 0.5 (LS at least halves the stopping time); heuristic
    abs(ratio - 1) <= 0.05 + 2 SE (no impact); every error rate <= nu."""
    crit = []
    faith = df[df["algorithm"] == "lil'UCB + LS"]
    ok_f = bool(len(faith)) and bool(((faith["ratio"] + 2 * faith["ratio_se"].fillna(np.inf)) <= LARGE).all())
    crit.append((f"LS has a large impact on the faithful lil'UCB: ratio + 2 SE <= {LARGE} in every cell",
                 f"ratios {faith['ratio'].min():.3f}-{faith['ratio'].max():.3f} (max 2 SE "
                 f"{2 * faith['ratio_se'].max():.3f})", ok_f))
    heur = df[df["algorithm"] == "lil'UCB Heuristic + LS"]
    dev = (heur["ratio"] - 1).abs()
    ok_h = bool(len(heur)) and bool((dev <= NO_IMPACT + 2 * heur["ratio_se"].fillna(0)).all())
    crit.append((f"LS has no impact on the heuristic: abs(ratio - 1) <= {NO_IMPACT} + 2 SE in every cell",
                 f"ratios {heur['ratio'].min():.3f}-{heur['ratio'].max():.3f}; LS stopped earlier in "
                 f"{int(heur['ls_earlier'].sum())} of {int(heur['reps'].sum())} runs", ok_h))
    worst = df.loc[df["error_rate"].idxmax()]
    crit.append((f"every variant's error rate <= nu = {NU}",
                 f"max {worst['error_rate']:.3f} ({worst['algorithm']}, {worst['scenario']}, n={int(worst['n'])}); "
                 f"{int(df['errors'].sum())} wrong of {int(df['reps'].sum())} runs",
                 bool((df["error_rate"] <= NU).all())))
    table = pd.DataFrame([{"criterion": c, "measured": m, "holds": "yes" if o else "no"} for c, m, o in crit])
    n_ok = sum(o for _, _, o in crit)
    status = verdict_status(n_ok, len(crit))
    largest = max(df["n"])
    big = df[(df["n"] == largest) & df["ls"].astype(bool)]
    ratios = "; ".join(f"{r.scenario} {r.preset} {r.ratio:.3f}+-{r.ratio_se:.3f}" for r in big.itertuples())
    summary = (f"{n_ok} of {len(crit)} criteria hold. Ratio with/without LS at n = {largest}: {ratios}. "
               f"{int(df['capped'].sum())} run(s) hit the max_pulls cap.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="jmnb14_ls",
    paper="Jamieson, Malloy, Nowak, Bubeck (COLT 2014)",
    artefact="Sec. 5 (LS effect, not plotted in the paper)",
    title="lil'UCB faithful and heuristic, with and without the LIL stopping rule",
    claim=("\"The LIL stopping criterion seems to have a large impact on performance of the regular lil'UCB "
           "algorithm, but it had no impact on the lil'UCB Heuristic variant (not plotted).\" (Sec. 5, nu = 0.1)"),
    scales={
        "quick": {"ns": [10, 30], "reps": 6, "max_pulls": 10**7},
        "paper": {"ns": [10, 100, 1000, 10000], "reps": 40, "max_pulls": 10**9},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("The paper gives no numbers, n grid or repetitions for this statement: we use the n grid assumed for "
           "Fig. 2 and its 40 runs. 'Large impact' is read as at least a halving of the mean stopping time "
           f"(ratio <= {LARGE}), 'no impact' as a ratio within {NO_IMPACT} of 1, both with two paired Monte Carlo "
           "standard errors of tolerance. lil'UCB (faithful): eps = 0.01, beta = 1, lambda = 9, "
           "delta = (sqrt(1+nu)-1)^2/(4 c_eps) without LS and (sqrt(1+nu/2)-1)^2/(4 c_eps) with LS; Heuristic: "
           "eps = 0, beta = 1/2, lambda = 1 + 10/n, delta = nu/5 in both; LS uses eps = 0.01 and nu/2. The runs "
           "of a preset with and without LS share their reward streams, so they coincide until LS stops one."),
)
