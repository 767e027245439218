"""The characteristic time T*(mu) of GK16 Thm 1 (purebandits.lower_bound) and the lower_bound experiment."""

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from purebandits.algorithms.track_and_stop import optimal_weights as tas_weights
from purebandits.bounds import kl_bernoulli
from purebandits.experiments.base import Context, get_experiment
from purebandits.instances import Bernoulli, Categorical, Gaussian, Instance, one_sparse, two_point
from purebandits.lower_bound import (
    characteristic_time,
    kinf,
    optimal_weights,
    sample_lower_bound,
    solve_characteristic_time,
)

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("method", ["auto", "cutting-plane"])
def test_two_gaussian_arms_closed_form(method):
    # T* = 8 sigma^2 / Delta^2; with sigmas s1, s2: w proportional to sigma, T* = 2 (s1 + s2)^2 / Delta^2
    r = solve_characteristic_time(Gaussian([0.5, 0.3], 0.25), method=method, rtol=1e-9)
    assert r.T_star == pytest.approx(8 * 0.25 / 0.2**2, rel=1e-8)
    np.testing.assert_allclose(r.weights, [0.5, 0.5], atol=1e-6)
    r = solve_characteristic_time(Gaussian([1.0, 0.0], [1.0, 4.0]), method=method, rtol=1e-9)
    assert r.T_star == pytest.approx(2 * (1 + 2) ** 2, rel=1e-8)
    np.testing.assert_allclose(r.weights, [1 / 3, 2 / 3], atol=1e-4)


def _two_arm_brute(mu1, mu2, div1, div2):
    """max_w inf_m [w D(1, m) + (1 - w) D(2, m)] by nested bounded scalar searches."""
    def inner(w):
        res = optimize.minimize_scalar(lambda m: w * div1(m) + (1 - w) * div2(m), bounds=(mu2, mu1),
                                       method="bounded", options={"xatol": 1e-13})
        return res.fun

    res = optimize.minimize_scalar(lambda w: -inner(w), bounds=(1e-6, 1 - 1e-6), method="bounded",
                                   options={"xatol": 1e-12})
    return -1.0 / res.fun


@pytest.mark.parametrize("mu", [(0.6, 0.4), (0.9, 0.2), (0.05, 0.01), (0.999, 0.98)])
def test_two_bernoulli_arms_against_brute_force(mu):
    brute = _two_arm_brute(mu[0], mu[1], lambda m: kl_bernoulli(mu[0], m), lambda m: kl_bernoulli(mu[1], m))
    for method in ("auto", "cutting-plane"):
        assert solve_characteristic_time(Bernoulli(mu), method=method, rtol=1e-9).T_star == \
            pytest.approx(brute, rel=1e-6)


def test_two_categorical_arms_against_brute_force():
    P = np.array([[0.3, 0.3, 0.4], [0.5, 0.3, 0.2]])
    v = [0.0, 0.5, 1.0]
    mu = P @ v
    brute = _two_arm_brute(mu[0], mu[1], lambda m: kinf(P[0], v, m, side="lower"), lambda m: kinf(P[1], v, m))
    assert characteristic_time(Categorical(P, v), rtol=1e-9) == pytest.approx(brute, rel=1e-6)


# --------------------------------------------------------------------------- k = 1 against Track-and-Stop
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k1_bernoulli_cutting_plane_matches_track_and_stop(seed):
    mu = np.random.default_rng(seed).uniform(0.05, 0.95, 8)
    gk = solve_characteristic_time(Bernoulli(mu))
    assert gk.method == "gk16-bernoulli"
    np.testing.assert_allclose(gk.weights, tas_weights(mu))
    lp = solve_characteristic_time(Bernoulli(mu), method="cutting-plane", rtol=1e-10)
    assert lp.T_star == pytest.approx(gk.T_star, rel=1e-8)
    np.testing.assert_allclose(lp.weights, gk.weights, atol=2e-4)


def test_k1_gaussian_closed_form_matches_cutting_plane_with_unequal_variances():
    rng = np.random.default_rng(3)
    model = Gaussian(rng.normal(0, 1, 7), rng.uniform(0.1, 2.0, 7))
    gk = solve_characteristic_time(model)
    assert gk.method == "gk16-gaussian"
    lp = solve_characteristic_time(model, method="cutting-plane", rtol=1e-10)
    assert lp.T_star == pytest.approx(gk.T_star, rel=1e-8)
    np.testing.assert_allclose(lp.weights, gk.weights, atol=2e-4)


