"""What the experiments of Tanczos, Nowak, Mankoff (NIPS 2017) share: the anytime curves, their grid and plot."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.instances import Instance, custom, lil_exponential
from purebandits.metrics import wilson_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LEVEL = 0.9  # "found": P(best arm in the top 5) reaches this level


TOP_M = 5


def select(instance: Instance, arms: np.ndarray, name: str) -> Instance:
    """The instance restricted to ``arms``, in that order (categorical caption arms stay categorical, the rest
    become Bernoulli with the same means)."""
    arms = np.asarray(arms)
    model = instance.model
    if hasattr(model, "probabilities"):  # categorical (graded caption contests)
        from purebandits.instances import Categorical

        return Instance(name, Categorical(model.probabilities[arms], model.values), instance.k, instance.description)
    inst = custom(instance.means[arms], k=instance.k, model="bernoulli")
    return Instance(name, inst.model, instance.k, instance.description)


def ascending(instance: Instance, name: str | None = None) -> Instance:
    """The same arms listed by increasing true mean (ties in ranks then count against the best arm)."""
    order = np.argsort(instance.means, kind="stable")
    return select(instance, order, name or f"{instance.name} (ascending)")


def alpha_profile(n: int, alpha: float) -> Instance:
    """TNM17 Fig. 1's Bernoulli arms ``mu_i = 1 - ((i-1)/n)^alpha`` (``lil_exponential``), listed ascending."""
    return ascending(lil_exponential(n, alpha, model="bernoulli"))


def log_grid(start: int, stop: int, points: int) -> list[int]:
    """About ``points`` checkpoints spaced evenly in log(samples) from ``start`` to ``stop``."""
    return sorted({int(round(x)) for x in np.geomspace(start, stop, points)})


def samples_to_level(samples: np.ndarray, prob: np.ndarray, level: float = LEVEL) -> float:
    """First number of samples at which ``prob`` reaches ``level`` (log-linear interpolation
    between checkpoints; NaN if never reached, the first checkpoint if reached there)."""
    hit = np.flatnonzero(prob >= level)
    if hit.size == 0:
        return math.nan
    j = int(hit[0])
    if j == 0:
        return float(samples[0])
    x0, x1, y0, y1 = math.log(samples[j - 1]), math.log(samples[j]), prob[j - 1], prob[j]
    return float(math.exp(x0 + (level - y0) / (y1 - y0) * (x1 - x0)))


def curve_rows(res: Any, base: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per checkpoint: P(best arm among the top 5 empirical means) with a Wilson interval."""
    rows = []
    hits = (res.ckpt_best_rank < TOP_M).sum(axis=0)
    for c, x in zip(res.checkpoints, hits, strict=True):
        lo, hi = wilson_interval(int(x), res.reps)
        rows.append({**base, "kind": "curve", "samples": int(c), "p_top5": x / res.reps, "ci_low": lo, "ci_high": hi})
    return rows


COLORS = {"KL": "C0", "SG1": "C3", "SG2": "k", "TH": "C4"}


def plot_curves(df: pd.DataFrame, panel_col: str, title: str) -> Figure:
    """P(best arm in top 5) vs total samples (log x) with Wilson bands, one panel per value of ``panel_col``
    and one curve per algorithm (TNM17 Figs. 1-3)."""
    import matplotlib.pyplot as plt

    curves = df[df["kind"] == "curve"]
    panels = list(dict.fromkeys(curves[panel_col]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        for alg, g in curves[curves[panel_col] == p].groupby("algorithm", sort=False):
            c = COLORS.get(str(alg).upper(), None)
            ax.semilogx(g["samples"], g["p_top5"], "-", color=c, label=alg)
            ax.fill_between(g["samples"], g["ci_low"], g["ci_high"], color=c, alpha=0.15)
        ax.set_title(f"{panel_col} = {p}", fontsize=8)
        ax.set_xlabel("total samples", fontsize=7)
        ax.set_ylabel("P(best arm in top 5)", fontsize=7)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
