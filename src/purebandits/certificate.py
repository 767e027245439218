"""A certificate anyone can check: does a recommended top-k set hold at error probability delta, from the answers?

:func:`certify` takes per-item label counts (how often each item got each reward value) and recomputes, for every
pair (a recommended item a, a rival b outside the recommendation), the K_inf GLR statistic ``Z_ab`` of
:mod:`purebandits.kinf_glr`, and compares it with a threshold ``beta(t, delta)`` proven for that statistic
(default ``"kinf-kt-pairs"``: each pair against its own :func:`purebandits.glr_thresholds.kinf_kt_pair_threshold`,
the sharpest proven one, and the one the learners' ``stop="kinf"`` uses, so a learner's stop certifies). The
certificate *holds* when the recommendation is the empirical top k and every rival is defeated (``Z_ab > beta_ab``).

Why this is a certificate: the thresholds are time-uniform, valid whatever the sampling rule and at any stopping
time, for any rewards in [0, 1]. A wrong recommendation that passes needs a pair (a, b) with true means
``mu_a <= mu_b`` and ``Z_ab > beta``, and the proof bounds the chance that this ever happens, at any t, by delta
(a union over the ``k (K - k)`` pairs). So checking the answers at the moment of the export is valid however the
items were chosen and whenever the organizer stopped: P(certificate holds and the recommendation is wrong) <= delta.

Pooling the answers of every learner of an experiment is valid as well: together they are one adaptively sampled
stream (each answer's item is chosen from what came before, by whichever learner asked), which is all the proof
assumes; each item's ratings are draws from that item's rating distribution. What the guarantee does not cover is
choosing delta, k or the set of answers (one learner's or the pool) after looking at certificates: fix them first.

Cost: ``k (K - k)`` pairs. Every pair gets a cheap upper bound (:func:`purebandits.kinf_glr.kinf_pair_upper`) and
lower bound (the Bernoulli GLR statistic of the means, ``Z_ab >= N_a d(mu_a, m) + N_b d(mu_b, m)`` with the
weighted mean m: see :mod:`purebandits.kinf_glr`); the exact ``Z_ab`` is computed only for the ``exact_rivals``
weakest rivals and for the pairs whose bounds straddle beta, so whether every rival is defeated is decided exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from purebandits.bounds import kl_bernoulli
from purebandits.glr_thresholds import THRESHOLDS, kinf_kt_pair_threshold
from purebandits.kinf_glr import empirical_top, kinf_pair_cost, kinf_pair_upper

__all__ = ["Certificate", "RivalRow", "certify", "KINF_THRESHOLDS", "STATISTIC"]

STATISTIC = "K_inf GLR"
#: each pair against its own threshold (:func:`purebandits.glr_thresholds.kinf_kt_pair_threshold`)
PAIR_THRESHOLD = "kinf-kt-pairs"
#: the thresholds proven for the K_inf GLR statistic: the per-pair one and those of
#: :data:`purebandits.glr_thresholds.THRESHOLDS`
KINF_THRESHOLDS = (PAIR_THRESHOLD, *(name for name, (_fn, proven) in THRESHOLDS.items()
                                     if proven.startswith(STATISTIC)))
#: relative slack under which a bound is too close to beta to decide a pair: the exact Z decides it
_BOUND_SLACK = 1e-9


@dataclass(frozen=True)
class RivalRow:
    """One pair of the certificate: recommended item a against rival b.

    ``z`` is ``Z_ab`` (None where only its bounds were needed to decide ``defeated``), ``beta`` the pair's threshold,
    ``margin = z - beta``;
    ``mean_*`` is None for an item without answers (it cannot be defeated).
    """

    item: int
    rival: int
    item_name: str
    rival_name: str
    mean_item: float | None
    mean_rival: float | None
    n_item: int
    n_rival: int
    z: float | None
    beta: float
    margin: float | None
    defeated: bool

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values."""
        return {"item": self.item, "item_name": self.item_name, "rival": self.rival, "rival_name": self.rival_name,
                "mean_item": self.mean_item, "mean_rival": self.mean_rival, "n_item": self.n_item,
                "n_rival": self.n_rival, "z": self.z, "beta": self.beta, "margin": self.margin,
                "defeated": self.defeated}


