"""Beyond the papers: the seeds' best learners against modern baselines on the caption contests.

New Yorker caption contests 558, 512 and 559 (bundled vote counts; each caption is a
categorical arm on {0, 1/2, 1}: unfunny / somewhat funny / funny, bootstrapped from its votes;
the graded reward model). Every learner targets the same error probability 0.01: it gets the
``delta`` parameter whose proven (or, for a heuristic, nominal) error bound is 0.01, i.e.
``0.01 / error_per_delta`` with the learner class's :attr:`~purebandits.base.Learner.error_per_delta`
(2 for lil-KLUCB and KL-RandLUCB, TNM17 Thm 1: correct with probability >= 1 - 2 delta, so they
run at delta = 0.005; 1 for the others, which run at delta = 0.01).
Learners: lil-KLUCB (``lil_kl_ucb``, TNM17), lil'RandLUCB and LUCB++ (heuristic
presets, JLQ17), lil'UCB heuristic (JMNB14), Track-and-Stop (Garivier-Kaufmann 2016), the
top-two rule (TC challenger, GLR stop) and the KL-bound lil'RandLUCB combination
(``kl_rand_lucb``). Goals: the best caption (k = 1, every learner) and the top 5 (k = 5, only
learners tagged ``top_k``). Metric: samples to stop, capped runs, error rate.

Contests have thousands of captions with near-ties at the top, so each run is capped at
``max_pulls`` and every contest is restricted to its top-``m`` captions by true mean (the
restriction keeps the hardest part of the problem, the near-ties at the top, and makes
Track-and-Stop's O(n) weight computation per pull affordable).

Seeds: contest c (in order) and k index q use ``ctx.seed + 300000 + 100 c + 10 q`` for every
learner (common random numbers). The instances come from :mod:`purebandits.experiments.contests`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, summary_row
from purebandits.experiments.contests import top_m_contest
from purebandits.metrics import wilson_interval
from purebandits.registry import get_learner_class, make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the error probability every learner targets (not the delta parameter: see :func:`delta_param`)
DELTA = 0.01

#: label -> (registry name, parameters)
LEARNERS: dict[str, tuple[str, dict[str, Any]]] = {
    "lil-KLUCB": ("lil_kl_ucb", {}),
    "lil'RandLUCB (heur.)": ("lil_rand_lucb", {"preset": "heuristic"}),
    "LUCB++ (heur.)": ("lucb_plus_plus", {"preset": "heuristic"}),
    "lil'UCB (heur.)": ("lil_ucb", {"preset": "heuristic"}),
    "Track-and-Stop": ("track_and_stop", {}),
    "Top-two (TC)": ("top_two", {}),
    "KL-RandLUCB": ("kl_rand_lucb", {}),
}


def delta_param(cls: type) -> float:
    """The ``delta`` to pass to learner class ``cls`` so that its error bound is :data:`DELTA`.

    Read from the class's ``error_per_delta`` (its error is at most ``error_per_delta * delta``), not from a
    table here, so a learner whose guarantee changes cannot drift out of line.
    """
    return DELTA / cls.error_per_delta


def target_error(lrn: Any) -> float:
    """The error probability learner ``lrn`` is run for: ``error_per_delta * delta`` (proven for lil-KLUCB and
    KL-RandLUCB; nominal for the heuristic presets and the practical GLR thresholds, which have no proof)."""
    return type(lrn).error_per_delta * lrn.delta


def learner(label: str, k: int) -> Any | None:
    """The learner ``label`` for top-``k`` with error target :data:`DELTA` (its delta is :func:`delta_param`), or
    None when it cannot find a top-k set."""
    name, params = LEARNERS[label]
    cls = get_learner_class(name)
    if k > 1 and not cls.tags.get("top_k", False):
        return None
    if "k" in cls._param_names():
        params = {**params, "k": k}
    return make_learner(name, delta=delta_param(cls), **params)


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """Summary row (samples to stop, capped runs, errors) per (contest, k, learner) on the contest's top-``top_m``
    captions, runs capped at ``max_pulls``; learners without top-k support are skipped at k > 1. Each row states
    the delta passed (``delta_param``) and the error probability that stands for (``target_error``, 0.01)."""
    rows = []
    for ci, contest in enumerate(settings["contests"]):
        for qi, k in enumerate(settings["ks"]):
            inst = top_m_contest(contest, settings["top_m"], k)
            h = inst.hardness(k)
            for label in LEARNERS:
                lrn = learner(label, k)
                if lrn is None:
                    continue
                res = ctx.simulate(lrn, inst, settings["reps"], seed=ctx.seed + 300000 + 100 * ci + 10 * qi,
                                   max_pulls=settings["max_pulls"])
                rows.append(summary_row(res, contest=contest, k=k, algorithm=label, arms=inst.n_arms, H1=h.H1,
                                        max_pulls=settings["max_pulls"], delta_param=lrn.delta,
                                        target_error=target_error(lrn)))
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """One panel per (contest, k): mean samples to stop per learner (log scale), with capped runs and errors marked."""
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(zip(df["contest"], df["k"], strict=True)))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.6), squeeze=False)
    for ax, (c, k) in zip(axes[0], panels, strict=True):
        g = df[(df["contest"] == c) & (df["k"] == k)]
        labels = list(g["algorithm"])
        colors = [f"C{list(LEARNERS).index(x)}" for x in labels]
        ax.bar(range(len(g)), g["pulls_mean"], color=colors)
        for i, row in enumerate(g.itertuples()):
            if row.capped:
                ax.text(i, row.pulls_mean, f"{row.capped} capped", ha="center", va="bottom", fontsize=5, rotation=90)
            if row.errors:
                ax.text(i, 0, f"{row.errors} err", ha="center", va="bottom", fontsize=5, color="w", rotation=90)
        ax.set_xticks(range(len(g)))
        ax.set_xticklabels(labels, rotation=70, fontsize=6)
        ax.set_yscale("log")
        ax.set_title(f"contest {c}, k = {k}", fontsize=8)
    axes[0][0].set_ylabel("mean samples to stop")
    fig.suptitle(f"Caption contests: samples to identify the top k at error target {DELTA}", fontsize=9)
    fig.tight_layout()
    return fig


def assess(df: pd.DataFrame) -> Verdict:
    """Per (contest, k): the fastest learner among those that qualify, the best seed learner against
    the best modern one, capped runs and errors.

    A learner qualifies when none of its runs hit the cap (otherwise its mean is a lower bound) and
    its error rate is consistent with the error target: the 95% Wilson lower bound of the error rate of the runs
    that stopped by themselves is at most :data:`DELTA` (a capped run's recommendation is scored, but it
    never claimed delta-correctness). A learner that stops fast but wrongly (a heuristic preset on
    a near-tie) is listed under "error rate above delta" instead of being called fastest.
    """
    rows = []
    wins_kl = 0
    cells = 0
    for (c, k), g in df.groupby(["contest", "k"], sort=False):
        too_wrong = g.apply(lambda r: wilson_interval(r["errors_stopped"], r["reps"] - r["capped"])[0] > DELTA,
                            axis=1).astype(bool)
        clean = g[(g["capped"] == 0) & ~too_wrong]
        best = clean.loc[clean["pulls_mean"].idxmin()] if len(clean) else None
        seeds = clean[clean["algorithm"].isin(["lil-KLUCB", "lil'RandLUCB (heur.)", "LUCB++ (heur.)",
                                              "lil'UCB (heur.)"])]
        modern = clean[clean["algorithm"].isin(["Track-and-Stop", "Top-two (TC)", "KL-RandLUCB"])]
        bs = seeds.loc[seeds["pulls_mean"].idxmin()] if len(seeds) else None
        bm = modern.loc[modern["pulls_mean"].idxmin()] if len(modern) else None
        ratio = bs["pulls_mean"] / bm["pulls_mean"] if bs is not None and bm is not None else float("nan")
        cells += 1
        wins_kl += bool(best is not None and best["algorithm"] == "KL-RandLUCB")
        rows.append({"contest": c, "k": k, "fastest (uncapped, delta-consistent)":
                     best["algorithm"] if best is not None else "-",
                     "its mean samples": round(best["pulls_mean"]) if best is not None else float("nan"),
                     "best seed learner": bs["algorithm"] if bs is not None else "-",
                     "best modern": bm["algorithm"] if bm is not None else "-",
                     "seed/modern": round(ratio, 2), "capped runs": int(g["capped"].sum()),
                     "errors": int(g["errors"].sum()), "errors (stopped runs)": int(g["errors_stopped"].sum()),
                     "error rate above delta": ", ".join(g.loc[too_wrong, "algorithm"]) or "-",
                     "runs": int(g["reps"].sum())})
    table = pd.DataFrame(rows)
    errors, runs, capped = int(df["errors"].sum()), int(df["reps"].sum()), int(df["capped"].sum())
    worst = df.loc[df["error_rate"].idxmax()]
    stopped_err = int(df["errors_stopped"].sum())
    stopped_runs = runs - capped
    ok_err = stopped_err <= max(1, DELTA * stopped_runs)
    status = "holds" if ok_err and capped == 0 else ("partly" if ok_err or capped < runs else "does not hold")
    summary = (f"Expectation (no paper claim; ours): every learner, run for the same error target {DELTA} (KL "
               f"learners at delta = {DELTA / 2:g}, their bound being 2 delta), errs at most that often, and "
               f"the combinations/modern rules beat the seeds' learners. Errors: {errors} of {runs} runs (worst "
               f"{worst['error_rate']:.3f}: {worst['algorithm']}, contest {worst['contest']}, k = {worst['k']}), "
               f"of which "
               f"{stopped_err} among the {stopped_runs} runs that stopped by themselves; "
               f"capped runs: {capped} (their samples are lower bounds and they do not count as stopped). "
               f"A learner is compared only if none of its runs hit the cap and its error rate is consistent "
               f"with the error target (95% Wilson lower bound of the stopped runs' error rate <= {DELTA}). "
               f"KL-RandLUCB is the fastest such learner in {wins_kl}/{cells} (contest, k) cells; "
               f"seed/modern < 1 means the best seed learner beats the best modern one. Contests restricted to "
               f"their top-{int(df['arms'].iloc[0])} captions.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="caption_extra",
    paper="Beyond the papers (TNM17, JLQ17, JMNB14 learners vs Track-and-Stop, top-two)",
    artefact="caption contests 558, 512, 559",
    title="samples to find the best caption (k = 1) and the top 5 (k = 5) at error target 0.01",
    claim=("No paper makes this comparison. TNM17 Sec. 5 reports that KL bounds help most when means are near 0 or "
           "1 (contest 512, mu_1 = 0.8 in their data) and are comparable at 558; we test whether the seeds' "
           "learners stay delta-correct on real vote distributions and how they compare with asymptotically "
           "optimal modern rules (Track-and-Stop, top-two) and with the KL-bound lil'RandLUCB combination."),
    scales={
        "quick": {"contests": ["512"], "ks": [1, 3], "top_m": 8, "reps": 2, "max_pulls": 30_000},
        "paper": {"contests": ["558", "512", "559"], "ks": [1, 5], "top_m": 50, "reps": 100,
                  "max_pulls": 20_000_000},
    },
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("Caption reward model: graded, unfunny 0 / somewhat funny 1/2 / funny 1, drawn with each caption's "
           "vote frequencies. Error target 0.01 for every learner: each gets delta = 0.01 / error_per_delta (the "
           "learner class's attribute): lil-KLUCB and KL-RandLUCB are correct with probability >= 1 - 2 delta "
           "(TNM17 Thm 1; KL-RandLUCB uses the same bounds), so they run at delta = 0.005; lil'RandLUCB, LUCB++, "
           "lil'UCB, Track-and-Stop and top-two take delta as their error probability and run at 0.01 (a nominal "
           "target for the heuristic presets and the practical GLR thresholds, which have no proof). Rows give "
           "the delta passed (delta_param) and target_error = error_per_delta x delta_param. "
           "Each contest is restricted to its top-m captions by true (vote) mean: m = 50 at paper scale, 8 at quick "
           "scale (the full contests, 3925 / 4399 captions for 558 / 512, are out of reach for Track-and-Stop's "
           "O(n) work per pull and for the cap). Contest 559's two best captions differ by 0.0002 in mean "
           "(H1 ~ 2.4e7): k = 1 there is expected to hit the cap. Contest 512's 5th and 6th captions have exactly "
           "the same vote mean (a tie at the top-5 boundary, H = inf), so k = 5 there cannot stop except by chance; "
           "every top-5 set holding either one counts as correct. Quick scale: contest 512, k in {1, 3}, top 8. "
           "Paper scale: 100 runs per learner, cap 2e7 pulls per run. "
           "Top-two uses its default Gaussian transportation cost with sigma = 1/2 (valid sub-Gaussian scale for "
           "[0, 1] rewards) and the practical threshold log((1 + log t)/delta); Track-and-Stop uses Bernoulli KL "
           "with the practical threshold. A capped run is never counted as correct or wrong by stopping; its "
           "recommendation at the cap is still scored."),
)
