"""Start-up cost of the command line, a service worker's import and a multi-worker server, against the previous code.

Each measurement runs a fresh interpreter (``--repeats`` times, median and max of the wall time, plus the CPU
seconds of the child) from this checkout and from ``--prev-src`` (a source tree of the previous code, e.g. a
``git worktree`` of the commit before), in the same run:

- ``import purebandits``: what every command line start and every spawned worker pays first;
- ``purebandits experiment --help``: the organizer's client (``experiment show`` pays the same, plus one request);
- ``import purebandits.service.app``: a worker building its app;
- ``serve --workers 4`` on SQLite (optional, ``--serve``): from the command to the first ``/healthz`` 200.

    git worktree add /tmp/prev HEAD~1
    PYTHONPATH=src python benchmarks/startup.py --prev-src /tmp/prev/src --serve

On a loaded machine every figure grows (the outside report that led to this saw 8-12 s for the package import and
11.5 s for ``experiment show``); run it on an idle machine for figures comparable with the docs, and read the load
average printed with the table.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "import purebandits": ["-c", "import purebandits"],
    "purebandits experiment --help": ["-m", "purebandits.cli", "experiment", "--help"],
    "import purebandits.service.app": ["-c", "import purebandits.service.app"],
}


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_command(src: Path, args: list[str], repeats: int) -> tuple[float, float, float]:
    """(median wall s, max wall s, median child CPU s) of ``python args`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    walls, cpus = [], []
    for _ in range(repeats):
        cpu0, t0 = _child_cpu(), time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        cpus.append(_child_cpu() - cpu0)
    return statistics.median(walls), max(walls), statistics.median(cpus)


def time_serve(src: Path, workers: int, timeout: float = 600, cold: bool = False) -> tuple[float, int]:
    """(seconds from ``purebandits serve --workers N`` on a fresh SQLite file to the first ``/healthz`` 200, workers
    the supervisor replaced meanwhile); ``cold``: with an empty numba cache (a fresh installation)."""
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = {**os.environ, "PYTHONPATH": str(src)}
        if cold:
            env.update(NUMBA_CACHE_DIR=f"{tmp}/numba", XDG_CACHE_HOME=f"{tmp}/cache")
        log = Path(tmp) / "serve.log"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "purebandits.cli", "serve", "--db",
                                 f"sqlite:///{tmp}/s.sqlite", "--port", str(port), "--workers", str(workers),
                                 "--log-level", "info"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        took = float("inf")
        try:
            while time.perf_counter() - t0 < timeout:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        took = time.perf_counter() - t0
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(60)
        return took, log.read_text(errors="replace").count("died")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prev-src", type=Path, default=None, help="the previous code's source tree")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--serve", action="store_true", help="also time serve --workers 4 to its first /healthz")
    p.add_argument("--cold", action="store_true", help="also time it with an empty numba cache (a fresh install)")
    args = p.parse_args(argv)
    codes = [("this", ROOT / "src")] + ([("previous", args.prev_src)] if args.prev_src else [])
    load0 = os.getloadavg()[0]
    rows = []
    for label, args_ in COMMANDS.items():
        for code, src in codes:
            med, worst, cpu = time_command(src, args_, args.repeats)
            rows.append((label, code, f"{med:.2f}", f"{worst:.2f}", f"{cpu:.2f}"))
    if args.serve:
        for code, src in codes:
            time_serve(src, 4)  # once to fill numba's cache for this code, not measured
            took, died = time_serve(src, 4)
            rows.append(("serve --workers 4 -> first /healthz", code, f"{took:.2f}", "-", f"{died} replaced"))
    if args.cold:
        for code, src in codes:
            took, died = time_serve(src, 4, cold=True)
            rows.append(("the same, empty numba cache", code, f"{took:.1f}", "-", f"{died} replaced"))
    print(f"\n{os.cpu_count()} CPUs, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}, Python "
          f"{sys.version.split()[0]}, {args.repeats} runs per command (median / max wall), numba's cache warm\n")
    print("| what | code | wall median (s) | wall max (s) | CPU median (s) / workers replaced |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
