"""The crowd and rater quality (issue 42): skip, session positions, gold items, crowd platforms, the study's end,
quality flags, excluding a participant by replay, and crowd-kit's format -- on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from study_support import Clock, open_study

from purebandits.service.app import create_app
from purebandits.service.crowd_settings import SKIP_LABEL, CrowdSettings, parse_crowd_settings
from purebandits.service.errors import BadRequest, Conflict
from purebandits.service.models import events
from purebandits.service.settings import Settings

LABELS = ["unfunny", "somewhat funny", "funny"]
GOLD = [{"id": "g-funny", "text": "A caption everyone finds funny.", "label": "funny"},
        {"id": "g-flat", "text": "A caption nobody finds funny.", "label": "unfunny"}]


def items(n: int) -> list[dict]:
    return [{"id": f"i{j}", "text": f"caption {j}"} for j in range(n)]


def rows(lines) -> list[dict]:
    it = iter(lines)
    header = next(it)
    return [dict(zip(header, [str(c) for c in r], strict=True)) for r in it]


def rate(study, eid, pid, n, label_of, clock=None) -> list[dict]:
    """``n`` asks and answers by ``pid``; ``label_of(i, query)`` picks each label; with a test ``clock``, each
    answer comes 2 s after its ask (as a person's). Returns the queries."""
    out = []
    for i in range(n):
        q = study.next_query(eid, pid)
        if q["state"] != "ok":
            break
        if clock is not None:
            clock.ms += 2000
        study.answer(q["query_id"], pid, label_of(i, q))
        out.append(q)
    return out


# ---------------------------------------------------------------- settings
def test_crowd_settings_are_checked():
    assert parse_crowd_settings({}, LABELS) == CrowdSettings()
    s = parse_crowd_settings({"allow_skip": True, "completion_url": "https://app.prolific.com/c?cc={code}",
                              "gold": GOLD, "gold_positions": [9, 3]}, LABELS)
    assert s.gold_positions == (3, 9) and s.gold_at(3) == 0 and s.gold_at(9) == 1 and s.gold_at(4) is None
    assert s.completion_redirect("AB C") == "https://app.prolific.com/c?cc=AB%20C"
    assert CrowdSettings.from_json(s.to_json()) == s
    for bad in ({"allow_skip": "yes"}, {"completion_url": "javascript:alert(1)"}, {"completion_url": "ftp://x/y"},
                {"gold": GOLD}, {"gold_positions": [1]},
                {"gold": [{"text": "x", "label": "meh"}], "gold_positions": [1]},
                {"gold": GOLD, "gold_positions": [0, 2]}, {"gold": GOLD, "gold_positions": [2, 2]}):
        with pytest.raises(BadRequest):
            parse_crowd_settings(bad, LABELS)
    with pytest.raises(BadRequest, match="skip"):  # a label named like the skip button's answer
        parse_crowd_settings({"allow_skip": True}, ["skip", "keep"])


# ---------------------------------------------------------------- skip and position
def test_a_skip_is_recorded_counted_and_never_told_to_the_learner(db_url):
    study = open_study(db_url)
    eid, _ = study.create_experiment({"items": items(6), "seed": 4, "allow_skip": True})
    p = study.new_participant()
    qs = rate(study, eid, p, 4, lambda i, q: SKIP_LABEL if i in (1, 2) else "funny")
    learner = study.replay(eid)
    assert int(learner.counts_.sum()) == 2 and int(learner.pending_.sum()) == 0  # two told, the skips given back
    assert study.answer(qs[1]["query_id"], p, SKIP_LABEL)["reward"] is None  # idempotent, still no reward
    with pytest.raises(Conflict):
        study.answer(qs[1]["query_id"], p, "funny")
    answers = rows(study.export_answers(eid))
    assert [a["label"] for a in answers] == ["funny", "skip", "skip", "funny"]
    assert [a["position"] for a in answers] == ["1", "2", "3", "4"] and answers[1]["reward"] == ""
    # a skipped item is not offered again to that participant (it was seen)
    nxt = study.next_query(eid, p, n=2)["queries"]
    assert {q["item"]["id"] for q in nxt}.isdisjoint({q["item"]["id"] for q in qs})
    kinds = [k for (k,) in study.engine.connect().execute(sa.select(events.c.kind).order_by(events.c.seq))]
    assert kinds.count("skip") == 2 and kinds.count("answer") == 2


def test_skip_is_refused_where_the_experiment_has_no_skip_button(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(3), "seed": 1})
    p = study.new_participant()
    q = study.next_query(eid, p)
    with pytest.raises(BadRequest, match="label set"):
        study.answer(q["query_id"], p, SKIP_LABEL)


