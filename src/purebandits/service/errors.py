"""Errors of the service protocol; each maps to one HTTP status with a message that names the problem."""

from __future__ import annotations

__all__ = [
    "ServiceError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Gone",
    "RateLimited",
    "Unavailable",
    "WouldBlock",
    "ReplayError",
]


class ServiceError(Exception):
    """Base class: ``status_code`` and a human-readable ``message``."""

    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ServiceError):
    """The request is invalid (a bad spec, parameter, item or label): 422."""

    status_code = 422


class Unauthorized(ServiceError):
    """The owner or admin token is missing or wrong: 401."""

    status_code = 401


class Forbidden(ServiceError):
    """An unknown participant, or a query issued to another participant: 403."""

    status_code = 403


class NotFound(ServiceError):
    """No such experiment or query: 404."""

    status_code = 404


class Conflict(ServiceError):
    """The request contradicts the state (a query answered differently, a stopped experiment paused or resumed): 409."""

    status_code = 409


class Gone(ServiceError):
    """The query expired: 410."""

    status_code = 410


class RateLimited(ServiceError):
    """Too many requests; ``retry_after`` seconds become the Retry-After header: 429."""

    status_code = 429

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(ServiceError):
    """The database could not serve the request within the configured wait (a lock held elsewhere, a hung
    or unreachable server): 503 with ``Retry-After``; nothing was acknowledged, so a retry is safe."""

    status_code = 503

    def __init__(self, message: str, retry_after: float = 2.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WouldBlock(Exception):
    """Raised inside :meth:`purebandits.service.study.Study.nowait`: going on would wait for a lock.

    Not an HTTP error: the caller (on the event loop) hands the same call to a worker thread,
    where it may wait, for a bounded time. Raised before anything was committed.
    """


class ReplayError(ServiceError):
    """Replaying the event log did not reproduce a stored ask (a non-deterministic learner)."""

    status_code = 500
