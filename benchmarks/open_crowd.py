"""A crowd against a live server: nobody turned away, nobody rates a caption twice, answers to stop.

A real caption contest's crowd rates each caption once per person, in sessions of a few dozen
ratings, many people at a time. This benchmark starts ``purebandits serve`` on a temporary SQLite
file (the service's defaults: learner, repeat policy ``never``, WAL with ``synchronous=NORMAL``),
creates an experiment from a bundled contest over HTTP, and drives it with simulated participants
over HTTP until the learner stops:

* **open crowd**: ``--concurrency`` participants at a time (default 32); whenever one leaves, a
  new one arrives. Each rates a session of distinct captions whose length is drawn uniformly from
  ``--session-min`` to ``--session-max`` (default 5 to 25), then leaves.
* **fixed group**: ``--group`` participants (default 32) who stay until the learner stops (a
  panel or a class), with no session cap.

Each participant asks for ``--batch`` items per request (``n``; 1 = the single-query form), or
with ``--prefetch`` holds one item ahead as the rating page does (asks ``n = 2``: the item it
still holds, then a new one; rates the first; asks again; gives the held item back when leaving,
as the page does on ``pagehide``), and answers each with a label drawn
from the caption's public vote shares (unfunny / somewhat funny / funny, the service's default
labels, rewards 0 / 0.5 / 1). Answers are paired across
configurations: the j-th answer about a caption is the same label in every configuration of a
seed (one label stream per caption).

Measured per run: answers to stop, the recommended caption, participants, answers per
participant, asks turned away while the participant had captions left to rate (``exhausted``, or
``waiting``), repeats (a participant rating a caption twice), and whether every acknowledged
answer is in the server's ``answers.csv`` exactly once with its label. The baseline is the same
learner (same resolved parameters and seed) in the plain ask/tell loop, without participants.

    PYTHONPATH=src nice -n 10 python benchmarks/open_crowd.py                      # docs/repeat_policy_cost.md
    PYTHONPATH=src python benchmarks/open_crowd.py --contest 512 --top 10 --seeds 1   # a quick look

At contest size (512, all 4,399 captions) an open-crowd run takes about 2 minutes on two cores
and a fixed-group run about 30 (each of its 32 members rates thousands of captions, and an ask
reads the participant's past queries: O(answers so far) per ask); ``--fixed-seeds`` runs fewer
of those. ``tests/service/test_open_crowd.py`` runs it on 40 captions.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("unfunny", "somewhat funny", "funny")
REWARDS = (0.0, 0.5, 1.0)


# ---------------------------------------------------------------------------------------- instance
@dataclass(frozen=True)
class Contest:
    """A bundled caption contest (or its ``top`` best captions) as the simulated crowd sees it."""

    contest: str
    top: int  # 0: every caption
    n_total: int
    pick: str  # "top": the best ``top`` captions; "spread": the best and ``top - 1`` others evenly spaced in rank
    captions: list[str]
    probs: np.ndarray  # (n, 3): P(unfunny), P(somewhat funny), P(funny) from the public votes
    means: np.ndarray  # graded mean 0 / 0.5 / 1

    @property
    def n(self) -> int:
        return len(self.captions)

    @property
    def best(self) -> set[int]:
        return set(np.flatnonzero(self.means == self.means.max()).tolist())

    @property
    def title(self) -> str:
        which = f"all {self.n}" if self.n == self.n_total else (
            f"top {self.n} of {self.n_total}" if self.pick == "top" else
            f"{self.n} of {self.n_total} (the best and others evenly spaced in rank)")
        return f"caption contest {self.contest}, {which} captions"


def load_contest(contest: str, top: int = 0, pick: str = "top") -> Contest:
    """Contest ``contest`` in contest order: all its captions (``top`` 0), its ``top`` best by graded mean
    (``pick="top"``), or its best and ``top - 1`` others evenly spaced in rank (``pick="spread"``: an easy
    instance of any size, for tests)."""
    from purebandits.instances.real import caption_contest

    cc = caption_contest(contest)
    keep = np.arange(cc.n_arms)
    if 0 < top < cc.n_arms:
        ranked = np.lexsort((np.arange(cc.n_arms), -cc.means))
        chosen = ranked[:top] if pick == "top" else ranked[np.linspace(0, cc.n_arms - 1, top).round().astype(int)]
        keep = np.sort(chosen)
    votes = cc.votes[keep].astype(float)
    return Contest(contest, top, cc.n_arms, pick, [cc.captions[i] for i in keep],
                   votes / votes.sum(axis=1, keepdims=True), cc.means[keep])


class LabelStreams:
    """One label stream per caption: the j-th answer about caption ``a`` is the same in every configuration."""

    def __init__(self, probs: np.ndarray, seed: int) -> None:
        self.probs = probs
        self.rngs = [np.random.default_rng(s) for s in np.random.SeedSequence([seed, 1]).spawn(len(probs))]
        self.buf: list[list[int]] = [[] for _ in probs]

    def draw(self, arm: int) -> int:
        """The next label index (0 unfunny, 1 somewhat funny, 2 funny) of caption ``arm``."""
        buf = self.buf[arm]
        if not buf:
            buf.extend(self.rngs[arm].choice(3, size=64, p=self.probs[arm]).tolist()[::-1])
        return buf.pop()


def experiment_spec(contest: Contest, seed: int, expiry_s: float | None = None) -> dict[str, Any]:
    """What an organizer sends: the captions, the service's default learner, labels and repeat policy (and the
    query expiry, scaled to the simulated crowd's pace: see :class:`Crowd`)."""
    spec = {"name": f"open crowd: {contest.title}", "seed": seed,
            "items": [{"id": str(i), "text": t} for i, t in enumerate(contest.captions)]}
    if expiry_s is not None:
        spec["query_expiry_seconds"] = expiry_s
    return spec


