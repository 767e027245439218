"""The crowd in the simulator (issue 37 item 1) and the quality of the reported ranking (item 2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.instances import Bernoulli, Categorical, make_instance
from purebandits.metrics import kendall_top, ranking_quality, reported_ranking, top1_correct
from purebandits.registry import make_learner
from purebandits.simulate import SimResult, simulate
from purebandits.simulate.crowd import FATIGUE_RATIO, Crowd, CrowdRun, crowd_seed, fatigue_share, parse_crowd


class Recording(CrowdRun):
    """A crowd run that keeps every participant served (the loop forgets those who left)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.everyone: list = []

    def _arrive(self) -> bool:
        ok = super()._arrive()
        if ok:
            self.everyone.append(self.active[-1])
        return ok


def _run(learner: str, model, crowd: Crowd, budget: int, seed: int = 0, trace: list | None = None, **params):
    learner = make_learner(learner, **params).start(model.n_arms, seed=seed)
    run = Recording(learner, model.stream(seed + 1), crowd, np.random.default_rng(seed + 2), budget, trace=trace)
    return learner, run


def _distinct_per_participant(trace: list) -> None:
    seen: dict[int, set[int]] = {}
    for pid, position, arm, _ in trace:
        rated = seen.setdefault(pid, set())
        assert arm not in rated, f"participant {pid} rated item {arm} twice"
        assert position == len(rated)  # positions count 0, 1, 2, ... in answer order
        rated.add(arm)


# ----------------------------------------------------------------------------- parsing
def test_parse_crowd_defaults_and_values():
    assert parse_crowd("") == Crowd() == Crowd(sessions=25, concurrency=32, batch=1, fatigue=0.0, careless=0.0)
    c = parse_crowd("sessions=10, concurrency=4,batch=3,fatigue=1,careless=0.25")
    assert c == Crowd(sessions=10.0, concurrency=4, batch=3, fatigue=1.0, careless=0.25)
    assert parse_crowd(c.spec()) == c


