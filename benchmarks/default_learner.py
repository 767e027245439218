"""Which delta-correct learner should the service start new experiments with? Measured on the caption contests.

For a shortlist of fixed-confidence learners that are delta-correct with the parameters given
below (target error 0.05, k = 1), and for the service's current default, heuristic lil'UCB (no
guarantee; a reference only), on the bundled caption contests 512 (4,399 captions), 558 (3,925)
and 559 (138) with the service's reward mapping (unfunny / somewhat funny / funny -> 0 / 0.5 / 1,
which is the ``caption:`` instance's categorical model: every answer is a draw from the caption's
real vote counts), this measures

- answers (pulls) to stop: mean, median and 90% quantile over the runs (lower bounds when some
  runs hit the pull cap, marked ">=");
- the fraction of runs that hit the cap;
- the error rate of the runs that stopped by themselves, with a 95% Wilson interval (a learner
  is consistent with delta when the interval's lower end is at most 0.05);
- ask/tell throughput of the literal ``ask(1)`` / ``tell`` loop at the contest's size: answers
  (one ``ask`` plus one ``tell``) per CPU second, which is what the service runs under its lock
  for every answer. The learner is first advanced to 2 n answers with its compiled driver (every
  caption answered at least once; time-boxed for the O(n)-per-pull learners), then timed.

Every cell uses the same ``--seed``: repetition r of every learner sees the same reward stream
seed (``purebandits.simulate.rep_seeds``), so the comparisons between learners are paired.
Repetitions run in this process (``--jobs 1``, default) so the CPU seconds are this process's.

Learners whose compiled kernel is O(n) per pull (LUCB1, UCB1 + LS, top-two) get fewer
repetitions; KL-LUCB and Track-and-Stop (about 300-1,000 pulls per second at 4,000 captions,
i.e. 10-50 minutes for one run) get the throughput measurement only. Contest 559's two best
captions differ by 0.0002 in mean: at k = 1 every learner is expected to hit the cap there.

    python benchmarks/default_learner.py            # default size: ~15 CPU minutes (22 min wall on a loaded machine)
    python benchmarks/default_learner.py --quick    # under a minute (smoke size)
    python benchmarks/default_learner.py --md out.md --seed 2026

The results and the argued choice are in docs/default_learner.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

from purebandits.instances import Instance, make_instance  # noqa: E402
from purebandits.metrics import wilson_interval  # noqa: E402
from purebandits.registry import make_learner  # noqa: E402
from purebandits.simulate import simulate  # noqa: E402
from purebandits.simulate.engine import _advance_reference  # noqa: E402

#: the error probability the service promises (the learners' own delta is set to give it)
TARGET = 0.05


@dataclass(frozen=True)
class Candidate:
    """One learner configuration of the shortlist."""

    label: str
    name: str
    params: dict
    guarantee: str
    #: "fast" (kernel O(log n) or O(1) per pull), "slow" (O(n) per pull: fewer runs),
    #: "throughput" (too slow to run to the stop at contest size: throughput only)
    speed: str = "fast"
    delta_correct: bool = True


CANDIDATES = [
    Candidate("lil'UCB heuristic (current default)", "lil_ucb", {"delta": 0.05, "preset": "heuristic"},
              "none: JMNB14 Sec. 5 heuristic (eps = 0, beta = 1/2, delta/5); reference only", delta_correct=False),
    Candidate("lil'UCB faithful", "lil_ucb", {"delta": 0.05, "preset": "faithful"},
              "JMNB14 Thm 2 (eps = 0.01, beta = 1, lam = 9, delta' from inverting the bound)"),
    Candidate("lil'UCB faithful + LS", "lil_ucb", {"delta": 0.05, "preset": "faithful", "ls": True},
              "JMNB14 Thm 2 at delta/2 + LIL stopping rule LS at delta/2 (Sec. 5)"),
    Candidate("lil'LUCB faithful", "lil_lucb", {"delta": 0.05, "preset": "faithful"},
              "finite LIL (eps = 0.01, delta' = delta/c_eps) at delta'/n per arm: union bound <= delta"),
    Candidate("LUCB++ faithful", "lucb_plus_plus", {"delta": 0.05, "preset": "faithful"},
              "SJR17 split of delta' = delta/c_eps (JLQ17 Sec. 5 faithful preset)"),
    Candidate("lil'RandLUCB faithful", "lil_rand_lucb", {"delta": 0.05, "preset": "faithful"},
              "JLQ17 Thm 3.1: error <= c_eps delta' = delta"),
    Candidate("lil-KLUCB (delta = 0.025)", "lil_kl_ucb", {"delta": 0.025},
              "TNM17 Thm 1: error <= 2 delta = 0.05 (KL bounds of Thm 2, N = 8)"),
    Candidate("KL-RandLUCB (delta = 0.025)", "kl_rand_lucb", {"delta": 0.025},
              "the same TNM17 bounds (error <= 2 delta = 0.05); correctness uses the bounds only"),
    Candidate("KL-RandLUCB K_inf bounds (delta = 0.025)", "kl_rand_lucb", {"delta": 0.025, "form": "kinf"},
              "K_inf bounds of each caption's ratings at the Krichevsky-Trofimov level (kinf_bounds; error <= 2 "
              "delta = 0.05): the service's default"),
    Candidate("KL-RandLUCB KT level (delta = 0.025)", "kl_rand_lucb", {"delta": 0.025, "form": "kt"},
              "KL bounds at the Krichevsky-Trofimov level (bounds.kt_kl_level_s; error <= 2 delta = 0.05)"),
    Candidate("KL-RandLUCB L'/U' (delta = 0.025)", "kl_rand_lucb", {"delta": 0.025, "form": "simplified"},
              "the same, with the bounds' simplified form (the service's default before the exact form)"),
    Candidate("Successive Elimination (LS radius)", "successive_elimination", {"delta": 0.05},
              "on the LS event (prob >= 1 - delta) no elimination is wrong"),
    Candidate("LUCB1", "lucb1", {"delta": 0.05}, "KTAS12 Thm (k1 = 5/4)", "slow"),
    Candidate("UCB1 + LS", "ucb1", {"delta": 0.05}, "LS with the whole delta (UCB1 has no failure event)", "slow"),
    Candidate("top-two EB-TC, Bernoulli GLR, theory threshold", "top_two",
              {"delta": 0.05, "cost": "bernoulli", "threshold": "theory"},
              "GK16 Prop. 12 GLR stop, log(2t(n-1)/delta), any sampling rule", "slow"),
    Candidate("KL-LUCB", "kl_lucb", {"delta": 0.05}, "KK13 Thm 1 (alpha = 1.1, k1 = 405.5)", "throughput"),
    Candidate("Track-and-Stop (theory threshold)", "track_and_stop", {"delta": 0.05, "threshold": "theory"},
              "GK16 Prop. 12 GLR stop, log(2t(n-1)/delta)", "throughput"),
]


@dataclass(frozen=True)
class Plan:
    """Repetitions and caps per contest (the script's size)."""

    contests: tuple[str, ...]
    reps: dict  # contest -> {speed: reps}
    caps: dict  # contest -> {speed: max pulls per run}
    tp_answers: int  # answers timed per throughput measurement (or tp_seconds, whichever first)
    tp_seconds: float
    warm_seconds: float  # time box of the warm-up to 2 n answers
    skip: dict = field(default_factory=dict)  # (contest, registry name) -> reason for not running it


def default_plan() -> Plan:
    return Plan(
        contests=("512", "558", "559"),
        reps={"512": {"fast": 100, "slow": 5}, "558": {"fast": 100, "slow": 3}, "559": {"fast": 20, "slow": 3}},
        caps={"512": {"fast": 10**8, "slow": 2 * 10**7}, "558": {"fast": 10**8, "slow": 2 * 10**7},
              "559": {"fast": 5 * 10**6, "slow": 5 * 10**6}},
        tp_answers=20_000, tp_seconds=3.0, warm_seconds=15.0,
        skip={("558", "top_two"): "O(n) per pull: about 13,000 pulls/s at 3,925 captions, > 1 minute per run"},
    )


def quick_plan() -> Plan:
    return Plan(
        contests=("512", "559"),
        reps={"512": {"fast": 3, "slow": 1}, "559": {"fast": 2, "slow": 1}},
        caps={"512": {"fast": 10**7, "slow": 2 * 10**5}, "559": {"fast": 2 * 10**5, "slow": 2 * 10**5}},
        tp_answers=1_000, tp_seconds=0.2, warm_seconds=0.5,
        skip={("512", "top_two"): "quick size"},
    )


def throughput(cand: Candidate, inst: Instance, seed: int, answers: int, seconds: float,
               warm_seconds: float) -> tuple[float, int]:
    """(answers per CPU second of the ask(1)/tell loop, answers before timing) at the contest's size."""
    n = inst.n_arms
    learner = make_learner(cand.name, **cand.params).start(n, seed=seed)
    stream = inst.model.stream(seed + 1)
    c0 = time.process_time()
    while learner.t_ < 2 * n and not learner.done_ and time.process_time() - c0 < warm_seconds:
        try:
            learner.run_compiled(stream, min(2 * n, learner.t_ + 500))
        except NotImplementedError:  # no kernel (for these parameters): the ask/tell loop
            _advance_reference(learner, stream, min(2 * n, learner.t_ + 500))
    _advance_reference(learner, stream, learner.t_ + 100)  # untimed: builds the Python path's caches
    warm = learner.n_pulls
    done = 0
    c0 = time.process_time()
    while done < answers and not learner.done_:
        arm = learner.ask(1)[0]
        learner.tell(arm, stream.draw(arm))
        done += 1
        if done % 50 == 0 and time.process_time() - c0 >= seconds:
            break
    cpu = time.process_time() - c0
    return (done / cpu if cpu > 0 and done else math.nan), warm


def _fmt_pulls(x: float, lower: bool) -> str:
    s = f"{x:,.0f}" if x < 1e6 else f"{x / 1e6:.2f}M"
    return (">=" if lower else "") + s


def run_cell(cand: Candidate, inst: Instance, reps: int, cap: int, seed: int, jobs: int) -> dict:
    c0, w0 = time.process_time(), time.perf_counter()
    res = simulate(make_learner(cand.name, **cand.params), inst, reps=reps, seed=seed, max_pulls=cap, jobs=jobs,
                   progress=False)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    stopped = res.stopped
    wrong_stopped = int((stopped & ~res.correct).sum())
    n_stopped = int(stopped.sum())
    lo, hi = wilson_interval(wrong_stopped, n_stopped) if n_stopped else (math.nan, math.nan)
    q = np.quantile(res.pulls, [0.5, 0.9])
    return {
        "reps": reps, "cap": cap, "capped": int((~stopped).sum()), "mean": float(res.pulls.mean()),
        "median": float(q[0]), "q90": float(q[1]), "stopped": n_stopped, "wrong": wrong_stopped,
        "rate": wrong_stopped / n_stopped if n_stopped else math.nan, "lo": lo, "hi": hi,
        "wrong_at_cap": int((~stopped & ~res.correct).sum()), "cpu": cpu, "wall": wall,
        "pulls_per_s": float(res.pulls.sum() / max(cpu if jobs == 1 else wall, 1e-9)),
    }


def contest_header(contest: str, inst: Instance) -> str:
    m = np.sort(inst.means)[::-1]
    return (f"### Contest {contest}: {inst.n_arms:,} captions, best mean {m[0]:.4f}, gaps to the next three "
            f"{m[0] - m[1]:.4f} / {m[0] - m[2]:.4f} / {m[0] - m[3]:.4f}\n")


TABLE_HEAD = ("| learner | registry name, params | runs (cap) | capped | answers to stop: mean | median | 90% | "
              "wrong / stopped | error rate, 95% Wilson | answers per CPU s (ask/tell) | sim CPU s |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")


def table_row(cand: Candidate, cell: dict | None, tp: float, note: str = "") -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in cand.params.items())
    label = cand.label + ("" if cand.delta_correct else " *")
    tps = f"{tp:,.0f}" if math.isfinite(tp) else "-"
    if cell is None:
        return f"| {label} | `{cand.name}` {params} | {note} | | | | | | | {tps} | |\n"
    lower = cell["capped"] > 0
    if cell["stopped"]:
        err = f"{cell['rate']:.3f} [{cell['lo']:.3f}, {cell['hi']:.3f}]"
    else:
        err = "- (no run stopped)"
    cap = f"{cell['cap']:.0e}".replace("e+0", "e")
    capped = f"{cell['capped']}" + (f" ({cell['wrong_at_cap']} wrong at cap)" if cell["capped"] else "")
    return (f"| {label} | `{cand.name}` {params} | {cell['reps']} ({cap}) | {capped} | "
            f"{_fmt_pulls(cell['mean'], lower)} | {_fmt_pulls(cell['median'], lower)} | "
            f"{_fmt_pulls(cell['q90'], lower)} | {cell['wrong']} / {cell['stopped']} | {err} | {tps} | "
            f"{cell['cpu']:.1f} |\n")


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke size: under a minute")
    ap.add_argument("--seed", type=int, default=2026, help="root seed of every cell (default 2026)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes per cell (default 1: CPU time measured)")
    ap.add_argument("--contests", default=None, help="comma-separated subset of 512,558,559")
    ap.add_argument("--learners", default=None, help="comma-separated registry names to keep")
    ap.add_argument("--md", default=None, help="also write the Markdown tables to this file")
    args = ap.parse_args(argv)
    plan = quick_plan() if args.quick else default_plan()
    contests = plan.contests if args.contests is None else tuple(args.contests.split(","))
    keep = None if args.learners is None else set(args.learners.split(","))
    cands = [c for c in CANDIDATES if keep is None or c.name in keep]

    t_start, c_start = time.perf_counter(), time.process_time()
    out = [f"Command: `python benchmarks/default_learner.py{' --quick' if args.quick else ''} --seed {args.seed}"
           f"{'' if args.jobs == 1 else f' --jobs {args.jobs}'}`\n\n",
           f"Machine at start: {machine()}\n\n"]
    print("".join(out), end="", flush=True)
    for contest in contests:
        inst = make_instance(f"caption:{contest}")
        head = contest_header(contest, inst) + "\n" + TABLE_HEAD
        print(head, end="", flush=True)
        out.append(head)
        for cand in cands:
            tp, _ = throughput(cand, inst, args.seed, plan.tp_answers, plan.tp_seconds, plan.warm_seconds)
            reason = plan.skip.get((contest, cand.name))
            if cand.speed == "throughput":
                reason = "throughput only (O(n) per pull, ~0.3-1k pulls/s at 4,000 captions)"
            if reason is not None:
                row = table_row(cand, None, tp, f"not run: {reason}")
            else:
                speed = "fast" if cand.speed == "fast" else "slow"
                cell = run_cell(cand, inst, plan.reps[contest][speed], plan.caps[contest][speed], args.seed,
                                args.jobs)
                row = table_row(cand, cell, tp)
            print(row, end="", flush=True)
            out.append(row)
        out.append("\n")
        print(flush=True)
    tail = (f"\n`*` not delta-correct (reference). Error rate: wrong answers among the runs that stopped by "
            f"themselves; capped runs are counted in 'capped' only. Answers to stop include capped runs at the "
            f"cap ('>=' marks lower bounds). Total: {time.perf_counter() - t_start:.0f} s wall, "
            f"{time.process_time() - c_start:.0f} s CPU of this process. Machine at end: {machine()}\n")
    print(tail, flush=True)
    out.append(tail)
    text = "".join(out)
    if args.md:
        Path(args.md).write_text(text)
    return text


if __name__ == "__main__":
    main()
