"""How long the first create of an experiment takes on a fresh install, per learner.

Each run starts ``purebandits serve`` on a new SQLite file with an *empty* numba cache (a fresh
``NUMBA_CACHE_DIR``), waits until it answers, then, with the background warm on, until the
background process has written its stamp (or ``--wait`` seconds), and times ``POST
/api/experiments`` (50 items, one learner each) for each learner in turn. With the warm off the
first create of a learner compiles its kernels inside the request, as the code did before
``warm_all_in_background``; ``--src DIR`` runs the same on another source tree (the previous code,
which has no background warm: warm off only).

    PYTHONPATH=src python benchmarks/first_create.py [--learners kl_lucb,clucb,lucb1] [--wait 600]
        [--src /tmp/prev/src]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from service_load import ROOT, free_port, stop_server  # noqa: E402

ITEMS = [f"caption {i}" for i in range(50)]
LABELS = [{"name": "unfunny", "reward": 0}, {"name": "somewhat funny", "reward": 0.5}, {"name": "funny", "reward": 1}]


def one_run(src: Path, warm: bool, learners: list[str], wait: float) -> dict[str, float]:
    """Seconds of each learner's first create on a fresh server and cache; 'startup' and 'warm' too."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "numba"
        env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache),
               "PUREBANDITS_WARM_ALL_LEARNERS": "1" if warm else "0", "PUREBANDITS_CREATE_RATE_PER_SECOND": "0"}
        port = free_port()
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "purebandits.cli", "serve", "--db", f"sqlite:///{tmp}/x.sqlite",
                                 "--port", str(port), "--no-access-log", "--log-level", "warning"], env=env)
        url = f"http://127.0.0.1:{port}"
        out: dict[str, float] = {}
        try:
            while True:
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
                if time.perf_counter() - t0 > 600 or proc.poll() is not None:
                    raise RuntimeError("server did not start")
            out["startup"] = time.perf_counter() - t0
            if warm:
                t1 = time.perf_counter()
                while time.perf_counter() - t1 < wait and not any(
                        not f.suffix for f in cache.glob("purebandits-warmed-*")):  # not .lock or .tmp
                    time.sleep(1)
                out["warm"] = time.perf_counter() - t1
            for name in learners:
                body = {"name": f"first {name}", "items": ITEMS, "labels": LABELS, "algorithm": name, "params": {}}
                t = time.perf_counter()
                r = httpx.post(url + "/api/experiments", json=body, timeout=600)
                r.raise_for_status()
                out[name] = time.perf_counter() - t
        finally:
            stop_server(proc)
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learners", default="kl_lucb,clucb,lucb1,top_two")
    p.add_argument("--wait", type=float, default=600, help="longest wait for the background warm's stamp (s)")
    p.add_argument("--src", type=Path, default=None, help="another source tree, run with the warm off and on")
    args = p.parse_args(argv)
    learners = [x for x in args.learners.split(",") if x]
    print(f"# first_create ({machine()}); seconds; load average {os.getloadavg()[0]:.2f}", flush=True)
    trees = [("this tree", ROOT / "src")] + ([("--src", args.src)] if args.src else [])
    for label, src in trees:
        for warm in (False, True) if label == "this tree" else (False,):  # the previous code has no such warm
            r = one_run(src, warm, learners, args.wait)
            cells = "  ".join(f"{k} {v:.2f}" for k, v in r.items())
            print(f"{label:>9}  background warm {'on ' if warm else 'off'}  {cells}  (load {os.getloadavg()[0]:.2f})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
