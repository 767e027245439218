"""A pre-imported parent that forks fresh service processes on request (fast restarts for the crash harness).

``purebandits serve`` needs several seconds to import numpy / numba / FastAPI on a loaded
machine, which would limit a crash test to a few kills a minute. This process imports all of
that once and then, for each JSON line ``{"port": P, "env": {...}, "log": path}`` on stdin,
forks a child that builds the app with ``create_app(Settings.from_env())`` and serves it with
uvicorn on ``127.0.0.1:P``; it answers with ``{"pid": PID}``. The child is an ordinary
single-process server: it migrates, replays every experiment's log on startup and opens its
own database connections (the zygote never touches the database and starts no threads, so
forking is safe). The crash harness kills children with SIGKILL; the zygote reaps them.

    python benchmarks/reliability/zygote.py     # driven by harness.ServerProc(mode="fork")
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main() -> int:
    import uvicorn  # noqa: F401  (imported before fork)

    import purebandits.algorithms  # noqa: F401
    from purebandits.service.app import create_app  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:  # child
            try:
                _child(req)
            finally:
                os._exit(0)
        print(json.dumps({"pid": pid}), flush=True)
    return 0


def _child(req: dict) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.setsid()  # not in the harness's process group: a Ctrl-C goes to the harness only
    os.environ.update(req.get("env", {}))
    import uvicorn

    from purebandits.service.app import create_app
    from purebandits.service.settings import Settings

    app = create_app(Settings.from_env())
    uvicorn.run(app, host="127.0.0.1", port=int(req["port"]), log_level="warning", access_log=False)


if __name__ == "__main__":
    sys.exit(main())
