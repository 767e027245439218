"""The certificate (purebandits.certificate, ``purebandits verify``, ``GET /api/experiments/{eid}/certificate``).

Hand-checked cases on the support {0, 1}, where the K_inf GLR statistic is the Bernoulli one in closed form
(``N_a d(p_a, m) + N_b d(p_b, m)``, m the pooled mean) and beta is written out here; bad input; the answers export
of a real service through the command line, against the API's certificate of the same answers; and a statistical
check on simulated ratings (a clear best item is certified, equal items are certified at most at the rate delta
allows).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats

from purebandits.certificate import certify
from purebandits.cli import main
from purebandits.kinf_glr import kinf_pair_cost
from purebandits.service.app import create_app
from purebandits.service.settings import Settings

RATINGS = [0.0, 0.5, 1.0]


def bernoulli_z(ones_a: int, n_a: int, ones_b: int, n_b: int) -> float:
    """The two-arm GLR statistic of Bernoulli counts, in closed form."""
    def d(p: float, q: float) -> float:
        return (p * math.log(p / q) if p > 0 else 0.0) + ((1 - p) * math.log((1 - p) / (1 - q)) if p < 1 else 0.0)
    pa, pb = ones_a / n_a, ones_b / n_b
    m = (n_a * pa + n_b * pb) / (n_a + n_b)
    return n_a * d(pa, m) + n_b * d(pb, m)


def kt_beta(t: int, n_items: int, delta: float, k: int = 1) -> float:
    """log(k (K - k) / delta) + log(1 + t/2) + 2 log 2, written out."""
    return math.log(k * (n_items - k) / delta) + math.log(1 + t / 2) + 2 * math.log(2)


def kt_pair_beta(n_a: int, n_b: int, n_items: int, delta: float, k: int = 1) -> float:
    """log(k (K - k) / delta) plus each item's exact betting regret log(sqrt(pi) Gamma(N + 1) / Gamma(N + 1/2))."""
    def regret(n: int) -> float:
        return 0.5 * math.log(math.pi) + math.lgamma(n + 1) - math.lgamma(n + 0.5)
    return math.log(k * (n_items - k) / delta) + regret(n_a) + regret(n_b)


# ---------------------------------------------------------------------------- hand-checked cases
def test_the_default_threshold_is_each_pairs_own():
    """kinf-kt-pairs (the default, and the learners' K_inf stop): the pair against log(1/delta) plus its two items'
    exact regrets, 6.857 here, below the t-form's 7.123; 16 vs 3 ones of 30 (Z = 6.980) passes it, not the t-form."""
    counts = [[14, 16], [27, 3]]
    cert = certify(counts, [0.0, 1.0], 0.1)
    assert cert.threshold == "kinf-kt-pairs" and cert.holds
    row = cert.rivals[0]
    assert row.beta == pytest.approx(kt_pair_beta(30, 30, 2, 0.1), rel=1e-12) == pytest.approx(6.857, abs=1e-3)
    assert row.beta < kt_beta(60, 2, 0.1)
    assert row.z == pytest.approx(bernoulli_z(16, 30, 3, 30), rel=1e-7) and row.z > row.beta
    assert not certify(counts, [0.0, 1.0], 0.1, threshold="kinf-kt").holds


@pytest.mark.parametrize("ones_a, ones_b, holds", [(19, 5, True), (16, 3, False)])
def test_two_items_just_above_and_below_beta(ones_a, ones_b, holds):
    """30 answers each on {0, 1}: 19 vs 5 ones gives Z = 7.149 > beta = 7.123; 16 vs 3 gives Z = 6.980 < beta."""
    counts = [[30 - ones_a, ones_a], [30 - ones_b, ones_b]]
    cert = certify(counts, [0.0, 1.0], 0.1, threshold="kinf-kt")
    z, beta = bernoulli_z(ones_a, 30, ones_b, 30), kt_beta(60, 2, 0.1)
    assert abs(z - beta) < 0.15 and (z > beta) == holds  # the case is as close as described
    assert cert.beta == pytest.approx(beta, rel=1e-12)
    assert cert.z_min == pytest.approx(z, rel=1e-7)
    assert cert.holds is holds and cert.t == 60 and cert.recommendation == (0,) and cert.n_rivals == 1
    row = cert.rivals[0]
    assert (row.item, row.rival, row.n_item, row.n_rival, row.defeated) == (0, 1, 30, 30, holds)
    assert row.mean_item == pytest.approx(ones_a / 30) and row.margin == pytest.approx(z - beta, rel=1e-6)
    assert ("holds" if holds else "does not hold") in cert.explanation
    assert bool(cert.reasons) is not holds


