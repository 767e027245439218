"""Track-and-Stop's w* workspace (issue 24): the same bits as the stateless solve, so the same asks.

``_weights_ws`` keeps work between calls (the first Newton iteration's per-arm results, the
start's KLs, one solve per group of arms with equal means) and must return exactly what the
solver of commit 6c96ca4 returned: ``_reference_weights`` below is that solver verbatim (it
calls the unchanged inner solve ``_x_of_y``).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from numba import njit

from purebandits.algorithms.track_and_stop import (
    _KL_ERR,
    _MAX_OUTER,
    _TOL,
    TAS_CLIP,
    TrackAndStop,
    _weights_ws,
    _x_of_y,
    optimal_weights_s,
    workspace,
)
from purebandits.bounds import kl_bernoulli_s
from purebandits.experiments.caption_extra import top_m_contest
from purebandits.simulate.engine import rep_seeds


@njit
def _reference_weights(mu_in, w):  # pragma: no cover - compiled
    """optimal_weights_s as of commit 6c96ca4 (before the workspace), verbatim."""
    n = mu_in.shape[0]
    mu = np.empty(n)
    for i in range(n):
        mu[i] = min(max(mu_in[i], TAS_CLIP), 1.0 - TAS_CLIP)
    best = 0
    for i in range(n):
        if mu[i] > mu[best]:
            best = i
    p = mu[best]
    n_best = 0
    second = -math.inf
    for i in range(n):
        if mu[i] == p:
            n_best += 1
        elif mu[i] > second:
            second = mu[i]
    ymax = kl_bernoulli_s(p, second) if n_best == 1 else 0.0
    if ymax <= _KL_ERR:  # tied best arms, or as good as tied (their KL is rounding noise): uniform
        n_best = 0
        for i in range(n):
            if kl_bernoulli_s(p, mu[i]) <= _KL_ERR:
                n_best += 1
        for i in range(n):
            w[i] = 1.0 / n_best if kl_bernoulli_s(p, mu[i]) <= _KL_ERR else 0.0
        return
    dxdy = np.empty(n)
    y = 0.5 * ymax
    for a in range(n):  # start the x_a at the root of D x/(x + D/s) = y, D = g_a(inf), s = g_a'(0)
        if a != best:
            dd = kl_bernoulli_s(p, mu[a])
            s = kl_bernoulli_s(mu[a], p)
            x0 = y * dd / (s * (dd - y)) if s > 0.0 and dd > y else 1.0
            w[a] = x0 if x0 < math.inf else 1.0
    lo, hi = 0.0, ymax
    for _ in range(_MAX_OUTER):
        f = 0.0
        df = 0.0
        err = 0.0
        for a in range(n):
            if a != best:
                w[a], dxdy[a], r, dr, e = _x_of_y(y, p, mu[a], w[a])
                f += r
                df += dr
                err += e
        if f >= 1.0:
            hi = y
        else:
            lo = y
        done = False
        yn = math.nan
        if 0.0 < f < math.inf and df > 0.0:
            dy = -math.log(f) * f / df  # Newton on log F
            yn = y + dy
            step = abs(dy)
            done = step <= _TOL * y or step <= 2.0 * err / df  # converged, or down to the rounding noise
            if done and yn >= hi:  # such a small step that leaves the bracket stops at its end
                yn = hi
            elif done and yn <= lo:
                yn = lo if lo > 0.0 else y
        if not (done or lo < yn < hi):  # the Newton step left the bracket (or is not defined): bisect
            yn = 0.5 * (lo + hi)
            done = not lo < yn < hi  # the bracket cannot shrink any more
        dy = yn - y
        for a in range(n):  # tangent prediction of x_a(yn) (x_a(y) is convex: it undershoots)
            if a != best:
                xn = w[a] + dy * dxdy[a]
                w[a] = xn if 0.0 < xn < math.inf else w[a] * (yn / y)
        y = yn
        if done:
            break
    total = 1.0
    for a in range(n):
        if a != best:
            total += w[a]
    w[best] = 1.0
    for a in range(n):
        w[a] /= total


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a.view(np.int64), b.view(np.int64)))


def _walk(rng: np.random.Generator, n: int, steps: int, kind: str):
    """Mean vectors of a run: one arm's (sum, count) changes per step, rewards as in ``kind``."""
    p = {"uniform": rng.uniform(0.01, 0.99, n), "clustered": 0.5 + 0.05 * rng.uniform(size=n),
         "near_tie": np.r_[0.3, 0.3 - 2e-4, rng.uniform(0.1, 0.25, n - 2)]}[kind]
    counts = np.ones(n)
    sums = (rng.uniform(size=n) < p).astype(float)
    graded = kind != "uniform"
    for _ in range(steps):
        u = rng.uniform()
        # pull the best two arms half of the time (as the tracking does at a near tie), else any arm
        a = int(np.argsort(sums / counts)[-1 - int(rng.integers(2))]) if u < 0.5 else int(rng.integers(n))
        r = rng.choice([0.0, 0.5, 1.0], p=[1 - p[a], p[a] / 2, p[a] / 2]) if graded else float(rng.uniform() < p[a])
        counts[a] += 1
        sums[a] += r
        yield sums / counts


