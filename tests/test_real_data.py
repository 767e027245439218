"""Bundled real data: loads offline, matches the documented totals, rejects malformed files."""

from pathlib import Path

import numpy as np
import pytest

from purebandits.instances.real import (
    DataFormatError,
    caption_contest,
    derive_rte_workers,
    load_caption_summary,
    load_rte_workers,
)

SHARED_RTE = Path(__file__).resolve().parents[2] / "shared" / "data" / "rte" / "rte.standardized.tsv"


@pytest.mark.parametrize("contest, captions, ratings", [("512", 4399, 21574), ("558", 3925, 524297),
                                                        ("559", 138, 62743)])
def test_bundled_contests_match_provenance_totals(contest, captions, ratings):
    c = caption_contest(contest)
    assert c.n_arms == captions and int(c.votes.sum()) == ratings
    assert np.all((c.means >= 0) & (c.means <= 1))
    np.testing.assert_allclose(c.model().means, c.means)


def test_caption_mean_is_score_minus_one_over_two():
    c = caption_contest("558")
    # first row of the file: score 1.7676190476190476
    assert c.means[0] == pytest.approx((1.7676190476190476 - 1) / 2)


def test_rte_workers_table():
    w = load_rte_workers()
    assert w.n_arms == 164 and int(w.labels.sum()) == 8000
    assert w.accuracies.min() == pytest.approx(0.4) and np.median(w.accuracies) == pytest.approx(0.85, abs=0.01)


@pytest.mark.skipif(not SHARED_RTE.exists(), reason="raw RTE file not beside the repository")
def test_rte_table_is_derived_from_raw_file():
    raw = derive_rte_workers(SHARED_RTE)
    shipped = load_rte_workers()
    assert raw.worker_ids == shipped.worker_ids
    np.testing.assert_array_equal(raw.labels, shipped.labels)
    np.testing.assert_array_equal(raw.correct, shipped.correct)


HEADER = "rank,funny,somewhat_funny,unfunny,count,score,precision,contest,caption\n"


@pytest.mark.parametrize("body, problem", [
    ("1,2,3,4,9,2.0,0.1,999,ok\n1,2,x,4,9,2.0,0.1,999,bad\n", "line 3: column 'somewhat_funny' must be an integer"),
    ("1,2,3,4,10,2.0,0.1,999,sum\n", "line 2: count 10 != funny"),
    ("1,0,0,0,0,2.0,0.1,999,none\n", "line 2: caption has no votes"),
    ("1,-1,3,4,6,2.0,0.1,999,neg\n", "must be >= 0"),
    ("", "no captions"),
])
def test_malformed_summary_names_file_line_and_problem(tmp_path, body, problem):
    p = tmp_path / "bad.csv"
    p.write_text(HEADER + body)
    with pytest.raises(DataFormatError) as err:
        load_caption_summary(p)
    assert str(p) in str(err.value) and problem in str(err.value)


def test_missing_column_is_reported(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("rank,funny\n1,2\n")
    with pytest.raises(DataFormatError, match="line 1: missing column"):
        load_caption_summary(p)


def test_unknown_contest():
    with pytest.raises(ValueError, match="bundled"):
        caption_contest("1")
