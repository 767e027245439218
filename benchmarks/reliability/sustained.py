"""Sustained load: N participants for a long time, throughput, latency and the server's memory over time.

Starts ``purebandits serve`` (the real command, one worker) on a SQLite file or a throwaway
PostgreSQL database, creates two experiments from caption contest 559 (138 captions, lil'UCB,
delta = 0.05; labels drawn from each caption's public vote shares), and runs ``--participants``
simulated participants (asyncio, one keep-alive connection each). Each participant starts one
ask + answer every ``1/--pace`` seconds (0: as fast as possible). Every second it samples the
server's resident memory (``VmRSS`` in ``/proc/<pid>/status``) and the acknowledged answers. At
the end it audits the ledger against the database (answers lost / double-counted, state equals
replay), writes a JSON report and a PNG plot of throughput and RSS over time.

    PYTHONPATH=src python benchmarks/reliability/sustained.py --participants 200 --seconds 600 --pace 0.4 \
        --json docs/reliability/sustained.json --plot docs/img/sustained_load.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Ledger, PgCluster, ServerProc, audit, create_experiments, ensure_ready, run_participant  # noqa: E402


def run_sustained(backend: str, participants: int, seconds: float, warmup: float, pace: float, seed: int,
                  work: Path) -> dict[str, Any]:
    import numpy as np

    from purebandits.instances.real import caption_contest

    pg = None
    server = None
    try:
        if backend == "sqlite":
            db_url = f"sqlite:///{work / 'sustained.sqlite'}"
        else:
            pg = PgCluster()
            db_url = pg.create_database()
        server = ServerProc(db_url, work, mode="exec")
        server.start()
        ensure_ready([server])
        cc = caption_contest("559")
        probs = cc.votes / cc.votes.sum(axis=1, keepdims=True)
        label_probs = {str(i): list(probs[i]) for i in range(cc.n_arms)}
        exps = create_experiments(server.url, 2, seed=seed, params={"delta": 0.05}, texts=list(cc.captions))
        ledger = Ledger()
        samples: list[dict[str, float]] = []
        t0 = time.perf_counter()
        t_measure, t_end = t0 + warmup, t0 + warmup + seconds

        async def sampler(stop: asyncio.Event) -> None:
            while not stop.is_set():
                samples.append({"t": time.perf_counter() - t0, "rss_kb": server.rss_kb() or 0,
                                "acked": len(ledger.acked), "load": os.getloadavg()[0]})
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except TimeoutError:
                    pass

        async def main() -> None:
            stop = asyncio.Event()
            urls = [server.url]
            tasks = [asyncio.create_task(run_participant(k, urls, [e for e, _ in exps], ledger, stop, seed=seed,
                                                         pace=pace, label_probs=label_probs, client_kind="mini"))
                     for k in range(participants)]
            samp = asyncio.create_task(sampler(stop))
            await asyncio.sleep(t_end - time.perf_counter())
            stop.set()
            await asyncio.gather(*tasks, samp)

        asyncio.run(main())
        rep = audit(db_url, server.url, exps, ledger)
        window = [(a, d) for ep in ("ask", "answer") for a, d in ledger.latencies[ep]]
        ask = np.array([d for a, d in ledger.latencies["ask"] if t_measure <= a <= t_end]) * 1000
        ans = np.array([d for a, d in ledger.latencies["answer"] if t_measure <= a <= t_end]) * 1000
        acked_in = sum(1 for t in ledger.acked_at if t_measure <= t <= t_end)
        rss = np.array([s["rss_kb"] for s in samples if s["t"] >= warmup]) / 1024
        n = len(rss)
        rep.update({
            "backend": backend, "participants": participants, "pace_per_participant": pace, "seconds": seconds,
            "warmup": warmup, "answers_per_s": acked_in / seconds, "answers_in_window": acked_in,
            "requests": len(window),
            "ask_p50_ms": float(np.percentile(ask, 50)), "ask_p99_ms": float(np.percentile(ask, 99)),
            "answer_p50_ms": float(np.percentile(ans, 50)), "answer_p99_ms": float(np.percentile(ans, 99)),
            "answer_max_ms": float(ans.max()),
            "rss_mb_first_minute_max": float(rss[: min(n, 60)].max()), "rss_mb_peak": float(rss.max()),
            "rss_mb_last_minute_max": float(rss[max(0, n - 60):].max()),
            "load_average_mean": float(np.mean([s["load"] for s in samples])),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "ledger": ledger.summary(), "samples": samples,
        })
        return rep
    finally:
        if server is not None:
            server.stop()
        if pg is not None:
            pg.close()


def plot(rep: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    s = rep["samples"]
    t = np.array([x["t"] for x in s])
    acked = np.array([x["acked"] for x in s])
    rss = np.array([x["rss_kb"] for x in s]) / 1024
    rate = np.diff(acked) / np.maximum(np.diff(t), 1e-9)
    k = 10  # 10 s moving average
    smooth = np.convolve(rate, np.ones(k) / k, mode="same") if len(rate) > k else rate
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 4.2), sharex=True)
    a1.plot(t[1:], smooth, lw=1)
    a1.set_ylabel("answers / s")
    a1.set_title(f"{rep['participants']} participants, {rep['backend']}: "
                 f"{rep['answers_per_s']:.0f} answers/s, p99 answer {rep['answer_p99_ms']:.0f} ms")
    a2.plot(t, rss, lw=1, color="tab:red")
    a2.set_ylabel("server RSS (MB)")
    a2.set_xlabel("seconds")
    a2.set_ylim(0, max(rss) * 1.15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    p.add_argument("--participants", type=int, default=200)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--warmup", type=float, default=10)
    p.add_argument("--pace", type=float, default=0.4, help="answers per second per participant (0: closed loop)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    p.add_argument("--plot", type=Path)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rep = run_sustained(args.backend, args.participants, args.seconds, args.warmup, args.pace, args.seed,
                            Path(tmp))
    short = {k: v for k, v in rep.items() if k != "samples"}
    print(json.dumps(short, indent=1, default=str))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rep, default=str))
    if args.plot:
        plot(rep, args.plot)
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
