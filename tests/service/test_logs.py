"""Operable logs (issue #23): one line per event with its fields, JSON lines, rate-limited floods, faulthandler."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
import sqlalchemy.exc
from fastapi import FastAPI
from fastapi.testclient import TestClient

from purebandits.service.logs import (
    ExperimentLogContext,
    LogFormatter,
    RateLimitFilter,
    brief,
    experiment_context,
    uvicorn_log_config,
)

TEXT_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) ([A-Z]+) (\S+) (?:experiment=(\d+) )?(.*)$")


class ListHandler(logging.Handler):
    """Keeps the formatted lines (and the records) it is handed."""

    def __init__(self, formatter: logging.Formatter | None = None) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.records: list[logging.LogRecord] = []
        self.setFormatter(formatter or LogFormatter("text"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def logger():
    """A private logger (no propagation) so the tests touch neither the root logger nor pytest's capture."""
    made = []

    def make(name: str = "purebandits.test_logs", handler: logging.Handler | None = None) -> logging.Logger:
        lg = logging.getLogger(name)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        if handler is not None:
            lg.addHandler(handler)
        made.append((lg, handler))
        return lg

    yield make
    for lg, handler in made:
        if handler is not None:
            lg.removeHandler(handler)
        lg.propagate = True
        lg.setLevel(logging.NOTSET)


def _record(msg: str = "hello %s", args: tuple = ("world",), level: int = logging.WARNING, created: float = 0.0,
            **extra) -> logging.LogRecord:
    rec = logging.LogRecord("purebandits.service", level, __file__, 1, msg, args, None)
    rec.created = created
    rec.__dict__.update(extra)
    return rec


# ---------------------------------------------------------------------------------------------- format
def test_text_line_has_time_level_logger_experiment_and_message():
    fmt = LogFormatter("text")
    line = fmt.format(_record(created=1_700_000_000.25, experiment=12))
    m = TEXT_LINE.match(line)
    assert m, line
    assert m.groups() == ("2023-11-14T22:13:20.250Z", "WARNING", "purebandits.service", "12", "hello world")
    # without an experiment the field is left out
    assert fmt.format(_record()) == "1970-01-01T00:00:00.000Z WARNING purebandits.service hello world"
    # from the context variable when the record has none; extra= wins over it
    with experiment_context(5):
        assert " experiment=5 hello world" in fmt.format(_record())
        assert " experiment=9 hello world" in fmt.format(_record(experiment=9))
    assert "experiment=" not in fmt.format(_record())


def test_text_line_cannot_be_forged_and_survives_surrogates():
    fmt = LogFormatter("text")
    hostile = "x\n1970-01-01T00:00:00.000Z ERROR purebandits.service forged\r\x1b[31m\u2028\ud800"
    line = fmt.format(_record("database error on %s", (hostile,)))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert "\\n1970-01-01" in line and "\\ud800" in line
    line.encode("utf-8")  # a lone surrogate would make the stream handler fail ("--- Logging error ---")
    # a broken %-format in a log call is still one line
    assert "unformattable" in fmt.format(_record("%d items", ("many",)))


def test_text_traceback_follows_on_indented_continuation_lines():
    fmt = LogFormatter("text")
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        rec = _record("sweep failed", (), level=logging.ERROR)
        rec.exc_info = sys.exc_info()
    first, *rest = fmt.format(rec).split("\n")
    assert TEXT_LINE.match(first) and first.endswith("ERROR purebandits.service sweep failed")
    assert rest and all(line.startswith("  ") for line in rest)
    assert rest[0] == "  Traceback (most recent call last):" and "ValueError: bad" in "\n".join(rest)


def test_json_lines_parse_and_hold_the_fields():
    fmt = LogFormatter("json")
    lines = [fmt.format(_record(created=1_700_000_000.0, experiment=3)),
             fmt.format(_record("text with \n newline and \ud800 and \u00e9", ())),
             fmt.format(_record("query %s", ("q1",), level=logging.INFO))]
    try:
        raise RuntimeError("down")
    except RuntimeError:
        rec = _record("expiring stale queries failed", (), level=logging.ERROR)
        rec.exc_info = sys.exc_info()
        lines.append(fmt.format(rec))
    objs = []
    for line in lines:
        assert "\n" not in line
        line.encode("utf-8")
        objs.append(json.loads(line))
    assert objs[0] == {"time": "2023-11-14T22:13:20.000Z", "level": "WARNING", "logger": "purebandits.service",
                       "experiment": 3, "message": "hello world"}
    assert objs[1]["message"] == "text with \n newline and \ud800 and \u00e9" and "experiment" not in objs[1]
    assert objs[2]["level"] == "INFO" and objs[2]["message"] == "query q1"
    assert objs[3]["exc"].startswith("Traceback (most recent call last):") and "RuntimeError: down" in objs[3]["exc"]
    with pytest.raises(ValueError, match="log format"):
        LogFormatter("xml")


