"""Declarative experiments that reproduce the papers' tables and figures.

One module per figure or table defines ``EXPERIMENT = Experiment(...)``: what the paper did
(instance, algorithms with parameters, repetitions per scale), how to compute the raw results
(a pandas table), how to plot them in the style of the paper's figure, and how to judge the
paper's claim against the numbers. :mod:`purebandits.experiments.runner` writes the CSV, the
PNG and a Markdown section for each.
"""

from __future__ import annotations

import importlib
import math
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from purebandits.metrics import sample_complexity_summary, wilson_interval

__all__ = ["Experiment", "Verdict", "Context", "all_experiments", "get_experiment", "markdown_table", "summary_row"]

SCALES = ("quick", "paper")


@dataclass(frozen=True)
class Verdict:
    """The paper's claim held / partly held / did not hold, with the numbers that say so."""

    status: Literal["holds", "partly", "does not hold"]
    summary: str
    table: pd.DataFrame | None = None


def verdict_status(n_ok: int, n_checks: int) -> Literal["holds", "partly", "does not hold"]:
    """"holds" when every one of ``n_checks`` checks holds, "partly" when some do, else "does not hold"."""
    return "holds" if n_ok == n_checks else ("partly" if n_ok else "does not hold")


@dataclass
class Context:
    """How an experiment is run: size, parallelism, seed, and where the simulator should run."""

    scale: str = "quick"
    jobs: int | None = None
    executor: str | None = None
    seed: int = 20170000
    progress: bool = True
    #: settings that replace the scale's own (``--set reps=500``), e.g. when the paper's size does not
    #: fit the machine; the Markdown section states them next to the command.
    overrides: dict[str, Any] = field(default_factory=dict)
    #: directory of finished chunks (:mod:`purebandits.simulate.journal`): a killed run resumes
    journal: str | None = None
    #: repetitions loaded from the journal instead of run, and the worker seconds they took then
    resumed_reps: int = 0
    resumed_seconds: float = 0.0
    #: pulls simulated (resumed repetitions included) and CPU seconds of simulation run here, summed over
    #: every call: what a reproduction reports per experiment next to its wall time
    pulls: int = 0
    cpu_seconds: float = 0.0
    #: the directory this run writes to (set by the runner), where an experiment that reads other
    #: experiments' results (``lower_bound``) finds them
    out_dir: str | None = None

    @property
    def cores(self) -> int:
        """Processes the simulator uses here (``jobs``, default all cores), as reports state it."""
        return self.jobs or os.cpu_count() or 1

    def settings(self, exp: Experiment) -> dict[str, Any]:
        """The experiment's settings at this scale with the overrides applied (unknown keys refused)."""
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")
        if self.scale not in exp.scales:
            raise ValueError(f"experiment {exp.name} has no {self.scale!r} scale")
        settings = dict(exp.scales[self.scale])
        unknown = sorted(set(self.overrides) - set(settings))
        if unknown:
            raise ValueError(f"experiment {exp.name} has no setting {', '.join(unknown)}; "
                             f"its settings are {', '.join(settings)}")
        settings.update(self.overrides)
        return settings

    def simulate(self, learner: Any, instance: Any, reps: int, **kwargs: Any) -> Any:
        """Run the simulator with this context's jobs, executor and progress settings."""
        from purebandits.simulate import simulate

        res = simulate(learner, instance, reps=reps, seed=kwargs.pop("seed", self.seed), jobs=self.jobs,
                       executor=self.executor, progress=self.progress, journal=self.journal, **kwargs)
        self.resumed_reps += int(res.extra.get("resumed_reps", 0))
        self.resumed_seconds += float(res.extra.get("resumed_seconds", 0.0))
        self.count_work(int(res.pulls.sum()), float(res.extra.get("cpu_seconds", 0.0)))
        return res

    def count_work(self, pulls: int, cpu_seconds: float) -> None:
        """Add simulation done outside :meth:`simulate` (e.g. the exact-sums path of the fixed-budget runs)."""
        self.pulls += int(pulls)
        self.cpu_seconds += float(cpu_seconds)


@dataclass(frozen=True)
class Experiment:
    """A reproduced table or figure.

    Attributes
    ----------
    name : registry key, also the file stem of the outputs.
    paper, artefact, title : what is reproduced ("TNM17", "Table 1", "...").
    claim : the paper's claim, in its own numbers where it gives them.
    scales : settings per scale ("quick" runs in CI in seconds; "paper" uses the paper's sizes).
    compute : (context, settings) -> raw results table.
    plot : raw results -> matplotlib Figure.
    assess : raw results -> Verdict.
    notes : choices made where the paper or its data description is ambiguous.
    """

    name: str
    paper: str
    artefact: str
    title: str
    claim: str
    scales: dict[str, dict[str, Any]]
    compute: Callable[[Context, dict[str, Any]], pd.DataFrame]
    plot: Callable[[pd.DataFrame], Any]
    assess: Callable[[pd.DataFrame], Verdict]
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def all_experiments() -> dict[str, Experiment]:
    """Every experiment module's ``EXPERIMENT``, by name (modules are discovered)."""
    import purebandits.experiments as pkg

    found: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in ("base", "runner", "cli") or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        exp = getattr(mod, "EXPERIMENT", None)
        if isinstance(exp, Experiment):
            if exp.name in found:
                raise TypeError(f"duplicate experiment name {exp.name!r}")
            found[exp.name] = exp
    return found


def get_experiment(name: str) -> Experiment:
    """The registered experiment called ``name``; ValueError listing the known ones otherwise."""
    exps = all_experiments()
    if name not in exps:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(exps)}")
    return exps[name]


def markdown_table(df: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """A GitHub-flavoured Markdown table of ``df`` (no index)."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return str(v)

    head = "| " + " | ".join(str(c) for c in df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


def summary_row(res: Any, **keys: Any) -> dict[str, Any]:
    """One raw-table row from a :class:`SimResult`: stopping times, capped runs, errors."""
    s = sample_complexity_summary(res.pulls)
    errors = int(res.reps - res.correct.sum())
    lo, hi = wilson_interval(errors, res.reps)
    return {**keys, "reps": res.reps, "pulls_mean": s["mean"], "pulls_sem": s["sem"], "pulls_q25": s["q25"],
            "pulls_median": s["q50"], "pulls_q75": s["q75"], "capped": int((~res.stopped).sum()),
            "errors": errors, "error_rate": errors / res.reps if res.reps else math.nan,
            "errors_stopped": int((res.stopped & ~res.correct).sum()),
            "error_ci_high": hi, "error_ci_low": lo}
