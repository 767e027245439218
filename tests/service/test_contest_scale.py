"""Contest-size hot spots (issue 24, target 3): what the owners' polls compute stays equal to what it replaced."""

from __future__ import annotations

import numpy as np
from study_support import Clock, open_study

from purebandits.service.reports import label_counts

LABELS = ["unfunny", "somewhat funny", "funny"]


def _by_query(study, eid: int, idx: int, n_arms: int) -> np.ndarray:
    """The counts as the polls computed them before: a GROUP BY over the answered queries."""
    with study.engine.connect() as conn:
        return label_counts(conn, eid, idx, n_arms, LABELS)


def _polled(res: dict) -> np.ndarray:
    out = np.zeros((len(res["ranking"]), len(LABELS)), dtype=np.int64)
    for row in res["ranking"]:
        out[row["arm"]] = [row["labels"][name] for name in LABELS]
    return out


def test_polled_label_counts_are_the_answered_queries(db_url):
    """results() and comparison() add the answers logged since their last poll to the counts they kept; after
    every step (answers, abandoned and expired queries, passes, answers from another process, a second
    learner) they equal the GROUP BY over the answered queries, and the totals agree."""
    clock = Clock()
    a = open_study(db_url, clock=clock, history_every=0)
    b = open_study(db_url, clock=clock, history_every=0)  # another process on the same database
    n = 12
    spec = {"name": "counts", "seed": 3, "items": [{"id": f"c{i}", "text": f"caption {i}"} for i in range(n)],
            "algorithms": [{"label": "A", "algorithm": "lil_ucb"}, {"label": "B", "algorithm": "random_sampling"}],
            "query_expiry_seconds": 60}
    eid, _ = a.create_experiment(spec)
    rng = np.random.default_rng(0)
    pids = [a.new_participant() for _ in range(8)]
    for step in range(30):
        study = a if step % 3 else b
        for pid in pids:
            res = study.next_query(eid, pid)
            if res["state"] != "ok" or rng.random() < 0.2:  # some walk away; their queries expire
                continue
            study.answer(res["query_id"], pid, LABELS[int(rng.integers(3))])
        if step % 7 == 6:
            clock.ms += 61_000  # the abandoned queries expire on the next ask
        if step % 5 == 4:
            pids = [a.new_participant() for _ in range(8)]
        for idx, label in enumerate(("A", "B")):
            want = _by_query(a, eid, idx, n)
            res = a.results(eid, learner=label)
            assert (_polled(res) == want).all(), step
            assert res["n_answers"] == int(want.sum())
            assert res["label_totals"] == {name: int(want[:, j].sum()) for j, name in enumerate(LABELS)}
        comp = a.comparison(eid)
        assert [x["n_answers"] for x in comp["algorithms"]] == [int(_by_query(a, eid, i, n).sum()) for i in (0, 1)]
    assert sum(int(_by_query(a, eid, i, n).sum()) for i in (0, 1)) > 100


def test_counts_kept_for_a_deleted_experiment_are_not_reused(sqlite_url):
    """The kept counts belong to one experiment: deleted (which forgets them), and another created (SQLite
    reuses its id), the polls count the new one's answers only."""
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, history_every=0)
    spec = {"name": "x", "seed": 1, "items": [{"id": f"c{i}", "text": f"c{i}"} for i in range(4)]}
    pid = study.new_participant()
    eids = []
    for label, answers in (("funny", 3), ("unfunny", 4)):
        eid, _ = study.create_experiment(spec)
        eids.append(eid)
        for _ in range(answers):
            res = study.next_query(eid, pid)
            study.answer(res["query_id"], pid, label)
        res = study.results(eid)
        assert res["n_answers"] == answers
        assert res["label_totals"] == {"unfunny": 0, "somewhat funny": 0, "funny": 0, label: answers}
        study.delete_experiment(eid)
        clock.ms += 1
    assert eids[0] == eids[1]  # the case this test is about
