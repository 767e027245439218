"""The simulation engine: both drivers agree, seeding is executor-independent, Dask matches local."""


import numpy as np
import pytest
from numba import njit

from purebandits import LilUCB, NonAdaptive
from purebandits.base import Learner
from purebandits.heaps import heap_init, heap_second, heap_top, heap_update, topheap_init, topheap_replace
from purebandits.instances import Bernoulli, Gaussian, make_instance
from purebandits.instances.rewards import stream_draw
from purebandits.jit import borrow, borrow_stream
from purebandits.metrics import wilson_interval
from purebandits.registry import all_learners
from purebandits.simulate import SimResult, rep_seeds, simulate
from purebandits.stopping import borrow_tracker, ls_tracker_fill, ls_tracker_update, memo_radius
from purebandits.testing.checks import _k_for, make_test_learner

ARRAYS = SimResult._ARRAYS


def assert_same(a: SimResult, b: SimResult) -> None:
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


class RoundRobin(Learner):
    """A learner without a compiled kernel: pulls arms in turn, stops after `budget` pulls."""

    name = ""

    def __init__(self, budget: int = 60) -> None:
        self.budget = budget

    def _start(self) -> None:
        self.next_ = 0

    def _ask_one(self) -> int:
        arm = self.next_
        self.next_ = (self.next_ + 1) % self.n_arms_
        return arm

    def _check_stop(self) -> None:
        if self.t_ >= self.budget:
            self._finish()


def test_rep_seeds_are_the_spawned_children():
    reps = 7
    for r, child in enumerate(np.random.SeedSequence(42).spawn(reps)):
        a, b = child.spawn(2)
        la, sb = rep_seeds(42, r)
        assert np.array_equal(a.generate_state(4), la.generate_state(4))
        assert np.array_equal(b.generate_state(4), sb.generate_state(4))


def _instance_for(cls):
    n = 6
    k = _k_for(cls, n).get("k", 1)
    means = np.array([0.9, 0.8, 0.55, 0.5, 0.45, 0.3])
    if cls.tags.get("bounded_rewards"):
        model = Bernoulli(means)
    else:
        model = Gaussian(means, 0.25)
    from purebandits.instances import Instance

    return Instance(f"test6-{type(model).__name__}", model, k), k


@pytest.mark.parametrize("cls", [c for c in all_learners().values() if c.has_kernel()], ids=lambda c: c.name)
def test_reference_and_compiled_drivers_agree(cls):
    """Same seeds, same reward stream: identical stopping times, counts, recommendations, checkpoints."""
    inst, k = _instance_for(cls)
    learner = make_test_learner(cls, **({"k": k} if k > 1 else {}))
    kw = dict(reps=4, seed=11, checkpoints=[3, 10, 100, 1000], jobs=1, max_pulls=20_000, progress=False)
    ref = simulate(learner, inst, driver="reference", **kw)
    fast = simulate(learner, inst, driver="compiled", **kw)
    assert ref.driver == "reference" and fast.driver == "compiled"
    assert_same(ref, fast)


def test_auto_driver_and_learner_without_kernel():
    res = simulate(RoundRobin(budget=60), "one_sparse:n=5", reps=3, seed=0, jobs=1, checkpoints=[10])
    assert res.driver == "reference"
    assert np.all(res.pulls == 60) and np.all(res.stopped) and np.all(res.counts == 12)
    assert simulate(LilUCB(), "one_sparse:n=5", reps=1, jobs=1).driver == "compiled"
    with pytest.raises(ValueError, match="no compiled kernel"):
        simulate(RoundRobin(), "one_sparse:n=5", reps=1, jobs=1, driver="compiled")


