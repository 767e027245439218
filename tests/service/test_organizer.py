"""Organizer features of the protocol over SQLite and PostgreSQL: several learners per experiment, the
repeat policy, completion codes, worker ids, context, archive and delete, and the 0001 -> 0002 migration."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import sqlalchemy as sa
import svc_migrated
from study_support import Clock, open_study

from purebandits.service.errors import BadRequest, Conflict, NotFound
from purebandits.service.models import events, experiments, queries
from purebandits.service.settings import Settings
from purebandits.service.storage import make_engine, upgrade
from purebandits.service.study import Study

#: conftest's per-test SQLite file and per-test database, the SQLite file already migrated (a copy: see
#: :mod:`svc_migrated`)
sqlite_url, db_url = svc_migrated.sqlite_url, svc_migrated.db_url

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def items(n):
    return [{"id": f"i{i}", "text": f"item {i}"} for i in range(n)]


def two_learners(**kw):
    spec = {"name": "side by side", "items": items(10), "seed": 7, "delta": 0.1,
            "algorithms": [{"label": "LilUCB", "algorithm": "lil_ucb", "share": 1},
                           {"label": "RandomSampling", "algorithm": "random_sampling", "share": 1}]}
    spec.update(kw)
    return spec


def test_several_learners_each_with_its_own_log_sticky_participants(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock, snapshot_every=5)
    eid, _ = study.create_experiment(two_learners(repeats="not_consecutive"))
    meta = study.meta(eid)
    assert [ls.label for ls in meta.learners] == ["LilUCB", "RandomSampling"]
    assert [ls.share for ls in meta.learners] == [0.5, 0.5]
    assert meta.learners[0].params == {"delta": 0.1} and meta.learners[1].params == {"delta": 0.1}
    pids = [study.new_participant() for _ in range(40)]
    assigned = [meta.assign(p) for p in pids]
    # sticky and by share: 40 participants at 50/50 put at least 8 on each side (binomial, P(fail) < 1e-3)
    assert assigned == [meta.assign(p) for p in pids] and 8 <= sum(assigned) <= 32
    rng = np.random.default_rng(3)
    means = np.linspace(0.05, 0.95, 10)
    labels = ["unfunny", "funny"]
    served = {0: 0, 1: 0}
    for step in range(400):
        p = pids[step % len(pids)]
        q = study.next_query(eid, p)
        if q["state"] != "ok":
            continue
        arm = int(q["item"]["id"][1:])
        study.answer(q["query_id"], p, labels[int(rng.random() < means[arm])])
        served[meta.assign(p)] += 1
        clock.ms += 50
    for idx, ls in enumerate(meta.learners):
        res = study.results(eid, learner=ls.label)
        assert res["algorithm_label"] == ls.label and res["n_answers"] == served[idx] == res["n_told"]
        live = study.learner_state(eid, learner=ls.label)
        assert json.loads(study.replay(eid, learner=idx).state_json()) == live["state"]
    with study.engine.connect() as conn:
        per = dict(conn.execute(sa.select(queries.c.learner, sa.func.count()).where(queries.c.status == "answered")
                                .group_by(queries.c.learner)).all())
    assert per == {0: served[0], 1: served[1]}
    assert open_study(db_url, clock=clock).verify(eid)["snapshot_matches"] is True
    comp = study.comparison(eid)
    assert [a["label"] for a in comp["algorithms"]] == ["LilUCB", "RandomSampling"]
    assert [a["n_answers"] for a in comp["algorithms"]] == [served[0], served[1]]
    assert comp["agreement"][0]["a"] == "LilUCB" and 0 <= comp["agreement"][0]["overlap"] <= 1
    # the random-sampling learner never stops: the unbiased baseline keeps collecting
    assert comp["algorithms"][1]["done"] is False and comp["algorithms"][1]["stopped_at_answers"] is None
    for idx, ls in enumerate(meta.learners):
        rows = study.export_summary(eid, learner=ls.label)
        assert sum(int(r[rows[0].index("count")]) for r in rows[1:]) == served[idx]
    answers = list(study.export_answers(eid))
    assert answers[0][3] == "algorithm" and {r[3] for r in answers[1:]} == {"LilUCB", "RandomSampling"}
    with pytest.raises(NotFound, match="no learner 'Nope'"):
        study.results(eid, learner="Nope")


def test_learner_stop_is_recorded_once_with_its_answer_count(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock)
    eid, _ = study.create_experiment({"items": items(2), "algorithm": "lil_ucb", "params": {"delta": 0.1},
                                      "repeats": "not_consecutive", "seed": 1})
    n = 0
    while True:
        p = study.new_participant()  # a crowd of one-off participants: no repeat constraint binds
        q = study.next_query(eid, p)
        if q["state"] == "done":
            break
        assert q["state"] == "ok"
        study.answer(q["query_id"], p, "funny" if q["item"]["id"] == "i0" else "unfunny")
        n += 1
        clock.ms += 10
    info = study.experiment_info(eid)["algorithms"][0]
    assert info["done"] is True and info["stopped_at_answers"] == n
    assert study.comparison(eid)["algorithms"][0]["stopped_at"] is not None


@pytest.mark.parametrize("policy", ["never", "not_consecutive"])
def test_repeat_policy_and_replay(db_url, policy):
    """No item twice in a row; with "never", no item twice while unseen items remain; the log still replays."""
    clock = Clock()
    study = open_study(db_url, clock=clock, snapshot_every=7)
    eid, _ = study.create_experiment({"items": items(8), "seed": 2, "repeats": policy,
                                      "algorithm": "lil_ucb", "params": {"delta": 0.1}})
    pids = [study.new_participant() for _ in range(3)]
    shown = {p: [] for p in pids}
    states = []
    rng = np.random.default_rng(0)
    for step in range(90):
        p = pids[step % 3]
        q = study.next_query(eid, p)
        states.append(q["state"])
        if q["state"] != "ok":
            continue
        shown[p].append(q["item"]["id"])
        study.answer(q["query_id"], p, ["unfunny", "somewhat funny", "funny"][int(rng.integers(3))])
        clock.ms += 10
    for seq in shown.values():
        assert all(a != b for a, b in zip(seq, seq[1:], strict=False))
        if policy == "never":
            first8 = seq[:8]
            assert len(set(first8)) == len(first8)
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]
    assert open_study(db_url, clock=clock).verify(eid)["snapshot_matches"] is not False
    assert set(states) == {"ok"}  # nobody is turned away: the learner chooses among the items they may rate


def test_participant_who_rated_every_item_gets_repeats_but_not_the_last(sqlite_url):
    """With "never", a participant who has rated every item is served again, never the item they rated last."""
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(3), "seed": 4, "algorithm": "lil_ucb",
                                      "params": {"delta": 0.1}})
    p = study.new_participant()
    got = []
    for _ in range(3):
        q = study.next_query(eid, p)
        assert q["state"] == "ok"
        got.append(q["item"]["id"])
        study.answer(q["query_id"], p, "funny")
    assert sorted(got) == ["i0", "i1", "i2"]
    # every item seen: repeats are allowed again, but never the last one
    q = study.next_query(eid, p)
    assert q["state"] == "ok" and q["item"]["id"] != got[-1] and q["n_answered"] == 3


def test_restricted_asks_never_exhaust_log_the_excluded_items_and_replay(sqlite_url):
    """The learner chooses among the items the participant may be given, so nobody is told "exhausted" even when
    the learner would rather have the item they just rated; each ask logs the items it excluded, and replay
    (which asks with the same restriction) reproduces the live state."""
    study = open_study(sqlite_url, snapshot_every=3)
    eid, _ = study.create_experiment({"items": items(3), "seed": 4, "algorithm": "lil_ucb",
                                      "params": {"delta": 0.1}, "repeats": "not_consecutive"})
    p = study.new_participant()
    shown = []
    for _ in range(60):  # i0 is clearly best: lil'UCB keeps wanting it, right after this participant rated it
        q = study.next_query(eid, p)
        assert q["state"] == "ok"
        shown.append(q["item"]["id"])
        study.answer(q["query_id"], p, "funny" if q["item"]["id"] == "i0" else "unfunny")
    assert all(a != b for a, b in zip(shown, shown[1:], strict=False))
    assert shown.count("i0") >= 25  # every other ask: the learner's choice whenever it is allowed
    with study.engine.connect() as conn:
        rows = conn.execute(sa.select(events.c.kind, events.c.excluded, events.c.passed).order_by(events.c.seq)).all()
    asks = [r for r in rows if r.kind == "ask"]
    assert {r.kind for r in rows} == {"ask", "answer"} and all(r.passed is None for r in rows)
    assert asks[0].excluded is None and all(r.excluded is not None for r in asks[1:])
    assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]
    assert open_study(sqlite_url).verify(eid)["snapshot_matches"] is True
    assert study.learner_state(eid)["state"]["state"]["pending_"]["__ndarray__"] == [0] * 3


def test_logs_from_before_restricted_asks_still_replay():
    """An old log's ``ask`` with passed-over candidates and its ``pass`` events replay as they were written."""
    from purebandits.registry import make_learner
    from purebandits.service.eventlog import apply_event

    live = make_learner("lil_ucb", delta=0.1).start(4, seed=3)
    replayed = make_learner("lil_ucb", delta=0.1).start(4, seed=3)
    for step in range(30):
        cands = live.ask(1) + live.ask(1)  # the old protocol: walk the candidates, serve the second
        live.cancel(cands[0])
        if step % 5 == 4:  # an old "pass": nothing served, both candidates given back
            live.cancel(cands[1])
            apply_event(replayed, "pass", cands[0], None, passed=f"{cands[0]},{cands[1]}")
            continue
        apply_event(replayed, "ask", cands[1], None, passed=str(cands[0]))
        live.tell(cands[1], 1.0 if cands[1] == 0 else 0.0)
        apply_event(replayed, "answer", cands[1], 1.0 if cands[1] == 0 else 0.0)
    assert replayed.state_json() == live.state_json()


