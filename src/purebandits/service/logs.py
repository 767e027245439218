"""Operable logs for the service: one line per event, rate-limited floods, a trace on a fatal signal.

:func:`configure_logging` installs one handler on the root logger, writing to stderr:

* **one line per event** with the time (ISO 8601, UTC, milliseconds), the level, the logger's
  name, the experiment when known (``experiment=12``) and the message. ``fmt="json"`` writes
  the same fields as one JSON object per line (``time``, ``level``, ``logger``, ``experiment``
  when known, ``message``, and ``exc`` with the traceback when there is one). Line breaks and
  other control characters in a message are escaped (``\\n``), so a client's input in a
  message cannot forge log lines; a lone surrogate is written as ``\\udXXX`` instead of making
  the handler fail. In text mode a traceback follows on continuation lines indented by two
  spaces (in json mode it is the ``exc`` field of the one line).
* **the experiment** comes from ``extra={"experiment": eid}`` or, failing that, from the
  context variable :data:`experiment_id` (set it with :func:`experiment_context`, or let the
  ASGI middleware :class:`ExperimentLogContext` set it from the request path).
* **floods are summarised**: :class:`RateLimitFilter` lets through at most ``rate_max`` records
  per (logger, level, message template) per ``rate_seconds`` seconds (WARNING and above;
  uvicorn's access log is never limited), then writes one line ``<last message> (k similar
  messages suppressed in the last T s)`` when the window ends. A database outage that makes
  every request and the 5-second expiry sweep fail logs a handful of lines a minute, not
  thousands.
* **fatal signals leave a trace**: a SIGSEGV, SIGBUS, SIGFPE, SIGABRT or SIGILL kills the
  process without running ``atexit`` handlers, ``finally`` blocks or logging (a SIGBUS arrives,
  for instance, when SQLite's memory-mapped WAL index, the ``-shm`` file, becomes unwritable:
  disk full, file truncated or removed under the server). No Python code can run then, so an
  ERROR line from an ``atexit`` hook or a signal handler is not possible; :mod:`faulthandler`
  is the tool: enabled on the same stderr stream, it writes ``Fatal Python error: Bus error``
  and every thread's Python traceback from the signal handler in C before the process dies.

:func:`uvicorn_log_config` returns the same set-up as a ``logging.config.dictConfig`` dict
for uvicorn's ``log_config=`` argument, so uvicorn's own loggers (``uvicorn.error``,
``uvicorn.access``) share the handler and formatter, and each worker process that uvicorn
spawns configures itself (faulthandler included) from it.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import faulthandler
import io
import json
import logging
import logging.config
import re
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = [
    "experiment_id", "experiment_context", "ExperimentLogContext", "LogFormatter", "RateLimitFilter",
    "log_handler", "enable_faulthandler", "configure_logging", "uvicorn_log_config", "brief", "FORMATS",
]

FORMATS = ("text", "json")

#: the experiment the current request or task works on (None: not known); the formatter writes it
experiment_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("purebandits_experiment", default=None)

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\x85": "\\x85", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
_EXPERIMENT_PATH = re.compile(r"^/(?:api/experiments|rate|dashboard)/([1-9][0-9]{0,17})(?:/|$)")


@contextlib.contextmanager
def experiment_context(eid: int | None) -> Iterator[None]:
    """Log records made inside the block carry ``experiment=eid``."""
    token = experiment_id.set(eid)
    try:
        yield
    finally:
        experiment_id.reset(token)


class ExperimentLogContext:
    """ASGI middleware: the experiment id of ``/api/experiments/{id}/...``, ``/rate/{id}`` and
    ``/dashboard/{id}`` requests goes into :data:`experiment_id` for the request's log records."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        match = _EXPERIMENT_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None:
            await self.app(scope, receive, send)
            return
        token = experiment_id.set(int(match.group(1)))
        try:
            await self.app(scope, receive, send)
        finally:
            experiment_id.reset(token)


