"""Database tables (SQLAlchemy Core), the same schema on SQLite and PostgreSQL.

The ``events`` table is the append-only log and the source of truth: every ``ask`` (a query
issued, with the items its participant could not be given), ``answer`` (a label received,
with its reward), ``cancel`` (a query expired) and, in logs from before restricted asks,
``pass`` (an ask that found nothing the participant could see) of each learner of an experiment,
numbered ``seq = 1, 2, ...`` per learner in the order they were applied to it. A learner's
state is a function of its seed and its log; ``learners.version`` is the last
``seq`` and ``snapshots`` holds a cached ``state_dict`` per learner at some version.
``queries`` holds each issued query's current status for fast look-ups. ``checkpoints`` holds per learner
its *verified* state: one obtained by replaying the log (from the start, or from the previous verified
checkpoint), with its SHA-256, so a restart replays only the events after it.

Times are integer epoch milliseconds (portable arithmetic for the dashboard's time buckets).
Schema changes go through Alembic migrations in ``purebandits/service/migrations``.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["metadata", "experiments", "learners", "items", "images", "participants", "queries", "events", "history",
           "snapshots", "checkpoints", "gold_queries", "platform_sessions", "exclusions"]

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("n_arms", sa.Integer, nullable=False),
    sa.Column("labels", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # active / paused / stopped / archived
    sa.Column("owner_token_hash", sa.String(64), nullable=False),
    sa.Column("query_expiry_seconds", sa.Float, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("instructions", sa.Text, nullable=True),
    sa.Column("repeats", sa.String(16), nullable=False, server_default="never"),
    sa.Column("answers_per_participant", sa.Integer, nullable=True),
    sa.Column("code_secret", sa.String(64), nullable=True),  # keys the completion codes (HMAC)
    sa.Column("origin", sa.String(32), nullable=True),  # keyed hash of the creator's address (rate limit)
    # when every learner has stopped: stop the experiment too, and/or POST to the owner's webhook once
    sa.Column("auto_stop", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("webhook_url", sa.Text, nullable=True),
    sa.Column("webhook_ms", sa.BigInteger, nullable=True),  # when a process claimed the call (at most one does)
    sa.Column("webhook_status", sa.Integer, nullable=True),  # the HTTP status it got, or NULL
    sa.Column("webhook_error", sa.String(300), nullable=True),
    sa.Column("webhook_secret", sa.String(64), nullable=True),  # keys the calls' signatures (HMAC); shown once
    # the crowd's settings (CrowdSettings.to_json: skip, completion URL, gold items and their positions)
    sa.Column("crowd", sa.JSON, nullable=True),
    # what a query asks: "rating" (one item, one of the labels) or "pairwise" (two items, which is better: the
    # Borda reduction, purebandits.pairwise)
    sa.Column("query_kind", sa.String(16), nullable=False, server_default="rating"),
    # a staged experiment (ratings then comparisons): the parent's stage settings, or a stage 2's switch record
    sa.Column("stages", sa.JSON, nullable=True),
    # a stage 2 experiment: the experiment whose stage 1 started it (at most one; deleted with it)
    sa.Column("stage_of", sa.Integer, nullable=True),
    sa.Index("ix_experiments_origin_created", "origin", "created_ms"),
    sa.Index("ix_experiments_stage_of", "stage_of", unique=True),
)

# One learner of an experiment (several run side by side, each with its own event log):
# participants are assigned to one by ``share``; ``version`` is the last ``seq`` of its log.
learners = sa.Table(
    "learners",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("label", sa.String(40), nullable=False),
    sa.Column("algorithm", sa.String(64), nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("share", sa.Float, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("done_ms", sa.BigInteger, nullable=True),  # when its stopping rule fired
    sa.Column("done_answers", sa.BigInteger, nullable=True),  # after how many of its answers
    sa.UniqueConstraint("experiment_id", "label", name="uq_learners_experiment_label"),
)

images = sa.Table(
    "images",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("content_type", sa.String(32), nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

items = sa.Table(
    "items",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("arm", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(200), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("image_url", sa.Text, nullable=True),
    sa.UniqueConstraint("experiment_id", "external_id", name="uq_items_experiment_external"),
)

participants = sa.Table(
    "participants",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("origin", sa.String(32), nullable=True),  # keyed hash of the registering address (rate limit)
    sa.Index("ix_participants_origin_created", "origin", "created_ms"),
)

queries = sa.Table(
    "queries",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False),
    sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), nullable=False),
    sa.Column("learner", sa.Integer, nullable=False, server_default="0"),
    sa.Column("arm", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # pending / answered / expired
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("answered_ms", sa.BigInteger, nullable=True),
    sa.Column("label", sa.String(100), nullable=True),
    sa.Column("reward", sa.Float, nullable=True),
    sa.Column("ask_seq", sa.BigInteger, nullable=False),
    sa.Column("end_seq", sa.BigInteger, nullable=True),
    # a pairwise query: ``arm`` is the learner's item, ``opponent`` the item drawn against it and ``left_arm`` the
    # one of the two shown on the left; the winner is ``arm`` when the reward is 1, else ``opponent`` (null in
    # rating experiments)
    sa.Column("opponent", sa.Integer, nullable=True),
    sa.Column("left_arm", sa.Integer, nullable=True),
    sa.Index("ix_queries_experiment_status_expires", "experiment_id", "status", "expires_ms"),
    sa.Index("ix_queries_experiment_participant", "experiment_id", "participant_id"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("learner", sa.Integer, primary_key=True, server_default="0"),
    sa.Column("seq", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.String(8), nullable=False),  # ask / answer / cancel / pass
    sa.Column("query_id", sa.String(36), nullable=False),
    sa.Column("arm", sa.Integer, nullable=False),
    sa.Column("label", sa.String(100), nullable=True),
    sa.Column("reward", sa.Float, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    # logs from before restricted asks: an ask's candidates passed over for its participant ("3,5"), asked
    # before it and then cancelled
    sa.Column("passed", sa.Text, nullable=True),
    # an ask among the items its participant could be given: the others ("3,5"); null for an unrestricted ask
    sa.Column("excluded", sa.Text, nullable=True),
    # a query is asked once and ends (answer or cancel) at most once per kind
    sa.UniqueConstraint("query_id", "kind", name="uq_events_query_kind"),
)

# The results over time: every ``history_every`` answers of a learner (and when it stops), its leaders
# with their intervals and its stopping progress, written in the transaction of the answer that
# crossed the mark (so a point describes exactly the state committed with it).
history = sa.Table(
    "history",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("learner", sa.Integer, primary_key=True),
    sa.Column("n_answers", sa.BigInteger, primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("fraction", sa.Float, nullable=False),
    sa.Column("margin", sa.Float, nullable=True),
    sa.Column("leaders", sa.JSON, nullable=False),  # [{rank, arm, mean, lower, upper, count}]
)

snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("learner", sa.Integer, primary_key=True, server_default="0"),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

# A learner's verified checkpoint: its state at ``version`` as a replay of the log computed it (from the start or
# from the previous checkpoint), never a state the live path wrote; ``sha256`` (of ``state``) detects storage
# corruption. ``claim_ms``: when a process claimed the replay that advances it (one process replays at a time).
checkpoints = sa.Table(
    "checkpoints",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("learner", sa.Integer, primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("claim_ms", sa.BigInteger, nullable=True),
)


# A gold item (known answer, CrowdSettings.gold) shown to a participant at one of the experiment's gold positions;
# never told to a learner. ``id`` starts with "g" (never a learner query's UUID), ``gold`` is the gold item's index.
gold_queries = sa.Table(
    "gold_queries",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False),
    sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), nullable=False),
    sa.Column("gold", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),  # the participant's session position it was shown at
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("answered_ms", sa.BigInteger, nullable=True),
    sa.Column("label", sa.String(100), nullable=True),
    sa.UniqueConstraint("experiment_id", "participant_id", "position", name="uq_gold_queries_position"),
)

# How a participant came from a crowd platform: Prolific's STUDY_ID and SESSION_ID, or MTurk's hitId and
# assignmentId, per experiment (a worker may come back in another session).
platform_sessions = sa.Table(
    "platform_sessions",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("participant_id", sa.String(36), sa.ForeignKey("participants.id"), primary_key=True),
    sa.Column("session", sa.String(100), primary_key=True),  # SESSION_ID / assignmentId
    sa.Column("platform", sa.String(16), nullable=False),  # prolific / mturk
    sa.Column("study", sa.String(100), nullable=True),  # STUDY_ID / hitId
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

# The participants an owner excluded (the current state; each change is also an ``exclude`` / ``include``
# event in every learner's log, which is what replay reads).
exclusions = sa.Table(
    "exclusions",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("participant_id", sa.String(36), primary_key=True),
    sa.Column("changed_ms", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.String(200), nullable=True),
)
