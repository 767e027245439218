"""Web pages: home, rating page, dashboard, new experiment, admin (server-rendered; data comes from the JSON API).

Only the home page and the rating page read the database, through the app's
:class:`~purebandits.service.dispatch.Dispatcher` (bounded while the database hangs); the others are
shells whose scripts call the API."""

from __future__ import annotations

import functools
import gzip
import inspect
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from purebandits.registry import all_learners
from purebandits.service.deps import EidPath, StudyDep
from purebandits.service.errors import Unavailable
from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_LABELS

router = APIRouter(tags=["pages"], include_in_schema=False)
# Jinja2 autoescapes .html templates: item text is never inserted as markup
templates = Jinja2Templates(directory=str(Path(__file__).resolve().parents[1] / "templates"))


@router.get("/", response_class=HTMLResponse)
async def index(request: Request, study: StudyDep) -> HTMLResponse:
    """Home page: the active experiments, each with a link to its rating page (503 page while the database is
    unavailable)."""
    try:
        listed = await request.app.state.dispatcher.owner_call(study.list_experiments)
    except Unavailable as exc:
        return busy_page(request, exc)
    active = [e for e in listed if e["status"] == "active"]
    return templates.TemplateResponse(request, "index.html", {"experiments": active})


@router.get("/rate/{eid}", response_class=HTMLResponse)
async def rate(request: Request, eid: EidPath, study: StudyDep) -> HTMLResponse:
    """Rating page of an experiment for participants (the script asks the API for its context and queries).

    Served without waiting for a hung database: the name comes from the process's cache of the experiment's
    settings, else from a bounded read; when that read gets no answer the page comes without the name (its
    script fetches it with the context, retrying while it says so). An unknown experiment is a 404.
    """
    meta = study._meta.get(eid)  # the cache only: LRU.get never reads the database
    if meta is None:
        try:
            meta = await request.app.state.dispatcher.owner_call(study.meta, eid)
        except Unavailable:
            meta = None
    origins = request.app.state.settings.mturk_submit_origins.split()
    return templates.TemplateResponse(request, "rate.html", {"eid": eid, "name": meta.name if meta else None,
                                                             "submit_origins": origins})


def busy_page(request: Request, exc: Unavailable) -> HTMLResponse:
    """A page's answer while the database is unavailable: 503 with ``Retry-After``, and a short page that says
    so and reloads itself (``Refresh``) after that long."""
    wait = max(1, round(exc.retry_after))
    headers = {"Retry-After": str(wait), "Refresh": str(max(5, wait))}
    return templates.TemplateResponse(request, "busy.html", {"wait": max(5, wait)}, status_code=503,
                                      headers=headers)


@router.get("/dashboard/{eid}", response_class=HTMLResponse)
def dashboard(request: Request, eid: EidPath) -> HTMLResponse:
    """Owner dashboard of an experiment (the script reads the owner token from the URL fragment)."""
    # no data here: the page's script reads the owner token from the URL fragment (never sent
    # to the server in the page request) and polls the owner API with it
    return templates.TemplateResponse(request, "dashboard.html", {"eid": eid, "learners_meta": learners_meta(),
                                                                 "bokeh_version": bokehjs()[0]})


#: the BokehJS bundles the dashboard loads (the core and its JS plotting API), served from the installed
#: ``bokeh`` package rather than copied into this repository
BOKEHJS_FILES = frozenset({"bokeh.min.js", "bokeh-api.min.js"})


@functools.cache
def bokehjs() -> tuple[str, Path]:
    """(version, folder of the JS bundles) of the installed ``bokeh`` package (imported on first use)."""
    import bokeh
    from bokeh.util.paths import bokehjs_path

    return bokeh.__version__, Path(bokehjs_path()) / "js"


@functools.cache
def _gzipped(name: str) -> bytes:
    """A bundle gzip-compressed once per process (bokeh.min.js: 1.3 MB, about 0.35 MB compressed)."""
    return gzip.compress((bokehjs()[1] / name).read_bytes(), 9)


@router.get("/static/bokeh/{version}/{name}")
def bokehjs_file(version: str, name: str, request: Request) -> Response:
    """A BokehJS bundle of the installed ``bokeh``; the version in the URL lets browsers keep it for a year.
    Compressed for clients that accept gzip (a phone on a slow network loads the dashboard once)."""
    current, folder = bokehjs()
    if version != current or name not in BOKEHJS_FILES:
        raise HTTPException(404, "not found")
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", "").lower():
        return Response(_gzipped(name), media_type="text/javascript", headers={**headers, "Content-Encoding": "gzip"})
    return FileResponse(folder / name, media_type="text/javascript", headers=headers)


def _json_default(value: Any) -> Any:
    """A parameter's default if it is a plain JSON value (else None: shown as 'default')."""
    return value if value is None or isinstance(value, bool | int | float | str) else None


def learners_meta() -> dict[str, dict[str, Any]]:
    """Every learner class's kind, paper and parameter defaults, for the dashboard's readable settings
    (public facts about the algorithms, nothing of the experiment)."""
    out = {}
    for name, cls in all_learners().items():
        params = inspect.signature(cls.__init__).parameters
        defaults = {p: _json_default(params[p].default) for p in cls._param_names()
                    if p in params and params[p].default is not inspect.Parameter.empty}
        out[name] = {"kind": cls.kind, "paper": cls.paper, "defaults": defaults}
    return out


KIND_TITLES = {"fixed_confidence": "fixed confidence (stops when sure)",
               "fixed_budget": "fixed budget (needs budget=N)", "anytime": "anytime"}


@router.get("/new", response_class=HTMLResponse)
def new_experiment(request: Request) -> HTMLResponse:
    """Form to create an experiment (the script posts it to ``POST /api/experiments``)."""
    learners = [{"name": name, "kind": cls.kind, "paper": cls.paper, "params": cls._param_names()}
                for name, cls in all_learners().items()]
    order = list(KIND_TITLES)
    kinds = sorted({lr["kind"] for lr in learners}, key=lambda k: (order.index(k) if k in order else len(order), k))
    groups = [(kind, KIND_TITLES.get(kind, kind), [lr for lr in learners if lr["kind"] == kind]) for kind in kinds]
    # whether creating needs the admin token: the form asks for it before it uploads the items file
    admin_required = bool(request.app.state.settings.admin_token)
    return templates.TemplateResponse(request, "new.html", {"groups": groups, "labels": DEFAULT_LABELS,
                                                            "default_algorithm": DEFAULT_ALGORITHM,
                                                            "admin_required": admin_required})


@router.get("/admin", response_class=HTMLResponse)
def admin(request: Request) -> HTMLResponse:
    """Every experiment with archive / delete (the script lists them with the admin token)."""
    # no data here: the script calls GET /api/experiments with the admin token from sessionStorage
    return templates.TemplateResponse(request, "admin.html", {})