def _safe(text: str) -> str:
    """``text`` with line breaks and control characters escaped and lone surrogates as ``\\udXXX``."""
    if _UNSAFE.search(text):
        text = _UNSAFE.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _utc(created: float) -> str:
    return datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LogFormatter(logging.Formatter):
    """One line per record: ``<time> <LEVEL> <logger> [experiment=<id>] <message>``, or a JSON object.

    ``fmt`` is ``"text"`` or ``"json"``; further keyword arguments (uvicorn passes
    ``use_colors``) are accepted and ignored.
    """

    def __init__(self, fmt: str = "text", **_ignored: Any) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"log format must be one of {FORMATS}, got {fmt!r}")
        super().__init__()
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        eid = getattr(record, "experiment", None)
        if eid is None:
            eid = experiment_id.get()
        try:
            message = record.getMessage()
        except Exception as exc:  # a bad %-format in someone's log call: still one line, not a logging error
            message = f"{record.msg!r} (unformattable with args {record.args!r}: {exc})"
        exc_text = None
        if record.exc_info and record.exc_info[0] is not None:
            exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            exc_text = record.exc_text
        if record.stack_info:
            exc_text = (exc_text + "\n" if exc_text else "") + record.stack_info
        if self.fmt == "json":
            out: dict[str, Any] = {"time": _utc(record.created), "level": record.levelname, "logger": record.name}
            if eid is not None:
                out["experiment"] = eid
            out["message"] = message
            if exc_text:
                out["exc"] = exc_text
            # json escapes line breaks; backslashreplace turns a lone surrogate into the JSON escape \udXXX
            return json.dumps(out, ensure_ascii=False, default=str).encode("utf-8", "backslashreplace").decode()
        parts = [_utc(record.created), record.levelname, record.name]
        if eid is not None:
            parts.append(f"experiment={_safe(str(eid))}")
        parts.append(_safe(message))
        line = " ".join(parts)
        if exc_text:
            line += "".join("\n  " + _safe(t) for t in exc_text.splitlines())
        return line


@dataclass
class _Window:
    start: float
    passed: int = 0
    suppressed: int = 0
    last: logging.LogRecord | None = None


_FILTERS: weakref.WeakSet[RateLimitFilter] = weakref.WeakSet()


