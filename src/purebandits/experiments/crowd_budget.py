"""The contest's real question: how right is the top of the ranking at a vote budget, under a crowd (issue 37)?

A New Yorker contest does not ask for a delta-correct stop: it has a vote budget (778,586 ratings on
average over contests 530-895, Zhang et al., NeurIPS 2024 Datasets and Benchmarks, Table 1) and the
editors read the top of the crowd's ranking. This experiment runs every learner the service offers,
and the systems that ran the contest (uniform sampling; NEXT's batched delayed UCB and KL-UCB; the
2024 system's UCB, :mod:`purebandits.algorithms.contest_systems`), on the bundled contests at full
size, driven by a crowd of raters (:mod:`purebandits.simulate.crowd`: sessions of distinct
captions, 32 participants at a time, answers arriving late), and measures the ranking the service
would show at each checkpoint (:func:`purebandits.metrics.ranking_quality`): P(reported best is
the true best), precision of the reported top 10 and top 25, Kendall tau of the top 25, and the
ratings from which the top 10 is exactly right in 90 % of the runs
(:func:`purebandits.metrics.ratings_until`).

Choices (stated in docs/REPRODUCTION.md with the results):

- **k.** Every learner with a top-k rule runs at ``k = 10`` (the editors' top ten), the others
  (lil'UCB, Successive Elimination, top-two) at k = 1 (their rule identifies one arm). The ranking
  measured is the same for all: the recommendation first, then the empirical means.
- **delta.** Every learner with a delta targets the service's default error 0.05: it gets
  ``0.05 / error_factor`` (the KL learners 0.025). For the contest systems delta only sets the
  intervals or, for NEXT, the index's log term.
- **Crowds.** ``default``: ``sessions=25,concurrency=32,batch=1`` (the simulator's default crowd);
  ``tired+careless``: the same with ``fatigue=1`` (P(unfunny) 0.638 -> 0.718 from the first to the fifth
  caption of a session, NEXT's contest 540) and 10 % careless raters (uniform labels).
- **Stopping.** A learner that stops before the budget keeps its ranking for the remaining
  checkpoints (a service would end the study there); the share of runs stopped by each checkpoint
  is in the CSV.
- **Arm order.** Each contest's captions are put in a seeded random order (:func:`shuffled`): the bundled
  files list them best first, and ties (broken by the lower index everywhere) would otherwise favour the
  truly better captions.
- **Contests.** ``settings["contests"]`` holds instance specs, so ``--set
  'contests=["caption:my_summary.csv"]'`` runs it on a user's own summary file.

Seeds: contest c and crowd g use ``ctx.seed + 370000 + 100 c + 10 g`` for every learner (common random
numbers: repetition r of every learner sees the same reward stream and crowd seeds).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict
from purebandits.registry import get_learner_class, make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from purebandits.instances import Instance

#: the error probability a learner with a delta targets: the service's DEFAULT_DELTA
TARGET_ERROR = 0.05
#: the mean ratings of a contest over contests 530-895 (Zhang et al. 2024, Table 1): the budget
CONTEST_RATINGS = 778_586
#: the service's default learner's label (service/validation.py DEFAULT_ALGORITHM, DEFAULT_PARAMS)
SERVICE_DEFAULT = "KL-RandLUCB"
#: the 2024 system's label, the goal's reference, and uniform sampling's
REFERENCE_2024, UNIFORM = "2024 UCB", "uniform"

#: label -> (registry name, parameters, has a proven delta-correct stop, contest system)
LEARNERS: dict[str, tuple[str, dict[str, Any], bool, bool]] = {
    SERVICE_DEFAULT: ("kl_rand_lucb", {"form": "kinf"}, True, False),
    "lil-KLUCB": ("lil_kl_ucb", {}, True, False),
    "lil'RandLUCB": ("lil_rand_lucb", {"preset": "faithful"}, True, False),
    "LUCB++": ("lucb_plus_plus", {"preset": "faithful"}, True, False),
    "Successive Elim.": ("successive_elimination", {}, True, False),
    "Top-two (GLR)": ("top_two", {"cost": "bernoulli", "threshold": "theory"}, True, False),
    "lil'UCB (heur.)": ("lil_ucb", {"preset": "heuristic"}, False, False),
    UNIFORM: ("random_sampling", {}, False, True),
    "NEXT UCB": ("next_ucb", {}, False, True),
    "NEXT KL-UCB": ("next_kl_ucb", {}, False, True),
    REFERENCE_2024: ("contest_ucb_2024", {}, False, True),
}

#: crowd label -> ``--crowd`` text
CROWDS = {"default": "sessions=25,concurrency=32,batch=1", "tired+careless": "fatigue=1,careless=0.1"}

#: the measures per checkpoint, as the CSV columns (means over the runs) and the share of runs whose top 10 is exact
MEASURES = ("top1_correct", "top10_precision", "top25_precision", "kendall25")


def learner(label: str, k: int) -> Any:
    """The learner ``label`` at ``k`` (k = 1 when it has no top-k rule), its delta targeting :data:`TARGET_ERROR`."""
    name, params, _, _ = LEARNERS[label]
    cls = get_learner_class(name)
    params = dict(params)
    if cls.tags.get("top_k", False) and "k" in cls._param_names():
        params["k"] = k
    if "delta" in cls._param_names():
        params["delta"] = TARGET_ERROR / cls.error_factor(params)
    return make_learner(name, **params)


def shuffled(instance: Instance, seed: int) -> Instance:
    """``instance`` with its arms in a seeded random order.

    The bundled contest files list the captions best first (Spearman correlation of position and mean -0.89 to
    -1.0), and every learner breaks ties by the lower arm index, as does the reported ranking: in file order a tie
    among captions rated equally often would pick the truly better ones, and an index learner would rate the best
    captions first. In a random order a tie says nothing about the truth, as in a contest whose captions arrive in
    submission order.
    """
    from purebandits.instances import Bernoulli, Categorical, Gaussian, Instance

    model = instance.model
    order = np.random.default_rng(seed).permutation(model.n_arms)
    if isinstance(model, Categorical):
        new = Categorical(model.probabilities[order], model.values)
    elif isinstance(model, Bernoulli):
        new = Bernoulli(model.means[order])
    elif isinstance(model, Gaussian):
        new = Gaussian(model.means[order], model.b[order] ** 2)
    else:
        raise TypeError(f"cannot reorder the arms of a {type(model).__name__} model")
    return Instance(instance.name, new, instance.k, f"{instance.description} (arms in a random order, seed {seed})")


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """One row per (contest, crowd, learner, checkpoint): the measures' means over the runs, the share of runs
    whose top 10 is exactly right and of runs stopped by then, and the ratings until the top 10 is right in 90 % of
    the runs (the same on every row of a curve)."""
    from purebandits.instances import make_instance
    from purebandits.simulate.crowd import parse_crowd

    budget = int(settings["budget"])
    checkpoints = np.unique(np.asarray([c for c in settings["checkpoints"] if c <= budget] + [budget], dtype=np.int64))
    rows = []
    for ci, spec in enumerate(settings["contests"]):
        inst = shuffled(make_instance(spec), ctx.seed + 370000 + 100 * ci)
        for gi, crowd_label in enumerate(settings["crowds"]):
            crowd = parse_crowd(CROWDS[crowd_label])
            for label in settings["learners"]:
                lrn = learner(label, settings["k"])
                res = ctx.simulate(lrn, inst, settings["reps"], seed=ctx.seed + 370000 + 100 * ci + 10 * gi,
                                   max_pulls=budget, checkpoints=checkpoints, crowd=crowd)
                until = res.ratings_until("top10_precision", 0.9)
                _, _, proven, system = LEARNERS[label]
                for j, c in enumerate(res.checkpoints):
                    row = {"contest": spec, "arms": inst.n_arms, "crowd": crowd_label, "algorithm": label,
                           "k": getattr(lrn, "k", 1), "proven_stop": proven, "contest_system": system,
                           "ratings": int(c), "reps": res.reps}
                    for name in MEASURES:
                        v = res.quality[name + "@"][:, j]
                        row[name] = float(np.nanmean(v)) if np.isfinite(v).any() else math.nan
                    row["top10_right"] = float((res.quality["top10_precision@"][:, j] >= 1.0).mean())
                    row["stopped"] = float((res.stopped & (res.pulls <= c)).mean())
                    row["ratings_until_top10_90"] = until
                    row["participants"] = res.extra.get("participants", 0) / max(res.reps, 1)
                    rows.append(row)
    return pd.DataFrame(rows)


def _style(label: str) -> dict[str, Any]:
    _, _, proven, system = LEARNERS[label]
    i = list(LEARNERS).index(label)
    return {"color": f"C{i}" if i < 10 else "black",
            "linestyle": "--" if system else ("-" if proven else ":"),
            "linewidth": 2.4 if label == SERVICE_DEFAULT else 1.2,
            "marker": "." if label != UNIFORM else "x"}


def plot(df: pd.DataFrame) -> Figure:
    """Top-10 precision against ratings (log scale), one panel per (crowd, contest), one curve per learner:
    proven learners solid, heuristic dotted, the contest systems dashed, the service's default thick; the budget
    of a mean contest as a vertical line."""
    import matplotlib.pyplot as plt

    contests = list(dict.fromkeys(df["contest"]))
    crowds = list(dict.fromkeys(df["crowd"]))
    fig, axes = plt.subplots(len(crowds), len(contests), figsize=(4.4 * len(contests), 3.5 * len(crowds) + 0.9),
                             squeeze=False, sharey=True)
    for gi, g_label in enumerate(crowds):
        for ci, contest in enumerate(contests):
            ax = axes[gi][ci]
            cell = df[(df["contest"] == contest) & (df["crowd"] == g_label)]
            for label, curve in cell.groupby("algorithm", sort=False):
                ax.plot(curve["ratings"], curve["top10_precision"], label=label, markersize=4, **_style(label))
            if cell["ratings"].max() >= CONTEST_RATINGS:
                ax.axvline(CONTEST_RATINGS, color="grey", linewidth=0.7)
            ax.set_xscale("log")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            arms = int(cell["arms"].iloc[0])
            ax.set_title(f"{contest} ({arms:,} captions), crowd {g_label}", fontsize=8)
            if gi == len(crowds) - 1:
                ax.set_xlabel("ratings")
            if ci == 0:
                ax.set_ylabel("top-10 precision (mean over runs)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=7, frameon=False)
    reps = int(df["reps"].iloc[0])
    fig.suptitle(f"Precision of the reported top 10 at a vote budget under a crowd\n({reps} runs per curve; "
                 f"grey line: {CONTEST_RATINGS:,} ratings, a mean contest)", fontsize=9)
    fig.tight_layout(rect=(0, 0.09, 1, 0.95))
    return fig


def _at(curve: pd.DataFrame, ratings: int) -> float:
    """The curve's top-10 precision at the last checkpoint at or below ``ratings`` (nan if none)."""
    below = curve[curve["ratings"] <= ratings]
    return float(below["top10_precision"].iloc[-1]) if len(below) else math.nan


