"""Reissued pulls go to participants who answer (issue 41, item 3): ids that ask again and again and never
answer cannot take every reissued pull of a round learner and hold its round up for ever."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from study_support import Clock, open_study

from purebandits.service.errors import Gone
from purebandits.service.models import events, queries

REISSUE_S = 20
N_ITEMS = 20
SPEC = {"name": "rounds", "items": [f"caption {i}" for i in range(N_ITEMS)], "algorithm": "successive_elimination",
        "seed": 3, "repeats": "not_consecutive"}


def _reissued_to(study, eid: int) -> list[str]:
    """The participants who got a reissued pull, in order: an ``ask`` right after a ``cancel`` at the same time
    (the queries here never reach their expiry and none is released, so every cancel is a reissue's)."""
    with study.engine.connect() as conn:
        evs = conn.execute(sa.select(events.c.kind, events.c.query_id, events.c.created_ms)
                           .where(events.c.experiment_id == eid).order_by(events.c.learner, events.c.seq)).all()
        owner = dict(conn.execute(sa.select(queries.c.id, queries.c.participant_id)
                                  .where(queries.c.experiment_id == eid)).all())
    return [owner[b.query_id] for a, b in zip(evs, evs[1:], strict=False)
            if a.kind == "cancel" and b.kind == "ask" and a.created_ms == b.created_ms]


def _probe(study, clock: Clock, eid: int, seconds: float, n_abusers: int = 22, n_honest: int = 5,
           abuse_every_ms: int = 500, honest_every_ms: int = 3000) -> dict[str, int]:
    """The outside probe in simulated time: ``n_abusers`` ids from one address ask every ``abuse_every_ms``
    and never answer (they start first, so they hold the whole first round); ``n_honest`` ids from their own
    addresses answer what they hold ``honest_every_ms`` after getting it and ask again. Returns the honest
    ids' answers."""
    abusers = [study.new_participant(f"abuser-{i}", "203.0.113.7") for i in range(n_abusers)]
    honest = [study.new_participant(f"honest-{i}", f"198.51.100.{i + 1}") for i in range(n_honest)]
    held: dict[str, str | None] = dict.fromkeys(honest)
    due = {p: clock.ms + 1000 + 500 * i for i, p in enumerate(honest)}
    answers, end = 0, clock.ms + int(seconds * 1000)
    while clock.ms < end:
        for p in abusers:  # first in every step: the old rule gave the reissued pull to the first asker
            study.next_query(eid, p)
        for p in honest:
            if due[p] > clock.ms:
                continue
            if held[p] is not None:
                assert study.answer(held[p], p, "funny")["status"] == "answered"
                answers += 1
                held[p] = None
            q = study.next_query(eid, p)
            if q["state"] == "ok":
                held[p] = q["query_id"]
                due[p] = clock.ms + honest_every_ms
            else:
                due[p] = clock.ms + abuse_every_ms
        clock.ms += abuse_every_ms
    return {"honest_answers": answers}


def test_ids_that_never_answer_cannot_hold_a_round(sqlite_url):
    """The probe's scenario (22 ids re-asking and never answering, a few people answering at a human pace) on
    successive elimination over 20 items, 90 s. The abusers ask first, so 20 of them hold the first round's
    20 pulls. An id takes a reissued pull only while it holds no live query and has abandoned none, and one it
    holds is served to it again until it is reissued, which makes it an abandoner: so those 20 never take one,
    and the other 2 abusers at most one each. Every first-round pull is reissuable to the honest ids once
    2 x reissue_after_seconds old (40 s), and they answer each within 3 s: by 90 s the first round is
    complete (every item answered) and the honest ids answered at least a round's worth.
    The old rule handed every reissued pull to whoever asked first, an abuser: the round never completed."""
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, reissue_after_seconds=REISSUE_S)
    eid, _ = study.create_experiment(SPEC)
    got = _probe(study, clock, eid, seconds=90)
    with study.engine.connect() as conn:
        answered_items = conn.execute(sa.select(sa.func.count(sa.distinct(queries.c.arm))).where(
            queries.c.experiment_id == eid, queries.c.status == "answered")).scalar_one()
    assert answered_items == N_ITEMS  # the first round completed
    assert got["honest_answers"] >= N_ITEMS
    to = _reissued_to(study, eid)
    to_abusers = [p for p in to if p.startswith("abuser-")]
    assert len(set(to_abusers)) == len(to_abusers) <= 22 - N_ITEMS  # at most one each, none to first-round holders
    assert len(to) - len(to_abusers) >= N_ITEMS - (22 - N_ITEMS)  # the rest of the first round at least
    # the log still replays to the live learner
    assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()


