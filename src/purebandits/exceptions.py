"""Exceptions raised by purebandits."""

from __future__ import annotations

__all__ = ["PureBanditsError", "NotStartedError"]


class PureBanditsError(Exception):
    """Base class of every error this package raises on purpose."""


class NotStartedError(PureBanditsError, RuntimeError):
    """A learner was used before ``start(n_arms, seed=...)``."""
