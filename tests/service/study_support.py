"""Shared by the protocol tests: a fake clock, a Study on a migrated database, the app under uvicorn."""

from __future__ import annotations

import threading
import time

from purebandits.service.app import create_app
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


class LiveApp:
    """``create_app(settings)`` under uvicorn in a thread (public_url unset: root-relative links)."""

    def __init__(self, settings: Settings) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=0,
                                                    log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
