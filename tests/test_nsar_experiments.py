"""ST17 additions: NSE vs SR/SH at M = 1 (st17_nse) and Corollary 3 / Table III (st17_cor3).

The assess functions are fed synthetic tables on which the claim holds and on which it fails."""

import math

import numpy as np
import pandas as pd
import pytest

from purebandits.experiments import st17_cor3, st17_nse
from purebandits.experiments.st17 import (
    bound_complexity,
    c_p,
    c_p_limit,
    encode_outcomes,
    sorted_gaps,
)
from purebandits.instances import hardness, nsar_setup


# --------------------------------------------------------------------------- shared helpers (st17.py)
def test_c_p_is_logbar_at_one_and_converges_above_one():
    assert c_p(50, 1.0) == pytest.approx(0.5 + sum(1 / i for i in range(2, 51)))
    assert c_p(10**6, 1.3) < c_p_limit(1.3) < c_p(10**6, 1.3) + 10**6 ** (-0.3) / 0.3
    assert math.isinf(c_p_limit(0.85))


@pytest.mark.parametrize("setup", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("m", [1, 2, 4])
def test_bound_complexity_matches_hardness(setup, m):
    mu = nsar_setup(setup, m).means
    h = hardness(mu, m)
    np.testing.assert_allclose(sorted_gaps(mu, m), np.sort(h.gaps))
    b = bound_complexity(mu, m, (0.7, 1.0, 1.3))
    for p, v in b.items():
        assert v["H_p"] == pytest.approx(h.H(p))
        assert v["complexity"] == pytest.approx(c_p(mu.size, p) * h.H(p))
    assert b[1.0]["H_p"] == pytest.approx(h.H2)


# --------------------------------------------------------------------------- st17_nse
def _nse_rows(errors: dict[str, int], runs: int = 400, setups=(1, 6), shift: bool = False) -> pd.DataFrame:
    """A synthetic st17_nse table: algorithm A errs in its first errors[A] runs (so runs are nested: the one with
    fewer errors never errs alone); ``shift`` makes the errors of every algorithm disjoint instead."""
    rows = []
    for s in setups:
        start = 0
        for lab, e in errors.items():
            wrong = np.zeros(runs, dtype=bool)
            lo = start if shift else 0
            wrong[lo:lo + e] = True
            start += e if shift else 0
            rows.append({"setup": s, "M": 1, "n": 50, "table1_alpha": 1.0, "algorithm": lab, "budget": 1000,
                         "seed": 0, "errors": e, "runs": runs, "p_err": e / runs, "ci_low": 0.0, "ci_high": 1.0,
                         "note": "", "outcomes": encode_outcomes(wrong)})
    return pd.DataFrame(rows)


def _errs(nse: int, sr: int, sh: int, uni: int = 200) -> dict[str, int]:
    return {**{f"NSE p={p}": nse for p in (0.7, 0.85, 1.1, 1.2, 1.3)}, "SR": sr, "SH": sh, "UNI": uni}


def test_nse_assess_holds_when_nse_errs_less_on_shared_runs():
    v = st17_nse.assess(_nse_rows(_errs(60, 100, 120)))
    assert v.status == "holds", v.summary
    assert list(v.table["holds"]) == ["yes", "yes"]


def test_nse_assess_fails_when_nse_is_not_better():
    assert st17_nse.assess(_nse_rows(_errs(100, 100, 120))).status == "does not hold"  # ties SR
    assert st17_nse.assess(_nse_rows(_errs(100, 60, 60))).status == "does not hold"  # worse
    # a 50-run edge split over disjoint runs (50 discordant pairs of 250) is not significant at 0.05/2
    v = st17_nse.assess(_nse_rows(_errs(100, 110, 300), shift=True))
    assert v.status == "does not hold"


def test_nse_assess_suitable_p_depends_on_setup():
    errs = _errs(110, 100, 120)
    errs["NSE p=0.7"] = 50  # only p < 1 is better: counts in setup 1, not in setup 6
    v = st17_nse.assess(_nse_rows(errs))
    assert v.status == "partly"
    assert list(v.table["holds"]) == ["yes", "no"]


def test_nse_assess_leaves_thin_comparisons_open():
    v = st17_nse.assess(_nse_rows(_errs(0, 2, 30), runs=40))  # only 2 runs where exactly one of NSE/SR errs
    assert set(v.table["holds"]) == {"not judged"}
    assert v.status == "does not hold" and "0 of 0 judged" in v.summary


def test_nse_quick_compute_shares_seeds_and_keeps_outcomes():
    from purebandits.experiments.base import Context

    df = st17_nse.compute(Context(progress=False, jobs=1), {"setups": [1], "n": 50, "reps": 8})
    assert list(df["algorithm"]) == [lab for lab, _, _ in st17_nse.specs()]
    assert df["seed"].nunique() == 1 and (df["outcomes"].str.len() == 8).all()
    assert df.loc[df["algorithm"] == "SR", "table1_alpha"].iloc[0] == pytest.approx(
        bound_complexity(nsar_setup(1, 1).means, 1, (1.0,))[1.0]["complexity"])


# --------------------------------------------------------------------------- st17_cor3
KS = [int(k) for k in np.unique(np.round(np.logspace(1, 4, 13)).astype(int))]


def test_regime_families_have_the_stated_gaps():
    mu = st17_cor3.family_means("R2 setup 6", 50)
    np.testing.assert_allclose(mu[:4], [0.7, 0.7, 0.68, 0.5])
    g = sorted_gaps(mu, 2)
    np.testing.assert_allclose(g[:3], 0.02)
    np.testing.assert_allclose(g[3:], 0.2)
    # K* is where the M'-th and the K-th terms of H(p) meet
    b = st17_cor3.family_bounds("R2 setup 6", 1.2)
    d1, d2, mp = 0.02, 0.18, 3
    assert mp ** 1.2 / d1 ** 2 == pytest.approx(b["K_star"] ** 1.2 / (d1 + d2) ** 2)


def test_cor3_exact_checks_hold_in_regime_1_and_inside_the_window():
    df = pd.DataFrame(st17_cor3.complexity_rows(KS))
    for (fam, p), g in df.groupby(["family", "p"]):
        j = st17_cor3.judge(g)
        assert j["ok"] == (fam != "R2 setup 6"), (fam, p, j)
        if fam == "R2 setup 6":  # fails exactly past the window K*
            kstar = float(g["K_star"].iloc[0])
            assert j["first_bad_K"] > kstar and max(k for k in KS if k <= kstar) < j["first_bad_K"]
    v = st17_cor3.assess(df)
    assert v.status == "partly" and "R1: 2/2" in v.summary and "R2 wide: 3/3" in v.summary
    assert st17_cor3.assess(df[df["family"] != "R2 setup 6"]).status == "holds"


def test_cor3_assess_fails_when_nsar_grows_like_k_log_k():
    df = pd.DataFrame(st17_cor3.complexity_rows(KS))
    df = df[df["family"] != "R2 setup 6"].copy()
    bad = df.copy()
    bad["nsar"] *= bad["logbar"]  # NSAR no better than SAR's order: O(K log K) in R1, O(log K) in R2
    bad["nsar_over_g"] *= bad["logbar"]
    bad["ratio"] /= bad["logbar"]
    v = st17_cor3.assess(bad)
    assert v.status == "does not hold", v.summary
    assert set(v.table["NSAR=O(g)"]) == {"no"}
    # a SAR that does not grow by the log factor (SAR/(g logbar K) below its constant) also fails check (b)
    flat = df.copy()
    flat["sar_over_g_logbar"] /= flat["logbar"]
    assert set(st17_cor3.assess(flat).table["SAR=Theta(g log K)"]) == {"no"}


def test_cor3_quick_compute_has_sim_rows_and_plots():
    from purebandits.experiments.base import Context

    df = st17_cor3.compute(Context(progress=False, jobs=1), {"ks": [10, 100], "sim_ks": [10], "sim_reps": 6})
    sim = df[df["kind"] == "sim"]
    assert set(sim["family"]) == {"R1", "R2 setup 6"} and (sim["runs"] == 6).all()
    assert sim.groupby("family")["seed"].nunique().eq(1).all()
    v = st17_cor3.assess(df)
    assert "Simulation (not judged" in v.summary
    import matplotlib

    matplotlib.use("Agg")
    st17_cor3.plot(df)
