"""lil-KLUCB paper (Tanczos, Nowak, Mankoff 2017), Table 1: growth of S_KL versus S_SG.

``S_KL = sum_{i>=2} 1/D*(mu_i, mu_1)`` (Chernoff information) and ``S_SG = sum_{i>=2} 1/Delta_i^2``
for gaps ``Delta_i = (i/n)^alpha`` with ``mu_1 = 1`` (the paper's example), computed exactly for
a grid of n. The claim is the order of growth in each alpha regime; we check it by the
log-log slope of ``S / predicted`` over the last decade of n (0 means the predicted order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from purebandits.bounds import chernoff_information
from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: alpha -> (predicted S_KL, predicted S_SG) as functions of n, and their labels (Table 1)
REGIMES = {
    0.25: (lambda n: n, lambda n: n, "n", "n"),
    0.5: (lambda n: n, lambda n: n * math.log(n), "n", "n log n"),
    0.75: (lambda n: n, lambda n: n ** 1.5, "n", "n^(2 alpha)"),
    1.0: (lambda n: n * math.log(n), lambda n: n**2, "n log n", "n^2"),
    1.5: (lambda n: n**1.5, lambda n: n**3, "n^alpha", "n^(2 alpha)"),
}
TOLERANCE = 0.1  # |slope of log(S/predicted)| accepted as "the predicted order"


def sums(n: int, alpha: float) -> tuple[float, float]:
    """(S_KL, S_SG) for n gaps Delta_i = (i/n)^alpha, i = 1..n, with mu_1 = 1."""
    gaps = (np.arange(1, n + 1) / n) ** alpha
    d_star = chernoff_information(1.0 - gaps, 1.0)
    return float(np.sum(1.0 / d_star)), float(np.sum(gaps**-2.0))


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """S_KL, S_SG and their ratios to Table 1's predicted orders for every alpha regime and n (exact sums, no
    simulation)."""
    rows = []
    for alpha, (g_kl, g_sg, l_kl, l_sg) in REGIMES.items():
        for n in settings["ns"]:
            s_kl, s_sg = sums(n, alpha)
            rows.append({"alpha": alpha, "n": n, "S_KL": s_kl, "S_SG": s_sg,
                         "S_KL/pred": s_kl / g_kl(n), "S_SG/pred": s_sg / g_sg(n),
                         "pred_KL": l_kl, "pred_SG": l_sg})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """S_KL (solid) and S_SG (dashed) vs n on log-log axes, one colour per alpha."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (alpha, g) in enumerate(df.groupby("alpha")):
        c = f"C{i}"
        ax.loglog(g["n"], g["S_KL"], "-o", color=c, ms=3, label=f"alpha={alpha} KL")
        ax.loglog(g["n"], g["S_SG"], "--", color=c, label=f"alpha={alpha} SG")
    ax.set_xlabel("n")
    ax.set_ylabel("sum")
    ax.set_title("S_KL (solid) vs S_SG (dashed), Delta_i=(i/n)^alpha")
    ax.legend(fontsize=6, ncol=2)
    return fig


def _slope(g: pd.DataFrame, col: str) -> float:
    last = g.sort_values("n").tail(2)
    n0, n1 = last["n"].to_numpy(dtype=float)
    r0, r1 = last[col].to_numpy(dtype=float)
    return math.log(r1 / r0) / math.log(n1 / n0)


def assess(df: pd.DataFrame) -> Verdict:
    """An alpha regime matches when S_KL / pred and S_SG / pred both have |log-log slope| < ``TOLERANCE``
    between the two largest n."""
    rows = []
    ok = 0
    for alpha, g in df.groupby("alpha"):
        s_kl, s_sg = _slope(g, "S_KL/pred"), _slope(g, "S_SG/pred")
        ratio = g.sort_values("n").iloc[-1]
        good = abs(s_kl) < TOLERANCE and abs(s_sg) < TOLERANCE
        ok += good
        rows.append({"alpha": alpha, "S_KL order": g["pred_KL"].iloc[0], "slope(S_KL/pred)": round(s_kl, 3),
                     "S_SG order": g["pred_SG"].iloc[0], "slope(S_SG/pred)": round(s_sg, 3),
                     f"S_SG/S_KL at n={int(ratio['n'])}": round(ratio["S_SG"] / ratio["S_KL"], 1),
                     "matches": "yes" if good else "no"})
    table = pd.DataFrame(rows)
    status = verdict_status(ok, len(rows))
    summary = (f"{ok} of {len(rows)} alpha regimes grow at the predicted orders for both sums "
               f"(|log-log slope of S/predicted| < {TOLERANCE} over the last decade of n).")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="tnm17_table1",
    paper="Tanczos, Nowak, Mankoff (NIPS 2017)",
    artefact="Table 1",
    title="S_KL versus S_SG for mean gaps Delta_i = (i/n)^alpha",
    claim=("S_KL vs S_SG grow as n vs n (alpha < 1/2), n vs n log n (alpha = 1/2), n vs n^(2 alpha) "
           "(1/2 < alpha < 1), n log n vs n^2 (alpha = 1) and n^alpha vs n^(2 alpha) (alpha > 1)."),
    scales={"quick": {"ns": [100, 1000, 10000]}, "paper": {"ns": [100, 1000, 10000, 100000, 1000000]}},
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("mu_1 = 1 as in the paper's example, so D*(mu_i, 1) = -log(mu_i); computed with the general "
           "Chernoff-information routine. Representative alphas 0.25, 0.5, 0.75, 1, 1.5 stand for the five regimes."),
)