# --------------------------------------------------------------------------- K_inf
def test_categorical_on_0_1_equals_bernoulli():
    mu = np.array([0.7, 0.55, 0.5, 0.3, 0.1])
    cat = Categorical(np.column_stack([1 - mu, mu]), [0.0, 1.0])
    for k in (1, 2, 3):
        assert characteristic_time(cat, k, rtol=1e-9) == pytest.approx(
            solve_characteristic_time(Bernoulli(mu), k, method="cutting-plane", rtol=1e-9).T_star, rel=1e-7)
    m = np.linspace(0.31, 0.99, 9)
    np.testing.assert_allclose(kinf([0.7, 0.3], [0, 1], m), kl_bernoulli(0.3, m), rtol=1e-10)
    low = np.linspace(0.01, 0.29, 9)
    np.testing.assert_allclose(kinf([0.7, 0.3], [0, 1], low, side="lower"), kl_bernoulli(0.3, low), rtol=1e-10)


def test_kinf_at_least_the_bernoulli_kl_of_the_mean_and_equals_the_primal():
    rng = np.random.default_rng(4)
    v = np.array([0.0, 0.5, 1.0])
    for _ in range(30):
        p = rng.dirichlet(np.ones(3))
        mu = float(p @ v)
        m = rng.uniform(mu, 1.0)
        k = kinf(p, v, m)
        assert k >= kl_bernoulli(mu, m) - 1e-12
        # the primal: min KL(p || q) over q on the support with mean >= m
        res = optimize.minimize(lambda q, p=p: float(np.sum(p * np.log(p / q))), p, method="SLSQP",
                                bounds=[(1e-12, 1)] * 3,
                                constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1},
                                             {"type": "ineq", "fun": lambda q, m=m: q @ v - m}],
                                options={"ftol": 1e-14, "maxiter": 500})
        assert k == pytest.approx(res.fun, rel=1e-5, abs=1e-9)
        assert kinf(p, v, mu - 1e-3) == 0.0  # m below the mean: nothing to push
    # no mass at 1: the alternative adds mass at 1 (the dual's maximiser is the end 1/(1-m))
    assert kinf([1.0, 0.0, 0.0], v, 0.3) == pytest.approx(-math.log(0.7))
    assert kinf([0.0, 0.0, 1.0], v, 0.7, side="lower") == pytest.approx(-math.log(0.7))
    assert kinf([0.5, 0.5, 0.0], v, 1.0) == math.inf


# --------------------------------------------------------------------------- top-k
@pytest.mark.parametrize(("n", "k"), [(10, 2), (20, 5), (9, 4)])
def test_top_k_symmetric_gaussian_closed_form(n, k):
    # k arms at 1/2, the rest at 0, sigma = 1/2: by symmetry w = a/k on top, (1-a)/(n-k) below,
    # T* = 2 sigma^2 (sqrt(k) + sqrt(n - k))^2 / Delta^2
    r = solve_characteristic_time(one_sparse(n, k), rtol=1e-9)
    assert r.T_star == pytest.approx(2 * 0.25 * (math.sqrt(k) + math.sqrt(n - k)) ** 2 / 0.25, rel=1e-8)
    a = math.sqrt(k) / (math.sqrt(k) + math.sqrt(n - k))
    np.testing.assert_allclose(r.weights[:k], a / k, rtol=1e-4)  # the value is flat at its max: w to ~sqrt(rtol)
    np.testing.assert_allclose(r.weights[k:], (1 - a) / (n - k), rtol=1e-4)


def test_top_k_symmetric_bernoulli_two_point():
    inst = two_point(12, 3, high=0.6, low=0.5)

    def value(a):  # the two-group problem, inner minimiser = the weighted mean (GK16 Lemma 3)
        wi, wj = a / 3, (1 - a) / 9
        m = (wi * 0.6 + wj * 0.5) / (wi + wj)
        return wi * kl_bernoulli(0.6, m) + wj * kl_bernoulli(0.5, m)

    res = optimize.minimize_scalar(lambda a: -value(a), bounds=(1e-6, 1 - 1e-6), method="bounded",
                                   options={"xatol": 1e-12})
    assert characteristic_time(inst, rtol=1e-9) == pytest.approx(-1 / res.fun, rel=1e-7)