def run_baseline(contest: Contest, seed: int, cap: int) -> dict[str, Any]:
    """The service's learner for this spec (resolved parameters, seed) in the plain ask/tell loop."""
    from purebandits.service.validation import validate_spec

    es = validate_spec(experiment_spec(contest, seed))
    learner = es.learners[0].fresh(contest.n)
    caption_of = [int(it["id"]) for it in es.items]
    streams = LabelStreams(contest.probs, seed)
    answers = 0
    while not learner.done and answers < cap:
        arm = learner.ask(1)[0]
        learner.tell(arm, REWARDS[streams.draw(caption_of[arm])])
        answers += 1
    rec = caption_of[learner.recommend()[0]]
    return {"config": "baseline", "seed": seed, "answers": answers, "stopped": bool(learner.done),
            "recommended": rec, "correct": rec in contest.best}


# ---------------------------------------------------------------------------------------- crowd
@dataclass
class Crowd:
    """Who rates: an open crowd (``group`` None) or a fixed group of ``group`` people who stay.

    ``expiry_s``: the experiment's query expiry. A participant who leaves mid-batch leaves queries
    pending until they expire, and a learner counts pending pulls as virtual pulls. A real person
    takes about 5 s per rating, so the service's default expiry of 300 s is about 60 ratings of one
    person; the simulated participants answer over 30 times faster, so the expiry is scaled down to
    keep the same ratio (10 s by default; None: the service's default).
    """

    concurrency: int = 32
    session_min: int = 5
    session_max: int = 25
    batch: int = 1
    group: int | None = None
    expiry_s: float | None = 10.0
    prefetch: bool = False  # the rating page's way: hold one item ahead (ask n = 2, rate the first, ask again)

    @property
    def label(self) -> str:
        who = f"fixed group of {self.group}" if self.group else \
            f"open crowd, {self.concurrency} at a time, {self.session_min}-{self.session_max} each"
        return f"{who}, " + ("one item prefetched (as the rating page)" if self.prefetch else
                             f"{self.batch} per request")


@dataclass
class Tally:
    """What the simulated participants saw."""

    answers: int = 0
    participants: int = 0
    per_participant: list[int] = field(default_factory=list)
    turned_away: int = 0  # exhausted, or waiting, while the participant had captions left to rate
    waiting: int = 0
    repeats: int = 0
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)  # query id -> (label, caption)
    done: bool = False
    errors: list[str] = field(default_factory=list)


