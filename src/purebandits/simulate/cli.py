"""``purebandits simulate``: run seeded repetitions of one algorithm on one instance.

Example::

    purebandits simulate --algorithm lil_ucb --param delta=0.1 --instance one_sparse:n=1000 \\
        --reps 250 --seed 0 --out results.csv --checkpoints geom:1000:100000:30 --plot curve.png

prints a summary (mean and quantiles of the samples to stop, the error rate with a Wilson
confidence interval), writes one CSV row per repetition and, with ``--plot``, the anytime curve
"probability that the best arm is among the top m empirical means" against the number of pulls.

``--crowd sessions=25,concurrency=32,batch=1,fatigue=0,careless=0`` (every key optional; ``--crowd``
alone is the default crowd) rates the items by a crowd of participants instead of one pull at a time
(:mod:`purebandits.simulate.crowd`), with ``--max-pulls`` as the budget of ratings; it also records the
quality of the reported ranking (``top1_correct``, ``top10_precision``, ``top25_precision``,
``kendall25``) per checkpoint and at the end, which ``--quality`` records without a crowd.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from purebandits._extras import require_extra

if TYPE_CHECKING:
    from purebandits.simulate.engine import SimResult

HELP = "simulate an algorithm on an instance (seeded repetitions, local or Dask)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits simulate``: algorithm and parameters, instance, repetitions, seed, executor, cap,
    checkpoints, outputs and journal."""
    parser.add_argument("--algorithm", required=True, help="registered name (see `purebandits algorithms`)")
    parser.add_argument("--param", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="learner parameter, e.g. --param delta=0.05 preset=faithful (repeatable)")
    parser.add_argument("--instance", required=True, metavar="NAME[:ARGS]",
                        help="e.g. one_sparse:n=1000, lil_exp:n=1000,alpha=0.6, nsar:setup=2,m=4, caption:558, rte")
    parser.add_argument("--reps", type=int, default=100, help="repetitions (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes (default: all cores)")
    parser.add_argument("--executor", default=None, metavar="dask://HOST:PORT",
                        help="a Dask scheduler address, or 'inprocess'")
    parser.add_argument("--max-pulls", type=int, default=None, help="cap on pulls per repetition")
    parser.add_argument("--checkpoints", default=None, metavar="SPEC",
                        help="pull counts for the anytime curve: '1000,5000,20000', 'geom:START:STOP:NUM' "
                             "or 'lin:START:STOP:NUM'")
    parser.add_argument("--driver", choices=("auto", "compiled", "reference"), default="auto")
    parser.add_argument("--out", default=None, metavar="results.csv", help="write one row per repetition")
    parser.add_argument("--npz", default=None, metavar="results.npz", help="write every array (incl. counts)")
    parser.add_argument("--plot", default=None, metavar="curve.png", help="plot the anytime curve to PNG")
    parser.add_argument("--top-m", type=int, default=1,
                        help="the curve shows P(best arm among the top m empirical means) (default 1)")
    parser.add_argument("--journal", default=None, metavar="DIR",
                        help="save every finished chunk of repetitions in DIR; the same command run again "
                             "resumes from them (same results)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--crowd", nargs="?", const="", default=None, metavar="KEY=VALUE,...",
                        help="rate by a crowd: sessions=25,concurrency=32,batch=1,fatigue=0,careless=0 (mean "
                             "session length, participants at a time, pulls each holds, fatigue drift, share of "
                             "careless raters, share of straight-lining raters: straightline=0; each optional); "
                             "implies --quality")
    parser.add_argument("--quality", action="store_true",
                        help="record top1_correct, top10_precision, top25_precision and kendall25 of the reported "
                             "ranking per checkpoint and at the end (CSV columns NAME@c and NAME)")


def parse_value(text: str) -> Any:
    """``"0.1"`` -> 0.1, ``"3"`` -> 3, ``"true"`` -> True, ``"none"`` -> None, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_params(items: list[str]) -> dict[str, Any]:
    """``--param KEY=VALUE`` items as a dict, each value read by :func:`parse_value`."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--param needs KEY=VALUE, got {item!r}")
        out[key.strip()] = parse_value(value)
    return out


