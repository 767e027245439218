"""Crash harness: concurrent participants while server processes are SIGKILLed (and PostgreSQL is crashed).

Starts ``--servers`` service processes on one database (SQLite file or a throwaway PostgreSQL
cluster), creates ``--experiments`` experiments and runs ``--participants`` simulated
participants against random servers. Meanwhile it kills a random server process with SIGKILL
every ``--kill-every`` seconds (uniform in [lo, hi]) and restarts it, ``--kills`` times; on
PostgreSQL it also crashes the database ``--pg-restarts`` times (``pg_ctl stop -m immediate``,
down for ``--pg-down`` seconds, then ``pg_ctl start``). Participants retry answers that got no
success response with the same query id. At the end it audits the client's ledger against the
database and the learners (see ``harness.audit``), then kills every server, starts a fresh one
(which replays the logs) and audits again.

    PYTHONPATH=src python benchmarks/reliability/crash.py --backend sqlite --kills 20
    PYTHONPATH=src python benchmarks/reliability/crash.py --backend postgres --kills 60 --pg-restarts 3 \
        --participants 50 --mode exec --kill-every 4:10

``--mode fork`` (default) forks servers from a pre-imported parent (restart < 1 s);
``--mode exec`` runs the real ``purebandits serve`` command each time (restart takes the full
import time, several seconds on a loaded machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    Ledger,
    PgCluster,
    ServerProc,
    Zygote,
    audit,
    create_experiments,
    ensure_ready,
    percentile_ms,
    run_participant,
)


def run_crash(backend: str = "sqlite", *, servers: int = 2, participants: int = 8, experiments: int = 2,
              kills: int = 20, kill_every: tuple[float, float] = (1.0, 2.5), pg_restarts: int = 0,
              pg_down: float = 3.0, min_seconds: float = 0.0, mode: str = "fork", seed: int = 0,
              workdir: Path | None = None, pg: PgCluster | None = None, log: Any = None) -> dict[str, Any]:
    """Run the crash scenario and return the report (``report["ok"]``, ``report["problems"]``)."""
    say = log or (lambda *a: print(*a, file=sys.stderr, flush=True))
    rng = random.Random(seed)
    tmp_ctx = tempfile.TemporaryDirectory() if workdir is None else None
    work = Path(tmp_ctx.name) if tmp_ctx else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    own_pg = None
    zygote = None
    procs: list[ServerProc] = []
    try:
        if backend == "sqlite":
            db_url = f"sqlite:///{work / 'chaos.sqlite'}"
            if pg_restarts:
                raise ValueError("--pg-restarts needs the postgres backend")
        elif backend == "postgres":
            if pg is None:
                pg = own_pg = PgCluster()
            db_url = pg.create_database()
        else:
            raise ValueError(f"unknown backend {backend!r}")
        if mode == "fork":
            zygote = Zygote()
        procs = [ServerProc(db_url, work, mode=mode, zygote=zygote) for _ in range(servers)]
        procs[0].start()  # the first one migrates the fresh database alone
        ensure_ready(procs[:1])
        for p in procs[1:]:
            p.start()
        ensure_ready(procs)
        exps = create_experiments(procs[0].url, experiments, seed=seed)
        ledger = Ledger()
        down_windows: list[tuple[float, float]] = []
        kill_log: list[float] = []
        t_begin = time.perf_counter()

        async def chaos() -> None:
            n_pg = 0
            pg_at = sorted(rng.sample(range(1, kills), pg_restarts)) if pg_restarts and kills > 1 else []
            for i in range(kills):
                await asyncio.sleep(rng.uniform(*kill_every))
                victim = rng.choice(procs)
                await asyncio.to_thread(victim.kill)
                kill_log.append(time.perf_counter())
                await asyncio.to_thread(victim.start)
                if pg is not None and n_pg < len(pg_at) and i + 1 == pg_at[n_pg]:
                    n_pg += 1
                    # the servers are up when the database goes away: what do participants see?
                    await asyncio.to_thread(ensure_ready, procs)
                    t0 = time.perf_counter()
                    await asyncio.to_thread(pg.stop, "immediate")
                    say(f"  postgres stopped (immediate) at {t0 - t_begin:.1f} s")
                    await asyncio.sleep(pg_down)
                    await asyncio.to_thread(pg.start)
                    t1 = time.perf_counter()
                    down_windows.append((t0, t1))
                    say(f"  postgres started again at {t1 - t_begin:.1f} s")
            rest = min_seconds - (time.perf_counter() - t_begin)
            if rest > 0:
                await asyncio.sleep(rest)

        async def main() -> None:
            stop = asyncio.Event()
            urls = [p.url for p in procs]
            tasks = [asyncio.create_task(run_participant(k, urls, [e for e, _ in exps], ledger, stop, seed=seed,
                                                         answer_prob=0.97, final_deadline=None))
                     for k in range(participants)]
            await chaos()
            await asyncio.to_thread(ensure_ready, procs)
            stop.set()
            done, pending = await asyncio.wait(tasks, timeout=120)
            for t in pending:
                t.cancel()
            for t in done:
                if t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]

        asyncio.run(main())
        t_end = time.perf_counter()
        ensure_ready(procs)
        say(f"  load done after {t_end - t_begin:.1f} s; auditing")
        report = audit(db_url, procs[0].url, exps, ledger)
        # restart from nothing: kill every server, start one, audit again (replay on startup)
        for p in procs:
            p.kill()
        procs[0].start()
        ensure_ready(procs[:1])
        after = audit(db_url, procs[0].url, exps, ledger)
        report["after_full_restart_ok"] = after["ok"]
        if not after["ok"]:
            report["problems"] += [f"after full restart: {p}" for p in after["problems"]]
            report["ok"] = False
        lat = {ep: [d for _, d in v] for ep, v in ledger.latencies.items()}
        in_down = [(t, body) for t, body in ledger.r503 if any(a <= t <= b + 0.5 for a, b in down_windows)]
        after_down_acks = [sum(1 for t in ledger.acked_at if t > b) for _, b in down_windows]
        down_lat = [d for ep in ("ask", "answer") for t0, d in ledger.latencies.get(ep, [])
                    if any(a <= t0 <= b for a, b in down_windows)]
        report.update({
            "backend": backend, "mode": mode, "servers": servers, "participants": participants,
            "n_experiments": len(exps), "kills": len(kill_log), "server_starts": sum(p.starts for p in procs),
            "pg_restarts": len(down_windows), "seconds": round(t_end - t_begin, 1),
            "answers_per_s": round(len(ledger.acked) / max(1e-9, t_end - t_begin), 1),
            "ask_p50_ms": percentile_ms(lat.get("ask", []), 50), "ask_p99_ms": percentile_ms(lat.get("ask", []), 99),
            "answer_p50_ms": percentile_ms(lat.get("answer", []), 50),
            "answer_p99_ms": percentile_ms(lat.get("answer", []), 99),
            "responses_503": len(ledger.r503), "responses_503_while_db_down": len(in_down),
            "max_latency_while_db_down_ms": round(max(down_lat) * 1000, 1) if down_lat else None,
            "acks_after_each_db_restart": after_down_acks,
            "ledger": ledger.summary(),
        })
        if down_windows and any(n == 0 for n in after_down_acks):
            report["problems"].append("no answer acknowledged after a database restart (no recovery)")
            report["ok"] = False
        return report
    finally:
        for p in procs:
            p.kill()
        if zygote is not None:
            zygote.close()
        if own_pg is not None:
            own_pg.close()
        if tmp_ctx is not None:
            tmp_ctx.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--participants", type=int, default=8)
    p.add_argument("--experiments", type=int, default=2)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--kill-every", default="1:2.5", help="seconds between kills, uniform in LO:HI")
    p.add_argument("--pg-restarts", type=int, default=0)
    p.add_argument("--pg-down", type=float, default=3.0, help="seconds PostgreSQL stays down")
    p.add_argument("--min-seconds", type=float, default=0.0)
    p.add_argument("--mode", default="fork", choices=["fork", "exec"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="write the report here")
    args = p.parse_args(argv)
    lo, hi = (float(x) for x in args.kill_every.split(":"))
    print(f"crash run: {vars(args)}; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rep = run_crash(args.backend, servers=args.servers, participants=args.participants,
                    experiments=args.experiments, kills=args.kills, kill_every=(lo, hi),
                    pg_restarts=args.pg_restarts, pg_down=args.pg_down, min_seconds=args.min_seconds,
                    mode=args.mode, seed=args.seed)
    rep["load_average_end"] = round(os.getloadavg()[0], 1)
    text = json.dumps(rep, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
