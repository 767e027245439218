"""Instance families give the papers' means and hardness measures; the name parser is strict."""

import math

import numpy as np
import pytest

from purebandits.bounds import chernoff_information
from purebandits.instances import Bernoulli, Categorical, Gaussian, hardness, instance_names, make_instance


def test_one_sparse_matches_jmnb14():
    inst = make_instance("one_sparse:n=1000")
    assert isinstance(inst.model, Gaussian)
    assert inst.means[0] == 0.5 and np.all(inst.means[1:] == 0.0)
    np.testing.assert_allclose(inst.model.b, 0.5)  # variance 1/4
    assert inst.hardness().H1 == pytest.approx(4 * 999)  # JMNB14: H1 = 4(n-1)
    assert list(inst.top()) == [0]


@pytest.mark.parametrize("alpha, h1", [(0.3, 2376), (0.6, 17260)])
def test_lil_exponential_h1_matches_algorithms_md(alpha, h1):
    # ALGORITHMS.md 14.1: H1 = sum_{j=1..n-1} (j/n)^(-2 alpha); 2376 (alpha=0.3) and 17260 (0.6) at n=1000
    inst = make_instance(f"lil_exp:n=1000,alpha={alpha}")
    mu = inst.means
    assert mu[0] == 1.0 and mu[1] == pytest.approx(1 - (1 / 1000) ** alpha)
    assert np.all(np.diff(mu) < 0)
    assert inst.hardness().H1 == pytest.approx(h1, abs=0.5)
    j = np.arange(1, 1000)
    assert inst.hardness().H1 == pytest.approx(np.sum((j / 1000) ** (-2 * alpha)))


def test_tnm17_table1_scalings():
    # TNM17 Table 1 (gaps (i/n)^alpha, mu_1 = 1): alpha = 1: S_KL ~ n log n, S_SG ~ n^2;
    # alpha = 1/2: S_KL ~ n, S_SG ~ n log n
    def sums(alpha, n):
        h = make_instance(f"lil_exp:n={n},alpha={alpha},model=bernoulli").hardness()
        return h.S_KL, h.S_SG

    kl1, sg1 = sums(1, 1000)
    kl2, sg2 = sums(1, 4000)
    assert kl2 / kl1 == pytest.approx(4 * math.log(4000) / math.log(1000), rel=0.05)
    assert sg2 / sg1 == pytest.approx(16, rel=0.05)
    kl1, sg1 = sums(0.5, 1000)
    kl2, sg2 = sums(0.5, 4000)
    assert kl2 / kl1 == pytest.approx(4, rel=0.1)
    assert sg2 / sg1 == pytest.approx(4 * math.log(4000) / math.log(1000), rel=0.05)


def test_chernoff_information():
    # symmetric pair: z* = 1/2
    assert chernoff_information(0.3, 0.7) == pytest.approx(0.5 * math.log(0.5 / 0.3) + 0.5 * math.log(0.5 / 0.7))
    assert chernoff_information(0.5, 1.0) == pytest.approx(math.log(2))
    assert chernoff_information(0.0, 0.5) == pytest.approx(math.log(2))
    assert chernoff_information(0.4, 0.4) == 0.0
    # D*(x,y) is at least the Bhattacharyya bound TNM17 Sec. 2 uses
    for x, y in [(0.1, 0.2), (0.45, 0.55), (0.01, 0.9)]:
        d = y - x
        lower = math.log(1 / (math.sqrt(x * (x + d)) + math.sqrt((1 - x) * (1 - x - d))))
        assert chernoff_information(x, y) >= lower - 1e-12


def test_alpha_exponential_matches_jlq17():
    n, k, a = 100, 2, 0.3
    mu = make_instance(f"alpha_exp:n={n},k={k}").means
    i = np.arange(1, n + 1)
    expected = np.where(i <= k, (n - k) / n + (k / n) * (np.clip(k - i, 0, None) / k) ** a,
                        (n - k) / n - ((n - k) / n) * (np.clip(i - k, 0, None) / (n - k)) ** a)
    np.testing.assert_allclose(mu, expected)
    assert mu[k - 1] == pytest.approx((n - k) / n) and mu[-1] == pytest.approx(0.0)
    assert np.all(np.diff(mu) < 0)
    inst = make_instance("alpha_exp:n=100,k=50")
    assert list(inst.top()) == list(range(50)) and inst.k == 50


def test_best_k_one_sparse():
    inst = make_instance("one_sparse:n=20,k=10")
    assert inst.k == 10 and np.all(inst.means[:10] == 0.5) and np.all(inst.means[10:] == 0)
    h = inst.hardness()
    np.testing.assert_allclose(h.gaps, 0.5)
    assert h.H1 == pytest.approx(20 * 4)


