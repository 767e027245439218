"""Per-participant rater quality of a rating experiment: measures and flags computed from plain records.

Pure Python + NumPy (no database, no web framework): the service reads an experiment's answers and gold
answers, turns them into :class:`AnswerRecord` / :class:`GoldRecord` and calls :func:`participant_quality`;
the dashboard shows the flags and ``participants.csv`` appends :data:`QUALITY_COLUMNS`.

Where the ideas come from:

* **Response time** ("fast"): NEXT's successor Salmon flags answers that come too fast; here the per-answer
  time corrects for the page fetching one query ahead (see :func:`response_seconds`).
* **Gold / validation questions** ("gold"): items with a known answer mixed into a session, the usual
  attention check of crowdsourcing platforms and Salmon's validation sampler.
* **Agreement with the consensus** ("consensus"): agreement with the other raters' leave-one-out majority,
  corrected for chance as in Cohen's kappa (a rater who ignores the item agrees at the chance rate), with a
  permutation standard error so a rater is flagged only when they are not *measurably* better than chance.
* **One label for everything** ("one_label"): the straight-lining check of survey research.
* **crowd-kit's long format** (:func:`crowdkit_rows`): ``task, worker, label`` rows, what
  ``crowdkit.aggregation`` (``DawidSkene().fit_predict(df)``, GLAD, MACE, ...) reads as a DataFrame; labels
  may be strings.

All functions take the records of **one experiment**.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from purebandits.service.crowd_settings import SKIP_LABEL  # an answer (position, speed, one-label), not a rating

__all__ = ["SKIP_LABEL", "FLAGS", "QUALITY_COLUMNS", "CROWDKIT_COLUMNS", "AnswerRecord", "GoldRecord",
           "QualityThresholds", "ParticipantQuality", "participant_quality", "crowdkit_rows", "response_seconds"]


#: every flag, in the order :attr:`ParticipantQuality.flags` lists them
FLAGS = ("fast", "one_label", "gold", "consensus")

#: columns appended to a ``participants.csv`` row, in the order of :meth:`ParticipantQuality.csv_values`
QUALITY_COLUMNS = ("median_response_seconds", "skips", "top_label_share", "gold_answered", "gold_wrong",
                   "consensus_agreement", "chance_agreement", "flags")

#: crowd-kit's long format: ``crowdkit.aggregation`` classes take a DataFrame with these columns
CROWDKIT_COLUMNS = ("task", "worker", "label")

# below this, a permutation standard error is zero up to rounding: the comparison with the consensus carries
# no information (every item has the same leave-one-out modes), so nobody is flagged on it
_NO_INFORMATION = 1e-9


class AnswerRecord(NamedTuple):
    """One answer to a learner's item: ``item`` is the item's external id, ``label`` a label name of the
    experiment or :data:`SKIP_LABEL`; ``created_ms`` is when the query was issued (the page may fetch it
    ahead of showing it), ``answered_ms`` when the answer arrived (milliseconds since the epoch)."""

    participant_id: str
    item: str
    label: str
    created_ms: int
    answered_ms: int


class GoldRecord(NamedTuple):
    """One answer to a gold item (a known answer ``expected``); a skipped gold (``label == "skip"``) is
    neither right nor wrong, but its time counts among the participant's response times."""

    participant_id: str
    gold_id: str
    label: str
    expected: str
    created_ms: int
    answered_ms: int


