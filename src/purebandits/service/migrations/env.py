"""Alembic environment: uses the connection handed over by ``storage.upgrade`` (or the URL)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from purebandits.service.models import metadata

config = context.config


def run() -> None:
    """Run the migrations on the connection ``storage.upgrade`` hands over (else on the configured URL), in batch
    mode so that SQLite can alter tables."""
    conn = config.attributes.get("connection")
    if conn is not None:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = sa.create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run()
