"""Reproductions added after the audit: ZCL14 appendix and Fig. 2(a), TNM17 Theorem 1, AT-LUCB's anytime curve.

Each assess is fed synthetic tables on which the paper's claim holds and on which it fails."""

import math

import numpy as np
import pandas as pd
import pytest

from purebandits.experiments import st17_atlucb_anytime, tnm17_thm1, zcl14_appendix, zcl14_fig2a
from purebandits.experiments.base import Context
from purebandits.experiments.zcl14 import appendix_means, cell_comparisons
from purebandits.metrics import wilson_interval


# --------------------------------------------------------------------------- ZCL14 appendix
def test_appendix_means_are_fixed_draws_in_the_unit_interval():
    for dist, params in (("truncnorm", {"mean": 0.5, "sd": 0.2}), ("beta", {"a": 2.0, "b": 5.0})):
        a = appendix_means(dist, 500, seed=0, **params)
        assert a.shape == (500,) and np.all((a >= 0) & (a <= 1))
        np.testing.assert_array_equal(a, appendix_means(dist, 500, seed=0, **params))
    assert abs(appendix_means("beta", 5000, a=2.0, b=5.0).mean() - 2 / 7) < 0.02
    with pytest.raises(ValueError):
        appendix_means("gamma", 10)


def _regret_rows(regrets: dict[str, list[float]], ks: list[int], se: float = 0.001) -> pd.DataFrame:
    rows = []
    for inst in ("truncnorm", "beta"):
        for j, k in enumerate(ks):
            for alg, r in regrets.items():
                rows.append({"instance": inst, "Q/n": 20, "K": k, "algorithm": alg, "regret": r[j],
                             "regret_sem": se, "dist_params": "{}"})
    return pd.DataFrame(rows)


GOOD = {"OptMAI beta=0.8": [0.030, 0.020, 0.010, 0.005], "OptMAI beta=0.9": [0.025, 0.018, 0.012, 0.008],
        "SAR": [0.040, 0.030, 0.020, 0.010], "LUCB": [0.045, 0.035, 0.025, 0.012],
        "uniform": [0.080, 0.060, 0.040, 0.020]}


def test_appendix_assess_holds_and_fails():
    ks = [10, 50, 100, 200]
    assert zcl14_appendix.assess(_regret_rows(GOOD, ks)).status == "holds"
    bad = dict(GOOD, uniform=[0.001] * 4)  # uniform best: Fig. 1's first statement fails
    v = zcl14_appendix.assess(_regret_rows(bad, ks))
    assert v.status == "partly" and "uniform worst in 0/4" in v.summary
    worse = dict(GOOD, SAR=[0.001] * 4, uniform=[0.001] * 4, **{"OptMAI beta=0.8": GOOD["OptMAI beta=0.9"],
                                                             "OptMAI beta=0.9": GOOD["OptMAI beta=0.8"]})
    assert zcl14_appendix.assess(_regret_rows(worse, ks)).status == "does not hold"


def test_cell_comparisons_use_the_monte_carlo_error():
    regs = dict(GOOD, SAR=[0.0245, 0.030, 0.020, 0.010])  # OptMAI 0.0005 above SAR at K = 10
    c = cell_comparisons(_regret_rows(regs, [10, 50, 100, 200], se=0.001)).set_index(["instance", "K"])
    assert not c.loc[("beta", 10), "opt_lower"] and c.loc[("beta", 10), "opt_not_worse"]
    c = cell_comparisons(_regret_rows(regs, [10, 50, 100, 200], se=0.0001)).set_index(["instance", "K"])
    assert not c.loc[("beta", 10), "opt_not_worse"]


# --------------------------------------------------------------------------- ZCL14 Fig. 2(a)
def test_fig2a_on_the_bundled_rte_data():
    df = zcl14_fig2a.compute(Context(), {"bins": 20})
    assert (df["kind"] == "worker").sum() == 164
    assert df.loc[df["kind"] == "hist", "workers"].sum() == 164
    assert zcl14_fig2a.assess(df).status == "holds"