def test_brief_is_one_line():
    exc = sqlalchemy.exc.OperationalError("SELECT 1\nFROM x", {}, Exception("database is locked"))
    text = brief(exc)
    assert "\n" not in text and text.startswith("OperationalError: ") and "database is locked" in text
    assert len(brief(ValueError("x" * 5000))) <= 300 and brief(ValueError()) == "ValueError"


# ---------------------------------------------------------------------------------------------- rate limit
class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _limited(logger, max_records=3, per_seconds=10.0, **kw):
    clock = FakeClock()
    handler = ListHandler()
    handler.addFilter(RateLimitFilter(max_records, per_seconds, clock=clock, sink=handler.handle, **kw))
    return logger("purebandits.test_logs", handler), handler, clock


def test_rate_limit_lets_n_through_then_summarises(logger):
    log, handler, clock = _limited(logger)
    for i in range(50):
        log.warning("database error on %s %s: %s", "POST", f"/api/x/{i}", "locked")
        clock.t += 0.1
    assert [r.getMessage() for r in handler.records] == [
        f"database error on POST /api/x/{i}: locked" for i in range(3)]
    # another template, and records below WARNING, have their own budget / no limit
    log.warning("something else")
    for _ in range(10):
        log.info("expired %d stale queries", 2)
    assert len(handler.lines) == 3 + 1 + 10
    clock.t += 10.0  # the window is over: the next record brings the summary, then itself
    log.warning("database error on %s %s: %s", "POST", "/api/y", "locked")
    summary, after = handler.lines[-2], handler.lines[-1]
    assert TEXT_LINE.match(summary)
    assert summary.endswith("database error on POST /api/x/49: locked "
                            "(47 similar messages suppressed in the last 10 s)")
    assert after.endswith("database error on POST /api/y: locked") and "suppressed" not in after
    assert handler.records[-2].levelno == logging.WARNING and handler.records[-2].name == "purebandits.test_logs"


def test_rate_limit_summary_comes_when_any_record_arrives_and_on_flush(logger):
    log, handler, clock = _limited(logger, max_records=1, per_seconds=5.0)
    log.error("sweep failed: %s", "a")
    log.error("sweep failed: %s", "b")
    log.error("sweep failed: %s", "c")
    assert len(handler.lines) == 1
    clock.t += 6
    log.warning("an unrelated warning")  # any record past the window brings the other key's summary
    assert handler.lines[1].endswith("ERROR purebandits.test_logs sweep failed: c "
                                     "(2 similar messages suppressed in the last 5 s)")
    assert handler.lines[2].endswith("an unrelated warning")
    log.warning("an unrelated warning")
    limiter = handler.filters[0]
    limiter.flush()  # at exit: the pending count is written
    assert handler.lines[-1].endswith("an unrelated warning (1 similar message suppressed in the last 5 s)")
    limiter.flush()
    assert len(handler.lines) == 4


def test_rate_limit_a_database_outage_logs_a_handful_of_lines(logger):
    """10 minutes of outage: 20 failing requests a second and the expiry sweep every 5 s."""
    log, handler, clock = _limited(logger, max_records=5, per_seconds=60.0)
    start = clock.t
    while clock.t < start + 600:
        for _ in range(20):
            log.warning("database error on %s %s: %s", "POST", "/api/experiments/1/queries",
                        "OperationalError: (sqlite3.OperationalError) disk I/O error")
        if round(clock.t - start) % 5 == 0:
            log.warning("expiring stale queries failed: %s", "OperationalError: disk I/O error")
        clock.t += 1
    handler.filters[0].flush()
    assert len(handler.lines) <= 2 * 10 * (5 + 1) + 2
    assert sum("suppressed" in line for line in handler.lines) >= 18


def test_rate_limit_leaves_access_log_and_can_be_turned_off(logger):
    clock = FakeClock()
    handler = ListHandler()
    handler.addFilter(RateLimitFilter(2, 60, clock=clock, sink=handler.handle))
    access = logger("uvicorn.access", handler)
    for _ in range(20):
        access.warning('%s - "%s %s HTTP/%s" %d', "1.2.3.4:5", "POST", "/x", "1.1", 429)
    assert len(handler.lines) == 20
    off = ListHandler()
    off.addFilter(RateLimitFilter(0, 60, clock=clock, sink=off.handle))
    log = logger("purebandits.test_logs_off", off)
    for _ in range(20):
        log.error("same")
    assert len(off.lines) == 20


