"""Best-K paper (Jiang, Li, Qiao 2017), Sec. 4.2 / App. E: generalised lil'CLUCB vs CLUCB on decision classes.

JLQ17 runs no combinatorial pure exploration (CPE) experiment: Sec. 5 covers Best-K and Best-1 only. Theorem 4.2
bounds the generalised lil'CLUCB (App. E, Alg. 3) by ``O(width^2 sigma^2 sum_i Delta_i^-2 (log 1/delta + log N
+ log log 1/Delta_i))`` against CLUCB's ``O(width^2 sigma^2 H log(N H / delta))`` (Chen et al. 2014). This
experiment tests the bound's qualitative prediction: lil'CLUCB takes fewer samples than CLUCB, and its lead grows
with the problem (CLUCB's radius grows like ``log t^3``, lil'CLUCB's like ``log log T_i``).

Decision classes (``purebandits.algorithms.cpe``): perfect matchings of K_{r,r} (width 2r; arm ``i*r + j`` =
cell (i, j); the oracle is SciPy's assignment solver) and, as a sanity class, the top-K sets with K = r (width 2;
JLQ17 App. C, Alg. 2) on the **same** arms. Instances: JLQ17 Sec. 5's best-K families with N = r^2 and K = r,
"1-sparse" (K arms at 1/2, the rest 0) and "0.3-exponential", the K best laid on the diagonal and the others on
the off-diagonal cells in row-major order (``jlq17.on_diagonal``), so the diagonal is the unique optimum of both
classes. Gaussian rewards with variance 1/4 (sigma = 1/2), nu = 0.01 (Sec. 5).

Learners: lil'CLUCB "faithful" (eps = 0.01, delta' solving 2 c_eps delta'^(1+eps)/N^eps = nu, Thm 4.2 with both
tails) and "heuristic" (eps = 0, delta = nu, Sec. 5), and CLUCB at delta = nu (one version: its guarantee holds at
its delta). Every answer is judged against the class's best decision on the true means (``Oracle(mu)``,
``jlq17.cpe_correct``), not by the simulator's top-K rule.

Seeds: instance family f and size index j use ``ctx.seed + 300000 + 1000 f + j`` for both classes and all three
learners, so repetition r of every learner sees the same reward stream seed (common random numbers; comparisons are
paired by repetition).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.algorithms.cpe import make_decision_class
from purebandits.experiments.base import Context, Experiment, Verdict
from purebandits.experiments.jlq17 import CPE_LEARNERS, NU, cpe_correct, cpe_gaps, cpe_learner, on_diagonal
from purebandits.instances import Gaussian, Instance, alpha_exponential, one_sparse
from purebandits.metrics import decision_gap, wilson_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: instance family -> the sorted best-K means with N = r^2, K = r (JLQ17 Sec. 5.1)
FAMILIES = {
    "1-sparse": lambda r: one_sparse(r * r, r).means,
    "0.3-exponential": lambda r: alpha_exponential(r * r, r, 0.3).means,
}
#: decision class label -> cpe.py spec for K_{r,r} / N = r^2 arms
CLASSES = {
    "matching": lambda r: {"class": "matching", "shape": [r, r]},
    "top-K": lambda r: {"class": "top_k"},
}
FAITHFUL, HEURISTIC, BASE = "lil'CLUCB (faithful)", "lil'CLUCB (heuristic)", "CLUCB"
#: one-sided normal quantile for "better beyond Monte Carlo noise" (about 97.7%)
Z = 2.0


def cpe_instance(family: str, r: int) -> Instance:
    """The ``family`` means (N = r^2, K = r) on the cells of K_{r,r}, diagonal best; Gaussian, variance 1/4."""
    mu = on_diagonal(FAMILIES[family](r), r)
    return Instance(f"jlq17_cpe:{family},r={r}", Gaussian(mu, 0.25), k=r,
                    description="JLQ17 Sec. 5 best-K family (K = r) on K_{r,r}, the K best on the diagonal")


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """One raw row per (class, family, r, learner, repetition): pulls, stopped, judged correct, value gap.

    Seeds ``ctx.seed + 300000 + 1000 f + j`` (family f, size index j), shared by classes and learners.
    """
    rows: list[dict[str, Any]] = []
    for fi, family in enumerate(FAMILIES):
        for j, r in enumerate(settings["sizes"]):
            inst = cpe_instance(family, r)
            mu = inst.means
            for cls, spec_of in CLASSES.items():
                spec = spec_of(r)
                dec = make_decision_class(spec, inst.n_arms, r)
                gaps = cpe_gaps(dec, mu)
                if not (gaps > 0).all():
                    raise ValueError(f"{inst.name}: the {cls} optimum is not unique")
                opt = np.flatnonzero(dec.oracle(mu))
                hard = float(np.sum(gaps[np.isfinite(gaps)] ** -2.0))
                # the compiled CPE kernel covers top-K only: other classes run the ask/tell loop
                driver = "auto" if spec["class"] == "top_k" else "reference"
                for label in CPE_LEARNERS:
                    res = ctx.simulate(cpe_learner(label, spec, r), inst, settings["reps"],
                                       seed=ctx.seed + 300000 + 1000 * fi + j, max_pulls=settings["max_pulls"],
                                       driver=driver)
                    ok = cpe_correct(dec, mu, res.recommended)
                    lost = decision_gap([[a for a in row if a >= 0] for row in res.recommended], mu, opt)
                    for rep in range(res.reps):
                        rows.append({"decision": cls, "instance": family, "r": r, "N": inst.n_arms, "K": r,
                                     "width": dec.width, "H": hard, "learner": label, "rep": rep,
                                     "pulls": int(res.pulls[rep]), "stopped": bool(res.stopped[rep]),
                                     "correct": bool(ok[rep]), "value_gap": float(lost[rep])})
    return pd.DataFrame(rows)


def paired_ratio(base: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """``mean(base)/mean(other)`` over repetitions paired by seed and its delta-method standard error
    ``sd(base_i - R other_i) / (sqrt(n) mean(other))`` (NaN with fewer than two pairs)."""
    b, o = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    ratio = float(b.mean() / o.mean())
    if b.size < 2:
        return ratio, math.nan
    return ratio, float(np.std(b - ratio * o, ddof=1) / (math.sqrt(b.size) * o.mean()))


def cell_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (class, family, N): mean pulls of the three learners, CLUCB / lil'CLUCB ratios (paired by repetition)
    with their standard errors, wrong answers and capped runs."""
    out = []
    for (cls, family, n), g in df.groupby(["decision", "instance", "N"], sort=False):
        pulls = g.pivot(index="rep", columns="learner", values="pulls")
        row: dict[str, Any] = {"decision": cls, "instance": family, "N": int(n), "width": int(g["width"].iloc[0]),
                               "H": round(float(g["H"].iloc[0]), 1), "reps": int(len(pulls))}
        for label in CPE_LEARNERS:
            row[label] = round(float(pulls[label].mean())) if label in pulls else math.nan
        for label, short in ((FAITHFUL, "faithful"), (HEURISTIC, "heuristic")):
            if label in pulls and BASE in pulls:
                both = pulls[[BASE, label]].dropna()
                ratio, se = paired_ratio(both[BASE].to_numpy(), both[label].to_numpy())
            else:
                ratio, se = math.nan, math.nan
            row[f"CLUCB/{short}"], row[f"se {short}"] = round(ratio, 3), round(se, 3)
        row["wrong"] = int((~g["correct"].astype(bool)).sum())
        row["capped"] = int((~g["stopped"].astype(bool)).sum())
        out.append(row)
    return pd.DataFrame(out)


