"""Web pages: index, rating page, dashboard (server-rendered HTML; data comes from the JSON API)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from purebandits.service.deps import EidPath, StudyDep

router = APIRouter(tags=["pages"], include_in_schema=False)
# Jinja2 autoescapes .html templates: item text is never inserted as markup
templates = Jinja2Templates(directory=str(Path(__file__).resolve().parents[1] / "templates"))


@router.get("/", response_class=HTMLResponse)
def index(request: Request, study: StudyDep) -> HTMLResponse:
    """Home page: the active experiments, each with a link to its rating page."""
    active = [e for e in study.list_experiments() if e["status"] == "active"]
    return templates.TemplateResponse(request, "index.html", {"experiments": active})


@router.get("/rate/{eid}", response_class=HTMLResponse)
def rate(request: Request, eid: EidPath, study: StudyDep) -> HTMLResponse:
    """Rating page of an experiment for participants (the script asks the API for queries)."""
    info = study.experiment_info(eid)
    return templates.TemplateResponse(request, "rate.html", {"eid": eid, "name": info["name"]})


@router.get("/dashboard/{eid}", response_class=HTMLResponse)
def dashboard(request: Request, eid: EidPath) -> HTMLResponse:
    """Owner dashboard of an experiment (the script reads the owner token from the URL fragment)."""
    # no data here: the page's script reads the owner token from the URL fragment (never sent
    # to the server in the page request) and polls the owner API with it
    return templates.TemplateResponse(request, "dashboard.html", {"eid": eid})
