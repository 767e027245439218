"""OptMAI paper (Zhou, Chen, Li, ICML 2014), Figure 2(a): the histogram of the RTE workers' accuracies.

Sec. 6.2: the RTE data of Snow et al. (2008) has "800 binary labeling tasks and 164 different
workers"; each worker is an arm whose mean theta_i is "his/her labeling accuracy", and Fig. 2(a)
is the histogram of the theta_i. We read the bundled derived table
(:func:`purebandits.instances.real.load_rte_workers`: labels given and labels equal to the gold
label, per worker) and report theta_i = correct / labels with a 95% Wilson interval each, and
their histogram. No simulation is involved, so both scales are the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.instances.real import load_rte_workers
from purebandits.metrics import wilson_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PAPER_WORKERS = 164
PAPER_TASKS = 800


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """One ``kind = "worker"`` row per worker (labels, correct, accuracy, Wilson interval) and ``kind = "hist"``
    rows with the histogram of the accuracies on ``bins`` equal bins of [0, 1]."""
    w = load_rte_workers()
    rows = []
    for wid, n, c in zip(w.worker_ids, w.labels, w.correct, strict=True):
        lo, hi = wilson_interval(int(c), int(n))
        rows.append({"kind": "worker", "worker_id": wid, "labels": int(n), "correct": int(c),
                     "accuracy": c / n, "ci_low": lo, "ci_high": hi})
    edges = np.linspace(0.0, 1.0, settings["bins"] + 1)
    hist, _ = np.histogram(w.accuracies, bins=edges)
    for left, right, x in zip(edges[:-1], edges[1:], hist, strict=True):
        rows.append({"kind": "hist", "bin_low": float(left), "bin_high": float(right), "workers": int(x)})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame) -> Figure:
    """ZCL14 Fig. 2(a): histogram of theta_i; right, each worker's accuracy with its Wilson interval against the
    number of labels they gave."""
    import matplotlib.pyplot as plt

    h = df[df["kind"] == "hist"]
    w = df[df["kind"] == "worker"]
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(8, 3.2))
    a0.bar(h["bin_low"], h["workers"], width=h["bin_high"] - h["bin_low"], align="edge", color="C0", edgecolor="w")
    a0.set_xlabel("theta_i (worker accuracy)", fontsize=8)
    a0.set_ylabel("workers", fontsize=8)
    a0.set_title(f"histogram of theta_i, n = {len(w)}", fontsize=8)
    a1.errorbar(w["labels"], w["accuracy"], yerr=[w["accuracy"] - w["ci_low"], w["ci_high"] - w["accuracy"]],
                fmt="o", ms=2, lw=0.5, color="C0")
    a1.set_xscale("log")
    a1.set_xlabel("labels given (log)", fontsize=8)
    a1.set_ylabel("accuracy (95% Wilson)", fontsize=8)
    a1.set_title("per-worker accuracy and its uncertainty", fontsize=8)
    for ax in (a0, a1):
        ax.tick_params(labelsize=7)
    fig.suptitle("ZCL14 Fig. 2(a): RTE worker accuracies (Snow et al. 2008)", fontsize=9)
    fig.tight_layout()
    return fig


def assess(df: pd.DataFrame) -> Verdict:
    """The text's checkable numbers: 164 workers; labels consistent with 800 tasks (a whole number of labels per
    task, at least one); every theta_i an accuracy in [0, 1]. The histogram's shape is reported, not compared: the
    paper gives it only as a picture."""
    w = df[df["kind"] == "worker"]
    acc = w["accuracy"].to_numpy(dtype=float)
    n = len(w)
    total = int(w["labels"].sum())
    per_task = total / PAPER_TASKS
    c_n = n == PAPER_WORKERS
    c_tasks = total >= PAPER_TASKS and total % PAPER_TASKS == 0
    c_range = bool(len(acc)) and bool(np.all((acc >= 0) & (acc <= 1)))
    few = int((w["labels"] <= 20).sum())
    width = (w["ci_high"] - w["ci_low"]).to_numpy(dtype=float)
    q = np.quantile(acc, [0.1, 0.5, 0.9]) if len(acc) else np.full(3, np.nan)
    table = pd.DataFrame([
        {"quantity": "workers", "measured": n, "paper": PAPER_WORKERS},
        {"quantity": "labels in total", "measured": total, "paper": f"{PAPER_TASKS} tasks"},
        {"quantity": "labels per task", "measured": round(per_task, 3), "paper": "-"},
        {"quantity": "accuracy min / 10% / median / 90% / max",
         "measured": " / ".join(f"{x:.3f}" for x in [acc.min(), *q, acc.max()]) if len(acc) else "-",
         "paper": "histogram only"},
        {"quantity": "mean accuracy (per worker / per label)",
         "measured": f"{acc.mean():.3f} / {w['correct'].sum() / max(total, 1):.3f}" if len(acc) else "-",
         "paper": "-"},
        {"quantity": "workers with accuracy >= 0.9 / < 0.6",
         "measured": f"{int((acc >= 0.9).sum())} / {int((acc < 0.6).sum())}", "paper": "-"},
        {"quantity": "distinct accuracy values", "measured": len(np.unique(acc)), "paper": "-"},
        {"quantity": "workers with <= 20 labels (median Wilson width)",
         "measured": f"{few} ({np.median(width):.2f})" if len(width) else "-", "paper": "-"},
    ])
    checks = [c_n, c_tasks, c_range]
    n_ok = sum(checks)
    status = verdict_status(n_ok, len(checks))
    summary = (f"{n} workers (paper {PAPER_WORKERS}); {total} labels, {per_task:g} per task for the paper's "
               f"{PAPER_TASKS} tasks; accuracies in [0, 1]: {'yes' if c_range else 'no'}. The histogram is "
               f"{'left' if acc.mean() < q[1] else 'right'}-skewed (mean {acc.mean():.3f}, median {q[1]:.3f}), "
               f"{int((acc >= 0.9).sum())} of {n} workers at >= 0.9, "
               f"{len(np.unique(acc))} distinct values (many ties). {few} workers gave <= 20 labels, so their "
               f"theta_i is known only to about +-{np.median(width) / 2:.2f} (median half-width of the Wilson "
               f"intervals); the simulations use these empirical accuracies as the true means, as the paper does. "
               f"{n_ok} of {len(checks)} checkable statements hold; the shape against Fig. 2(a) is not checkable from "
               f"the text.")
    return Verdict(status, summary, table)


EXPERIMENT = Experiment(
    name="zcl14_fig2a",
    paper="Zhou, Chen, Li (ICML 2014)",
    artefact="Figure 2(a)",
    title="Histogram of the 164 RTE workers' accuracies theta_i",
    claim=("'We generate theta from a real recognizing textual entailment (RTE) dataset (Section 4.3 in (Snow et al., "
           "2008)). There are 800 binary labeling tasks and 164 different workers. Since true labels of tasks are "
           "available on this data, we set each theta_i for the i-th worker to be his/her labeling accuracy. The "
           "histogram of theta_i is presented in Figure 2(a).'"),
    scales={"quick": {"bins": 20}, "paper": {"bins": 20}},
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("Data: the bundled rte_workers.csv (derived from Snow et al.'s release; see data/rte/README.md), 8,000 "
           "labels, i.e. Snow et al.'s 10 labels for each of the 800 tasks. theta_i = correct / labels against the "
           "gold label. The paper's histogram is only a picture (its bins and counts are not in the text), so "
           "the shape is reported, not tested. Bins: 20 equal bins of [0, 1]."),
)
