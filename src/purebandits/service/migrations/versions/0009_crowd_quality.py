"""The crowd and rater quality: skip, crowd platforms, gold items, excluded participants.

``experiments.crowd`` holds an experiment's crowd settings (skip button, completion URL, gold items and their
positions); ``gold_queries`` the gold items shown to participants and their answers; ``platform_sessions`` how
participants came from Prolific or Mechanical Turk; ``exclusions`` the participants an owner excluded (each
change is also an ``exclude`` / ``include`` event in the learners' logs). Skips need no schema change: a
skipped query is answered with the label ``skip`` and no reward, and logged as a ``skip`` event.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``experiments.crowd`` column and the three tables."""
    op.add_column("experiments", sa.Column("crowd", sa.JSON, nullable=True))
    op.create_table(
        "gold_queries",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False),
        sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), nullable=False),
        sa.Column("gold", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("answered_ms", sa.BigInteger, nullable=True),
        sa.Column("label", sa.String(100), nullable=True),
        sa.UniqueConstraint("experiment_id", "participant_id", "position", name="uq_gold_queries_position"),
    )
    op.create_table(
        "platform_sessions",
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), primary_key=True),
        sa.Column("session", sa.String(100), primary_key=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("study", sa.String(100), nullable=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "exclusions",
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("participant_id", sa.String(36), primary_key=True),
        sa.Column("changed_ms", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    """Drop them (older code cannot replay logs with ``skip``, ``exclude`` or ``include`` events)."""
    op.drop_table("exclusions")
    op.drop_table("platform_sessions")
    op.drop_table("gold_queries")
    op.drop_column("experiments", "crowd")
