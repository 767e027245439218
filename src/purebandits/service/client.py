"""A small client of the service's HTTP API over the standard library (``urllib.request``).

JSON in and out; an error response (4xx / 5xx) raises :class:`ApiError` with the server's
``detail`` message and the status; 503 (database unavailable) and connection failures are
retried a few times with exponential backoff (503 honours ``Retry-After``). A server that
cannot be reached raises :class:`ServerUnreachable`, whose message names the URL.

>>> api = ServiceClient("http://127.0.0.1:8000", token="...")   # doctest: +SKIP
>>> api.get(f"/api/experiments/{eid}")["status"]                  # doctest: +SKIP
'active'

Participants' side, a pairwise experiment (``"query": "pairwise"``) as an example:

>>> pid = api.new_participant()                                   # doctest: +SKIP
>>> q = api.ask(eid, pid)                                          # doctest: +SKIP
>>> [item["id"] for item in q["items"]]                            # doctest: +SKIP
['c3', 'c0']
>>> api.answer(q["query_id"], pid, pair_label(q, "c0"))["label"]   # doctest: +SKIP
'right'
"""

from __future__ import annotations

import email.message
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from purebandits import __version__

__all__ = ["ServiceClient", "Response", "ClientError", "ApiError", "ServerUnreachable", "filename_from_disposition",
           "pair_label", "EXPORTS"]

#: what :meth:`ServiceClient.export` downloads: name -> (path under the experiment, fixed query parameters);
#: ``pairs`` is a pairwise experiment's comparisons in crowd-kit's format, ``wins`` its win matrix
EXPORTS: dict[str, tuple[str, dict[str, str]]] = {
    "answers": ("answers.csv", {}), "summary": ("summary.csv", {}), "participants": ("participants.csv", {}),
    "history": ("history.csv", {}), "crowdkit": ("answers.csv", {"format": "crowdkit"}),
    "pairs": ("answers.csv", {"format": "crowdkit"}), "wins": ("wins.csv", {}),
}

#: methods that may be sent again after a connection failed half-way (the server may have acted on them)
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class ClientError(Exception):
    """Base class of the client's errors; ``str(exc)`` is a message fit for a user."""


class ApiError(ClientError):
    """The server answered with an error status; ``status`` and the server's ``detail`` message."""

    def __init__(self, status: int, detail: str, method: str = "", url: str = "") -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status, self.detail, self.method, self.url = status, detail, method, url


class ServerUnreachable(ClientError):
    """No answer from the server (connection refused, DNS failure, timeout) after the retries."""

    def __init__(self, base_url: str, reason: str) -> None:
        super().__init__(f"cannot reach the purebandits server at {base_url}: {reason} "
                         "(is `purebandits serve` running there? set --server or PUREBANDITS_SERVER)")
        self.base_url, self.reason = base_url, reason


