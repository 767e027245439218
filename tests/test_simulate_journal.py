"""The simulate() journal: a killed run resumes with the same results, and nothing stale is reused."""

import numpy as np
import pytest

from purebandits import LilUCB, NonAdaptive
from purebandits.instances import Gaussian
from purebandits.simulate import Journal, engine, simulate
from purebandits.simulate.journal import JOURNAL_FIELDS, task_key

KW = dict(seed=11, checkpoints=[30, 300], progress=False, jobs=1)
INSTANCE = "alpha_exponential:n=12,alpha=0.6"


def assert_same(a, b):
    for name in JOURNAL_FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_journal_gives_the_same_results_and_a_rerun_runs_nothing(tmp_path):
    plain = simulate(LilUCB(delta=0.1), INSTANCE, reps=10, **KW)
    first = simulate(LilUCB(delta=0.1), INSTANCE, reps=10, journal=tmp_path, chunk_size=3, **KW)
    assert_same(plain, first)
    assert first.extra["resumed_reps"] == 0
    assert len(list(tmp_path.glob("*/reps-*.npz"))) == 4  # chunks of 3, 3, 3, 1
    again = simulate(LilUCB(delta=0.1), INSTANCE, reps=10, journal=tmp_path, **KW)
    assert_same(plain, again)
    assert again.extra["resumed_reps"] == 10 and again.extra["resumed_seconds"] > 0


def test_more_repetitions_run_only_the_missing_ones_whatever_the_chunking(tmp_path):
    simulate(LilUCB(delta=0.1), INSTANCE, reps=7, journal=tmp_path, chunk_size=2, **KW)
    grown = simulate(LilUCB(delta=0.1), INSTANCE, reps=15, journal=tmp_path, chunk_size=5, **KW)
    assert grown.extra["resumed_reps"] == 7
    assert_same(simulate(LilUCB(delta=0.1), INSTANCE, reps=15, **KW), grown)
    # fewer repetitions than journalled: the prefix, nothing run
    few = simulate(LilUCB(delta=0.1), INSTANCE, reps=4, journal=tmp_path, **KW)
    assert few.extra["resumed_reps"] == 4
    assert_same(simulate(LilUCB(delta=0.1), INSTANCE, reps=4, **KW), few)


