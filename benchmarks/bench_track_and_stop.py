"""Track-and-Stop's optimal weights w*(mu) (GK16 Thm 5), and Track-and-Stop runs on caption contests.

w* is solved at every pull, so its cost is the learner's per-pull cost. Baseline measured in the
same run: the naive solver of the same equations with SciPy (``brentq`` for every inner root
x_a(y) inside ``brentq`` for the outer F(y) = 1), called from Python.

    PYTHONPATH=src python benchmarks/bench_track_and_stop.py [--quick]
    PYTHONPATH=src python benchmarks/bench_track_and_stop.py --src /tmp/prevtas [--repeats 3] [--quick]

``--src TREE`` measures this tree and TREE (its ``src``) in alternating subprocesses, ``repeats``
rounds, and prints the best of each with the ratio: the runs' pulls per CPU second (the machine
may be shared), the stateless solver's us per call, and whether the runs' final states are equal.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit
from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.algorithms.track_and_stop import TAS_CLIP, TrackAndStop, optimal_weights_s  # noqa: E402
from purebandits.bounds import kl_bernoulli  # noqa: E402


@njit(cache=True)
def _solve_all(mus, w, reps):  # pragma: no cover - compiled
    s = 0.0
    for _ in range(reps):
        for i in range(mus.shape[0]):
            optimal_weights_s(mus[i], w)
            s += w[0]
    return s


def naive_weights(mu: np.ndarray) -> np.ndarray:
    """w*(mu) by nested SciPy root finding (the same equations as optimal_weights_s)."""
    mu = np.clip(mu, TAS_CLIP, 1 - TAS_CLIP)
    b = int(np.argmax(mu))
    m1 = mu[b]
    others = [a for a in range(len(mu)) if a != b]

    def g(x, ma):
        m = (m1 + x * ma) / (1 + x)
        return kl_bernoulli(m1, m) + x * kl_bernoulli(ma, m)

    def x_of(y, ma):
        hi = 1.0
        while g(hi, ma) < y:
            hi *= 2
        return brentq(lambda x: g(x, ma) - y, 0.0, hi, xtol=1e-14)

    def f(y):
        s = 0.0
        for a in others:
            x = x_of(y, mu[a])
            m = (m1 + x * mu[a]) / (1 + x)
            s += kl_bernoulli(m1, m) / kl_bernoulli(mu[a], m)
        return s - 1.0

    d12 = kl_bernoulli(m1, np.max(mu[others]))
    with np.errstate(divide="ignore"):  # F(y) is +inf at the top of its bracket
        y = brentq(f, 1e-15 * d12, d12 * (1 - 1e-12), xtol=1e-15)
    w = np.zeros(len(mu))
    for a in others:
        w[a] = x_of(y, mu[a])
    w[b] = 1.0
    return w / w.sum()


def _means(n: int, kind: str, batch: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    if kind == "uniform":
        return rng.uniform(0.01, 0.99, size=(batch, n))
    return 0.5 + 0.05 * rng.uniform(size=(batch, n))  # near-ties, like the top captions of a contest


def solver_us(mus: np.ndarray) -> float:
    """Microseconds per compiled call, best of three after doubling the work to >= 0.3 s."""
    w = np.empty(mus.shape[1])
    _solve_all(mus[:1], w, 1)
    reps = 1
    while True:
        t0 = time.perf_counter()
        _solve_all(mus, w, reps)
        if time.perf_counter() - t0 > 0.3:
            break
        reps *= 2
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        _solve_all(mus, w, reps)
        best = min(best, time.perf_counter() - t0)
    return best / (reps * mus.shape[0]) * 1e6


def naive_us(mus: np.ndarray, calls: int) -> float:
    t0 = time.perf_counter()
    for i in range(calls):
        naive_weights(mus[i])
    return (time.perf_counter() - t0) / calls * 1e6


def run_rates(quick: bool) -> dict[str, tuple[int, bool, float, float, str]]:
    """Track-and-Stop (delta = 0.01) runs on the contests: (pulls, stopped, wall /s, CPU /s, state digest)."""
    from purebandits.experiments.caption_extra import top_m_contest
    from purebandits.simulate.engine import rep_seeds

    cap = 20_000 if quick else 200_000
    out = {}
    for contest in ("559", "558"):
        for m in (10, 50):
            inst = top_m_contest(contest, m, 1)
            TrackAndStop(delta=0.01).start(m, seed=0).run_compiled(inst.model.stream(0), 1_000)  # compile
            ls, ss = rep_seeds(0, 0)
            lr = TrackAndStop(delta=0.01).start(m, seed=ls)
            t0, c0 = time.perf_counter(), time.process_time()
            lr.run_compiled(inst.model.stream(ss), cap)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            digest = hashlib.sha256(lr.state_json().encode()).hexdigest()[:16]
            out[f"contest {contest}, top {m}"] = (int(lr.t_), bool(lr.done_), lr.t_ / dt, lr.t_ / dc, digest)
    return out


def solver_table(quick: bool) -> dict[str, float]:
    """The stateless solver's us per call on random means (nothing to reuse between calls)."""
    return {f"{n} arms, {kind}": solver_us(_means(n, kind, 50 if quick else 200))
            for n in (10, 50) for kind in ("uniform", "clustered")}


