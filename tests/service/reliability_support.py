"""Import the reliability harness (``benchmarks/reliability``) into the tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HARNESS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "reliability"
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

import crash  # noqa: E402
import harness  # noqa: E402

__all__ = ["crash", "harness", "pg_cluster"]


def pg_cluster() -> harness.PgCluster:
    """A private PostgreSQL cluster the test may crash (skips when PostgreSQL is not installed)."""
    from purebandits.testing.postgres import PostgresUnavailable

    try:
        return harness.PgCluster()
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
