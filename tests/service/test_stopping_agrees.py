"""results.stopping agrees with done for every registered learner on a small experiment answered to the end."""

from __future__ import annotations

import numpy as np
import pytest
import svc_migrated
from study_support import Clock, open_study

from purebandits.registry import all_learners

#: a 4-item experiment every learner that stops settles quickly ("funny" with these probabilities)
MEANS = [0.95, 0.05, 0.05, 0.05]
#: answers after which a run is cut (UCB1 + LS, the slowest here, stops after ~1,500); a learner that never
#: stops is cut after NEVER_CAP
CAP, NEVER_CAP = 2500, 150
#: parameters that keep the runs short (small budgets; Median Elimination's schedule at a coarse epsilon)
PARAMS: dict[str, dict] = {"median_elimination": {"epsilon": 8.0}, "thompson_sampling": {"budget": 150}}
BUDGET = 60


#: conftest's per-test SQLite file, already migrated (a copy: see :mod:`svc_migrated`)
sqlite_url = svc_migrated.sqlite_url


def _cases():
    for name, cls in all_learners().items():
        params = dict(PARAMS.get(name, {}))
        if cls.kind == "fixed_budget":
            params["budget"] = BUDGET
        yield pytest.param(name, params, id=name)


def _spec(name: str, params: dict) -> dict:
    return {"name": f"stop {name}", "items": [{"id": f"i{i}", "text": f"item {i}"} for i in range(len(MEANS))],
            "seed": 3, "algorithm": name, "params": params}


@pytest.mark.parametrize("name, params", list(_cases()))
def test_results_stopping_agrees_with_done(sqlite_url, name, params):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock)
    eid, _ = study.create_experiment(_spec(name, params))
    rng = np.random.default_rng(5)
    never = bool(all_learners()[name].tags.get("never_stops"))
    answered = 0
    res = study.results(eid, timeline=False)
    while answered < (NEVER_CAP if never else CAP):
        pid = study.new_participant()  # a fresh participant per query: no repeat policy in the way
        q = study.next_query(eid, pid)
        if q["state"] != "ok":
            break
        arm = int(q["item"]["id"][1:])
        study.answer(q["query_id"], pid, "funny" if rng.random() < MEANS[arm] else "unfunny")
        answered += 1
        clock.ms += 100
        res = study.results(eid, timeline=False)
        st = res["stopping"]
        learner_done = study.learner_state(eid)["state"]["state"]["done_"]
        assert st["done"] == (st["fraction"] == 1.0) == res["done"] == learner_done, (name, answered, st)
        assert 0.0 <= st["fraction"] <= 1.0
        assert st["source"] in ("learner", "none") and isinstance(st["description"], str) and st["description"]
        assert (st["source"] == "none") == (st["reason"] is not None)
        if st["margin"] is not None and st["statistic"] is not None and st["threshold"] is not None:
            assert st["margin"] == pytest.approx(st["statistic"] - st["threshold"])
        if st["done"]:
            assert st["margin"] is None or st["margin"] >= 0, (name, st)
            break
    st = res["stopping"]
    if never:
        assert not st["done"] and st["source"] == "none" and st["reason"]
    else:
        assert st["done"] and st["fraction"] == 1.0, (name, answered, st)