# ---------------------------------------------------------------------------------------------- experiment context
def test_middleware_puts_the_experiment_of_the_path_on_log_lines(logger):
    handler = ListHandler()
    log = logger("purebandits.test_logs_mw", handler)
    app = FastAPI()

    @app.get("/api/experiments/{eid}/results")
    def sync_route(eid: int) -> dict:  # runs in a worker thread: the context is copied there
        log.warning("computing results")
        return {}

    @app.get("/rate/{eid}")
    async def async_route(eid: int) -> dict:
        log.warning("rating page")
        return {}

    @app.get("/healthz")
    def health() -> dict:
        log.warning("health")
        return {}

    app.add_middleware(ExperimentLogContext)
    with TestClient(app) as c:
        for path in ("/api/experiments/12/results", "/rate/7", "/healthz"):
            assert c.get(path).status_code == 200
    assert [TEXT_LINE.match(line).group(4) for line in handler.lines] == ["12", "7", None]


# ---------------------------------------------------------------------------------------------- whole set-up
def _run(code: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env)


def test_configure_logging_routes_every_logger_through_one_formatter():
    proc = _run("""
        import faulthandler, logging
        from purebandits.service.logs import configure_logging, experiment_context
        configure_logging("info", "json")
        logging.getLogger("purebandits.service").info("rebuilt %d experiment(s)", 2)
        with experiment_context(4):
            logging.getLogger("purebandits.service").warning("database error on %s", "POST /x")
        logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
        logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "1.2.3.4:5", "GET", "/", "1.1", 200)
        logging.getLogger("alembic.runtime.migration").debug("hidden at INFO")
        print(faulthandler.is_enabled())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
    objs = [json.loads(line) for line in proc.stderr.splitlines()]
    assert [(o["logger"], o["level"], o["message"]) for o in objs] == [
        ("purebandits.service", "INFO", "rebuilt 2 experiment(s)"),
        ("purebandits.service", "WARNING", "database error on POST /x"),
        ("uvicorn.error", "INFO", "Started server process [1]"),
        ("uvicorn.access", "INFO", '1.2.3.4:5 - "GET / HTTP/1.1" 200'),
    ]
    assert objs[1]["experiment"] == 4 and all(o["time"].endswith("Z") for o in objs)


def test_uvicorn_log_config_formats_uvicorns_own_loggers():
    """uvicorn applies the dict itself (also with use_colors, which it writes into formatters default / access)."""
    proc = _run("""
        import logging, uvicorn
        from purebandits.service.logs import uvicorn_log_config
        cfg = uvicorn.Config("x:y", log_config=uvicorn_log_config("warning", "text"), log_level="info",
                             access_log=False, use_colors=False)
        logging.getLogger("uvicorn.error").info("Application startup complete.")
        logging.getLogger("uvicorn.access").info("dropped: access_log=False")
        logging.getLogger("purebandits.service").info("below the root level: dropped")
        logging.getLogger("purebandits.service").warning("kept")
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert [TEXT_LINE.match(line).group(2, 3, 5) for line in lines] == [
        ("INFO", "uvicorn.error", "Application startup complete."), ("WARNING", "purebandits.service", "kept")]
    with pytest.raises(ValueError):
        uvicorn_log_config("info", "yaml")


@pytest.mark.skipif(not hasattr(signal, "SIGBUS"), reason="no SIGBUS on this platform")
def test_faulthandler_writes_a_traceback_on_sigbus():
    """SQLite's mmap'd WAL index becoming unwritable kills the process with SIGBUS: no Python code runs, but
    faulthandler (enabled by configure_logging) writes the fatal error and the traceback to the log stream."""
    crash = """
        import logging, os, signal
        {setup}
        def sweep():
            os.kill(os.getpid(), signal.SIGBUS)
        logging.getLogger("purebandits.service").warning("before the crash")
        sweep()
    """
    proc = _run(crash.format(setup="from purebandits.service.logs import configure_logging; configure_logging()"))
    assert proc.returncode == -signal.SIGBUS
    assert re.search(r"WARNING purebandits.service before the crash", proc.stderr)
    assert "Fatal Python error: Bus error" in proc.stderr
    assert "most recent call first" in proc.stderr
    assert re.search(r'File "<string>", line \d+ in sweep', proc.stderr), proc.stderr
    # without it the process dies silently (what the test guards against)
    bare = _run(crash.format(setup="logging.basicConfig()"))
    assert bare.returncode == -signal.SIGBUS and "Fatal Python error" not in bare.stderr