def parse_checkpoints(spec: str | None) -> np.ndarray | None:
    """Checkpoint pull counts from ``"a,b,c"``, ``"geom:START:STOP:NUM"`` or ``"lin:START:STOP:NUM"``."""
    if spec is None:
        return None
    kind, _, rest = spec.partition(":")
    if kind in ("geom", "lin") and rest:
        parts = rest.split(":")
        if len(parts) != 3:
            raise ValueError(f"checkpoints {spec!r}: use {kind}:START:STOP:NUM")
        start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
        if not (1 <= start <= stop) or num < 1:
            raise ValueError(f"checkpoints {spec!r}: need 1 <= START <= STOP and NUM >= 1")
        grid = np.geomspace(start, stop, num) if kind == "geom" else np.linspace(start, stop, num)
        return np.unique(np.round(grid).astype(np.int64))
    try:
        values = [int(float(x)) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"checkpoints {spec!r}: not a list of integers") from None
    return np.unique(np.asarray(values, dtype=np.int64))


def format_summary(res: SimResult, hardness: dict[str, float] | None = None) -> str:
    """The summary table printed by the command."""
    s = res.summary()
    h = ""
    if hardness:
        h = "  (" + ", ".join(f"{k} = {v:.4g}" for k, v in hardness.items() if k in ("H1", "H2")) + ")"
    lines = [
        f"{s['algorithm']} {_fmt_params(res.params)} on {s['instance']}{h}",
        f"{s['reps']} repetitions, seed {res.seed}, {res.driver} driver, {s['elapsed_s']:.2f} s, "
        f"{s['pulls_per_s'] / 1e6:.2f} M pulls/s",
        "",
        f"{'samples to stop':<18}{'mean':>12}{'q05':>12}{'q25':>12}{'median':>12}{'q75':>12}{'q95':>12}",
        f"{'':<18}{s['pulls_mean']:>12.6g}{s['pulls_q05']:>12.6g}{s['pulls_q25']:>12.6g}"
        f"{s['pulls_median']:>12.6g}{s['pulls_q75']:>12.6g}{s['pulls_q95']:>12.6g}",
        f"{'capped runs':<18}{s['capped']:>12d}   (stopped by --max-pulls {res.max_pulls}, not by the learner)"
        if s["capped"] else f"{'capped runs':<18}{0:>12d}",
        f"{'error rate':<18}{s['error_rate']:>12.4f}   ({s['errors']} / {s['reps']}; "
        f"{100 * s['confidence']:.0f}% Wilson CI [{s['error_ci_low']:.4f}, {s['error_ci_high']:.4f}])",
    ]
    crowd = res.extra.get("crowd")
    if crowd:
        per = res.pulls.sum() / max(res.extra.get("participants", 0), 1)
        lines.append(f"{'crowd':<18}" + ", ".join(f"{k}={v:g}" for k, v in crowd.items())
                     + f"; {res.extra.get('participants', 0)} participants, {per:.1f} ratings each")
    if res.quality and res.reps:
        lines.append(f"{'at the end':<18}" + ", ".join(
            f"{name} {np.nanmean(res.quality[name]):.4g}" if np.isfinite(res.quality[name]).any() else f"{name} nan"
            for name in ("top1_correct", "top10_precision", "top25_precision", "kendall25")))
        if res.checkpoints.size:
            until = res.ratings_until("top10_precision", 0.9)
            lines.append(f"{'top 10 right':<18}" + (
                f"in >= 90% of the runs from {until:,.0f} ratings on" if math.isfinite(until) else
                f"in < 90% of the runs at the last checkpoint ({int(res.checkpoints[-1]):,} ratings)"))
    return "\n".join(lines)


def _fmt_params(params: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in params.items() if v is not None) + ")"


