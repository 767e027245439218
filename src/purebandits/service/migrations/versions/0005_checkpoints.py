"""Verified checkpoints: a restart replays only the events after each learner's last verified state.

``checkpoints`` keeps per learner a state that a replay of the event log computed (from the start,
or from the previous checkpoint), with its SHA-256 (storage corruption of the checkpoint itself is
detected and falls back to a full replay). Startup verification replays from it instead of from
the start. Experiments from before have none: their first verification replays the whole log
(as every start did before) and writes one.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``checkpoints`` (a new table only: nothing of the others is rewritten)."""
    op.create_table(
        "checkpoints",
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("learner", sa.Integer, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("claim_ms", sa.BigInteger, nullable=True),
    )


def downgrade() -> None:
    """Drop it (the next start of older code replays every log in full, as it always did)."""
    op.drop_table("checkpoints")
