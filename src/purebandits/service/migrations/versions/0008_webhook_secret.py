"""Signed webhooks: each experiment's webhook gets a secret that keys its calls' signatures.

``experiments.webhook_secret`` (random, shown once to the owner when the URL is set) keys the HMAC-SHA256
in each call's ``X-Purebandits-Signature``. It is stored as is, not hashed: the server must compute the
HMAC. A webhook set before this revision has none and is called unsigned until its URL is set again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``experiments.webhook_secret`` column."""
    op.add_column("experiments", sa.Column("webhook_secret", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop it (calls are unsigned again). A plain ``DROP COLUMN`` (SQLite 3.35+), as 0004 does: a batch
    rebuild of ``experiments`` on SQLite, with foreign keys on, cascaded into every experiment's rows."""
    op.drop_column("experiments", "webhook_secret")