def test_a_run_killed_midway_keeps_its_finished_chunks(tmp_path, monkeypatch):
    real = engine.run_chunk
    calls = []

    def dies_on_third_chunk(task, reps):
        calls.append(reps)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(task, reps)

    monkeypatch.setattr(engine, "run_chunk", dies_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        simulate(LilUCB(delta=0.1), INSTANCE, reps=12, journal=tmp_path, chunk_size=4, executor="inprocess",
                 **{k: v for k, v in KW.items() if k != "jobs"})
    monkeypatch.setattr(engine, "run_chunk", real)
    # a temporary file left by a write cut short is ignored
    (next(tmp_path.iterdir()) / ".reps-000000008-000000011.npz.1.tmp").write_bytes(b"partial")
    resumed = simulate(LilUCB(delta=0.1), INSTANCE, reps=12, journal=tmp_path, **KW)
    assert resumed.extra["resumed_reps"] == 8
    assert_same(simulate(LilUCB(delta=0.1), INSTANCE, reps=12, **KW), resumed)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_chunk_file_is_run_again(tmp_path, damage):
    simulate(LilUCB(delta=0.1), INSTANCE, reps=6, journal=tmp_path, chunk_size=3, **KW)
    files = sorted(tmp_path.glob("*/reps-*.npz"))
    data = files[1].read_bytes()
    files[1].write_bytes(b"not an npz file" if damage == "garbage" else data[: len(data) // 2])  # a zip cut short
    assert sum(t.reps for t in Journal(tmp_path).tasks()) == 3
    res = simulate(LilUCB(delta=0.1), INSTANCE, reps=6, journal=Journal(tmp_path), **KW)
    assert res.extra["resumed_reps"] == 3
    assert_same(simulate(LilUCB(delta=0.1), INSTANCE, reps=6, **KW), res)


@pytest.mark.parametrize("change", [
    dict(learner=LilUCB(delta=0.05)), dict(seed=12), dict(checkpoints=[30, 301]), dict(max_pulls=5000),
    dict(instance="alpha_exponential:n=12,alpha=0.3"), dict(learner=NonAdaptive(delta=0.1)),
    dict(driver="reference"),
])
def test_every_input_of_a_repetition_is_in_the_key(tmp_path, change):
    base = dict(learner=LilUCB(delta=0.1), instance=INSTANCE, seed=11, checkpoints=[30, 300], max_pulls=10**6,
                driver="auto")
    simulate(base["learner"], base["instance"], reps=3, journal=tmp_path, progress=False, jobs=1,
             **{k: v for k, v in base.items() if k not in ("learner", "instance")})
    new = {**base, **change}
    res = simulate(new["learner"], new["instance"], reps=3, journal=tmp_path, progress=False, jobs=1,
                   **{k: v for k, v in new.items() if k not in ("learner", "instance")})
    assert res.extra["resumed_reps"] == 0
    assert len(list(tmp_path.iterdir())) == 2


def test_the_key_sees_the_reward_distribution_not_only_the_means():
    from purebandits.simulate.engine import _Task

    def key(model):
        return task_key(_Task(learner=LilUCB(), model=model, seed=0, k=1, checkpoints=np.zeros(0, np.int64),
                              max_pulls=10, driver="compiled", top=np.array([0]), kth_mean=0.0))

    means = [0.5, 0.2]
    assert key(Gaussian(means, 0.25)) != key(Gaussian(means, 0.5))
    assert key(Gaussian(means, 0.25)) == key(Gaussian(np.array(means), 0.25))


def test_tasks_list_what_each_task_has_done(tmp_path, capsys):
    a = simulate(LilUCB(delta=0.1), INSTANCE, reps=7, journal=tmp_path, chunk_size=3, **KW)
    b = simulate(NonAdaptive(delta=0.1), INSTANCE, reps=4, journal=tmp_path, chunk_size=4, **KW)
    simulate(NonAdaptive(delta=0.1), INSTANCE, reps=6, journal=tmp_path, chunk_size=4, **KW)  # 2 more
    tasks = {t.about["algorithm"]: t for t in Journal(tmp_path).tasks()}
    assert set(tasks) == {"lil_ucb", "non_adaptive"}
    assert tasks["lil_ucb"].reps == 7 and tasks["lil_ucb"].pulls == int(a.pulls.sum())
    na = simulate(NonAdaptive(delta=0.1), INSTANCE, reps=6, **KW)
    assert tasks["non_adaptive"].reps == 6 and tasks["non_adaptive"].pulls == int(na.pulls.sum())
    assert tasks["lil_ucb"].about["instance"] == a.instance == b.instance
    assert tasks["lil_ucb"].about["seed"] == 11 and tasks["lil_ucb"].seconds > 0
    assert tasks["lil_ucb"].stopped == int(a.stopped.sum())
    assert tasks["lil_ucb"].wrong == int((a.stopped & ~a.correct).sum())
    # a task without its description (journalled by an older version) is still counted
    (tmp_path / tasks["lil_ucb"].key / "task.json").unlink()
    (tmp_path / tasks["lil_ucb"].key / "reps-000000099-000000099.npz").write_bytes(b"damaged")
    from purebandits.cli import main

    assert main(["journal", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "non_adaptive" in out and "2 tasks, 13 repetitions" in out
    assert main(["journal", str(tmp_path / "missing")]) == 2


def test_tasks_count_stopped_and_wrong_runs_not_capped_ones(tmp_path):
    """A near-tie at a loose delta with a small cap: some runs stop wrongly, some hit the cap (a
    capped run's wrong recommendation is not a wrong stop), and a repetition journalled twice
    (two overlapping chunk sets) counts once, its worker seconds included."""
    kw = dict(seed=11, progress=False, jobs=1, max_pulls=300, journal=tmp_path / "a")
    lrn, inst = LilUCB(delta=0.9, preset="heuristic"), Gaussian([0.5, 0.45, 0.3], 1.0)
    r = simulate(lrn, inst, reps=12, chunk_size=5, **kw)
    capped_wrong = int((~r.stopped & ~r.correct).sum())
    assert 0 < r.stopped.sum() < 12 and (r.stopped & ~r.correct).any() and capped_wrong > 0
    (task,) = Journal(tmp_path / "a").tasks()
    assert (task.reps, task.stopped, task.wrong) == (12, int(r.stopped.sum()), int((r.stopped & ~r.correct).sum()))
    # a second chunking of the same repetitions (a resumed run with other chunks) adds no count
    simulate(lrn, inst, reps=12, chunk_size=4, **{**kw, "journal": tmp_path / "b"})
    for f in (tmp_path / "b").glob("*/reps-*.npz"):
        f.rename(tmp_path / "a" / task.key / f.name)
    assert len(list((tmp_path / "a" / task.key).glob("reps-*.npz"))) == 3 + 3
    (again,) = Journal(tmp_path / "a").tasks()
    assert (again.reps, again.pulls, again.stopped, again.wrong) == (task.reps, task.pulls, task.stopped, task.wrong)
    # with every repetition costing one worker second, each is counted once: 12 s, not 12 + 12
    for f in (tmp_path / "a" / task.key).glob("reps-*.npz"):
        with np.load(f) as data:
            arrays = {k: data[k] for k in data.files}
        np.savez(f, **{**arrays, "seconds": np.float64(arrays["reps"].size)})
    (timed,) = Journal(tmp_path / "a").tasks()
    assert timed.seconds == pytest.approx(12.0)