def compare(tree: str, repeats: int, quick: bool) -> None:
    """This tree against ``tree`` in alternating subprocesses; best of ``repeats`` rounds each."""
    here = str(Path(__file__).resolve().parents[1] / "src")
    best: dict[str, dict] = {"new": {}, "prev": {}}
    for _ in range(repeats):
        for label, src in (("prev", str(Path(tree) / "src")), ("new", here)):
            env = dict(os.environ, PYTHONPATH=src)
            cmd = [sys.executable, __file__, "--json"] + (["--quick"] if quick else [])
            res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
            for key, v in res["runs"].items():
                old = best[label].get(key)
                best[label][key] = v if old is None or v[3] > old[3] else old
            for key, v in res["solver"].items():
                best[label][key] = min(v, best[label].get(key, float("inf")))
    print(f"# bench_track_and_stop --src {tree} ({machine()}), best of {repeats}")
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print("| run (delta = 0.01, seed 0) | pulls | new, M pulls per CPU s | prev | ratio | same final state |")
    print("|---|---:|---:|---:|---:|---|")
    for key in best["new"]:
        if key.startswith("contest"):
            n, p = best["new"][key], best["prev"][key]
            print(f"| {key} | {n[0]:,} ({'stopped' if n[1] else 'capped'}) | {n[3] / 1e6:.3f} | {p[3] / 1e6:.3f} "
                  f"| {n[3] / p[3]:.2f}x | {'yes' if n[4] == p[4] and n[0] == p[0] else 'NO'} |")
    print("\n| stateless solve | new, us per call | prev | ratio |")
    print("|---|---:|---:|---:|")
    for key in best["new"]:
        if not key.startswith("contest"):
            n, p = best["new"][key], best["prev"][key]
            print(f"| {key} | {n:.2f} | {p:.2f} | {p / n:.2f}x |")


def main(quick: bool = False) -> None:
    print(f"# bench_track_and_stop ({machine()})")
    print(f"{'arms':>5} {'means':>10} {'us/call':>9} {'naive SciPy':>12} {'ratio':>8}")
    for n in (10, 50):
        for kind in ("uniform", "clustered"):
            mus = _means(n, kind, 50 if quick else 200)
            fast = solver_us(mus)
            slow = naive_us(mus, 3 if quick else 10)
            print(f"{n:>5} {kind:>10} {fast:>9.2f} {slow:>12.0f} {slow / fast:>7.0f}x", flush=True)
    cap = 20_000 if quick else 200_000
    print(f"\n## Track-and-Stop (delta = 0.01), one run, seed 0, capped at {cap:,} pulls")
    for key, (p, stopped, wall, cpu, _) in run_rates(quick).items():
        print(f"{key}: {p:>7} pulls ({'stopped' if stopped else 'capped'}): {wall:>9.0f} pulls/s "
              f"({cpu:>9.0f} per CPU s)", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    quick = "--quick" in args
    if "--json" in args:
        print(json.dumps({"runs": run_rates(quick), "solver": solver_table(quick)}))
    elif "--src" in args:
        reps = int(args[args.index("--repeats") + 1]) if "--repeats" in args else 3
        compare(args[args.index("--src") + 1], reps, quick)
    else:
        main(quick=quick)
