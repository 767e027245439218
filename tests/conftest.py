"""Test-wide settings and shared fixtures.

Hypothesis' per-example deadline is off: the first example of a property test often triggers a
Numba compilation (seconds on a fresh cache, as in CI), which says nothing about the code's speed.
Speed is measured by ``benchmarks/``, never by tests.
"""

from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("purebandits", deadline=None)
settings.load_profile("purebandits")


@pytest.fixture
def caption_summary(tmp_path):
    """A factory of a user's caption-contest summary file (the bundled files' columns): ``n`` captions whose
    funny votes grow with their index, so caption n - 1 is the funniest."""
    def write(n: int, name: str = "my_contest.csv") -> Path:
        path = tmp_path / name
        rows = ["caption,funny,somewhat_funny,unfunny,count"]
        for i in range(n):
            f, s, u = 5 + i, 20, 75 - i
            rows.append(f"caption {i},{f},{s},{u},{f + s + u}")
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        return path

    return write
