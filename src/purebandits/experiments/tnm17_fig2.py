"""lil-KLUCB paper (Tanczos, Nowak, Mankoff, NIPS 2017), Figures 2 and 3: New Yorker contests 558 and 512.

Bootstrapped caption contests (``caption("558", reward="binary")``, ``caption("512", reward="binary")``:
each caption a Bernoulli arm with p = (funny + somewhat funny) / votes, i.e. a vote resampled from
the caption's votes and rewarded 1 unless it is "unfunny"), the lil-KLUCB sampling rule with [KL], [SG1],
[SG2] (N = 8, delta = 0.01) and Thompson sampling as in NEXT (``thompson_sampling`` with no
stopping rule, Beta posterior tempered by alpha = 2, recommending the empirical best; Fig. 3),
250 repetitions. Curve: P(best caption among the 5 empirically best) versus total samples, read
at checkpoints up to a fixed horizon (the runs are not run to their stopping time: with about
4000 captions that would take millions of samples). Arms are listed by increasing mean, so a tie
in the rank counts against the best caption (see :mod:`purebandits.experiments.tnm17_fig1`).

Reward mapping. The binary mapping gives the paper's best-caption means exactly from the bundled
summaries (558: 469/875 = 0.536, 512: 8/10 = 0.8); the graded one {0, 1/2, 1} (ALGORITHMS.md
14.2's reading) gives 0.384 and 0.625, so the data files are the paper's and the mapping was not.

Thompson sampling runs 250 times too: its pull is an exact posterior-argmax draw that does not
draw all 4,000 posteriors (:func:`purebandits.algorithms.thompson.ts_pick`, about 25 us per pull
instead of 0.3-1 ms), so 2 x 250 runs of 200,000 pulls take about an hour of CPU.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.experiments.tnm17 import ascending, curve_rows, log_grid, plot_curves, samples_to_level, select
from purebandits.instances import Instance, caption
from purebandits.registry import make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ALGORITHMS: list[tuple[str, str, dict[str, Any]]] = [
    ("KL", "lil_kl_ucb", {"bound": "kl"}),
    ("SG1", "lil_kl_ucb", {"bound": "sg1"}),
    ("SG2", "lil_kl_ucb", {"bound": "sg2"}),
    ("TH", "thompson_sampling", {"delta": None, "alpha": 2.0}),
]


#: the vote-to-reward map that gives the paper's mu_1 (558: 0.536, 512: 0.8); see the module docstring
REWARD = "binary"
#: the paper's best-caption means (TNM17 Figs. 2-3 captions)
PAPER_MU1 = {"558": 0.536, "512": 0.8}


def contest(name: str, subsample: int | None) -> Instance:
    """The contest with TNM17's binary rewards (funny or somewhat funny = 1) in increasing order of means;
    ``subsample`` keeps that many captions evenly spaced in rank, the best included (quick scale only)."""
    inst = ascending(caption(name, reward=REWARD), f"caption:{name},reward={REWARD} (ascending)")
    if not subsample or subsample >= inst.n_arms:
        return inst
    keep = np.unique(np.round(np.linspace(0, inst.n_arms - 1, subsample)).astype(int))
    return select(inst, keep, f"caption:{name},reward={REWARD} ({keep.size} of {inst.n_arms}, ascending)")


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """KL, SG1, SG2 (lil-KLUCB, N = 8) and Thompson sampling on each ascending contest up to ``horizon`` pulls:
    curve rows plus a summary row per algorithm (seeds ``ctx.seed + 50000 + 1000 i + j``)."""
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(settings["contests"]):
        inst = contest(name, settings.get("subsample"))
        ckpts = log_grid(inst.n_arms, settings["horizon"], settings["points"])
        for j, (label, alg, params) in enumerate(ALGORITHMS):
            seed = ctx.seed + 50_000 + 1000 * i + j
            kw = dict(params) if alg == "thompson_sampling" else {"delta": settings["delta"], "N": 8, **params}
            res = ctx.simulate(make_learner(alg, **kw), inst, settings["reps"], seed=seed, checkpoints=ckpts,
                               max_pulls=settings["horizon"])
            base = {"contest": name, "n": inst.n_arms, "mu_1": round(float(inst.means.max()), 4), "algorithm": label,
                    "seed": seed}
            rows += curve_rows(res, base)
            cur = (res.ckpt_best_rank < 5).mean(axis=0)
            rows.append({**base, "kind": "summary", "runs": res.reps, "horizon": settings["horizon"],
                         "stopped": int(res.stopped.sum()), "samples_to_90": samples_to_level(res.checkpoints, cur),
                         "samples_to_50": samples_to_level(res.checkpoints, cur, 0.5),
                         "mean_p_top5": float(cur.mean()), "final_p_top5": float(cur[-1])})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """TNM17 Figs. 2-3: P(best caption in top 5) vs samples, one panel per contest."""
    return plot_curves(df, "contest", "TNM17 Figs. 2-3: caption contests, P(best caption in top 5)")


def assess(df: pd.DataFrame) -> Verdict:
    """On each curve's mean height over the checkpoints: at 558 the three bounds within max(0.05, 2 s.e.), at 512
    KL above both SG bounds by more than that, and at both contests Thompson sampling below every bound."""
    s = df[df["kind"] == "summary"]
    rows = []
    checks = []
    for name, g in s.groupby("contest", sort=False):
        g = g.set_index("algorithm")
        auc = g["mean_p_top5"]
        bounds = auc[["KL", "SG1", "SG2"]]
        runs = int(g["runs"].max())
        # Monte Carlo noise of a mean of 0/1 curves: at most 1/(2 sqrt(runs)) per point; use 2 s.e.
        noise = 2 * 0.5 / math.sqrt(runs)
        spread = float(bounds.max() - bounds.min())
        kl_margin = float(auc["KL"] - max(auc["SG1"], auc["SG2"]))
        th_gap = float(bounds.min() - auc["TH"]) if "TH" in auc else math.nan
        if str(name) == "558":
            ok = spread <= max(noise, 0.05)
            claim = "bounds comparable"
        else:
            ok = kl_margin > max(noise, 0.05)
            claim = "KL clearly wins"
        th_ok = th_gap > 0
        checks += [ok, th_ok]
        rows.append({"contest": name, "n": int(g["n"].iloc[0]), "mu_1 (ours)": g["mu_1"].iloc[0],
                     "mu_1 (paper)": PAPER_MU1.get(str(name), math.nan), "claim": claim,
                     **{f"mean P {a}": round(float(auc.get(a, math.nan)), 3) for a in ("KL", "SG1", "SG2", "TH")},
                     **{f"samples to 0.9 {a}": (round(v) if not math.isnan(v) else "never")
                        for a, v in g["samples_to_90"].items()},
                     "claim holds": "yes" if ok else "no", "TS worse than every bound": "yes" if th_ok else "no"})
    table = pd.DataFrame(rows)
    n_ok = sum(checks)
    status = verdict_status(n_ok, len(checks))
    parts = []
    for r in rows:
        parts.append(f"contest {r['contest']} (mu_1 {r['mu_1 (ours)']}, paper {r['mu_1 (paper)']}): "
                     f"mean P(best in top 5) over the checkpoint grid KL {r['mean P KL']}, "
                     f"SG1 {r['mean P SG1']}, SG2 {r['mean P SG2']}, TS {r['mean P TH']} ({r['claim']}: "
                     f"{r['claim holds']}; TS worse: {r['TS worse than every bound']})")
    summary = "; ".join(parts) + f". {n_ok} of {len(checks)} checks hold."
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="tnm17_fig2",
    paper="Tanczos, Nowak, Mankoff (NIPS 2017)",
    artefact="Figures 2 and 3",
    title="P(best caption in the top 5) vs samples on contests 558 and 512, KL / SG1 / SG2 and Thompson sampling",
    claim=("'At the lower end of the spectrum [contest 558, mu_1 = 0.536], the three methods fair comparably ... "
           "in cases where the top mean is significantly larger than 0.5 [contest 512, mu_1 = 0.8] we see a marked "
           "improvement in the KL-based algorithm.' 'Thompson sampling seems to perform somewhat worse than the "
           "previous methods in these two instances.'"),
    scales={"quick": {"contests": ["558", "512"], "subsample": 150, "reps": 4, "delta": 0.01, "horizon": 3000,
                      "points": 8},
            "paper": {"contests": ["558", "512"], "subsample": None, "reps": 250, "delta": 0.01,
                      "horizon": 200_000, "points": 25}},
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("Rewards are binary, funny or somewhat funny = 1 and unfunny = 0 (caption(..., reward='binary')): with "
           "it the bundled summaries give the paper's mu_1 exactly, 0.536 = 469/875 (558, 3925 captions) and "
           "0.8 = 8/10 (512, 4399 captions; the best caption has only 10 votes). The graded mapping {0, 1/2, 1} "
           "gives 0.384 and 0.625 on the same files, so the data are the paper's and the graded mapping was a "
           "misreading. The horizon (200,000 samples, about 50 per caption) is "
           "our choice, the paper's x-axis range is not in the text. Quick scale keeps 150 captions evenly spaced "
           "in rank. "
           "'Comparable' means the three bounds' mean curve heights (over the log-spaced checkpoints) differ by "
           "at most max(0.05, 2 s.e.); 'KL clearly wins' that KL's exceeds both SG ones by more than that; 'TS "
           "worse' that TS's is below every bound's."),
)
