"""The results over time, and what happens when every learner has stopped.

``history`` keeps, every ``history_every`` answers of each learner and when it stops, its
leaders with their intervals and its stopping progress (written in the transaction of the
answer that crossed the mark). ``experiments`` gains ``auto_stop`` (stop the experiment when
every learner has stopped) and the owner's webhook: its URL, when a server process claimed the
call (one call per experiment), and what it got back. Experiments from before get history from
their next mark on.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``history`` and add the on-done columns."""
    op.create_table(
        "history",
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("learner", sa.Integer, primary_key=True),
        sa.Column("n_answers", sa.BigInteger, primary_key=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.Column("fraction", sa.Float, nullable=False),
        sa.Column("margin", sa.Float, nullable=True),
        sa.Column("leaders", sa.JSON, nullable=False),
    )
    # plain ALTER TABLE ... ADD COLUMN, also on SQLite: a batch "move and copy" would drop and recreate
    # ``experiments``, and with foreign keys on, dropping it cascades to every child row
    op.add_column("experiments", sa.Column("auto_stop", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("experiments", sa.Column("webhook_url", sa.Text, nullable=True))
    op.add_column("experiments", sa.Column("webhook_ms", sa.BigInteger, nullable=True))
    op.add_column("experiments", sa.Column("webhook_status", sa.Integer, nullable=True))
    op.add_column("experiments", sa.Column("webhook_error", sa.String(300), nullable=True))


def downgrade() -> None:
    """Drop them."""
    for name in ("webhook_error", "webhook_status", "webhook_ms", "webhook_url", "auto_stop"):
        op.drop_column("experiments", name)
    op.drop_table("history")
