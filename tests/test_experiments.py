"""Every reproduced table/figure runs at --scale quick and writes its CSV, PNG and Markdown."""

import functools
import json
import shutil

import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.experiments.base import all_experiments

EXPERIMENTS = sorted(all_experiments())


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """``quick_run(name)``: the directory of ``purebandits reproduce NAME --scale quick --no-progress --jobs 1``,
    run once per module (and xdist worker) on the first test that asks for it.

    A run writes only its own ``NAME.{csv,png,md,json}`` (``runner.run_experiment``); the tests that only need
    such a run as their starting point (the report's) copy these files instead of running the same command again
    (3-4 s of a core each)."""
    @functools.cache
    def run(name: str):
        out = tmp_path_factory.mktemp(f"quick-{name}")
        assert main(["reproduce", name, "--scale", "quick", "--out", str(out), "--no-progress", "--jobs", "1"]) == 0
        return out

    return run


def _copy_run(quick_run, name, out):
    """The files of ``quick_run(name)`` copied into ``out``, as if that command had been run with ``--out out``."""
    out.mkdir(parents=True, exist_ok=True)
    for f in quick_run(name).iterdir():
        shutil.copy2(f, out / f.name)


@pytest.mark.slow  # every reproduction end to end with its figures
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_scale_writes_csv_png_markdown(name, quick_run):
    out = quick_run(name)
    csv, png, md = (out / f"{name}.{ext}" for ext in ("csv", "png", "md"))
    assert len(pd.read_csv(csv)) > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md.read_text()
    assert "**Paper's claim.**" in text and "**Verdict:" in text and f"purebandits reproduce {name}" in text


def test_every_experiment_declares_both_scales():
    for exp in all_experiments().values():
        assert set(exp.scales) == {"quick", "paper"}, exp.name


def test_unknown_experiment_is_an_error(capsys):
    assert main(["reproduce", "no_such_figure"]) == 2
    assert "unknown experiment" in capsys.readouterr().err