def test_pending_query_is_served_again(sqlite_url):
    study = open_study(sqlite_url)
    eid, _ = study.create_experiment({"items": items(4), "seed": 4})
    p = study.new_participant()
    q1 = study.next_query(eid, p)
    q2 = study.next_query(eid, p)
    assert q1 == q2 and study.results(eid)["n_pending"] == 1


def test_worker_ids_completion_codes_and_participants_export(db_url):
    study = open_study(db_url)
    eid, _ = study.create_experiment({"items": items(6), "seed": 1, "answers_per_participant": 3})
    assert study.new_participant("A1B2C3") == "A1B2C3"
    assert study.new_participant("A1B2C3") == "A1B2C3"  # the same worker coming back
    for bad in ("", " x", "x" * 37, "a\x00b", "\ud800", "tab\there"):
        with pytest.raises(BadRequest):
            study.new_participant(bad)
    for _ in range(3):
        q = study.next_query(eid, "A1B2C3")
        study.answer(q["query_id"], "A1B2C3", "funny")
    done = study.next_query(eid, "A1B2C3")
    assert done["state"] == "complete" and done["n_answered"] == 3 and len(done["completion_code"]) == 12
    other = study.new_participant()
    q = study.next_query(eid, other)
    study.answer(q["query_id"], other, "unfunny")
    rows = list(study.export_participants(eid))
    assert rows[0] == ["participant_id", "algorithm", "answers", "first_answer_at", "last_answer_at",
                       "completion_code", "mean_response_seconds", "max_response_seconds",  # then, appended:
                       "median_response_seconds", "skips", "top_label_share", "gold_answered", "gold_wrong",
                       "consensus_agreement", "chance_agreement", "flags", "excluded", "platform", "study", "session"]
    by_id = {r[0]: r for r in rows[1:]}
    assert by_id["A1B2C3"][2] == 3 and by_id["A1B2C3"][5] == done["completion_code"]
    assert by_id[other][2] == 1 and by_id[other][5] == ""
    assert "A1B2C3" in {r[2] for r in list(study.export_answers(eid))[1:]}
    # codes differ per participant and per experiment
    eid2, _ = study.create_experiment({"items": items(6), "seed": 1, "answers_per_participant": 3})
    assert study.meta(eid2).completion_code("A1B2C3") != done["completion_code"]