@dataclass(frozen=True)
class QualityThresholds:
    """When a participant is flagged; every default with its reason.

    * ``min_median_seconds = 1.5``: reading a one-line caption (10-15 words at a fluent 4-5 words a second)
      and clicking takes 3 s or more; a *median* under 1.5 s means most answers were given without reading.
    * ``min_answers = 5``: "fast" needs at least this many timed answers (answers and gold answers, skips
      included): the median of fewer is decided by one or two quick clicks.
    * ``one_label_min_answers = 10``: in a caption contest about 70 % of votes are "unfunny" (NEXT's contest
      540: 0.64 to 0.72), so an honest rater gives "unfunny" to all of 10 captions with probability
      0.7 ** 10 = 0.03, to all of 5 with 0.17: ten answers make the flag meaningful.
    * ``max_gold_wrong_share = 0.5`` and ``gold_min_answered = 2``: "gold" when at least 2 gold answers were
      not skipped and *more than half* of them are wrong. A single slip never flags (1 of 1, 1 of 2 and 1 of 3
      wrong do not), while a rater guessing among k >= 3 labels is wrong with probability (k-1)/k >= 2/3 and
      exceeds one half on most sessions; with ``>=`` an honest rater with a 10 % error rate would be flagged
      on 19 % of two-gold sessions (one wrong of two), with ``>`` on 1 %.
    * ``consensus_min_items = 10``, ``consensus_min_others = 2``: agreement is measured on rated items that
      at least 2 *other* participants rated (a "majority" of one other rater is that rater's opinion), and
      only judged over at least 10 such items (the standard error of an agreement rate over n items is about
      0.5 / sqrt(n): 0.16 at n = 10, already wide).
    * ``consensus_z = 1.645``: flag when observed agreement <= chance agreement + z * (its standard error
      under the hypothesis that the rater ignores the item): a one-sided 5 % test, so a rater drawing labels
      independently of the item is flagged about 95 % of the time. ``consensus_z = 0`` is the bare
      "observed <= chance" rule, which flags such a rater only half of the time (chance is the *mean* of
      their observed agreement).
    """

    min_median_seconds: float = 1.5
    min_answers: int = 5
    one_label_min_answers: int = 10
    max_gold_wrong_share: float = 0.5
    gold_min_answered: int = 2
    consensus_min_items: int = 10
    consensus_min_others: int = 2
    consensus_z: float = 1.645

    def __post_init__(self) -> None:
        if self.min_answers < 1 or self.one_label_min_answers < 1 or self.gold_min_answered < 1:
            raise ValueError("minimum counts must be at least 1")
        if self.consensus_min_items < 2 or self.consensus_min_others < 1:
            raise ValueError("consensus needs consensus_min_items >= 2 and consensus_min_others >= 1")
        if not 0.0 <= self.max_gold_wrong_share < 1.0:
            raise ValueError("max_gold_wrong_share must be in [0, 1)")
        if self.min_median_seconds < 0 or self.consensus_z < 0:
            raise ValueError("min_median_seconds and consensus_z must be non-negative")


def _csv_value(value: float | int | None) -> float | int | str:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 3)
    return value


@dataclass(frozen=True)
class ParticipantQuality:
    """One participant's quality measures and flags in one experiment.

    ``n_answers`` counts answers to learners' items (skips included, gold excluded); ``median_seconds`` is the
    median of :func:`response_seconds` over answers and gold answers; ``top_label`` is the most frequent label
    among the answers, skips counting as the label ``"skip"`` (ties: the alphabetically first);
    ``gold_answered`` counts non-skipped gold answers and ``gold_wrong`` the wrong ones; ``consensus_items``
    counts the rated (non-skip) answers on items that at least ``consensus_min_others`` other participants
    rated, ``consensus_agreement`` the share of them whose label is among the item's leave-one-out modes and
    ``chance_agreement`` the share expected from a rater with the same label frequencies who ignores the item
    (both None without such answers). ``flags`` is a subset of :data:`FLAGS`, in that order.
    """

    participant_id: str
    n_answers: int
    n_skips: int
    median_seconds: float | None
    top_label: str | None
    top_label_share: float | None
    gold_answered: int
    gold_wrong: int
    consensus_items: int
    consensus_agreement: float | None
    chance_agreement: float | None
    flags: tuple[str, ...]

    def csv_values(self) -> list:
        """The values of :data:`QUALITY_COLUMNS` for a ``participants.csv`` row: floats rounded to 3 decimals,
        None as ``""``, flags joined with ``;`` (empty when none)."""
        return [_csv_value(self.median_seconds), self.n_skips, _csv_value(self.top_label_share),
                self.gold_answered, self.gold_wrong, _csv_value(self.consensus_agreement),
                _csv_value(self.chance_agreement), ";".join(self.flags)]