def test_ratings_use_the_kinf_statistic_and_the_named_threshold():
    """On {0, 1/2, 1} Z is kinf_pair_cost's; kinf-portfolio's beta is log((K-1)/delta) + 2 log(1 + t/2)."""
    counts = np.array([[60, 90, 150], [135, 90, 75], [150, 90, 60]])
    cert = certify(counts, RATINGS, 0.05, threshold="kinf-portfolio", items=["x", "y", "z"])
    assert cert.beta == pytest.approx(math.log(2 / 0.05) + 2 * math.log(1 + 900 / 2))
    z = kinf_pair_cost(counts[[0, 0]], counts[[1, 2]], RATINGS)
    assert [r.rival_name for r in cert.rivals] == ["y", "z"]  # the weakest first
    assert [r.z for r in cert.rivals] == pytest.approx(sorted(z))
    assert cert.holds and cert.recommendation_names == ("x",) and cert.n_defeated == 2
    as_json = json.loads(json.dumps(cert.to_dict(max_rivals=1)))
    assert as_json["n_rivals"] == 2 and len(as_json["rivals"]) == 1 and as_json["holds"] is True


def test_recommendation_not_the_empirical_best_does_not_hold():
    counts = [[0, 0, 100], [100, 0, 0], [100, 0, 0]]
    assert certify(counts, RATINGS, 0.05).holds
    cert = certify(counts, RATINGS, 0.05, recommendation=[1])
    assert not cert.holds and cert.empirical_top == (0,)
    assert any("not the empirical top 1" in r and "'0'" in r for r in cert.reasons)
    assert certify(counts, RATINGS, 0.05, recommendation=["a"], items=["a", "b", "c"]).holds


def test_top_k_pairs_and_an_item_without_answers():
    counts = [[0, 0, 90], [0, 10, 80], [90, 0, 0], [0, 0, 0]]
    cert = certify(counts, RATINGS, 0.05, k=2, items=["a", "b", "c", "silent"], threshold="kinf-kt")
    assert cert.recommendation == (0, 1) and cert.n_rivals == 4 and not cert.holds
    assert cert.beta == pytest.approx(kt_beta(270, 4, 0.05, k=2))
    assert {r.rival_name for r in cert.rivals[:2]} == {"silent"} and cert.rivals[0].z == 0.0
    assert cert.rivals[0].mean_rival is None
    assert any("no answers" in r and "'silent'" in r for r in cert.reasons)
    assert certify(np.array(counts)[:3], RATINGS, 0.05, k=2).holds  # without it the same answers hold


@pytest.mark.parametrize("kwargs, message", [
    ({"label_counts": [[1, -1, 3], [2, 2, 2]]}, "nonnegative"),
    ({"values": [0.0, 0.5, 2.0]}, "in \\[0, 1\\]"),
    ({"delta": 0.0}, "delta"),
    ({"delta": 1.0}, "delta"),
    ({"k": 2}, "k must be"),
    ({"k": 0}, "k must be"),
    ({"threshold": "gk16"}, "proven for the K_inf"),
    ({"recommendation": [5]}, "neither an item name"),
    ({"recommendation": [0, 1]}, "k = 1 distinct"),
    ({"label_counts": [[0, 0, 0], [0, 0, 0]]}, "no answers"),
])
def test_bad_input_raises_value_error(kwargs, message):
    args = {"label_counts": [[1, 2, 3], [2, 2, 2]], "values": RATINGS, "delta": 0.05, **kwargs}
    with pytest.raises(ValueError, match=message):
        certify(args.pop("label_counts"), args.pop("values"), args.pop("delta"), **args)


def test_exact_rivals_gives_the_same_verdict_and_weakest_rivals():
    """With Z computed for the 5 weakest rivals only, the verdict, the count of defeated rivals and the 5 weakest
    (items and Z) are those of the full computation."""
    rng = np.random.default_rng(7)
    probs = rng.dirichlet([2, 2, 2], size=300)
    counts = np.array([rng.multinomial(int(rng.integers(50, 400)), p) for p in probs])
    counts[11] = [0, 10, 390]  # a clear best, so that many rivals are defeated
    for delta in (0.05, 1e-6):
        full = certify(counts, RATINGS, delta, k=2)
        part = certify(counts, RATINGS, delta, k=2, exact_rivals=5)
        assert (part.holds, part.n_defeated, part.z_min) == (full.holds, full.n_defeated, full.z_min)
        assert [(r.item, r.rival) for r in part.rivals[:5]] == [(r.item, r.rival) for r in full.rivals[:5]]
        assert [r.z for r in part.rivals[:5]] == pytest.approx([r.z for r in full.rivals[:5]])
        assert [r.defeated for r in sorted(part.rivals, key=lambda r: (r.item, r.rival))] == \
            [r.defeated for r in sorted(full.rivals, key=lambda r: (r.item, r.rival))]
    assert 0 < full.n_defeated < full.n_rivals  # the check above compared both kinds of rows