def test_context_image_instructions_and_bad_specs(db_url):
    study = open_study(db_url)
    eid, _ = study.create_experiment({"items": items(3), "instructions": "  How funny is this caption?  ",
                                      "image": {"content_type": "image/png",
                                                "data": base64.b64encode(PNG).decode()}})
    info = study.experiment_info(eid)
    assert info["instructions"] == "How funny is this caption?" and info["has_image"] is True
    assert study.image(eid) == ("image/png", PNG)
    eid2, _ = study.create_experiment({"items": items(3)})
    with pytest.raises(NotFound):
        study.image(eid2)
    bad = [
        ({"image": {"content_type": "image/png", "data": base64.b64encode(b"GIF89a").decode()}}, "not a image/png"),
        ({"image": {"content_type": "text/html", "data": "PGI+"}}, "content_type must be one of"),
        ({"image": {"content_type": "image/png", "data": "***"}}, "not valid base64"),
        ({"instructions": "x" * 2001}, "at most 2000"),
        ({"repeats": "sometimes"}, "repeats must be one of"),
        ({"answers_per_participant": 0}, "answers_per_participant"),
        ({"algorithms": []}, "1..10 learners"),
        ({"algorithms": [{"algorithm": "lil_ucb"}, {"algorithm": "lil_ucb"}]}, "labels must be unique"),
        ({"algorithms": [{"algorithm": "lil_ucb", "share": 0}]}, "share must be a positive"),
        ({"algorithms": [{"algorithm": "lil_ucb", "label": "bad label!"}]}, "label must be"),
        ({"algorithms": [{"algorithm": "lil_ucb"}], "algorithm": "lil_ucb"}, "not both"),
        ({"algorithms": [{"algorithm": "lucb1", "label": "a", "params": {"k": 2}},
                         {"algorithm": "lucb1", "label": "b", "params": {"k": 1}}]}, "same number of items k"),
        ({"name": "bad \ud800 name"}, "lone surrogate"),
    ]
    for extra, message in bad:
        with pytest.raises(BadRequest, match=message):
            study.create_experiment({"items": items(3), **extra})
    with study.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(experiments)).scalar_one() == 2


