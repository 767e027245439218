"""Keep the KL learners of existing experiments on the bound they ran with.

lil-KLUCB and KL-RandLUCB took ``form="simplified"`` (TNM17's L'/U') by default until the library's
default became the exact eqs. (2)-(3) form (``tnm17_bounds`` in docs/REPRODUCTION.md). A learner is
rebuilt from its stored parameters and replayed against its event log, which holds the items it
asked for; rebuilt with the new default it would ask for other items and its log would no longer
replay. This migration writes ``form="simplified"`` into the stored parameters of every such
learner that does not name a form, which is what it ran with (the service stores the form
explicitly from now on). Downgrading leaves the parameters as they are: naming the old default is
still correct for the old code.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: the learners whose default ``form`` changed, and the form they ran with before
KL_LEARNERS = ("lil_kl_ucb", "kl_rand_lucb")
FORMER_DEFAULT = "simplified"


def upgrade() -> None:
    """Name the former default form in every KL learner's parameters that names none."""
    conn = op.get_bind()
    learners = sa.table("learners", sa.column("experiment_id", sa.Integer), sa.column("idx", sa.Integer),
                        sa.column("algorithm", sa.String), sa.column("params", sa.JSON))
    rows = conn.execute(sa.select(learners.c.experiment_id, learners.c.idx, learners.c.params)
                        .where(learners.c.algorithm.in_(KL_LEARNERS))).all()
    for r in rows:
        params = dict(r.params or {})
        if "form" in params:
            continue
        params["form"] = FORMER_DEFAULT
        conn.execute(learners.update().where(learners.c.experiment_id == r.experiment_id, learners.c.idx == r.idx)
                     .values(params=params))


def downgrade() -> None:
    """Nothing to undo (see the module docstring)."""
