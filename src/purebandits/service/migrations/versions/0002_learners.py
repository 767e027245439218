"""Several learners per experiment, each with its own event log; context, repeat policy, images.

Moves an experiment's algorithm, parameters, seed and version into ``learners`` (one row,
``idx = 0``, for every existing experiment), numbers events and snapshots per learner, tags
queries with their learner, and adds the organizer's settings (instructions, repeat policy,
answers per participant, the completion-code key), ``events.passed`` (the candidates an ask
passed over for its participant) and the ``images`` table.

``experiments`` keeps its rows in place (its columns are dropped with ``ALTER TABLE ... DROP
COLUMN``, which SQLite has since 3.35): rebuilding it would, with SQLite's foreign keys on,
cascade-delete every child row. ``events`` and ``snapshots`` change their primary keys, which
SQLite can only do by rebuilding them (batch mode); nothing references them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _label(algorithm: str) -> str:
    """The learner's class name (as NEXT named its algorithms), else its registry name."""
    try:
        from purebandits.registry import get_learner_class

        return get_learner_class(algorithm).__name__
    except (ImportError, ValueError):
        return algorithm[:40]


def upgrade() -> None:
    """Create ``learners`` and ``images``, move each experiment's learner into ``learners``, add the learner
    column to events, snapshots and queries, and the organizer's settings to experiments."""
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    op.create_table(
        "learners",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("label", sa.String(40), nullable=False),
        sa.Column("algorithm", sa.String(64), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("share", sa.Float, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("done_ms", sa.BigInteger, nullable=True),
        sa.Column("done_answers", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("experiment_id", "idx", name="pk_learners"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_learners_experiment_id_experiments"),
        sa.UniqueConstraint("experiment_id", "label", name="uq_learners_experiment_label"),
    )
    op.create_table(
        "images",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column("content_type", sa.String(32), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name="pk_images"),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_images_experiment_id_experiments"),
    )
    old = sa.table("experiments", sa.column("id", sa.Integer), sa.column("algorithm", sa.String),
                   sa.column("params", sa.JSON), sa.column("seed", sa.BigInteger), sa.column("version", sa.BigInteger))
    rows = conn.execute(sa.select(old.c.id, old.c.algorithm, old.c.params, old.c.seed, old.c.version)).all()
    learners = sa.table("learners", *(sa.column(c) for c in ("experiment_id", "idx", "label", "algorithm", "share",
                                                               "seed", "version")), sa.column("params", sa.JSON))
    if rows:
        op.bulk_insert(learners, [
            {"experiment_id": r.id, "idx": 0, "label": _label(r.algorithm), "algorithm": r.algorithm,
             "params": r.params, "share": 1.0, "seed": r.seed, "version": r.version} for r in rows
        ])

    op.add_column("experiments", sa.Column("instructions", sa.Text, nullable=True))
    op.add_column("experiments", sa.Column("repeats", sa.String(16), nullable=False, server_default="never"))
    op.add_column("experiments", sa.Column("answers_per_participant", sa.Integer, nullable=True))
    op.add_column("experiments", sa.Column("code_secret", sa.String(64), nullable=True))
    exp = sa.table("experiments", sa.column("id", sa.Integer), sa.column("code_secret", sa.String))
    for r in rows:
        conn.execute(exp.update().where(exp.c.id == r.id).values(code_secret=secrets.token_hex(32)))
    for col in ("algorithm", "params", "seed", "version"):
        op.execute(f"ALTER TABLE experiments DROP COLUMN {col}")

    learner_col = lambda: sa.Column("learner", sa.Integer, nullable=False, server_default="0")  # noqa: E731
    if sqlite:
        for table, pk in (("events", ["experiment_id", "learner", "seq"]), ("snapshots", ["experiment_id", "learner"])):
            with op.batch_alter_table(table, recreate="always") as batch:
                batch.add_column(learner_col(), insert_after="experiment_id")
                if table == "events":
                    batch.add_column(sa.Column("passed", sa.Text, nullable=True))
                batch.drop_constraint(f"pk_{table}", type_="primary")
                batch.create_primary_key(f"pk_{table}", pk)
    else:
        for table, pk in (("events", ["experiment_id", "learner", "seq"]), ("snapshots", ["experiment_id", "learner"])):
            op.add_column(table, learner_col())
            if table == "events":
                op.add_column(table, sa.Column("passed", sa.Text, nullable=True))
            op.drop_constraint(f"pk_{table}", table, type_="primary")
            op.create_primary_key(f"pk_{table}", table, pk)
    op.add_column("queries", learner_col())
    op.create_index("ix_queries_experiment_participant", "queries", ["experiment_id", "participant_id"])


def downgrade() -> None:
    """Not supported: experiments with several learners have no single-learner form."""
    raise NotImplementedError("revision 0002 cannot be downgraded; restore a backup taken before upgrading")
