"""Participant endpoints: get an anonymous id, ask for a query, answer it.

These are the hot path: they go through the app's
:class:`~purebandits.service.dispatch.Dispatcher`, which runs their short transactions on the
event loop when nothing has to wait and in a worker thread when something might (a lock, a
slow or hung database), batching concurrent asks and answers of one learner into one commit.
The others (the experiment's public settings and image, owner endpoints) run in owner threads, bounded
the same way (:func:`~purebandits.service.dispatch.bounded`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from purebandits.service.deps import EidPath, QueryIdPath, StudyDep
from purebandits.service.dispatch import bounded
from purebandits.service.errors import BadRequest
from purebandits.service.schemas import (
    AnswerOut,
    AnswerRequest,
    ExperimentPublic,
    ParticipantIn,
    ParticipantOut,
    QueryOut,
    QueryRequest,
    ReleaseOut,
    ReleaseRequest,
    error_responses,
)

router = APIRouter(prefix="/api", tags=["participants"], responses=error_responses(400, 413, 422, 503))


@router.post("/participants", status_code=201, response_model=ParticipantOut, responses=error_responses(404, 429))
async def new_participant(study: StudyDep, request: Request, body: ParticipantIn | None = None) -> Any:
    """A new anonymous participant id (keep it; send it with every query and answer), or register an id of
    your own, such as the worker id a crowd-work platform passes in the link (registering it again is fine).
    With ``platform``, ``experiment_id``, ``session`` (and ``study``), also record the platform session the id
    came in (Prolific's SESSION_ID / STUDY_ID, MTurk's assignmentId / hitId; in participants.csv).
    Rate-limited per client address."""
    origin = request.client.host if request.client else "unknown"
    if body is not None and body.platform is not None:
        if body.participant_id is None or body.experiment_id is None or not body.session:
            raise BadRequest("a platform session needs participant_id, experiment_id and session")
    pid = await request.app.state.dispatcher.call(study.new_participant, body.participant_id if body else None, origin)
    if body is not None and body.platform is not None:
        await request.app.state.dispatcher.owner_call(study.register_session, body.experiment_id, pid, body.platform,
                                                      body.study, body.session)
    return {"participant_id": pid}


@router.get("/experiments/{eid}/public", response_model=ExperimentPublic, responses=error_responses(404))
@bounded
def public_info(eid: EidPath, study: StudyDep) -> Any:
    """What a participant needs to know: name, label names, status, instructions, the context image, whether there
    is a skip button, whether the study is complete (every learner has stopped: close recruitment) and an
    example item for a preview."""
    current = study.current_stage(eid)  # a staged experiment: the stage its asks get now (stage 2's after the switch)
    info = study.experiment_info(current)
    meta = study.meta(current)
    complete = info["status"] in ("stopped", "archived") or all(a["done"] for a in info["algorithms"])
    if meta.staged:  # stage 1 running: its learner stopping hands over to stage 2, it does not end the study
        complete = info["status"] in ("stopped", "archived")
    return {"id": eid, "name": study.meta(eid).name, "query": "pairwise" if meta.pairwise else "rating",
            "labels": meta.answer_labels,
            "status": info["status"], "instructions": info["instructions"],
            "image_url": f"/api/experiments/{eid}/image" if info["has_image"] else None,
            "answers_per_participant": info["answers_per_participant"], "allow_skip": meta.crowd.allow_skip,
            "complete": complete, "example": meta.items[0]["text"] if meta.items else None}


@router.get("/experiments/{eid}/image", response_class=Response, responses=error_responses(404))
@bounded
def context_image(eid: EidPath, study: StudyDep) -> Response:
    """The experiment's context image (the organizer's upload), shown above every item."""
    content_type, data = study.image(eid)
    return Response(data, media_type=content_type, headers={"Cache-Control": "public, max-age=3600",
                                                            "X-Content-Type-Options": "nosniff"})


@router.post("/experiments/{eid}/queries", response_model=QueryOut, response_model_exclude_none=True,
             responses=error_responses(403, 404, 429))
async def ask(eid: EidPath, body: QueryRequest, study: StudyDep, request: Request) -> Any:
    """The next item to rate, chosen by the learner's ``ask`` among the items this participant may rate; a pending
    query until answered or expired. With ``n``, up to ``n`` of them at once (``queries``)."""
    request.app.state.limiter.check(body.participant_id)
    return await request.app.state.dispatcher.ask(eid, body.participant_id, body.n)


@router.post("/queries/{query_id}/answer", response_model=AnswerOut, responses=error_responses(403, 404, 409, 410))
async def answer(query_id: QueryIdPath, body: AnswerRequest, request: Request) -> Any:
    """Answer a query with one of the experiment's labels; acknowledged after it is committed.

    Answering again with the same label returns the same response and counts once.
    """
    return await request.app.state.dispatcher.answer(query_id, body.participant_id, body.label)


@router.post("/queries/{query_id}/release", response_model=ReleaseOut, responses=error_responses(403, 404))
async def release(query_id: QueryIdPath, body: ReleaseRequest, request: Request) -> Any:
    """Give back a query this participant will not answer (the rating page does, when it closes, for the item it
    fetched ahead), so the learner stops counting it as out before it expires. Idempotent."""
    return await request.app.state.dispatcher.release(query_id, body.participant_id)