def test_archive_is_read_only_and_delete_removes_every_row(db_url):
    study = open_study(db_url)
    eid, _ = study.create_experiment(two_learners())
    keep, _ = study.create_experiment({"items": items(3), "seed": 1})
    p = study.new_participant()
    q = study.next_query(eid, p)
    q2 = study.next_query(keep, p)
    study.answer(q2["query_id"], p, "funny")
    assert study.set_status(eid, "archived")["status"] == "archived"
    assert study.next_query(eid, study.new_participant())["state"] == "archived"
    with pytest.raises(Conflict, match="archived"):
        study.answer(q["query_id"], p, "funny")
    for status in ("active", "paused", "stopped"):
        with pytest.raises(Conflict):
            study.set_status(eid, status)
    listed = {e["id"]: e for e in study.list_experiments()}
    assert listed[eid]["status"] == "archived" and listed[eid]["algorithms"] == ["LilUCB", "RandomSampling"]
    assert listed[keep]["n_answers"] == 1
    assert study.delete_experiment(eid) == {"id": eid, "deleted": True}
    with pytest.raises(NotFound):
        study.experiment_info(eid)
    with study.engine.connect() as conn:
        for table in ("experiments", "learners", "items", "queries", "events", "snapshots", "images"):
            n = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE "
                                     f"{'id' if table == 'experiments' else 'experiment_id'} = :e"), {"e": eid})
            assert n.scalar_one() == 0, table
    # another process that still caches the deleted experiment answers 404, not 500
    assert study.results(keep)["n_answers"] == 1