@pytest.mark.parametrize("spec, message", [
    ("sesions=3", "unknown key 'sesions'"),
    ("concurrency=2.5", "key 'concurrency' must be an integer"),
    ("batch=0", "'batch' must be an integer >= 1"),
    ("sessions=0.5", "'sessions' must be a finite number >= 1"),
    ("fatigue=-1", "'fatigue' must be a finite number >= 0"),
    ("careless=1.5", "'careless' must be a share in [0, 1]"),
    ("careless=0.6,straightline=0.5", "'straightline' must be a share in [0, 1 - careless] = [0, 0.4]"),
    ("straightline=-0.1", "'straightline' must be a finite number >= 0"),
    ("fatigue=abc", "key 'fatigue' must be a number, got 'abc'"),
    ("batch=2,batch=3", "key 'batch' given twice"),
    ("sessions", "'sessions' is not KEY=VALUE"),
])
def test_parse_crowd_errors_name_the_key(spec, message):
    with pytest.raises(ValueError, match="--crowd: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_crowd(spec)


def test_crowd_option_errors_on_the_command_line(capsys):
    rc = main(["simulate", "--algorithm", "lil_ucb", "--instance", "caption:559", "--reps", "1",
               "--crowd", "concurrency=8,sesions=3", "--no-progress"])
    assert rc == 2
    assert "--crowd: unknown key 'sesions' (keys: sessions, concurrency, batch, fatigue, careless, straightline)" \
        in capsys.readouterr().err
    rc = main(["simulate", "--algorithm", "lil_ucb", "--instance", "one_sparse:n=10", "--reps", "1",
               "--crowd", "careless=0.2", "--no-progress"])
    assert rc == 2 and "Gaussian arms have none" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the crowd's invariants
@pytest.mark.parametrize("learner, params", [("lil_ucb", {}), ("random_sampling", {}),
                                             ("successive_elimination", {}), ("kl_rand_lucb", {})])
def test_no_participant_rates_an_item_twice(learner, params):
    model = make_instance("caption:559").model  # 138 items; sessions of mean 60: long ones exercise the restriction
    trace: list = []
    _, run = _run(learner, model, Crowd(sessions=60, concurrency=8, batch=3, fatigue=1, careless=0.2), 6000,
                  trace=trace, **params)
    run.advance(6000)
    assert len(trace) == run.answered > 0
    _distinct_per_participant(trace)
    assert max(len({a for q, _, a, _ in trace if q == pid}) for pid in {t[0] for t in trace}) > 30


def test_participants_rate_every_item_at_most_once_then_leave():
    model = Bernoulli([0.9, 0.8, 0.7, 0.6, 0.5])  # sessions longer than the 5 items
    trace: list = []
    learner, run = _run("random_sampling", model, Crowd(sessions=50, concurrency=4, batch=2), 2000, trace=trace)
    run.advance(2000)
    _distinct_per_participant(trace)
    assert run.answered == 2000 and learner.t_ == 2000
    left = [p for p in run.everyone if p not in run.active]
    assert len(left) >= 300
    # everyone who left rated all 5 items or ended the session, but the few cut short when the budget of asks ran out
    short = [p for p in run.everyone if p.answered < min(p.length, 5)]
    assert len(short) <= run.crowd.concurrency
    assert all(p.answered == min(p.length, 5) for p in left if p not in short)
    assert sum(p.answered == 5 < p.length for p in left) > 200  # sessions longer than the items: all 5 rated


@pytest.mark.parametrize("crowd", [Crowd(sessions=5, concurrency=16, batch=1),
                                   Crowd(sessions=3, concurrency=7, batch=4, careless=0.5)])
def test_pending_answers_are_counted_at_every_rating(crowd):
    model = make_instance("caption:559").model
    learner, run = _run("lil_ucb", model, crowd, 1500)
    most = 0
    for t in range(1, 1501):
        run.advance(t)
        pending = int(learner.pending_.sum())
        assert run.answered == learner.t_ == t
        assert run.asked - run.answered - pending == 0 and run.pending == pending
        assert all(len(p.held) <= crowd.batch for p in run.active)
        most = max(most, pending)
    # answers really are delayed: every place is taken (short sessions hold fewer than batch pulls)
    assert crowd.concurrency <= most <= crowd.concurrency * crowd.batch
    # the budget: exactly 1500 ratings, nothing asked beyond it, nothing left pending
    assert run.asked == 1500 and run.pending == 0 and int(learner.pending_.sum()) == 0
    assert learner.counts_.sum() == 1500


def test_sessions_end_with_the_assumed_geometric_lengths():
    model = make_instance("caption:559").model
    learner, run = _run("lil_ucb", model, Crowd(sessions=5, concurrency=32), 20000)
    run.advance(20000)
    lengths = np.array([p.length for p in run.everyone])
    answered = np.array([p.answered for p in run.everyone])
    assert lengths.min() >= 1 and np.all(answered <= lengths)
    # a session ends when it is complete: only those active or cut short when the asks ran out differ
    assert int((answered < lengths).sum()) <= 32
    # Geometric(1/5): mean 5, sd sqrt(1 - p) / p = 4.47; ~4,000 sessions give a standard error of 0.07
    assert lengths.size > 3500
    assert abs(lengths.mean() - 5) < 6 * math.sqrt(0.8) / 0.2 / math.sqrt(lengths.size)
    assert answered.sum() == 20000 == learner.t_


def test_one_rating_per_person_one_at_a_time_is_the_reference_loop():
    """sessions=1, concurrency=1: every participant is new, so every ask is unrestricted and told at once."""
    kw = dict(reps=3, seed=4, jobs=1, checkpoints=[300, 2000], max_pulls=5000, progress=False)
    ref = simulate("lil_ucb", "caption:559", driver="reference", **kw)
    crowd = simulate("lil_ucb", "caption:559", crowd=Crowd(sessions=1, concurrency=1), **kw)
    for name in ("pulls", "stopped", "recommended", "counts", "ckpt_recommended", "ckpt_best_rank"):
        np.testing.assert_array_equal(getattr(ref, name), getattr(crowd, name), err_msg=name)
    assert crowd.extra["participants"] == crowd.pulls.sum()


def test_a_learner_that_stops_ends_the_crowd_run():
    # LUCB's interval stop (lil'UCB's count rule cannot fire here: sessions of 10 rate all 5 items evenly)
    res = simulate("lucb1", "custom:means=0.9/0.3/0.2/0.2/0.1,model=bernoulli", reps=3, seed=0, jobs=1,
                   progress=False, crowd=Crowd(sessions=10, concurrency=8), max_pulls=10**5)
    assert res.stopped.all() and res.correct.all() and (res.pulls < 10**4).all()


# ----------------------------------------------------------------------------- rewards: fatigue and careless
def test_fatigue_formula_reproduces_contest_540():
    p = 0.638
    assert fatigue_share(0, 1.0) == 0.0
    assert p + (1 - p) * fatigue_share(4, 1.0) == pytest.approx(0.718, abs=1e-12)
    assert FATIGUE_RATIO == pytest.approx(0.282 / 0.362)
    assert fatigue_share(4, 0.0) == 0.0 and fatigue_share(8, 0.5) == pytest.approx(fatigue_share(4, 1.0))
    np.testing.assert_allclose(fatigue_share(np.arange(3), 2.0), [1 - FATIGUE_RATIO ** (j / 2) for j in range(3)])


@pytest.mark.parametrize("fatigue, first, fifth", [(1.0, 0.638, 0.718), (0.0, 0.638, 0.638)])
@pytest.mark.slow  # a long simulated crowd
def test_fatigue_drifts_to_unfunny_as_in_contest_540(fatigue, first, fifth):
    model = Categorical([[0.638, 0.2, 0.162]] * 20)  # every caption unfunny with probability 0.638
    trace: list = []
    _, run = _run("random_sampling", model, Crowd(sessions=10, concurrency=32, fatigue=fatigue), 60000, trace=trace)
    run.advance(60000)
    t = np.array([(pos, r) for _, pos, _, r in trace])
    for pos, want in ((0, first), (4, fifth)):
        r = t[t[:, 0] == pos, 1]
        se = math.sqrt(want * (1 - want) / r.size)
        assert r.size > 3000
        assert abs(np.mean(r == 0.0) - want) < 4.5 * se, (pos, np.mean(r == 0.0), want)


def test_careless_raters_answer_uniformly_over_the_labels():
    model = Categorical([[0.0, 0.0, 1.0]] * 10)  # every caption funny for an attentive rater
    trace: list = []
    _, run = _run("random_sampling", model, Crowd(sessions=5, concurrency=8, careless=1.0), 9000, trace=trace)
    run.advance(9000)
    r = np.array([x[3] for x in trace])
    for label in (0.0, 0.5, 1.0):  # 1/3 each: standard error sqrt(2/9 / 9000) = 0.005
        assert abs(np.mean(r == label) - 1 / 3) < 0.025
    _, run = _run("random_sampling", model, Crowd(sessions=5, concurrency=8, careless=0.0), 900, trace=(t0 := []))
    run.advance(900)
    assert {x[3] for x in t0} == {1.0}


def _labels_by_participant(trace: list) -> dict[int, tuple[set[float], int]]:
    """Per participant of a trace: the labels it gave and how many ratings."""
    out: dict[int, tuple[set[float], int]] = {}
    for pid, _, _, r in trace:
        labels, count = out.get(pid, (set(), 0))
        labels.add(r)
        out[pid] = (labels, count + 1)
    return out


def test_straight_lining_raters_give_one_label_to_everything():
    model = Categorical([[0.0, 0.0, 1.0]] * 40)  # every caption funny for an attentive rater
    trace: list = []
    _, run = _run("random_sampling", model, Crowd(sessions=10, concurrency=8, straightline=1.0, fatigue=1.0), 20000,
                  trace=trace)
    run.advance(20000)
    given = {pid: labels for pid, (labels, _) in _labels_by_participant(trace).items()}
    assert all(len(labels) == 1 for labels in given.values())  # one label each, fatigue or not
    first = np.array([next(iter(labels)) for labels in given.values()])
    n = first.size  # ~2,000 participants, each label 1/3: standard error sqrt(2/9 / n) < 0.011
    for label in (0.0, 0.5, 1.0):
        assert abs(np.mean(first == label) - 1 / 3) < 4.5 * math.sqrt(2 / 9 / n)
    # a share: the others rate from the vote shares (all funny here) or, if careless, uniformly
    trace = []
    _, run = _run("random_sampling", model, Crowd(sessions=10, concurrency=8, straightline=0.3, careless=0.2), 20000,
                  trace=trace)
    run.advance(20000)
    long = [labels for labels, count in _labels_by_participant(trace).values() if count >= 8]
    # a rater with 8+ ratings who is not funny-only is careless (uniform: 3+ labels w.p. ~0.9) or straight (one
    # label, not funny w.p. 2/3): the funny-only share estimates 0.5 + 0.3/3 = 0.6 plus careless raters' rare runs
    funny_only = np.mean([labels == {1.0} for labels in long])
    se = math.sqrt(0.25 / len(long))
    assert abs(funny_only - 0.6) < 4.5 * se + 0.2 * (1 / 3) ** 7


def test_gaussian_arms_take_a_crowd_but_not_labels():
    res = simulate("lil_ucb", "one_sparse:n=10", reps=2, seed=0, jobs=1, max_pulls=500, crowd=Crowd(concurrency=4),
                   progress=False)
    assert (res.pulls == 500).all() or res.stopped.any()
    with pytest.raises(ValueError, match="fatigue, careless and straight-lining raters need labelled rewards"):
        simulate("lil_ucb", "one_sparse:n=10", reps=1, jobs=1, crowd=Crowd(fatigue=1.0))
    with pytest.raises(ValueError, match="journal"):
        simulate("lil_ucb", "caption:559", reps=1, jobs=1, crowd=Crowd(), journal="unused")
    with pytest.raises(ValueError, match="reference driver"):
        simulate("lil_ucb", "caption:559", reps=1, jobs=1, crowd=Crowd(), driver="compiled")


# ----------------------------------------------------------------------------- seeds
def test_same_seed_same_csv(tmp_path):
    kw = dict(reps=4, jobs=1, checkpoints=[500, 2000], max_pulls=3000, progress=False,
              crowd=Crowd(sessions=8, concurrency=12, batch=2, fatigue=1.0, careless=0.1))
    a, b, c, d = (tmp_path / f"{x}.csv" for x in "abcd")
    simulate("lil_ucb", "caption:559", seed=7, **kw).to_csv(a)
    simulate("lil_ucb", "caption:559", seed=7, **kw).to_csv(b)
    simulate("lil_ucb", "caption:559", seed=8, **kw).to_csv(c)
    simulate("lil_ucb", "caption:559", seed=7, chunk_size=1, **{**kw, "jobs": 2}).to_csv(d)
    assert a.read_bytes() == b.read_bytes() == d.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    # the crowd's generator is the third child of the repetition's sequence, the learner's and stream's the first two
    assert crowd_seed(7, 3).spawn_key == (3, 2)


# ----------------------------------------------------------------------------- quality measures
def test_reported_ranking_puts_the_recommendation_first_and_unanswered_last():
    emp = np.array([0.5, 0.9, 0.2, 0.3, 0.7])
    counts = np.array([1, 1, 1, 0, 1])
    np.testing.assert_array_equal(reported_ranking([4], emp, counts, 5), [4, 1, 0, 2, 3])
    np.testing.assert_array_equal(reported_ranking([2, 4], emp, counts, 3), [2, 4, 1])
    np.testing.assert_array_equal(reported_ranking([0], np.zeros(4), np.zeros(4), 4), [0, 1, 2, 3])  # ties: index


def test_top1_correct_and_kendall_on_hand_computed_cases():
    assert top1_correct(2, np.array([0.5, 0.9, 0.9])) and top1_correct(1, np.array([0.5, 0.9, 0.9]))
    assert not top1_correct(0, np.array([0.5, 0.9, 0.9]))
    means = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    # reported order 1, 0, 3, 2, 4: 2 of the 10 pairs discordant ((1, 0) and (3, 2)): tau = (8 - 2) / 10
    assert kendall_top([1, 0, 3, 2, 4], means) == pytest.approx(0.6)
    assert kendall_top([0, 1, 2, 3, 4], means) == pytest.approx(1.0)
    assert kendall_top([4, 3, 2, 1, 0], means) == pytest.approx(-1.0)
    # 3 items, one pair tied in the true means: tau-b = (C - D) / sqrt((P - T_x)(P - T_y)) = 2 / sqrt(3 * 2)
    assert kendall_top([0, 1, 2], np.array([0.9, 0.5, 0.5])) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_top([0], means)) and math.isnan(kendall_top([0, 1], np.array([0.5, 0.5])))


