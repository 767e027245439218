"""A downgrade below the webhook secret keeps every experiment's rows (on SQLite a batch rebuild of the
experiments table, with foreign keys on, cascaded into its items and learners: 10 items became 0)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from study_support import open_study

from purebandits.service.storage import _alembic_config, upgrade


def _migrate(engine: sa.Engine, step: str, revision: str) -> None:
    cfg = _alembic_config(engine)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, step)(cfg, revision)
        conn.commit()


def _counts(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (conn.execute(sa.text("SELECT count(*) FROM items")).scalar_one(),
                conn.execute(sa.text("SELECT count(*) FROM learners")).scalar_one())


def test_downgrade_below_the_webhook_secret_keeps_the_experiments(db_url):
    study = open_study(db_url)
    study.create_experiment({"name": "kept", "items": [{"id": str(i), "text": f"caption {i}"} for i in range(10)]})
    engine = study.engine
    before = _counts(engine)
    assert before == (10, 1)
    _migrate(engine, "downgrade", "0007")
    assert _counts(engine) == before
    upgrade(engine)
    assert _counts(engine) == before
