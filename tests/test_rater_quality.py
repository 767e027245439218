"""Rater quality (purebandits.service.rater_quality): each flag fires exactly when its rule says, the
prefetch-corrected response time, the consensus' chance correction and its permutation standard error
(checked against an enumeration), a seeded simulation of honest and random raters, crowd-kit's rows."""

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purebandits.service.rater_quality import (
    CROWDKIT_COLUMNS,
    FLAGS,
    QUALITY_COLUMNS,
    SKIP_LABEL,
    AnswerRecord,
    GoldRecord,
    ParticipantQuality,
    QualityThresholds,
    crowdkit_rows,
    participant_quality,
    response_seconds,
)


def answers(pid, labels, items=None, seconds=5.0, start=0):
    """Answers of one participant, one every ``seconds``, each query issued when the previous answer came."""
    items = items if items is not None else [f"i{k}" for k in range(len(labels))]
    out, t = [], start
    for item, label in zip(items, labels, strict=True):
        out.append(AnswerRecord(pid, item, label, t, t + round(seconds * 1000)))
        t += round(seconds * 1000)
    return out


def golds(pid, pairs, start=10**9):
    """Gold answers ``(label, expected)`` of one participant, 5 s each, after everything else."""
    return [GoldRecord(pid, f"g{k}", label, expected, start + 5000 * k, start + 5000 * (k + 1))
            for k, (label, expected) in enumerate(pairs)]


# ---------------------------------------------------------------- response times and "fast"

def test_response_time_counts_from_the_previous_answer_when_the_query_was_prefetched():
    recs = [
        AnswerRecord("p", "i1", "a", 0, 4000),         # shown at once: 4 s
        AnswerRecord("p", "i2", "a", 100, 6000),       # prefetched at 0.1 s, shown at 4 s: 2 s, not 5.9 s
        AnswerRecord("p", "i3", "b", 7000, 9000),      # issued after the gold answer at 6.5 s: 2 s
    ]
    gold = [GoldRecord("p", "g", "a", "a", 6100, 6500)]  # issued at 6.1 s (after the answer at 6 s): 0.4 s
    q = participant_quality(recs, gold)["p"]
    assert q.median_seconds == pytest.approx(2.0)  # median of 4, 2, 0.4, 2
    p = np.zeros(4, dtype=np.int64)
    created = np.array([0, 100, 7000, 6100])
    answered = np.array([4000, 6000, 9000, 6500])
    assert response_seconds(p, created, answered) == pytest.approx([4.0, 2.0, 2.0, 0.4])
    perm = [2, 0, 3, 1]  # the input's order does not matter
    assert response_seconds(p[perm], created[perm], answered[perm]) == pytest.approx([2.0, 4.0, 0.4, 2.0])
    # participants are separate sequences, and a clock skew (answered before created) counts as 0
    two = response_seconds(np.array([0, 1]), np.array([0, 5000]), np.array([3000, 4000]))
    assert two == pytest.approx([3.0, 0.0])


def test_fast_needs_min_answers_and_a_median_strictly_below_the_threshold():
    recs = (answers("five_fast", ["a", "b"] * 2 + ["a"], seconds=1.4)
            + answers("four_fast", ["a", "b"] * 2, seconds=1.0)
            + answers("at_threshold", ["a", "b"] * 2 + ["a"], seconds=1.5)
            + answers("skips_count", [SKIP_LABEL] * 3 + ["a", "b"], seconds=1.0)
            + answers("four_plus_gold", ["a", "b"] * 2, seconds=1.0))
    gold = [GoldRecord("four_plus_gold", "g", "a", "a", 10**6, 10**6 + 1000)]
    q = participant_quality(recs, gold)
    assert q["five_fast"].flags == ("fast",)
    assert q["five_fast"].median_seconds == pytest.approx(1.4)
    assert q["four_fast"].flags == ()  # 4 < min_answers
    assert q["at_threshold"].median_seconds == pytest.approx(1.5) and q["at_threshold"].flags == ()
    assert q["skips_count"].flags == ("fast",) and q["skips_count"].n_skips == 3
    assert q["four_plus_gold"].flags == ("fast",)  # gold answers are timed answers too
    q = participant_quality(recs, gold, QualityThresholds(min_answers=6))
    assert all(v.flags == () for v in q.values())


# ---------------------------------------------------------------- one label

