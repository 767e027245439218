"""Owner endpoints: create, list, inspect, pause / resume / stop / archive, delete, results, certificate, exports.

Every endpoint but create and list needs the experiment's owner token (or the admin token);
create and list need the admin token when the server has one. They run through the app's
:class:`~purebandits.service.dispatch.Dispatcher` (:func:`~purebandits.service.dispatch.bounded`), so a
hung database answers them with 503 and ``Retry-After`` within the bound.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import Field

from purebandits.service.deps import EidPath, StudyDep, TokenDep
from purebandits.service.dispatch import bounded
from purebandits.service.errors import RateLimited
from purebandits.service.schemas import (
    ActivityOut,
    Deleted,
    ExclusionIn,
    ExclusionOut,
    ExperimentCreate,
    ExperimentCreated,
    ExperimentInfo,
    ExperimentList,
    HistoryOut,
    LearnerState,
    OnDoneIn,
    OnDoneSetOut,
    ParticipantsOut,
    StatusOut,
    error_responses,
)
from purebandits.service.spool import Spool, spooled_bytes
from purebandits.service.validation import MAX_SKIPPED_LINES, item_intake

router = APIRouter(prefix="/api/experiments", tags=["owners"], responses=error_responses(400, 401, 404, 413, 422, 503))

#: which learner of the experiment (its label); default the first
LearnerQuery = Annotated[str | None, Query(max_length=40, description="a learner's label (default: the first)")]


def base_url(request: Request) -> str:
    """The configured ``Settings.public_url`` without trailing slash, or "" (root-relative links), for the links
    in responses; never the request's ``Host`` header, which a client (or a poisoned proxy cache) chooses."""
    return (request.app.state.settings.public_url or "").rstrip("/")


class ExperimentIntake(ExperimentCreate):
    """A new experiment, its items also as an items file's bytes (what the /new form sends) and with blank rows
    left out on request."""

    items_csv_base64: str | None = Field(
        None, description="the items file's bytes, base64-encoded: UTF-8 CSV (a byte-order mark is fine; other "
        "encodings are refused with the line and byte), read as items_csv")
    skip_blank: bool | None = Field(
        None, description="with an items file: leave out rows whose text is blank (counted in the response) "
        "instead of refusing the file at the first one's line")


class ExperimentCreatedItems(ExperimentCreated):
    """The new experiment (id, owner token, URLs) and the number of items it was created with."""

    n_items: int = Field(..., description="items created")
    skipped_blank: int = Field(0, description="rows of the items file left out for a blank text (skip_blank)")
    skipped_blank_lines: list[int] = Field(
        default_factory=list, description=f"their file lines (the first {MAX_SKIPPED_LINES})")


@router.post("", status_code=201, response_model=ExperimentCreatedItems)
@bounded
def create_experiment(body: ExperimentIntake, study: StudyDep, token: TokenDep, request: Request) -> Any:
    """Create an experiment; the response holds the owner token (shown only once) and the number of items
    created (and of blank rows left out)."""
    study.check_admin(token, "creating experiments")
    # anyone may create when the server has no admin token: then creates are limited per client address
    origin = None if study.settings.admin_token else (request.client.host if request.client else "unknown")
    spec = body.to_spec()
    eid, owner_token = study.create_experiment(spec, origin)
    base = base_url(request)
    # the counts from the items as the create read them (a second read of a valid spec: milliseconds for a
    # contest's thousands of captions)
    return {"id": eid, "owner_token": owner_token, "participant_url": f"{base}/rate/{eid}",
            "dashboard_url": f"{base}/dashboard/{eid}#token={owner_token}", **item_intake(spec)}


@router.get("", response_model=ExperimentList)
@bounded
def list_experiments(study: StudyDep, token: TokenDep, request: Request) -> Any:
    """Every experiment with its status, items, answers and learners (the admin token when the server has one)."""
    study.check_admin(token, "listing experiments")
    base = base_url(request)
    return {"experiments": [{**e, "participant_url": f"{base}/rate/{e['id']}",
                             "dashboard_url": f"{base}/dashboard/{e['id']}"} for e in study.list_experiments()]}