def test_results_do_not_depend_on_jobs_or_chunking():
    kw = dict(reps=12, seed=5, checkpoints=[20, 200, 2000], progress=False)
    base = simulate(LilUCB(delta=0.1), "one_sparse:n=30", jobs=1, **kw)
    assert_same(base, simulate(LilUCB(delta=0.1), "one_sparse:n=30", jobs=1, chunk_size=5, **kw))
    assert_same(base, simulate(LilUCB(delta=0.1), "one_sparse:n=30", jobs=2, chunk_size=1, **kw))
    assert_same(base, simulate(LilUCB(delta=0.1), "one_sparse:n=30", executor="inprocess", chunk_size=7, **kw))
    # a prefix of the repetitions is the same whatever the total number
    few = simulate(LilUCB(delta=0.1), "one_sparse:n=30", jobs=1, **{**kw, "reps": 4})
    np.testing.assert_array_equal(few.pulls, base.pulls[:4])
    other = simulate(LilUCB(delta=0.1), "one_sparse:n=30", jobs=1, **{**kw, "seed": 6})
    assert not np.array_equal(other.pulls, base.pulls)


def test_a_repetition_is_the_documented_seeded_run():
    inst = make_instance("one_sparse:n=20")
    res = simulate(NonAdaptive(delta=0.2), inst, reps=3, seed=9, jobs=1)
    for r in range(3):
        ls, ss = rep_seeds(9, r)
        learner = NonAdaptive(delta=0.2).start(20, seed=ls)
        stream = inst.model.stream(ss)
        while not learner.done:
            (a,) = learner.ask(1)
            learner.tell(a, stream.draw(a))
        assert res.pulls[r] == learner.n_pulls and list(res.recommended[r]) == learner.recommend()
        np.testing.assert_array_equal(res.counts[r], learner.counts_)


def test_checkpoints_record_the_state_at_that_many_pulls():
    inst = make_instance("one_sparse:n=10")
    cps = [5, 40, 300, 10**6]
    res = simulate(LilUCB(), inst, reps=2, seed=3, checkpoints=cps, jobs=1, driver="reference")
    for r in range(2):
        ls, ss = rep_seeds(3, r)
        learner = LilUCB().start(10, seed=ls)
        stream = inst.model.stream(ss)
        for j, c in enumerate(cps):
            while not learner.done and learner.n_pulls < c:
                (a,) = learner.ask(1)
                learner.tell(a, stream.draw(a))
            assert list(res.ckpt_recommended[r, j]) == learner.recommend()
            m = learner.means()
            assert res.ckpt_best_rank[r, j] == int(np.sum(m > m[0]))
        assert learner.done and res.pulls[r] == learner.n_pulls < cps[-1]


def test_max_pulls_caps_and_flags():
    res = simulate(LilUCB(), "lil_exp:n=200,alpha=0.6", reps=3, seed=0, max_pulls=500, jobs=1)
    assert np.all(res.pulls == 500) and not res.stopped.any()
    assert res.summary()["capped"] == 3
    assert np.all(res.counts.sum(axis=1) == 500)


def test_correctness_and_topk_ranks():
    inst = make_instance("custom:means=0.9/0.85/0.2/0.1,k=2,model=gaussian")
    res = simulate(RoundRobin(budget=400), inst, reps=5, seed=1, checkpoints=[4, 400], jobs=1)
    # RoundRobin recommends the top 1 by empirical mean (k = 1 learner): correct iff it is arm 0
    assert res.k == 1
    for r in range(5):
        assert res.correct[r] == inst.is_correct(res.recommended[r], k=1)
    assert np.all(res.ckpt_topk_rank == res.ckpt_best_rank)  # k = 1


def test_wilson_interval():
    """The summary's error interval is metrics.wilson_interval (known values)."""
    lo, hi = wilson_interval(0, 100, 0.05)
    assert lo == 0.0 and hi == pytest.approx(0.0370, abs=1e-3)
    lo, hi = wilson_interval(50, 100, 0.05)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)


def test_save_load_and_csv(tmp_path):
    res = simulate(LilUCB(), "one_sparse:n=8", reps=3, seed=2, checkpoints=[10, 100], jobs=1)
    res.save(tmp_path / "r.npz")
    back = SimResult.load(tmp_path / "r.npz")
    assert_same(res, back)
    assert back.algorithm == "lil_ucb" and back.instance == res.instance and back.seed == 2
    res.to_csv(tmp_path / "r.csv")
    import pandas as pd

    df = pd.read_csv(tmp_path / "r.csv")
    assert list(df.columns[:5]) == ["rep", "pulls", "stopped", "correct", "recommended"]
    assert list(df["pulls"]) == list(res.pulls) and "best_rank@100" in df.columns


