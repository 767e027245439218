"""Database tables (SQLAlchemy Core), the same schema on SQLite and PostgreSQL.

The ``events`` table is the append-only log and the source of truth: every ``ask`` (a query
issued), ``answer`` (a label received, with its reward) and ``cancel`` (a query expired) of an
experiment, numbered ``seq = 1, 2, ...`` in the order they were applied to the learner. The
learner's state is a function of the experiment's seed and this log; ``experiments.version``
is the last ``seq`` and ``snapshots`` holds a cached ``state_dict`` at some version.
``queries`` holds each issued query's current status for fast look-ups.

Times are integer epoch milliseconds (portable arithmetic for the dashboard's time buckets).
Schema changes go through Alembic migrations in ``purebandits/service/migrations``.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["metadata", "experiments", "items", "participants", "queries", "events", "snapshots"]

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("algorithm", sa.String(64), nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("n_arms", sa.Integer, nullable=False),
    sa.Column("labels", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("owner_token_hash", sa.String(64), nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("query_expiry_seconds", sa.Float, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

items = sa.Table(
    "items",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("arm", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(200), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("image_url", sa.Text, nullable=True),
    sa.UniqueConstraint("experiment_id", "external_id", name="uq_items_experiment_external"),
)

participants = sa.Table(
    "participants",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

queries = sa.Table(
    "queries",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False),
    sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), nullable=False),
    sa.Column("arm", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # pending / answered / expired
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("answered_ms", sa.BigInteger, nullable=True),
    sa.Column("label", sa.String(100), nullable=True),
    sa.Column("reward", sa.Float, nullable=True),
    sa.Column("ask_seq", sa.BigInteger, nullable=False),
    sa.Column("end_seq", sa.BigInteger, nullable=True),
    sa.Index("ix_queries_experiment_status_expires", "experiment_id", "status", "expires_ms"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.String(8), nullable=False),  # ask / answer / cancel
    sa.Column("query_id", sa.String(36), nullable=False),
    sa.Column("arm", sa.Integer, nullable=False),
    sa.Column("label", sa.String(100), nullable=True),
    sa.Column("reward", sa.Float, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    # a query is asked once and ends (answer or cancel) at most once per kind
    sa.UniqueConstraint("query_id", "kind", name="uq_events_query_kind"),
)

snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)