def test_positions_count_each_participants_own_session(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(8), "seed": 2})
    a, b = study.new_participant(), study.new_participant()
    for _ in range(3):  # interleaved sessions
        for pid in (a, b):
            rate(study, eid, pid, 1, lambda i, q: "unfunny")
    answers = rows(study.export_answers(eid))
    for pid in (a, b):
        assert [r["position"] for r in answers if r["participant_id"] == pid] == ["1", "2", "3"]


# ---------------------------------------------------------------- gold items
def test_gold_items_come_at_their_positions_and_are_never_told(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock)
    eid, _ = study.create_experiment({"items": items(10), "seed": 5, "gold": GOLD, "gold_positions": [2, 5],
                                      "answers_per_participant": 6})
    gold_texts = {g["text"]: g for g in GOLD}
    p = study.new_participant()
    qs = rate(study, eid, p, 10, lambda i, q: "unfunny", clock)  # the first gold wrong, the second right
    assert len(qs) == 6 and study.next_query(eid, p)["state"] == "complete"
    shown = [q["item"]["text"] in gold_texts for q in qs]
    assert shown == [False, True, False, False, True, False]  # positions 2 and 5
    assert [gold_texts[q["item"]["text"]]["id"] for q in qs if q["item"]["text"] in gold_texts] == ["g-funny", "g-flat"]
    assert qs[1]["item"]["id"] == qs[1]["query_id"]  # nothing in the query tells a gold item apart
    learner = study.replay(eid)
    assert int(learner.counts_.sum()) == 4  # the gold answers are not in any learner's log
    answers = rows(study.export_answers(eid))
    gold_rows = [r for r in answers if r["algorithm"] == "gold"]
    assert [(r["item_id"], r["label"], r["gold_label"], r["position"]) for r in gold_rows] == \
        [("g-funny", "unfunny", "funny", "2"), ("g-flat", "unfunny", "unfunny", "5")]
    part = rows(study.export_participants(eid))[0]
    assert part["gold_answered"] == "2" and part["gold_wrong"] == "1" and part["completion_code"]


def test_a_pending_gold_item_comes_back_after_a_reload(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(5), "seed": 5, "gold": GOLD[:1], "gold_positions": [1]})
    p = study.new_participant()
    first = study.next_query(eid, p)
    again = study.next_query(eid, p)  # a reload: the same pending query, not a new one
    assert first["query_id"] == again["query_id"] and first["item"]["text"] == GOLD[0]["text"]
    study.answer(first["query_id"], p, "funny")
    assert study.next_query(eid, p)["item"]["text"] != GOLD[0]["text"]


# ---------------------------------------------------------------- the end of a session, of the study
def test_completion_url_and_the_study_finished(sqlite_url):
    study = open_study(sqlite_url)
    spec = {"items": items(3), "seed": 1, "answers_per_participant": 4,
            "completion_url": "https://app.prolific.com/submissions/complete?cc={code}",
            "algorithms": [{"label": "a", "algorithm": "uniform_allocation", "params": {"budget": 3}},
                           {"label": "b", "algorithm": "uniform_allocation", "params": {"budget": 3}}]}
    eid, _ = study.create_experiment(spec)
    meta = study.meta(eid)
    pids = [study.new_participant(f"worker{i}") for i in range(12)]
    by_learner: dict[int, list[str]] = {}
    for pid in pids:
        by_learner.setdefault(meta.assign(pid), []).append(pid)
    assert set(by_learner) == {0, 1}
    first, second = by_learner[0], by_learner[1]
    for pid in first[:3]:  # learner a's budget: three answers
        rate(study, eid, pid, 1, lambda i, q: "funny")
    done = study.next_query(eid, first[3])
    assert done["state"] == "done" and done["study_complete"] is False  # learner b still runs
    for pid in second[:3]:
        rate(study, eid, pid, 1, lambda i, q: "funny")
    late = study.next_query(eid, first[3])  # came after the end: nothing answered, no code
    assert late["state"] == "done" and late["study_complete"] is True and "completion_code" not in late
    paid = study.next_query(eid, first[0])  # answered one item before the end: paid by code
    assert paid["state"] == "done" and paid["study_complete"] is True
    assert paid["completion_url"].endswith("cc=" + paid["completion_code"])