class RateLimitFilter(logging.Filter):
    """At most ``max_records`` records per (logger, level, message template) per ``per_seconds`` seconds.

    The message template is the unformatted ``msg`` (``"database error on %s %s: %s"``), so
    the same failure on different paths or with different error texts counts as one key.
    Records below ``min_level`` and from loggers in ``exclude`` (and their children) always
    pass; ``max_records <= 0`` turns limiting off. Once a key's window of ``per_seconds``
    seconds is over, a summary record ``<last suppressed message> (k similar messages
    suppressed in the last T s)`` at the same level and logger goes to ``sink`` (the handler's
    ``handle`` when :func:`log_handler` installs the filter; else the record's logger) -- when
    the next record of any key arrives, or on :meth:`flush` (also run at interpreter exit).
    ``clock`` (monotonic seconds) is injectable for tests.
    """

    def __init__(self, max_records: int = 5, per_seconds: float = 60.0, *, min_level: int = logging.WARNING,
                 exclude: tuple[str, ...] = ("uvicorn.access",), clock: Callable[[], float] = time.monotonic,
                 sink: Callable[[logging.LogRecord], Any] | None = None, max_keys: int = 1000) -> None:
        super().__init__()
        self.max_records, self.per_seconds = int(max_records), float(per_seconds)
        self.min_level, self.exclude = int(min_level), tuple(exclude)
        self.clock, self.sink, self.max_keys = clock, sink, int(max_keys)
        self._windows: dict[tuple[str, int, str], _Window] = {}
        self._lock = threading.Lock()
        self._next_sweep = -float("inf")
        _FILTERS.add(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if (self.max_records <= 0 or record.levelno < self.min_level or getattr(record, "rate_limit_summary", False)
                or any(record.name == x or record.name.startswith(x + ".") for x in self.exclude)):
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        due: list[logging.LogRecord] = []
        with self._lock:
            if now >= self._next_sweep:  # summaries of other keys' windows that are over
                self._next_sweep = now + min(1.0, self.per_seconds)
                for k, w in list(self._windows.items()):
                    if now - w.start >= self.per_seconds:
                        self._close(k, w, due)
            w = self._windows.get(key)
            if w is not None and now - w.start >= self.per_seconds:
                self._close(key, w, due)
                w = None
            if w is None:
                while len(self._windows) >= self.max_keys:
                    oldest = next(iter(self._windows))
                    self._close(oldest, self._windows[oldest], due)
                w = self._windows[key] = _Window(start=now)
            if w.passed < self.max_records:
                w.passed += 1
                allow = True
            else:
                w.suppressed += 1
                w.last = record
                allow = False
        for summary in due:
            self._emit(summary)
        return allow

    def flush(self) -> None:
        """Write the summary of every window that suppressed records, now (and start those windows afresh)."""
        due: list[logging.LogRecord] = []
        with self._lock:
            for k, w in list(self._windows.items()):
                if w.suppressed:
                    self._close(k, w, due)
        for summary in due:
            self._emit(summary)

    def _close(self, key: tuple[str, int, str], w: _Window, due: list[logging.LogRecord]) -> None:
        del self._windows[key]
        if w.suppressed and w.last is not None:
            due.append(self._summary(w.last, w.suppressed))

    def _summary(self, last: logging.LogRecord, k: int) -> logging.LogRecord:
        try:
            text = last.getMessage()
        except Exception:
            text = str(last.msg)
        summary = logging.LogRecord(
            last.name, last.levelno, last.pathname, last.lineno,
            "%s (%d similar message%s suppressed in the last %s s)",
            (text, k, "" if k == 1 else "s", f"{self.per_seconds:g}"), None, last.funcName)
        summary.rate_limit_summary = True
        if getattr(last, "experiment", None) is not None:
            summary.experiment = last.experiment
        return summary

    def _emit(self, summary: logging.LogRecord) -> None:
        try:
            if self.sink is not None:
                self.sink(summary)
            else:
                logging.getLogger(summary.name).handle(summary)
        except Exception:  # logging must not take the service down
            pass


@atexit.register
def _flush_filters() -> None:
    for f in list(_FILTERS):
        f.flush()


def enable_faulthandler(stream: TextIO | None = None) -> bool:
    """Turn :mod:`faulthandler` on, writing to ``stream`` (default stderr, the log stream), for every thread.

    A stream without a file descriptor (a test's StringIO) falls back to the process's stderr.
    Returns whether faulthandler is enabled.
    """
    target = stream if stream is not None else sys.stderr
    for candidate in (target, sys.__stderr__):
        if candidate is None:
            continue
        try:
            candidate.fileno()
            faulthandler.enable(file=candidate, all_threads=True)
            return True
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            continue
    return faulthandler.is_enabled()


def log_handler(fmt: str = "text", stream: TextIO | None = None, rate_max: int = 5, rate_seconds: float = 60.0,
                fault_handler: bool = True) -> logging.Handler:
    """A stderr handler with :class:`LogFormatter` and :class:`RateLimitFilter` (summaries into it).

    With ``fault_handler`` it also enables :func:`enable_faulthandler` on the same stream; as
    the factory of the dict from :func:`uvicorn_log_config`, this runs in every worker process.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(LogFormatter(fmt))
    handler.addFilter(RateLimitFilter(rate_max, rate_seconds, sink=handler.handle))
    if fault_handler:
        enable_faulthandler(handler.stream)
    return handler


def _level(level: str | int) -> int | str:
    if isinstance(level, int):
        return level
    name = str(level).upper()
    if name == "TRACE":  # uvicorn's level 5
        return 5
    if not isinstance(logging.getLevelName(name), int):
        raise ValueError(f"unknown log level {level!r}")
    return name


def uvicorn_log_config(level: str | int = "INFO", fmt: str = "text", *, rate_max: int = 5,
                       rate_seconds: float = 60.0, fault_handler: bool = True) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dict for ``uvicorn.run(log_config=...)``: one handler on the root logger.

    uvicorn, uvicorn.error and uvicorn.access propagate to it (uvicorn still sets their level
    from its ``log_level`` and drops the access log with ``access_log=False``); the formatters
    are named ``default`` and ``access`` as in uvicorn's own config, so its ``use_colors``
    option finds them.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, got {fmt!r}")
    lvl = _level(level)
    formatter = {"()": f"{__name__}.LogFormatter", "fmt": fmt}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": dict(formatter), "access": dict(formatter)},
        "handlers": {
            "default": {"()": f"{__name__}.log_handler", "formatter": "default", "fmt": fmt,
                        "stream": "ext://sys.stderr", "rate_max": rate_max, "rate_seconds": rate_seconds,
                        "fault_handler": fault_handler},
        },
        "loggers": {
            "uvicorn": {"handlers": [], "level": lvl, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": lvl, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": lvl, "propagate": True},
            # a line per plugin every time the migrations load: noise
            "alembic.runtime.plugins": {"handlers": [], "level": "WARNING", "propagate": True},
        },
        "root": {"handlers": ["default"], "level": lvl},
    }


def configure_logging(level: str | int = "INFO", fmt: str = "text", *, stream: TextIO | None = None,
                      rate_max: int = 5, rate_seconds: float = 60.0, fault_handler: bool = True) -> logging.Handler:
    """Log every logger through one stderr handler (see the module docstring); returns the handler.

    Replaces the root logger's handlers (calling it again reconfigures); ``stream`` defaults
    to stderr; ``fault_handler`` enables :mod:`faulthandler` on the same stream.
    """
    config = uvicorn_log_config(level, fmt, rate_max=rate_max, rate_seconds=rate_seconds,
                                fault_handler=fault_handler)
    for old in logging.getLogger().handlers:  # pending summaries go out through the handler that counted them
        for f in old.filters:
            if isinstance(f, RateLimitFilter):
                f.flush()
    if stream is not None:
        config["handlers"]["default"]["stream"] = stream
    logging.config.dictConfig(config)
    return logging.getLogger().handlers[0]


def brief(exc: BaseException, limit: int = 300) -> str:
    """``exc`` for a log line: ``Type: first line of its message``, at most ``limit`` characters.

    SQLAlchemy's errors carry the SQL statement and a link on further lines; the first line
    says what went wrong (``(sqlite3.OperationalError) database is locked``).
    """
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"
