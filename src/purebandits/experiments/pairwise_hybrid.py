"""Beyond the papers (issue 39): ratings alone, comparisons alone, and ratings then comparisons, to the right winner.

NEXT ran the caption contest with ratings and, on a few contests' top 25, with comparisons ("which caption is
funnier?"); its history argues for a hybrid: ratings to narrow thousands down to a few, comparisons among those.
On a bundled contest's top ``top`` captions (``k = 1``, error ``delta = 0.05`` for every approach), with the
service's default learner (KL-RandLUCB, per-arm bounds at the Krichevsky-Trofimov level, error <= 2 x its delta,
so it is given delta / 2 wherever a stage is to err with probability at most delta):

- **ratings alone**: KL-RandLUCB with K_inf bounds (``form="kinf"``, the service's default) on the ratings
  {0, 1/2, 1}; its target is the caption with the highest **mean rating**.
- **comparisons alone**: the same learner on the Borda reduction (:mod:`purebandits.pairwise`: the arm is compared
  with a uniformly drawn other caption, reward 1 if it wins), whose arms are exactly Bernoulli(Borda score), with
  Bernoulli-KL bounds (``form="kt"``); its target is the **Borda winner** of the ``top`` captions.
- **hybrid**: stage 1 runs the ratings learner at ``k = m`` until it stops (its top m settled) or ``max_pulls``
  ratings; stage 2 runs the comparisons learner on the Borda reduction among the m it reports. The error budget
  is split evenly: each stage at ``delta / 2`` (so each learner at ``delta / 4``); by a union bound the hybrid
  errs with probability at most delta against its target, the **Borda winner among the true top m by mean
  rating** (stage 1 returns exactly that set with probability >= 1 - delta/2, and given that set stage 2 finds
  its Borda winner with probability >= 1 - delta/2).
- **hybrid at a ratings budget** (not proven): stage 1 stops at ``ratings_budget`` ratings and hands its current
  top m to the same stage 2; measured against the hybrid's target.

A comparison is simulated from the two captions' vote shares (:func:`purebandits.pairwise.rating_preferences`:
two independent ratings, the higher wins, ties split). Under that model one comparison is a function of two
ratings, so it carries no more information than two ratings: the model is the pessimistic one for comparisons,
and real raters may discriminate better side by side. Every answer (a rating or a comparison) counts as one.

Arms are put in a seeded random order (the bundled files list captions best first, and learners break ties by the
lower index). Seeds: ``ctx.seed + 390000`` (order), ``+ 390100`` (ratings), ``+ 390200`` (comparisons),
``+ 390300`` (hybrid stage 1), ``+ 390400 + 10 b`` (the budget hybrid's stage 1, budget b), and stage 2 of each
shortlist g ``+ 391000 + 10 g`` (+ 5 for the budget hybrid).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.experiments.contests import top_m_contest
from purebandits.instances import Categorical, Instance
from purebandits.metrics import wilson_interval
from purebandits.pairwise import borda_arms, borda_scores, rating_preferences
from purebandits.registry import get_learner_class, make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DELTA = 0.05
RATINGS, COMPARISONS, HYBRID, HYBRID_BUDGET = "ratings alone", "comparisons alone", "hybrid", "hybrid at a budget"
#: the approaches with a proven error <= DELTA (the budget hybrid's stage 1 promises nothing)
PROVEN = (RATINGS, COMPARISONS, HYBRID)
RATINGS_PARAMS: dict[str, Any] = {"form": "kinf"}  # the service's default (service/validation.py DEFAULT_PARAMS)
COMPARISONS_PARAMS: dict[str, Any] = {"form": "kt"}  # Bernoulli arms: K_inf on {0, 1} is the Bernoulli KL


def learner(params: dict[str, Any], error: float, k: int = 1) -> Any:
    """KL-RandLUCB with ``params`` at top-``k``, given ``error / error_factor`` so it errs with probability <= error."""
    factor = get_learner_class("kl_rand_lucb").error_factor(params)
    return make_learner("kl_rand_lucb", k=k, delta=error / factor, **params)


def contest_cell(contest: str, top: int, seed: int) -> tuple[Instance, np.ndarray]:
    """The contest's top ``top`` captions in a seeded random order, and their preference matrix."""
    base = top_m_contest(contest, top, 1)
    order = np.random.default_rng(seed).permutation(base.n_arms)
    model = Categorical(base.model.probabilities[order], base.model.values)
    inst = Instance(base.name, model, 1, f"{base.description} (arms in a random order, seed {seed})")
    return inst, rating_preferences(model.probabilities, model.values)