def _hold_round(study, clock: Clock, eid: int, origin: str = "192.0.2.1") -> list[tuple[str, str]]:
    """Fresh ids take the whole first round (one pull each) and walk away; returns (id, query id) pairs."""
    held = []
    for i in range(N_ITEMS):
        pid = study.new_participant(f"walker-{i}", origin)
        q = study.next_query(eid, pid)
        assert q["state"] == "ok"
        held.append((pid, q["query_id"]))
        clock.ms += 10  # walker-0's is the oldest
    return held


def test_an_answering_id_gets_the_pull_first_and_a_fresh_one_after_twice_the_time(sqlite_url):
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, reissue_after_seconds=REISSUE_S)
    eid, _ = study.create_experiment(SPEC)
    held = _hold_round(study, clock, eid)
    # walker-0 answers its pull: an answering id
    assert study.answer(held[0][1], held[0][0], "funny")["status"] == "answered"
    fresh = study.new_participant("fresh", "198.51.100.9")
    clock.ms += REISSUE_S * 1000 + 1
    assert study.next_query(eid, fresh)["state"] == "waiting"  # no answer yet: not before 2 x reissue_after
    q = study.next_query(eid, held[0][0])
    assert q["state"] == "ok"  # the answering id takes the oldest abandoned pull at reissue_after
    clock.ms += REISSUE_S * 1000
    assert study.next_query(eid, fresh)["state"] == "ok"  # 2 x reissue_after: a fresh crowd makes progress


def test_an_id_that_abandoned_a_query_gets_no_reissued_pull_but_a_released_one_does(db_url):
    clock = Clock()
    study = open_study(db_url, clock=clock, reissue_after_seconds=REISSUE_S)
    eid, _ = study.create_experiment(SPEC)
    held = _hold_round(study, clock, eid)
    helper = study.new_participant("helper", "198.51.100.20")
    clock.ms += 2 * REISSUE_S * 1000 + 1
    assert study.next_query(eid, helper)["state"] == "ok"  # walker-0's pull, reissued: walker-0 abandoned it
    assert study.next_query(eid, held[0][0])["state"] == "waiting"  # walker-0 abandoned one: never again
    # walker-1 gives its pull back (the rating page closing): released, not abandoned; another id takes it
    assert study.release(held[1][1], held[1][0])["status"] == "released"
    assert study.next_query(eid, study.new_participant("taker", "198.51.100.21"))["state"] == "ok"
    # walker-1 may still take a reissued pull (walker-2's, 2 x reissue_after old): it gave its own back
    q = study.next_query(eid, held[1][0])
    assert q["state"] == "ok"
    with pytest.raises(Gone):  # it was walker-2's that went to walker-1
        study.answer(held[2][1], held[2][0], "funny")
    assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()


def test_an_address_whose_ids_abandoned_enough_gets_no_reissued_pull(db_url):
    """Fresh ids minted from one address, each abandoning one reissued pull: after
    ``reissue_abandoned_per_address`` abandoned queries from it, its new ids get ``waiting`` while an id from
    another address gets the pull."""
    clock = Clock()
    cap = 3
    study = open_study(db_url, clock=clock, reissue_after_seconds=REISSUE_S, reissue_abandoned_per_address=cap)
    eid, _ = study.create_experiment(SPEC)
    _hold_round(study, clock, eid, origin="192.0.2.1")  # 20 pulls held by ids of 192.0.2.1, none abandoned yet
    clock.ms += 2 * REISSUE_S * 1000 + 1
    served = []
    for i in range(cap + 5):  # each reissue to a new id of the same address cancels one of that address's pulls
        q = study.next_query(eid, study.new_participant(f"minted-{i}", "192.0.2.1"))
        served.append(q["state"])
    assert served == ["ok"] * cap + ["waiting"] * 5  # `cap` abandoned from the address: no more reissued pulls
    other = study.new_participant("elsewhere", "198.51.100.30")
    assert study.next_query(eid, other)["state"] == "ok"