def test_one_label_fires_from_exactly_one_label_min_answers_with_skips_counted():
    recs = (answers("ten", ["a"] * 10) + answers("nine", ["a"] * 9) + answers("ten_one_skip", ["a"] * 9 + ["skip"])
            + answers("all_skips", [SKIP_LABEL] * 10) + answers("mixed", ["a"] * 9 + ["b"]))
    q = participant_quality(recs)
    assert q["ten"].flags == ("one_label",) and q["ten"].top_label == "a" and q["ten"].top_label_share == 1.0
    assert q["nine"].flags == ()
    assert q["ten_one_skip"].flags == () and q["ten_one_skip"].top_label_share == pytest.approx(0.9)
    assert q["all_skips"].flags == ("one_label",) and q["all_skips"].top_label == SKIP_LABEL
    assert q["all_skips"].n_skips == 10 and q["all_skips"].consensus_items == 0
    assert q["mixed"].flags == ()


def test_top_label_ties_go_to_the_alphabetically_first_label():
    q = participant_quality(answers("p", ["b", "a", "b", "a"]))["p"]
    assert (q.top_label, q.top_label_share) == ("a", 0.5)


# ---------------------------------------------------------------- gold

@pytest.mark.parametrize(("pairs", "answered", "wrong", "flagged"), [
    ([("b", "a")], 1, 1, False),                                   # one slip never flags
    ([("b", "a"), ("a", "a")], 2, 1, False),                       # exactly half wrong: not more than half
    ([("b", "a"), ("c", "a")], 2, 2, True),
    ([("b", "a"), ("c", "a"), ("a", "a")], 3, 2, True),
    ([("b", "a"), ("c", "a"), ("a", "a"), ("a", "a")], 4, 2, False),
    ([("b", "a"), ("c", "a"), ("skip", "a"), ("skip", "a")], 2, 2, True),  # skipped gold: neither
    ([("b", "a"), ("skip", "a"), ("skip", "a"), ("skip", "a")], 1, 1, False),
])
def test_gold_flags_more_than_half_wrong_of_at_least_two_answered(pairs, answered, wrong, flagged):
    q = participant_quality(answers("p", ["a", "b"]), golds("p", pairs))["p"]
    assert (q.gold_answered, q.gold_wrong) == (answered, wrong)
    assert q.flags == (("gold",) if flagged else ())


def test_a_participant_with_only_gold_answers():
    q = participant_quality([], golds("g", [("b", "a")] * 5 + [("skip", "a")]))["g"]
    assert (q.n_answers, q.n_skips, q.top_label, q.top_label_share) == (0, 0, None, None)
    assert (q.consensus_items, q.consensus_agreement, q.chance_agreement) == (0, None, None)
    assert (q.gold_answered, q.gold_wrong) == (5, 5)
    assert q.median_seconds == pytest.approx(5.0)
    assert q.flags == ("gold",)
    fast = [GoldRecord("f", f"g{k}", "a", "a", 1000 * k, 1000 * (k + 1)) for k in range(5)]
    assert participant_quality([], fast)["f"].flags == ("fast",)
    assert participant_quality([], []) == {}


# ---------------------------------------------------------------- consensus

ITEMS = [f"i{k}" for k in range(10)]
TRUTH = ["a"] * 5 + ["b"] * 5  # the two other raters' label on each item


def others(items=ITEMS, truth=TRUTH):
    return answers("o1", list(truth), list(items)) + answers("o2", list(truth), list(items))


def test_consensus_agreement_and_chance_by_hand():
    recs = others() + answers("good", TRUTH, ITEMS) + answers("bad", [{"a": "b", "b": "a"}[x] for x in TRUTH],
                                                               ITEMS)
    q = participant_quality(recs)
    # good: agrees on all 10; chance = 0.5 * 0.5 (a, a mode on 5 of 10) + 0.5 * 0.5 (b) = 0.5
    assert (q["good"].consensus_items, q["good"].consensus_agreement) == (10, 1.0)
    assert q["good"].chance_agreement == pytest.approx(0.5)
    assert q["good"].flags == ()
    # bad: the leave-one-out majority of o1 and o2 (and of good, bad's other raters) is TRUTH; bad never agrees
    assert (q["bad"].consensus_items, q["bad"].consensus_agreement) == (10, 0.0)
    assert q["bad"].chance_agreement == pytest.approx(0.5)
    assert q["bad"].flags == ("consensus",)
    # o1's leave-one-out modes: o2 and good say TRUTH, bad says the opposite: TRUTH is the majority
    assert q["o1"].consensus_agreement == 1.0 and q["o1"].flags == ()


