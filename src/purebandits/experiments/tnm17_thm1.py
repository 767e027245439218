"""lil-KLUCB paper (Tanczos, Nowak, Mankoff, NIPS 2017), Theorem 1: the sample complexity scales with the
KL (Chernoff-information) complexity.

Theorem 1: with probability at least 1 - 2 delta lil-KLUCB returns the best arm after at most

    c0 log((n-1)/delta log 1/D*(mu_1, mu~)) / D*(mu_1, mu~)
        + sum_i c0 log(1/delta log 1/D*(mu_i, mu~_i)) / D*(mu_i, mu~_i)

samples (c0 universal). We evaluate it at the paper's simplification (Sec. 1, "scales essentially
like sum (D_i*)^-1 log(delta^-1 log (D_i*)^-1)") with ``D_i = D*(mu_1, mu_i)`` for every i >= 2
and the best arm's term at the smallest ``D_2``:

    H_KL = log((n-1)/delta log(1/D_2)) / D_2 + sum_{i>=2} log(log(1/D_i)/delta) / D_i.

(Any fixed choice of mu~_i in (mu_i, mu_1), e.g. the midpoint, changes each D by a bounded factor on
these instances and is absorbed in c0.) For contrast, ``H_SG`` is the same expression with the
sub-Gaussian proxy ``Delta_i^2 / 2`` (the paper's lower bound on D*) in place of D*: what lil'UCB's
bound would predict. lil-KLUCB (ALGORITHMS.md 9.1, bound [KL] in its default exact form, eqs. (2)-(3),
N = 8, delta = 0.01) runs on a family of Bernoulli instances whose H_KL spans more than a decade,
with means near 1/2 and near 0 or 1, where D* and Delta^2/2 differ most.

The 2 delta: the theorem's event has probability >= 1 - 2 delta, i.e. 0.98 at delta = 0.01. The
learner runs at delta = 0.01 (its bounds at delta and delta/(n-1), as in the algorithm box), so
the check on correctness is P(error) <= 2 delta = 0.02 (Wilson interval); the sample bound is a
high-probability one, so besides the mean we report the 0.98 (= 1 - 2 delta) quantile of the
stopping time, which the theorem bounds by c0 H_KL.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from purebandits.bounds import chernoff_information
from purebandits.experiments.base import Context, Experiment, Verdict, verdict_status
from purebandits.instances import Instance, custom
from purebandits.metrics import wilson_interval
from purebandits.registry import make_learner

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Z = 2.0  # tolerance in standard errors


def family_means(spec: str) -> np.ndarray:
    """Means from a spec ``"two:n:top:rest"`` (one arm at ``top``, n-1 at ``rest``) or ``"linear:n:top:bottom"``
    (n equally spaced means from ``top`` down to ``bottom``)."""
    kind, n, a, b = spec.split(":")
    if kind == "two":
        return np.array([float(a)] + [float(b)] * (int(n) - 1))
    if kind == "linear":
        return np.linspace(float(a), float(b), int(n))
    raise ValueError(f"instance spec must start with 'two:' or 'linear:', got {spec!r}")


def complexity(means: Any, delta: float, gaps: str = "kl") -> float:
    """TNM17 Thm. 1's sum at ``D_i = D*(mu_1, mu_i)`` (``gaps = "kl"``) or at ``Delta_i^2 / 2`` (``"sg"``):
    ``log((n-1)/delta log 1/D_2)/D_2 + sum_{i>=2} log(log(1/D_i)/delta)/D_i`` (module docstring)."""
    mu = np.sort(np.asarray(means, dtype=float))[::-1]
    n = mu.size
    d = chernoff_information(mu[0], mu[1:]) if gaps == "kl" else (mu[0] - mu[1:]) ** 2 / 2
    d = np.atleast_1d(np.asarray(d, dtype=float))
    if np.any(d <= 0) or np.any(d >= 1):
        raise ValueError("the complexity needs 0 < D_i < 1 (distinct means, not too far apart)")
    d2 = float(d.min())
    return float(math.log((n - 1) / delta * math.log(1 / d2)) / d2 + np.sum(np.log(np.log(1 / d) / delta) / d))


def compute(ctx: Context, settings: dict) -> pd.DataFrame:
    """One row per instance: H_KL, H_SG, lil-KLUCB's stopping time (mean, s.e., median, 1 - 2 delta quantile),
    errors and capped runs (seed ``ctx.seed + 1000 i``; runs capped at ``cap`` x H_KL pulls)."""
    delta = settings["delta"]
    rows = []
    for i, spec in enumerate(settings["instances"]):
        means = family_means(spec)
        inst = custom(means, k=1, model="bernoulli")
        inst = Instance(f"tnm17 thm1 {spec}", inst.model, 1, spec)
        h_kl, h_sg = complexity(means, delta, "kl"), complexity(means, delta, "sg")
        seed = ctx.seed + 1000 * i
        res = ctx.simulate(make_learner("lil_kl_ucb", delta=delta, N=8), inst, settings["reps"], seed=seed,
                           max_pulls=int(settings["cap"] * h_kl))
        pulls = res.pulls.astype(float)
        errors = int((~res.correct).sum())
        lo, hi = wilson_interval(errors, res.reps)
        rows.append({"instance": spec, "n": means.size, "mu_1": float(means.max()), "delta": delta,
                     "H_KL": h_kl, "H_SG": h_sg, "reps": res.reps, "seed": seed, "pulls_mean": float(pulls.mean()),
                     "pulls_sem": float(pulls.std(ddof=1) / math.sqrt(res.reps)) if res.reps > 1 else math.nan,
                     "pulls_median": float(np.median(pulls)),
                     "pulls_q_1m2delta": float(np.quantile(pulls, 1 - 2 * delta)),
                     "capped": int((~res.stopped).sum()), "errors": errors, "error_ci_low": lo, "error_ci_high": hi})
    return pd.DataFrame(rows)


def loglog_fit(x: np.ndarray, y: np.ndarray, y_sem: np.ndarray) -> dict[str, float]:
    """Weighted least squares of log y on log x with the Monte Carlo variances ``(sem/y)^2`` (delta method).

    Returns the slope, its Monte Carlo s.e., chi^2 per degree of freedom and the s.e. inflated by
    ``sqrt(max(1, chi^2/dof))`` (the Birge ratio: scatter of the instances beyond Monte Carlo error, e.g. from the
    instance-dependent lower-order terms the theorem's universal c0 hides, widens the tolerance), plus the
    intercept.
    """
    lx, ly = np.log(x), np.log(y)
    var = np.maximum((y_sem / y) ** 2, 1e-12)
    w = 1.0 / var
    X = np.column_stack([np.ones_like(lx), lx])
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    beta = cov @ (X.T @ (w * ly))
    resid = ly - X @ beta
    dof = max(len(lx) - 2, 1)
    chi2 = float(np.sum(w * resid**2) / dof)
    se = float(math.sqrt(cov[1, 1]))
    return {"slope": float(beta[1]), "intercept": float(beta[0]), "se_mc": se, "chi2_dof": chi2,
            "se": se * math.sqrt(max(1.0, chi2))}


def plot(df: pd.DataFrame) -> Figure:
    """Mean stopping time (+- 2 s.e.) and the 1 - 2 delta quantile against H_KL (left) and H_SG (right), log-log,
    with the fitted line and a slope-1 reference."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, col in zip(axes, ["H_KL", "H_SG"], strict=True):
        x = df[col].to_numpy(dtype=float)
        y = df["pulls_mean"].to_numpy(dtype=float)
        ax.errorbar(x, y, yerr=Z * df["pulls_sem"], fmt="o", ms=3, color="C0", label="mean stopping time")
        ax.plot(x, df["pulls_q_1m2delta"], "v", ms=3, color="C3", label="1 - 2 delta quantile")
        if len(df) >= 2:
            f = loglog_fit(x, y, df["pulls_sem"].to_numpy(dtype=float))
            grid = np.geomspace(x.min(), x.max(), 20)
            ax.plot(grid, np.exp(f["intercept"]) * grid ** f["slope"], "-", color="C0", lw=1,
                    label=f"fit: slope {f['slope']:.3f} +- {f['se']:.3f}")
            c = float(np.exp(np.mean(np.log(y / x))))
            ax.plot(grid, c * grid, ":", color="k", lw=1, label="slope 1")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{col} ({'Chernoff information' if col == 'H_KL' else 'Delta^2/2'})", fontsize=8)
        ax.set_ylabel("samples", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.suptitle(f"TNM17 Thm. 1: lil-KLUCB samples vs complexity, delta = {df['delta'].iloc[0]:g}", fontsize=9)
    fig.tight_layout()
    return fig


def assess(df: pd.DataFrame) -> Verdict:
    """(1) The log-log slope of mean samples on H_KL is within 2 s.e. of 1 (Monte Carlo s.e., Birge-inflated);
    (2) every instance's error rate is compatible with <= 2 delta (Wilson lower bound <= 2 delta) and the pooled
    rate's Wilson upper bound is <= 2 delta when enough runs make that testable; (3) H_KL explains the samples
    better than H_SG: the spread of log(samples/H) (slope fixed at 1) is smaller with D* than with Delta^2/2."""
    x_kl, x_sg = df["H_KL"].to_numpy(dtype=float), df["H_SG"].to_numpy(dtype=float)
    y, sem = df["pulls_mean"].to_numpy(dtype=float), df["pulls_sem"].to_numpy(dtype=float)
    f = loglog_fit(x_kl, y, sem)
    g = loglog_fit(x_sg, y, sem)
    c_slope = abs(f["slope"] - 1.0) <= Z * f["se"]
    two_delta = 2 * float(df["delta"].iloc[0])
    err, runs = int(df["errors"].sum()), int(df["reps"].sum())
    lo, hi = wilson_interval(err, runs)
    per_ok = bool((df["error_ci_low"] <= two_delta).all())
    testable = wilson_interval(0, runs)[1] <= two_delta  # zero errors would show <= 2 delta
    c_err = per_ok and (hi <= two_delta or not testable)
    r_kl, r_sg = np.log(y / x_kl), np.log(y / x_sg)
    spread_kl, spread_sg = float(np.std(r_kl, ddof=1)), float(np.std(r_sg, ddof=1))
    c_kl = spread_kl < spread_sg
    capped = int(df["capped"].sum())
    table = df[["instance", "H_KL", "H_SG", "pulls_mean", "pulls_sem", "pulls_q_1m2delta", "errors", "reps",
                "capped"]].copy()
    table["mean/H_KL"] = y / x_kl
    table["q/H_KL"] = df["pulls_q_1m2delta"].to_numpy(dtype=float) / x_kl
    table["mean/H_SG"] = y / x_sg
    for c in ("H_KL", "H_SG", "pulls_mean", "pulls_sem", "pulls_q_1m2delta"):
        table[c] = table[c].round(0)
    for c in ("mean/H_KL", "q/H_KL", "mean/H_SG"):
        table[c] = table[c].round(3)
    checks = [c_slope, c_err, c_kl]
    n_ok = sum(checks)
    status = verdict_status(n_ok, len(checks))
    summary = (f"Over {len(df)} instances (H_KL from {x_kl.min():.0f} to {x_kl.max():.0f}), the log-log slope of mean "
               f"samples on H_KL is {f['slope']:.3f} +- {f['se']:.3f} (Monte Carlo s.e. {f['se_mc']:.3f}, chi^2/dof "
               f"{f['chi2_dof']:.1f}): {'within' if c_slope else 'outside'} {Z:g} s.e. of 1"
               + (f" (on Monte Carlo error alone 1 is {abs(f['slope'] - 1) / f['se_mc']:.0f} s.e. away: the instances "
                  f"scatter about the line by more than sampling noise, which the theorem's unspecified constant and "
                  f"lower-order terms allow, and the tolerance is widened by sqrt(chi^2/dof))"
                  if abs(f["slope"] - 1) > Z * f["se_mc"] else "")
               + f"; samples/H_KL lies in "
               f"[{np.exp(r_kl.min()):.2f}, {np.exp(r_kl.max()):.2f}] (1 - 2 delta quantile / H_KL up to "
               f"{table['q/H_KL'].max():.2f}). Against H_SG (Delta^2/2 in place of D*) the slope is "
               f"{g['slope']:.3f} and samples/H_SG spans [{np.exp(r_sg.min()):.3f}, {np.exp(r_sg.max()):.3f}]: spread "
               f"of log(samples/H) {spread_kl:.3f} with D* vs {spread_sg:.3f} with Delta^2/2. Errors {err} of {runs} "
               f"runs (95% Wilson [{lo:.4f}, {hi:.4f}]) against the 2 delta = {two_delta:g} of the theorem"
               + ("" if testable else " (too few runs to show <= 2 delta; only no instance significantly above)")
               + (f"; {capped} runs hit the cap" if capped else "") + f". {n_ok} of {len(checks)} checks hold.")
    return Verdict(status, summary, table)


FAMILY_PAPER = ["two:2:0.55:0.45", "two:2:0.6:0.4", "two:4:0.6:0.5", "two:10:0.6:0.5", "two:10:0.7:0.5",
                "two:10:0.8:0.5", "two:10:0.95:0.8", "two:10:0.99:0.95", "two:10:0.999:0.98", "two:10:0.1:0.02",
                "two:30:0.8:0.6", "linear:20:0.9:0.5", "two:10:0.55:0.5"]

EXPERIMENT = Experiment(
    name="tnm17_thm1",
    paper="Tanczos, Nowak, Mankoff (NIPS 2017)",
    artefact="Theorem 1",
    title="lil-KLUCB's samples scale linearly in sum_i D_i*^-1 log(log(1/D_i*)/delta) (Chernoff information)",
    claim=("Theorem 1: 'With probability at least 1 - 2 delta, lil-KLUCB returns the arm with the largest mean and "
           "the total number of samples it collects is upper bounded by inf c0 log((n-1) delta^-1 log D*(mu_1, mu~)^-1)"
           " / D*(mu_1, mu~) + sum_i c0 log(delta^-1 log D*(mu_i, mu~_i)^-1) / D*(mu_i, mu~_i)'; Sec. 1: lil-KLUCB "
           "offers 'a sample complexity that scales essentially like sum_{i>=2} (D_i*)^-1 log(delta^-1 log "
           "(D_i*)^-1)'. Checked at delta = 0.01: mean samples proportional to that complexity (log-log slope 1), "
           "errors <= 2 delta."),
    scales={"quick": {"instances": ["two:2:0.6:0.4", "two:10:0.8:0.5", "two:10:0.95:0.8", "two:4:0.6:0.5"],
                      "reps": 20, "delta": 0.01, "cap": 100},
            "paper": {"instances": FAMILY_PAPER, "reps": 1000, "delta": 0.01, "cap": 100}},
    compute=compute,
    plot=plot,
    assess=assess,
    notes=("The theorem bounds samples by c0 times the complexity with an unspecified universal c0, and only with "
           "probability 1 - 2 delta; what can be tested is the scaling: samples proportional to H_KL across "
           "instances. D_i = D*(mu_1, mu_i) (Chernoff information, bounds.chernoff_information) stands for the "
           "theorem's D*(mu_i, mu~_i), and the best arm's term uses the smallest D_i with its log(n-1); the "
           "theorem's 'sum_{i>2}' is read as i >= 2. The slope's tolerance is 2 Monte Carlo standard errors of a "
           "weighted log-log fit, inflated by sqrt(chi^2/dof) when the instances scatter around the line more than "
           "their Monte Carlo error explains (instance-dependent lower-order terms). lil-KLUCB uses its default [KL] "
           "bounds, TNM17 eqs. (2)-(3) (form='exact', chosen by tnm17_bounds). Runs stop by the lil-KLUCB rule "
           "or at 100 H_KL pulls (capped runs are counted and reported). Instances: one arm at mu_1 and n-1 at mu_2 "
           "('two:n:mu_1:mu_2'), or n linearly spaced means ('linear:n:top:bottom'), Bernoulli rewards."),
)
