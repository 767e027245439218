"""AT-LUCB (Jun and Nowak, ICML 2016) as the NSAR paper (Shahrampour and Tarokh 2017) uses it: the anytime
error curve on the NSAR academic setups.

ST17 includes AT-LUCB as "an anytime algorithm, i.e., it does not require a pre-assigned budget"
and reads it off at the fixed budget T = ceil(H_1^(M)) (Fig. 2). Here the same learner
(delta_1 = 0.5, alpha = 0.99, eps = 0: ``st17.AT_LUCB_PARAMS``, ALGORITHMS.md 11) runs for
``horizon`` x T pulls on K = 50 Bernoulli arms (``nsar_setup``) and its recommendation J(t) is
judged at log-spaced checkpoints (and at T): P(J(t) != top-M set) with a 95% Wilson interval.
The baseline is uniform sampling read at the same checkpoints: UNI with budget horizon x T hands
its pulls out round-robin, so at every t it is uniform allocation of t pulls with the empirical
top M as its answer.

Ties. With few Bernoulli samples equal empirical means are common and both learners break ties by
the lower index. So that ties cannot produce the claimed advantage, AT-LUCB sees the arms listed by
increasing mean (``tnm17.ascending``: every tie at the M-th place goes against it) and uniform
sampling sees them by decreasing mean (every tie goes its way). Correctness is by value, as in
ST17 Fig. 2.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.experiments.st17 import AT_LUCB_PARAMS
from purebandits.experiments.tnm17 import ascending, log_grid
from purebandits.instances import Instance, custom, hardness, nsar_setup
from purebandits.metrics import wilson_interval
from purebandits.registry import make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LEVEL = 0.1  # report the samples at which P(error) first falls to this level


def curve(res: Any, base: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per checkpoint: errors of the recommended set, rate and 95% Wilson interval."""
    rows = []
    wrong = (~res.ckpt_correct).sum(axis=0)
    for c, x in zip(res.checkpoints, wrong, strict=True):
        lo, hi = wilson_interval(int(x), res.reps)
        rows.append({**base, "samples": int(c), "errors": int(x), "runs": res.reps, "p_err": x / res.reps,
                     "ci_low": lo, "ci_high": hi})
    return rows


