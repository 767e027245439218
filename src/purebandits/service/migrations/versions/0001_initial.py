"""Initial schema: experiments, items, participants, queries, events, snapshots.

Revision ID: 0001
Revises:
Create Date: 2024-06-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the six tables with named keys and constraints, and the index for finding expired queries."""
    op.create_table(
        "experiments",
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
        sa.PrimaryKeyConstraint("id", name="pk_experiments"),
    )
    op.create_table(
        "items",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("arm", sa.Integer, nullable=False),
        sa.Column("external_id", sa.String(200), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("image_url", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("experiment_id", "arm", name="pk_items"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_items_experiment_id_experiments"),
        sa.UniqueConstraint("experiment_id", "external_id", name="uq_items_experiment_external"),
    )
    op.create_table(
        "participants",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_participants"),
    )
    op.create_table(
        "queries",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("participant_id", sa.String(36), nullable=False),
        sa.Column("arm", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("answered_ms", sa.BigInteger, nullable=True),
        sa.Column("label", sa.String(100), nullable=True),
        sa.Column("reward", sa.Float, nullable=True),
        sa.Column("ask_seq", sa.BigInteger, nullable=False),
        sa.Column("end_seq", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_queries"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_queries_experiment_id_experiments"),
        sa.ForeignKeyConstraint(["participant_id"], ["participants.id"],
                                name="fk_queries_participant_id_participants"),
    )
    op.create_index("ix_queries_experiment_status_expires", "queries", ["experiment_id", "status", "expires_ms"])
    op.create_table(
        "events",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("query_id", sa.String(36), nullable=False),
        sa.Column("arm", sa.Integer, nullable=False),
        sa.Column("label", sa.String(100), nullable=True),
        sa.Column("reward", sa.Float, nullable=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "seq", name="pk_events"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_events_experiment_id_experiments"),
        sa.UniqueConstraint("query_id", "kind", name="uq_events_query_kind"),
    )
    op.create_table(
        "snapshots",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name="pk_snapshots"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_snapshots_experiment_id_experiments"),
    )


def downgrade() -> None:
    """Drop every table, dependents first."""
    for table in ("snapshots", "events", "queries", "participants", "items", "experiments"):
        op.drop_table(table)