def plot(df: pd.DataFrame) -> Figure:
    """Top: mean samples vs N (log-log, +-1 SE) per (class, family); bottom: CLUCB / lil'CLUCB with +-2 SE."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    table = cell_table(df)
    panels = list(dict.fromkeys(zip(table["decision"], table["instance"], strict=True)))
    fig, axes = plt.subplots(2, len(panels), figsize=(3.4 * len(panels), 5.8), squeeze=False)
    for c, (cls, family) in enumerate(panels):
        sel = df[(df["decision"] == cls) & (df["instance"] == family)]
        t = table[(table["decision"] == cls) & (table["instance"] == family)].sort_values("N")
        ax = axes[0][c]
        for i, label in enumerate(CPE_LEARNERS):
            s = sel[sel["learner"] == label].groupby("N")["pulls"].agg(["mean", "sem"]).sort_index()
            ax.errorbar(s.index, s["mean"], yerr=s["sem"].fillna(0.0), fmt="-o", ms=3, color=f"C{i}", label=label)
        ax.set_yscale("log")
        ax.set_title(f"{cls}, {family}", fontsize=8)
        ax = axes[1][c]
        for i, short in enumerate(("faithful", "heuristic")):
            ax.errorbar(t["N"], t[f"CLUCB/{short}"], yerr=Z * t[f"se {short}"].fillna(0.0), fmt="-o", ms=3,
                        color=f"C{i}", label=f"CLUCB / lil'CLUCB ({short})")
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
        ax.set_xlabel("number of arms N = r^2")
        for a in axes[:, c]:
            a.set_xscale("log")
            a.set_xticks(list(t["N"]), [str(n) for n in t["N"]])
            a.xaxis.set_minor_formatter(NullFormatter())
        if c == 0:
            axes[0][c].set_ylabel("samples")
            ax.set_ylabel("CLUCB / lil'CLUCB samples")
    axes[0][0].legend(fontsize=6)
    axes[1][0].legend(fontsize=6)
    fig.suptitle("JLQ17 Thm 4.2 (no CPE figure in the paper): lil'CLUCB vs CLUCB, nu = 0.01, +-2 SE paired", fontsize=9)
    fig.tight_layout()
    return fig


def assess(df: pd.DataFrame) -> Verdict:
    """Three criteria, with Monte Carlo tolerances (paired by seed, Z = 2 standard errors):

    1. fewer: in every (class, family, N) cell both lil'CLUCB versions take fewer samples than CLUCB,
       ``CLUCB/lil - 1 > Z se``;
    2. grows: per (class, family), the faithful ratio at the largest N exceeds the one at the smallest N by more
       than ``Z sqrt(se_lo^2 + se_hi^2)`` (the sizes use independent seeds);
    3. errors: no learner's error rate in a cell is significantly above nu (Wilson 95% lower bound <= nu).

    "holds" when all three hold; "does not hold" when neither lil'CLUCB version is better in any cell; "partly"
    otherwise.
    """
    table = cell_table(df)
    better = {short: (table[f"CLUCB/{short}"] - 1.0) > Z * table[f"se {short}"].fillna(math.inf)
              for short in ("faithful", "heuristic")}
    fewer = better["faithful"] & better["heuristic"]
    grow = []
    for _, g in table.groupby(["decision", "instance"], sort=False):
        g = g.sort_values("N")
        lo, hi = g.iloc[0], g.iloc[-1]
        tol = Z * math.hypot(lo["se faithful"], hi["se faithful"])
        grow.append(len(g) > 1 and bool(hi["CLUCB/faithful"] - lo["CLUCB/faithful"] > tol))
    err_bad = []
    for _, g in df.groupby(["decision", "instance", "N", "learner"], sort=False):
        wrong = int((~g["correct"].astype(bool)).sum())
        err_bad.append(wilson_interval(wrong, len(g))[0] > NU)
    wrong, runs = int(table["wrong"].sum()), len(df)
    crit = [bool(fewer.all()), all(grow), not any(err_bad)]
    if all(crit):
        status = "holds"
    elif not (better["faithful"] | better["heuristic"]).any():
        status = "does not hold"
    else:
        status = "partly"
    fr = table["CLUCB/faithful"]
    hr = table["CLUCB/heuristic"]
    summary = (f"lil'CLUCB takes fewer samples than CLUCB beyond {Z:g} paired standard errors in "
               f"{int(better['faithful'].sum())}/{len(fewer)} (class, instance, N) cells (faithful) and "
               f"{int(better['heuristic'].sum())}/{len(fewer)} (heuristic); CLUCB/lil'CLUCB ratio "
               f"{fr.min():.2f}-{fr.max():.2f} (faithful) and {hr.min():.2f}-{hr.max():.2f} (heuristic). The faithful "
               f"ratio grows from the smallest to the largest N beyond {Z:g} SE in {sum(grow)}/{len(grow)} "
               f"(class, instance) series. Wrong decisions (judged against Oracle(mu)): {wrong} of {runs} runs; "
               f"cells with an error rate significantly above nu = {NU:g}: {sum(err_bad)}; capped runs: "
               f"{int(table['capped'].sum())}.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="jlq17_cpe",
    paper="Jiang, Li, Qiao (2017)",
    artefact="Theorem 4.2 (Sec. 4.2, App. E; no figure)",
    title="generalised lil'CLUCB vs CLUCB on perfect matchings of K_{r,r} and top-K (CPE)",
    claim=("\"The generalized version of lil'CLUCB has a better theoretical guarantee than the CLUCB algorithm "
           "[CLK+14].\" Theorem 4.2: O(width(M)^2 sigma^2 sum_i Delta_i^-2 (log delta^-1 + log N + log log "
           "Delta_i^-1)) samples, which \"improves the previous O(width(M)^2 sigma^2 H log(NH/delta)) upper bound in "
           "[CLK+14]. Note that the H log H term in the previous bound can be much larger than the sum_i Delta_i^-2 "
           "log log Delta_i^-1 term in our sample complexity bound\" (Sec. 4.2). The paper reports no CPE experiment; "
           "tested here is the bound's qualitative prediction: lil'CLUCB needs fewer samples than CLUCB, more so as "
           "the problem grows, at error <= nu = 0.01."),
    scales={
        "quick": {"sizes": [2, 4], "reps": 8, "max_pulls": 10**7},
        "paper": {"sizes": [3, 5, 7, 10], "reps": 100, "max_pulls": 10**7},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("No CPE experiment in JLQ17: instances, sizes and repetitions are ours. Arms are the cells of K_{r,r} "
           "(N = r^2) with JLQ17 Sec. 5's best-K means (K = r; 1-sparse and 0.3-exponential) laid on the diagonal "
           "(best) and the off-diagonal cells (row-major), so the diagonal is the unique best perfect matching and "
           "the unique top-K set: the two classes share arms and answer and differ in width (2r vs 2) and gaps "
           "(JLQ17 Sec. 4.2 Delta_i, column H = sum Delta_i^-2). Gaussian rewards, variance 1/4; nu = 0.01; "
           "r in {3, 5, 7, 10}, 100 runs per point. lil'CLUCB faithful: eps = 0.01, delta' from "
           "2 c_eps delta'^(1+eps)/N^eps = nu (both tails; JLQ17 Lemma D.1 counts one); heuristic: eps = 0, "
           "delta = nu; CLUCB: radius sigma sqrt(2 log(4 N t^3/nu)/T_i), one version. Answers are judged against "
           "Oracle(mu) on the true means (exact set; ties excluded by construction). Ratios CLUCB/lil'CLUCB are "
           "of mean samples over repetitions paired by seed, with delta-method standard errors; 'grows' compares "
           "the faithful ratio at the smallest and the largest N (the theorem's versions); the heuristic ratio is "
           "shown, not judged for growth."),
)