async def participant(conn: Any, eid: int, n_items: int, session: int | None, crowd: Crowd,
                      streams: LabelStreams, tally: Tally, stop: asyncio.Event, cap: int) -> None:
    """One person on one keep-alive connection (``service_load.RawClient``): registers, then asks and answers
    until their session ends or the learner stops."""
    status, data = await conn.post("/api/participants")
    pid = data["participant_id"]
    tally.participants += 1
    rated: set[int] = set()
    held: list[str] = []  # with prefetch: the query fetched ahead, given back when the person leaves (as the page)
    body: dict[str, Any] = {"participant_id": pid}
    if crowd.prefetch:
        body["n"] = 2  # the item to rate now (pending ones first) and the next, fetched ahead
    elif crowd.batch > 1:
        body["n"] = crowd.batch
    try:
        while not stop.is_set() and (session is None or len(rated) < session):
            status, q = await conn.post(f"/api/experiments/{eid}/queries", body)
            if status != 200:
                tally.errors.append(f"ask {status}: {str(q)[:200]}")
                await asyncio.sleep(0.5)
                continue
            if q["state"] == "done":
                tally.done = True
                stop.set()
                return
            if q["state"] in ("exhausted", "waiting"):
                if len(rated) < n_items:
                    tally.turned_away += 1
                tally.waiting += q["state"] == "waiting"
                if crowd.group is None and q["state"] == "exhausted":
                    return  # told to come back later: gone
                await asyncio.sleep(min(1.0, float(q.get("retry_after") or 1.0)))
                continue
            if q["state"] != "ok":
                tally.errors.append(f"ask state {q['state']}")
                return
            got = q.get("queries") or [q]
            held = [one["query_id"] for one in got[1:]] if crowd.prefetch else []
            for one in got[:1 if crowd.prefetch else None]:
                if stop.is_set() or (session is not None and len(rated) >= session) or tally.answers >= cap:
                    return  # the rest of the batch is left to expire, as a person who leaves mid-batch
                caption = int(one["item"]["id"])
                if caption in rated:
                    tally.repeats += 1
                label = LABELS[streams.draw(caption)]
                status, a = await conn.post(f"/api/queries/{one['query_id']}/answer",
                                            {"participant_id": pid, "label": label})
                if status == 200:
                    tally.acked[one["query_id"]] = (label, caption)
                    tally.answers += 1
                    rated.add(caption)
                else:
                    tally.errors.append(f"answer {status}: {str(a)[:200]}")
            if tally.answers >= cap:
                stop.set()
    finally:
        tally.per_participant.append(len(rated))
        if not stop.is_set():
            for qid in held:
                await conn.post(f"/api/queries/{qid}/release", {"participant_id": pid})