def response_seconds(participant: np.ndarray, created_ms: np.ndarray, answered_ms: np.ndarray) -> np.ndarray:
    """Each answer's response time in seconds, corrected for prefetching.

    The page fetches the next query while the current one is on screen, so ``answered_ms - created_ms``
    overstates the time an item was shown. An item cannot have been shown before the same participant's
    previous answer arrived, so the time is ``answered_ms - max(created_ms, previous answered_ms)``, the
    previous answer taken over all of the participant's records (answers and gold) ordered by
    ``answered_ms`` (ties by ``created_ms``, so the result does not depend on the records' order); negative
    times (clock skew) count as 0. Arrays are aligned; the result is in the input's order.
    """
    participant = np.asarray(participant, dtype=np.int64)
    created = np.asarray(created_ms, dtype=np.int64)
    answered = np.asarray(answered_ms, dtype=np.int64)
    out = np.zeros(len(participant), dtype=np.float64)
    if len(participant) == 0:
        return out
    order = np.lexsort((created, answered, participant))
    p, c, a = participant[order], created[order], answered[order]
    previous = np.empty_like(a)
    previous[0] = np.iinfo(np.int64).min
    previous[1:] = a[:-1]
    first = np.ones(len(p), dtype=bool)
    first[1:] = p[1:] != p[:-1]
    previous[first] = np.iinfo(np.int64).min
    out[order] = np.maximum(a - np.maximum(c, previous), 0) / 1000.0
    return out


def _codes(values: Sequence[str], mapping: dict[str, int]) -> np.ndarray:
    """Integer codes of strings, extending ``mapping`` in order of first appearance."""
    for v in dict.fromkeys(values):
        mapping.setdefault(v, len(mapping))
    return np.fromiter(map(mapping.__getitem__, values), dtype=np.int64, count=len(values))