def test_upgrade_from_0001_keeps_experiments_replayable(tmp_path):
    """A database made by revision 0001, with answers in it, upgrades and still replays exactly."""
    from purebandits.registry import make_learner

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = make_engine(url)
    upgrade(engine, "0001")
    learner = make_learner("lil_ucb", delta=0.1).start(4, seed=9)
    log = []
    for _ in range(6):
        arm = learner.ask(1)[0]
        log.append(("ask", arm, None))
        learner.tell(arm, 1.0 if arm == 0 else 0.0)
        log.append(("answer", arm, 1.0 if arm == 0 else 0.0))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO experiments (id, name, algorithm, params, k, n_arms, labels, status, owner_token_hash, "
            "seed, version, created_ms) VALUES (1, 'old', 'lil_ucb', '{\"delta\": 0.1}', 1, 4, "
            "'[{\"name\": \"unfunny\", \"reward\": 0.0}, {\"name\": \"funny\", \"reward\": 1.0}]', 'active', "
            f"'{'0' * 64}', 9, {len(log)}, 0)")
        for a in range(4):
            conn.exec_driver_sql(f"INSERT INTO items VALUES (1, {a}, 'i{a}', 'item {a}', NULL)")
        conn.exec_driver_sql("INSERT INTO participants VALUES ('p', 0)")
        for seq, (kind, arm, reward) in enumerate(log, 1):
            qid = f"q{(seq + 1) // 2}"
            conn.exec_driver_sql("INSERT INTO events VALUES (1, ?, ?, ?, ?, ?, ?, 0)",
                                 (seq, kind, qid, arm, None if reward is None else "funny" if reward else "unfunny",
                                  reward))
            if kind == "answer":
                conn.exec_driver_sql("INSERT INTO queries VALUES (?, 1, 'p', ?, 'answered', 0, 1, 0, ?, ?, ?, ?)",
                                     (qid, arm, "funny" if reward else "unfunny", reward, seq - 1, seq))
    upgrade(engine)
    study = Study(engine, Settings(database_url=url))
    info = study.experiment_info(1)
    assert info["algorithms"][0]["label"] == "LilUCB" and info["algorithms"][0]["version"] == len(log)
    assert study.replay(1).state_json() == learner.state_json()
    assert study.verify(1)["snapshot_matches"] is None  # 0001 had no snapshot for it
    assert study.results(1)["n_answers"] == 6
    q = study.next_query(1, "p")
    assert q["state"] == "ok"


def test_demo_token_survives_restarts_and_stays_hashed(sqlite_url, tmp_path, monkeypatch):
    from purebandits.service.cli import demo_token, ensure_demo
    from purebandits.service.study import hash_token

    monkeypatch.delenv("PUREBANDITS_DEMO_TOKEN", raising=False)
    path = tmp_path / "demo-token"
    study = open_study(sqlite_url)
    eid, token, created = ensure_demo(study)
    assert created and study.experiment_info(eid)["instructions"]
    first = demo_token(study, eid, token, path)
    assert first == token and path.stat().st_mode & 0o777 == 0o600
    # a restart: the demo exists, no token from creation; the file's token still opens it
    again = open_study(sqlite_url)
    eid2, token2, created2 = ensure_demo(again)
    assert (eid2, token2, created2) == (eid, None, False)
    assert demo_token(again, eid, None, path) == first
    again.check_owner(eid, first)
    with again.engine.connect() as conn:  # only the hash is in the database
        stored = conn.execute(sa.select(experiments.c.owner_token_hash)).scalar_one()
    assert stored == hash_token(first) and first not in stored
    # a file others could read is tightened; the environment variable wins over the file
    path.chmod(0o644)
    assert demo_token(again, eid, None, path) == first and path.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("PUREBANDITS_DEMO_TOKEN", "from-the-environment")
    assert demo_token(again, eid, None, path) == "from-the-environment"
    again.check_owner(eid, "from-the-environment")


