"""What owners read of a pairwise experiment beyond the learner's ranking: the win matrix, Bradley-Terry strengths
and the comparisons in crowd-kit's pairwise format (:class:`PairwiseReads`, a part of
:class:`~purebandits.service.study.Study`).

The learner's ranking (``results``) already is the ranking by Borda score: under the Borda reduction an item's
rewards are Bernoulli with its Borda score as mean (:mod:`purebandits.pairwise`), so the learner's means and
intervals are the Borda scores' estimates and confidence intervals. This module adds what the comparisons say
beyond it, from the ``queries`` rows (each answered pairwise query holds its item, its opponent, the sides and,
by its reward, the winner):

- the win matrix ``W[i, j]`` (times item i beat item j), every learner's comparisons pooled unless one is asked
  for, without the answers of excluded participants (as the learners are not told them) and without skips;
- Bradley-Terry log-strengths fitted to it (:func:`purebandits.pairwise.fit_bradley_terry`), by maximum
  likelihood when the comparison graph is strongly connected, else with a ridge penalty
  :data:`DEFAULT_RIDGE_ALPHA` (the maximum likelihood does not exist then), said in ``note``;
- every comparison as crowd-kit's pairwise table (``worker``, ``left``, ``right``, ``label`` = the winner), which
  ``crowdkit.aggregation.BradleyTerry`` and ``NoisyBT`` read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from purebandits.service.errors import BadRequest, Conflict
from purebandits.service.experiment_meta import ExperimentMeta
from purebandits.service.models import exclusions, queries

__all__ = ["PairwiseReads", "DEFAULT_RIDGE_ALPHA", "PAIRS_COLUMNS", "win_matrix"]

#: the ridge penalty of a Bradley-Terry fit on a comparison graph that is not strongly connected: a Gaussian prior
#: N(0, 1 / alpha) on each log-strength, standard deviation about 3.2 (a strength ratio of e^3.2 = 25 per
#: standard deviation), weak enough not to reorder well-separated items and enough to keep every strength finite
DEFAULT_RIDGE_ALPHA = 0.1
#: crowd-kit's pairwise format: the worker, the two items as shown, and the winner
PAIRS_COLUMNS = ["worker", "left", "right", "label"]


def win_matrix(conn: Connection, eid: int, n_arms: int, idx: int | None = None) -> np.ndarray:
    """``W[i, j]``: how many answered comparisons of experiment ``eid`` item i won against item j (learner ``idx``'s
    only, if given), counted in the database; skips and excluded participants' answers are left out."""
    q = queries.c
    where = [q.experiment_id == eid, q.status == "answered", q.reward.is_not(None), q.opponent.is_not(None),
             q.participant_id.not_in(sa.select(exclusions.c.participant_id).where(exclusions.c.experiment_id == eid))]
    if idx is not None:
        where.append(q.learner == idx)
    W = np.zeros((n_arms, n_arms), dtype=np.int64)
    for arm, opponent, reward, count in conn.execute(
            sa.select(q.arm, q.opponent, q.reward, sa.func.count()).where(*where)
            .group_by(q.arm, q.opponent, q.reward)):
        if float(reward) > 0.5:
            W[arm, opponent] += count
        else:
            W[opponent, arm] += count
    return W


