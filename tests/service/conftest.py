"""Fixtures: a storage URL parametrised over SQLite (per-test file) and PostgreSQL (per-test database)."""

from __future__ import annotations

import os

import pytest

from purebandits.testing.postgres import PostgresUnavailable, create_database, drop_database, temporary_postgres

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_admin_url():
    """Admin URL of a PostgreSQL server: PUREBANDITS_TEST_PG_URL, else a throwaway local cluster."""
    url = os.environ.get("PUREBANDITS_TEST_PG_URL")
    if url:
        yield url
        return
    try:
        cm = temporary_postgres()
        url = cm.__enter__()
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    try:
        yield url
    finally:
        cm.__exit__(None, None, None)


def _url(backend: str, request, tmp_path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'service.sqlite'}"
    admin = request.getfixturevalue("pg_admin_url")
    url = create_database(admin)
    request.addfinalizer(lambda: drop_database(admin, url))
    return url


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """A fresh, empty database per test: SQLite file or PostgreSQL database."""
    if request.param == "postgres":
        request.node.add_marker(pytest.mark.postgres)
    return _url(request.param, request, tmp_path)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'service.sqlite'}"
