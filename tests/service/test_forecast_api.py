"""The owner API's stopping progress carries the forecast of the answers still needed and the asked error
probability next to the learner's delta (HTTP, FastAPI TestClient over SQLite)."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from purebandits.service.app import create_app
from purebandits.service.results import FORECAST_TTL_MS
from purebandits.service.settings import Settings

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(6)]
#: probability of "funny" per item (the rest "unfunny"): c0 clearly best
FUNNY = [0.9, 0.5, 0.4, 0.3, 0.2, 0.1]


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def _app(path, clock: Clock) -> TestClient:
    """The service on a SQLite file, its request limits off (one test participant answers every query)."""
    return TestClient(create_app(Settings(database_url=f"sqlite:///{path}", participant_rate_per_second=0,
                                          ask_rate_per_second=0), clock=clock))


def _create(client: TestClient, **body) -> tuple[int, dict[str, str]]:
    r = client.post("/api/experiments", json={"name": "forecast", "items": ITEMS, "seed": 5, **body})
    assert r.status_code == 201, r.text
    d = r.json()
    return d["id"], {"Authorization": f"Bearer {d['owner_token']}"}


def _answer(client: TestClient, eid: int, n: int, rng: np.random.Generator, clock: Clock) -> None:
    """``n`` answers by one participant (who sees the items again once it has rated them all)."""
    pid = client.post("/api/participants").json()["participant_id"]
    for _ in range(n):
        q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        if q["state"] != "ok":
            return
        arm = int(q["item"]["id"][1:])
        label = "funny" if rng.random() < FUNNY[arm] else "unfunny"
        assert client.post(f"/api/queries/{q['query_id']}/answer",
                           json={"participant_id": pid, "label": label}).status_code == 200
        clock.ms += 50


def test_default_learner_reports_asked_error_and_forecast(tmp_path) -> None:
    clock = Clock()
    with _app(tmp_path / "f.db", clock) as c:
        eid, auth = _create(c, delta=0.05)
        st = c.get(f"/api/experiments/{eid}/results", headers=auth).json()["stopping"]
        # KL-RandLUCB: asked 0.05, runs with delta = 0.025 because its proof bounds the error by 2 delta
        assert (st["error_probability"], st["learner_delta"], st["error_per_delta"], st["proven"]) == \
            (0.05, 0.025, 2.0, True)
        assert "0.025" in st["delta_note"] and "2 x delta" in st["delta_note"]
        assert st["forecast"] is None and "no answers yet" in st["forecast_reason"]

        rng = np.random.default_rng(1)
        _answer(c, eid, 60, rng, clock)
        clock.ms += FORECAST_TTL_MS
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        f = res["stopping"]["forecast"]
        assert not res["done"] and res["stopping"]["forecast_reason"] is None
        assert set(f) == {"low", "mid", "high", "method", "exact"} and f["exact"] is False
        assert 1 <= f["low"] <= f["mid"] <= f["high"] and "if the current estimates are right" in f["method"]

        # cached: more answers within FORECAST_TTL_MS give the same forecast; after it, a new one
        _answer(c, eid, 5, rng, clock)
        again = c.get(f"/api/experiments/{eid}/results", headers=auth).json()["stopping"]["forecast"]
        assert again == f
        clock.ms += FORECAST_TTL_MS
        later = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert later["stopping"]["forecast"] is not None and later["n_told"] == res["n_told"] + 5

        info = c.get(f"/api/experiments/{eid}", headers=auth).json()
        err = info["algorithms"][0]["error"]
        assert (err["error_probability"], err["learner_delta"], err["proven"]) == (0.05, 0.025, True)


def test_unproven_and_budget_learners_say_why(tmp_path) -> None:
    clock = Clock()
    with _app(tmp_path / "g.db", clock) as c:
        eid, auth = _create(c, delta=0.05, budget=300, algorithms=[
            {"label": "heuristic", "algorithm": "lil_lucb"},
            {"label": "budget", "algorithm": "sequential_halving"},
            {"label": "contest", "algorithm": "contest_ucb_2024"},
        ])
        _answer(c, eid, 60, np.random.default_rng(2), clock)
        for label in ("heuristic", "budget", "contest"):
            st = c.get(f"/api/experiments/{eid}/results?algorithm={label}", headers=auth).json()["stopping"]
            assert st["proven"] is False, label
            assert "not guaranteed" in st["delta_note"] or "No error probability" in st["delta_note"], label
            if label == "heuristic":
                assert st["error_probability"] == 0.05 and "heuristic" in st["delta_note"]
            if label == "budget":
                assert st["error_probability"] is None and "fixed budget" in st["delta_note"]
                left = 300 - st["n_pulls"]
                assert st["forecast"] == {"low": left, "mid": left, "high": left, "method": st["forecast"]["method"],
                                          "exact": True}
            if label == "contest":
                assert st["forecast"] is None and "never stops" in st["forecast_reason"]


def test_the_command_line_prints_the_forecast_and_the_error_probability() -> None:
    """``purebandits experiment results``' stopping lines, from the results JSON alone."""
    from purebandits.service.cli_experiment import _stopping_line

    st = {"fraction": 0.0, "done": False, "separated": 0, "of": 5, "margin": -0.5, "description": "stops when ...",
          "forecast": {"low": 1200, "mid": 34567, "high": 890123, "method": "..."}, "forecast_reason": None,
          "delta_note": "Wrong with probability at most 0.05. It runs with its parameter delta = 0.025 ..."}
    text = _stopping_line({"done": False, "stopping": st})
    assert "forecast: about 34,567 more answers (range 1,200-890,123) if the current estimates hold" in text
    assert "error probability: Wrong with probability at most 0.05." in text
    none = _stopping_line({"done": False, "stopping": {**st, "forecast": None, "forecast_reason": "it never stops"}})
    assert "forecast: none (it never stops)" in none
    assert "forecast" not in _stopping_line({"done": True, "stopping": {**st, "done": True}})
