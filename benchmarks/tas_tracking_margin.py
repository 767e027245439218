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

    PYTHONPATH=src python benchmarks/tas_tracking_margin.py [--pulls 200000]

It counts decisions, not time, so the machine's load does not matter; it takes about a minute per run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from tqdm import tqdm  # noqa: E402

from purebandits.algorithms.track_and_stop import TrackAndStop, optimal_weights  # noqa: E402
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
    return {"pulls": int(lrn.t_), "stopped": bool(lrn.done_), "forced": forced, "tracked": int(need_a.size),
            "quantiles": np.quantile(need_a, [0.01, 0.1, 0.5]).tolist() if need_a.size else [],
            "within": {lv: float((need_a > lv).mean()) for lv in LEVELS} if need_a.size else {},
            "stale_same": stale_same / max(1, need_a.size - 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pulls", type=int, default=200_000)
    a = p.parse_args(argv)
    print(f"# tas_tracking_margin ({machine()}), delta = 0.01, seed 0, up to {a.pulls:,} pulls")
    head = " ".join(f"{'> ' + format(lv, '.0e'):>8}" for lv in LEVELS)
    print(f"{'run':<20} {'pulls':>8} {'forced':>7} {'gap/2t p1':>10} {'p10':>9} {'p50':>9} {head} "
          f"{'stale w* same':>14}")
    for contest, m in (("558", 50), ("559", 50), ("558", 10)):
        r = margins(contest, m, a.pulls)
        q = r["quantiles"]
        within = " ".join(f"{r['within'][lv]:>8.3f}" for lv in LEVELS)
        print(f"{'contest ' + contest + ', top ' + str(m):<20} {r['pulls']:>8,} {r['forced']:>7,} {q[0]:>10.1e} "
              f"{q[1]:>9.1e} {q[2]:>9.1e} {within} {r['stale_same']:>14.4f}")
    print("# '> level': the share of tracked pulls whose decision a w* accurate to that level (absolute, every "
          "weight) would already prove; 'stale w* same': the previous pull's w* picks the same arm")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