def test_consensus_needs_min_items_with_min_other_raters_and_ignores_skips():
    flipped = [{"a": "b", "b": "a"}[x] for x in TRUTH]
    nine = others() + answers("bad", flipped[:9], ITEMS[:9])
    assert participant_quality(nine)["bad"].consensus_items == 9
    assert participant_quality(nine)["bad"].flags == ()
    assert participant_quality(nine, thresholds=QualityThresholds(consensus_min_items=9))["bad"].flags == (
        "consensus",)
    # o2 skipped item 9: one other rater there, so item 9 is not compared
    o2_skips = answers("o1", TRUTH, ITEMS) + answers("o2", TRUTH[:9] + [SKIP_LABEL], ITEMS)
    q = participant_quality(o2_skips + answers("bad", flipped, ITEMS))["bad"]
    assert (q.consensus_items, q.flags) == (9, ())
    # bad's own skips are not ratings either
    q = participant_quality(others() + answers("bad", flipped[:9] + [SKIP_LABEL], ITEMS))["bad"]
    assert (q.consensus_items, q.n_skips, q.flags) == (9, 1, ())
    # with consensus_min_others=1, o2's skip leaves item 9 compared again
    q = participant_quality(o2_skips + answers("bad", flipped, ITEMS),
                            thresholds=QualityThresholds(consensus_min_others=1))["bad"]
    assert (q.consensus_items, q.flags) == (10, ("consensus",))


def test_tied_modes_count_as_agreement_and_identical_modes_carry_no_information():
    # o1 says a, o2 says b everywhere: every item's leave-one-out modes are {a, b}
    recs = answers("o1", ["a"] * 10, ITEMS) + answers("o2", ["b"] * 10, ITEMS) + answers("t", ["a", "b"] * 5, ITEMS)
    q = participant_quality(recs)["t"]
    assert (q.consensus_agreement, q.chance_agreement) == (1.0, 1.0)
    assert q.flags == ()
    # all items share the mode "a": observed agreement equals chance for any rater whatsoever, so the
    # comparison says nothing and does not flag, not even with consensus_z = 0
    recs = others(truth=["a"] * 10) + answers("t", ["a"] * 4 + ["b"] * 6, ITEMS)
    q = participant_quality(recs, thresholds=QualityThresholds(consensus_z=0.0))["t"]
    assert q.consensus_agreement == pytest.approx(0.4) and q.chance_agreement == pytest.approx(0.4)
    assert q.flags == ()


def _permutation_moments(labels, truth):
    """Mean and standard deviation of the agreement over every arrangement of two-label ``labels`` among the
    items (each arrangement is as likely under a uniform permutation)."""
    n, n_a = len(labels), labels.count("a")
    values = []
    for where in itertools.combinations(range(n), n_a):
        arrangement = ["a" if k in where else "b" for k in range(n)]
        values.append(np.mean([x == y for x, y in zip(arrangement, truth, strict=True)]))
    return float(np.mean(values)), float(np.std(values))


def test_consensus_threshold_is_chance_plus_z_permutation_standard_errors():
    # 6 agreements of 10: items 0-4 (mode a) get a, a, a, b, b; items 5-9 (mode b) get a, a, b, b, b
    labels = ["a", "a", "a", "b", "b", "a", "a", "b", "b", "b"]
    recs = others() + answers("t", labels, ITEMS)
    mean, sd = _permutation_moments(labels, TRUTH)  # 252 arrangements of 5 a's and 5 b's
    q = participant_quality(recs)["t"]
    assert q.consensus_agreement == pytest.approx(0.6)
    assert q.chance_agreement == pytest.approx(mean) == pytest.approx(0.5)
    # by hand: agreement = 2 X / 10 with X the a's among items 0-4, hypergeometric with variance 25 / 36
    assert sd == pytest.approx(math.sqrt(4 * 25 / 36) / 10)  # 1/6
    z_exact = (0.6 - 0.5) / sd  # 0.6
    flags = lambda z: participant_quality(recs, thresholds=QualityThresholds(consensus_z=z))["t"].flags
    assert flags(z_exact - 0.01) == ()
    assert flags(z_exact + 0.01) == ("consensus",)
    assert flags(1.645) == ("consensus",)  # 0.6 is not measurably better than 0.5 over 10 items
    # with consensus_z = 0, exactly at chance flags and one agreement more does not
    at_chance = ["a", "a", "a", "b", "b", "a", "a", "a", "b", "b"]  # 3 + 2 = 5 agreements of 10
    q = participant_quality(others() + answers("t", at_chance, ITEMS), thresholds=QualityThresholds(consensus_z=0))
    assert (q["t"].consensus_agreement, q["t"].chance_agreement) == (0.5, 0.5)
    assert q["t"].flags == ("consensus",)
    assert flags(0.0) == ()


