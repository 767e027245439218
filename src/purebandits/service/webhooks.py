"""The owner's webhook: one JSON POST when every learner of an experiment has stopped.

Standard library only (:mod:`urllib.request`): one small request does not justify a client
dependency. Redirects are not followed (a webhook answers where it was registered).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from purebandits import __version__

__all__ = ["post_json", "TRIES"]

#: tries of one call; a connection error or a 5xx is retried after 1 s, then 4 s
TRIES = 3


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def post_json(url: str, payload: dict[str, Any], timeout: float) -> tuple[int | None, str | None]:
    """POST ``payload`` as JSON to ``url``; returns (HTTP status, None) or (status or None, error in words)."""
    body = json.dumps(payload).encode()
    status: int | None = None
    error: str | None = None
    for attempt in range(TRIES):
        if attempt:
            time.sleep(4.0 ** (attempt - 1))
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": f"purebandits/{__version__} webhook"})
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                return int(resp.status), None
        except urllib.error.HTTPError as exc:
            status, error = int(exc.code), f"HTTP {exc.code} {exc.reason}"[:300]
            if exc.code < 500:
                return status, error
        except (urllib.error.URLError, OSError, ValueError) as exc:
            status, error = None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"[:300]
    return status, error