@dataclass(frozen=True)
class Certificate:
    """Whether ``recommendation`` holds at error probability ``delta``, with the evidence.

    ``rivals`` are all ``k (K - k)`` pairs, the weakest first (smallest margin ``Z_ab - beta_ab``; those with ``z``
    None come after the exactly computed ones, in order of an upper bound of their margin). ``z_min`` and ``beta`` are
    the weakest pair's statistic and threshold (with one threshold for every pair, ``z_min = min Z_ab``);
    ``reasons`` why it does not hold (empty when it holds).
    """

    recommendation: tuple[int, ...]
    recommendation_names: tuple[str, ...]
    empirical_top: tuple[int, ...]
    t: int
    n_items: int
    delta: float
    k: int
    threshold: str
    beta: float
    statistic: str
    z_min: float
    rivals: tuple[RivalRow, ...]
    n_defeated: int
    holds: bool
    reasons: tuple[str, ...]
    explanation: str

    @property
    def n_rivals(self) -> int:
        """The number of pairs (recommended item, rival): ``k (K - k)``."""
        return len(self.rivals)

    def to_dict(self, max_rivals: int | None = None) -> dict[str, Any]:
        """JSON-ready: every field, the ``max_rivals`` weakest rival rows (all if None) and ``n_rivals``."""
        rows = self.rivals if max_rivals is None else self.rivals[:max_rivals]
        return {"holds": self.holds, "recommendation": list(self.recommendation),
                "recommendation_names": list(self.recommendation_names), "empirical_top": list(self.empirical_top),
                "t": self.t, "n_items": self.n_items, "delta": self.delta, "k": self.k,
                "threshold": self.threshold, "beta": self.beta, "statistic": self.statistic, "z_min": self.z_min,
                "n_rivals": self.n_rivals, "n_defeated": self.n_defeated, "reasons": list(self.reasons),
                "explanation": self.explanation, "rivals": [r.to_dict() for r in rows]}


