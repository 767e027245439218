"""Restricted asks: an ask's event keeps the items its participant could not be given.

The service now asks a learner for its most useful item among those a participant may rate
(``Learner.ask(1, allowed=...)``) instead of walking its candidates. Replay must ask with the same
restriction, so each ask's event stores the excluded items in ``events.excluded`` ("3,5"; null for
an unrestricted ask). Existing logs keep replaying as they were written (``passed``); nothing of
them is rewritten.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``events.excluded`` column."""
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("excluded", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop it (older code cannot replay logs with restricted asks: downgrade only before any)."""
    with op.batch_alter_table("events") as batch:
        batch.drop_column("excluded")