def test_caches_are_bounded_and_a_miss_reloads_from_the_database(sqlite_url):
    study = open_study(sqlite_url, cache_experiments=2)
    eids = [study.create_experiment({"items": items(4), "seed": s, "repeats": "not_consecutive"})[0]
            for s in range(5)]
    p = study.new_participant()
    for _ in range(3):
        for eid in eids:
            q = study.next_query(eid, p)
            study.answer(q["query_id"], p, "funny")
    assert len(study._meta) <= 2 and len(study._cache) <= 2
    for eid in eids:
        assert study.results(eid)["n_answers"] == 3
        assert json.loads(study.replay(eid).state_json()) == study.learner_state(eid)["state"]


def test_default_learner_and_delta_is_the_target_error_probability(sqlite_url):
    """New experiments default to KL-RandLUCB; ``delta`` is the error probability the owner asks for, so a learner
    proven to err at most 2 delta (the lil-KLUCB bounds) gets delta / 2, and one proven for delta (the K_inf stop)
    gets delta."""
    from purebandits.registry import get_learner_class
    from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_DELTA

    study = open_study(sqlite_url)
    assert get_learner_class(DEFAULT_ALGORITHM).error_per_delta == 2.0
    eid, _ = study.create_experiment({"items": items(4)})
    (ls,) = study.meta(eid).learners
    # the KL bound's form is pinned in the stored parameters (the library default may change; a replay must not)
    assert ls.algorithm == DEFAULT_ALGORITHM and ls.params == {"form": "kinf", "delta": DEFAULT_DELTA / 2}
    eid, _ = study.create_experiment({"items": items(4), "algorithm": "kl_rand_lucb", "params": {"stop": "kinf"}})
    assert study.meta(eid).learners[0].params == {"stop": "kinf", "delta": DEFAULT_DELTA}
    # the default's K_inf bounds read the labels' rewards as their support; 4+ reward values fall back to the KL
    from purebandits.algorithms.kernels.kinf_stop import RATINGS
    from purebandits.service.validation import DEFAULT_LABELS

    assert tuple(sorted(lab["reward"] for lab in DEFAULT_LABELS)) == RATINGS  # so {"form": "kinf"} needs no support
    binary = [{"name": "no", "reward": 0}, {"name": "yes", "reward": 1}]
    eid, _ = study.create_experiment({"items": items(4), "labels": binary})
    assert study.meta(eid).learners[0].params == {"form": "kinf", "support": [0.0, 1.0], "delta": DEFAULT_DELTA / 2}
    scale = [{"name": f"s{i}", "reward": i / 4} for i in range(5)]
    eid, _ = study.create_experiment({"items": items(4), "labels": scale})
    assert study.meta(eid).learners[0].params == {"form": "kt", "delta": DEFAULT_DELTA / 2}
    with pytest.raises(BadRequest, match="form='kinf' counts each rating value"):
        study.create_experiment({"items": items(4), "labels": scale, "algorithm": "kl_rand_lucb",
                                 "params": {"form": "kinf"}})
    five = [{"name": f"s{i}", "reward": i / 4} for i in range(5)]
    with pytest.raises(BadRequest, match="not on it"):
        study.create_experiment({"items": items(4), "labels": five, "algorithm": "kl_rand_lucb",
                                 "params": {"stop": "kinf"}})
    eid, _ = study.create_experiment({"items": items(4), "delta": 0.1, "algorithms": [
        {"algorithm": "lil_ucb"}, {"algorithm": "kl_rand_lucb"}, {"algorithm": "lil_kl_ucb"},
        {"algorithm": "random_sampling", "label": "Uniform"}]})
    got = {ls.label: ls.params.get("delta") for ls in study.meta(eid).learners}
    assert got == {"LilUCB": 0.1, "KLRandLUCB": 0.05, "LilKLUCB": 0.05, "Uniform": 0.1}
    # a learner's own parameter is taken as it is; contradicting the shortcut is refused
    eid, _ = study.create_experiment({"items": items(4), "algorithm": "kl_rand_lucb", "params": {"delta": 0.3}})
    assert study.meta(eid).learners[0].params == {"delta": 0.3}
    with pytest.raises(BadRequest, match="given twice"):
        study.create_experiment({"items": items(4), "algorithm": "kl_rand_lucb", "params": {"delta": 0.3},
                                 "delta": 0.1})
    with pytest.raises(BadRequest, match="target error probability"):
        study.create_experiment({"items": items(4), "delta": 1.5})