# ---------------------------------------------------------------------------- statistical check
def simulated_counts(rng: np.random.Generator, probs: np.ndarray, n: int) -> np.ndarray:
    """n ratings per item, drawn from each item's rating distribution."""
    return np.array([rng.multinomial(n, p) for p in probs])


def test_clear_best_item_is_certified():
    """Item 0 (mean 0.65) against four items of mean 0.45, 1000 ratings each: holds in every seeded run."""
    probs = np.array([[0.2, 0.3, 0.5]] + [[0.4, 0.3, 0.3]] * 4)
    rng = np.random.default_rng(2024)
    for _ in range(20):
        cert = certify(simulated_counts(rng, probs, 1000), RATINGS, 0.05)
        assert cert.holds and cert.recommendation == (0,)


def test_equal_items_are_rarely_certified():
    """Three items with the same rating distribution: every recommendation is wrong, so a certificate may hold in
    at most a delta share of runs; 200 seeded runs must stay under the 0.999-quantile of Binomial(200, delta)."""
    delta, runs = 0.1, 200
    probs = np.array([[0.3, 0.3, 0.4]] * 3)
    rng = np.random.default_rng(99)
    held = sum(certify(simulated_counts(rng, probs, int(rng.integers(5, 200))), RATINGS, delta).holds
               for _ in range(runs))
    assert held <= stats.binom.ppf(0.999, runs, delta)


# ---------------------------------------------------------------------------- the service: CSV, CLI, API
PER_ITEM = 10


def make_client(tmp_path) -> TestClient:
    return TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'service.sqlite'}")))


def create(client: TestClient, items: list[dict], **spec) -> tuple[int, dict[str, str]]:
    r = client.post("/api/experiments", json={"name": "certificate test", "items": items, "seed": 5, **spec})
    assert r.status_code == 201, r.text
    return r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}


def answer(client: TestClient, eid: int, label_of: dict[str, list[str]]) -> None:
    """Answer whatever the learner asks; item x's j-th answer is label_of[x][j % len]."""
    given = dict.fromkeys(label_of, 0)
    for _ in range(sum(len(v) for v in label_of.values())):
        pid = client.post("/api/participants").json()["participant_id"]
        q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "ok", q
        x = q["item"]["id"]
        label = label_of[x][given[x] % len(label_of[x])]
        given[x] += 1
        r = client.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
        assert r.status_code == 200, r.text


@pytest.fixture
def contest(tmp_path):
    """A uniform-allocation experiment of 4 captions, 10 answers each: 'best' rated funny 9 times out of 10,
    '-minus' (an id the CSV export neutralizes) and the others mostly unfunny; its answers.csv on disk."""
    with make_client(tmp_path) as client:
        yield (client, *_answered_contest(client, tmp_path))


def _answered_contest(client: TestClient, tmp_path: Path) -> tuple[int, dict[str, str], Path]:
    items = [{"id": x, "text": f"caption {x}"} for x in ("best", "-minus", "c", "d")]
    eid, auth = create(client, items, algorithm="uniform_allocation", params={"budget": PER_ITEM * 4})
    answer(client, eid, {"best": ["funny"] * 9 + ["somewhat funny"],
                         "-minus": ["unfunny"] * 8 + ["somewhat funny", "funny"],
                         "c": ["unfunny"] * 7 + ["somewhat funny"] * 3, "d": ["unfunny"] * 9 + ["funny"]})
    r = client.get(f"/api/experiments/{eid}/answers.csv", headers=auth)
    assert r.status_code == 200
    path = tmp_path / "answers.csv"
    path.write_bytes(r.content)
    assert "'-minus" in r.text  # the export's spreadsheet protection, which verify undoes
    return eid, auth, path