def test_api_public_info_platform_sessions_and_exports(db_url):
    settings = Settings(database_url=db_url, warm_all_learners=False, ask_rate_per_second=0,
                        participant_rate_per_second=0)
    with TestClient(create_app(settings)) as c:
        r = c.post("/api/experiments", json={"items": items(5), "seed": 3, "allow_skip": True,
                                             "gold": GOLD, "gold_positions": [3]})
        assert r.status_code == 201, r.text
        eid, auth = r.json()["id"], {"Authorization": "Bearer " + r.json()["owner_token"]}
        pub = c.get(f"/api/experiments/{eid}/public").json()
        assert pub["allow_skip"] is True and pub["complete"] is False and pub["example"]
        body = {"participant_id": "5f1a2b3c4d5e6f7a8b9c0d1e", "experiment_id": eid, "platform": "prolific",
                "study": "STUDY123", "session": "SESSION456"}
        for _ in range(2):  # the same session again is fine
            assert c.post("/api/participants", json=body).status_code == 201
        assert c.post("/api/participants", json={**body, "experiment_id": 999}).status_code == 404
        assert c.post("/api/participants", json={**body, "session": None}).status_code == 422
        pid = body["participant_id"]
        for label in ("funny", "skip", "unfunny", "funny"):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            a = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            assert a.status_code == 200 and (a.json()["reward"] is None) == (label == "skip" or
                                                                              q["item"]["text"] == GOLD[0]["text"])
        part = next(csv.DictReader(io.StringIO(c.get(f"/api/experiments/{eid}/participants.csv", headers=auth).text)))
        assert (part["platform"], part["study"], part["session"]) == ("prolific", "STUDY123", "SESSION456")
        assert part["skips"] == "1" and part["gold_answered"] == "1" and part["gold_wrong"] == "1"  # unfunny at 3
        kit = list(csv.DictReader(io.StringIO(
            c.get(f"/api/experiments/{eid}/answers.csv?format=crowdkit", headers=auth).text)))
        assert list(kit[0]) == ["task", "worker", "label"] and len(kit) == 2  # skip and gold left out
        assert {k["label"] for k in kit} == {"funny"} and {k["worker"] for k in kit} == {pid}
        quality = c.get(f"/api/experiments/{eid}/participants", headers=auth).json()
        assert quality["n_participants"] == 1 and quality["participants"][0]["skips"] == 1 and quality["n_skips"] == 1
        assert c.get(f"/api/experiments/{eid}/participants").status_code == 401


def test_crowdkit_export_reads_back(sqlite_url):
    """Read by crowd-kit's Dawid-Skene when the extra is installed; otherwise its columns with pandas."""
    pd = pytest.importorskip("pandas")
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(4), "seed": 8, "repeats": "never"})
    rng = np.random.default_rng(3)
    for w in range(6):
        pid = study.new_participant(f"w{w}")
        rate(study, eid, pid, 4, lambda i, q: LABELS[int(rng.integers(3))])
    text = io.StringIO()
    csv.writer(text).writerows(study.export_crowdkit(eid))
    df = pd.read_csv(io.StringIO(text.getvalue()))
    assert list(df.columns) == ["task", "worker", "label"] and len(df) == 24
    assert set(df["label"]) <= set(LABELS) and df.groupby("task").size().tolist() == [6, 6, 6, 6]
    try:
        from crowdkit.aggregation import DawidSkene
    except ImportError:
        return
    result = DawidSkene(n_iter=20).fit_predict(df)
    assert set(result.index) == set(df["task"]) and set(result) <= set(LABELS)


# ---------------------------------------------------------------- flags and exclusion by replay
def _ranking(learner) -> tuple:
    means = learner.means()
    return tuple(learner.counts_.tolist()), tuple(np.round(means, 12).tolist()), tuple(learner.recommend())


