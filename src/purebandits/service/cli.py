"""``purebandits serve``: run the crowdsourcing service (uvicorn), optionally with the demo experiment."""

from __future__ import annotations

import argparse
import gc
import os
import stat
import sys
from pathlib import Path
from typing import Any

__all__ = ["HELP", "add_arguments", "run", "ensure_demo", "demo_token", "DEMO_NAME", "DEMO_INSTRUCTIONS"]

HELP = "run the crowdsourcing service (rating page, owner dashboard, JSON API)"

DEMO_NAME = "caption contest 559 (demo)"
DEMO_INSTRUCTIONS = ("How funny is this caption? The captions were written for the New Yorker's cartoon caption "
                     "contest 559; rate each one on its own.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits serve``: database, address, workers, demo, migrations only, query expiry, logging."""
    parser.add_argument("--db", metavar="URL", default=None,
                        help="SQLAlchemy URL: default sqlite file purebandits.sqlite in the working directory "
                             "(WAL mode); postgresql://user@host/dbname for PostgreSQL "
                             "(env PUREBANDITS_DATABASE_URL, or PUREBANDITS_DATABASE_URL_FILE naming a file of mode "
                             "0600; keep passwords off the command line: ~/.pgpass)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes (default 1); they share the database and keep one "
                             "consistent learner per experiment through row locks")
    parser.add_argument("--worker-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="with --workers: a worker that does not answer the supervisor's health check "
                             "for this long is replaced (default 30; uvicorn's own default, 5, replaced "
                             "workers that were busy starting on a loaded machine)")
    parser.add_argument("--demo", action="store_true",
                        help="create the caption-contest-559 demo experiment if absent and print its "
                             "participant URL, dashboard URL and owner token (the same across restarts: "
                             "kept in a 0600 file next to the database, or PUREBANDITS_DEMO_TOKEN)")
    parser.add_argument("--upgrade-only", action="store_true",
                        help="apply the database migrations and exit")
    parser.add_argument("--query-expiry", type=float, default=None, metavar="SECONDS",
                        help="pending queries expire after this many seconds (default 300)")
    parser.add_argument("--no-access-log", action="store_true", help="do not log every request")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--log-format", choices=["text", "json"], default=None,
                        help="log lines as text or one JSON object per line (env PUREBANDITS_LOG_FORMAT; default text)")
    parser.add_argument("--forwarded-allow-ips", default=None, metavar="ADDRESSES",
                        help="proxies whose X-Forwarded-For is believed (comma-separated addresses or networks, "
                             "'*' for any; env PUREBANDITS_FORWARDED_ALLOW_IPS). Default: none, the per-address "
                             "limits count the connecting address; uvicorn's FORWARDED_ALLOW_IPS is not used")


def ensure_demo(study: Any) -> tuple[int, str | None, bool]:
    """Create the demo experiment unless it exists; return (id, owner token or None, created).

    The owner token is stored hashed, so for an existing demo it is None here (see
    :func:`demo_token`, which keeps one across restarts).
    """
    from purebandits.instances.real import caption_contest

    eid = study.find_experiment(DEMO_NAME)
    if eid is not None:
        return int(eid), None, False
    cc = caption_contest("559")
    spec = {
        "name": DEMO_NAME,
        "items": [{"id": f"559-{i + 1}", "text": text} for i, text in enumerate(cc.captions)],
        "instructions": DEMO_INSTRUCTIONS,
        "seed": 559,
    }
    eid, token = study.create_experiment(spec)
    return eid, token, True


def demo_token(study: Any, eid: int, token: str | None, path: Path) -> str:
    """The demo's owner token, the same across restarts, while the database keeps only its hash.

    ``PUREBANDITS_DEMO_TOKEN`` wins if set. Otherwise the token lives in ``path``, a file
    readable by its owner only (mode 0600, as ssh keeps keys): read it if present, else write
    the new token (or a fresh one) there. Either way the experiment's stored hash is set to it.
    """
    env = os.environ.get("PUREBANDITS_DEMO_TOKEN")
    if env:
        study.set_token(eid, env)
        return env
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            print(f"warning: {path} was readable by others (mode {mode:o}); set to 0600", file=sys.stderr)
            path.chmod(0o600)
        saved = path.read_text(encoding="utf-8").strip()
        if saved:
            if not study.token_matches(eid, saved):
                study.set_token(eid, saved)
            return saved
    if token is None:
        token = study.rotate_token(eid)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    path.chmod(0o600)
    return token


