"""An open crowd against a live server on a bundled contest (benchmarks/open_crowd.py at test size).

Participants arrive all the time, 32 at a time, each rates a session of at most 25 captions, with
the service's default learner and repeat policy. Nobody may be turned away while they have
captions left to rate, nobody may rate a caption twice, the learner must stop on the right
caption, and every acknowledged answer must be stored exactly once. Full-size numbers:
``docs/repeat_policy_cost.md``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest
from study_support import LiveApp

from purebandits.service.settings import Settings

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "open_crowd.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("open_crowd", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("open_crowd", mod)
    spec.loader.exec_module(mod)
    return mod


def _settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/crowd.sqlite", ask_rate_per_second=0,
                    participant_rate_per_second=0, create_rate_per_second=0)


@pytest.mark.parametrize("batch", [1, 5])
def test_open_crowd_is_served_until_the_learner_stops(bench, tmp_path, batch):
    # 40 captions of contest 512 (its best and 39 others spread over the ranking): sessions of at
    # most 25 never run out of captions, so any "exhausted" or "waiting" is a participant turned away
    contest = bench.load_contest("512", 40, "spread")
    assert contest.n == 40 and len(contest.best) == 1
    crowd = bench.Crowd(concurrency=32, session_min=5, session_max=25, batch=batch)
    with LiveApp(_settings(tmp_path)) as url:
        r = asyncio.run(bench.drive(url, contest, 0, crowd, cap=60_000))
    assert r["errors"] == 0, r["first_errors"]
    assert r["stopped"] and r["correct"], r
    assert r["turned_away"] == 0 and r["waiting"] == 0
    assert r["repeats"] == 0 and r["stored_repeats"] == 0  # nobody rated a caption twice
    assert r["lost_or_double"] == 0 and r["mislabelled"] == 0  # every acknowledged answer stored once
    assert r["acked"] <= r["answers"]  # answers in flight when the learner stopped may be stored unacknowledged
    assert r["participants"] > 32 and r["answers_per_participant"] <= 25


def test_fixed_group_is_served_while_captions_remain(bench, tmp_path):
    contest = bench.load_contest("512", 40, "spread")
    crowd = bench.Crowd(concurrency=8, batch=1, group=8)
    with LiveApp(_settings(tmp_path)) as url:
        r = asyncio.run(bench.drive(url, contest, 1, crowd, cap=60_000))
    assert r["errors"] == 0, r["first_errors"]
    assert r["stopped"] and r["correct"] and r["turned_away"] == 0
    assert r["lost_or_double"] == 0 and r["mislabelled"] == 0
