"""How much precision Track-and-Stop's D-tracking decisions need from w*: the room a decision certificate would have.

Track-and-Stop (GK16) pulls ``argmax_a t w*_a(mu_hat) - N_a`` outside forced exploration, with w* solved
to full double precision at every pull (``purebandits.algorithms.track_and_stop``). A faster exact rule
would compute w* only roughly and prove that the rough w* gives the same argmax: that holds when every
weight is within ``gap / (2 t)`` of the solver's own output, ``gap`` being the difference between the
largest and the second largest ``t w_a - N_a``. Along Track-and-Stop runs (delta = 0.01, seed 0, the runs
of ``bench_track_and_stop.py``) this records, at every pull outside forced exploration, that required
precision ``gap / (2 t)``, and whether the previous pull's w* (no solve at all) gives the same pull.
Arms with the pulled arm's mean and count are left out of the gap: they get its weight bit for bit
from any solver that treats equal inputs alike, so they tie with it whatever the precision.

It also counts the solves after which the best arm's (clipped) mean or identity changed since the previous
solve, and their share of the solve time (the solves replayed with the learner's workspace, each timed,
best of three passes): on those every arm's term of GK16's F(y) changes, so no certificate built at the
previous means can be reused there, and a certificate that was free on all other solves would still
leave that share of the time (an upper bound on its speed-up).

    PYTHONPATH=src python benchmarks/tas_tracking_margin.py [--pulls 200000]

It counts decisions, not time, so the machine's load does not matter; it takes about a minute per run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from tqdm import tqdm  # noqa: E402

from purebandits.algorithms.track_and_stop import TAS_CLIP, TrackAndStop, _weights_ws, optimal_weights, workspace  # noqa: E402,E501
from purebandits.experiments.caption_extra import top_m_contest  # noqa: E402
from purebandits.simulate.engine import rep_seeds  # noqa: E402

LEVELS = (1e-4, 1e-6, 1e-8, 1e-10, 1e-12)


def margins(contest: str, m: int, pulls: int) -> dict:
    """Required precisions and stale-w* agreement along one run."""
    inst = top_m_contest(contest, m, 1)
    ls, ss = rep_seeds(0, 0)
    lrn = TrackAndStop(delta=0.01).start(m, seed=ls)
    stream = inst.model.stream(ss)
    need, stale_same, forced = [], 0, 0
    w_prev = None
    solved = []  # the means of every solve, in order
    for _ in tqdm(range(pulls), desc=f"contest {contest}, top {m}", leave=False):
        if lrn.done_:
            break
        counts, sums = lrn.counts_.astype(float), lrn.sums_
        t = counts.sum()
        arm = lrn.ask(1)[0]
        if counts.min() <= max(math.sqrt(t) - m / 2.0, 0.0):
            forced += 1
        else:
            mu = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
            solved.append(mu)
            w = optimal_weights(mu)
            v = t * w - counts
            assert v[arm] == v.max(), "not the learner's pull"
            # arms with the pulled arm's mean and count have its weight bit for bit in any solver that treats
            # equal inputs alike (the workspace's groups do): ties among them are structural, not margins
            twin = (mu == mu[arm]) & (counts == counts[arm])
            rest = v[~twin]
            need.append((v[arm] - rest.max()) / (2 * t) if rest.size else math.inf)
            if w_prev is not None:
                vp = t * w_prev - counts
                stale_same += int(np.argmax(vp) == arm)
            w_prev = w
        lrn.tell(arm, stream.draw(arm))
    need_a = np.asarray(need)
    moved, time_share = best_moved(np.asarray(solved))
    return {"moved": moved, "moved_time": time_share,
            "pulls": int(lrn.t_), "stopped": bool(lrn.done_), "forced": forced, "tracked": int(need_a.size),
            "quantiles": np.quantile(need_a, [0.01, 0.1, 0.5]).tolist() if need_a.size else [],
            "within": {lv: float((need_a > lv).mean()) for lv in LEVELS} if need_a.size else {},
            "stale_same": stale_same / max(1, need_a.size - 1)}


def best_moved(mus: np.ndarray) -> tuple[float, float]:
    """Share of the solves (rows of ``mus``, in order) after which the best clipped mean or arm changed, and
    their share of the solve time (``_weights_ws`` replayed with one workspace, as the learner calls it)."""
    if len(mus) < 2:
        return math.nan, math.nan
    cl = np.clip(mus, TAS_CLIP, 1.0 - TAS_CLIP)
    best, top = cl.argmax(axis=1), cl.max(axis=1)
    moved = np.ones(len(mus), dtype=bool)
    moved[1:] = (best[1:] != best[:-1]) | (top[1:] != top[:-1])
    w = np.empty(mus.shape[1])
    dts = np.full(len(mus), np.inf)
    for _ in range(3):
        ws, key, iws = workspace(mus.shape[1])
        for i in range(len(mus)):
            t0 = time.perf_counter_ns()
            _weights_ws(mus[i], w, ws, key, iws)
            dts[i] = min(dts[i], time.perf_counter_ns() - t0)
    return float(moved.mean()), float(dts[moved].sum() / dts.sum())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pulls", type=int, default=200_000)
    a = p.parse_args(argv)
    print(f"# tas_tracking_margin ({machine()}), delta = 0.01, seed 0, up to {a.pulls:,} pulls")
    head = " ".join(f"{'> ' + format(lv, '.0e'):>8}" for lv in LEVELS)
    print(f"{'run':<20} {'pulls':>8} {'forced':>7} {'gap/2t p1':>10} {'p10':>9} {'p50':>9} {head} "
          f"{'stale w* same':>14} {'best moved':>11} {'its time':>9}")
    for contest, m in (("558", 50), ("559", 50), ("558", 10)):
        r = margins(contest, m, a.pulls)
        q = r["quantiles"]
        within = " ".join(f"{r['within'][lv]:>8.3f}" for lv in LEVELS)
        print(f"{'contest ' + contest + ', top ' + str(m):<20} {r['pulls']:>8,} {r['forced']:>7,} {q[0]:>10.1e} "
              f"{q[1]:>9.1e} {q[2]:>9.1e} {within} {r['stale_same']:>14.4f} {r['moved']:>11.3f} "
              f"{r['moved_time']:>9.3f}")
    print("# '> level': the share of tracked pulls whose decision a w* accurate to that level (absolute, every "
          "weight) would already prove; 'stale w* same': the previous pull's w* picks the same arm; 'best moved': "
          "share of the solves after which the best arm's mean changed, 'its time': their share of the solve time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