@pytest.mark.parametrize("setup, m, head", [
    (1, 2, [0.7, 0.7, 0.5, 0.5]),
    (2, 2, [0.7, 0.7, 0.66, 0.66, 0.5]),
    (3, 4, [0.7] * 4 + [0.66] * 4 + [0.62] * 4 + [0.5]),
    (6, 2, [0.7, 0.7, 0.68, 0.5]),
])
def test_nsar_setups(setup, m, head):
    inst = make_instance(f"nsar:setup={setup},m={m}")
    assert isinstance(inst.model, Bernoulli) and inst.n_arms == 50 and inst.k == m
    np.testing.assert_allclose(inst.means[: len(head)], head)
    assert inst.means[-1] == 0.5


def test_nsar_setup1_budget_and_progression():
    # setup 1, M = 2: every gap is 0.2, so H1^(M) = 50 / 0.04 = 1250 (the budget ST17 uses)
    assert make_instance("nsar:setup=1,m=2").hardness().H1_all == pytest.approx(1250)
    mu = make_instance("nsar:setup=4,m=2").means
    np.testing.assert_allclose(mu[0] - mu, 0.6 * np.arange(50) / 49)  # Delta_i = 0.6 (i-1)/(K-1)
    beta = make_instance("nsar:setup=5,m=2")
    assert np.all((beta.means > 0) & (beta.means < 1)) and abs(beta.means.mean() - 0.5) < 0.05
    np.testing.assert_array_equal(beta.means, make_instance("nsar:setup=5,m=2").means)  # fixed per seed
    assert not np.array_equal(beta.means, make_instance("nsar:setup=5,m=2,seed=1").means)


def test_optmai_instances():
    u = make_instance("uniform:n=1000")
    assert isinstance(u.model, Bernoulli) and u.k == 10
    assert abs(u.means.mean() - 0.5) < 0.05
    t = make_instance("two_point:n=1000,k=20")
    assert np.all(t.means[:20] == 0.6) and np.all(t.means[20:] == 0.5)


def test_real_instances():
    c = make_instance("caption:558")
    assert isinstance(c.model, Categorical) and c.n_arms == 3925
    assert make_instance("caption:512").n_arms == 4399 and make_instance("caption:559").n_arms == 138
    r = make_instance("rte:k=10")
    assert r.n_arms == 164 and r.k == 10 and isinstance(r.model, Bernoulli)


def test_hardness_h2_and_hp():
    mu = [0.9, 0.8, 0.5, 0.5]
    h = hardness(mu, 1)
    gaps = np.array([0.1, 0.1, 0.4, 0.4])
    np.testing.assert_allclose(h.gaps, gaps)
    assert h.H1 == pytest.approx(1 / 0.01 + 2 / 0.16)
    assert h.H1_all == pytest.approx(2 / 0.01 + 2 / 0.16)
    assert h.H2 == pytest.approx(max(2 / 0.01, 3 / 0.16, 4 / 0.16))
    assert h.H(1) == pytest.approx(h.H2)
    assert h.H(2) == pytest.approx(max(4 / 0.01, 9 / 0.16, 16 / 0.16))
    # top-2: Delta = mu_i - mu_3 for the top two, mu_2 - mu_i for the rest (ST17 eq. 4)
    np.testing.assert_allclose(hardness(mu, 2).gaps, [0.4, 0.3, 0.3, 0.3])


def test_correctness_accepts_any_tied_top_set():
    inst = make_instance("custom:means=0.9/0.7/0.7/0.1,k=2")
    assert inst.is_correct([0, 1]) and inst.is_correct([2, 0])
    assert not inst.is_correct([0, 3]) and not inst.is_correct([0, 0]) and not inst.is_correct([0])
    assert inst.hardness().H1 == math.inf


def test_parser_names_round_trip():
    for spec in ["one_sparse:n=50,k=3", "lil_exp:n=100,alpha=0.6", "alpha_exp:n=30,k=15,alpha=0.3",
                 "nsar:setup=5,m=4,seed=3", "two_point:n=100,k=10", "caption:559", "rte:k=5",
                 "lil_exp:n=100,alpha=1,model=bernoulli"]:
        inst = make_instance(spec)
        again = make_instance(inst.name)
        assert again.name == inst.name and again.k == inst.k
        np.testing.assert_array_equal(again.means, inst.means)
    assert set(instance_names()) >= {"one_sparse", "lil_exp", "alpha_exp", "uniform", "two_point", "nsar",
                                     "caption", "rte"}


@pytest.mark.parametrize("spec, match", [
    ("nope", "unknown instance"),
    ("one_sparse:m=3", "unknown parameter 'm'"),
    ("one_sparse:n=1", "n must be"),
    ("one_sparse:n=10,k=10", "k must be"),
    ("nsar:setup=7", "setup must be"),
    ("caption:999", "unknown caption contest"),
    ("lil_exp:alpha=-1", "alpha must be"),
    ("one_sparse:n=10,n=20", "given twice"),
    ("one_sparse:model=poisson", "model must be"),
])
def test_parser_rejects_bad_specs(spec, match):
    with pytest.raises(ValueError, match=match):
        make_instance(spec)