def test_export_round_trip_matches_the_api_and_hand_counts(contest, capsys):
    client, eid, auth, path = contest
    assert main(["verify", str(path), "--delta", "0.05", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = client.get(f"/api/experiments/{eid}/certificate", headers=auth).json()
    assert api["delta"] == 0.05 and "default" in api["delta_source"]  # uniform allocation takes no delta
    for key in ("holds", "t", "beta", "z_min", "recommendation_names", "n_rivals", "n_defeated"):
        assert cli[key] == api[key], key
    assert cli["recommendation_names"] == ["best"] and cli["t"] == 40 and cli["holds"]
    assert {r["rival_name"] for r in cli["rivals"]} == {"-minus", "c", "d"}
    # the same certificate from counts by hand: label counts (unfunny, somewhat funny, funny) per item
    hand = certify([[0, 1, 9], [8, 1, 1], [7, 3, 0], [9, 0, 1]], RATINGS, 0.05, items=["best", "-minus", "c", "d"])
    assert cli["z_min"] == pytest.approx(hand.z_min) and cli["beta"] == pytest.approx(hand.beta)


def test_cli_exit_codes_and_text(contest, capsys, tmp_path):
    _client, _eid, _auth, path = contest
    assert main(["verify", str(path), "--delta", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "HOLDS" in out and "'best'" in out and "kinf-kt" in out and "-minus" in out
    assert main(["verify", str(path), "--delta", "0.05", "--recommend", "c"]) == 1
    assert "DOES NOT HOLD" in capsys.readouterr().out
    assert main(["verify", str(path), "--delta", "1e-9"]) == 1  # too few answers for that error probability
    assert main(["verify", str(path), "--delta", "0.05", "--n-items", "5"]) == 1  # a fifth item never answered
    assert "no answers" in capsys.readouterr().out
    assert main(["verify", str(path), "--delta", "0.05", "--learner", "UniformAllocation"]) == 0
    capsys.readouterr()
    for argv, message in ((["--delta", "0.05", "--learner", "nobody"], "no answers of learner"),
                          ([], "--delta is required"),
                          (["--delta", "2"], "delta must be"),
                          (["--delta", "0.05", "--k", "4"], "k must be"),
                          (["--delta", "0.05", "--recommend", "nope"], "not one of the items")):
        assert main(["verify", str(path), *argv]) == 2, argv
        assert message in capsys.readouterr().err
    bad = tmp_path / "summary.csv"
    bad.write_text("rank,item_id,funny\n1,a,3\n", encoding="utf-8")
    assert main(["verify", str(bad), "--delta", "0.05"]) == 2
    assert "not an answers export" in capsys.readouterr().err
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    rows[1][rows[0].index("reward")] = "3"
    bad.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    assert main(["verify", str(bad), "--delta", "0.05"]) == 2
    assert "in [0, 1]" in capsys.readouterr().err


def test_api_needs_the_owner_token_and_uses_the_asked_delta(tmp_path, contest):
    client, eid, auth, _path = contest
    assert client.get(f"/api/experiments/{eid}/certificate").status_code == 401
    assert client.get(f"/api/experiments/{eid}/certificate",
                      headers={"Authorization": "Bearer wrong-token"}).status_code in (401, 403)
    assert client.get(f"/api/experiments/{eid}/certificate", headers=auth,
                      params={"learner": "nobody"}).status_code == 404
    body = client.get(f"/api/experiments/{eid}/certificate", headers=auth, params={"rivals": 1}).json()
    assert {"holds", "recommendation", "recommendation_names", "recommendation_items", "t", "delta", "k",
            "threshold", "beta", "statistic", "z_min", "rivals", "n_rivals", "reasons", "explanation",
            "delta_source", "pooled", "experiment_id"} <= set(body)
    assert body["statistic"] == "K_inf GLR" and body["threshold"] == "kinf-kt-pairs" and body["k"] == 1
    assert len(body["rivals"]) == 1 and body["n_rivals"] == 3 and body["rivals"][0]["rival_name"] == "-minus"
    assert set(body["rivals"][0]) == {"item", "item_name", "rival", "rival_name", "mean_item", "mean_rival",
                                      "n_item", "n_rival", "z", "beta", "margin", "defeated"}
    assert body["recommendation_items"] == [{"arm": body["recommendation"][0], "id": "best", "text": "caption best"}]

    # lil-KLUCB errs at most 2 delta: it runs with delta 0.01 when 0.02 is asked; the certificate uses 0.02
    items = [{"id": f"i{j}", "text": f"item {j}"} for j in range(3)]
    eid2, auth2 = create(client, items, algorithm="lil_kl_ucb", delta=0.02)
    assert client.get(f"/api/experiments/{eid2}", headers=auth2).json()["params"]["delta"] == 0.01
    assert client.get(f"/api/experiments/{eid2}/certificate", headers=auth2).status_code == 409  # no answers yet
    answer(client, eid2, {"i0": ["funny"], "i1": ["unfunny"], "i2": ["unfunny"]})
    body = client.get(f"/api/experiments/{eid2}/certificate", headers=auth2).json()
    assert body["delta"] == 0.02 and "LilKLUCB" in body["delta_source"]
    assert body["beta"] == pytest.approx(kt_pair_beta(1, 1, 3, 0.02))  # one answer per item
    assert client.get(f"/api/experiments/{eid2}/certificate", headers=auth).status_code in (401, 403)