def _medians(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The median of ``values`` within each group (NaN for an empty group), by one sort."""
    counts = np.bincount(groups, minlength=n_groups)
    ordered = values[np.lexsort((values, groups))]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out = np.full(n_groups, np.nan)
    has = counts > 0
    lo = starts[has] + (counts[has] - 1) // 2
    hi = starts[has] + counts[has] // 2
    out[has] = (ordered[lo] + ordered[hi]) / 2.0
    return out


def _consensus(part: np.ndarray, item: np.ndarray, label: np.ndarray, n_participants: int, n_labels: int,
               thresholds: QualityThresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per participant: number of compared answers, observed agreement, chance agreement and the standard
    error of the observed agreement under "labels ignore the items" (arrays over participants)."""
    n_q = np.zeros(n_participants, dtype=np.int64)
    observed = np.full(n_participants, np.nan)
    chance = np.full(n_participants, np.nan)
    sd = np.zeros(n_participants)
    if len(part) == 0:
        return n_q, observed, chance, sd
    n_items = int(item.max()) + 1
    L = n_labels
    # (participant, item) pairs: a participant's own ratings of an item are left out of its consensus
    pairs, pair_of = np.unique(part * n_items + item, return_inverse=True)
    pair_item = pairs % n_items
    raters = np.bincount(pair_item, minlength=n_items)  # distinct participants with a rating of each item
    item_counts = np.bincount(item * L + label, minlength=n_items * L).reshape(n_items, L)
    pair_counts = np.bincount(pair_of * L + label, minlength=len(pairs) * L).reshape(len(pairs), L)
    compared_pair = raters[pair_item] - 1 >= thresholds.consensus_min_others
    keep = compared_pair[pair_of]
    if not keep.any():
        return n_q, observed, chance, sd
    loo = item_counts[pair_item[compared_pair]] - pair_counts[compared_pair]  # the others' label counts
    modes = loo == loo.max(axis=1, keepdims=True)  # ties: every tied label is a mode
    compact = np.cumsum(compared_pair) - 1  # pair index -> row of ``modes``
    p, y = part[keep], label[keep]
    m = modes[compact[pair_of[keep]]].astype(np.float64)  # m[a, l]: label l is a mode of answer a's item
    n_q = np.bincount(p, minlength=n_participants)
    has = n_q > 0
    n = np.where(has, n_q, 1).astype(np.float64)
    agree = m[np.arange(len(p)), y]
    observed = np.where(has, np.bincount(p, weights=agree, minlength=n_participants) / n, np.nan)
    label_counts = np.bincount(p * L + y, minlength=n_participants * L).reshape(n_participants, L)
    share = label_counts / n[:, None]  # the participant's own label distribution over the compared answers
    mode_share = np.stack([np.bincount(p, weights=m[:, k], minlength=n_participants) for k in range(L)], axis=1)
    mode_share /= n[:, None]  # share of the compared answers whose item has label l among its modes
    chance_all = (share * mode_share).sum(axis=1)
    chance = np.where(has, chance_all, np.nan)
    # ``chance`` is the mean of ``observed`` over the permutations of the participant's labels among their
    # compared answers; Hoeffding's combinatorial CLT gives the permutation variance of T = n * observed as
    # sum_{a,b} d_ab^2 / (n - 1), d_ab = m[a, y_b] - row mean - column mean + grand mean, i.e.
    # sum_a sum_l count_l * (m[a, l] - r_a - mode_share_l + chance)^2 with r_a = sum_l share_l * m[a, l]
    r = (m * share[p]).sum(axis=1)
    d = (m - mode_share[p]) - (r - chance_all[p])[:, None]
    ss = np.bincount(p, weights=(label_counts[p] * d * d).sum(axis=1), minlength=n_participants)
    var_t = np.where(n_q > 1, ss / np.maximum(n_q - 1, 1), 0.0)
    sd = np.sqrt(np.maximum(var_t, 0.0)) / n
    return n_q, observed, chance, sd


def participant_quality(answers: Iterable[AnswerRecord], gold: Iterable[GoldRecord] = (),
                        thresholds: QualityThresholds = QualityThresholds()) -> dict[str, ParticipantQuality]:
    """Quality measures and flags of every participant with an answer or a gold answer in one experiment.

    Flags (see :class:`QualityThresholds` for the defaults and why):

    * ``fast``: at least ``min_answers`` timed answers (answers and gold, skips included) and a median
      :func:`response_seconds` below ``min_median_seconds``.
    * ``one_label``: at least ``one_label_min_answers`` answers (skips included, gold excluded), all with
      the same label (all skips too: skipping everything is not rating).
    * ``gold``: at least ``gold_min_answered`` non-skipped gold answers and a wrong share *above*
      ``max_gold_wrong_share`` (a single slip never flags; more than half wrong does).
    * ``consensus``: at least ``consensus_min_items`` rated (non-skip) answers on items that at least
      ``consensus_min_others`` *other* participants rated, and agreement with those items' leave-one-out
      majority (the modes of the other participants' labels; a tie counts as agreement when the label is
      among the tied modes) no better than chance, Cohen's-kappa style: chance agreement is the mean over
      the compared answers of P(a label drawn from the participant's own label distribution over them is a
      mode of the item), exactly the agreement a rater with the same label frequencies who ignores the item
      scores on average (the mean over permutations of their labels among their items). "No better" means
      observed <= chance + ``consensus_z`` * the permutation standard error of observed agreement, so noise
      alone does not clear a careless rater; when that standard error is zero (every compared item has the
      same modes, e.g. every caption's majority is "unfunny"; or the rater gives one label throughout, which
      "one_label" is for) the comparison says nothing about the rater and the flag is not raised. A
      participant's repeated ratings of one item each count as an answer; all of their ratings of an item are
      left out of its consensus.

    Linear in the number of records (a million answers take a second or two): codes, ``np.bincount``,
    ``np.unique`` and two sorts, no per-pair loop.
    """
    th = thresholds
    a_rows = [(r.participant_id, r.item, r.label, r.created_ms, r.answered_ms) for r in answers]
    g_rows = [(r.participant_id, r.label, r.expected, r.created_ms, r.answered_ms) for r in gold]
    a_pid, a_item, a_label, a_created, a_answered = zip(*a_rows, strict=True) if a_rows else ((),) * 5
    g_pid, g_label, g_expected, g_created, g_answered = zip(*g_rows, strict=True) if g_rows else ((),) * 5

    participants: dict[str, int] = {}
    a_p = _codes(a_pid, participants)
    g_p = _codes(g_pid, participants)
    P = len(participants)
    if P == 0:
        return {}

    # response times over answers and gold together
    t_p = np.concatenate((a_p, g_p))
    seconds = response_seconds(t_p, np.array(a_created + g_created, dtype=np.int64),
                               np.array(a_answered + g_answered, dtype=np.int64))
    n_timed = np.bincount(t_p, minlength=P)
    median = _medians(t_p, seconds, P)

    # labels, coded in alphabetical order so that argmax breaks ties by name
    names = sorted(set(a_label))
    label_code = {name: k for k, name in enumerate(names)}
    L = max(len(names), 1)
    a_l = _codes(a_label, label_code)
    n_answers = np.bincount(a_p, minlength=P)
    per_label = np.bincount(a_p * L + a_l, minlength=P * L).reshape(P, L)
    skip = label_code.get(SKIP_LABEL)
    n_skips = per_label[:, skip] if skip is not None else np.zeros(P, dtype=np.int64)
    top = per_label.argmax(axis=1)
    top_count = per_label.max(axis=1)

    # gold
    g_done = np.fromiter((x != SKIP_LABEL for x in g_label), dtype=bool, count=len(g_label))
    g_bad = np.fromiter((x != SKIP_LABEL and x != e for x, e in zip(g_label, g_expected, strict=True)),
                        dtype=bool, count=len(g_label))
    gold_answered = np.bincount(g_p[g_done], minlength=P)
    gold_wrong = np.bincount(g_p[g_bad], minlength=P)

    # consensus over rated (non-skip) answers
    rated = a_l != skip if skip is not None else np.ones(len(a_l), dtype=bool)
    items: dict[str, int] = {}
    rated_items = [x for x, keep in zip(a_item, rated.tolist(), strict=True) if keep]
    n_q, observed, chance, sd = _consensus(a_p[rated], _codes(rated_items, items), a_l[rated], P, L, th)

    fast = (n_timed >= th.min_answers) & (median < th.min_median_seconds)
    one_label = (n_answers >= th.one_label_min_answers) & (top_count == n_answers)
    gold_flag = (gold_answered >= th.gold_min_answered) & (gold_wrong > th.max_gold_wrong_share * gold_answered)
    with np.errstate(invalid="ignore"):
        consensus = ((n_q >= th.consensus_min_items) & (sd > _NO_INFORMATION)
                     & (observed <= chance + th.consensus_z * sd + 1e-12))
    flag_columns = np.stack((fast, one_label, gold_flag, consensus), axis=1).tolist()

    out: dict[str, ParticipantQuality] = {}
    cols = zip(participants, n_answers.tolist(), n_skips.tolist(), median.tolist(), top.tolist(),
               top_count.tolist(), gold_answered.tolist(), gold_wrong.tolist(), n_q.tolist(), observed.tolist(),
               chance.tolist(), flag_columns, strict=True)
    for pid, n_a, n_s, med, t, t_count, g_ans, g_wr, n_c, obs, cha, fl in cols:
        out[pid] = ParticipantQuality(
            participant_id=pid, n_answers=n_a, n_skips=n_s,
            median_seconds=None if math.isnan(med) else med,
            top_label=names[t] if n_a else None, top_label_share=t_count / n_a if n_a else None,
            gold_answered=g_ans, gold_wrong=g_wr, consensus_items=n_c,
            consensus_agreement=obs if n_c else None, chance_agreement=cha if n_c else None,
            flags=tuple(name for name, on in zip(FLAGS, fl, strict=True) if on))
    return out


def crowdkit_rows(answers: Iterable[AnswerRecord]) -> Iterator[list[str]]:
    """crowd-kit's long format: the header :data:`CROWDKIT_COLUMNS` (``task, worker, label``), then one row
    per rated answer (skips dropped: "can't decide" is not a class). ``pandas.DataFrame(rows[1:],
    columns=rows[0])`` is what ``crowdkit.aggregation.DawidSkene().fit_predict`` takes; labels stay strings."""
    yield list(CROWDKIT_COLUMNS)
    for r in answers:
        if r.label != SKIP_LABEL:
            yield [r.item, r.participant_id, r.label]
