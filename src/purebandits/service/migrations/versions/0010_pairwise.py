"""Pairwise experiments: which of two items is better, through the Borda reduction.

``experiments.query_kind`` says what an experiment's queries ask: ``rating`` (every experiment before this
revision) or ``pairwise``. A pairwise query's ``queries`` row keeps the item drawn against the learner's item
(``opponent``) and the item shown on the left (``left_arm``); the winner follows from the reward. The event log
is unchanged: the learner sees only its item and the reward (1 if it won).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``experiments.query_kind`` (default ``rating``) and the nullable ``queries.opponent`` and
    ``queries.left_arm``."""
    op.add_column("experiments", sa.Column("query_kind", sa.String(16), nullable=False, server_default="rating"))
    op.add_column("queries", sa.Column("opponent", sa.Integer, nullable=True))
    op.add_column("queries", sa.Column("left_arm", sa.Integer, nullable=True))


def downgrade() -> None:
    """Drop them: pairwise experiments would then read as rating experiments, so downgrade only before any.
    Plain ``DROP COLUMN`` (SQLite 3.35+), as 0008 does: a batch rebuild of ``experiments`` on SQLite, with
    foreign keys on, would cascade into every experiment's rows."""
    op.drop_column("queries", "left_arm")
    op.drop_column("queries", "opponent")
    op.drop_column("experiments", "query_kind")
