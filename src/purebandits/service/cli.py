"""``purebandits serve``: run the crowdsourcing service (uvicorn), optionally with the demo experiment."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["HELP", "add_arguments", "run", "ensure_demo", "DEMO_NAME"]

HELP = "run the crowdsourcing service (rating page, owner dashboard, JSON API)"

DEMO_NAME = "caption contest 559 (demo)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits serve``: database, address, workers, demo, migrations only, query expiry, logging."""
    parser.add_argument("--db", metavar="URL", default=None,
                        help="SQLAlchemy URL: default sqlite file purebandits.sqlite in the working directory "
                             "(WAL mode); postgresql://user@host/dbname for PostgreSQL "
                             "(env PUREBANDITS_DATABASE_URL)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes (default 1); they share the database and keep one "
                             "consistent learner per experiment through row locks")
    parser.add_argument("--demo", action="store_true",
                        help="create the caption-contest-559 demo experiment if absent and print its "
                             "participant URL, dashboard URL and (new) owner token")
    parser.add_argument("--upgrade-only", action="store_true",
                        help="apply the database migrations and exit")
    parser.add_argument("--query-expiry", type=float, default=None, metavar="SECONDS",
                        help="pending queries expire after this many seconds (default 300)")
    parser.add_argument("--no-access-log", action="store_true", help="do not log every request")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def ensure_demo(study: Any) -> tuple[int, str, bool]:
    """Create the demo experiment unless it exists; return (id, owner token, created).

    The owner token is stored hashed, so for an existing demo a new token is issued.
    """
    from purebandits.instances.real import caption_contest

    eid = study.find_experiment(DEMO_NAME)
    if eid is not None:
        return int(eid), study.rotate_token(eid), False
    cc = caption_contest("559")
    spec = {
        "name": DEMO_NAME,
        "items": [{"id": f"559-{i + 1}", "text": text} for i, text in enumerate(cc.captions)],
        "algorithm": "lil_ucb",
        "params": {"delta": 0.05, "preset": "heuristic"},
        "seed": 559,
    }
    eid, token = study.create_experiment(spec)
    return eid, token, True


def run(args: argparse.Namespace) -> int:
    """Migrate the database (and stop there with ``--upgrade-only``), optionally create the demo and print its
    URLs, then serve with uvicorn; the workers build their app from the environment without migrating again."""
    import uvicorn

    from purebandits.service.settings import Settings
    from purebandits.service.storage import current_revision, make_engine, upgrade
    from purebandits.service.study import Study

    host_shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    settings = Settings.from_env(database_url=args.db, query_expiry_seconds=args.query_expiry,
                                 public_url=f"http://{host_shown}:{args.port}")
    engine = make_engine(settings.url)
    try:
        upgrade(engine)
        if args.upgrade_only:
            print(f"database at revision {current_revision(engine)} ({engine.url.render_as_string()})")
            return 0
        if args.demo:
            eid, token, created = ensure_demo(Study(engine, settings))
            base = settings.public_url
            print(f"purebandits demo: {DEMO_NAME} ({'created' if created else 'existing'}, experiment {eid})")
            print(f"  participant URL: {base}/rate/{eid}")
            print(f"  dashboard URL:   {base}/dashboard/{eid}#token={token}")
            print(f"  owner token:     {token}")
            print(f"  API docs:        {base}/docs")
            print("  data: New Yorker Caption Contest dataset (Jain et al. 2020), CC BY 4.0, not for commercial use")
            sys.stdout.flush()
    finally:
        engine.dispose()
    # the workers build their app from the environment; migrations already ran here
    os.environ.update(settings.to_env())
    os.environ["PUREBANDITS_AUTO_MIGRATE"] = "0"
    uvicorn.run("purebandits.service.app:create_app", factory=True, host=args.host, port=args.port,
                workers=max(1, args.workers), log_level=args.log_level, access_log=not args.no_access_log,
                http=_http_protocol())
    return 0


def _http_protocol() -> Any:
    """uvicorn's httptools protocol with one socket write per response, if httptools is installed."""
    try:
        from purebandits.service.transport import CoalescingHttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's default (h11)
        return "auto"
    return CoalescingHttpToolsProtocol