def test_ranking_quality_on_a_hand_computed_case():
    means = 1 - np.arange(30) / 100  # arm i has the i-th largest mean
    emp = means.copy()
    emp[[8, 9]] = 0.5  # two of the true top 10 look bad: they fall to the end of the ranking
    q = ranking_quality([0], emp, np.ones(30), means)
    # reported top 10: arms 0..7, 10, 11 -> 8 of the true top 10; top 25: 0..7, 10..26 -> 23 of 0..24
    assert q == pytest.approx({"top1_correct": 1.0, "top10_precision": 0.8, "top25_precision": 0.92, "kendall25": 1.0})
    q = ranking_quality([3], emp, np.ones(30), means)  # a learner that recommends arm 3 ranks it first
    assert q["top1_correct"] == 0.0 and q["top10_precision"] == 0.8
    # arm 3 ahead of 0, 1, 2: 3 discordant pairs of 300
    assert q["kendall25"] == pytest.approx((297 - 3) / 300)
    # fewer than 10 arms: the measures use the top n
    q = ranking_quality([1], np.array([0.1, 0.3, 0.2]), np.ones(3), np.array([0.3, 0.2, 0.1]))
    assert q["top10_precision"] == 1.0 and q["kendall25"] == pytest.approx(-1 / 3)