def _workers(labels: list[int]) -> pd.DataFrame:
    rows = []
    for i, n in enumerate(labels):
        c = n * 8 // 10
        lo, hi = wilson_interval(c, n)
        rows.append({"kind": "worker", "worker_id": str(i), "labels": n, "correct": c, "accuracy": c / n,
                     "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


RIGHT = [48] * 160 + [80] * 4  # 164 workers, 8000 labels


def test_fig2a_assess_holds_and_fails():
    assert zcl14_fig2a.assess(_workers(RIGHT)).status == "holds"
    v = zcl14_fig2a.assess(_workers(RIGHT[:-1]))  # 163 workers, 7920 labels: two statements fail
    assert v.status == "partly" and "163 workers (paper 164)" in v.summary
    df = _workers(RIGHT)
    df.loc[0, "accuracy"] = 1.5
    assert zcl14_fig2a.assess(df).status == "partly"
    df = _workers([3] * 10)
    df["accuracy"] = 1.5
    assert zcl14_fig2a.assess(df).status == "does not hold"


# --------------------------------------------------------------------------- TNM17 Theorem 1
def test_complexity_kl_below_subgaussian_and_decreasing_in_gap():
    mu = tnm17_thm1.family_means("two:10:0.99:0.95")
    assert mu.size == 10 and mu[0] == 0.99
    assert tnm17_thm1.complexity(mu, 0.01, "kl") < tnm17_thm1.complexity(mu, 0.01, "sg")  # D* >= Delta^2/2
    h = [tnm17_thm1.complexity(tnm17_thm1.family_means(f"two:10:{a}:0.5"), 0.01) for a in (0.6, 0.7, 0.8)]
    assert h[0] > h[1] > h[2]
    assert tnm17_thm1.family_means("linear:5:0.9:0.5").tolist() == pytest.approx([0.9, 0.8, 0.7, 0.6, 0.5])
    with pytest.raises(ValueError):
        tnm17_thm1.family_means("sparse:3:1:0")


def test_loglog_fit_recovers_a_slope_and_inflates_for_scatter():
    x = np.geomspace(1e3, 1e5, 8)
    f = tnm17_thm1.loglog_fit(x, 3 * x**0.8, 0.01 * 3 * x**0.8)
    assert f["slope"] == pytest.approx(0.8) and f["se"] == pytest.approx(f["se_mc"])
    noisy = 3 * x * np.array([1.2, 0.8, 1.2, 0.8, 1.2, 0.8, 1.2, 0.8])
    g = tnm17_thm1.loglog_fit(x, noisy, 0.01 * noisy)
    assert g["chi2_dof"] > 1 and g["se"] > g["se_mc"]


def _thm1_table(power: float, errors: int = 0, reps: int = 2000) -> pd.DataFrame:
    rows = []
    specs = ["two:2:0.6:0.4", "two:10:0.8:0.5", "two:10:0.99:0.95", "two:10:0.6:0.5", "two:10:0.1:0.02"]
    for spec in specs:
        mu = tnm17_thm1.family_means(spec)
        h_kl, h_sg = tnm17_thm1.complexity(mu, 0.01, "kl"), tnm17_thm1.complexity(mu, 0.01, "sg")
        mean = 2.0 * h_kl**power * 1e3 ** (1 - power)
        lo, hi = wilson_interval(errors, reps)
        rows.append({"instance": spec, "delta": 0.01, "H_KL": h_kl, "H_SG": h_sg, "reps": reps, "pulls_mean": mean,
                     "pulls_sem": 0.01 * mean, "pulls_q_1m2delta": 1.5 * mean, "capped": 0, "errors": errors,
                     "error_ci_low": lo, "error_ci_high": hi})
    return pd.DataFrame(rows)


def test_thm1_assess_holds_and_fails():
    assert tnm17_thm1.assess(_thm1_table(1.0)).status == "holds"
    v = tnm17_thm1.assess(_thm1_table(0.7))  # sub-linear scaling: the slope check fails
    assert v.status == "partly" and "outside 2 s.e. of 1" in v.summary
    v = tnm17_thm1.assess(_thm1_table(1.0, errors=200))  # 10% errors against 2 delta = 2%
    assert v.status == "partly" and "Errors 1000 of 10000" in v.summary


# --------------------------------------------------------------------------- AT-LUCB anytime
def _curve(p_at: list[float], p_uni: list[float], runs: int = 4000) -> pd.DataFrame:
    rows = []
    samples = [50, 200, 1000, 1251, 5000]
    for alg, ps in (("AT-LUCB", p_at), ("uniform", p_uni)):
        for s, p in zip(samples, ps, strict=True):
            x = int(round(p * runs))
            lo, hi = wilson_interval(x, runs)
            rows.append({"setup": 1, "M": 2, "n": 50, "T": 1251, "algorithm": alg, "samples": s, "errors": x,
                         "runs": runs, "p_err": x / runs, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def test_atlucb_assess_holds_and_fails():
    uni = [1.0, 0.95, 0.9, 0.85, 0.6]
    assert st17_atlucb_anytime.assess(_curve([1.0, 0.8, 0.4, 0.3, 0.05], uni)).status == "holds"
    v = st17_atlucb_anytime.assess(_curve([1.0, 0.3, 0.6, 0.5, 0.2], uni))  # rises after 200 samples
    assert v.status == "partly" and "rises significantly between checkpoints in 1" in v.summary
    v = st17_atlucb_anytime.assess(_curve([1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 0.9, 0.5, 0.3, 0.1]))
    assert v.status == "partly"  # flat at 1: never decreases and loses to uniform; never rises either
    assert "checkpoint) in 0 of 1" in v.summary
    v = st17_atlucb_anytime.assess(_curve([1.0, 0.8, 0.4, 0.3, 0.29], uni))  # stalls after T
    assert v.status == "partly" and "checkpoint) in 0 of 1 (setup, M)" in v.summary


def test_atlucb_first_below():
    df = _curve([1.0, 0.8, 0.4, 0.05, 0.01], [1.0] * 5)
    a = df[df["algorithm"] == "AT-LUCB"]
    assert st17_atlucb_anytime.first_below(a) == 1251
    assert math.isnan(st17_atlucb_anytime.first_below(df[df["algorithm"] == "uniform"]))
