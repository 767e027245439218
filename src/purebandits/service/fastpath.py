"""Pure-ASGI fast path for the two hot participant endpoints (ask and answer).

Profiling the server under load showed about a third of its CPU per answered query in
FastAPI / Starlette request handling (routing, dependency solving, pydantic validation and
response serialisation) around a few hundred microseconds of real work. This middleware
serves ``POST /api/experiments/{eid}/queries`` and ``POST /api/queries/{query_id}/answer``
directly when the request is well formed, calling the same :class:`~purebandits.service.dispatch.Dispatcher`
methods with the same rate limiter and rendering the same bodies (``exclude_none`` as the response models
say) and the same error responses. Anything else -- another route, a body that is not a JSON
object with exactly the expected string fields, a path parameter FastAPI would refuse -- is
handed to the FastAPI app unchanged, so validation errors, the OpenAPI schema and every
other endpoint behave exactly as before.

It must sit inside :class:`~purebandits.service.middleware.BodySizeLimit` (the body is at
most ``max_bytes``) and inside Starlette's ``ServerErrorMiddleware`` (an unexpected
exception is a 500 as before); ``create_app`` adds it so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import sqlalchemy.exc

from purebandits.service.crowd import MAX_ITEMS_PER_ASK
from purebandits.service.deps import MAX_ID
from purebandits.service.errors import ServiceError
from purebandits.service.logs import brief

__all__ = ["ParticipantFastPath", "dumps", "query_body", "error_parts", "DB_UNAVAILABLE"]

log = logging.getLogger("purebandits.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DB_UNAVAILABLE = {"detail": "database unavailable, retry shortly"}
_QUERIES_PREFIX, _QUERIES_SUFFIX = "/api/experiments/", "/queries"
_ANSWER_PREFIX, _ANSWER_SUFFIX = "/api/queries/", "/answer"
_MAX_EID_DIGITS = len(str(MAX_ID))
#: the order of QueryOut's and ItemOut's fields, for the same key order as the response models
_QUERY_KEYS = ("state", "query_id", "experiment_id", "item", "items", "labels", "expires_at", "queries",
               "retry_after", "n_answered", "completion_code", "completion_url", "study_complete")
_ITEM_KEYS = ("id", "text", "image_url")


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as pydantic's ``dump_json`` writes it (no spaces, no ASCII escaping)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def query_body(result: dict[str, Any]) -> dict[str, Any]:
    """``Study.next_query``'s result as ``QueryOut`` with ``exclude_none`` (field order, no nulls)."""
    out = {k: result[k] for k in _QUERY_KEYS if result.get(k) is not None}
    item = out.get("item")
    if item is not None:
        out["item"] = {k: item[k] for k in _ITEM_KEYS if item.get(k) is not None}
    if "items" in out:  # a pairwise query: [left, right]
        out["items"] = [{k: it[k] for k in _ITEM_KEYS if it.get(k) is not None} for it in out["items"]]
    if "queries" in out:
        out["queries"] = [query_body(q) for q in out["queries"]]
    return out


def error_parts(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]] | None:
    """(status, body, headers) of the response the app's exception handlers give ``exc``, or None.

    Shared with :func:`purebandits.service.app.create_app` so both paths answer alike.
    """
    if isinstance(exc, ServiceError):
        headers = {}
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            headers["Retry-After"] = str(max(1, round(retry_after)))
        if exc.status_code == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return exc.status_code, {"detail": exc.message}, headers
    if isinstance(exc, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError):
        return 503, DB_UNAVAILABLE, {"Retry-After": "2"}
    return None


def _eid(segment: str) -> int | None:
    """The experiment id if ``segment`` is a plain decimal FastAPI would accept, else None."""
    if not segment or len(segment) > _MAX_EID_DIGITS or not segment.isascii() or not segment.isdigit() \
            or segment[0] == "0":
        return None
    value = int(segment)
    return value if value <= MAX_ID else None


def _json_content_type(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


class ParticipantFastPath:
    """Serve well-formed ask / answer requests without FastAPI; hand everything else on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        eid: int | None = None
        query_id: str | None = None
        if path.startswith(_QUERIES_PREFIX) and path.endswith(_QUERIES_SUFFIX):
            eid = _eid(path[len(_QUERIES_PREFIX):-len(_QUERIES_SUFFIX)])
        elif path.startswith(_ANSWER_PREFIX) and path.endswith(_ANSWER_SUFFIX):
            segment = path[len(_ANSWER_PREFIX):-len(_ANSWER_SUFFIX)]
            if 1 <= len(segment) <= 64 and "/" not in segment:
                query_id = segment
        if (eid is None and query_id is None) or not _json_content_type(scope):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client went away
        fields = _parse(body, ("participant_id",) if eid is not None else ("participant_id", "label"),
                        ("n",) if eid is not None else ())
        if fields is None:
            await self.app(scope, _replay(body, receive), send)
            return
        app = scope["app"]
        try:
            if eid is not None:
                app.state.limiter.check(fields["participant_id"])
                result = await app.state.dispatcher.ask(eid, fields["participant_id"], fields.get("n"))
                payload = dumps(query_body(result))
            else:
                result = await app.state.dispatcher.answer(query_id, fields["participant_id"], fields["label"])
                payload = dumps({"query_id": result["query_id"], "status": result["status"],
                                 "label": result["label"],
                                 "reward": None if result["reward"] is None else float(result["reward"])})
        except Exception as exc:
            parts = error_parts(exc)
            if parts is None:
                raise
            status, content, headers = parts
            if status == 503:
                log.warning("database error on %s %s: %s", scope["method"], path, brief(exc))
            await _respond(send, status, dumps(content), headers)
            return
        await _respond(send, 200, payload, {})


def _parse(body: bytes, keys: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The body as a dict if it is a JSON object with exactly ``keys`` (each a short string) and any of
    ``optional`` (``n``: an integer from 1 to 10).

    Limits as in ``QueryRequest`` / ``AnswerRequest``; anything else returns None so FastAPI
    produces its usual 400 / 422 response.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # includes UnicodeDecodeError; RecursionError: absurdly nested JSON
        return None
    if not isinstance(data, dict) or not len(keys) <= len(data) <= len(keys) + len(optional):
        return None
    for key in keys:
        value = data.get(key)
        if not isinstance(value, str) or len(value) > (100 if key == "label" else 64):
            return None
    extra = len(data) - len(keys)
    if extra:
        if not optional or "n" not in data:
            return None
        n = data["n"]
        if n.__class__ is not int or not 1 <= n <= MAX_ITEMS_PER_ASK:
            return None
    return data


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _respond(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    raw.extend((k.lower().encode(), v.encode()) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