def targets(means: np.ndarray, P: np.ndarray, m: int) -> dict[str, Any]:
    """Each approach's target: the mean-rating winner, the Borda winner, the Borda winner among the true top m
    (ties by the lower index); the true top m; and the gaps that make each hard."""
    top_m = np.lexsort((np.arange(means.size), -means))[:m]
    b = borda_scores(P)
    sub = np.sort(top_m)
    bm = borda_scores(P[np.ix_(sub, sub)])
    ms, bs, bms = np.sort(means)[::-1], np.sort(b)[::-1], np.sort(bm)[::-1]
    return {"mean_winner": int(np.argmax(means)), "borda_winner": int(np.argmax(b)),
            "hybrid_winner": int(sub[np.argmax(bm)]), "top_m": sub,
            "mean_gap": float(ms[0] - ms[1]), "borda_gap": float(bs[0] - bs[1]),
            "top_m_borda_gap": float(bms[0] - bms[1]),
            "boundary_gap": float(ms[m - 1] - ms[m])}


def _stage2(ctx: Context, P: np.ndarray, shortlists: np.ndarray, seed: int, max_pulls: int,
            reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Comparisons among each run's shortlist: per run the comparisons, whether it stopped, and the winner.

    Runs with the same shortlist are simulated together (one call per distinct shortlist, in order of first use).
    """
    pulls, stopped, winner = np.zeros(reps, np.int64), np.zeros(reps, bool), np.zeros(reps, np.int64)
    keys = [tuple(sorted(int(a) for a in s)) for s in shortlists]
    for g, key in enumerate(dict.fromkeys(keys)):
        runs = [r for r, k in enumerate(keys) if k == key]
        S = np.array(key)
        res = ctx.simulate(learner(COMPARISONS_PARAMS, DELTA / 2), borda_arms(P[np.ix_(S, S)]), len(runs),
                           seed=seed + 10 * g, max_pulls=max_pulls)
        pulls[runs], stopped[runs], winner[runs] = res.pulls, res.stopped, S[res.recommended[:, 0]]
    return pulls, stopped, winner


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """One row per (approach, run): ratings, comparisons, answers, stopped, the winner reported, its target, correct."""
    reps, m, cap, s0 = settings["reps"], settings["m"], settings["max_pulls"], ctx.seed
    inst, P = contest_cell(str(settings["contest"]), settings["top"], s0 + 390000)
    t = targets(inst.means, P, m)
    cell = f"contest {settings['contest']}, top {settings['top']}"
    rows: list[dict[str, Any]] = []

    def add(approach: str, ratings: np.ndarray, comparisons: np.ndarray, stopped: np.ndarray, winner: np.ndarray,
            target: int, stage1_stopped: np.ndarray | None = None) -> None:
        for r in range(reps):
            rows.append({"cell": cell, "approach": approach, "m": m if approach.startswith(HYBRID) else 0,
                         "run": r, "ratings": int(ratings[r]), "comparisons": int(comparisons[r]),
                         "answers": int(ratings[r] + comparisons[r]), "stopped": bool(stopped[r]),
                         "stage1_settled": bool(stage1_stopped[r]) if stage1_stopped is not None else True,
                         "winner": int(winner[r]), "target": target, "correct": bool(winner[r] == target),
                         "mean_winner": t["mean_winner"], "borda_winner": t["borda_winner"],
                         "hybrid_winner": t["hybrid_winner"], "mean_gap": t["mean_gap"], "borda_gap": t["borda_gap"],
                         "top_m_borda_gap": t["top_m_borda_gap"], "boundary_gap": t["boundary_gap"]})

    zero = np.zeros(reps, np.int64)
    res = ctx.simulate(learner(RATINGS_PARAMS, DELTA), inst, reps, seed=s0 + 390100, max_pulls=cap)
    add(RATINGS, res.pulls, zero, res.stopped, res.recommended[:, 0], t["mean_winner"])
    res = ctx.simulate(learner(COMPARISONS_PARAMS, DELTA), borda_arms(P), reps, seed=s0 + 390200, max_pulls=cap)
    add(COMPARISONS, zero, res.pulls, res.stopped, res.recommended[:, 0], t["borda_winner"])
    stage1 = Instance(inst.name, inst.model, m, inst.description)
    for label, budget, seed in [(HYBRID, cap, s0 + 390300)] + [
            (HYBRID_BUDGET, b, s0 + 390400 + 10 * i) for i, b in enumerate(settings["ratings_budgets"])]:
        res = ctx.simulate(learner(RATINGS_PARAMS, DELTA / 2, k=m), stage1, reps, seed=seed, max_pulls=budget)
        c, stop2, win = _stage2(ctx, P, res.recommended, s0 + 391000 + (5 if label == HYBRID_BUDGET else 0), cap, reps)
        stopped = stop2 & (res.stopped if label == HYBRID else True)
        add(label if label == HYBRID else f"{HYBRID_BUDGET} ({budget:,} ratings)", res.pulls, c, stopped, win,
            t["hybrid_winner"], res.stopped)
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per approach: runs, mean answers (ratings + comparisons) with 2 sem, stopped runs, errors with a Wilson
    95 % interval, and the target."""
    out = []
    for approach, g in df.groupby("approach", sort=False):
        n, errors = len(g), int((~g["correct"]).sum())
        lo, hi = wilson_interval(errors, n)
        target = {RATINGS: "mean-rating winner", COMPARISONS: "Borda winner"}.get(
            str(approach), f"Borda winner of the true top {int(g['m'].iloc[0])}")
        out.append({"approach": approach, "target": target, "runs": n, "ratings": float(g["ratings"].mean()),
                    "comparisons": float(g["comparisons"].mean()), "answers": float(g["answers"].mean()),
                    "answers_2sem": 2 * float(g["answers"].std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
                    "stopped": int(g["stopped"].sum()), "stage1_settled": int(g["stage1_settled"].sum()),
                    "errors": errors, "error_rate": errors / n, "error_ci_low": lo, "error_ci_high": hi,
                    "proven": approach in PROVEN})
    return pd.DataFrame(out)


def assess(df: pd.DataFrame) -> Verdict:
    """Two checks: every proven approach stops in every run with errors consistent with delta against its own target
    (Wilson 95 % lower bound <= delta); and NEXT's argument, the hybrid needs fewer answers than ratings alone."""
    s = summarise(df)
    r0 = df.iloc[0]
    proven = s[s["proven"]]
    guaranteed = bool(((proven["stopped"] == proven["runs"]) & (proven["error_ci_low"] <= DELTA)).all())
    by = s.set_index("approach")
    hybrid_fewer = bool(by.loc[HYBRID, "answers"] < by.loc[RATINGS, "answers"])
    differ = int(r0["mean_winner"]) != int(r0["borda_winner"])
    table = s.copy()
    for c in ("ratings", "comparisons", "answers", "answers_2sem"):
        table[c] = [int(round(v)) if math.isfinite(v) else v for v in table[c]]
    for c in ("error_rate", "error_ci_low", "error_ci_high"):
        table[c] = table[c].round(3)
    ratio = by.loc[HYBRID, "answers"] / by.loc[RATINGS, "answers"]
    cratio = by.loc[COMPARISONS, "answers"] / by.loc[RATINGS, "answers"]
    summary = (
        f"{r0['cell']}, k = 1, delta = {DELTA}. Targets: the mean-rating winner is caption {int(r0['mean_winner'])}, "
        f"the Borda winner caption {int(r0['borda_winner'])} ({'they differ' if differ else 'the same caption'}), "
        f"the Borda winner of the true top {int(df['m'].max())} caption {int(r0['hybrid_winner'])}; gaps: mean "
        f"{r0['mean_gap']:.4f}, Borda {r0['borda_gap']:.4f}, Borda within the top m {r0['top_m_borda_gap']:.4f}, "
        f"mean at the top-m boundary {r0['boundary_gap']:.4f}. "
        "(1) Proven approaches stopped in every run with errors consistent with delta: "
        f"{'yes' if guaranteed else 'no'} "
        + "(" + "; ".join(f"{a}: {int(x['errors'])} of {int(x['runs'])} wrong, {int(x['stopped'])} stopped"
                          for a, x in by.iterrows()) + "). "
        f"(2) The hybrid needs fewer answers than ratings alone: {'yes' if hybrid_fewer else 'no'} "
        f"({by.loc[HYBRID, 'answers']:,.0f} = {by.loc[HYBRID, 'ratings']:,.0f} ratings + "
        f"{by.loc[HYBRID, 'comparisons']:,.0f} comparisons, {ratio:.2f} times ratings alone's "
        f"{by.loc[RATINGS, 'answers']:,.0f}; comparisons alone {cratio:.2f} times). Comparisons are simulated as two "
        "independent ratings compared (ties split), so one carries no more information than two ratings.")
    return Verdict(verdict_status(int(guaranteed) + int(hybrid_fewer), 2), summary, table)


def plot(df: pd.DataFrame) -> Figure:
    """Mean answers per approach, ratings and comparisons stacked (2 sem on the total), with the error rate."""
    import matplotlib.pyplot as plt

    s = summarise(df)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    x = np.arange(len(s))
    ax.bar(x, s["ratings"], color="C0", label="ratings")
    ax.bar(x, s["comparisons"], bottom=s["ratings"], color="C1", label="comparisons")
    ax.errorbar(x, s["answers"], yerr=s["answers_2sem"], fmt="none", color="k", capsize=3)
    top = (s["answers"] + s["answers_2sem"].fillna(0.0)).to_numpy()
    for i, r in s.iterrows():
        ax.text(i, top[i] * 1.02, f"{int(r['errors'])}/{int(r['runs'])} wrong\nstopped {int(r['stopped'])}",
                ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [a.replace(" (", "\n(") for a in s["approach"]], fontsize=7)
    ax.set_ylabel("answers to stop (mean)")
    ax.set_ylim(0, float(top.max()) * 1.2)
    ax.legend(fontsize=8)
    ax.set_title(f"{df['cell'].iloc[0]}, k = 1, delta = {DELTA}: each approach against its own target", fontsize=9)
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="pairwise_hybrid",
    paper="Beyond the papers (issue 39; Borda reduction: Jamieson et al., AISTATS 2015)",
    artefact="ratings alone, comparisons alone, and ratings then comparisons on a caption contest's top 100",
    title="ratings, comparisons (Borda reduction) and the hybrid to the right winner",
    claim=("Issue 39, from NEXT's history: ratings to narrow the captions down to a few, then comparisons among "
           "those, reach the right winner with fewer answers than ratings alone; every proven approach keeps its "
           "error at most delta = 0.05 against its own target."),
    scales={
        "quick": {"contest": "512", "top": 20, "m": 3, "reps": 4, "max_pulls": 2_000_000,
                  "ratings_budgets": [2_000]},
        "paper": {"contest": "558", "top": 100, "m": 10, "reps": 40, "max_pulls": 20_000_000,
                  "ratings_budgets": [100_000]},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("The hybrid's stage 1 is top-m identification: it must settle the m-th against the (m + 1)-th caption "
           "by mean, which on a contest's top can cost more than finding the winner itself; the budget hybrid "
           "skips that and has no proof. Stage 2's shortlists are grouped: runs with the same shortlist are one "
           "simulator call."),
)