def test_excluding_a_participant_rebuilds_every_learner_as_a_replay_without_them(db_url):
    study = open_study(db_url)
    spec = {"items": items(8), "seed": 11, "repeats": "not_consecutive",
            "algorithms": [{"label": "a", "algorithm": "kl_rand_lucb", "params": {"form": "exact"}},
                           {"label": "b", "algorithm": "lucb_plus_plus", "params": {}}]}
    eid, _ = study.create_experiment(spec)
    rng = np.random.default_rng(0)
    honest = [study.new_participant(f"h{i}") for i in range(8)]
    careless = study.new_participant("careless")
    for _ in range(12):
        for pid in honest:
            rate(study, eid, pid, 1, lambda i, q: LABELS[min(2, int(q["item"]["id"][1:]) // 3)]
                 if rng.random() < 0.8 else LABELS[int(rng.integers(3))])
        rate(study, eid, careless, 2, lambda i, q: "funny")
    held = study.next_query(eid, careless)  # a pending query at the exclusion: cancelled by it
    assert held["state"] == "ok"
    flags = study.participant_quality(eid)["careless"].flags
    assert "one_label" in flags
    before = [_ranking(study.replay(eid, learner=i)) for i in range(2)]
    live_before = [_ranking(study._cache[(eid, i)].learner) for i in range(2)]
    assert live_before == before

    out = study.set_excluded(eid, "careless", True, reason="funny for everything")
    assert out == {"participant_id": "careless", "excluded": True, "changed": True, "excluded_answers": 24}
    assert study.next_query(eid, careless)["state"] == "excluded"
    with study.engine.connect() as conn:
        told = conn.execute(sa.text(
            "SELECT learner, arm, count(*), sum(reward) FROM queries WHERE experiment_id = :e AND status = 'answered' "
            "AND label != 'skip' AND participant_id != 'careless' GROUP BY learner, arm"), {"e": eid}).all()
    for i in range(2):
        replayed = study.replay(eid, learner=i)  # the log, replayed from the start (the exclusion event inside)
        live = study._cache[(eid, i)].learner
        assert _ranking(live) == _ranking(replayed)
        counts = np.zeros(8, dtype=np.int64)
        sums = np.zeros(8)
        for idx, arm, n, s in told:
            if idx == i:
                counts[arm], sums[arm] = n, s
        np.testing.assert_array_equal(replayed.counts_, counts)  # exactly the others' answers
        np.testing.assert_allclose(replayed.sums_, sums)
        assert int(replayed.pending_.sum()) == 0
    assert [_ranking(study.replay(eid, learner=i)) for i in range(2)] != before
    # the log keeps everything: the exports still list the careless answers, marked
    answers = rows(study.export_answers(eid))
    assert sum(1 for a in answers if a["participant_id"] == "careless" and a["excluded"] == "1") == 24
    assert study.set_excluded(eid, "careless", True)["changed"] is False

    study.set_excluded(eid, "careless", False)
    assert [_ranking(study._cache[(eid, i)].learner) for i in range(2)] == before  # restored
    assert [_ranking(study.replay(eid, learner=i)) for i in range(2)] == before
    # a restart replays the same: its verification agrees with what was served
    again = open_study(db_url)
    report = again.verify(eid, full=True)
    assert report["snapshot_matches"] is not False
    assert [_ranking(again.replay(eid, learner=i)) for i in range(2)] == before


def test_an_exclusion_a_learner_cannot_take_changes_nothing(sqlite_url, monkeypatch):
    """When a learner's rebuild fails (a rule that cannot be handed a logged ask without the excluded answers), the
    exclusion is refused with 409 and the transaction changes nothing: no event, no exclusion, no cancelled query,
    the same learners."""
    import purebandits.service.participant_quality as pq

    study = open_study(sqlite_url)
    spec = {"items": items(4), "seed": 1, "repeats": "not_consecutive",
            "algorithms": [{"label": "a", "algorithm": "kl_rand_lucb"}, {"label": "b", "algorithm": "lil_ucb"}]}
    eid, _ = study.create_experiment(spec)
    pids = [study.new_participant(f"p{i}") for i in range(6)]
    for pid in pids:
        rate(study, eid, pid, 3, lambda i, q: "funny")
        study.next_query(eid, pid)  # each holds a pending query
    real = pq.rebuild_without

    def second_fails(conn, eid_, idx, learner, upto, dropped):
        if idx == 1:
            raise pq.ReplayError("the learner cannot be handed arm 2")
        return real(conn, eid_, idx, learner, upto, dropped)

    monkeypatch.setattr(pq, "rebuild_without", second_fails)
    with study.engine.connect() as conn:
        before = conn.execute(sa.text("SELECT count(*) FROM events")).scalar(), \
            conn.execute(sa.text("SELECT count(*) FROM queries WHERE status = 'pending'")).scalar()
    states = [study.replay(eid, learner=i).state_json() for i in range(2)]
    for pid in pids:
        with pytest.raises(Conflict, match="cannot be rebuilt"):
            study.set_excluded(eid, pid, True)
    with study.engine.connect() as conn:
        after = conn.execute(sa.text("SELECT count(*) FROM events")).scalar(), \
            conn.execute(sa.text("SELECT count(*) FROM queries WHERE status = 'pending'")).scalar()
    assert after == before and study.excluded(eid) == set()
    assert [study.replay(eid, learner=i).state_json() for i in range(2)] == states
    assert all(study.next_query(eid, pid)["state"] == "ok" for pid in pids)