@pytest.mark.parametrize("kind", ["uniform", "clustered", "near_tie"])
@pytest.mark.parametrize("n", [2, 3, 10, 50])
def test_workspace_gives_the_stateless_bits(kind: str, n: int) -> None:
    """A workspace reused along a run returns the reference solver's w* bit for bit at every step."""
    rng = np.random.default_rng(n * 7 + len(kind))
    ws = workspace(n)
    w, w_ref, w_pure = np.empty(n), np.empty(n), np.empty(n)
    dups = 0
    for mu in _walk(rng, n, 400, kind):
        _weights_ws(mu, w, *ws)
        _reference_weights(mu, w_ref)
        optimal_weights_s(mu, w_pure)
        assert _same_bits(w, w_ref) and _same_bits(w_pure, w_ref)
        dups += n - len(np.unique(mu))
    if kind != "uniform" and n >= 10:
        assert dups > 0  # the equal-means path ran


def test_workspace_edge_sequences() -> None:
    """Unchanged inputs, ties (uniform weights), means 0 and 1, a best arm that changes, equal means."""
    seq = [
        [0.5, 0.4, 0.4, 0.3], [0.5, 0.4, 0.4, 0.3], [0.5, 0.4, 0.4, 0.35], [0.5, 0.5, 0.4, 0.35],
        [0.5, 0.4, 0.4, 0.35], [0.6, 0.4, 0.4, 0.35], [0.6, 0.4, 0.4, 0.35], [0.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, 0.9, 0.0], [0.0, 1.0, 0.9, 0.0], [0.2, 0.2, 0.2, 0.9], [0.2, 0.2, 0.21, 0.9],
        [0.5, 0.5 - 1e-9, 0.1, 0.1], [0.5, 0.4, 0.4, 0.3], [0.5, 0.4, 0.3, 0.3],
    ]
    ws = workspace(4)
    w, w_ref = np.empty(4), np.empty(4)
    for mu in seq:
        mu = np.array(mu)
        _weights_ws(mu, w, *ws)
        _reference_weights(mu, w_ref)
        assert _same_bits(w, w_ref), mu


@njit
def _reference_pick(sums, counts, w):  # pragma: no cover - compiled
    """tas_pick of commit 6c96ca4 (no pending pulls) on the reference solver."""
    n = counts.shape[0]
    t = 0
    lo = 0
    for i in range(n):
        t += counts[i]
        if counts[i] < counts[lo]:
            lo = i
    if counts[lo] <= max(math.sqrt(t) - n / 2.0, 0.0):
        return lo
    mu = np.empty(n)
    for i in range(n):
        mu[i] = sums[i] / counts[i] if counts[i] > 0 else 0.0
    _reference_weights(mu, w)
    best = 0
    best_v = -math.inf
    for i in range(n):
        v = t * w[i] - counts[i]
        if v > best_v:
            best_v = v
            best = i
    return best


@pytest.mark.parametrize("contest,m", [("559", 50), ("558", 50), ("559", 10)])
def test_whole_run_asks_and_state_equal_the_reference(contest: str, m: int) -> None:
    """Every asked arm of the ask/tell loop and of the compiled kernel equals the reference's."""
    inst = top_m_contest(contest, m, 1)
    pulls = 6_000
    ls, ss = rep_seeds(0, 0)
    stream = inst.model.stream(ss)
    counts, sums, w = np.zeros(m, np.int64), np.zeros(m), np.empty(m)
    ref = hashlib.sha256()
    for _ in range(pulls):
        a = int(_reference_pick(sums, counts, w))
        ref.update(a.to_bytes(2, "little"))
        counts[a] += 1
        sums[a] += stream.draw(a)
    learner = TrackAndStop(delta=1e-300).start(m, seed=ls)  # never stops within the run
    stream = inst.model.stream(ss)
    got = hashlib.sha256()
    while learner.t_ < pulls:
        a = learner.ask(1)[0]
        got.update(a.to_bytes(2, "little"))
        learner.tell(a, stream.draw(a))
    assert got.hexdigest() == ref.hexdigest()
    assert np.array_equal(learner.counts_, counts) and np.array_equal(learner.sums_, sums)
    kernel = TrackAndStop(delta=1e-300).start(m, seed=ls)
    kernel.run_compiled(inst.model.stream(ss), pulls)
    assert np.array_equal(kernel.counts_, counts) and np.array_equal(kernel.sums_, sums)
    assert kernel.state_json() == learner.state_json()
