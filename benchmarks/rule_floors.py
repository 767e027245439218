"""Where an ask/tell goes for the two learners whose rule itself is O(n) per call, at contest size.

Issue 24, target 1 asks every fixed-confidence learner for >= 50,000 ask/tell per CPU second at
5,000 arms without changing a decision. Two rules read every arm at every call by definition:

- **Track-and-Stop** (Garivier & Kaufmann 2016) tracks w*(mu_hat(t)), the optimal proportions at the
  current means. w* is the root of one equation summing a term of every arm; one new answer moves
  one mean, hence the root, hence every w*_a, and D-tracking then takes the argmax over all arms of
  ``t w*_a - N_a``. The GLR stop reads every arm too (that part could be kept incrementally).
- **Top-two with the Thompson-sampling leader** draws one posterior sample per arm at every ask,
  in index order, from the learner's random stream; the leader is their argmax. Drawing fewer
  (e.g. only arms that could beat the running maximum) samples the same distribution but consumes
  the stream differently, so the decisions change.

For each, after the 5,000-arm initialisation and ``--pulls`` more pulls of the reference ask(1)/tell
loop (rewards from contest 512's votes, as ``bench_ask_tell.py --contest``), this times the ask/tell
pair and, on the same state, the part the rule cannot skip: the w* solve (the learner's own solver
and workspace) and the n posterior draws (the same calls in a compiled loop), in microseconds per
call (best of ``--repeats`` CPU-time runs of ``--calls`` calls each). The ratio says how close the
learner is to its rule's floor.

    PYTHONPATH=src python benchmarks/rule_floors.py
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from bench_ask_tell import CONTEST_ARMS, _loop, contest_pool  # noqa: E402


@njit(cache=True)
def _posterior_draws(sums, counts, gaussian, sigma, rng):  # pragma: no cover - compiled
    """The TS leader's n draws (:func:`purebandits.algorithms.top_two.top_two_pick`'s calls) and their argmax."""
    best, best_v = 0, -math.inf
    for i in range(counts.shape[0]):
        c = max(counts[i], 1)
        mu = sums[i] / counts[i] if counts[i] > 0 else 0.0
        if gaussian:
            v = mu + sigma / math.sqrt(c) * rng.standard_normal()
        else:
            s = min(max(sums[i], 0.0), float(counts[i]))
            v = rng.beta(1.0 + s, 1.0 + counts[i] - s)
        if v > best_v:
            best_v, best = v, i
    return best


def _best_us(fn, calls: int, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        c0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - c0) / calls)
    return best * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pulls", type=int, default=5000, help="pulls after the initialisation before timing")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from purebandits.algorithms import track_and_stop as tas
    from purebandits.bounds import glr_statistic_s
    from purebandits.registry import make_learner

    pool = contest_pool()
    rows = []
    # Track-and-Stop
    lrn = make_learner("track_and_stop", delta=0.05).start(CONTEST_ARMS, seed=1)
    ptr = [0] * CONTEST_ARMS
    _loop(lrn, pool, ptr, CONTEST_ARMS + args.pulls)

    def pair(lrn=lrn, ptr=ptr) -> None:
        _loop(lrn, pool, ptr, 1)

    mu = np.where(lrn.counts_ > 0, lrn.sums_ / np.maximum(lrn.counts_, 1), 0.0)
    w = np.empty(CONTEST_ARMS)
    ws = tas.workspace(CONTEST_ARMS)
    whole = _best_us(pair, args.calls, args.repeats)
    solve = _best_us(lambda: tas._weights_ws(mu.copy(), w, *ws), args.calls, args.repeats)
    pick = _best_us(lambda: tas._pick_ws(lrn.sums_, lrn.counts_, lrn.pending_, w, *ws), args.calls, args.repeats)
    glr = _best_us(lambda: glr_statistic_s(lrn.sums_, lrn.counts_, False, 0.5), args.calls, args.repeats)
    rows.append(("Track-and-Stop", whole, [("w* solve (its solver and workspace)", solve),
                                           ("the pick: w* solve + D-tracking's passes", pick),
                                           ("full GLR statistic (the stop test computes it only when its "
                                            "last minimiser passes the threshold)", glr)]))
    # top-two, TS leader, both costs
    for cost, gaussian in (("gaussian", True), ("bernoulli", False)):
        lrn = make_learner("top_two", delta=0.05, leader="ts", cost=cost).start(CONTEST_ARMS, seed=1)
        ptr = [0] * CONTEST_ARMS
        _loop(lrn, pool, ptr, CONTEST_ARMS + args.pulls)
        rng = np.random.default_rng(0)
        sums, counts = lrn.sums_.copy(), lrn.counts_.copy()
        _posterior_draws(sums, counts, gaussian, 0.5, rng)

        def pair(lrn=lrn, ptr=ptr) -> None:
            _loop(lrn, pool, ptr, 1)

        whole = _best_us(pair, args.calls, args.repeats)
        draws = _best_us(lambda s=sums, c=counts, g=gaussian, r=rng: _posterior_draws(s, c, g, 0.5, r), args.calls,
                         args.repeats)
        rows.append((f"top-two, TS leader, {cost} cost", whole, [("n posterior draws and their argmax", draws)]))

    print(f"# rule_floors ({machine()}); {CONTEST_ARMS:,} arms from contest 512's votes, after "
          f"{args.pulls:,} pulls past the initialisation; CPU microseconds per call, best of {args.repeats}")
    print("| learner | ask + tell (us) | rate (/s) | part the rule requires | its time (us) | share |")
    print("|---|---:|---:|---|---:|---:|")
    for name, whole, parts in rows:
        for label, us in parts:
            print(f"| {name} | {whole:.1f} | {1e6 / whole:,.0f} | {label} | {us:.1f} | {us / whole:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
