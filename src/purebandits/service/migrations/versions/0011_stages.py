"""Staged experiments: ratings over every item, then comparisons among stage 1's top m.

``experiments.stages`` holds a staged experiment's stage settings (on the experiment participants use, stage 1)
or, on the stage 2 experiment created at the switch, what the switch decided (its items, whether stage 1 had
stopped proven); ``experiments.stage_of`` points a stage 2 experiment at its stage 1 (unique: one switch each).
The event log is unchanged.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``experiments.stages`` (JSON) and ``experiments.stage_of`` with its unique index."""
    op.add_column("experiments", sa.Column("stages", sa.JSON, nullable=True))
    op.add_column("experiments", sa.Column("stage_of", sa.Integer, nullable=True))
    op.create_index("ix_experiments_stage_of", "experiments", ["stage_of"], unique=True)


def downgrade() -> None:
    """Drop them: a staged experiment would then read as a rating experiment and its stage 2 as a pairwise one of
    its own, so downgrade only before any. Plain ``DROP COLUMN`` (SQLite 3.35+), as 0010 does."""
    op.drop_index("ix_experiments_stage_of", table_name="experiments")
    op.drop_column("experiments", "stage_of")
    op.drop_column("experiments", "stages")