def descending(instance: Instance) -> Instance:
    """The same Bernoulli arms listed by decreasing mean (lower-index tie breaks then favour the top arms)."""
    inst = custom(np.sort(instance.means)[::-1], k=instance.k, model="bernoulli")
    return Instance(f"{instance.name} (descending)", inst.model, instance.k, instance.description)


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """AT-LUCB and round-robin uniform sampling per (setup, M), ``horizon`` x T pulls, checkpoints log-spaced from n
    plus T itself; seeds ``ctx.seed + 100000 setup + 10000 M`` (+1 for uniform)."""
    rows = []
    n = settings["n"]
    for setup, m in settings["configs"]:
        base = nsar_setup(setup, m, n=n)
        inst = ascending(base)
        budget = math.ceil(hardness(inst.means, m).H1_all)
        horizon = int(settings["horizon"] * budget)
        ckpts = sorted(set(log_grid(n, horizon, settings["points"])) | {budget})
        seed = ctx.seed + 100_000 * setup + 10_000 * m
        learners = [("AT-LUCB", make_learner("at_lucb", k=m, **AT_LUCB_PARAMS)),
                    ("uniform", make_learner("uniform_allocation", k=m, budget=horizon))]
        instances = [inst, descending(base)]
        for j, (label, learner) in enumerate(learners):
            res = ctx.simulate(learner, instances[j], settings["reps"], seed=seed + j, checkpoints=ckpts,
                               max_pulls=horizon)
            rows += curve(res, {"setup": setup, "M": m, "n": n, "T": budget, "algorithm": label, "seed": seed + j})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """One panel per (setup, M): P(wrong top-M set) vs samples (log x) with Wilson bands; the dashed line is ST17's
    budget T = ceil(H_1^(M))."""
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(zip(df["setup"], df["M"], strict=True)))
    cols = min(4, len(configs))
    rows = math.ceil(len(configs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, (s, m) in zip(axes.ravel(), configs, strict=False):
        g = df[(df["setup"] == s) & (df["M"] == m)]
        for i, (alg, h) in enumerate(g.groupby("algorithm", sort=False)):
            ax.semilogx(h["samples"], h["p_err"], "-", color=f"C{i}", label=alg)
            ax.fill_between(h["samples"], h["ci_low"], h["ci_high"], color=f"C{i}", alpha=0.2)
        ax.axvline(int(g["T"].iloc[0]), ls="--", color="0.5", lw=0.8)
        ax.set_title(f"setup {s}, M={m}, T={int(g['T'].iloc[0])}", fontsize=7)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("samples", fontsize=7)
        ax.set_ylabel("P(J(t) wrong)", fontsize=7)
    for ax in axes.ravel()[len(configs):]:
        ax.axis("off")
    axes[0][0].legend(fontsize=6)
    fig.suptitle("AT-LUCB (delta_1 = 0.5, alpha = 0.99, eps = 0) anytime error vs uniform, ST17 setups (95% Wilson)",
                 fontsize=8)
    fig.tight_layout()
    return fig


def first_below(g: pd.DataFrame, level: float = LEVEL) -> float:
    """First checkpoint at which the error rate is <= ``level`` (NaN if never)."""
    hit = g[g["p_err"] <= level]
    return float(hit["samples"].iloc[0]) if len(hit) else math.nan


def assess(df: pd.DataFrame) -> Verdict:
    """Per (setup, M), for AT-LUCB: (1) it keeps decreasing past ST17's budget T: the last checkpoint's (horizon x T)
    Wilson interval lies below the one at T;
    (2) it never rises significantly: no later checkpoint's interval lies wholly above an earlier one's; (3) it
    beats uniform sampling at ST17's budget T: AT-LUCB's interval lies wholly below uniform's there."""
    rows, checks = [], []
    for (s, m), g in df.groupby(["setup", "M"], sort=False):
        a = g[g["algorithm"] == "AT-LUCB"].sort_values("samples")
        u = g[g["algorithm"] == "uniform"].sort_values("samples")
        budget = int(g["T"].iloc[0])
        lo, hi = a["ci_low"].to_numpy(dtype=float), a["ci_high"].to_numpy(dtype=float)
        run_min_hi = np.minimum.accumulate(hi)  # the lowest upper bound seen so far
        rises = bool(len(a) >= 2 and np.any(lo[1:] > run_min_hi[:-1]))
        at_t, un_t = a[a["samples"] == budget], u[u["samples"] == budget]
        decreases = bool(len(at_t) and a["samples"].iloc[-1] > budget and hi[-1] < at_t["ci_low"].iloc[0])
        beats = bool(len(at_t) and len(un_t) and at_t["ci_high"].iloc[0] < un_t["ci_low"].iloc[0])
        checks += [decreases, not rises, beats]
        t_a, t_u = first_below(a), first_below(u)
        rows.append({"setup": s, "M": m, "T": budget, "runs": int(a["runs"].iloc[0]),
                     "AT-LUCB P(err) first": round(float(a["p_err"].iloc[0]), 4),
                     "AT-LUCB P(err) at T": round(float(at_t["p_err"].iloc[0]), 4) if len(at_t) else math.nan,
                     "uniform P(err) at T": round(float(un_t["p_err"].iloc[0]), 4) if len(un_t) else math.nan,
                     "AT-LUCB P(err) last": round(float(a["p_err"].iloc[-1]), 4),
                     "uniform P(err) last": round(float(u["p_err"].iloc[-1]), 4) if len(u) else math.nan,
                     "last samples": int(a["samples"].iloc[-1]),
                     f"AT-LUCB samples to <= {LEVEL:g}": "never" if math.isnan(t_a) else int(t_a),
                     f"uniform samples to <= {LEVEL:g}": "never" if math.isnan(t_u) else int(t_u),
                     "decreases": "yes" if decreases else "no", "significant rise": "yes" if rises else "no",
                     "beats uniform at T": "yes" if beats else "no"})
    table = pd.DataFrame(rows)
    n_ok = sum(checks)
    status = verdict_status(n_ok, len(checks))
    n_cfg = len(rows)
    summary = (f"AT-LUCB's error keeps decreasing significantly after ST17's budget T (at T vs at the last "
               f"checkpoint) in "
               f"{sum(r['decreases'] == 'yes' for r in rows)} of {n_cfg} (setup, M) configurations, rises "
               f"significantly between checkpoints in {sum(r['significant rise'] == 'yes' for r in rows)}, and is "
               f"below uniform sampling at ST17's budget T (disjoint 95% Wilson intervals) in "
               f"{sum(r['beats uniform at T'] == 'yes' for r in rows)}. At T: "
               + "; ".join(f"setup {r['setup']} M={r['M']}: {r['AT-LUCB P(err) at T']:.3f} vs uniform "
                           f"{r['uniform P(err) at T']:.3f}" for r in rows)
               + f". {n_ok} of {len(checks)} checks hold.")
    return Verdict(status, summary, table)


CONFIGS_PAPER = [[1, 2], [1, 4], [2, 2], [2, 4], [3, 2], [3, 4], [4, 2], [4, 4], [5, 2], [6, 2], [6, 4]]

EXPERIMENT = Experiment(
    name="st17_atlucb_anytime",
    paper="Jun and Nowak (ICML 2016), as used by Shahrampour and Tarokh (2017)",
    artefact="AT-LUCB anytime error curve (ST17 Sec. II/IV baseline)",
    title="P(recommended top-M set wrong) vs samples for AT-LUCB and uniform sampling on the NSAR setups",
    claim=("ST17 Sec. II: 'AT-LUCB [19] is an anytime algorithm, i.e., it does not require a pre-assigned budget. In "
           "that sense, AT-LUCB is more powerful compared to algorithms designed specifically for the fixed-budget "
           "setting'; ALGORITHMS.md 11 (Jun and Nowak's guarantee): 'anytime Explore-m; P(J(t) wrong) decays with "
           "t'. ST17 Fig. 2: UNI is always the worst of the bars, AT-LUCB among them."),
    scales={"quick": {"n": 50, "configs": [[1, 2], [6, 2]], "reps": 40, "horizon": 2, "points": 8},
            "paper": {"n": 50, "configs": CONFIGS_PAPER, "reps": 4000, "horizon": 4, "points": 20}},
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("AT-LUCB with ST17's 'as instructed' parameters delta_1 = 0.5, alpha = 0.99, eps = 0 (taken from "
           "reimplementations, ALGORITHMS.md 11); with eps = 0 it never stops, so every run lasts horizon x T pulls "
           "(4 T at paper scale) and J(t) is read at every checkpoint. Setup 5 with M = 4 is left out: its Beta(5, 5) "
           "draw has a near tie at the M-th place, so T is about 10^7 and the curve would cost hours. 'Decreases' "
           "compares the error at T with the error at the last checkpoint (an anytime learner keeps improving after "
           "any budget it could have been given); a 'significant rise' is a checkpoint whose Wilson "
           "interval lies wholly above the lowest upper bound seen before it; runs are 4000 as in ST17 Fig. 2. "
           "Uniform sampling is UNI with the whole horizon as budget, read at each checkpoint (round-robin). Tie "
           "breaks are set against AT-LUCB and for uniform (arm order; module docstring), so the comparison "
           "is conservative. 'Samples to <= 0.1' is the first checkpoint at which the error rate is at most 0.1."),
)