def test_report_collects_runs_made_by_separate_commands(tmp_path, capsys, quick_run):
    for name in ("tnm17_table1", "zcl14_fig2"):  # reproduce NAME --out tmp_path --no-progress --jobs 1 (quick)
        _copy_run(quick_run, name, tmp_path)
    assert main(["reproduce", "--report", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "| `tnm17_table1` |" in report and "| `zcl14_fig2` |" in report
    assert report.count("**Paper's claim.**") == 2


def test_report_refuses_mixed_scales_and_empty_dirs(tmp_path, capsys, quick_run):
    assert main(["reproduce", "--report", "--out", str(tmp_path)]) == 2
    assert "no experiment records" in capsys.readouterr().err
    # reproduce tnm17_table1 --out tmp_path --no-progress (quick; exact sums, no simulation: --jobs changes nothing)
    _copy_run(quick_run, "tnm17_table1", tmp_path)
    assert main(["reproduce", "tnm17_table1", "--out", str(tmp_path / "p"), "--no-progress", "--scale", "paper"]) == 0
    (tmp_path / "p" / "tnm17_table1.json").rename(tmp_path / "zcl14_fig2.json")
    assert main(["reproduce", "--report", "--out", str(tmp_path)]) == 2
    assert "mix scales" in capsys.readouterr().err


def test_set_overrides_a_setting_and_says_so(tmp_path, capsys):
    assert main(["reproduce", "zcl14_fig2", "--out", str(tmp_path), "--no-progress", "--jobs", "1",
                 "--set", "reps=2", "--set", "ks=[10]"]) == 0
    df = pd.read_csv(tmp_path / "zcl14_fig2.csv")
    assert set(df.loc[df["kind"] == "grid", "K"]) == {10}
    text = (tmp_path / "zcl14_fig2.md").read_text()
    assert "--set reps=2 --set ks=[10]" in text and "**Reduced from the `quick` scale:**" in text
    assert main(["reproduce", "zcl14_fig2", "--out", str(tmp_path), "--set", "no_such=1"]) == 2
    assert "has no setting no_such" in capsys.readouterr().err
    assert main(["reproduce", "zcl14_fig2", "--out", str(tmp_path), "--set", "reps"]) == 2


def test_a_journalled_run_resumes_with_the_same_csv_and_says_so(tmp_path):
    args = ["reproduce", "jmnb14_fig3", "--no-progress", "--jobs", "1", "--set", "ns=[10]", "--set", "reps=6",
            "--journal", str(tmp_path / "journal")]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    first = (tmp_path / "a" / "jmnb14_fig3.md").read_text()
    assert "resumed from the journal" not in first
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a" / "jmnb14_fig3.csv"),
                                  pd.read_csv(tmp_path / "b" / "jmnb14_fig3.csv"))
    again = (tmp_path / "b" / "jmnb14_fig3.md").read_text()
    assert "plus 108 repetitions resumed from the journal" in again  # 3 scenarios x 6 learners x 6 runs
    record = json.loads((tmp_path / "b" / "jmnb14_fig3.json").read_text())
    assert record["resumed_reps"] == 108 and record["resumed_seconds"] > 0


def test_each_experiment_depends_only_on_shared_code():
    """An experiment module (one with an EXPERIMENT) imports no other experiment module: what several share lives in
    the experiments package's shared modules (base and one per paper: jmnb14, jlq17, st17, tnm17, zcl14)."""
    import ast
    import importlib

    import purebandits.experiments as pkg
    from purebandits.experiments.base import all_experiments

    experiments = set(all_experiments())
    for name in experiments:
        mod = importlib.import_module(f"{pkg.__name__}.{name}")
        tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
        froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        imported = {n.module for n in froms} | {f"{n.module}.{a.name}" for n in froms for a in n.names}
        siblings = {m for m in imported if m.startswith(f"{pkg.__name__}.") and m.rsplit(".", 1)[1] in experiments}
        assert not siblings, f"{name} imports {sorted(siblings)}"


def test_runs_report_the_pulls_and_cpu_seconds_they_simulated(tmp_path, monkeypatch):
    """Each run records the pulls it simulated (the simulator's and the fixed-budget exact-sums path's) and
    the CPU seconds they took; the report lists both per experiment and the total in process-hours, and a
    record written before they were counted shows n/a."""
    import purebandits.experiments.st17 as st17
    import purebandits.simulate as sim

    seen = {"pulls": 0}
    real_sim, real_fb = sim.simulate, st17.fixed_budget_runs

    def counted_sim(*args, **kwargs):
        res = real_sim(*args, **kwargs)
        seen["pulls"] += int(res.pulls.sum())
        return res

    def counted_fb(*args, **kwargs):
        out = real_fb(*args, **kwargs)
        seen["pulls"] += int(out["pulls"].sum())
        return out

    monkeypatch.setattr(sim, "simulate", counted_sim)
    monkeypatch.setattr(st17, "fixed_budget_runs", counted_fb)
    records = {}
    for name, sets in (("st17_fig2", ["--set", "reps=4", "--set", "setups=[1]"]), ("zcl14_fig2", ["--set", "reps=2"])):
        seen["pulls"] = 0
        assert main(["reproduce", name, "--out", str(tmp_path), "--no-progress", "--jobs", "1", *sets]) == 0
        records[name] = json.loads((tmp_path / f"{name}.json").read_text())
        assert records[name]["pulls"] == seen["pulls"] > 0 and records[name]["cpu_seconds"] > 0
        assert f"{seen['pulls']:,} pulls simulated in" in (tmp_path / f"{name}.md").read_text()
    assert main(["reproduce", "--report", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "REPORT.md").read_text()
    assert f"| {records['zcl14_fig2']['pulls']:.3g} | {records['zcl14_fig2']['cpu_seconds']:,.1f} |" in report
    total = sum(r["pulls"] for r in records.values())
    assert f"{total:.3g} pulls simulated in" in report and "process-hours (" in report and "CPU-seconds)." in report
    old = records["st17_fig2"]
    del old["pulls"], old["cpu_seconds"]
    (tmp_path / "st17_fig2.json").write_text(json.dumps(old))
    assert main(["reproduce", "--report", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "| n/a | n/a |" in report and "(the 1 run that counted them)" in report
