"""Shared by the protocol tests: a fake clock and a Study on a migrated database."""

from __future__ import annotations

from purebandits.service.settings import Settings
from purebandits.service.storage import make_engine, upgrade
from purebandits.service.study import Study


class Clock:
    """Epoch milliseconds that only move when a test moves them."""

    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def open_study(url: str, clock=None, **kw) -> Study:
    """A Study on ``url`` (migrated to head) with ``Settings(**kw)``."""
    settings = Settings(database_url=url, **kw)
    engine = make_engine(settings.url)
    upgrade(engine)
    return Study(engine, settings, clock=clock)