class PairwiseReads:
    """Win matrix, Bradley-Terry strengths and crowd-kit pairs of :class:`~purebandits.service.study.Study`."""

    def _pairwise_meta(self, eid: int) -> ExperimentMeta:
        meta = self.meta(eid)
        if not meta.pairwise:
            raise Conflict(f"experiment {eid} asks for ratings, not comparisons: this report is for pairwise "
                           "experiments ('query': 'pairwise')")
        return meta

    def wins(self, eid: int, learner: str | None = None) -> np.ndarray:
        """The win matrix of a pairwise experiment (:func:`win_matrix`; ``learner``'s comparisons only, if given)."""
        meta = self._pairwise_meta(eid)
        idx = None if learner is None else meta.learner_index(learner)
        with self._connect(False) as conn:
            return win_matrix(conn, eid, meta.n_arms, idx)

    def bradley_terry(self, eid: int, learner: str | None = None, alpha: float | None = None) -> dict[str, Any]:
        """Bradley-Terry log-strengths (mean 0) fitted to the win matrix, with the comparison graph's connectivity.

        ``alpha`` None: maximum likelihood (alpha 0) when the comparison graph is strongly connected, else the
        ridge penalty :data:`DEFAULT_RIDGE_ALPHA` with a ``note`` that says so; a given ``alpha`` is used as is
        (0 on a graph that is not strongly connected: 409, the maximum does not exist). 409 before the first
        comparison. Items ranked by strength, each with its wins, losses and win rate."""
        # SciPy and numba: loaded on first use, not in every worker (tests/service/test_deployment.py)
        from purebandits.pairwise import ComparisonGraphError, comparison_graph_components, fit_bradley_terry

        meta = self._pairwise_meta(eid)
        if alpha is not None and not (np.isfinite(alpha) and alpha >= 0):
            raise BadRequest(f"alpha must be a number >= 0, got {alpha!r}")
        W = self.wins(eid, learner)
        n_comparisons = int(W.sum())
        if n_comparisons == 0:
            raise Conflict("no comparisons yet: there is nothing to fit")
        components, _labels = comparison_graph_components(W)
        connected = components == 1
        note = None
        if alpha is None:
            alpha = 0.0 if connected else DEFAULT_RIDGE_ALPHA
            if not connected:
                note = (f"the comparison graph has {components} strongly connected components (some items never "
                        "lost, or never won, against the rest), so the maximum-likelihood strengths do not exist; "
                        f"fitted with a ridge penalty alpha = {alpha:g} (a N(0, {1 / alpha:g}) prior on each "
                        "log-strength), which shrinks them towards 0")
        try:
            theta = fit_bradley_terry(W, alpha=float(alpha))
        except ComparisonGraphError as exc:
            raise Conflict(str(exc)) from None
        wins, losses = W.sum(axis=1), W.sum(axis=0)
        order = np.lexsort((np.arange(meta.n_arms), -theta))
        rows = []
        for rank, a in enumerate(order, start=1):
            played = int(wins[a] + losses[a])
            rows.append({"rank": rank, "arm": int(a), "id": meta.items[a]["id"], "text": meta.items[a]["text"],
                         "log_strength": float(theta[a]), "wins": int(wins[a]), "losses": int(losses[a]),
                         "win_rate": float(wins[a] / played) if played else None})
        return {"experiment_id": eid, "learner": learner,
                "pooled": [ls.label for ls in meta.learners if learner is None or ls.label == learner],
                "n_comparisons": n_comparisons, "components": int(components), "strongly_connected": connected,
                "alpha": float(alpha), "note": note, "items": rows}

    def export_wins(self, eid: int, learner: str | None = None) -> list[list[Any]]:
        """The win matrix as CSV rows, as :func:`purebandits.pairwise.win_matrix_frame` writes it: a header
        ``winner, <item ids>``, then per item its id and its wins against each item (row: winner, column: loser)."""
        meta = self._pairwise_meta(eid)
        W = self.wins(eid, learner)
        ids = [item["id"] for item in meta.items]
        return [["winner", *ids], *([ids[i], *map(int, W[i])] for i in range(meta.n_arms))]

    def export_pairs(self, eid: int) -> Iterator[list[Any]]:
        """Every comparison answered (skips left out), in crowd-kit's pairwise format (:data:`PAIRS_COLUMNS`): the
        participant, the items as shown left and right, and the winner. Excluded participants' answers are kept (the
        table is raw data, as ``answers.csv``); read as they are consumed, in one transaction."""
        meta = self._pairwise_meta(eid)
        ids = [item["id"] for item in meta.items]
        q = queries.c

        def rows() -> Iterator[list[Any]]:
            yield PAIRS_COLUMNS
            with self._connect(False) as conn:
                result = conn.execute(
                    sa.select(q.participant_id, q.arm, q.opponent, q.left_arm, q.reward)
                    .where(q.experiment_id == eid, q.status == "answered", q.reward.is_not(None),
                           q.opponent.is_not(None))
                    .order_by(q.answered_ms, q.learner, q.end_seq).execution_options(yield_per=2000))
                for pid, arm, opponent, left, reward in result:
                    right = arm + opponent - left
                    yield [pid, ids[left], ids[right], ids[arm if float(reward) > 0.5 else opponent]]

        return rows()
