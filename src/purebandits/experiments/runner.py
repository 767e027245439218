"""Run experiments and write their CSV, PNG and Markdown section."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from purebandits._extras import require_extra

require_extra("plot", "purebandits reproduce (every experiment draws its figure)")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from purebandits.experiments.base import Context, Experiment, Verdict, markdown_table  # noqa: E402

__all__ = ["run_experiment", "ExperimentOutput", "write_report", "collect_outputs"]


@dataclass
class ExperimentOutput:
    """What one run of an experiment wrote: its verdict, the three files, its wall seconds, and the pulls and
    CPU seconds it simulated (None for a record written before they were counted)."""

    experiment: Experiment
    verdict: Verdict
    csv: Path
    png: Path
    markdown: Path
    seconds: float
    pulls: int | None = None
    cpu_seconds: float | None = None


def run_experiment(exp: Experiment, out_dir: str | Path, ctx: Context) -> ExperimentOutput:
    """Compute, save the raw table, plot, judge, and write the Markdown section."""
    settings = ctx.settings(exp)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx.out_dir = str(out)
    start = time.perf_counter()
    reps0, secs0, pulls0, cpu0 = ctx.resumed_reps, ctx.resumed_seconds, ctx.pulls, ctx.cpu_seconds
    df = exp.compute(ctx, settings)
    seconds = time.perf_counter() - start
    resumed = {"reps": ctx.resumed_reps - reps0, "seconds": ctx.resumed_seconds - secs0}
    work = {"pulls": ctx.pulls - pulls0, "cpu_seconds": ctx.cpu_seconds - cpu0}
    csv = out / f"{exp.name}.csv"
    df.to_csv(csv, index=False, float_format="%.10g")
    fig = exp.plot(df)
    png = out / f"{exp.name}.png"
    fig.savefig(png, dpi=90, bbox_inches="tight")
    plt.close(fig)
    verdict = exp.assess(df)
    md = out / f"{exp.name}.md"
    md.write_text(section_markdown(exp, verdict, ctx, seconds, png.name, resumed, work))
    # what the report needs to list this run later, when experiments ran as separate commands
    (out / f"{exp.name}.json").write_text(json.dumps({
        "name": exp.name, "status": verdict.status, "summary": verdict.summary, "seconds": seconds,
        "scale": ctx.scale, "seed": ctx.seed, "overrides": ctx.overrides, "cores": ctx.cores,
        "resumed_reps": resumed["reps"], "resumed_seconds": resumed["seconds"], **work,
        "machine": platform.machine(), "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }, indent=1) + "\n")
    return ExperimentOutput(exp, verdict, csv, png, md, seconds, **work)


def _work(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The pulls and CPU seconds of a run's record, or None if it predates them."""
    return {"pulls": int(rec["pulls"]), "cpu_seconds": float(rec["cpu_seconds"])} if "pulls" in rec else None