@dataclass
class Response:
    """A successful response: status, headers (lower-case names) and the raw body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        """The body parsed as JSON (``None`` for an empty body)."""
        return json.loads(self.body) if self.body else None

    @property
    def filename(self) -> str | None:
        """The file name the server suggests in ``Content-Disposition``, if any (a bare name, no directories)."""
        return filename_from_disposition(self.headers.get("content-disposition"))


def filename_from_disposition(value: str | None) -> str | None:
    """The ``filename`` parameter of a ``Content-Disposition`` header, reduced to a bare file name (no path)."""
    if not value:
        return None
    msg = email.message.Message()
    msg["content-disposition"] = value
    name = msg.get_filename()
    if not name:
        return None
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name if name not in ("", ".", "..") else None


class ServiceClient:
    """Client of one purebandits server.

    Parameters
    ----------
    base_url : str
        e.g. ``http://127.0.0.1:8000`` (a trailing slash is ignored).
    token : str, optional
        Sent as ``Authorization: Bearer <token>``: an experiment's owner token, or the admin token.
    retries : int, default=3
        Extra attempts after a 503 or a connection failure (a failure half-way through a
        non-idempotent request, such as a reset after the request was sent, is not retried;
        a refused connection always is: nothing reached the server).
    backoff : float, default=0.25
        Seconds before the first retry; doubled every time (a 503's ``Retry-After`` wins, up to 10 s).
    timeout : float, default=30
        Socket timeout per attempt, in seconds.
    """

    def __init__(self, base_url: str, token: str | None = None, *, retries: int = 3, backoff: float = 0.25,
                 timeout: float = 30.0) -> None:
        base_url = base_url.strip().rstrip("/")
        if "://" not in base_url:
            base_url = "http://" + base_url
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ClientError(f"server URL must look like http://host:port, got {base_url!r}")
        self.base_url = base_url
        self.token = token or None
        self.retries, self.backoff, self.timeout = max(0, int(retries)), float(backoff), float(timeout)
        # no proxies: the service is usually on loopback, and a proxy would garble its error bodies
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # ------------------------------------------------------------------ requests
    def request(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
                auth: bool = True) -> Response:
        """Send one request (``body`` as JSON when not None) and return the response; raise on an error status."""
        url = self.base_url + path
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json, text/csv;q=0.9, */*;q=0.5",
                   "User-Agent": f"purebandits-cli/{__version__}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        delay = self.backoff
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
            except urllib.error.HTTPError as exc:
                raw = exc.read() or b""
                if exc.code == 503 and not last:
                    time.sleep(_retry_after(exc.headers.get("Retry-After"), delay))
                    delay *= 2
                    continue
                raise ApiError(exc.code, _detail(raw, exc.reason), method, url) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                refused = isinstance(reason, ConnectionRefusedError)
                dns = isinstance(reason, socket.gaierror)
                if last or dns or not (refused or method.upper() in IDEMPOTENT):
                    raise ServerUnreachable(self.base_url, _reason_text(reason)) from None
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, path: str, **params: Any) -> Any:
        """GET ``path`` (query ``params``) and return the JSON body."""
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any = None) -> Any:
        """POST ``body`` as JSON to ``path`` and return the JSON body."""
        return self.request("POST", path, body).json()

    def delete(self, path: str) -> Any:
        """DELETE ``path`` and return the JSON body."""
        return self.request("DELETE", path).json()

    # ------------------------------------------------------------------ the owner API
    def create_experiment(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/experiments``: ``{id, owner_token, participant_url, dashboard_url}``."""
        return self.post("/api/experiments", spec)

    def list_experiments(self) -> list[dict[str, Any]]:
        """``GET /api/experiments``: every experiment, oldest first (admin token when the server has one)."""
        return self.get("/api/experiments")["experiments"]

    def experiment(self, eid: int) -> dict[str, Any]:
        """``GET /api/experiments/{eid}``: settings and status."""
        return self.get(f"/api/experiments/{eid}")

    def set_status(self, eid: int, action: str) -> dict[str, Any]:
        """``POST /api/experiments/{eid}/{action}`` with action pause, resume, stop or archive: ``{id, status}``."""
        if action not in ("pause", "resume", "stop", "archive"):
            raise ValueError(f"unknown action {action!r}")
        return self.post(f"/api/experiments/{eid}/{action}")

    def delete_experiment(self, eid: int) -> dict[str, Any]:
        """``DELETE /api/experiments/{eid}``: ``{id, deleted: true}``."""
        return self.delete(f"/api/experiments/{eid}")

    def results(self, eid: int, algorithm: str | None = None, timeline: bool = False) -> dict[str, Any]:
        """``GET /api/experiments/{eid}/results``: one learner's ranking (default the first learner)."""
        return self.get(f"/api/experiments/{eid}/results", algorithm=algorithm,
                        timeline=None if timeline else "false")

    def certificate(self, eid: int, learner: str | None = None, rivals: int | None = None) -> dict[str, Any]:
        """``GET /api/experiments/{eid}/certificate``: whether the empirical top k holds at the asked delta."""
        return self.get(f"/api/experiments/{eid}/certificate", learner=learner, rivals=rivals)

    def bradley_terry(self, eid: int, learner: str | None = None, alpha: float | None = None) -> dict[str, Any]:
        """``GET /api/experiments/{eid}/bradley-terry``: a pairwise experiment's Bradley-Terry strengths, with the
        comparison graph's connectivity (every learner's comparisons pooled unless ``learner``)."""
        return self.get(f"/api/experiments/{eid}/bradley-terry", learner=learner, alpha=alpha)

    def export(self, eid: int, what: str, algorithm: str | None = None) -> Response:
        """A CSV export of :data:`EXPORTS` (answers, summary, participants, history, crowdkit, and for a pairwise
        experiment pairs and wins): the raw response. ``algorithm`` picks a learner (summary and history by
        default the first; wins by default every learner's comparisons pooled)."""
        if what not in EXPORTS:
            raise ValueError(f"unknown export {what!r}; one of {sorted(EXPORTS)}")
        path, params = EXPORTS[what]
        choice = {"learner" if what == "wins" else "algorithm": algorithm}
        return self.request("GET", f"/api/experiments/{eid}/{path}", params={**params, **choice})

    # ------------------------------------------------------------------ the participants' API
    def new_participant(self, participant_id: str | None = None) -> str:
        """``POST /api/participants``: a new anonymous participant id, or ``participant_id`` registered."""
        body = None if participant_id is None else {"participant_id": participant_id}
        return self.request("POST", "/api/participants", body, auth=False).json()["participant_id"]

    def ask(self, eid: int, participant_id: str, n: int | None = None) -> dict[str, Any]:
        """``POST /api/experiments/{eid}/queries``: the next query (``state`` ``ok`` with ``item``, or in a pairwise
        experiment ``items`` = [left, right]; or why there is none), or with ``n`` up to n of them (``queries``)."""
        body: dict[str, Any] = {"participant_id": participant_id}
        if n is not None:
            body["n"] = n
        return self.request("POST", f"/api/experiments/{eid}/queries", body, auth=False).json()

    def answer(self, query_id: str, participant_id: str, label: str) -> dict[str, Any]:
        """``POST /api/queries/{query_id}/answer``: ``label`` is one of the query's labels (``left`` or ``right``
        in a pairwise experiment: :func:`pair_label`), or ``skip`` where allowed. Answering again with the same
        label is safe (the same response, counted once), so a retry after a lost response loses nothing."""
        return self.request("POST", f"/api/queries/{query_id}/answer",
                            {"participant_id": participant_id, "label": label}, auth=False).json()

    def release(self, query_id: str, participant_id: str) -> dict[str, Any]:
        """``POST /api/queries/{query_id}/release``: give back a query this participant will not answer."""
        return self.request("POST", f"/api/queries/{query_id}/release", {"participant_id": participant_id},
                            auth=False).json()


def pair_label(query: dict[str, Any], better: str) -> str:
    """The answer to a pairwise query that says item ``better`` (its id) is the better one: ``left`` or ``right``."""
    ids = [item["id"] for item in query.get("items") or ()]
    if better not in ids:
        raise ValueError(f"item {better!r} is not in this query (its items: {ids})")
    return "left" if ids[0] == better else "right"


def _detail(raw: bytes, reason: Any) -> str:
    """The server's ``detail`` message from an error body (JSON), else the body's text or the reason phrase."""
    try:
        body = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        return text[:300] if text and not text.lstrip().startswith("<") else str(reason or "error")
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return detail
    if detail is not None:
        return json.dumps(detail)
    return str(reason or "error")


def _retry_after(value: str | None, default: float) -> float:
    try:
        return min(10.0, max(0.0, float(value))) if value else default
    except ValueError:
        return default


def _reason_text(reason: Any) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror or reason})"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return str(getattr(reason, "strerror", None) or reason)