def plot_anytime(res: SimResult, path: str, top_m: int = 1) -> None:
    """P(best arm among the top ``top_m`` empirical means) and P(recommendation correct) vs pulls."""
    require_extra("plot", "plot_anytime")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = res.checkpoints
    in_top = (res.ckpt_best_rank < top_m).mean(axis=0)
    correct = res.ckpt_correct.mean(axis=0)
    if res.quality:
        fig, (ax, axq) = plt.subplots(1, 2, figsize=(11.5, 4.2))
        _plot_quality(axq, res)
    else:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(x, in_top, marker=".", label=f"best arm in top {top_m} empirical means")
    ax.plot(x, correct, marker=".", linestyle="--", label="recommendation correct")
    stopped = res.pulls[res.stopped]
    if stopped.size:
        ax.axvline(float(np.median(stopped)), color="grey", linewidth=0.8, label="median stopping time")
    if x.size > 1 and x[-1] / max(x[0], 1) >= 20:
        ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("total pulls")
    ax.set_ylabel("probability")
    ax.set_title(f"{res.algorithm} on {res.instance} ({res.reps} reps)", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_quality(ax: Any, res: SimResult) -> None:
    """The reported ranking's quality against ratings: the mean of each measure over the runs, and where the top 10
    becomes right in 90% of them."""
    x = res.checkpoints
    labels = {"top1_correct": "best caption right", "top10_precision": "top-10 precision",
              "top25_precision": "top-25 precision", "kendall25": "Kendall tau, top 25"}
    for name, label in labels.items():
        v = res.quality[name + "@"]
        y = np.array([np.nanmean(col) if np.isfinite(col).any() else np.nan for col in v.T])
        ax.plot(x, y, marker=".", label=label)
    until = res.ratings_until("top10_precision", 0.9)
    if math.isfinite(until):
        ax.axvline(until, color="grey", linewidth=0.8, label="top 10 right in 90% of runs")
    if x.size > 1 and x[-1] / max(x[0], 1) >= 20:
        ax.set_xscale("log")
    ax.set_ylim(-1.02 if np.nanmin(res.quality["kendall25@"], initial=0.0) < 0 else -0.02, 1.02)
    ax.set_xlabel("ratings")
    ax.set_ylabel("mean over runs")
    ax.set_title("quality of the reported ranking", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)


def run(args: argparse.Namespace) -> int:
    """Simulate, print the summary and write the requested CSV, NPZ and plot; exit code 2 for a bad argument."""
    from purebandits.instances import make_instance
    from purebandits.registry import get_learner_class, make_learner
    from purebandits.simulate.engine import simulate

    try:
        params = parse_params(args.param)
        cls = get_learner_class(args.algorithm)
        instance = make_instance(args.instance)
        if "k" in cls._param_names() and "k" not in params and instance.k > 1:
            params["k"] = instance.k  # the instance's natural k (e.g. nsar m, two_point K)
        learner = make_learner(args.algorithm, **params)
        checkpoints = parse_checkpoints(args.checkpoints)
        if args.plot and (checkpoints is None or checkpoints.size == 0):
            raise ValueError("--plot needs --checkpoints (e.g. --checkpoints geom:100:100000:30)")
        if args.plot:  # before the run, not after it
            require_extra("plot", "purebandits simulate --plot")
        if args.top_m < 1:
            raise ValueError(f"--top-m must be >= 1, got {args.top_m}")
        crowd = None
        if getattr(args, "crowd", None) is not None:
            from purebandits.simulate.crowd import parse_crowd

            crowd = parse_crowd(args.crowd)
        quality = True if getattr(args, "quality", False) else None
        res = simulate(learner, instance, reps=args.reps, seed=args.seed, checkpoints=checkpoints, jobs=args.jobs,
                       executor=args.executor, max_pulls=args.max_pulls, driver=args.driver,
                       progress=False if args.no_progress else None, journal=args.journal, crowd=crowd,
                       quality=quality)
    except ValueError as exc:
        print(f"purebandits simulate: error: {exc}", file=sys.stderr)
        return 2
    hard = instance.hardness(res.k).as_dict() if instance.n_arms <= 20000 else None
    if hard is not None and not all(math.isfinite(v) for v in (hard["H1"], hard["H2"])):
        hard = None
    print(format_summary(res, hard))
    if res.extra.get("resumed_reps"):
        print(f"{res.extra['resumed_reps']} of {res.reps} repetitions resumed from the journal {args.journal}")
    if args.out:
        res.to_csv(args.out)
        print(f"wrote {args.out}")
    if args.npz:
        res.save(args.npz)
        print(f"wrote {args.npz}")
    if args.plot:
        plot_anytime(res, args.plot, args.top_m)
        print(f"wrote {args.plot}")
    return 0
