"""Where participants and experiments came from, for rate limits every server process shares.

``participants.origin`` and ``experiments.origin`` hold a keyed hash of the client address that
registered the id or created the experiment (never the address itself), indexed with
``created_ms``, so every worker process counts the same recent registrations per address
(:meth:`purebandits.service.study.Study.new_participant`). Rows from before are NULL and count
for nobody.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the origin columns and their indexes."""
    for table in ("participants", "experiments"):
        op.add_column(table, sa.Column("origin", sa.String(32), nullable=True))
        op.create_index(f"ix_{table}_origin_created", table, ["origin", "created_ms"])


def downgrade() -> None:
    """Drop them."""
    for table in ("participants", "experiments"):
        op.drop_index(f"ix_{table}_origin_created", table_name=table)
        op.drop_column(table, "origin")
