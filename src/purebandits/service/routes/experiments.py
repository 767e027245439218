"""Owner endpoints: create, inspect, pause / resume / stop, results, exports (owner token required)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from purebandits.service.deps import EidPath, StudyDep, TokenDep
from purebandits.service.schemas import (
    ExperimentCreate,
    ExperimentCreated,
    ExperimentInfo,
    LearnerState,
    StatusOut,
    error_responses,
)

router = APIRouter(prefix="/api/experiments", tags=["owners"], responses=error_responses(400, 401, 404, 413, 422, 503))


def base_url(request: Request) -> str:
    """The service's base URL as the client sees it (no trailing slash), for the links in responses."""
    return str(request.base_url).rstrip("/")


@router.post("", status_code=201, response_model=ExperimentCreated)
def create_experiment(body: ExperimentCreate, study: StudyDep, token: TokenDep, request: Request) -> Any:
    """Create an experiment; the response holds the owner token (shown only once)."""
    study.check_admin(token)
    eid, owner_token = study.create_experiment(body.to_spec())
    base = base_url(request)
    return {"id": eid, "owner_token": owner_token, "participant_url": f"{base}/rate/{eid}",
            "dashboard_url": f"{base}/dashboard/{eid}#token={owner_token}"}


@router.get("/{eid}", response_model=ExperimentInfo)
def get_experiment(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
    """The experiment's settings (algorithm, parameters, k, number of items, labels, seed, query expiry, creation
    time) and its state (status, and version: the number of events applied to its learner)."""
    study.check_owner(eid, token)
    return study.experiment_info(eid)


def _status_route(name: str, status: str) -> None:
    def handler(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
        study.check_owner(eid, token)
        return study.set_status(eid, status)

    handler.__name__ = f"{name}_experiment"
    handler.__doc__ = {"pause": "Stop handing out queries (answers to issued queries still count).",
                       "resume": "Hand out queries again after a pause.",
                       "stop": "End the experiment for good (answers to issued queries still count)."}[name]
    router.add_api_route(f"/{{eid}}/{name}", handler, methods=["POST"], response_model=StatusOut,
                         responses=error_responses(409))


for _name, _status in (("pause", "paused"), ("resume", "active"), ("stop", "stopped")):
    _status_route(_name, _status)


@router.get("/{eid}/results")
def get_results(eid: EidPath, study: StudyDep, token: TokenDep, timeline: bool = True) -> dict[str, Any]:
    """Ranking with the learner's intervals, counts per label, stopping progress, recommendation."""
    study.check_owner(eid, token)
    return study.results(eid, timeline=timeline)


@router.get("/{eid}/state", response_model=LearnerState)
def get_state(eid: EidPath, study: StudyDep, token: TokenDep) -> Any:
    """The learner's ``state_dict`` and the event-log version it reflects."""
    study.check_owner(eid, token)
    return study.learner_state(eid)


def _csv(rows: Iterable[list[Any]], filename: str) -> Response:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@router.get("/{eid}/answers.csv", response_class=Response)
def export_answers(eid: EidPath, study: StudyDep, token: TokenDep) -> Response:
    """Every answer in the order it was applied (seq), with participant, item, label and times."""
    study.check_owner(eid, token)
    return _csv(study.export_answers(eid), f"experiment-{eid}-answers.csv")


@router.get("/{eid}/summary.csv", response_class=Response)
def export_summary(eid: EidPath, study: StudyDep, token: TokenDep) -> Response:
    """Per-item summary with the columns of the public caption-contest summaries."""
    study.check_owner(eid, token)
    return _csv(study.export_summary(eid), f"experiment-{eid}-summary.csv")