def test_progress_bar_runs(capsys):
    res = simulate(LilUCB(), "one_sparse:n=8", reps=4, seed=2, jobs=1, progress=True)
    assert res.reps == 4
    assert "rep" in capsys.readouterr().err


def test_bad_arguments():
    with pytest.raises(ValueError, match="reps"):
        simulate(LilUCB(), "one_sparse:n=8", reps=-1)
    with pytest.raises(ValueError, match="driver"):
        simulate(LilUCB(), "one_sparse:n=8", reps=1, driver="fast")
    with pytest.raises(ValueError, match="delta"):
        simulate(LilUCB(delta=2.0), "one_sparse:n=8", reps=1, jobs=1)
    with pytest.raises(ValueError, match="executor"):
        simulate(LilUCB(), "one_sparse:n=8", reps=1, executor="cloud")


def test_dask_local_cluster_matches_local_run():
    distributed = pytest.importorskip("distributed")
    kw = dict(reps=6, seed=13, checkpoints=[30, 300], progress=False)
    local = simulate(LilUCB(), "one_sparse:n=25", jobs=1, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address  # tcp://127.0.0.1:port
        via_url = simulate(LilUCB(), "one_sparse:n=25", executor="dask://" + address.split("://")[1],
                           chunk_size=2, **kw)
        with distributed.Client(cluster) as client:
            via_client = simulate(LilUCB(), "one_sparse:n=25", executor=client, **kw)
    assert_same(local, via_url)
    assert_same(local, via_client)


# --------------------------------------------------------------------------- speed helpers stay exact
# The compiled helpers below are module-level and cached on disk (each build is a numba compilation of one to
# three seconds of a core): conftest stamps the tests' cached helpers with the tests' sources and the package's
# (``kernel_cache.stamp_package_kernels``), so an edit to a kernel they inline compiles them again, as for the
# helpers of test_bounds.py and test_lucb.py.
@njit(cache=True)
def _draws(arms, kind, a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
    out = np.empty(arms.shape[0])
    for i in range(arms.shape[0]):
        out[i] = stream_draw(kind, a, b, cdf, values, block, pos, rng, arms[i])
    return out


@pytest.mark.parametrize("model", [Gaussian([0.5, 0.0, 0.2], 0.25), Bernoulli([0.9, 0.5, 0.1]),
                                   make_instance("caption:559").model], ids=["gaussian", "bernoulli", "categorical"])
def test_python_and_compiled_streams_agree_across_growing_blocks(model):
    from purebandits.instances.rewards import BLOCK

    arms = np.random.default_rng(0).integers(0, model.n_arms, 3 * BLOCK + 77)
    s1, s2 = model.stream(5), model.stream(5)
    py = np.array([s1.draw(int(a)) for a in arms])
    np.testing.assert_array_equal(py, _draws(arms, *s2.args()))
    # interleaving the two forms on one stream gives the same sequence
    s3 = model.stream(5)
    mixed = [s3.draw(int(a)) for a in arms[:1000]]
    mixed += list(_draws(arms[1000:], *s3.args()))
    np.testing.assert_array_equal(py, mixed)


def test_block_sizes_do_not_change_the_numbers():
    rng1, rng2 = np.random.default_rng(3), np.random.default_rng(3)
    sizes = [256, 1024, 4096, 16384, 16384]
    parts = np.concatenate([rng1.standard_normal(m) for m in sizes])
    np.testing.assert_array_equal(parts, rng2.standard_normal(sum(sizes)))
    parts = np.concatenate([rng1.random(m) for m in sizes])
    np.testing.assert_array_equal(parts, rng2.random(sum(sizes)))


@njit(cache=True)
def _heap_run(key, heap, where, updates, values):  # pragma: no cover - compiled
    key, heap, where = borrow(key), borrow(heap), borrow(where)
    heap_init(key, heap, where)
    tops = np.empty((updates.shape[0], 2), np.int64)
    for i in range(updates.shape[0]):
        heap_update(heap, where, key, updates[i], values[i])
        tops[i, 0] = heap_top(heap)
        tops[i, 1] = heap_second(heap, key)
    return tops


@njit(cache=True)
def _top_run(key, hkey, harm, values):  # pragma: no cover - compiled
    """The replace-top heap (lil'UCB's kernel): only the top arm is re-keyed."""
    n = key.shape[0]
    topheap_init(key, hkey, harm)
    tops = np.empty(values.shape[0] + 1, np.int64)
    tops[0] = harm[0]
    for i in range(values.shape[0]):
        topheap_replace(hkey, harm, n, values[i])
        tops[i + 1] = harm[0]
    return tops


@njit(cache=True)
def _ls_run(tr, sums, counts, arms, rewards, d_ls):  # pragma: no cover - compiled
    ls_tracker_fill(tr, sums, counts, d_ls, 0.5)
    trb = borrow_tracker(tr)
    out = np.empty(arms.shape[0], np.int64)
    for i in range(arms.shape[0]):
        counts[arms[i]] += 1
        sums[arms[i]] += rewards[i]
        out[i] = ls_tracker_update(trb, sums, counts, arms[i], d_ls, 0.5)
    return out


def test_heap_and_ls_tracker_match_brute_force():
    from purebandits.bounds import lil_stopping_arm, ls_delta
    from purebandits.stopping import LS_EPSILON, ls_workspace

    run = _heap_run
    rng = np.random.default_rng(1)
    n = 37
    key = np.round(rng.random(n), 1)  # many ties: order by (key, -arm)
    updates = rng.integers(0, n, 3000)
    values = np.round(rng.random(3000), 1)
    tops = run(key.copy(), np.empty(n, np.int64), np.empty(n, np.int64), updates, values)
    k = key.copy()
    for i, (a, v) in enumerate(zip(updates, values, strict=True)):
        k[a] = v
        order = np.lexsort((np.arange(n), -k))
        assert tuple(tops[i]) == (order[0], order[1])

    # the replace-top heap (lil'UCB's kernel): only the top arm is re-keyed
    from purebandits.heaps import topheap_size

    top_run = _top_run
    for n in (1, 2, 3, 36, 37):
        key = np.round(rng.random(n), 1)
        key[: n // 3] = np.inf  # ties at +inf, as for arms not pulled twice yet
        values = np.round(rng.random(3000), 1)
        m = topheap_size(n)
        tops = top_run(key.copy(), np.empty(m), np.empty(m, np.int64), values)
        k = key.copy()
        assert tops[0] == np.lexsort((np.arange(n), -k))[0]
        for i, v in enumerate(values):
            k[tops[i]] = v
            assert tops[i + 1] == np.lexsort((np.arange(n), -k))[0]

    ls_run = _ls_run
    n, m = 4, 20000
    arms = np.arange(m) % n
    rewards = (rng.random(m) < np.array([0.9, 0.3, 0.3, 0.2])[arms]).astype(float)
    d_ls = ls_delta(0.1, LS_EPSILON)
    got = ls_run(ls_workspace(n), np.zeros(n), np.zeros(n, np.int64), arms, rewards, d_ls)
    sums, counts = np.zeros(n), np.zeros(n, np.int64)
    for i in range(m):
        counts[arms[i]] += 1
        sums[arms[i]] += rewards[i]
        assert got[i] == lil_stopping_arm(sums, counts.astype(float), d_ls, LS_EPSILON, 0.5)
    assert (got >= 0).any()


@njit(cache=True)
def _ls_tracker_run(tr, sums, counts, arms, rewards, d_ls, fill_at):  # pragma: no cover - compiled
    """The LS tracker run pull by pull in compiled code (filled at ``fill_at``)."""
    sums, counts = borrow(sums), borrow(counts)
    out = np.empty(arms.shape[0], np.int64)
    for i in range(arms.shape[0]):
        if i == fill_at:  # a resumed kernel fills the tracker from a state with pulls in it
            ls_tracker_fill(tr, sums, counts, d_ls, 0.5)
        counts[arms[i]] += 1
        sums[arms[i]] += rewards[i]
        out[i] = ls_tracker_update(borrow_tracker(tr), sums, counts, arms[i], d_ls, 0.5) if i >= fill_at else -2
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 17, 60])
def test_ls_tracker_certificate_decides_as_the_full_scan(n):
    """Random (not round-robin) pulls, tied means, arms left unpulled for a while, stops."""
    from purebandits.bounds import lil_stopping_arm, ls_delta
    from purebandits.stopping import LS_EPSILON, ls_workspace

    run = _ls_tracker_run
    rng = np.random.default_rng(n)
    stops, rescans = 0, 0
    for trial in range(4):
        m = 6000 + 600 * n
        p = np.round(0.6 * rng.random(n), 1)  # ties
        p[rng.integers(n)] = 0.95
        w = rng.random(n) ** 2 + 0.1
        arms = rng.choice(n, m, p=w / w.sum())
        rewards = (rng.random(m) < p[arms]).astype(float)
        d_ls = ls_delta([0.1, 0.5, 0.9, 0.99][trial], LS_EPSILON)
        fill_at = [0, 0, 10, 3 * n][trial]
        tr = ls_workspace(n)
        got = run(tr, np.zeros(n), np.zeros(n, np.int64), arms, rewards, d_ls, fill_at)
        stops += int((got >= 0).sum())
        rescans += int(tr[6][0])
        sums, counts = np.zeros(n), np.zeros(n, np.int64)
        for i in range(m):
            counts[arms[i]] += 1
            sums[arms[i]] += rewards[i]
            if i >= fill_at:
                assert got[i] == lil_stopping_arm(sums, counts.astype(float), d_ls, LS_EPSILON, 0.5), (trial, i)
    assert stops > 0 and rescans > 0


@njit(cache=True)
def _radii(rcount, rval, rpar, counts, d_ls, sigmas, n):  # pragma: no cover - compiled
    out = np.empty(counts.shape[0])
    for i in range(counts.shape[0]):
        out[i] = memo_radius(rcount, rval, rpar, counts[i], d_ls[i], n, sigmas[i])
    return out


def test_ls_radius_memo_returns_the_radius_bit_for_bit():
    from purebandits.bounds import ls_delta, ls_radius_s
    from purebandits.stopping import LS_EPSILON, ls_workspace, radius_memo_size

    radii = _radii
    rng = np.random.default_rng(3)
    m, slots = 5000, radius_memo_size(7)
    assert slots == 1024 and radius_memo_size(300) == 4096 and radius_memo_size(10**6) == 65536
    # repeated counts, counts that share a slot (c and c + slots), and parameter changes
    counts = np.concatenate([rng.integers(1, 50, m), rng.integers(1, 4, m) * slots + rng.integers(0, 3, m)])
    d1, d2 = ls_delta(0.1, LS_EPSILON), ls_delta(0.05, LS_EPSILON)
    d_ls = np.where(np.arange(2 * m) % 700 < 350, d1, d2)
    sigmas = np.where(np.arange(2 * m) % 900 < 600, 0.5, 0.25)
    tr = ls_workspace(7)
    got = radii(tr[7], tr[8], tr[9], counts, d_ls, sigmas, 7)
    want = [ls_radius_s(float(c), d, 7.0, LS_EPSILON, s) for c, d, s in zip(counts, d_ls, sigmas, strict=True)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cls", [c for c in all_learners().values() if c.has_kernel()], ids=lambda c: c.name)
def test_kernel_resumes_after_python_pulls(cls):
    """compiled -> a few ask/tell -> compiled again equals the pure ask/tell run (kernel caches invalidated)."""
    inst, k = _instance_for(cls)
    make = lambda: make_test_learner(cls, **({"k": k} if k > 1 else {})).start(inst.n_arms, seed=4)  # noqa: E731
    ref, mixed = make(), make()
    s_ref, s_mix = inst.model.stream(8), inst.model.stream(8)
    from purebandits.simulate.engine import _advance_reference

    _advance_reference(ref, s_ref, 3000)
    mixed.run_compiled(s_mix, 40)
    _advance_reference(mixed, s_mix, 90)
    mixed.run_compiled(s_mix, 500)
    mixed.run_compiled(s_mix, 3000)
    assert mixed.state_json() == ref.state_json()