def goal(df: pd.DataFrame) -> pd.DataFrame:
    """Issue 37's goal per (contest, crowd): the ratings at which the service's default first reaches the 2024
    system's top-10 precision at the budget, against a third of the budget, and whether the default beats uniform
    sampling at every checkpoint."""
    rows = []
    for (contest, crowd), cell in df.groupby(["contest", "crowd"], sort=False):
        curves = {a: c.sort_values("ratings") for a, c in cell.groupby("algorithm", sort=False)}
        if SERVICE_DEFAULT not in curves or REFERENCE_2024 not in curves:
            continue
        d, ref = curves[SERVICE_DEFAULT], curves[REFERENCE_2024]
        budget = int(ref["ratings"].max())
        target = float(ref["top10_precision"].iloc[-1])
        hit = d[d["top10_precision"] >= target - 1e-9]  # a mean read back from the CSV may differ in its last bit
        reach = int(hit["ratings"].iloc[0]) if len(hit) else math.nan
        beats = math.nan
        if UNIFORM in curves:
            u = curves[UNIFORM].set_index("ratings")["top10_precision"]
            beats = bool((d.set_index("ratings")["top10_precision"] > u.reindex(d["ratings"]).to_numpy()).all())
        rows.append({"contest": contest, "crowd": crowd, "budget": budget, "2024 UCB at budget": round(target, 3),
                     "default reaches it at": reach, "a third of the budget": budget // 3,
                     "within a third": bool(reach <= budget // 3) if not math.isnan(reach) else False,
                     "beats uniform at every checkpoint": beats})
    return pd.DataFrame(rows)


def assess(df: pd.DataFrame) -> Verdict:
    """The table: top-10 precision at 10^5 ratings and at the budget, and the ratings until the top 10 is right in
    90 % of the runs, per (crowd, learner) and contest; the summary states the goal of issue 37 (the service's
    default reaches the 2024 system's precision at the budget within a third of it, and beats uniform sampling at
    every budget) and the best learner with a proven stop per contest."""
    budget = int(df["ratings"].max())
    mid = 100_000
    rows = []
    for (crowd, label), g in df.groupby(["crowd", "algorithm"], sort=False):
        row: dict[str, Any] = {"crowd": crowd, "learner": label, "k": int(g["k"].iloc[0]),
                               "proven stop": "yes" if bool(g["proven_stop"].iloc[0]) else "no"}
        for contest, curve in g.groupby("contest", sort=False):
            name = str(contest).removeprefix("caption:")
            curve = curve.sort_values("ratings")
            until = float(curve["ratings_until_top10_90"].iloc[0])
            if mid < budget:
                row[f"{name} @{mid:,}"] = round(_at(curve, mid), 3)
            row[f"{name} @{budget:,}"] = round(_at(curve, budget), 3)
            row[f"{name}: 90% right from"] = f"{until:,.0f}" if math.isfinite(until) else "-"
        rows.append(row)
    table = pd.DataFrame(rows)
    gl = goal(df)
    best = []
    for (contest, crowd), cell in df[df["proven_stop"].astype(bool)].groupby(["contest", "crowd"], sort=False):
        area = cell.groupby("algorithm", sort=False)["top10_precision"].mean()
        best.append(f"{contest} ({crowd}): {area.idxmax()}")
    parts = []
    for r in gl.itertuples(index=False):
        reach = "never" if math.isnan(float(r[4])) else f"{int(r[4]):,}"
        parts.append(f"{r.contest} ({r.crowd}): the 2024 UCB reaches {r[3]:.3f} at {r.budget:,}; the default "
                     f"reaches it at {reach} ratings (a third: {r[5]:,}); beats uniform at every checkpoint: "
                     f"{r[7]}")
    # the goal is stated for the default crowd; the other crowds' cells are reported, not judged
    judged = gl[gl["crowd"] == "default"] if len(gl) and (gl["crowd"] == "default").any() else gl
    within, beats = judged.get("within a third", pd.Series(dtype=bool)), \
        judged.get("beats uniform at every checkpoint", pd.Series(dtype=bool))
    met = bool(len(judged)) and bool(within.all()) and bool(beats.all())
    some = bool(len(judged)) and bool(within.any() or beats.any())
    status = "holds" if met else ("partly" if some else "does not hold")
    cells = "; ".join(parts) or "no cell has both learners"
    summary = (f"Goal, judged under the default crowd: the service's default ({SERVICE_DEFAULT}) reaches "
               f"the 2024 system's top-10 precision at the budget with at most a third of the ratings, and beats "
               f"uniform sampling at every budget. {cells}. Best learner with a proven stop (mean top-10 precision "
               f"over the checkpoints): {'; '.join(best) or '-'}. {int(df['reps'].iloc[0])} runs per curve; "
               f"precision is the share of the reported top 10 that is in the true top 10.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="crowd_budget",
    paper="Beyond the papers (a caption contest at its vote budget)",
    artefact="caption contests 512, 558, 559 at full size",
    title="precision of the reported top 10 against ratings, under a crowd, with the systems that ran the contest",
    claim=("No paper makes this comparison. A contest gets about 778,586 ratings (Zhang et al. 2024, Table 1) and "
           "the editors read the top of the ranking; NEXT ran a batched delayed UCB and the 2024 system "
           "mu + sqrt(2 ln(4 N^2) / N) (same paper, App. D). Our goal: the service's default reaches the 2024 "
           "system's top-10 precision at 778,586 ratings with at most a third of them, and beats uniform sampling "
           "at every budget."),
    scales={
        "quick": {"contests": ["caption:559"], "crowds": ["default", "tired+careless"], "learners": list(LEARNERS),
                  "k": 10, "reps": 2, "budget": 2000, "checkpoints": [500, 1000]},
        "paper": {"contests": ["caption:512", "caption:558", "caption:559"], "crowds": ["default", "tired+careless"],
                  "learners": list(LEARNERS), "k": 10, "reps": 6, "budget": CONTEST_RATINGS,
                  "checkpoints": [10_000, 20_000, 50_000, 100_000, 150_000, 200_000, CONTEST_RATINGS // 3,
                                  350_000, 500_000, 650_000]},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("Every learner with a top-k rule runs at k = 10, the others at k = 1; deltas target error 0.05 (the "
           "service's default). A learner that stops before the budget keeps its ranking (column `stopped`). "
           "Crowd: 'default' is sessions=25,concurrency=32,batch=1; 'tired+careless' adds fatigue=1 and 10 % "
           "careless raters (docs/simulate.md). Session lengths are geometric (assumed: the bundled data has no "
           "per-participant counts)."),
)