def test_quality_at_checkpoints_and_at_the_end(tmp_path):
    res = simulate("lil_ucb", "caption:559", reps=2, seed=1, jobs=1, checkpoints=[100, 4000], max_pulls=4000,
                   crowd=Crowd(concurrency=8), progress=False)
    for name in ("top1_correct", "top10_precision", "top25_precision", "kendall25"):
        assert res.quality[name].shape == (2,) and res.quality[name + "@"].shape == (2, 2)
        np.testing.assert_array_equal(res.quality[name], res.quality[name + "@"][:, 1])  # 4000 is the end
    np.testing.assert_array_equal(res.quality["top1_correct@"], (res.means[res.ckpt_recommended[:, :, 0]]
                                                                == res.means.max()).astype(float))
    path = tmp_path / "r.npz"
    res.save(path)
    back = SimResult.load(path)
    assert back.quality.keys() == res.quality.keys()
    np.testing.assert_array_equal(back.quality["kendall25@"], res.quality["kendall25@"])
    # without a crowd: quality on request; by default the CSV is the one it always was
    plain = simulate("lil_ucb", "caption:559", reps=2, seed=1, jobs=1, checkpoints=[100], max_pulls=400,
                     progress=False)
    assert plain.quality == {} and "top10_precision@100" not in plain.rows()[0]
    asked = simulate("lil_ucb", "caption:559", reps=2, seed=1, jobs=1, checkpoints=[100], max_pulls=400,
                     progress=False, quality=True)
    assert "top10_precision@100" in asked.rows()[0] and "kendall25" in asked.rows()[0]
    np.testing.assert_array_equal(asked.pulls, plain.pulls)


