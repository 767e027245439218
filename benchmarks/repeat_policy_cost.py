"""What the service's repeat policy costs in answers-to-stop, on a bootstrapped caption contest.

The service never hands a participant the same item twice in a row and, with ``repeats="never"``
(the default), at most once per experiment while items they have not seen remain; it asks the
learner for up to ``MAX_CANDIDATES`` candidates, serves the first this participant may see and
cancels the others (``study.py``, "Repeats"). This benchmark measures what that costs.

It drives a real :class:`~purebandits.service.study.Study` in this process, on a temporary
SQLite file with a fake clock (queries never expire), with simulated participants: a pool of P
participants; at each step a uniformly random one of them asks; on ``"ok"`` they answer with a
label drawn from the caption's public vote shares (unfunny / somewhat funny / funny, the
service's default labels, rewards 0 / 0.5 / 1); on ``"exhausted"`` they leave and a new
participant takes their place (a real crowd is open); ``"waiting"`` is skipped; ``"done"`` ends
the run. It compares, with the same seeds, ``repeats="never"`` and ``repeats="not_consecutive"``
at each pool size with the baseline: the same learner (same parameters, same seed) in the plain
ask/tell loop, without participants. The learner is the service's default
(``DEFAULT_ALGORITHM`` / ``DEFAULT_PARAMS`` of :mod:`purebandits.service.validation`, read at run
time) with ``delta = 0.05`` unless ``DEFAULT_PARAMS`` sets delta. Answers are paired across
configurations: the j-th answer about a caption is the same label in every configuration of a
seed (one label stream per caption), so configurations differ only through what was asked.

The spec's ``delta`` is the target error probability: the service hands a learner proven to err
at most ``error_per_delta * delta`` that fraction of it (the page shows the learner's resolved
parameters). The service hands the learner the items in an order drawn from the seed; the
baseline uses the same order, and everything is reported by caption (item id).

The instance is contest 512's 20 best captions (``--top 20``): on all 4,399 captions the default
learner needs 10^5 answers or more (the page reports the count), hours per table through the
service; on the 20 best it needs thousands. A closed group (nobody new arrives; a refused
participant retries) is run as well, ``--closed-seeds`` runs per policy at ``--closed-participants``.

    PYTHONPATH=src nice -n 10 python benchmarks/repeat_policy_cost.py             # 10 seeds: docs/ Markdown + PNG
    PYTHONPATH=src nice -n 10 python benchmarks/repeat_policy_cost.py --quick     # smoke size, prints only

The default size (10 seeds) takes about 7 to 15 minutes on two shared cores, depending on the
learner and the load; 20 seeds would take twice that. ``--quick`` (3 seeds, top 3 captions,
capped at 1,000 answers: a smoke run, the answers-to-stop are not meaningful) takes under a
minute and writes no files unless ``--out`` / ``--plot`` are given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DELTA = 0.05
#: a year: the longest query expiry the service accepts (the fake clock moves 1 ms per step anyway)
EXPIRY_S = 366 * 86400
POLICIES = ("never", "not_consecutive")


# ---------------------------------------------------------------------------------------- instance
@dataclass(frozen=True)
class Contest:
    """A caption contest (or its ``top`` best captions) as the simulated crowd sees it."""

    contest: str
    top: int  # 0: every caption
    n_total: int  # captions in the whole contest
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
        which = f"top {self.n} of {self.n_total}" if self.n < self.n_total else f"all {self.n}"
        return f"caption contest {self.contest}, {which} captions"


def load_contest(contest: str, top: int) -> Contest:
    """Contest ``contest``, restricted to its ``top`` best captions by graded mean (0: all), in contest order."""
    from purebandits.instances.real import CAPTION_LABELS, CAPTION_REWARDS, caption_contest
    from purebandits.service.validation import DEFAULT_LABELS

    # the contest's vote columns and the service's default labels are the same three, same rewards
    assert [lab["name"].replace(" ", "_") for lab in DEFAULT_LABELS] == list(CAPTION_LABELS)
    assert [lab["reward"] for lab in DEFAULT_LABELS] == list(CAPTION_REWARDS)
    cc = caption_contest(contest)
    means = cc.means
    keep = np.arange(cc.n_arms)
    if 0 < top < cc.n_arms:
        keep = np.sort(np.lexsort((np.arange(cc.n_arms), -means))[:top])  # as experiments.caption_extra
    votes = cc.votes[keep].astype(float)
    return Contest(contest, top, cc.n_arms, [cc.captions[i] for i in keep], votes / votes.sum(axis=1, keepdims=True),
                   means[keep])


class LabelStreams:
    """One label stream per caption: the j-th answer about caption ``a`` is the same in every configuration."""

    def __init__(self, probs: np.ndarray, seed: int) -> None:
        self.probs = probs
        self.rngs = [np.random.default_rng(s) for s in np.random.SeedSequence([seed, 1]).spawn(len(probs))]
        self.buf: list[list[int]] = [[] for _ in probs]

    def draw(self, arm: int) -> int:
        """The next label (0 unfunny, 1 somewhat funny, 2 funny) of caption ``arm``."""
        buf = self.buf[arm]
        if not buf:
            buf.extend(self.rngs[arm].choice(3, size=256, p=self.probs[arm]).tolist()[::-1])
        return buf.pop()


def experiment_spec(contest: Contest, seed: int, repeats: str) -> dict[str, Any]:
    """The organizer's spec: the service's default learner (read now), delta = 0.05 unless its defaults set it."""
    from purebandits.service.validation import DEFAULT_ALGORITHM, DEFAULT_PARAMS

    spec: dict[str, Any] = {
        "name": f"repeat policy cost: {contest.title}", "algorithm": DEFAULT_ALGORITHM,
        "params": dict(DEFAULT_PARAMS), "items": [{"id": str(i), "text": t} for i, t in enumerate(contest.captions)],
        "seed": seed, "repeats": repeats, "query_expiry_seconds": EXPIRY_S,
    }
    if "delta" not in DEFAULT_PARAMS:
        spec["delta"] = DELTA
    return spec


def learner_description(contest: Contest) -> str:
    """The learner as the service resolves it (algorithm and parameters after the delta shortcut)."""
    from purebandits.service.validation import validate_spec

    ls = validate_spec(experiment_spec(contest, 0, "never")).learners[0]
    return f"{ls.algorithm} {json.dumps(ls.params, sort_keys=True)}"


# ---------------------------------------------------------------------------------------- runs
def run_baseline(contest: Contest, seed: int, cap: int) -> dict[str, Any]:
    """The same learner (spec, parameters, seed) in the plain ask/tell loop, no participants, no constraint."""
    from purebandits.service.validation import DEFAULT_LABELS, validate_spec

    es = validate_spec(experiment_spec(contest, seed, "never"))
    learner = es.learners[0].fresh(contest.n)
    # the service hands the learner the items in an order drawn from the seed: learner arm a is
    # caption caption_of[a] (the item's id), here exactly as in the service's experiment
    caption_of = [int(it["id"]) for it in es.items]
    rewards = [float(lab["reward"]) for lab in DEFAULT_LABELS]
    streams = LabelStreams(contest.probs, seed)
    best = contest.best
    w0, c0 = time.perf_counter(), time.process_time()
    answers = on_best = 0
    per_caption = np.zeros(contest.n, dtype=np.int64)
    while not learner.done and answers < cap:
        got = learner.ask(1)
        if not got:  # nothing pending in this loop: a learner that waits here never resumes
            break
        arm = int(got[0])
        caption = caption_of[arm]
        learner.tell(arm, rewards[streams.draw(caption)])
        answers += 1
        on_best += caption in best
        per_caption[caption] += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    rec = caption_of[int(learner.recommend()[0])]
    return {"config": "baseline", "seed": seed, "answers": answers, "stopped": bool(learner.done),
            "recommended": rec, "error": rec not in contest.best, "participants": 0, "exhausted": 0, "waiting": 0,
            "on_best": on_best, "on_top2": int(np.sort(per_caption)[-2:].sum()), "wall_s": wall, "cpu_s": cpu}


def whole_contest_baseline(contest: str, reps: int, seed: int, cap: int) -> dict[str, Any] | None:
    """Answers to stop of the same learner on every caption of ``contest``, with its compiled driver (the literal
    loop takes ~1 ms per answer at 4,000 captions); None when the learner has no compiled kernel."""
    from purebandits.instances.real import caption_contest
    from purebandits.registry import make_learner
    from purebandits.service.validation import validate_spec
    from purebandits.simulate import simulate

    full = load_contest(contest, 0)
    ls = validate_spec(experiment_spec(full, seed, "never")).learners[0]
    learner = make_learner(ls.algorithm, **ls.params)
    if not type(learner).has_kernel():
        return None
    res = simulate(learner, caption_contest(contest).model(), reps=reps, seed=seed, jobs=1, max_pulls=cap,
                   driver="compiled", progress=False)
    return {"mean": float(np.mean(res.pulls)), "runs": reps, "capped": int(np.sum(~np.asarray(res.stopped)))}



#: closed crowd: refusals per member, since the last answer, after which a run counts as deadlocked
STALL_TRIES = 20

class _Clock:
    """Epoch milliseconds, moved by the driver (1 ms per step): queries never expire."""

    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def open_study(db_path: Path, clock: _Clock) -> Any:
    """A Study on a fresh SQLite file, migrated to head (as tests/service/study_support.py)."""
    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine, upgrade
    from purebandits.service.study import Study

    settings = Settings(database_url=f"sqlite:///{db_path}", verify_on_start=False)
    engine = make_engine(settings.database_url)
    upgrade(engine)
    return Study(engine, settings, clock=clock)


def run_service(contest: Contest, repeats: str, pool: int, seed: int, cap: int, db_path: Path,
                crowd: str = "open") -> dict[str, Any]:
    """Drive a real Study with a pool of ``pool`` simulated participants until the learner stops (or ``cap``).

    ``crowd="open"``: a participant told ``"exhausted"`` leaves and a newcomer takes their
    place. ``crowd="closed"``: nobody new comes; the participant stays (they will retry), and
    the run ends as ``deadlocked`` once every participant of the pool has been told
    ``"exhausted"`` :data:`STALL_TRIES` times since the last answer (a refusal logs a ``pass``
    event that gives the candidates back; a randomised learner may then propose others, so one
    refusal each is not yet a deadlock).

    Returns the answers, whether the learner stopped, its recommendation, participants used
    (the pool plus every newcomer), ``"exhausted"`` / ``"waiting"`` events, wall and CPU time
    of the loop, the service's own count ``n_answers_service`` and the invariant checks:
    ``consecutive_repeats`` (an item served twice in a row to one participant) and
    ``never_repeats`` (under ``"never"``, an item served again while the participant had not
    seen every item); both must be 0.
    """
    if crowd not in ("open", "closed"):
        raise ValueError(f"crowd must be 'open' or 'closed', got {crowd!r}")
    from purebandits.service.validation import DEFAULT_LABELS

    labels = [lab["name"] for lab in DEFAULT_LABELS]
    clock = _Clock()
    study = open_study(db_path, clock)
    try:
        eid, _token = study.create_experiment(experiment_spec(contest, seed, repeats))
        rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
        streams = LabelStreams(contest.probs, seed)
        created = 0

        def newcomer() -> str:
            nonlocal created
            created += 1
            return study.new_participant(f"s{seed}-p{created}")

        ids = [newcomer() for _ in range(pool)]
        seen: dict[str, set[int]] = {}
        last: dict[str, int] = {}
        answers = exhausted = waiting = consecutive = never = on_best = 0
        per_caption = np.zeros(contest.n, dtype=np.int64)
        per_label = np.zeros((contest.n, 3), dtype=np.int64)  # what the simulated crowd said, per caption
        best = contest.best
        max_steps = 20 * cap + 10_000  # a run that neither answers nor stops is reported, not looped on
        steps = 0
        blocked: dict[int, int] = {}  # closed crowd: refusals of each pool member since the last answer
        deadlocked = False
        w0, c0 = time.perf_counter(), time.process_time()
        while answers < cap and steps < max_steps:
            steps += 1
            clock.ms += 1
            i = int(rng.integers(pool))
            pid = ids[i]
            q = study.next_query(eid, pid)
            state = q["state"]
            if state == "ok":
                arm = int(q["item"]["id"])  # the caption's index in the contest (the learner's order may differ)
                mine = seen.setdefault(pid, set())
                consecutive += last.get(pid) == arm
                never += repeats == "never" and arm in mine and len(mine) < contest.n
                mine.add(arm)
                last[pid] = arm
                label = streams.draw(arm)
                study.answer(q["query_id"], pid, labels[label])
                per_label[arm, label] += 1
                answers += 1
                on_best += arm in best
                per_caption[arm] += 1
                blocked.clear()
            elif state == "exhausted":
                exhausted += 1
                if crowd == "open":
                    ids[i] = newcomer()
                else:
                    blocked[i] = blocked.get(i, 0) + 1
                    if len(blocked) == pool and min(blocked.values()) >= STALL_TRIES:
                        deadlocked = True
                        break
            elif state == "waiting":
                waiting += 1
            elif state == "done":
                break
            else:
                raise RuntimeError(f"unexpected state {state!r} for participant {pid}")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        res = study.results(eid, timeline=False)
        # the service's per-item answers and label counts, by item id, against what the crowd said
        told = {int(row["id"]): (row["count"], [row["labels"][name] for name in labels]) for row in res["ranking"]}
        per_caption_mismatches = sum(told[c] != (int(per_caption[c]), per_label[c].tolist()) for c in range(contest.n))
    finally:
        study.close()
        study.engine.dispose()
    rec = int(res["recommendation"][0]["id"])  # the caption (item id), not the learner's arm index
    return {"config": f"{repeats}, P={pool}" + (", closed" if crowd == "closed" else ""), "repeats": repeats,
            "pool": pool, "crowd": crowd, "seed": seed, "answers": answers, "stopped": bool(res["done"]),
            "deadlocked": deadlocked,
            "stalled": answers < cap and steps >= max_steps and not res["done"],
            "recommended": rec, "error": rec not in contest.best, "participants": created,
            "answered_participants": len(seen), "exhausted": exhausted, "on_best": on_best,
            "on_top2": int(np.sort(per_caption)[-2:].sum()), "waiting": waiting,
            "steps": steps,
            "wall_s": wall, "cpu_s": cpu, "n_answers_service": int(res["n_answers"]),
            "consecutive_repeats": consecutive, "never_repeats": never,
            "per_caption_mismatches": per_caption_mismatches}


# ---------------------------------------------------------------------------------------- summary
def mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95 % Student-t interval (nan bounds with fewer than 2 values)."""
    from scipy.stats import t

    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, math.nan, math.nan
    h = float(t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return m, m - h, m + h


def summarize(runs: list[dict[str, Any]], configs: list[str]) -> list[dict[str, Any]]:
    """One row per configuration; the ratio to the baseline is paired by seed (same labels, same learner seed)."""
    base = {r["seed"]: r["answers"] for r in runs if r["config"] == "baseline"}
    rows = []
    for cfg in configs:
        rs = [r for r in runs if r["config"] == cfg]
        a = np.array([r["answers"] for r in rs], dtype=float)
        m, lo, hi = mean_ci(a)
        ratio = np.array([r["answers"] / base[r["seed"]] for r in rs])
        rm, rlo, rhi = mean_ci(ratio)
        stopped = [r for r in rs if r["stopped"]]
        total_answers = float(a.sum())
        rows.append({
            "config": cfg, "runs": len(rs), "capped": sum(not r["stopped"] for r in rs),
            "stalled": sum(bool(r.get("stalled")) for r in rs),
            "mean": m, "lo": lo, "hi": hi, "median": float(np.median(a)),
            "ratio": rm, "ratio_lo": rlo, "ratio_hi": rhi,
            "errors": sum(r["error"] for r in stopped), "n_stopped": len(stopped),
            "participants": float(np.mean([r["participants"] for r in rs])),
            "participants_ci": mean_ci(np.array([r["participants"] for r in rs]))[1:],
            "participants_max": int(max(r["participants"] for r in rs)),
            "exhausted": float(np.mean([r["exhausted"] for r in rs])),
            "answers_per_participant": total_answers / max(1, sum(r.get("answered_participants", 0) for r in rs)),
            "ms_per_answer": 1000 * sum(r["wall_s"] for r in rs) / max(total_answers, 1),
            "cpu_ms_per_answer": 1000 * sum(r["cpu_s"] for r in rs) / max(total_answers, 1),
            "best_share": sum(r["on_best"] for r in rs) / max(total_answers, 1),
            "top2_share": sum(r["on_top2"] for r in rs) / max(total_answers, 1),
            "answers": a.tolist(),
        })
    return rows


def _fmt_ci(lo: float, hi: float, digits: int = 0) -> str:
    if math.isnan(lo):
        return "n/a"
    return f"[{lo:,.{digits}f}, {hi:,.{digits}f}]"


def closed_summary(runs: list[dict[str, Any]], base: dict[int, int]) -> list[dict[str, Any]]:
    """Closed-crowd runs per configuration: how they ended (learner stopped, deadlock, cap) and after how much."""
    rows = []
    for cfg in dict.fromkeys(r["config"] for r in runs):
        rs = [r for r in runs if r["config"] == cfg]
        a = np.array([r["answers"] for r in rs], dtype=float)
        dead = [r for r in rs if r["deadlocked"]]
        rows.append({"config": cfg, "runs": len(rs), "deadlocked": len(dead),
                     "stopped": sum(r["stopped"] for r in rs),
                     "capped": sum(not r["stopped"] and not r["deadlocked"] for r in rs),
                     "mean": float(a.mean()), "min": int(a.min()), "max": int(a.max()),
                     "frac": float(np.mean([r["answers"] / base[r["seed"]] for r in rs])),
                     "dead_frac": float(np.mean([r["answers"] / base[r["seed"]] for r in dead])) if dead else math.nan,
                     "exhausted": float(np.mean([r["exhausted"] for r in rs]))})
    return rows


def closed_table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the closed-crowd runs."""
    out = ["| configuration | runs | learner stopped | deadlocked | capped "
           "| answers when the run ended: mean (min-max) | share of the baseline's answers to stop "
           "| \"exhausted\" events (mean) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['config']} | {r['runs']} | {r['stopped']} | {r['deadlocked']} | {r['capped']} "
                   f"| {r['mean']:,.0f} ({r['min']:,}-{r['max']:,}) | {100 * r['frac']:.0f} % "
                   f"| {r['exhausted']:,.0f} |")
    return "\n".join(out)


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the summary rows."""
    head = ("| configuration | runs (capped) | answers to stop: mean | 95 % CI | median | x baseline (paired, 95 % CI) "
            "| wrong caption | participants used | \"exhausted\" events | answers / participant | ms / answer |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out = [head]
    for r in rows:
        base = r["config"] == "baseline"
        ratio = "1 (reference)" if base else f"{r['ratio']:.3f} {_fmt_ci(r['ratio_lo'], r['ratio_hi'], 3)}"
        capped = f"{r['runs']} ({r['capped']}" + (f", {r['stalled']} stalled)" if r["stalled"] else ")")
        if base:
            crowd = "| - | - | -"
        else:
            crowd = (f"| {r['participants']:,.0f} (max {r['participants_max']:,}) | {r['exhausted']:,.1f} "
                     f"| {r['answers_per_participant']:,.1f}")
        out.append(
            f"| {r['config']} | {capped} | {r['mean']:,.0f} | {_fmt_ci(r['lo'], r['hi'])} | {r['median']:,.0f} "
            f"| {ratio} | {r['errors']}/{r['n_stopped']} {crowd} | {r['ms_per_answer']:.3f} |")
    return "\n".join(out)


def _pct(r: dict[str, Any]) -> str:
    """The paired cost in answers, as a signed percentage with its 95 % interval."""
    if math.isnan(r["ratio_lo"]):
        return f"{100 * (r['ratio'] - 1):+.2f} %"
    return (f"{100 * (r['ratio'] - 1):+.2f} % (95 % CI {100 * (r['ratio_lo'] - 1):+.2f} to "
            f"{100 * (r['ratio_hi'] - 1):+.2f} %)")


def _span(xs: list[float], unit: str, digits: int = 0) -> str:
    """'a-b unit' for a range of values, 'a unit' when they agree at that precision."""
    if not xs:
        return "?"
    lo, hi = f"{min(xs):.{digits}f}", f"{max(xs):.{digits}f}"
    sep = " "
    return (lo if lo == hi else f"{lo}-{hi}") + (f"{sep}{unit}" if unit else "")


def _times_fewer(a: float, b: float) -> str:
    """How much fewer b is than a, in words: '12 times fewer' or '18 % fewer' (or 'more')."""
    if b <= 0 or a <= 0:
        return "?"
    if a / b >= 2:
        return f"{a / b:.0f} times fewer"
    return f"{100 * abs(1 - b / a):.0f} % {'fewer' if b <= a else 'more'}"


def conclusion(rows: list[dict[str, Any]], closed_rows: list[dict[str, Any]], pools: list[int]) -> str:
    """Plain-language reading of the numbers for a contest organizer, generated from them (so it follows them)."""
    by = {r["config"]: r for r in rows}
    base = by["baseline"]
    svc = [r for r in rows if r["config"] != "baseline"]
    if not svc:
        return ""
    resolved = [r for r in svc if not math.isnan(r["ratio_lo"]) and not r["ratio_lo"] <= 1 <= r["ratio_hi"]]
    costs = "; ".join(f"{r['config']}: {_pct(r)}" for r in svc)
    if resolved:
        bounds = [100 * abs(x - 1) for r in svc for x in (r["ratio_lo"], r["ratio_hi"])]
        which = ", ".join(f"{r['config']}: {100 * (r['ratio'] - 1):+.1f} %" for r in resolved)
        verdict = (f"within {max(bounds):.0f} % of the learner without participants, every 95 % interval "
                   f"included; {len(resolved)} of {len(svc)} intervals do not contain 0 ({which})")
        if len({r["ratio"] > 1 for r in svc}) > 1:
            verdict += (f", but the signs differ between configurations and with {len(svc)} comparisons at 95 % one "
                        "may exclude 0 by chance: read it as a cost of a few percent at most")
    else:
        worst = max(svc, key=lambda r: abs(r["ratio"] - 1))
        verdict = ("no difference the runs can resolve: every 95 % interval of the paired ratio contains 1 (largest "
                   f"mean difference {100 * (worst['ratio'] - 1):+.1f} %, {worst['config']})")
    lines = [
        f"- **Answers to stop: {verdict}.** Against the baseline, per seed: {costs}. Wrong captions: "
        + ", ".join(f"{r['errors']}/{r['n_stopped']} ({r['config']})" for r in rows) + ". A candidate a participant "
        "may not see is cancelled, as if never asked, so the learner's rule and guarantee are unchanged; what "
        "changes is which of its candidates gets answered, and when.",
    ]

    def away(r: dict[str, Any]) -> str:
        if r["exhausted"] <= 0:
            return "nobody turned away"
        return f"{r['exhausted']:,.0f} turned away (one for every {r['mean'] / r['exhausted']:,.1f} answers)"

    each = "; ".join(f"{r['config']}: {away(r)}, {r['participants']:,.0f} participants in all" for r in svc)
    lines.append(
        f"- **What it costs is participants.** Without participants the learner gave "
        f"{100 * base['best_share']:.0f} % of its answers to the best caption and {100 * base['top2_share']:.0f} % to "
        "the two captions it asked most, so many of its candidates are captions a participant has just rated or "
        "(under `never`) has rated before; when all of its candidates are such captions the participant is "
        f"turned away (\"exhausted\", \"come back later\") and, in these runs, a newcomer takes their place. "
        f"Per run: {each}.")
    for p in pools:
        nv, nc = by.get(f"never, P={p}"), by.get(f"not_consecutive, P={p}")
        if nv and nc and nv["exhausted"] > 0:
            if nc["exhausted"] <= 0:
                how = f"nobody, against {nv['exhausted']:,.0f} per run with `never`"
            else:
                how = f"{_times_fewer(nv['exhausted'], nc['exhausted'])} people than `never`"
            lines.append(f"  With {p} participants at a time, `not_consecutive` turned away {how}.")
    for r in closed_rows:
        pool = r["config"].split("P=")[1].split(",")[0]
        parts = []
        if r["stopped"]:
            parts.append(f"the learner stopped in {r['stopped']} of {r['runs']} runs")
        if r["deadlocked"]:
            parts.append(f"{r['deadlocked']} of {r['runs']} runs deadlocked, on average after "
                         f"{100 * r['dead_frac']:.0f} % of the answers the learner needs (every member had been "
                         f"turned away {STALL_TRIES} times since the last answer)")
        if r["capped"]:
            parts.append(f"{r['capped']} of {r['runs']} runs reached the answer cap")
        policy = r["config"].split(",")[0]
        lines.append(f"- **A fixed group of {pool}** (nobody new arrives), `{policy}`: {'; '.join(parts)}; "
                     f"{r['exhausted']:,.0f} refusals per run on average.")
    advice = ["", "**What to do.**"]
    nv_rows = [r for r in svc if r["config"].startswith("never")]
    nc_rows = [r for r in svc if r["config"].startswith("not_consecutive")]
    if nv_rows and nc_rows:
        cost = "costs no answers the runs can detect" if not resolved else "costs a few percent of answers at most"
        per = _span([r["mean"] / r["exhausted"] for r in nv_rows if r["exhausted"] > 0], "", 1)
        need = (f"it needs a crowd that keeps arriving: one newcomer for every {per} answers here, each replacing "
                "someone told to come back later" if per != "?" else "it turned nobody away here")
        fewer = all(nc["exhausted"] < 0.5 * nv["exhausted"] for nv, nc in zip(nv_rows, nc_rows, strict=True))
        gain = ("it turns far fewer people away (above)" if fewer else
                "it turned away about as many people here, so it buys little on this contest")
        advice.append(
            f"The default `never` {cost} and no accuracy, and nobody rates a caption twice while unseen ones remain; "
            f"{need}. Keep it for an open crowd whose members rate a few captions each (a public page, a platform "
            "with many workers). Choose `not_consecutive` when participants are few or are meant to stay and rate "
            f"many captions (a panel, a class, a lab): {gain}, at the price of people rating a caption again, "
            "never twice in a row.")
    dead = [r for r in closed_rows if r["deadlocked"]]
    if dead:
        advice.append(
            "A fixed group can stall for good: " + ", ".join(
                f"`{r['config'].split(',')[0]}` with {r['config'].split('P=')[1].split(',')[0]} people deadlocked in "
                f"{r['deadlocked']}/{r['runs']} runs" for r in dead)
            + ". Such an experiment needs newcomers to finish; if the dashboard shows participants being turned "
            "away and answers no longer coming in, invite new people.")
    elif closed_rows and all(r["stopped"] == r["runs"] for r in closed_rows):
        advice.append("The fixed groups measured here finished under both policies.")
    return "\n".join(lines + advice)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Answers to stop per configuration (each run, mean and 95 % CI), and participants used per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"baseline": "0.3", "never": "tab:red", "not_consecutive": "tab:blue"}

    def name(r: dict[str, Any]) -> str:
        return r["config"].replace("not_consecutive", "not consecutive").replace(", P=", "\n") + (
            "" if r["config"] == "baseline" else " participants")

    def color(r: dict[str, Any]) -> str:
        return colors[r["config"].split(",")[0]]

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    rng = np.random.default_rng(0)
    ys = np.arange(len(rows))[::-1]
    base = rows[0]
    if not math.isnan(base["lo"]):
        a1.axvspan(base["lo"], base["hi"], color="0.9", zorder=0, label="baseline 95 % CI")
    a1.axvline(base["mean"], color="0.3", lw=1, ls="--", zorder=1)
    for y, r in zip(ys, rows, strict=True):
        pts = np.array(r["answers"])
        a1.scatter(pts, y + rng.uniform(-0.2, 0.2, len(pts)), s=12, color=color(r), alpha=0.35, lw=0, zorder=2)
        if math.isnan(r["lo"]):
            a1.plot(r["mean"], y, "o", color=color(r), ms=8, zorder=3)
        else:
            a1.errorbar(r["mean"], y, xerr=[[r["mean"] - r["lo"]], [r["hi"] - r["mean"]]], fmt="o", color=color(r),
                        ms=8, capsize=6, lw=2.2, zorder=3)
        if r["config"] == "baseline":
            ratio = ""
        elif math.isnan(r["ratio_lo"]):
            ratio = f",  {r['ratio']:.3f} \u00d7 baseline (paired)"
        else:
            ratio = f",  {r['ratio']:.3f} \u00d7 baseline [{r['ratio_lo']:.3f}, {r['ratio_hi']:.3f}]"
        a1.annotate(f"mean {r['mean']:,.0f}{ratio}", (r["mean"], y), xytext=(0, 11), textcoords="offset points",
                    ha="center", fontsize=9, color=color(r), zorder=4,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    a1.set_yticks(ys, [name(r) for r in rows], fontsize=10)
    a1.set_xlabel("answers until the learner stops (dots: single runs; bars: mean and 95 % CI;\n"
                  "ratio to the baseline: mean of the per-seed ratios [95 % CI])", fontsize=10)
    a1.set_ylim(-0.6, len(rows) - 0.35)
    lo_x = min(min(r["answers"]) for r in rows)
    hi_x = max(max(r["answers"]) for r in rows)
    pad = 0.08 * max(hi_x - lo_x, 1)
    a1.set_xlim(lo_x - pad, hi_x + pad)
    a1.grid(axis="x", alpha=0.3)
    a1.set_title("answers to stop, with and without the policy", fontsize=11, loc="left")
    svc = [r for r in rows if r["config"] != "baseline"]
    ys2 = np.arange(len(svc))[::-1]
    a2.barh(ys2, [r["participants"] for r in svc], color=[color(r) for r in svc], alpha=0.8, height=0.6)
    for y, r in zip(ys2, svc, strict=True):
        lo, hi = r["participants_ci"]
        if not math.isnan(lo):
            a2.errorbar(r["participants"], y, xerr=[[r["participants"] - lo], [hi - r["participants"]]], fmt="none",
                        ecolor="0.2", capsize=4, lw=1.2)
    for y, r in zip(ys2, svc, strict=True):
        a2.annotate(f"{r['participants']:,.0f}  ({r['answers_per_participant']:.1f} answers each)",
                    (max(r["participants"], r["participants_ci"][1] if not math.isnan(r["participants_ci"][1]) else 0),
                     y), xytext=(6, 5), textcoords="offset points", fontsize=9)
    a2.set_yticks(ys2, [name(r) for r in svc], fontsize=10)
    a2.set_xlabel("participants used per run (mean, 95 % CI): the pool\nplus a newcomer for each \"exhausted\" one",
                  fontsize=10)
    a2.set_xlim(0, max(r["participants"] for r in svc) * 1.75)
    a2.set_ylim(-0.6, len(svc) - 0.4)
    a2.set_title("what it costs: participants", fontsize=11, loc="left")
    a2.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fs_type(path: Path) -> str:
    """File system of ``path`` (Linux /proc/mounts), '?' if unknown."""
    best, fstype = "", "?"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, fstype = parts[1], parts[2]
    except OSError:
        pass
    return fstype


def report(args: argparse.Namespace, argv: list[str], contest: Contest, learner: str, rows: list[dict[str, Any]],
           closed_rows: list[dict[str, Any]], runs: list[dict[str, Any]], full_baseline: dict[str, Any] | None,
           conditions: dict[str, Any]) -> str:
    """The Markdown page (docs/repeat_policy_cost.md)."""
    nice = os.nice(0)
    cmd = "PYTHONPATH=src " + (f"nice -n {nice} " if nice else "") + "python benchmarks/repeat_policy_cost.py"
    if argv:
        cmd += " " + shlex.join(argv)
    best = ", ".join(f"{i} ({contest.means[i]:.3f})" for i in sorted(contest.best))
    second = np.sort(contest.means)[::-1][1]
    capped = sum(not r["stopped"] for r in runs if r.get("crowd", "open") == "open")
    violations = sum(r.get("consecutive_repeats", 0) + r.get("never_repeats", 0) for r in runs)
    mismatches = sum(r.get("n_answers_service", r["answers"]) != r["answers"] for r in runs)
    caption_mismatches = sum(bool(r.get("per_caption_mismatches")) for r in runs)
    seeds = f"{args.seed}..{args.seed + args.seeds - 1}"
    svc = [r for r in rows if r["config"] != "baseline"]
    svc_ms = float(np.mean([r["ms_per_answer"] for r in svc])) if svc else math.nan
    parts = [
        "# What the repeat policy costs: answers to stop with and without it",
        "",
        "The service never hands a participant the same item twice in a row and, with the default "
        "`repeats=\"never\"`, at most once per experiment while items they have not seen remain "
        "(`purebandits.service.study`, \"Repeats\"). When none of the learner's "
        f"{conditions['max_candidates']} candidates may be shown, the participant gets `\"exhausted\"` and is asked "
        "to come back later. This page measures what that costs on a bootstrapped caption contest.",
        "",
        "## Setup",
        "",
        f"- **Instance**: {contest.title}, labels drawn from each caption's public vote shares "
        "(unfunny / somewhat funny / funny, rewards 0 / 0.5 / 1). Best caption by graded mean: number "
        f"{best} (numbered in contest order); the runner-up has {second:.3f}.",
        f"- **Learner**: the service's default, as an organizer gets it: `{learner}`, i.e. `DEFAULT_ALGORITHM` / "
        "`DEFAULT_PARAMS` of `purebandits.service.validation` with the spec's `delta` = 0.05 (unless the defaults "
        "set delta). The spec's `delta` is the target error probability; the service hands a learner proven to err "
        "at most `error_per_delta * delta` that fraction of it, which is the parameter shown. The service gives the "
        "learner the captions in an order drawn from the seed; the baseline uses the same order, and results are "
        "by caption.",
        "- **Service runs**: a real `Study` in-process on a fresh SQLite file per run, fake clock (queries never "
        "expire). A pool of P participants; at each step a uniformly random one asks; `ok`: they answer at once; "
        "`exhausted`: they leave and a newcomer takes their place (\"participants used\" counts the pool and every "
        "newcomer); `waiting`: skipped; `done`: the run ends.",
        "- **Baseline**: the same learner (same parameters, same seed) in the plain `ask(1)` / `tell` loop, no "
        "participants, no constraint.",
        f"- **Pairing**: seeds {seeds} in every configuration; the j-th answer about a caption is the same label in "
        "every configuration of a seed, so configurations differ only through what was asked. The ratio to the "
        "baseline is the mean of the per-seed ratios.",
        f"- **Cap**: {args.cap:,} answers per run; capped runs: {capped}. A \"wrong caption\" is a recommendation "
        "other than the caption with the highest graded mean (stopped runs only).",
        f"- **Checks**: served-twice violations {violations} (no item twice in a row; under `never`, no item again "
        f"while unseen remained); runs where the answers counted differ from `results()[\"n_answers\"]`: "
        f"{mismatches}; runs where any caption's answers or label counts in `results()[\"ranking\"]` differ from "
        f"what the simulated crowd said: {caption_mismatches}.",
        "",
    ]
    if full_baseline is not None:
        parts += [
            f"Why not the whole contest: on all {contest.n_total:,} captions of contest {contest.contest} the same "
            f"learner needed {full_baseline['mean']:,.0f} answers to stop without participants (its compiled "
            f"driver, mean of {full_baseline['runs']} seeds, {full_baseline['capped']} capped at {args.cap:,}); at the "
            f"{svc_ms:.1f} ms per answer measured below through the service that is about "
            f"{full_baseline['mean'] * svc_ms / 60_000:.0f} minutes per run, "
            f"{len(svc) * args.seeds * full_baseline['mean'] * svc_ms / 3_600_000:.0f} hours for the table. The "
            f"{contest.n} best captions are the part of the contest that decides the winner, and the part where the "
            "learner's answers concentrate on few captions, which is where repeats bind.",
            "",
        ]
    parts += [
        "## Results",
        "",
        table(rows),
        "",
        "\"ms / answer\" is the wall time of the whole loop (asks, answers, turned-away asks) divided by the answers; "
        "CPU time per answer was "
        + ", ".join(f"{r['cpu_ms_per_answer']:.3f}" for r in rows) + " ms in the same order.",
        "",
        "![answers to stop per configuration](img/repeat_policy_cost.png)",
        "",
        *([
            "### A closed group: nobody new arrives",
            "",
            f"The same runs (seeds {args.seed}..{args.seed + args.closed_seeds - 1}, pools of "
            f"{', '.join(map(str, args.closed_participants))}) with the pool fixed: a "
            "participant told `\"exhausted\"` stays and asks again later. A run is *deadlocked* once every "
            f"member of the pool has been refused {STALL_TRIES} times since the last answer (a refusal gives the "
            "learner's candidates back, so a randomised learner may propose others on the next try).",
            "",
            closed_table(closed_rows),
            "",
        ] if closed_rows else []),
        "## Reading",
        "",
        conclusion(rows, closed_rows, args.participants),
        "",
        "## How it was run",
        "",
        "```",
        cmd,
        "```",
        "",
        f"- Seeds {seeds}; {args.seeds} per configuration; total wall time {conditions['wall_s'] / 60:.1f} min.",
        f"- Machine: {conditions['machine_start']} at the start; load average at the end "
        f"{conditions['load_end']}. Two cores shared with other work (other engineers' tests and builds ran at the "
        "same time), so wall times are indicative; answers-to-stop do not depend on the machine.",
        f"- SQLite file on local disk ({conditions['tmp_dir']}, {conditions['fs_type']}), WAL mode, "
        "`synchronous=NORMAL` (the service's settings), one file per run.",
        f"- purebandits.service.study.MAX_CANDIDATES = {conditions['max_candidates']}; service settings at their "
        "defaults (snapshot every 200 events). An `\"exhausted\"` ask discards the process's cached learner (it "
        "asked for candidates that are not logged) and the next ask rebuilds it from the snapshot and the log, so "
        "turned-away asks are the most expensive requests in these runs.",
        "",
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke size: 3 seeds on the top 3 captions, capped at 1,000 answers, no files unless asked")
    p.add_argument("--contest", default="512", help="bundled caption contest (512, 558, 559)")
    p.add_argument("--top", type=int, default=None, help="keep the best TOP captions (0: all; default 20, quick 3)")
    p.add_argument("--participants", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100],
                   help="pool sizes, comma separated")
    p.add_argument("--seeds", type=int, default=None, help="runs per configuration (default 10, quick 3)")
    p.add_argument("--closed-seeds", type=int, default=None,
                   help="closed-crowd runs per configuration (default 5, quick 1; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--cap", type=int, default=None, help="answers per run at most (default 200,000; quick 1,000)")
    p.add_argument("--closed-participants", type=lambda s: [int(x) for x in s.split(",")], default=[10],
                   help="pool sizes of the closed-crowd runs (default 10)")
    p.add_argument("--full-baseline-seeds", type=int, default=None,
                   help="baseline runs on the whole contest, for the page (default 5, quick 0)")
    p.add_argument("--out", type=Path, default=None, help="Markdown page (default docs/repeat_policy_cost.md)")
    p.add_argument("--plot", type=Path, default=None, help="PNG (default docs/img/repeat_policy_cost.png)")
    p.add_argument("--json", type=Path, default=None, help="every run, as JSON")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.top is None:
        args.top = 3 if args.quick else 20
    if args.seeds is None:
        args.seeds = 3 if args.quick else 10
    if args.cap is None:
        args.cap = 1_000 if args.quick else 200_000
    if args.closed_seeds is None:
        args.closed_seeds = 1 if args.quick else 5
    if args.full_baseline_seeds is None:
        args.full_baseline_seeds = 0 if args.quick else 5
    if not args.quick:
        args.out = args.out or ROOT / "docs" / "repeat_policy_cost.md"
        args.plot = args.plot or ROOT / "docs" / "img" / "repeat_policy_cost.png"

    from tqdm import tqdm

    from purebandits.service.study import MAX_CANDIDATES

    t_start = time.perf_counter()
    machine_start = machine()
    contest = load_contest(args.contest, args.top)
    learner = learner_description(contest)
    print(f"# repeat_policy_cost ({machine_start})")
    print(f"# {contest.title}; learner {learner}; seeds {args.seed}..{args.seed + args.seeds - 1}; cap {args.cap:,}")
    seeds = list(range(args.seed, args.seed + args.seeds))
    closed_seeds = seeds[:args.closed_seeds]
    configs = ["baseline"] + [f"{rep}, P={pool}" for pool in args.participants for rep in POLICIES]
    runs: list[dict[str, Any]] = []
    closed: list[dict[str, Any]] = []
    full_baseline = None
    if args.full_baseline_seeds and 0 < args.top < contest.n_total:
        full_baseline = whole_contest_baseline(args.contest, args.full_baseline_seeds, args.seed, args.cap)
        if full_baseline is not None:
            print(f"# whole contest ({contest.n_total} captions), baseline: {full_baseline['mean']:,.0f} answers "
                  f"({full_baseline['capped']}/{full_baseline['runs']} capped)", flush=True)
    jobs = [(seed, pool, rep, "open") for seed in seeds for pool in args.participants for rep in POLICIES]
    jobs += [(seed, pool, rep, "closed") for seed in closed_seeds for pool in args.closed_participants
             for rep in POLICIES]
    tmp_root = Path(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="repeat_policy_") as tmp, \
            tqdm(total=len(jobs), desc="service runs", unit="run", dynamic_ncols=True, disable=args.no_progress) as bar:
        for seed in seeds:
            runs.append(run_baseline(contest, seed, args.cap))
        for seed, pool, rep, crowd in jobs:
            db = Path(tmp) / f"s{seed}-{rep}-{pool}-{crowd}.sqlite"
            r = run_service(contest, rep, pool, seed, args.cap, db, crowd=crowd)
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
            (runs if crowd == "open" else closed).append(r)
            bar.set_postfix_str(f"seed {seed} {r['config']}: {r['answers']} answers, "
                                f"{1000 * r['wall_s'] / max(r['answers'], 1):.2f} ms/answer")
            bar.update()
    rows = summarize(runs, configs)
    base = {r["seed"]: r["answers"] for r in runs if r["config"] == "baseline"}
    closed_rows = closed_summary(closed, base) if closed else []
    conditions = {"machine_start": machine_start, "wall_s": time.perf_counter() - t_start,
                  "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()), "tmp_dir": str(tmp_root),
                  "fs_type": _fs_type(tmp_root.resolve()), "max_candidates": MAX_CANDIDATES}
    print()
    print(table(rows))
    if closed_rows:
        print()
        print(closed_table(closed_rows))
    print()
    print(conclusion(rows, closed_rows, args.participants))
    bad = [r for r in runs + closed if r.get("consecutive_repeats") or r.get("never_repeats")
           or r.get("per_caption_mismatches") or r.get("n_answers_service", r["answers"]) != r["answers"]]
    if bad:
        print(f"INVARIANT VIOLATED in {len(bad)} runs: {bad[:3]}", file=sys.stderr)
    print(f"\n# {conditions['wall_s']:.0f} s in all")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "closed_rows": closed_rows, "runs": runs + closed}, indent=1,
                                        default=str))
    if args.plot:
        plot(rows, args.plot, f"Repeat policy cost: {contest.title}; {learner}; {args.seeds} seeds per configuration")
        print(f"wrote {args.plot}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report(args, argv, contest, learner, rows, closed_rows, runs + closed, full_baseline,
                                   conditions))
        print(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