def test_upgrade_pins_the_kl_bound_form_existing_experiments_ran_with(tmp_path):
    """An experiment whose KL learners were stored without a ``form`` ran with the former default L'/U'; after the
    upgrade (0006) it still replays and verifies, though the library's default is now the exact form."""
    from purebandits.registry import make_learner
    from purebandits.service.models import learners

    url = f"sqlite:///{tmp_path / 'kl.sqlite'}"
    study = open_study(url)
    eid, _ = study.create_experiment({"items": items(12), "algorithms": [
        {"algorithm": "kl_rand_lucb", "label": "rand", "params": {"form": "simplified"}},
        {"algorithm": "lil_kl_ucb", "label": "kl",
                                                          "params": {"form": "simplified"}}]})
    for _ in range(60):
        pid = study.new_participant()
        q = study.next_query(eid, pid)
        study.answer(q["query_id"], pid, "funny" if q["item"]["id"] in ("i0", "i1") else "unfunny")
    before = [study.replay(eid, learner=j).state_json() for j in range(2)]
    study.close()
    # as the previous code stored them: no form (it ran with L'/U', the default then), and at revision 0005
    assert make_learner("lil_kl_ucb").form == "exact"
    engine = make_engine(url)
    with engine.begin() as conn:
        for j in range(2):
            row = conn.execute(sa.select(learners.c.params).where(learners.c.experiment_id == eid,
                                                                  learners.c.idx == j)).one()
            params = {k: v for k, v in row.params.items() if k != "form"}
            conn.execute(learners.update().where(learners.c.experiment_id == eid, learners.c.idx == j)
                         .values(params=params))
        # revision 0005's schema: no events.excluded (each participant above asked once: nothing was excluded)
        assert conn.exec_driver_sql("SELECT count(*) FROM events WHERE excluded IS NOT NULL").scalar_one() == 0
        conn.exec_driver_sql("ALTER TABLE events DROP COLUMN excluded")
        conn.exec_driver_sql("ALTER TABLE experiments DROP COLUMN webhook_secret")  # 0008's
        for table in ("exclusions", "platform_sessions", "gold_queries"):  # 0009's
            conn.exec_driver_sql(f"DROP TABLE {table}")
        conn.exec_driver_sql("ALTER TABLE experiments DROP COLUMN crowd")
        for table, column in (("experiments", "query_kind"), ("queries", "opponent"), ("queries", "left_arm")):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")  # 0010's
        conn.exec_driver_sql("DROP INDEX ix_experiments_stage_of")  # 0011's
        for column in ("stage_of", "stages"):
            conn.exec_driver_sql(f"ALTER TABLE experiments DROP COLUMN {column}")
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0005'")
    upgrade(engine)
    study = Study(engine, Settings(database_url=url))
    assert [ls.params.get("form") for ls in study.meta(eid).learners] == ["simplified", "simplified"]
    assert [study.replay(eid, learner=j).state_json() for j in range(2)] == before
    assert study.verify(eid)["snapshot_matches"] is not False
