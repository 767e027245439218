"""A service experiment with the proven K_inf stop (Track-and-Stop, stop="kinf", weights="kinf", theory threshold):
created through the API, run to its stop by one rater, on the right caption, with its error guarantee stated and a
certificate that holds (HTTP, FastAPI TestClient over SQLite)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from purebandits.service.app import create_app
from purebandits.service.settings import Settings

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(4)]
#: (unfunny, somewhat funny, funny) per caption: c0 clearly best
RATINGS = [(0.1, 0.2, 0.7), (0.5, 0.3, 0.2), (0.6, 0.3, 0.1), (0.7, 0.2, 0.1)]
LABELS = ("unfunny", "somewhat funny", "funny")


@pytest.mark.slow  # thousands of answers to a certified stop
def test_kinf_track_and_stop_runs_to_a_certified_stop(tmp_path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'k.db'}", participant_rate_per_second=0,
                              ask_rate_per_second=0))
    with TestClient(app) as c:
        r = c.post("/api/experiments", json={
            "name": "kinf", "items": ITEMS, "seed": 3, "delta": 0.05, "repeats": "not_consecutive",
            "algorithms": [{"label": "tas", "algorithm": "track_and_stop",
                            "params": {"stop": "kinf", "weights": "kinf", "threshold": "theory"}}]})
        assert r.status_code == 201, r.text
        eid, auth = r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}
        rng = np.random.default_rng(4)
        pid = c.post("/api/participants").json()["participant_id"]
        for _ in range(5000):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            if q["state"] != "ok":
                break
            arm = int(q["item"]["id"][1:])
            label = LABELS[rng.choice(3, p=RATINGS[arm])]
            assert c.post(f"/api/queries/{q['query_id']}/answer",
                          json={"participant_id": pid, "label": label}).status_code == 200
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert res["done"], res["stopping"]
        assert [row["id"] for row in res["ranking"][:1]] == ["c0"] or res["recommendation"][0]["id"] == "c0"
        st = res["stopping"]
        assert st["proven"] is True and st["error_probability"] == 0.05
        cert = c.get(f"/api/experiments/{eid}/certificate", headers=auth).json()
        assert cert["holds"] is True
