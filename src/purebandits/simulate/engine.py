"""Monte Carlo simulation of a learner on an instance: many independent seeded repetitions.

``simulate(learner, instance, reps=..., seed=...)`` runs ``reps`` independent repetitions and
returns a :class:`SimResult` of NumPy arrays, one row per repetition.

Seeding. Repetition ``r`` uses ``SeedSequence(seed).spawn(reps)[r]``; that sequence spawns two
children, the first seeds the learner (``learner.clone().start(n, seed=child0)``) and the second
the reward stream (``model.stream(child1)``). A repetition's result therefore depends only on
``(learner parameters, instance, seed, r, checkpoints, max_pulls)`` and never on the executor,
the number of jobs or the chunking.

Drivers. ``driver="reference"`` runs the literal ask/tell loop (``ask(1)``, then ``tell``) for
any learner; ``driver="compiled"`` calls ``learner.run_compiled(stream, max_pulls)`` (a Numba
kernel that leaves the learner in exactly the state the loop would); ``"auto"`` (default) picks
the compiled driver when the learner class has a kernel. Both read the same reward stream, so
they give identical results (tested).

Checkpoints. At each checkpoint (a total number of pulls) the engine records the learner's
recommendation and the empirical rank of the true best arm (and of the worst true top-k arm),
the compact statistics anytime curves need ("probability the best arm is in the top 5 empirical
means versus samples"); a learner that stopped earlier is recorded as it stopped.

Crowd and quality (issue 37). ``crowd=Crowd(...)`` drives the learner by a crowd of raters
(:mod:`purebandits.simulate.crowd`: sessions of distinct items, concurrent participants, pending
answers, fatigue, careless raters) instead of one pull at a time; its draws come from a third child of
the repetition's sequence, so the learner's and the stream's seeds are those of a run without a crowd.
``quality=True`` (the default with a crowd) records at every checkpoint and at the end the four
measures of the reported ranking (:func:`purebandits.metrics.ranking_quality`: ``top1_correct``,
``top10_precision``, ``top25_precision``, ``kendall25``) in ``SimResult.quality``. Without either, a
run does exactly what it did before.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from purebandits.base import Learner
from purebandits.instances import Instance, RewardModel, RewardStream, make_instance
from purebandits.metrics import QUALITY_NAMES, ranking_quality, ratings_until, wilson_interval
from purebandits.simulate.crowd import Crowd, CrowdRun, crowd_labels, crowd_seed
from purebandits.simulate.executors import Executor, get_executor
from purebandits.simulate.journal import JOURNAL_FIELDS, Journal

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["simulate", "SimResult", "DEFAULT_MAX_PULLS", "rep_seeds"]

#: cap on the pulls of one repetition unless ``max_pulls`` is given (a run that reaches it is
#: reported with ``stopped = False``)
DEFAULT_MAX_PULLS = 10**9

_DRIVERS = ("auto", "compiled", "reference")


def rep_seeds(seed: int, rep: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """(learner seed, stream seed) of repetition ``rep``: the children of ``SeedSequence(seed).spawn(reps)[rep]``.

    ``SeedSequence(seed, spawn_key=(rep,))`` is that child, built without spawning the others.
    """
    ss = np.random.SeedSequence(seed, spawn_key=(int(rep),))
    learner_seed, stream_seed = ss.spawn(2)
    return learner_seed, stream_seed


# --------------------------------------------------------------------------- results
@dataclass
class SimResult:
    """Per-repetition results of :func:`simulate` (arrays indexed by repetition).

    Attributes
    ----------
    pulls : ndarray (reps,) int64
        Pulls made: the stopping time, or ``max_pulls`` if the run was capped.
    stopped : ndarray (reps,) bool
        True if the learner stopped by itself (stopping rule or spent budget), False if capped.
    recommended : ndarray (reps, k) int64
        Final recommendation (best first as the learner orders it).
    correct : ndarray (reps,) bool
        The recommendation is a valid top-k set (ties at the boundary count as correct).
    counts : ndarray (reps, n) int64
        Pulls of every arm.
    checkpoints : ndarray (C,) int64
        Total pulls at which the anytime statistics were recorded.
    ckpt_recommended : ndarray (reps, C, k) int32
        The recommendation at each checkpoint.
    ckpt_correct : ndarray (reps, C) bool
        Whether that recommendation was a correct top-k set.
    ckpt_best_rank : ndarray (reps, C) int32
        Rank of the true best arm among the empirical means (0 = empirical leader; ties to
        the lower index, unpulled arms have mean 0): ``P(rank < m)`` is the probability that
        the best arm is in the top m empirical means.
    ckpt_topk_rank : ndarray (reps, C) int32
        The largest such rank over the true top-k arms (``< m`` iff all k are in the top m).
    means, top : ndarray
        True means of the instance and its true top-k (best first).
    quality : dict of ndarray
        With ``quality=True`` (or a crowd): for each name in :data:`purebandits.metrics.QUALITY_NAMES`,
        ``name`` (reps,) at the end of the run and ``name@`` (reps, C) at the checkpoints; else empty.
    """

    algorithm: str
    params: dict[str, Any]
    instance: str
    seed: int
    k: int
    max_pulls: int
    driver: str
    means: np.ndarray
    top: np.ndarray
    checkpoints: np.ndarray
    pulls: np.ndarray
    stopped: np.ndarray
    recommended: np.ndarray
    correct: np.ndarray
    counts: np.ndarray
    ckpt_recommended: np.ndarray
    ckpt_correct: np.ndarray
    ckpt_best_rank: np.ndarray
    ckpt_topk_rank: np.ndarray
    elapsed: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    quality: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def reps(self) -> int:
        return int(self.pulls.shape[0])

    @property
    def n_arms(self) -> int:
        return int(self.means.shape[0])

    @property
    def error_rate(self) -> float:
        """Fraction of repetitions whose final recommendation is wrong."""
        return float(1.0 - self.correct.mean()) if self.reps else math.nan

    @property
    def pulls_per_second(self) -> float:
        """Pulls of all repetitions per second of wall time (the simulator's speed)."""
        return float(self.pulls.sum() / self.elapsed) if self.elapsed > 0 else math.nan

    def ratings_until(self, name: str = "top10_precision", level: float = 0.9) -> float:
        """Ratings (pulls) from which on the reported top set (``top10_precision`` or ``top25_precision``) is right
        in at least a share ``level`` of the runs (:func:`purebandits.metrics.ratings_until` over the
        checkpoints); nan without quality measures or when the last checkpoint falls short."""
        if not self.quality or name + "@" not in self.quality:
            return math.nan
        return ratings_until(self.quality[name + "@"], self.checkpoints, level)

    def summary(self, confidence: float = 0.95) -> dict[str, Any]:
        """Samples to stop (mean, quantiles) and the error rate with a Wilson interval."""
        wrong = int(self.reps - self.correct.sum())
        lo, hi = wilson_interval(wrong, self.reps, alpha=1.0 - confidence) if self.reps else (math.nan, math.nan)
        q = np.quantile(self.pulls, [0.05, 0.25, 0.5, 0.75, 0.95]) if self.reps else [math.nan] * 5
        return {
            "algorithm": self.algorithm, "instance": self.instance, "reps": self.reps,
            "pulls_mean": float(self.pulls.mean()) if self.reps else math.nan,
            "pulls_q05": float(q[0]), "pulls_q25": float(q[1]), "pulls_median": float(q[2]),
            "pulls_q75": float(q[3]), "pulls_q95": float(q[4]),
            "capped": int((~self.stopped).sum()), "errors": wrong, "error_rate": self.error_rate,
            "error_ci_low": lo, "error_ci_high": hi, "confidence": confidence,
            "elapsed_s": self.elapsed, "pulls_per_s": self.pulls_per_second,
        }

    # ----------------------------------------------------------------- saving
    def _meta(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "params": self.params, "instance": self.instance, "seed": self.seed,
                "k": self.k, "max_pulls": self.max_pulls, "driver": self.driver, "elapsed": self.elapsed,
                "extra": self.extra}

    _ARRAYS = ("means", "top", "checkpoints", "pulls", "stopped", "recommended", "correct", "counts",
               "ckpt_recommended", "ckpt_correct", "ckpt_best_rank", "ckpt_topk_rank")

    def save(self, path: str | Path) -> None:
        """Write every array and the metadata to a compressed ``.npz`` file."""
        arrays = {name: getattr(self, name) for name in self._ARRAYS}
        arrays.update({f"quality_{name}": v for name, v in self.quality.items()})
        np.savez_compressed(path, meta=np.array(json.dumps(self._meta(), default=_json_default)), **arrays)

    @classmethod
    def load(cls, path: str | Path) -> SimResult:
        """Read a result written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {name: data[name] for name in cls._ARRAYS}
            quality = {name[8:]: data[name] for name in data.files if name.startswith("quality_")}
        return cls(**meta, **arrays, quality=quality)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per repetition: the CSV rows (see :meth:`to_csv`)."""
        out = []
        for r in range(self.reps):
            row: dict[str, Any] = {
                "rep": r, "pulls": int(self.pulls[r]), "stopped": int(self.stopped[r]),
                "correct": int(self.correct[r]), "recommended": " ".join(str(int(a)) for a in self.recommended[r]),
            }
            q = self.quality
            for name in QUALITY_NAMES if q else ():
                row[name] = float(q[name][r])
            for j, c in enumerate(self.checkpoints):
                row[f"rec@{c}"] = " ".join(str(int(a)) for a in self.ckpt_recommended[r, j])
                row[f"correct@{c}"] = int(self.ckpt_correct[r, j])
                row[f"best_rank@{c}"] = int(self.ckpt_best_rank[r, j])
                for name in QUALITY_NAMES if q else ():
                    row[f"{name}@{c}"] = float(q[name + "@"][r, j])
            out.append(row)
        return out

    def to_csv(self, path: str | Path) -> None:
        """One row per repetition: rep, pulls, stopped, correct, recommended (space-separated
        arms) and, per checkpoint c, ``rec@c``, ``correct@c`` and ``best_rank@c``; with quality measures,
        also ``top1_correct``, ``top10_precision``, ``top25_precision``, ``kendall25`` at the end and the
        same names with ``@c`` per checkpoint."""
        rows = self.rows()
        fields = list(rows[0]) if rows else ["rep", "pulls", "stopped", "correct", "recommended"]
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)

    def to_frame(self) -> pd.DataFrame:
        """The CSV rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows())


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


# --------------------------------------------------------------------------- one chunk of reps
@dataclass(frozen=True)
class _Task:
    """Everything a worker needs (picklable): no open resources, no started learner."""

    learner: Learner
    model: RewardModel
    seed: int
    k: int
    checkpoints: np.ndarray
    max_pulls: int
    driver: str
    top: np.ndarray
    kth_mean: float
    crowd: Crowd | None = None
    quality: bool = False


def _advance_reference(learner: Learner, stream: RewardStream, target: int) -> None:
    """The literal ask/tell loop, sequential mode: ask(1), draw, tell, until done or ``target`` pulls."""
    ask, tell, draw = learner.ask, learner.tell, stream.draw
    t = learner.t_
    while t < target and not learner.done_:
        arms = ask(1)
        if not arms:
            raise RuntimeError(f"{type(learner).__name__} asked for nothing with no pull pending (t={t})")
        arm = arms[0]
        tell(arm, draw(arm))
        t += 1


def _ranks(means: np.ndarray, arms: np.ndarray) -> np.ndarray:
    """Rank of each of ``arms`` among ``means`` (0 = largest; ties to the lower index)."""
    if arms.size == 1:
        a = int(arms[0])
        m = means[a]
        return np.array([np.count_nonzero(means > m) + np.count_nonzero(means[:a] == m)])
    order = np.lexsort((np.arange(means.size), -means))
    rank = np.empty(means.size, dtype=np.int64)
    rank[order] = np.arange(means.size)
    return rank[arms]


def _correct(means: np.ndarray, rec: np.ndarray, k: int, kth_mean: float) -> np.ndarray:
    """Row-wise: ``rec[..., :]`` holds k distinct arms, none with a mean below ``kth_mean``."""
    valid = rec >= 0
    ok = np.all(valid, axis=-1) & np.all(means[np.where(valid, rec, 0)] >= kth_mean, axis=-1)
    if k > 1:
        s = np.sort(rec, axis=-1)
        ok &= np.all(np.diff(s, axis=-1) != 0, axis=-1)
    return ok


def run_chunk(task: _Task, reps: list[int]) -> dict[str, Any]:
    """Run repetitions ``reps`` of ``task``; return their arrays (rows in ``reps`` order) and
    the seconds the chunk took (wall, and CPU of the thread that ran it)."""
    started, cpu = time.perf_counter(), time.thread_time()
    n, k, C = task.model.n_arms, task.k, task.checkpoints.shape[0]
    m = len(reps)
    pulls = np.zeros(m, dtype=np.int64)
    stopped = np.zeros(m, dtype=bool)
    rec = np.full((m, k), -1, dtype=np.int64)
    counts = np.zeros((m, n), dtype=np.int64)
    c_rec = np.full((m, C, k), -1, dtype=np.int32)
    c_best = np.zeros((m, C), dtype=np.int32)
    c_topk = np.zeros((m, C), dtype=np.int32)
    compiled = task.driver == "compiled"
    cls, params = type(task.learner), task.learner.get_params()
    # one Generator for every stream of the chunk, re-seeded per repetition: the same numbers as
    # default_rng(stream seed), without rebuilding the ctypes view Numba reads for each new one
    gen = np.random.Generator(np.random.PCG64(0))
    crowd, quality = task.crowd, task.quality
    means = task.model.means
    q_end = {name: np.full(m, np.nan) for name in QUALITY_NAMES} if quality else {}
    q_ckpt = {name: np.full((m, C), np.nan) for name in QUALITY_NAMES} if quality else {}
    participants = np.zeros(m, dtype=np.int64)
    for i, r in enumerate(reps):
        s_learner, s_stream = rep_seeds(task.seed, r)
        learner = cls(**params).start(n, seed=s_learner)
        gen.bit_generator.state = np.random.PCG64(s_stream).state
        stream = task.model.stream(gen)
        run = None
        if crowd is not None:
            run = CrowdRun(learner, stream, crowd, np.random.default_rng(crowd_seed(task.seed, r)), task.max_pulls)
        for j in range(C):
            target = min(int(task.checkpoints[j]), task.max_pulls)
            if not learner.done_ and learner.t_ < target:
                if run is not None:
                    run.advance(target)
                elif compiled:
                    learner.run_compiled(stream, target)
                else:
                    _advance_reference(learner, stream, target)
            rj = learner.recommend()[:k]
            c_rec[i, j, : len(rj)] = rj
            ranks = _ranks(learner.means(), task.top)
            c_best[i, j] = ranks[0]
            c_topk[i, j] = ranks.max()
            if quality:
                for name, v in ranking_quality(learner.recommend(), learner.means(), learner.counts_, means).items():
                    q_ckpt[name][i, j] = v
        if not learner.done_ and learner.t_ < task.max_pulls:
            if run is not None:
                run.advance(task.max_pulls)
            elif compiled:
                learner.run_compiled(stream, task.max_pulls)
            else:
                _advance_reference(learner, stream, task.max_pulls)
        pulls[i] = learner.t_
        stopped[i] = learner.done_
        rf = learner.recommend()[:k]
        rec[i, : len(rf)] = rf
        counts[i] = learner.counts_
        if quality:
            for name, v in ranking_quality(learner.recommend(), learner.means(), learner.counts_, means).items():
                q_end[name][i] = v
        if run is not None:
            participants[i] = run.participants
    quality_out = {**q_end, **{name + "@": v for name, v in q_ckpt.items()}}
    return {
        "reps": np.asarray(reps, dtype=np.int64), "pulls": pulls, "stopped": stopped, "recommended": rec,
        "correct": _correct(means, rec, k, task.kth_mean), "counts": counts, "ckpt_recommended": c_rec,
        "ckpt_correct": _correct(means, c_rec.astype(np.int64), k, task.kth_mean), "ckpt_best_rank": c_best,
        "ckpt_topk_rank": c_topk, "seconds": time.perf_counter() - started, "cpu_seconds": time.thread_time() - cpu,
        "quality": quality_out, "participants": participants,
    }


# --------------------------------------------------------------------------- simulate
def _progress_bar(total: int, enabled: bool | None, desc: str):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rep", dynamic_ncols=True, leave=True)


def simulate(
    learner: Learner | str,
    instance: Instance | RewardModel | str,
    *,
    reps: int = 100,
    seed: int | None = 0,
    checkpoints: Any = None,
    jobs: int | None = None,
    executor: Any = None,
    max_pulls: int | None = None,
    driver: str = "auto",
    chunk_size: int | None = None,
    progress: bool | None = None,
    journal: str | Path | Journal | None = None,
    crowd: Crowd | None = None,
    quality: bool | None = None,
) -> SimResult:
    """Run ``reps`` independent repetitions of ``learner`` on ``instance``.

    Parameters
    ----------
    learner : Learner or str
        An (unstarted) learner whose parameters are used, or a registered name with defaults.
        Each repetition runs ``learner.clone()``.
    instance : Instance, RewardModel or str
        The problem; a string goes through :func:`purebandits.instances.make_instance`.
    reps : int
        Number of repetitions.
    seed : int or None
        Root seed; repetition r uses ``SeedSequence(seed).spawn(reps)[r]`` (None: fresh entropy,
        recorded in the result).
    checkpoints : sequence of int, optional
        Total pulls at which to record the recommendation and the best arm's empirical rank.
    jobs : int, optional
        Worker processes for the local pool (default: all cores; 1 runs in this process).
    executor : str, Executor, distributed.Client or concurrent.futures.Executor, optional
        ``"inprocess"``, ``"local"`` (default) or ``"dask://host:port"``; see
        :mod:`purebandits.simulate.executors`.
    max_pulls : int, optional
        Cap on the pulls of one repetition (default :data:`DEFAULT_MAX_PULLS`); capped runs
        have ``stopped = False``.
    driver : {"auto", "compiled", "reference"}
        ``"compiled"`` needs a learner with a kernel (``type(learner).has_kernel()``).
    chunk_size : int, optional
        Repetitions per task (default: about four tasks per worker, sixteen with a journal).
        Never changes results.
    progress : bool, optional
        Show a progress bar (repetitions, pulls per second, time left); default: when stderr is
        a terminal.
    journal : str, Path or Journal, optional
        A directory where every finished chunk is written; a later call with the same inputs
        loads those repetitions instead of running them again, so a killed run resumes (see
        :mod:`purebandits.simulate.journal`). ``result.extra`` then holds ``resumed_reps`` and
        ``resumed_seconds`` (the worker seconds those chunks took). Never changes results.
        Not available with a crowd or quality measures (the journal holds neither).
    crowd : Crowd, optional
        Drive the learner by a crowd of raters (:mod:`purebandits.simulate.crowd`); needs the reference
        driver (``"auto"`` picks it). ``max_pulls`` is then the contest's budget of ratings.
        ``result.extra`` holds the crowd and ``participants``, the participants served over all repetitions.
    quality : bool, optional
        Record the quality of the reported ranking (``top1_correct``, ``top10_precision``,
        ``top25_precision``, ``kendall25``) at every checkpoint and at the end, in ``result.quality``
        (default: True with a crowd, else False).

    Returns
    -------
    SimResult
        ``result.extra["cpu_seconds"]`` is the CPU time the repetitions run by this call took, summed over
        the workers (the process-seconds a reproduction reports; resumed ones are in ``resumed_seconds``).
    """
    if isinstance(learner, str):
        from purebandits.registry import make_learner

        learner = make_learner(learner)
    if not isinstance(learner, Learner):
        raise TypeError(f"learner must be a Learner or a registered name, got {type(learner).__name__}")
    if isinstance(instance, RewardModel):
        instance = Instance(f"model:{type(instance).__name__}({instance.n_arms})", instance,
                            k=int(getattr(learner, "k", 1) or 1))
    instance = make_instance(instance)
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 0:
        raise ValueError(f"reps must be an integer >= 0, got {reps!r}")
    if driver not in _DRIVERS:
        raise ValueError(f"driver must be one of {list(_DRIVERS)}, got {driver!r}")
    has_kernel = type(learner).has_kernel()
    if driver == "compiled" and not has_kernel:
        raise ValueError(f"{type(learner).__name__} has no compiled kernel; use driver='reference' or 'auto'")
    drv = "compiled" if driver == "compiled" or (driver == "auto" and has_kernel) else "reference"
    if crowd is not None:
        if not isinstance(crowd, Crowd):
            raise TypeError(f"crowd must be a Crowd, got {type(crowd).__name__}")
        if driver == "compiled":
            raise ValueError("a crowd runs on the reference driver (a compiled crowd loop does not exist yet); "
                             "use driver='reference' or 'auto'")
        drv = "reference"
        crowd_labels(instance.model, crowd)  # Gaussian arms with fatigue or careless raters: the error here
    quality = crowd is not None if quality is None else bool(quality)
    if journal is not None and (crowd is not None or quality):
        raise ValueError("journal does not hold crowd runs or quality measures yet: run without journal")
    max_pulls = DEFAULT_MAX_PULLS if max_pulls is None else int(max_pulls)
    if max_pulls < 1:
        raise ValueError(f"max_pulls must be >= 1, got {max_pulls}")
    ckpts = np.unique(np.asarray([] if checkpoints is None else checkpoints, dtype=np.int64).ravel())
    if ckpts.size and ckpts[0] < 1:
        raise ValueError("checkpoints must be positive pull counts")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    seed = int(seed)

    n = instance.n_arms
    probe = learner.clone().start(n, seed=0)  # validates parameters here, not in a worker
    k = probe.k_
    if drv == "compiled":  # load the kernel once here, so forked workers inherit it
        try:
            probe.run_compiled(instance.model.stream(0), min(2 * n, max_pulls))
        except NotImplementedError as exc:  # a kernel that covers only some settings (CPE: top-k only)
            if driver == "compiled":
                raise ValueError(f"{type(learner).__name__}: {exc}; use driver='reference' or 'auto'") from exc
            drv = "reference"
    top = instance.top(k)
    task = _Task(learner=learner.clone(), model=instance.model, seed=seed, k=k, checkpoints=ckpts,
                 max_pulls=max_pulls, driver=drv, top=top, kth_mean=instance.kth_mean(k), crowd=crowd,
                 quality=quality)

    C = ckpts.size
    res = SimResult(
        algorithm=learner.name or type(learner).__name__, params=learner.get_params(), instance=instance.name,
        seed=seed, k=k, max_pulls=max_pulls, driver=drv, means=instance.means, top=top, checkpoints=ckpts,
        pulls=np.zeros(reps, dtype=np.int64), stopped=np.zeros(reps, dtype=bool),
        recommended=np.full((reps, k), -1, dtype=np.int64), correct=np.zeros(reps, dtype=bool),
        counts=np.zeros((reps, n), dtype=np.int64), ckpt_recommended=np.full((reps, C, k), -1, dtype=np.int32),
        ckpt_correct=np.zeros((reps, C), dtype=bool), ckpt_best_rank=np.zeros((reps, C), dtype=np.int32),
        ckpt_topk_rank=np.zeros((reps, C), dtype=np.int32),
    )
    if quality:
        res.quality = {name: np.full(reps, np.nan) for name in QUALITY_NAMES}
        res.quality.update({name + "@": np.full((reps, C), np.nan) for name in QUALITY_NAMES})
    if crowd is not None:
        res.extra.update(crowd=crowd.as_dict(), participants=0)
    todo = np.arange(reps, dtype=np.int64)
    book = journal if isinstance(journal, Journal) or journal is None else Journal(journal)
    if book is not None:
        loaded, done, resumed_seconds = book.load(task, reps)
        for name, rows in loaded.items():
            getattr(res, name)[done] = rows
        todo = np.setdiff1d(todo, done)
        res.extra.update(resumed_reps=int(done.size), resumed_seconds=resumed_seconds)

    ex: Executor = get_executor(executor, jobs)
    workers = max(1, ex.workers)
    m = int(todo.size)
    if chunk_size is None:  # with a journal, smaller chunks: a killed run loses less
        per_worker = 16 if book is not None else 4
        chunk_size = max(1, math.ceil(m / (per_worker * workers))) if workers > 1 else max(1, min(m, 16))
    chunks = [todo[i:i + chunk_size].tolist() for i in range(0, m, chunk_size)]
    t0 = time.perf_counter()
    total = 0
    cpu_seconds = 0.0
    bar = None
    try:
        results = ex.map_unordered(run_chunk, [(task, c) for c in chunks])
        bar = _progress_bar(reps, progress, f"{res.algorithm} on {instance.name}")
        if bar is not None and reps > m:
            bar.update(reps - m)
        for _, out in results:
            idx = out["reps"]
            cpu_seconds += float(out["cpu_seconds"])
            for name in JOURNAL_FIELDS:
                getattr(res, name)[idx] = out[name]
            for name, v in out["quality"].items():
                res.quality[name][idx] = v
            if crowd is not None:
                res.extra["participants"] += int(out["participants"].sum())
            if book is not None:
                book.save(task, out, out["seconds"], about={
                    "algorithm": res.algorithm, "params": learner.get_params(), "instance": instance.name,
                    "seed": seed, "k": k, "max_pulls": max_pulls, "checkpoints": C, "driver": drv})
            if bar is not None:
                total += int(out["pulls"].sum())
                rate = total / max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix_str(f"{rate / 1e6:.2f}M pulls/s", refresh=False)
                bar.update(len(idx))
    finally:
        if bar is not None:
            bar.close()
        if ex is not executor:
            ex.close()
    res.elapsed = time.perf_counter() - t0
    res.extra["cpu_seconds"] = cpu_seconds
    return res