def _demo_token_path(url: str) -> Path:
    """Next to the SQLite file (``<db>.demo-token``), else ``.purebandits-demo-token`` in the working directory."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and url[len(prefix):] not in ("", ":memory:"):
        db = Path(url[len(prefix):])
        return db.with_name(db.name + ".demo-token")
    return Path.cwd() / ".purebandits-demo-token"


def run(args: argparse.Namespace) -> int:
    """Migrate the database (and stop there with ``--upgrade-only``), optionally create the demo and print its
    URLs, then serve with uvicorn; the workers build their app from the environment without migrating again."""
    # a start allocates a few hundred thousand objects that live as long as the process (FastAPI, SQLAlchemy,
    # NumPy, numba, the learners) and next to no garbage: the cyclic collector's passes over them while they load
    # cost more than its one pass at the end. Off until then: the app's startup collects and freezes them and turns
    # it back on (app.py), as does the first compile (warmup.compile_progress: a compile makes garbage by the
    # hundred megabytes), and a supervisor of several workers before it starts them
    gc.disable()
    from purebandits.service.settings import SECRET_FIELDS, Settings, url_password
    from purebandits.service.storage import current_revision, make_engine, upgrade

    # the links in API answers come from public_url, never from a request's Host header: without
    # PUREBANDITS_PUBLIC_URL it is this address, except on a wildcard address, where no one address is
    # right for every participant and the API gives root-relative links (/rate/5) instead
    wildcard = args.host in ("0.0.0.0", "::", "")
    host_shown = "127.0.0.1" if wildcard else args.host
    host_in_url = f"[{host_shown}]" if ":" in host_shown else host_shown  # IPv6
    local_url = f"http://{host_in_url}:{args.port}"
    try:
        settings = Settings.from_env(database_url=args.db, query_expiry_seconds=args.query_expiry,
                                     log_format=args.log_format, forwarded_allow_ips=args.forwarded_allow_ips)
    except ValueError as exc:  # a setting that does not parse, a secret file others may read
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.db and url_password(args.db):
        print("warning: the database password given with --db is visible to every user of this machine (ps, "
              "/proc); put it in PostgreSQL's password file (~/.pgpass, mode 0600) or the whole URL in a file "
              "named by PUREBANDITS_DATABASE_URL_FILE (mode 0600)", file=sys.stderr)
    from purebandits.service.logs import configure_logging, uvicorn_log_config

    log_options = {"rate_max": settings.log_rate_max, "rate_seconds": settings.log_rate_seconds}
    configure_logging(args.log_level, settings.log_format, **log_options)
    if not settings.public_url and not wildcard:
        settings.public_url = local_url
    engine = make_engine(settings.url)
    try:
        upgrade(engine)
        if args.upgrade_only:
            print(f"database at revision {current_revision(engine)} ({engine.url.render_as_string()})")
            return 0
        if args.demo:
            from purebandits.service.study import Study
            from purebandits.service.warmup import compile_progress

            study = Study(engine, settings)
            with compile_progress("preparing the demo experiment"):
                eid, token, created = ensure_demo(study)
            token_path = _demo_token_path(settings.url)
            token = demo_token(study, eid, token, token_path)
            base = (settings.public_url or local_url).rstrip("/")
            print(f"purebandits demo: {DEMO_NAME} ({'created' if created else 'existing'}, experiment {eid})")
            print(f"  participant URL: {base}/rate/{eid}")
            print(f"  dashboard URL:   {base}/dashboard/{eid}#token={token}")
            print(f"  owner token:     {token}")
            print(f"                   (kept in {token_path}, mode 0600, so this link survives restarts; "
                  "PUREBANDITS_DEMO_TOKEN overrides it)")
            print(f"  API docs:        {base}/docs")
            print("  data: New Yorker Caption Contest dataset (Jain et al. 2020), CC BY 4.0, not for commercial use")
            sys.stdout.flush()
    finally:
        engine.dispose()
    if args.workers > 1:
        gc.enable()  # this process supervises the workers for as long as they serve
        _warm_for_workers(settings)
    # the workers build their app from the environment; migrations already ran here
    os.environ.update(settings.to_env())
    for name in SECRET_FIELDS:  # read once, here: the workers take the value (--db may have overridden the file)
        os.environ.pop(f"PUREBANDITS_{name.upper()}_FILE", None)
    os.environ["PUREBANDITS_AUTO_MIGRATE"] = "0"
    import uvicorn  # here: neither --upgrade-only nor a setting refused needs it

    uvicorn.run("purebandits.service.app:create_app", factory=True, host=args.host, port=args.port,
                workers=max(1, args.workers), timeout_worker_healthcheck=args.worker_timeout,
                log_level=args.log_level, access_log=not args.no_access_log,
                http=_http_protocol(), **_proxy_options(settings.forwarded_allow_ips),
                log_config=uvicorn_log_config(args.log_level, settings.log_format, **log_options))
    return 0


def _warm_for_workers(settings: Any) -> None:
    """Compile the stored experiments' learners and the default one into numba's cache before the workers start
    (in a child process: see :func:`purebandits.service.warmup.warm_now`), so that each worker loads them in
    milliseconds; a no-op when the cache has them."""
    from purebandits.service.storage import make_engine
    from purebandits.service.study import Study
    from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_PARAMS
    from purebandits.service.warmup import warm_now

    engine = make_engine(settings.url)
    try:
        specs = [(DEFAULT_ALGORITHM, dict(DEFAULT_PARAMS)), *Study(engine, settings).learner_specs()]
    finally:
        engine.dispose()
    if warm_now(specs) != 0:
        print("purebandits: compiling the learners before starting the workers failed; each worker compiles "
              "what it needs on first use", file=sys.stderr)


def _proxy_options(allow: str) -> dict[str, Any]:
    """uvicorn's proxy options: ``X-Forwarded-*`` believed from the ``allow`` addresses only, from none when it is
    empty (uvicorn's own default, or its FORWARDED_ALLOW_IPS variable, would trust loopback)."""
    allow = allow.strip()
    return {"proxy_headers": bool(allow), "forwarded_allow_ips": allow}


def _http_protocol() -> Any:
    """uvicorn's httptools protocol with one socket write per response, if httptools is installed."""
    try:
        from purebandits.service.transport import CoalescingHttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's default (h11)
        return "auto"
    return CoalescingHttpToolsProtocol