def test_top_k_is_permutation_equivariant():
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(3), 12)
    perm = rng.permutation(12)
    a = solve_characteristic_time(Categorical(P), 3, rtol=1e-9)
    b = solve_characteristic_time(Categorical(P[perm]), 3, rtol=1e-9)
    assert a.T_star == pytest.approx(b.T_star, rel=1e-7)
    np.testing.assert_allclose(a.weights[perm], b.weights, atol=1e-3)


def test_tie_at_the_boundary_is_infinite():
    r = solve_characteristic_time(Gaussian([0.9, 0.5, 0.5, 0.1]), 2)
    assert r.T_star == math.inf and r.method == "tie"
    np.testing.assert_allclose(r.weights, 0.25)
    assert characteristic_time(Gaussian([0.9, 0.5, 0.5, 0.1]), 1) < math.inf  # only the boundary matters
    # equal means, different distributions: still a tie
    assert characteristic_time(Categorical([[0.2, 0.6, 0.2], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]]), 1) == math.inf
    assert sample_lower_bound(math.inf, 0.01) == math.inf


def test_instance_k_is_the_default_and_bad_input_is_refused():
    inst = Instance("x", Gaussian([0.9, 0.6, 0.5, 0.1]), 2)
    assert characteristic_time(inst) == characteristic_time(inst.model, 2)
    with pytest.raises(ValueError, match="k must be"):
        characteristic_time(inst.model, 4)
    with pytest.raises(TypeError):
        characteristic_time([0.5, 0.4])
    with pytest.raises(ValueError, match="delta"):
        sample_lower_bound(10.0, 1.0)
    assert sample_lower_bound(10.0, 0.01) == pytest.approx(10 * 0.98 * math.log(99))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.05, 0.95), min_size=3, max_size=8, unique=True), st.integers(1, 3),
       st.floats(0.0, 0.04), st.sampled_from(["bernoulli", "gaussian"]))
def test_t_star_decreases_when_gaps_grow(means, k, push, model):
    mu = np.array(means)
    k = min(k, mu.size - 1)
    top = np.argsort(-mu)[:k]
    wider = mu.copy()
    wider[top] = np.minimum(wider[top] + push, 0.99)  # top arms up, the others down
    others = np.setdiff1d(np.arange(mu.size), top)
    wider[others] = np.maximum(wider[others] - push, 0.01)
    make = Bernoulli if model == "bernoulli" else Gaussian
    assert characteristic_time(make(wider), k, rtol=1e-8) <= characteristic_time(make(mu), k, rtol=1e-8) * (1 + 1e-6)


def test_speed_on_a_contest_and_on_1000_bernoulli_arms():
    from purebandits.experiments.contests import top_m_contest

    inst = top_m_contest("558", 50, 5)
    start = time.perf_counter()
    r = solve_characteristic_time(inst)
    assert time.perf_counter() - start < 3.0 and r.rel_gap <= 1e-6  # ~0.2 s on an idle core
    start = time.perf_counter()
    w = optimal_weights(Bernoulli(np.random.default_rng(6).random(1000)))
    assert time.perf_counter() - start < 3.0 and w.sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------- the experiment
def _small_sources(tmp_path):
    """The committed source CSVs cut to their small cells."""
    src = ROOT / "docs" / "reproduction"
    keep = {"caption_extra": lambda d: d[d["contest"] == 512], "jlq17_fig1": lambda d: d[d["N"] == 10],
            "jlq17_fig2": lambda d: d[d["N"] == 10], "jmnb14_fig2": lambda d: d[d["n"] == 10]}
    for name, cut in keep.items():
        cut(pd.read_csv(src / f"{name}.csv")).to_csv(tmp_path / f"{name}.csv", index=False)
    return tmp_path