# ----------------------------------------------------------------------------- the command line
def test_cli_crowd_on_a_caption_contest(tmp_path, capsys):
    out = tmp_path / "c.csv"
    rc = main(["simulate", "--algorithm", "lil_ucb", "--instance", "caption:559", "--reps", "2", "--jobs", "1",
               "--max-pulls", "3000", "--checkpoints", "1000,3000", "--crowd", "sessions=10,fatigue=1,careless=0.1",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "crowd             sessions=10, concurrency=32, batch=1, fatigue=1, careless=0.1" in text
    assert "top10_precision" in text
    df = pd.read_csv(out)
    for c in ("top1_correct", "top10_precision", "top25_precision", "kendall25", "top1_correct@1000",
              "top10_precision@1000", "top25_precision@3000", "kendall25@3000"):
        assert c in df.columns
    assert df["top25_precision"].between(0, 1).all() and (df["pulls"] == 3000).all()


def test_cli_crowd_on_a_users_summary_file(tmp_path, capsys, caption_summary):
    path = caption_summary(30)
    out = tmp_path / "u.csv"
    rc = main(["simulate", "--algorithm", "random_sampling", "--instance", f"caption:{path}", "--reps", "2",
               "--jobs", "1", "--max-pulls", "2000", "--checkpoints", "500", "--crowd", "concurrency=4,batch=2",
               "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    df = pd.read_csv(out)
    assert len(df) == 2 and (df["pulls"] == 2000).all() and "top10_precision@500" in df.columns
    rc = main(["simulate", "--algorithm", "lil_ucb", "--instance", "caption:559", "--reps", "1", "--jobs", "1",
               "--max-pulls", "300", "--quality", "--out", str(out), "--no-progress"])
    assert rc == 0 and "kendall25" in pd.read_csv(out).columns