@router.get("/{eid}", response_model=ExperimentInfo)
@bounded
def get_experiment(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
    """The experiment's settings (learners with their parameters and shares, k, number of items, labels,
    instructions, repeat policy, query expiry, creation time) and its state (status, versions)."""
    study.check_owner(eid, token)
    return study.experiment_info(eid)


@router.delete("/{eid}", response_model=Deleted)
@bounded
def delete_experiment(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
    """Delete the experiment and every row of it (answers included); there is no undo. Archive keeps them."""
    study.check_owner(eid, token)
    return study.delete_experiment(eid)


_STATUS_DOC = {
    "pause": "Stop handing out queries (answers to issued queries still count).",
    "resume": "Hand out queries again after a pause.",
    "stop": "End the experiment for good (answers to issued queries still count).",
    "archive": "Make the experiment read-only: no queries, no answers, hidden from the home page; its data stays.",
}


def _status_route(name: str, status: str) -> None:
    def handler(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
        study.check_owner(eid, token)
        return study.set_status(eid, status)

    handler.__name__ = f"{name}_experiment"
    handler.__doc__ = _STATUS_DOC[name]
    router.add_api_route(f"/{{eid}}/{name}", bounded(handler), methods=["POST"], response_model=StatusOut,
                         responses=error_responses(409))


for _name, _status in (("pause", "paused"), ("resume", "active"), ("stop", "stopped"), ("archive", "archived")):
    _status_route(_name, _status)


@router.get("/{eid}/results")
@bounded
def get_results(eid: EidPath, study: StudyDep, token: TokenDep, timeline: bool = True,
                algorithm: LearnerQuery = None,
                limit: Annotated[int | None, Query(ge=1, le=100_000, description="ranking rows (default: all)")] = None,
                offset: Annotated[int, Query(ge=0, le=100_000, description="ranking rows to skip")] = 0,
                q: Annotated[str | None, Query(max_length=200, description="keep items whose text or id contains "
                                                                           "this (case-insensitive)")] = None,
                sort: Annotated[str, Query(max_length=140, description="rank, text, mean, lower, upper, count or "
                                                                       "label:<name>")] = "rank",
                order: Annotated[Literal["asc", "desc"], Query()] = "asc",
                ) -> dict[str, Any]:
    """One learner's ranking with its intervals, counts per label, stopping progress and recommendation.

    ``limit`` / ``offset`` page the ranking (``n_items`` is the number of items, ``n_matching`` of those
    matching ``q``); ``sort`` / ``order`` sort it by a column (items without a value last); each row's
    ``rank`` stays the learner's rank. ``lower`` / ``upper`` are the learner's raw bounds (they may
    leave the reward range; null where unbounded). ``stopping`` is the progress of the learner's own
    stopping rule; ``learner_done`` says when it stopped; ``on_done`` what happens then."""
    study.check_owner(eid, token)
    return study.results(eid, timeline=timeline, learner=algorithm, limit=limit, offset=offset, q=q, sort=sort,
                         order=order)


@router.get("/{eid}/history", response_model=HistoryOut)
@bounded
def get_history(eid: EidPath, study: StudyDep, token: TokenDep, algorithm: Annotated[
        str | None, Query(max_length=40, description="one learner's label (default: every learner)")] = None,
        max_points: Annotated[int, Query(ge=2, le=100_000, description="points per learner at most")] = 500) -> Any:
    """The results over time: every ``history_every`` answers of each learner (and when it stopped), its
    leaders with their means and intervals and its stopping progress. Evenly thinned to ``max_points``
    (the first point, the last and the one where it stopped are kept)."""
    study.check_owner(eid, token)
    return study.history(eid, learner=algorithm, max_points=max_points)


@router.get("/{eid}/history.csv", response_class=Response)
@bounded
def export_history(eid: EidPath, study: StudyDep, token: TokenDep, algorithm: Annotated[
        str | None, Query(max_length=40, description="one learner's label (default: every learner)")] = None,
        ) -> Response:
    """Every history point, one row per leader: ``algorithm,n_answers,time,done,stopping_fraction,
    stopping_margin,rank,item_id,arm,mean,lower,upper,answers,text``."""
    study.check_owner(eid, token)
    return _csv(study.export_history(eid, learner=algorithm), f"experiment-{eid}-history.csv")


@router.get("/{eid}/activity", response_model=ActivityOut)
@bounded
def get_activity(eid: EidPath, study: StudyDep, token: TokenDep, algorithm: LearnerQuery = None) -> Any:
    """One learner's activity: answers per time bucket, answers per item (in rank order), answers per
    participant and response times (seconds from a query's issue to its answer) as histograms."""
    study.check_owner(eid, token)
    return study.activity(eid, learner=algorithm)


@router.post("/{eid}/on-done", response_model=OnDoneSetOut, responses=error_responses(403))
@bounded
def set_on_done(eid: EidPath, body: OnDoneIn, study: StudyDep, token: TokenDep) -> Any:
    """What happens when every learner has stopped: ``auto_stop`` stops the experiment at that moment (now,
    if they have already stopped); ``webhook_url`` gets one JSON POST (``{"event": "learners_stopped",
    "experiment_id", "name", "status", "learners": [{"label", "algorithm", "stopped_at_answers",
    "stopped_at", "recommendation": [{"id", "text"}]}]}``), retried on a connection error or a 5xx.

    The URL's host must be a public address (422 otherwise, unless the server allows internal ones); 403
    when webhooks are off on the server (by default, on a server without an admin token). A new URL gets a
    new ``webhook_secret``, in this answer only, that keys each call's ``X-Purebandits-Signature``."""
    study.check_owner(eid, token)
    return study.set_on_done(eid, body.auto_stop, body.webhook_url)


@router.get("/{eid}/comparison")
@bounded
def get_comparison(eid: EidPath, study: StudyDep, token: TokenDep) -> dict[str, Any]:
    """Every learner side by side: answers, participants, whether and after how many answers it stopped, its
    top items with intervals, and the pairwise overlap of their recommended sets."""
    study.check_owner(eid, token)
    return study.comparison(eid)


@router.get("/{eid}/certificate", responses=error_responses(409))
@bounded
def get_certificate(eid: EidPath, study: StudyDep, token: TokenDep, learner: Annotated[
        str | None, Query(max_length=40, description="one learner's label (default: every learner's answers pooled)")]
        = None, rivals: Annotated[int, Query(ge=1, le=100_000, description="rival rows listed (the weakest first)")]
        = 100) -> dict[str, Any]:
    """A certificate anyone can check (what ``purebandits verify`` computes from the answers export): the K_inf GLR
    statistic of the empirical top k against every rival, from the answers alone, compared with a threshold proven
    at the error probability the owner asked (``delta``, ``delta_source``) and the experiment's k.

    ``holds`` is true when every rival is defeated (``z > beta``); then the chance that the recommendation is wrong
    and the certificate holds is at most delta, whatever the learners did and whenever it is asked. ``rivals``
    lists the weakest rivals with their exact ``z`` (``n_rivals`` counts them all); ``reasons`` say why it does not
    hold; ``explanation`` says it in one paragraph. 409 before the first answer."""
    study.check_owner(eid, token)
    return study.certificate(eid, learner=learner, max_rivals=rivals)


@router.get("/{eid}/bradley-terry", responses=error_responses(409))
@bounded
def get_bradley_terry(eid: EidPath, study: StudyDep, token: TokenDep, learner: Annotated[
        str | None, Query(max_length=40, description="one learner's label (default: every learner's comparisons "
                                                     "pooled)")] = None,
        alpha: Annotated[float | None, Query(ge=0, le=1e6, description="ridge penalty (default: 0 when the "
                                             "comparison graph is strongly connected, else 0.1)")] = None,
        ) -> dict[str, Any]:
    """A pairwise experiment's Bradley-Terry log-strengths (mean 0), fitted to its win matrix by maximum likelihood
    (``purebandits.pairwise.fit_bradley_terry``), items ranked by strength with their wins, losses and win rate.

    ``components`` counts the comparison graph's strongly connected components (an edge i -> j when i beat j):
    the maximum likelihood exists only when it is 1 (``strongly_connected``); otherwise the fit uses a ridge
    penalty (``alpha``, a N(0, 1/alpha) prior on each log-strength) and ``note`` says so. The ranking by Borda
    score, with the learner's intervals, is ``results``. 409 for a rating experiment, before the first
    comparison, or for ``alpha=0`` on a graph that is not strongly connected. A staged experiment's: its stage 2's
    comparisons (409 before stage 2 starts)."""
    study.check_owner(eid, token)
    return study.bradley_terry(study.comparisons_of(eid), learner=learner, alpha=alpha)


@router.get("/{eid}/wins.csv", response_class=Response, responses=error_responses(409))
@bounded
def export_wins(eid: EidPath, study: StudyDep, token: TokenDep, learner: Annotated[
        str | None, Query(max_length=40, description="one learner's label (default: every learner's comparisons "
                                                     "pooled)")] = None) -> Response:
    """A pairwise experiment's win matrix: header ``winner,<item ids>``, then per item its id and how many times it
    beat each item (row: winner, column: loser), as ``purebandits.pairwise.win_matrix_frame`` writes it
    (``pd.read_csv(f, index_col=0)`` reads it back). Skips and excluded participants' answers are not counted.
    409 for a rating experiment; a staged experiment's is its stage 2's."""
    study.check_owner(eid, token)
    return _csv(study.export_wins(study.comparisons_of(eid), learner=learner), f"experiment-{eid}-wins.csv")


@router.get("/{eid}/state", response_model=LearnerState)
@bounded
def get_state(eid: EidPath, study: StudyDep, token: TokenDep, algorithm: LearnerQuery = None) -> Any:
    """A learner's ``state_dict`` and the event-log version it reflects."""
    study.check_owner(eid, token)
    return study.learner_state(eid, learner=algorithm)


#: a spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV injection")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralize(cell: Any) -> Any:
    """``cell`` with a leading ``'`` if it is a string a spreadsheet would run as a formula; other values as they are.

    Item texts, labels and participant ids come from organizers and participants: opened in Excel or
    LibreOffice, ``=HYPERLINK(...)`` or ``@SUM(...)`` would be evaluated. Numbers stay numbers.
    """
    return neutralize_row([cell])[0]


def neutralize_row(row: Iterable[Any]) -> list[Any]:
    """Each cell of ``row`` as :func:`neutralize` gives it, in one pass (a million answers are ten million
    cells: a call per cell cost a third of the download's CPU)."""
    return [c if not isinstance(c, str) or not c.startswith(_FORMULA_START) else "'" + c for c in row]


#: rows per chunk of a streamed CSV (~100 KB of answers)
CSV_CHUNK_ROWS = 1_000


def csv_chunks(rows: Iterable[list[Any]]) -> Iterator[bytes]:
    """``rows`` as UTF-8 CSV (formula cells neutralized), ``CSV_CHUNK_ROWS`` rows per chunk."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    n = 0
    for row in rows:
        writer.writerow(neutralize_row(row))
        n += 1
        if n == CSV_CHUNK_ROWS:
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
            n = 0
    if n or buf.tell():
        yield buf.getvalue().encode()


#: CSV downloads one server process reads at once: each holds a database connection and up to
#: :data:`EXPORT_CPU_SHARE` of a core while its rows are read (about 15 s for a million answers), so more at
#: once would take what participants need. A download whose rows are read is sent from its :class:`Spool`'s
#: file without a slot, so slow clients (or a hostile one, reading a byte a minute) hold none.
MAX_EXPORTS = 3
#: share of a core a download's rows may take while they are read (:class:`Spool` pauses between chunks): the
#: rest is left to the participants' requests, which share the interpreter with it
EXPORT_CPU_SHARE = 0.5
#: bytes the downloads being sent may hold in temporary files per process (a million answers are 167 MB);
#: beyond it a new download gets 429 until some are read or dropped
MAX_SPOOLED_BYTES = 2 * 1024**3
_exports = threading.BoundedSemaphore(MAX_EXPORTS)


class _SpoolResponse(StreamingResponse):
    """A streamed :class:`Spool` closed when the response ends, however it ends. Starlette does not close the
    iterator of a client gone mid-download (the send fails, and the iterator waits for the garbage
    collector), which left its file, 167 MB for a million answers, behind on an idle server."""

    def __init__(self, spool: Spool, **kwargs: Any) -> None:
        super().__init__(spool, **kwargs)
        self.spool = spool

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.spool.close()


def _csv(rows: Iterable[list[Any]], filename: str) -> Response:
    """A CSV download streamed as it is read: a contest's million answers (165 MB) were built whole in memory,
    1.1 GB of a server's memory per download. Its rows go through a :class:`Spool`, so their transaction ends
    when the server has read them, however slowly the client downloads. At most :data:`MAX_EXPORTS` being
    read at once per process, and :data:`MAX_SPOOLED_BYTES` being sent (429 beyond, the rows never opened)."""
    busy = None
    if spooled_bytes() > MAX_SPOOLED_BYTES:
        busy = (f"the downloads this server is sending hold {spooled_bytes() / 2**20:,.0f} MB; retry once "
                "some have been read")
    elif not _exports.acquire(blocking=False):
        busy = f"{MAX_EXPORTS} downloads are already being read by this server; retry in a few seconds"
    if busy is not None:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
        raise RateLimited(busy, retry_after=5.0)
    return _SpoolResponse(Spool(csv_chunks(rows), cpu_share=EXPORT_CPU_SHARE, on_produced=_exports.release),
                          media_type="text/csv; charset=utf-8",
                          headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@router.get("/{eid}/answers.csv", response_class=Response)
@bounded
def export_answers(eid: EidPath, study: StudyDep, token: TokenDep, format: Annotated[
        Literal["full", "crowdkit"], Query(description="'crowdkit': task, worker, label (crowd-kit's long format); "
                                           "a pairwise experiment's: worker, left, right, label (the winner)")
] = "full") -> Response:
    """Every answer in the order it was given, with participant, learner, item, label, times, its position in the
    participant's session, a gold item's known label and whether the participant is excluded; skips have the label
    ``skip``. With ``format=crowdkit``, the learners' answers as ``task, worker, label`` (skips left out), the
    table crowd-kit's aggregation methods (Dawid-Skene, GLAD, MACE) read. A pairwise experiment's rows also have
    ``opponent, opponent_id, left_id, right_id, winner_id`` (``arm`` is the learner's item, ``label`` the side chosen);
    its ``format=crowdkit`` is crowd-kit's pairwise table ``worker, left, right, label`` (the winner; skips left out),
    which ``crowdkit.aggregation.BradleyTerry`` reads."""
    study.check_owner(eid, token)
    if format == "crowdkit":
        return _csv(study.export_crowdkit(eid), f"experiment-{eid}-crowdkit.csv")
    return _csv(study.export_answers(eid), f"experiment-{eid}-answers.csv")


@router.get("/{eid}/summary.csv", response_class=Response)
@bounded
def export_summary(eid: EidPath, study: StudyDep, token: TokenDep, algorithm: LearnerQuery = None) -> Response:
    """One learner's per-item summary (file ``<id>_summary_<label>.csv``, as NEXT named them).

    Default labels: the columns of the public caption-contest summaries plus ``item_id``
    (``rank,item_id,funny,somewhat_funny,unfunny,count,score,precision,contest,caption``); other
    label sets: ``rank,item_id,<one count column per label>,count,mean_reward,precision,contest,caption``
    (see ``purebandits.service.reports.summary_rows``). Cells a spreadsheet would run as formulas
    (an item id or caption starting with ``=``, ``+``, ``-``, ``@``) get a leading ``'``."""
    study.check_owner(eid, token)
    meta = study.meta(eid)
    label = meta.learners[meta.learner_index(algorithm)].label
    return _csv(study.export_summary(eid, learner=algorithm), f"{eid}_summary_{label}.csv")


@router.get("/{eid}/participants", response_model=ParticipantsOut)
@bounded
def get_participants(eid: EidPath, study: StudyDep, token: TokenDep, flagged: bool = False,
                     limit: Annotated[int, Query(ge=1, le=10_000)] = 200) -> Any:
    """Participants with their rater-quality measures and flags (too fast, one label for everything, gold items
    wrong, no better than chance against the others' consensus), flagged ones first; ``flagged=true`` for
    those only."""
    study.check_owner(eid, token)
    quality, excluded, platform = study.participant_quality(eid), study.excluded(eid), study.platform_of(eid)
    rows = [{"participant_id": pid, "answers": q.n_answers, "skips": q.n_skips,
             "median_response_seconds": q.median_seconds, "top_label": q.top_label,
             "top_label_share": q.top_label_share, "gold_answered": q.gold_answered, "gold_wrong": q.gold_wrong,
             "consensus_items": q.consensus_items, "consensus_agreement": q.consensus_agreement,
             "chance_agreement": q.chance_agreement, "flags": list(q.flags), "excluded": pid in excluded,
             "platform": platform[pid][0] if pid in platform else None} for pid, q in quality.items()]
    rows.sort(key=lambda r: (not (r["flags"] or r["excluded"]), -r["answers"], r["participant_id"]))
    n_flagged = sum(1 for r in rows if r["flags"])
    if flagged:
        rows = [r for r in rows if r["flags"]]
    return {"experiment_id": eid, "n_participants": len(quality), "n_flagged": n_flagged,
            "n_excluded": len(excluded), "n_skips": sum(q.n_skips for q in quality.values()),
            "participants": rows[:limit]}


@router.post("/{eid}/exclusions", response_model=ExclusionOut, responses=error_responses(409))
@bounded
def set_exclusion(eid: EidPath, body: ExclusionIn, study: StudyDep, token: TokenDep) -> Any:
    """Exclude a participant, or include them again (``excluded: false``). The change is an event in every
    learner's log and each learner is rebuilt by replaying its log without the excluded participants' answers;
    the log and answers.csv keep every answer. 409 when a learner cannot be rebuilt so (nothing changes)."""
    study.check_owner(eid, token)
    return study.set_excluded(eid, body.participant_id, body.excluded, body.reason)


@router.get("/{eid}/participants.csv", response_class=Response)
@bounded
def export_participants(eid: EidPath, study: StudyDep, token: TokenDep) -> Response:
    """Per participant: learner, answers, first and last answer, mean and longest response time (seconds from a
    query's issue to its answer), the completion code once earned, the rater-quality measures and flags, whether
    excluded, and the crowd platform, study and session they came from."""
    study.check_owner(eid, token)
    return _csv(study.export_participants(eid), f"experiment-{eid}-participants.csv")