def _check_inputs(label_counts: ArrayLike, values: ArrayLike, delta: float, k: int,
                  threshold: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated (counts (K, S), support (S,)); ValueError naming the bad argument."""
    C = np.asarray(label_counts, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if C.ndim != 2 or v.ndim != 1 or C.shape[1] != v.size:
        raise ValueError(f"label_counts must be (n_items, S) for a support of S values, got shapes {C.shape} "
                         f"and {v.shape}")
    if C.shape[0] < 2:
        raise ValueError(f"a certificate compares items: need at least 2 items, got {C.shape[0]}")
    if not np.all(np.isfinite(v)) or np.any(v < 0.0) or np.any(v > 1.0):
        raise ValueError(f"reward values must lie in [0, 1] (the thresholds are proven for such rewards), got "
                         f"{v.tolist()}")
    if not np.all(np.isfinite(C)) or np.any(C < 0.0) or np.any(C != np.round(C)):
        raise ValueError("label counts must be nonnegative integers")
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.floating) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= int(k) < C.shape[0]:
        raise ValueError(f"k must be an integer with 1 <= k < n_items = {C.shape[0]}, got {k!r}")
    if threshold not in KINF_THRESHOLDS:
        raise ValueError(f"threshold must be one proven for the K_inf GLR statistic, one of {list(KINF_THRESHOLDS)}, "
                         f"got {threshold!r}")
    if C.sum() < 1:
        raise ValueError("there are no answers to certify")
    return C, v


def _resolve(recommendation: Sequence[int | str], names: list[str], k: int) -> np.ndarray:
    """The recommended item indices (sorted) from indices or names; ValueError if not k distinct known items."""
    index = {name: i for i, name in enumerate(names)}
    out = []
    for r in recommendation:
        if isinstance(r, str):
            if r not in index:
                raise ValueError(f"recommended item {r!r} is not one of the items")
            out.append(index[r])
        elif isinstance(r, int | np.integer) and not isinstance(r, bool) and 0 <= int(r) < len(names):
            out.append(int(r))
        else:
            raise ValueError(f"recommended item {r!r} is neither an item name nor an index in [0, {len(names)})")
    if len(set(out)) != len(out) or len(out) != k:
        raise ValueError(f"the recommendation must name k = {k} distinct items, got {list(recommendation)}")
    return np.sort(np.asarray(out, dtype=np.int64))


def _bernoulli_lower(ma: np.ndarray, na: np.ndarray, mb: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """The Bernoulli GLR statistic of the means per pair: a lower bound of the K_inf ``Z_ab`` (0 unless ma > mb)."""
    ok = (na > 0) & (nb > 0) & (ma > mb)
    out = np.zeros(ma.shape)
    if ok.any():
        pa, pb, wa, wb = ma[ok], mb[ok], na[ok], nb[ok]
        mid = (wa * pa + wb * pb) / (wa + wb)
        out[ok] = wa * kl_bernoulli(pa, mid) + wb * kl_bernoulli(pb, mid)
    return out


def _pair_statistics(C: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray, beta: np.ndarray,
                     exact_rivals: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z_ab where computed else nan, defeated ``Z_ab > beta`` exactly, order key (Z or its upper bound)) per pair.

    Exact Z for the ``exact_rivals`` smallest (all if None) and for pairs whose bounds do not decide ``Z > beta``.
    """
    n = a.size
    z = np.full(n, np.nan)
    if exact_rivals is None or exact_rivals >= n:
        z[:] = kinf_pair_cost(C[a], C[b], v)
        return z, z > beta, z
    N = C.sum(axis=1)
    means = (C @ v) / np.maximum(N, 1.0)
    upper, _ = kinf_pair_upper(C[a], C[b], v)
    lower = _bernoulli_lower(means[a], N[a], means[b], N[b])
    # the w smallest margins Z - beta lie among the pairs whose lower margin is at most the w-th smallest upper one
    w = max(int(exact_rivals), 1)
    slack = _BOUND_SLACK * (1.0 + np.abs(beta))
    cut = np.partition(upper - beta, w - 1)[w - 1]
    todo = lower - beta <= cut + slack
    # and a pair whose bounds straddle beta needs its Z to be decided
    todo |= (lower <= beta + slack) & (upper > beta - slack)
    idx = np.flatnonzero(todo)
    z[idx] = kinf_pair_cost(C[a[idx]], C[b[idx]], v)
    defeated = np.where(np.isnan(z), lower > beta, z > beta)
    return z, defeated, np.where(np.isnan(z), upper, z)


def _fmt_items(idx: Sequence[int], names: list[str], limit: int = 5) -> str:
    """``'a', 'b', 'c' and 4 more``: item names for a sentence."""
    shown = ", ".join(repr(names[i]) for i in list(idx)[:limit])
    return shown + (f" and {len(idx) - limit} more" if len(idx) > limit else "")


def certify(label_counts: ArrayLike, values: ArrayLike, delta: float, *, k: int = 1,
            recommendation: Sequence[int | str] | None = None, threshold: str = PAIR_THRESHOLD,
            items: Sequence[str] | None = None, exact_rivals: int | None = None) -> Certificate:
    """Check that ``recommendation`` (default: the empirical top k) is the top k at error probability ``delta``.

    ``label_counts[i, j]``: how many answers item i got with reward ``values[j]`` (rewards in [0, 1]; for the caption
    contests the columns unfunny, somewhat funny, funny with values 0, 1/2, 1); ``t`` is their total.
    ``recommendation`` by item indices or, with ``items`` (one name per item), names. ``threshold``: one of
    :data:`KINF_THRESHOLDS`. ``exact_rivals``: compute Z exactly for this many weakest rivals (all if None); the
    verdict is exact either way. The certificate holds iff every item has answers, the recommendation is the
    empirical top k and every ``Z_ab > beta_ab`` (see the module docstring for the guarantee); ``beta_ab`` is the
    pair's own threshold with ``"kinf-kt-pairs"``, else ``beta(t, delta)`` for every pair.

    Bad input (negative or fractional counts, values outside [0, 1], delta outside (0, 1), k outside
    [1, n_items), an unknown threshold or item, no answers at all) raises ValueError.
    """
    C, v = _check_inputs(label_counts, values, delta, k, threshold)
    n_items, k = C.shape[0], int(k)
    names = [str(i) for i in range(n_items)] if items is None else [str(x) for x in items]
    if len(names) != n_items:
        raise ValueError(f"items must name each of the {n_items} items, got {len(names)} names")
    if exact_rivals is not None and (isinstance(exact_rivals, bool) or exact_rivals < 1):
        raise ValueError(f"exact_rivals must be a positive integer or None, got {exact_rivals!r}")
    N = C.sum(axis=1)
    t = int(N.sum())
    answered = N > 0
    means = np.where(answered, (C @ v) / np.where(answered, N, 1.0), np.nan)
    top = empirical_top(np.where(answered, means, -np.inf), k)
    rec = top if recommendation is None else _resolve(recommendation, names, k)
    rest = np.setdiff1d(np.arange(n_items), rec)
    a, b = np.repeat(rec, rest.size), np.tile(rest, rec.size)
    if threshold == PAIR_THRESHOLD:
        beta = np.asarray(kinf_kt_pair_threshold(N[a], N[b], n_items, float(delta), k), dtype=np.float64)
    else:
        beta = np.full(a.size, float(THRESHOLDS[threshold][0](t, n_items, float(delta), k)))
    z, defeated, key = _pair_statistics(C, v, a, b, beta, exact_rivals)
    order = np.lexsort((b, a, key - beta, np.isnan(z)))  # exact rows first, weakest (smallest margin) first

    def mean_of(i: int) -> float | None:
        return float(means[i]) if answered[i] else None

    rows = tuple(RivalRow(item=int(a[i]), rival=int(b[i]), item_name=names[a[i]], rival_name=names[b[i]],
                          mean_item=mean_of(a[i]), mean_rival=mean_of(b[i]), n_item=int(N[a[i]]), n_rival=int(N[b[i]]),
                          z=None if np.isnan(z[i]) else float(z[i]), beta=float(beta[i]),
                          margin=None if np.isnan(z[i]) else float(z[i] - beta[i]), defeated=bool(defeated[i]))
                 for i in order)
    z_min = rows[0].z if rows[0].z is not None else float(np.nanmin(z))  # the weakest pair's Z

    reasons = []
    silent = np.flatnonzero(~answered)
    if silent.size:
        reasons.append(f"{silent.size} item(s) have no answers and cannot be defeated: {_fmt_items(silent, names)}")
    rec_min = np.min(np.where(answered[rec], means[rec], -np.inf))
    above = rest[answered[rest] & (np.nan_to_num(means[rest], nan=-np.inf) > rec_min)]
    if above.size:
        reasons.append(f"the recommendation is not the empirical top {k}: {_fmt_items(above, names)} "
                       f"{'has' if above.size == 1 else 'have'} a higher mean than a recommended item")
    n_def = int(defeated.sum())
    if n_def < a.size:
        weakest = rows[0]
        reasons.append(f"{a.size - n_def} of {a.size} rivals are not defeated: the weakest, {weakest.rival_name!r} "
                       f"against {weakest.item_name!r}, has Z = {weakest.z if weakest.z is not None else z_min:.3f} "
                       f"<= beta = {weakest.beta:.3f}")
    holds = not reasons
    cert = Certificate(
        recommendation=tuple(int(i) for i in rec), recommendation_names=tuple(names[i] for i in rec),
        empirical_top=tuple(int(i) for i in top), t=t, n_items=n_items, delta=float(delta), k=k,
        threshold=threshold, beta=rows[0].beta, statistic=STATISTIC, z_min=z_min, rivals=rows, n_defeated=n_def,
        holds=holds, reasons=tuple(reasons), explanation="")
    return _with_explanation(cert)


def _with_explanation(cert: Certificate) -> Certificate:
    """``cert`` with its one-paragraph plain-language explanation."""
    what = (f"item {cert.recommendation_names[0]!r}" if cert.k == 1
            else f"the {cert.k} items {_fmt_items(range(cert.k), list(cert.recommendation_names), cert.k)}")
    best = "the best" if cert.k == 1 else f"the top {cert.k}"
    evidence = (f"From {cert.t:,} answers on {cert.n_items:,} items, the {cert.statistic} statistic (the log "
                f"likelihood ratio of 'this item beats that one' against the reverse, for any rating distributions "
                f"on [0, 1]) was recomputed for {what} against every rival ({cert.n_rivals:,} pairs); the weakest "
                f"comparison scores Z = {cert.z_min:.3f} against the threshold beta = {cert.beta:.3f} "
                f"({cert.threshold}, proven at error probability delta = {cert.delta:g} whatever the sampling rule "
                f"and whenever the experiment stopped).")
    if cert.holds:
        verdict = (f" Every rival is defeated, so the certificate holds: {what} is {best}, and the chance that a "
                   f"certificate like this one passes with a wrong answer is at most {cert.delta:g}.")
    else:
        verdict = " The certificate does not hold: " + "; ".join(cert.reasons) + "."
    return replace(cert, explanation=evidence + verdict)

