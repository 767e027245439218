"""ASGI middleware: request body size limit (413) and security headers."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

__all__ = ["BodySizeLimit", "SecurityHeaders", "CONTENT_SECURITY_POLICY", "DASHBOARD_CSP", "docs_csp"]


class BodySizeLimit:
    """Reject requests whose body exceeds ``max_bytes`` with 413, declared or streamed.

    The body (at most ``max_bytes``) is read before the app runs and handed on in one
    message, so an oversized chunked upload is refused before any handler sees it.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, int(max_bytes)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._reject(send)
                    return
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # client went away
            body = message.get("body", b"")
            seen += len(body)
            if seen > self.max_bytes:
                await self._reject(send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return buffered
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Any) -> None:
        body = json.dumps({"detail": f"request body too large (limit {self.max_bytes} bytes)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- security headers
#: The pages' policy: every script, style and font from this origin (the templates have no inline
#: script or style: their data sits in ``<script type="application/json">`` blocks, which are not
#: run, and the scripts set styles through the CSSOM, which the policy allows). Images may also come
#: from ``data:`` (the new-experiment form previews the chosen image as a data URL) and from any
#: http(s) URL, because an item's ``image_url`` may point to another site.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data: https: http:; connect-src 'self'; object-src 'none'; "
                           "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

_COMMON = ((b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
           # the dashboard's URL carries the owner token in its fragment: send no Referer at all
           (b"referrer-policy", b"no-referrer"))
_PAGE_HEADERS = ((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()), *_COMMON)
_NO_STORE_HEADERS = (*_PAGE_HEADERS, (b"cache-control", b"no-store"))
#: the rating page may be framed: crowd-work platforms show it inside their own page (an MTurk
#: ExternalQuestion is an iframe); it holds no owner data and its only actions are a participant's own
_RATE_HEADERS = ((b"content-security-policy",
                  CONTENT_SECURITY_POLICY.replace("frame-ancestors 'none'", "frame-ancestors https: http:").encode()),
                 *_COMMON[1:])
#: the dashboard draws its charts with BokehJS, which styles its widgets (inside their shadow roots) with
#: ``<style>`` elements it writes at run time, some with sizes computed from the layout -- so no hash list
#: can allow them and BokehJS sets no nonce: the dashboard alone gets ``style-src 'unsafe-inline'``
#: (inline *styles* only: scripts stay ``'self'``, no eval). To take back what injected CSS could do
#: with that (load a URL built from the page's content), its images are limited to this origin and
#: ``data:`` (BokehJS's toolbar icons); the dashboard shows no item images.
DASHBOARD_CSP = (CONTENT_SECURITY_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
                 .replace("img-src 'self' data: https: http:", "img-src 'self' data:"))
_DASHBOARD_HEADERS = ((b"content-security-policy", DASHBOARD_CSP.encode()), *_COMMON)
_RATE_NAMES = frozenset(name for name, _ in _RATE_HEADERS)
_PAGE_NAMES = frozenset(name for name, _ in _PAGE_HEADERS)
_NO_STORE_NAMES = frozenset(name for name, _ in _NO_STORE_HEADERS)
#: public endpoints under /api/experiments/{eid} that may be cached (the image route sets its own caching)
_PUBLIC_SUFFIXES = ("/public", "/image")
_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc\s*=)[^>]*>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)


def docs_csp(html: bytes) -> str:
    """The policy of the API documentation pages (Swagger UI, ReDoc, Swagger's OAuth2 redirect) for ``html``.

    fastapi-offline serves their scripts and styles from this origin, but the pages FastAPI renders
    around them need more than :data:`CONTENT_SECURITY_POLICY`: Swagger UI is started by an inline
    script (the OAuth2 redirect page is one), so each inline script of this very page is allowed by
    its SHA-256 hash -- no other inline script runs; ReDoc's page has an inline ``<style>`` and ReDoc
    (styled-components) and Swagger UI insert ``<style>`` elements at run time, hence
    ``style-src 'unsafe-inline'``; ReDoc runs its search index in a ``blob:`` worker; and the
    bundled CSS draws icons from ``data:`` images.
    """
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(m).digest()).decode()}'"
                      for m in _INLINE_SCRIPT.findall(html))
    return (f"default-src 'self'; script-src 'self'{' ' + hashes if hashes else ''}; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data: https:; worker-src 'self' blob:; "
            "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def _no_store(path: str) -> bool:
    """Owner and participant data (everything under ``/api/`` but the public experiment info and image)."""
    return path.startswith("/api/") and not (path.startswith("/api/experiments/") and path.endswith(_PUBLIC_SUFFIXES))


class SecurityHeaders:
    """Add security headers to every HTTP response (pure ASGI: precomputed header tuples, no body copies).

    * ``Content-Security-Policy`` :data:`CONTENT_SECURITY_POLICY` (the dashboard gets :data:`DASHBOARD_CSP`,
      the documentation pages ``docs_paths`` :func:`docs_csp`, computed from their body), ``X-Frame-Options: DENY``,
      ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``;
    * ``Cache-Control: no-store`` on the API's data (everything under ``/api/`` except an experiment's
      public info and image), so owner results, exports and tokens are not kept by browsers or proxies.

    A header the route set itself (e.g. the image's public ``Cache-Control``) is kept, never doubled.
    A redirect whose ``Location`` names the host of the request's ``Host`` header (Starlette's
    trailing-slash redirects build absolute URLs from it) is made root-relative, so the header a
    client sent is never reflected. Add it outermost, so that it also covers the participant fast
    path and the 413 of :class:`BodySizeLimit`.
    """

    def __init__(self, app: Any, docs_paths: tuple[str, ...] = ("/docs", "/docs/oauth2-redirect", "/redoc"),
                 submit_origins: tuple[str, ...] = ()) -> None:
        self.app, self.docs_paths = app, frozenset(docs_paths)
        # the rating page's form may post to a crowd platform's submit URL (MTurk's externalSubmit)
        self.rate_headers = _RATE_HEADERS if not submit_origins else tuple(
            (name, value.replace(b"form-action 'self'", b"form-action 'self' " + " ".join(submit_origins).encode())
             if name == b"content-security-policy" else value) for name, value in _RATE_HEADERS)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in self.docs_paths:
            await self._docs(scope, receive, send)
            return
        if _no_store(path):
            extra, names = _NO_STORE_HEADERS, _NO_STORE_NAMES
        elif path.startswith("/rate/"):
            extra, names = self.rate_headers, _RATE_NAMES
        elif path.startswith("/dashboard/"):
            extra, names = _DASHBOARD_HEADERS, _PAGE_NAMES
        else:
            extra, names = _PAGE_HEADERS, _PAGE_NAMES

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                if present.isdisjoint(names):
                    headers.extend(extra)
                else:
                    headers.extend(h for h in extra if h[0] not in present)
                if 300 <= message["status"] < 400:
                    headers = _relative_location(headers, scope)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _docs(self, scope: dict, receive: Any, send: Any) -> None:
        """Buffer the (small, rarely asked for) documentation page to hash its inline scripts."""
        start: dict | None = None
        chunks: list[bytes] = []

        async def buffered(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            headers = [h for h in start.get("headers", ()) if h[0].lower() != b"content-security-policy"]
            present = {name.lower() for name, _ in headers}
            headers.append((b"content-security-policy", docs_csp(body).encode()))
            headers.extend(h for h in _COMMON if h[0] not in present)
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, buffered)


def _relative_location(headers: list, scope: dict) -> list:
    """``headers`` with a ``Location`` on the request's own ``Host`` made root-relative (``/path?query``)."""
    host = next((v for n, v in scope.get("headers", ()) if n == b"host"), None)
    if not host:
        return headers
    out = []
    for name, value in headers:
        if name.lower() == b"location":
            for scheme in (b"http://", b"https://"):
                prefix = scheme + host
                if value.lower().startswith(prefix.lower()) and value[len(prefix):len(prefix) + 1] in (b"/", b""):
                    value = value[len(prefix):] or b"/"
                    break
        out.append((name, value))
    return out