async def drive(url: str, contest: Contest, seed: int, crowd: Crowd, cap: int,
                progress: bool = False) -> dict[str, Any]:
    """Create the experiment on the server at ``url`` and run ``crowd`` on it until the learner stops (or ``cap``)."""
    rng = np.random.default_rng([seed, 2])
    streams = LabelStreams(contest.probs, seed)
    tally, stop = Tally(), asyncio.Event()
    limits = httpx.Limits(max_connections=crowd.group or crowd.concurrency, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        r = await client.post("/api/experiments", json=experiment_spec(contest, seed, crowd.expiry_s))
        r.raise_for_status()
        eid, token = r.json()["id"], r.json()["owner_token"]
        owner = {"Authorization": f"Bearer {token}"}
        t0 = time.perf_counter()
        running: set[asyncio.Task] = set()
        from service_load import RawClient

        slots = [RawClient(url) for _ in range(crowd.group or crowd.concurrency)]  # one connection per person at a time

        async def person(conn: Any, session: int | None) -> None:
            try:
                await participant(conn, eid, contest.n, session, crowd, streams, tally, stop, cap)
            finally:
                slots.append(conn)

        def arrive() -> None:
            session = None if crowd.group else int(rng.integers(crowd.session_min, crowd.session_max + 1))
            task = asyncio.create_task(person(slots.pop(), session))
            running.add(task)
            task.add_done_callback(running.discard)

        for _ in range(crowd.group or crowd.concurrency):
            arrive()
        last = 0.0
        while running:
            await asyncio.sleep(0.05)
            if crowd.group is None and not stop.is_set():
                for _ in range(crowd.concurrency - len(running)):
                    arrive()
            if progress and time.perf_counter() - last > 10:
                last = time.perf_counter()
                print(f"  {tally.answers:,} answers, {tally.participants:,} participants, "
                      f"{tally.answers / (last - t0):.0f}/s", file=sys.stderr, flush=True)
        wall = time.perf_counter() - t0
        for conn in slots:
            await conn.aclose()
        res = (await client.get(f"/api/experiments/{eid}/results?timeline=false&limit=1", headers=owner)).json()
        text = (await client.get(f"/api/experiments/{eid}/answers.csv", headers=owner)).text
    rows = list(csv.DictReader(io.StringIO(text)))
    stored: dict[str, int] = {}
    for row in rows:
        stored[row["query_id"]] = stored.get(row["query_id"], 0) + 1
    by_pid_item = {(row["participant_id"], row["item_id"]) for row in rows}
    lost = sum(1 for qid in tally.acked if stored.get(qid, 0) != 1)
    mislabelled = sum(1 for row in rows if row["query_id"] in tally.acked and
                      tally.acked[row["query_id"]][0] != row["label"])
    rec = int(res["recommendation"][0]["id"])
    per = np.asarray(tally.per_participant)
    return {"config": crowd.label, "seed": seed, "answers": len(rows), "acked": len(tally.acked),
            "stopped": bool(res["done"]), "recommended": rec, "correct": rec in contest.best,
            "participants": tally.participants, "answers_per_participant": float(per.mean()) if per.size else 0.0,
            "turned_away": tally.turned_away, "waiting": tally.waiting, "repeats": tally.repeats,
            "stored_repeats": len(rows) - len(by_pid_item), "lost_or_double": lost, "mislabelled": mislabelled,
            "errors": len(tally.errors), "first_errors": tally.errors[:3], "wall_s": wall,
            "per_participant": tally.per_participant,
            "answers_per_s": len(rows) / wall if wall > 0 else 0.0}


def start_server(db_url: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """``purebandits serve`` on ``db_url`` with the rate limits off (benchmarks/service_load.py)."""
    from service_load import start_server as start

    return start(db_url, 1, env=env)


def run_config(contest: Contest, seed: int, crowd: Crowd, cap: int, progress: bool = False) -> dict[str, Any]:
    """One run on a fresh server and database."""
    from service_load import stop_server

    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(f"sqlite:///{tmp}/crowd.sqlite")
        try:
            return asyncio.run(drive(url, contest, seed, crowd, cap, progress))
        finally:
            stop_server(proc)


# ---------------------------------------------------------------------------------------- report
def table(rows: list[dict[str, Any]], base: dict[int, dict[str, Any]]) -> str:
    """One Markdown row per configuration: means over seeds."""
    out = ["| configuration | runs | stopped | right caption | answers to stop (mean) | vs the learner alone | "
           "participants | answers per participant | turned away | rated a caption twice | acknowledged answers "
           "not stored once | answers/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base_mean = float(np.mean([b["answers"] for b in base.values()]))
    out.append(f"| learner alone (no participants) | {len(base)} | {sum(b['stopped'] for b in base.values())} | "
               f"{sum(b['correct'] for b in base.values())} | {base_mean:,.0f} | 1.00 | - | - | - | - | - | - |")
    for config in dict.fromkeys(r["config"] for r in rows):
        rs = [r for r in rows if r["config"] == config]
        mean = float(np.mean([r["answers"] for r in rs]))
        ratios = [r["answers"] / base[r["seed"]]["answers"] for r in rs]
        out.append(
            f"| {config} | {len(rs)} | {sum(r['stopped'] for r in rs)} | {sum(r['correct'] for r in rs)} | "
            f"{mean:,.0f} | {np.mean(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
            f"{np.mean([r['participants'] for r in rs]):,.0f} | "
            f"{np.mean([r['answers_per_participant'] for r in rs]):.1f} | {sum(r['turned_away'] for r in rs)} | "
            f"{sum(r['stored_repeats'] for r in rs)} | {sum(r['lost_or_double'] for r in rs)} | "
            f"{np.mean([r['answers_per_s'] for r in rs]):.0f} |")
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], base: dict[int, dict[str, Any]], per_participant: dict[str, list[int]],
         path: Path, title: str) -> None:
    """Answers to stop per configuration against the learner alone, and how many captions each participant rated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = ["learner alone", *configs]
    values = [[b["answers"] for b in base.values()], *[[r["answers"] for r in rows if r["config"] == c]
                                                      for c in configs]]
    for i, vals in enumerate(values):
        ax.bar(i, np.mean(vals), color="#9ab" if i == 0 else "#48c", alpha=0.8)
        ax.plot([i] * len(vals), vals, "ko", ms=4)
    ax.set_xticks(range(len(names)), [n.replace(", ", ",\n", 1) for n in names], fontsize=7)
    ax.set_ylabel("answers until the learner stopped")
    ax.set_title("answers to stop (bars: mean, dots: runs)", fontsize=9)
    for c, counts in per_participant.items():
        if counts:
            bx.hist(counts, bins=range(0, max(counts) + 2), alpha=0.6, label=c)
    bx.set_xlabel("captions rated by a participant")
    bx.set_ylabel("participants")
    bx.set_title("answers per participant", fontsize=9)
    bx.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contest", default="512")
    ap.add_argument("--top", type=int, default=0, help="the contest's best N captions (0: all)")
    ap.add_argument("--spread", action="store_true", help="with --top N: the best and N - 1 others evenly spaced")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--session-min", type=int, default=5)
    ap.add_argument("--session-max", type=int, default=25)
    ap.add_argument("--group", type=int, default=32, help="size of the fixed group (0: skip it)")
    ap.add_argument("--fixed-seeds", type=int, default=None,
                    help="seeds of the fixed group (default: --seeds; at contest size a run takes ~30 min)")
    ap.add_argument("--batch", type=int, default=1, help="items per request")
    ap.add_argument("--expiry", type=float, default=10.0, help="query expiry in seconds (see Crowd)")
    ap.add_argument("--prefetch", action="store_true", help="participants hold one item ahead, as the rating page")
    ap.add_argument("--cap", type=int, default=2_000_000, help="answers per run at most")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    ap.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    ap.add_argument("--plot", type=Path, default=None, help="write the PNG here")
    args = ap.parse_args(argv)
    contest = load_contest(args.contest, args.top, "spread" if args.spread else "top")
    crowds = [Crowd(args.concurrency, args.session_min, args.session_max, args.batch, expiry_s=args.expiry,
                    prefetch=args.prefetch)]
    if args.group:
        crowds.append(Crowd(args.group, batch=args.batch, group=args.group, expiry_s=args.expiry,
                            prefetch=args.prefetch))
    t0 = time.time()
    load0 = os.getloadavg()
    base = {s: run_baseline(contest, s, args.cap) for s in range(args.seeds)}
    rows = []
    fixed_seeds = args.seeds if args.fixed_seeds is None else args.fixed_seeds
    for seed in range(args.seeds):
        for crowd in crowds:
            if crowd.group and seed >= fixed_seeds:
                continue
            print(f"seed {seed}: {crowd.label}", file=sys.stderr, flush=True)
            r = run_config(contest, seed, crowd, args.cap, progress=True)
            print(json.dumps({k: v for k, v in r.items() if k not in ("first_errors", "per_participant")}),
                  file=sys.stderr, flush=True)
            rows.append(r)
    report = table(rows, base)
    cmd = "PYTHONPATH=src python benchmarks/open_crowd.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = (f"{contest.title}; {args.seeds} seeds; wall time {(time.time() - t0) / 60:.1f} min\n\n{report}\n\n"
            f"Command: `{cmd}`\n\nMachine: {machine()}; load average {load0[0]:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end.\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.plot:
        per: dict[str, list[int]] = {}
        for r in rows:
            per.setdefault(r["config"], []).extend(r["per_participant"])
        plot(rows, base, per, args.plot, contest.title)
    if args.json:
        args.json.write_text(json.dumps({"base": base, "runs": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
