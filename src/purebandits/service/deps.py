"""FastAPI dependencies: the per-app Study, the owner token, the rate limiter."""

from __future__ import annotations

import threading
import time
from typing import Annotated

from fastapi import Depends, Header, Path, Request

from purebandits.service.errors import RateLimited
from purebandits.service.study import Study

__all__ = ["StudyDep", "TokenDep", "EidPath", "QueryIdPath", "get_study", "bearer_token", "RateLimiter"]


# Dependencies are ``async def`` on purpose: FastAPI runs a plain ``def`` dependency in the
# thread pool, i.e. two thread hand-offs per request for a dictionary lookup.
async def get_study(request: Request) -> Study:
    """The app's :class:`Study` (a FastAPI dependency)."""
    return request.app.state.study


async def bearer_token(authorization: Annotated[str | None, Header()] = None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


StudyDep = Annotated[Study, Depends(get_study)]
#: experiment ids are 32-bit database keys: a larger number is a 422, never a database overflow
MAX_ID = 2**31 - 1
EidPath = Annotated[int, Path(ge=1, le=MAX_ID, description="experiment id")]
QueryIdPath = Annotated[str, Path(min_length=1, max_length=64, description="query id (from an ask)")]
TokenDep = Annotated[str | None, Depends(bearer_token)]


class RateLimiter:
    """Token bucket per key (a participant id, or a client address): ``rate`` per second, bursts up to ``burst``.

    Kept in process memory, so with N workers a key gets up to N times the rate.
    """

    def __init__(self, rate: float, burst: float, what: str = "this participant") -> None:
        self.rate, self.burst, self.what = float(rate), float(burst), what
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def check(self, key: str) -> None:
        """Take one token from ``key``'s bucket; raise :class:`RateLimited` when it is empty."""
        if self.rate <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                raise RateLimited(f"too many requests for {self.what}; slow down",
                                  retry_after=(1.0 - tokens) / self.rate)
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > 100_000:
                cutoff = now - self.burst / self.rate
                self._buckets = {k: v for k, v in self._buckets.items() if v[1] > cutoff}