def test_honest_raters_pass_and_item_blind_raters_are_flagged():
    """60 items with 3 labels, the modes balanced (item k's mode is label k % 3); 25 honest raters give an
    item's mode with probability 0.8 (0.1 each other label), 20 random raters draw uniformly; everyone rates
    every item, so each item has 44 other raters and its leave-one-out mode is its true mode (about 20 + 7
    votes against 2.5 + 7).

    Honest: observed agreement about 0.8, chance about 1/3, and the permutation standard error over n = 60
    items is about sqrt(2/9 / 60) = 0.06: the honest raters clear the threshold chance + 1.645 * 0.06 = 0.43
    by about 6 standard errors (0.8 - 0.43) / 0.06, so none is flagged for any seed in practice.
    Random: their labels ignore the item, which is exactly the permutation null, so each is flagged with
    probability about 0.95 (z = 1.645); at least 16 of 20 fail only with probability P(Bin(20, 0.05) >= 5)
    = 0.003, so the check is not a lucky seed."""
    rng = np.random.default_rng(20261128)
    labels = ["a", "b", "c"]
    items = [f"i{k}" for k in range(60)]
    recs = []
    for r in range(25):
        picks = [k % 3 if rng.random() < 0.8 else (k % 3 + rng.integers(1, 3)) % 3 for k in range(60)]
        recs += answers(f"honest{r}", [labels[x] for x in picks], items)
    for r in range(20):
        recs += answers(f"random{r}", [labels[x] for x in rng.integers(0, 3, 60)], items)
    q = participant_quality(recs)
    honest = [q[f"honest{r}"] for r in range(25)]
    blind = [q[f"random{r}"] for r in range(20)]
    assert all(h.consensus_items == 60 and "consensus" not in h.flags for h in honest)
    assert min(h.consensus_agreement - h.chance_agreement for h in honest) > 0.3
    assert sum("consensus" in b.flags for b in blind) >= 16
    assert max(abs(b.consensus_agreement - b.chance_agreement) for b in blind) < 0.25  # 4 sd of 0.06


# ---------------------------------------------------------------- outputs

def test_csv_values_follow_quality_columns():
    q = ParticipantQuality("p", 12, 2, 1.23456, "a", 2 / 3, 3, 1, 10, 0.1, 1 / 3, ("fast", "consensus"))
    assert len(q.csv_values()) == len(QUALITY_COLUMNS)
    assert q.csv_values() == [1.235, 2, 0.667, 3, 1, 0.1, 0.333, "fast;consensus"]
    empty = ParticipantQuality("p", 0, 0, None, None, None, 0, 0, 0, None, None, ())
    assert empty.csv_values() == ["", 0, "", 0, 0, "", "", ""]
    assert QUALITY_COLUMNS == ("median_response_seconds", "skips", "top_label_share", "gold_answered",
                               "gold_wrong", "consensus_agreement", "chance_agreement", "flags")
    assert FLAGS == ("fast", "one_label", "gold", "consensus")


def test_flags_keep_their_order():
    flipped = [{"a": "b", "b": "a"}[x] for x in TRUTH]
    recs = others() + answers("p", flipped, ITEMS, seconds=1.0) + answers("s", ["a"] * 10, ITEMS, seconds=1.0)
    gold = golds("p", [("b", "a"), ("b", "a")]) + golds("s", [("b", "a"), ("b", "a")])
    q = participant_quality(recs, gold)
    assert q["p"].flags == ("fast", "gold", "consensus")
    assert q["s"].flags == ("fast", "one_label", "gold")


def test_a_one_label_rater_is_at_chance_but_not_consensus_flagged():
    # permuting identical labels changes nothing: agreement is exactly chance (kappa 0) with a zero standard
    # error, so the comparison carries no information; such a rater is what "one_label" is for
    q = participant_quality(others() + answers("s", ["a"] * 10, ITEMS),
                            thresholds=QualityThresholds(consensus_z=0))["s"]
    assert q.consensus_agreement == q.chance_agreement == 0.5
    assert q.flags == ("one_label",)


