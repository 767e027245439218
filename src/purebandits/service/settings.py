"""Service settings, read from the environment (prefix ``PUREBANDITS_``).

Plain dataclass rather than pydantic-settings, to keep dependencies few: every field ``x``
can be set with the environment variable ``PUREBANDITS_X`` (e.g. ``PUREBANDITS_DATABASE_URL``).
The secrets (:data:`SECRET_FIELDS`: the database URL, which may hold a password, and the admin
token) can also come from a file named by ``PUREBANDITS_X_FILE`` that only its owner may read
(as Docker and systemd pass secrets), so they appear neither on a command line, where ``ps``
shows them to every user of the machine, nor in a shell's history.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["SECRET_FIELDS", "Settings", "normalize_url", "read_secret_file", "url_password"]

ENV_PREFIX = "PUREBANDITS_"

#: settings that may also be read from a file named by ``PUREBANDITS_<NAME>_FILE``
SECRET_FIELDS = ("database_url", "admin_token")


def read_secret_file(path: str | os.PathLike[str], what: str) -> str:
    """The secret in ``path`` (surrounding whitespace stripped), which must be readable by its owner only
    (mode 0600 or 0400, as ssh wants of a key): ValueError naming ``what`` otherwise, or if it is empty."""
    p = Path(path)
    try:
        mode = stat.S_IMODE(p.stat().st_mode)
        if mode & 0o077:
            raise ValueError(f"{what}: {p} may be read by other users (mode {mode:o}); chmod 600 {p}")
        value = p.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {p}: {exc.strerror or exc}") from None
    if not value:
        raise ValueError(f"{what}: {p} is empty")
    return value


def url_password(url: str) -> bool:
    """Whether a database URL carries a password (``postgresql://user:secret@host/db``)."""
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _default_url() -> str:
    return f"sqlite:///{Path.cwd() / 'purebandits.sqlite'}"


def normalize_url(url: str) -> str:
    """Map ``postgresql://`` and ``postgres://`` to the psycopg 3 driver SQLAlchemy should use."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


@dataclass
class Settings:
    """Configuration of one service instance.

    Parameters
    ----------
    database_url : str
        SQLAlchemy URL; default ``sqlite:///<cwd>/purebandits.sqlite`` (WAL mode).
        ``postgresql://user@host/db`` uses PostgreSQL through psycopg 3. Keep a password out of
        it: libpq reads it from the password file (``~/.pgpass`` or ``PGPASSFILE``, mode 0600), or
        give the whole URL in a file, ``PUREBANDITS_DATABASE_URL_FILE=/path`` (mode 0600).
    query_expiry_seconds : float, default=300
        A pending query not answered within this time is expired and cancelled in the learner.
    expire_interval_seconds : float, default=5
        How often a background task looks for stale queries (they are also expired lazily on
        every ask).
    ask_rate_per_second, ask_burst : float, default=10, 30
        Per-participant token bucket on asks (per worker process); over it -> 429.
    participant_rate_per_second, participant_burst : float, default=1, 60
        New participant ids per client address: at most ``participant_burst`` in any
        ``participant_burst / participant_rate_per_second`` seconds (60 a minute), counted in
        the database so the limit holds across worker processes, and so minting ids cannot get
        around the per-participant limit; 0 disables.
    create_rate_per_second, create_burst : float, default=1/60, 20
        The same for new experiments per client address, when the server has no admin token
        (anyone may create): 20 in any 20 minutes. An address is the connecting peer's unless
        ``forwarded_allow_ips`` trusts it as a proxy; an IPv6 address counts by its /64.
    max_body_bytes : int, default=5_000_000
        Requests with a larger body get 413.
    db_wait_seconds : float, default=2
        The longest a request waits for a lock (a learner's, another process's SQLite write
        lock, PostgreSQL's ``lock_timeout``) or for the database to answer; then 503 with
        ``Retry-After`` (nothing is acknowledged, so a retry is safe). The event loop itself
        never waits: database work that could block runs in worker threads.
    db_statement_timeout_seconds : float, default=30
        PostgreSQL ``statement_timeout`` of every statement (owner exports included).
    db_threads : int, default=8
        Worker threads that run participants' database transactions which may wait; as many more
        (at least 4) run the pages and owner endpoints that read the database.
    reissue_after_seconds : float, default=20
        When a learner that works in rounds has nothing to hand out until pending queries come
        back, a pending query older than this is cancelled (its answer will get 410) and its pull
        handed to the participant asking, so abandoned queries never hold the algorithm up for
        the whole ``query_expiry_seconds``. Only to a participant who answers: never to an id that
        abandoned a query of the experiment (cancelled unanswered by a reissue or expiry; a released
        one was given back), and to an id with no answer yet only once the query is twice this old.
    reissue_abandoned_per_address : int, default=10
        An address (of the participants' registrations) whose ids abandoned this many queries of an
        experiment gets no more reissued pulls in it (``waiting``), so fresh ids minted from one
        address cannot each take and abandon one. 0 turns the cap off.
    forwarded_allow_ips : str, default=""
        The proxies whose ``X-Forwarded-For`` (and ``X-Forwarded-Proto``) headers are believed, as
        uvicorn's ``--forwarded-allow-ips`` takes them (comma-separated addresses or networks, ``*``
        for any). Empty (the default): none, every limit counts the connecting address; behind a
        reverse proxy, set it to the proxy's address (``purebandits serve --forwarded-allow-ips``),
        and make the proxy overwrite the header, not pass on the client's. ``purebandits serve``
        applies it (and ignores uvicorn's ``FORWARDED_ALLOW_IPS``); an app run under uvicorn
        directly gets uvicorn's own option.
    history_every : int, default=100
        A point of each learner's results over time (its leaders with their intervals and its
        stopping progress, ``GET /api/experiments/{id}/history``) every this many of its answers,
        and one when it stops. 0 keeps none.
    webhooks : bool or None, default=None
        Whether owners may set a webhook that is called once when every learner of their
        experiment has stopped. None (the default): on when the server has an ``admin_token``,
        off otherwise (anyone may create an experiment there, and the server makes the call);
        ``PUREBANDITS_WEBHOOKS=1`` turns them on regardless, ``0`` off (``auto``: the default).
    webhook_allow_internal : bool, default=False
        Let webhooks go to addresses that are not public (loopback, private, link-local, ...: the
        server's own network). Off, a URL whose host is or resolves to such an address is refused
        when set (422) and when called; on, for an operator whose receivers are internal.
    webhook_timeout_seconds : float, default=10
        How long one try of a webhook call may take in all (connect, TLS, request, answer); it is
        tried up to 3 times.
    snapshot_every : int, default=200
        Store the learner's state snapshot every this many events (it is a cache: the event
        log is the source of truth).
    cache_experiments : int, default=64
        Experiments (settings and items) and learners each process keeps in memory, least
        recently used first out; the others are reloaded from the database (learners from
        their snapshot and log) when next used.
    cache_items : int, default=500_000
        The same caches also hold at most this many items in all (an experiment's settings and
        its learners each count its number of items; about 0.5 kB each), so a few experiments
        of 100,000 items cannot take the memory that 64 small ones would not.
    admin_token : str or None
        If set, creating experiments needs ``Authorization: Bearer <admin_token>``; the admin
        token also opens every experiment's owner endpoints. Like ``database_url``, it may come
        from a file: ``PUREBANDITS_ADMIN_TOKEN_FILE=/path`` (mode 0600).
    auto_migrate : bool, default=True
        Run the Alembic migrations when the app starts (``serve`` runs them once before
        starting workers and turns this off in them).
    verify_on_start : bool, default=True
        Rebuild every experiment's learner after startup, in the background while the server
        serves, by replaying its log from its last verified checkpoint (from the start if it has
        none, or a corrupt one) and compare it with the stored snapshot; a learner not verified
        yet is served from its checkpoint and log (or 503 until its replay is done), never from
        its snapshot. A snapshot that differs is replaced by the replay from the checkpoint, which
        is served, and settled by a low-priority full replay in the background.
    verify_interval_seconds : float, default=5
        How often a background task moves each learner's verified checkpoint up to its current
        version (replaying the events since the last one, checking the snapshot on the way), so a
        restart replays only the events of the last few seconds. 0 turns it off: a restart then
        replays everything since the last start.
    warm_all_learners : bool, default=True
        At startup, compile every registered learner's kernels into numba's on-disk cache in a
        low-priority background process (about 2 minutes of one core, once per installation and
        version), so that creating an experiment with a learner no experiment used yet does not
        wait for its compile (up to ~40 s). See :mod:`purebandits.service.warmup`.
    mturk_submit_origins : str
        The origins (space-separated) a rating page opened from Mechanical Turk may post its assignment to:
        the page's ``turkSubmitTo`` parameter must be one of them (a link cannot send a participant's completion
        code elsewhere), and the page's ``form-action`` policy allows them. Default MTurk's production and sandbox
        sites; a test adds a local stand-in.
    public_url : str or None
        The service's public base URL (``https://bandits.example.org``): the ``participant_url`` and
        ``dashboard_url`` of the API's answers start with it, and ``serve --demo`` prints it. Never
        taken from the request's ``Host`` header, which the client chooses. None (the default): the
        API gives root-relative URLs (``/rate/5``); ``purebandits serve`` sets it from ``--host`` and
        ``--port`` when neither this nor ``PUREBANDITS_PUBLIC_URL`` is given and the host is not a
        wildcard address. Behind a reverse proxy, set it to the address participants use.
    log_format : {"text", "json"}, default="text"
        Log lines on stderr: ``text`` (``<ISO time> <LEVEL> <logger> [experiment=<id>] <message>``)
        or ``json`` (one JSON object per line); see :mod:`purebandits.service.logs`.
    log_rate_max, log_rate_seconds : int, float, default=5, 60
        At most ``log_rate_max`` warnings (or errors) with the same logger, level and message
        template per ``log_rate_seconds``; the rest are counted and summarised in one line.
        0 turns the limit off.
    """

    database_url: str = field(default_factory=_default_url)
    query_expiry_seconds: float = 300.0
    expire_interval_seconds: float = 5.0
    ask_rate_per_second: float = 10.0
    ask_burst: float = 30.0
    participant_rate_per_second: float = 1.0
    participant_burst: float = 60.0
    create_rate_per_second: float = 1 / 60
    create_burst: float = 20.0
    max_body_bytes: int = 5_000_000
    db_wait_seconds: float = 2.0
    db_statement_timeout_seconds: float = 30.0
    db_threads: int = 8
    reissue_after_seconds: float = 20.0
    reissue_abandoned_per_address: int = 10
    forwarded_allow_ips: str = ""
    history_every: int = 100
    webhooks: bool | None = None
    webhook_allow_internal: bool = False
    webhook_timeout_seconds: float = 10.0
    snapshot_every: int = 200
    cache_experiments: int = 64
    cache_items: int = 500_000
    admin_token: str | None = None
    auto_migrate: bool = True
    verify_on_start: bool = True
    verify_interval_seconds: float = 5.0
    warm_all_learners: bool = True
    public_url: str | None = None
    mturk_submit_origins: str = "https://www.mturk.com https://workersandbox.mturk.com"
    log_format: str = "text"
    log_rate_max: int = 5
    log_rate_seconds: float = 60.0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``PUREBANDITS_*`` variables, then ``overrides``."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            var = ENV_PREFIX + f.name.upper()
            raw = env.get(var)
            if f.name in SECRET_FIELDS and env.get(var + "_FILE"):
                if raw is not None:
                    raise ValueError(f"both {var} and {var}_FILE are set; set one")
                raw = read_secret_file(env[var + "_FILE"], var + "_FILE")
            if raw is None:
                continue
            values[f.name] = _parse(f.name, f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment variables that reproduce these settings (for worker processes)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[ENV_PREFIX + f.name.upper()] = str(int(value)) if isinstance(value, bool) else str(value)
        return out

    @property
    def webhooks_on(self) -> bool:
        """Whether owners may set webhooks: ``webhooks``, or when it is None, whether there is an admin token."""
        return bool(self.admin_token) if self.webhooks is None else bool(self.webhooks)

    @property
    def url(self) -> str:
        return normalize_url(self.database_url)


def _parse(name: str, type_: Any, raw: str) -> Any:
    t = str(type_)
    try:
        if t.startswith("bool"):
            if t.endswith("None") and raw.lower() in ("", "auto", "none"):
                return None
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if t.startswith("int"):
            return int(raw)
        if t.startswith("float"):
            return float(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name.upper()}: cannot parse {raw!r} as {t}") from None
    return raw
