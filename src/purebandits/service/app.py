"""The ASGI app factory: ``create_app(settings) -> FastAPI`` (no engine at import time).

``uvicorn --factory purebandits.service.app:create_app`` builds one app per worker process
from ``PUREBANDITS_*`` environment variables.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool

from purebandits import __version__
from purebandits.service.deps import RateLimiter
from purebandits.service.dispatch import Dispatcher
from purebandits.service.errors import ServiceError
from purebandits.service.fastpath import DB_UNAVAILABLE, ParticipantFastPath, error_parts
from purebandits.service.logs import ExperimentLogContext, brief
from purebandits.service.middleware import BodySizeLimit, SecurityHeaders
from purebandits.service.routes import experiments, pages, participants
from purebandits.service.settings import Settings
from purebandits.service.storage import make_engine, upgrade
from purebandits.service.study import Study
from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_PARAMS
from purebandits.service.warmup import compile_progress, warm_all_in_background, warm_learners

__all__ = ["create_app", "DB_UNAVAILABLE"]

log = logging.getLogger("purebandits.service")


def create_app(settings: Settings | None = None, *, clock: Callable[[], int] | None = None) -> FastAPI:
    """Build the service for ``settings`` (default: from ``PUREBANDITS_*`` environment variables).

    On startup it runs the migrations (``auto_migrate``) and starts serving at once; with
    ``verify_on_start`` a background task rebuilds every experiment's learner by replaying its
    event log from its last verified checkpoint and checks it against the stored snapshot (a
    learner not checked yet is never served from its snapshot; see :meth:`Study.verify_pending`).
    Other background tasks expire stale queries and keep the verified checkpoints near the head
    of the logs (``verify_interval_seconds``).
    """
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.url, wait_seconds=settings.db_wait_seconds,
                             statement_timeout_seconds=settings.db_statement_timeout_seconds)
        if settings.auto_migrate:
            await run_in_threadpool(upgrade, engine)
        study = Study(engine, settings, clock=clock)
        if settings.verify_on_start:
            # every learner is marked unverified (one query); the verification itself runs once the server serves
            await run_in_threadpool(study.begin_verification)
        with compile_progress("starting the service"):
            # the stored learners and the default one, compiled now rather than inside their first requests
            started = time.perf_counter()
            specs = [(DEFAULT_ALGORITHM, dict(DEFAULT_PARAMS)), *await run_in_threadpool(study.learner_specs)]
            warmed = await run_in_threadpool(warm_learners, specs)
        if warmed:
            log.info("warmed the compiled code of %d learner(s) in %.1f s", warmed, time.perf_counter() - started)
        if settings.warm_all_learners and warm_all_in_background() is not None:
            log.info("compiling the other learners' kernels in a low-priority background process (first start of "
                     "this version only, about 2 minutes of one core)")
        # everything loaded so far (FastAPI, SQLAlchemy, NumPy, the learners: ~10^5-10^6 objects) lives as long
        # as the process: out of the cyclic collector's way, or each full collection stalls every request for
        # tens of milliseconds (the participants' p99 latency went from ~45 to ~135 ms with them in)
        # and the youngest generation is collected every 20,000 allocations instead of 700: each request
        # allocates a few hundred short-lived containers, and young collections are the rest of the tail
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 10, 10)
        gc.enable()  # ``purebandits serve`` starts with it off (service/cli.py)
        app.state.study = study
        app.state.dispatcher = dispatcher = Dispatcher(study, settings)
        app.state.limiter = RateLimiter(settings.ask_rate_per_second, settings.ask_burst)
        tasks = [asyncio.create_task(_expire_loop(study, settings.expire_interval_seconds)),
                 asyncio.create_task(_webhook_loop(study, settings.expire_interval_seconds))]
        verified = asyncio.Event()  # the startup verification's first pass is over (or there is none)
        if settings.verify_on_start:
            tasks += [asyncio.create_task(_startup_verification(study, verified)),
                      asyncio.create_task(_verification_progress(study, VERIFY_PROGRESS_SECONDS))]
        else:
            verified.set()
        if settings.verify_interval_seconds > 0:
            tasks.append(asyncio.create_task(_checkpoint_loop(study, settings.verify_interval_seconds, verified)))
        try:
            yield
        finally:
            study.stop_verification()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with suppress(asyncio.CancelledError):
                    await task
            dispatcher.close()
            study.close()
            engine.dispose()

    # /docs and /redoc with their JavaScript and CSS from the installed fastapi-offline package
    # (FastAPI's own pages load them from a CDN: blank on a machine without internet)
    app = FastAPIOffline(
        favicon_url="/static/favicon.svg",
        title="purebandits service",
        version=__version__,
        description="Crowdsourcing with pure-exploration bandits: owners create experiments, participants "
        "rate the items the learner asks for. Owner endpoints need `Authorization: Bearer OWNER_TOKEN` (the "
        "admin token also works; creating and listing experiments need it when the server has one).",
        lifespan=lifespan,
    )
    app.state.settings = settings

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        status, content, headers = error_parts(exc)  # type: ignore[misc]
        return JSONResponse(content, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_error_body(exc.errors()), status_code=422)

    @app.exception_handler(sqlalchemy.exc.OperationalError)
    @app.exception_handler(sqlalchemy.exc.InterfaceError)
    async def _db_down(request: Request, exc: Exception) -> JSONResponse:
        log.warning("database error on %s %s: %s", request.method, request.url.path, brief(exc))
        status, content, headers = error_parts(exc)  # type: ignore[misc]
        return JSONResponse(content, status_code=status, headers=headers)

    app.include_router(experiments.router)
    app.include_router(participants.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=str(Path(__file__).resolve().parent / "static")), name="static")

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """The process is up and its event loop answers (no database call: a slow database must not fail it).

        While the startup verification runs, ``"verifying": {"experiments_left", "events_done", "events_total",
        "settling"}`` tells how far it is (from memory)."""
        study = getattr(app.state, "study", None)
        progress = study.verification_progress() if study is not None else None
        return {"status": "ok"} if progress is None else {"status": "ok", "verifying": progress}

    # innermost first: the fast path serves well-formed asks / answers, BodySizeLimit wraps it
    app.add_middleware(ParticipantFastPath)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders, submit_origins=tuple(settings.mturk_submit_origins.split()))
    app.add_middleware(ExperimentLogContext)
    return app


def validation_error_body(errors: Any) -> dict[str, Any]:
    """A malformed request as ``{"detail": "<one readable line>", "errors": [{loc, msg, type}]}``.

    Same shape as every other error (``detail`` is a string the pages can show), and the
    offending input is not echoed back.
    """
    issues = [{"loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
               "type": str(e.get("type", ""))} for e in list(errors)[:20]]
    text = "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in issues[:5]) or "malformed request"
    return {"detail": f"invalid request: {text}", "errors": issues}


def startup_summary(report: dict[int, dict[str, Any]], seconds: float) -> str:
    """The startup log line of :meth:`Study.verify_all`'s report: what was verified, from where, how many events
    were replayed, and which snapshots were replaced."""
    rows = [r for exp in report.values() for r in exp["learners"]]
    whole = sum(1 for r in rows if r["full_replay"])
    from_ck = len(rows) - whole
    bad = [eid for eid, r in report.items() if r["snapshot_matches"] is False]
    broken = [eid for eid, r in report.items() if any(x["checkpoint"] in ("corrupt", "unusable")
                                                      for x in r["learners"])]
    text = (f"verified {len(report)} experiment(s), {len(rows)} learner(s) in {seconds:.2f} s: "
            f"{sum(r['replayed'] for r in rows)} event(s) replayed ({from_ck} learner(s) from their verified "
            f"checkpoint, {whole} from the start of their log); "
            f"{sum(1 for r in rows if r['snapshot_matches'] is True)} snapshot(s) matched")
    if bad:
        text += f"; snapshots replaced for {bad}"
    if broken:
        text += f"; checkpoints replaced for {broken}"
    return text


#: seconds between two progress lines of the startup verification in the log
VERIFY_PROGRESS_SECONDS = 5.0


async def _until_done(work: Any, what: str, pause: float = 5.0) -> Any:
    """``work()`` in a worker thread, tried again every ``pause`` seconds until it does not raise (the database
    away at startup); its result."""
    while True:
        try:
            return await run_in_threadpool(work)
        except Exception as exc:
            log.warning("%s failed (%s); retrying in %g s", what, brief(exc), pause)
            await asyncio.sleep(pause)


async def _startup_verification(study: Study, verified: asyncio.Event) -> None:
    """Verify every learner while the server serves (:meth:`Study.verify_pending`: a request for one not verified
    yet is served from its verified checkpoint plus its log, or waits), then settle the snapshots that disagreed
    with a low-priority whole-log replay each (:meth:`Study.settle_pending`). A failure (the database away) is
    retried: until it is done, nothing is served from an unchecked snapshot."""
    started = time.perf_counter()
    report = await _until_done(study.verify_pending, "startup verification")
    log.info("%s", startup_summary(report, time.perf_counter() - started))
    verified.set()
    done = await _until_done(study.settle_pending, "settling the wrong snapshots by whole-log replays")
    if done["settled"]:
        log.info("settled %d wrong snapshot(s) by whole-log replays in %.1f s since the start: %d agreed with the "
                 "verified checkpoint, %d did not (switched to the full replay)", done["settled"],
                 time.perf_counter() - started, done["agreed"], done["switched"])


async def _verification_progress(study: Study, every: float) -> None:
    """A log line every ``every`` seconds while the startup verification runs: experiments left, events replayed."""
    while True:
        await asyncio.sleep(every)
        progress = study.verification_progress()
        if progress is None:
            return
        log.info("startup verification: %d experiment(s) left, %d / %d event(s) replayed, %d learner(s) settling "
                 "(whole-log replay in the background)", progress["experiments_left"], progress["events_done"],
                 progress["events_total"], progress["settling"])


async def _checkpoint_loop(study: Study, interval: float, verified: asyncio.Event | None = None) -> None:
    """Keep every learner's verified checkpoint near the head of its log (see :meth:`Study.advance_checkpoints`),
    once the startup verification's first pass is over (``verified``): it would repair what that pass checks."""
    if verified is not None:
        await verified.wait()
    while True:
        await asyncio.sleep(max(0.05, interval))
        try:
            done = await run_in_threadpool(study.advance_checkpoints)
            if done["repaired"]:
                log.warning("repaired %d learner(s) whose snapshot or checkpoint was wrong", done["repaired"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next round tries again; a restart replays a little more meanwhile
            log.warning("advancing verified checkpoints failed: %s", brief(exc))


async def _expire_loop(study: Study, interval: float) -> None:
    while True:
        await asyncio.sleep(max(0.05, interval))
        try:
            n = await run_in_threadpool(study.expire_stale)
            if n:
                log.info("expired %d stale quer%s", n, "y" if n == 1 else "ies")
            await run_in_threadpool(study.checkpoint)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # keep sweeping; the next ask expires lazily anyway
            log.warning("expiring stale queries failed: %s", brief(exc))


async def _webhook_loop(study: Study, interval: float) -> None:
    """Call the owners' webhooks whose experiments' learners have all stopped (apart from the expiry sweep:
    a slow webhook must not hold up expiring queries)."""
    while True:
        await asyncio.sleep(max(0.05, interval))
        try:
            await run_in_threadpool(study.call_webhooks)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the claim is kept; a call without result is claimed again later
            log.warning("calling webhooks failed: %s", brief(exc))