CROWD = [AnswerRecord("w1", "t1", "funny", 0, 1), AnswerRecord("w2", "t1", SKIP_LABEL, 0, 1),
         AnswerRecord("w2", "t2", "unfunny", 0, 1), AnswerRecord("w3", "t1", "funny", 0, 1),
         AnswerRecord("w3", "t2", "unfunny", 0, 1), AnswerRecord("w1", "t2", "somewhat_funny", 0, 1)]


def test_crowdkit_rows_have_the_header_and_drop_skips():
    rows = list(crowdkit_rows(CROWD))
    assert CROWDKIT_COLUMNS == ("task", "worker", "label")
    assert rows[0] == ["task", "worker", "label"]
    assert rows[1:] == [["t1", "w1", "funny"], ["t2", "w2", "unfunny"], ["t1", "w3", "funny"],
                        ["t2", "w3", "unfunny"], ["t2", "w1", "somewhat_funny"]]
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(rows[1:], columns=rows[0])
    assert list(df.columns) == ["task", "worker", "label"] and len(df) == 5
    assert set(df["label"]) == {"funny", "unfunny", "somewhat_funny"}  # string labels, no skip


def test_crowdkit_reads_the_rows_back():
    aggregation = pytest.importorskip("crowdkit.aggregation")
    pd = pytest.importorskip("pandas")
    rows = list(crowdkit_rows(CROWD))
    df = pd.DataFrame(rows[1:], columns=rows[0])
    labels = aggregation.DawidSkene(n_iter=10).fit_predict(df)
    assert labels["t1"] == "funny" and labels["t2"] == "unfunny"
    assert aggregation.MajorityVote().fit_predict(df)["t1"] == "funny"


# ---------------------------------------------------------------- properties

PIDS = ["p0", "p1", "p2", "p3"]
record = st.builds(
    lambda pid, item, label, created, wait: AnswerRecord(pid, item, label, created, created + wait),
    st.sampled_from(PIDS), st.sampled_from(["i0", "i1", "i2", "i3"]), st.sampled_from(["a", "b", "c", SKIP_LABEL]),
    st.integers(0, 20_000), st.integers(0, 4000))
gold_record = st.builds(
    lambda pid, label, expected, created, wait: GoldRecord(pid, "g", label, expected, created, created + wait),
    st.sampled_from(PIDS), st.sampled_from(["a", "b", SKIP_LABEL]), st.sampled_from(["a", "b"]),
    st.integers(0, 20_000), st.integers(0, 4000))
SMALL = QualityThresholds(min_answers=2, one_label_min_answers=3, consensus_min_items=2, consensus_min_others=1)
CONSENSUS_FIELDS = {"consensus_items", "consensus_agreement", "chance_agreement"}


def same(v, w):
    """Equal fields, floats up to rounding (sums in another order)."""
    return all(x == pytest.approx(y) if isinstance(x, float) and isinstance(y, float) else x == y
               for x, y in zip(vars(v).values(), vars(w).values(), strict=True))


def without_consensus(q):
    return {k: v for k, v in vars(q).items() if k not in CONSENSUS_FIELDS} | {
        "flags": tuple(f for f in q.flags if f != "consensus")}


@settings(max_examples=60)
@given(st.lists(record, max_size=30), st.lists(gold_record, max_size=6), st.randoms(use_true_random=False),
       st.lists(record.map(lambda r: r._replace(participant_id="new" + r.participant_id)), min_size=1, max_size=15))
def test_record_order_and_other_participants(recs, gold, rnd: random.Random, extra):
    q = participant_quality(recs, gold, SMALL)
    shuffled, gold_shuffled = recs[:], gold[:]
    rnd.shuffle(shuffled)
    rnd.shuffle(gold_shuffled)
    again = participant_quality(shuffled, gold_shuffled, SMALL)
    assert again.keys() == q.keys()
    for pid, v in q.items():
        assert same(again[pid], v)
    mixed = recs + extra
    rnd.shuffle(mixed)
    more = participant_quality(mixed, gold, SMALL)
    assert set(q) <= set(more)
    for pid, v in q.items():
        assert without_consensus(more[pid]) == without_consensus(v)
        assert set(v.flags) <= set(FLAGS) and list(v.flags) == [f for f in FLAGS if f in v.flags]