def test_a_pull_held_by_an_id_that_abandoned_before_is_not_waited_for(db_url):
    """Once an id has abandoned a query, its later pulls are not waited for: an id that answers takes one at once
    (not after reissue_after_seconds) when the learner waits for its round; a fresh id still waits."""
    clock = Clock()
    study = open_study(db_url, clock=clock, reissue_after_seconds=REISSUE_S)
    eid, _ = study.create_experiment({**SPEC, "items": SPEC["items"][:4]})
    walkers = [study.new_participant(f"walker-{i}", "192.0.2.1") for i in range(4)]
    for w in walkers:  # they hold round 1
        assert study.next_query(eid, w)["state"] == "ok"
        clock.ms += 10
    clock.ms += 2 * REISSUE_S * 1000
    helpers = [study.new_participant(f"helper-{i}", f"198.51.100.{i + 1}") for i in range(4)]
    for h in helpers:  # each takes a walker's pull (2 x reissue_after old) and answers it: round 1 is complete
        q = study.next_query(eid, h)
        assert q["state"] == "ok"
        study.answer(q["query_id"], h, "funny")
    for w in walkers:  # every walker has abandoned one; they take round 2's pulls as the learner hands them out
        assert study.next_query(eid, w)["state"] == "ok"
    clock.ms += 1000
    assert study.next_query(eid, study.new_participant("fresh", "198.51.100.50"))["state"] == "waiting"
    q = study.next_query(eid, helpers[0])
    assert q["state"] == "ok"  # a walker's 1 s old pull, at once
    assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()


def test_a_release_and_the_reissue_in_one_batch(db_url):
    """A batch (PostgreSQL reads every participant's queries once, ahead) sees a release made earlier in it as a
    release, not an abandonment: the releasing id takes a reissued pull in the same batch. (A guard on the new
    rule's bookkeeping: the old rule gave a reissued pull to anyone, so this passed before too.)"""
    clock = Clock()
    study = open_study(db_url, clock=clock, reissue_after_seconds=REISSUE_S)
    eid, _ = study.create_experiment(SPEC)
    held = _hold_round(study, clock, eid)
    clock.ms += 2 * REISSUE_S * 1000 + 1
    taker = study.new_participant("taker", "198.51.100.21")
    out = study.run_batch(eid, [(0, ("release", held[0][0], held[0][1])), (0, ("ask", taker)),
                                (0, ("ask", held[0][0]))])
    assert out[0]["status"] == "released" and out[1]["state"] == "ok"
    assert out[2]["state"] == "ok"  # walker-1's pull, reissued to the id that gave its own back
    assert study.replay(eid).state_json() == study._cache[(eid, 0)].learner.state_json()


if __name__ == "__main__":  # the figures in docs/service.md: python tests/service/test_fair_reissue.py
    import tempfile

    for n_abusers in (22, 0):
        clock = Clock()
        study = open_study(f"sqlite:///{tempfile.mkdtemp()}/probe.sqlite", clock=clock,
                           reissue_after_seconds=REISSUE_S)
        eid, _ = study.create_experiment(SPEC)
        got = _probe(study, clock, eid, seconds=90, n_abusers=n_abusers)
        to = _reissued_to(study, eid)
        mine = sum(p.startswith("abuser-") for p in to)
        print(f"{n_abusers} abusers, 90 simulated s: the honest ids answered {got['honest_answers']}; "
              f"{len(to)} reissued pulls, {len(to) - mine} to honest ids, {mine} to abusers")