def rejudge_experiment(exp: Experiment, out_dir: str | Path) -> ExperimentOutput:
    """Judge a finished run again from its raw CSV, without running anything, and rewrite its Markdown section
    and record: for a fix of an experiment's assessment (its ``assess``), not of what it computes.

    The run's own settings (scale, seed, overrides, cores, seconds, resumed repetitions) come from its
    ``NAME.json``; the record gains ``rejudged`` (when) and the verdict it replaced.
    """
    out = Path(out_dir)
    rec_path, csv = out / f"{exp.name}.json", out / f"{exp.name}.csv"
    if not rec_path.exists() or not csv.exists():
        raise ValueError(f"no finished run of {exp.name} in {out} ({rec_path.name} and {csv.name} needed)")
    rec = json.loads(rec_path.read_text())
    ctx = Context(scale=rec["scale"], seed=rec["seed"], jobs=rec.get("cores"), overrides=rec.get("overrides", {}))
    verdict = exp.assess(pd.read_csv(csv))
    resumed = {"reps": rec.get("resumed_reps", 0), "seconds": rec.get("resumed_seconds", 0.0)}
    md = out / f"{exp.name}.md"
    work = _work(rec)
    md.write_text(section_markdown(exp, verdict, ctx, float(rec["seconds"]), f"{exp.name}.png", resumed, work))
    if (rec["status"], rec["summary"]) != (verdict.status, verdict.summary):
        rec["replaced"] = {"status": rec["status"], "summary": rec["summary"]}
    rec.update(status=verdict.status, summary=verdict.summary, rejudged=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    rec_path.write_text(json.dumps(rec, indent=1) + "\n")
    return ExperimentOutput(exp, verdict, csv, out / f"{exp.name}.png", md, float(rec["seconds"]), **(work or {}))


def section_markdown(exp: Experiment, verdict: Verdict, ctx: Context, seconds: float, png_name: str,
                     resumed: dict[str, float] | None = None, work: dict[str, Any] | None = None) -> str:
    """The experiment's Markdown section: command, time (wall, and the pulls and CPU seconds simulated),
    reductions, claim, measurement, verdict."""
    cores = ctx.cores
    sets = "".join(f" --set {k}={json.dumps(v, separators=(',', ':'))}" for k, v in ctx.overrides.items())
    took = f"{seconds:.1f} s on {cores} core(s)"
    if work is not None:
        took += f": {work['pulls']:,} pulls simulated in {work['cpu_seconds']:.1f} CPU-seconds"
    if resumed and resumed["reps"]:
        took += (f", plus {int(resumed['reps'])} repetitions resumed from the journal that took "
                 f"{resumed['seconds']:.1f} worker-seconds when they ran")
    lines = [
        f"## {exp.paper}, {exp.artefact}: {exp.title}",
        "",
        f"Command: `purebandits reproduce {exp.name} --scale {ctx.scale} --seed {ctx.seed}{sets}`"
        f" ({took}, {platform.machine()}, scale `{ctx.scale}`)",
        "",
    ]
    if ctx.overrides:
        scale_settings = exp.scales[ctx.scale]
        changed = ", ".join(f"{k} = {v!r} (scale `{ctx.scale}`: {scale_settings[k]!r})"
                            for k, v in ctx.overrides.items())
        lines += [f"**Reduced from the `{ctx.scale}` scale:** {changed}.", ""]
    lines += [
        f"**Paper's claim.** {exp.claim}",
        "",
        f"**Measured.** {verdict.summary}",
        "",
        f"**Verdict: {verdict.status}.**",
        "",
        f"![{exp.name}]({png_name})",
        "",
    ]
    if verdict.table is not None:
        lines += [markdown_table(verdict.table), ""]
    if exp.notes:
        lines += [f"*Notes.* {exp.notes}", ""]
    return "\n".join(lines)


def collect_outputs(out_dir: str | Path) -> tuple[list[ExperimentOutput], Context]:
    """The runs already written to ``out_dir`` (their ``NAME.json`` records), in registry order.

    Lets experiments run as separate commands (or on different days) and still give one report;
    every run in one report must share its scale and seed.
    """
    from purebandits.experiments.base import all_experiments

    out = Path(out_dir)
    outputs, settings = [], set()
    for name, exp in all_experiments().items():
        rec_path = out / f"{name}.json"
        if not rec_path.exists():
            continue
        rec = json.loads(rec_path.read_text())
        settings.add((rec["scale"], rec["seed"]))
        work = _work(rec)
        outputs.append(ExperimentOutput(exp, Verdict(rec["status"], rec["summary"]), out / f"{name}.csv",
                                        out / f"{name}.png", out / f"{name}.md", float(rec["seconds"]),
                                        **(work or {})))
    if not outputs:
        raise ValueError(f"no experiment records (NAME.json) in {out}")
    if len(settings) > 1:
        raise ValueError(f"runs in {out} mix scales/seeds {sorted(settings)}; one report needs one of each")
    scale, seed = settings.pop()
    return outputs, Context(scale=scale, seed=seed)


def write_report(outputs: list[ExperimentOutput], out_dir: str | Path, ctx: Context) -> Path:
    """Concatenate the sections into ``REPORT.md`` with a summary table of verdicts."""
    out = Path(out_dir)
    rows = ["| experiment | paper | verdict | seconds | pulls simulated | CPU-seconds simulating |",
            "|---|---|---|---:|---:|---:|"]
    for o in outputs:
        pulls = "n/a" if o.pulls is None else f"{o.pulls:.3g}"
        cpu = "n/a" if o.cpu_seconds is None else f"{o.cpu_seconds:,.1f}"
        rows.append(f"| `{o.experiment.name}` | {o.experiment.paper} {o.experiment.artefact} | "
                    f"{o.verdict.status} | {o.seconds:.1f} | {pulls} | {cpu} |")
    total = sum(o.seconds for o in outputs)
    counted = [o for o in outputs if o.pulls is not None and o.cpu_seconds is not None]
    work = ""
    if counted:
        cpu = sum(o.cpu_seconds for o in counted)
        work = (f" {sum(o.pulls for o in counted):.3g} pulls simulated in {cpu / 3600:.2f} process-hours "
                f"({cpu:,.0f} CPU-seconds)")
        if len(counted) < len(outputs):
            work += f" (the {len(counted)} run{'s' * (len(counted) != 1)} that counted them)"
        work += "."
    body = [f"# Reproduction report (scale `{ctx.scale}`, seed {ctx.seed})", "", *rows, "",
            f"Total compute: {total / 60:.1f} min of wall time.{work}", ""]
    body += [o.markdown.read_text() for o in outputs]
    path = out / "REPORT.md"
    path.write_text("\n".join(body))
    return path
