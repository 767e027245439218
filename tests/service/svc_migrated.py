"""A fresh SQLite database already migrated to head, by copying one made once per process.

``open_study`` on a new file runs every Alembic migration (about 0.08 s of a core); on a copy of a file that
is at head it only checks the revision (about 0.014 s). The copy is the file a first ``open_study`` leaves
(the same schema, the WAL journal mode stored in its header, no rows), so a test given it starts from the same
empty database; the migrations themselves are checked by ``test_migrations_match_models`` (on new files).

:func:`sqlite_url` and :func:`db_url` are the fixtures of the modules that take them (``sqlite_url =
svc_migrated.sqlite_url`` at their top level overrides conftest's fixture of that name for their tests); a module
that checks the migrations of a new file (test_study.py) keeps conftest's ``db_url``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
from study_support import open_study

from purebandits.testing.postgres import create_database, drop_database

_TEMPLATE: list[Path] = []


def fresh_sqlite_url(tmp_path: Path) -> str:
    """``sqlite:///`` URL of ``tmp_path / 'service.sqlite'``: an empty database migrated to head."""
    if not _TEMPLATE:
        where = Path(tempfile.mkdtemp(prefix="svc-migrated-"))
        atexit.register(shutil.rmtree, where, True)
        study = open_study(f"sqlite:///{where / 'empty.sqlite'}")
        study.engine.dispose()  # the last connection closed: the WAL is checkpointed into the file and removed
        assert not (where / "empty.sqlite-wal").exists()
        _TEMPLATE.append(where / "empty.sqlite")
    dst = tmp_path / "service.sqlite"
    shutil.copyfile(_TEMPLATE[0], dst)
    return f"sqlite:///{dst}"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """conftest's per-test SQLite file, already migrated (a copy, see :func:`fresh_sqlite_url`); the migrations
    of a new file are checked by ``test_migrations_match_models``, on ``db_url``."""
    return fresh_sqlite_url(tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """conftest's ``db_url`` (a fresh, empty database per test: SQLite file or PostgreSQL database, the same
    parameters and ids) with the SQLite file already migrated (a copy, see :func:`fresh_sqlite_url`)."""
    if request.param == "sqlite":
        return fresh_sqlite_url(tmp_path)
    request.node.add_marker(pytest.mark.postgres)
    admin = request.getfixturevalue("pg_admin_url")
    url = create_database(admin)
    request.addfinalizer(lambda: drop_database(admin, url))
    return url