def test_experiment_reads_the_sources_and_divides_by_the_bound(tmp_path):
    exp = get_experiment("lower_bound")
    ctx = Context(scale="quick", overrides={"source_dir": str(_small_sources(tmp_path))})
    df = exp.compute(ctx, ctx.settings(exp))
    assert set(df["source"]) == {"caption_extra", "jlq17_fig1", "jlq17_fig2", "jmnb14_fig2"}
    tas = df[(df["source"] == "caption_extra") & (df["cell"] == "contest 512, k=1")
             & (df["algorithm"] == "Track-and-Stop")].iloc[0]
    assert tas["ratio"] == pytest.approx(tas["pulls_mean"] / (tas["T_star"] * kl_bernoulli(0.01, 0.99)))
    assert tas["delta_correct"] == "not proven"
    tie = df[df["cell"] == "contest 512, k=5"]
    assert np.isinf(tie["T_star"]).all() and tie["ratio"].isna().all()
    sparse = df[(df["source"] == "jmnb14_fig2") & (df["cell"] == "1-sparse, n=10")]
    assert sparse["T_star"].iloc[0] == pytest.approx(2 * 0.25 * (1 + 3) ** 2 / 0.25)  # GK16, closed form
    faithful = df[df["algorithm"] == "lil'RandLUCB (faithful)"]
    assert (faithful["delta_correct"] == "proven").all()
    verdict = exp.assess(df)
    assert "contest 512, k=1" in verdict.summary and verdict.table is not None


def test_experiment_names_a_missing_source(tmp_path):
    exp = get_experiment("lower_bound")
    src = _small_sources(tmp_path)
    (src / "jlq17_fig2.csv").unlink()
    ctx = Context(scale="paper", overrides={"source_dir": str(src)})
    with pytest.raises(ValueError, match="jlq17_fig2.csv missing"):
        exp.compute(ctx, ctx.settings(exp))
    with pytest.raises(ValueError, match="source_dir"):  # paper scale: no fallback to the committed results
        exp.compute(Context(scale="paper"), Context(scale="paper").settings(exp))


def test_experiment_puts_proven_stopping_beside_the_caption_learners(tmp_path):
    """proven_stopping.csv, when present, joins the contest cells with its statistic and its threshold's floor."""
    from purebandits.experiments.contests import top_m_contest
    from purebandits.experiments.proven_glr import threshold_floor_samples

    src = _small_sources(tmp_path)
    pd.DataFrame([
        {"cell": "contest 512, top 50", "n": 50, "algorithm": "Track-and-Stop, K_inf stop", "statistic": "K_inf",
         "reps": 20, "capped": 0, "errors": 0, "errors_stopped": 0, "pulls_mean": 9000.0, "max_pulls": 10**7},
        {"cell": "Bernoulli, 10 arms", "n": 10, "algorithm": "Track-and-Stop, GK16", "statistic": "Bernoulli",
         "reps": 20, "capped": 0, "errors": 0, "errors_stopped": 0, "pulls_mean": 3000.0, "max_pulls": 10**7},
    ]).to_csv(src / "proven_stopping.csv", index=False)
    exp = get_experiment("lower_bound")
    ctx = Context(scale="quick", overrides={"source_dir": str(src)})
    df = exp.compute(ctx, ctx.settings(exp))
    row = df[(df["source"] == "proven_stopping") & (df["cell"] == "contest 512, k=1")].iloc[0]
    tas = df[(df["source"] == "caption_extra") & (df["cell"] == "contest 512, k=1")
             & (df["algorithm"] == "Track-and-Stop")].iloc[0]
    assert row["T_star"] == pytest.approx(tas["T_star"])  # the same instance as caption_extra's cell
    assert row["T_star_Bern"] > row["T_star"]  # the ratings' own model separates the captions sooner
    assert row["delta_correct"] == "proven" and row["ratio"] == pytest.approx(9000.0 / row["lower_bound"])
    sol = solve_characteristic_time(top_m_contest("512", 50, 1), 1, rtol=1e-4)
    floor = threshold_floor_samples(sol.T_star, 50, 0.01, "K_inf", sol.weights) / row["lower_bound"]
    assert row["floor_ratio"] == pytest.approx(floor, rel=1e-3)
    assert np.isnan(tas["floor_ratio"])  # not proven: no proven threshold's floor is claimed for it
    bern = df[df["cell"] == "Bernoulli, 10 arms"].iloc[0]
    assert bern["T_star_Bern"] == pytest.approx(bern["T_star"]) and bern["floor_ratio"] > 1.0
    table = exp.assess(df).table
    cell = table.loc[table["learner"] == "Track-and-Stop, K_inf stop", "contest 512, k=1"].iloc[0]
    assert cell.startswith(f"{row['ratio']:.2f} (floor {row['floor_ratio']:.2f})")
