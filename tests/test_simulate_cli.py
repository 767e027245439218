"""``purebandits simulate`` end to end through purebandits.cli.main."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.simulate import SimResult
from purebandits.simulate.cli import parse_checkpoints, parse_params


def test_simulate_writes_csv_plot_and_summary(tmp_path, capsys):
    out, png, npz = tmp_path / "x.csv", tmp_path / "x.png", tmp_path / "x.npz"
    rc = main(["simulate", "--algorithm", "lil_ucb", "--param", "delta=0.1", "--instance", "one_sparse:n=20",
               "--reps", "6", "--seed", "3", "--jobs", "1", "--checkpoints", "geom:20:2000:8",
               "--out", str(out), "--plot", str(png), "--npz", str(npz), "--top-m", "3", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "lil_ucb" in text and "samples to stop" in text and "error rate" in text and "Wilson" in text
    df = pd.read_csv(out)
    assert len(df) == 6 and list(df["rep"]) == list(range(6))
    assert {"pulls", "stopped", "correct", "recommended"} <= set(df.columns)
    assert any(c.startswith("best_rank@") for c in df.columns)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = SimResult.load(npz)
    np.testing.assert_array_equal(res.pulls, df["pulls"].to_numpy())
    assert res.params["delta"] == 0.1 and res.seed == 3
    # the printed mean is the CSV's mean
    assert f"{df['pulls'].mean():.6g}" in text


def test_simulate_is_reproducible_and_jobs_independent(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    common = ["simulate", "--algorithm", "non_adaptive", "--instance", "nsar:setup=1,m=2", "--reps", "4",
              "--seed", "1", "--max-pulls", "3000", "--no-progress"]
    assert main(common + ["--jobs", "1", "--out", str(a)]) == 0
    assert main(common + ["--jobs", "2", "--out", str(b)]) == 0
    assert a.read_text() == b.read_text()
    assert "capped runs" in capsys.readouterr().out


def test_simulate_resumes_from_its_journal(tmp_path, capsys):
    a, b, journal = tmp_path / "a.csv", tmp_path / "b.csv", str(tmp_path / "journal")
    common = ["simulate", "--algorithm", "lil_ucb", "--instance", "one_sparse:n=20", "--seed", "2", "--jobs", "1",
              "--journal", journal, "--no-progress"]
    assert main(common + ["--reps", "3"]) == 0
    assert "resumed" not in capsys.readouterr().out
    assert main(common + ["--reps", "8", "--out", str(a)]) == 0
    assert f"3 of 8 repetitions resumed from the journal {journal}" in capsys.readouterr().out
    assert main(["simulate", "--algorithm", "lil_ucb", "--instance", "one_sparse:n=20", "--seed", "2", "--reps", "8",
                 "--jobs", "1", "--no-progress", "--out", str(b)]) == 0
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize("argv, message", [
    (["--algorithm", "nope", "--instance", "one_sparse"], "unknown algorithm"),
    (["--algorithm", "lil_ucb", "--instance", "nope"], "unknown instance"),
    (["--algorithm", "lil_ucb", "--instance", "one_sparse", "--param", "delta"], "KEY=VALUE"),
    (["--algorithm", "lil_ucb", "--instance", "one_sparse", "--param", "gamma=1"], "unknown parameter"),
    (["--algorithm", "lil_ucb", "--instance", "one_sparse", "--param", "delta=2"], "delta must be"),
    (["--algorithm", "lil_ucb", "--instance", "one_sparse", "--plot", "x.png"], "--plot needs --checkpoints"),
])
def test_simulate_errors_are_reported(argv, message, capsys):
    assert main(["simulate", *argv, "--reps", "1", "--jobs", "1", "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_parsers():
    assert parse_params(["delta=0.05", "preset=faithful", "ls=true", "lam=none", "k=3"]) == {
        "delta": 0.05, "preset": "faithful", "ls": True, "lam": None, "k": 3}
    np.testing.assert_array_equal(parse_checkpoints("100,10,1000"), [10, 100, 1000])
    g = parse_checkpoints("geom:10:1e4:4")
    np.testing.assert_array_equal(g, [10, 100, 1000, 10000])
    np.testing.assert_array_equal(parse_checkpoints("lin:10:40:4"), [10, 20, 30, 40])
    assert parse_checkpoints(None) is None
    with pytest.raises(ValueError):
        parse_checkpoints("geom:10:5:3")
    with pytest.raises(ValueError):
        parse_checkpoints("a,b")


def test_output_into_a_closed_pipe_ends_quietly():
    """``purebandits algorithms | head -1``: a reader that leaves early gets no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "purebandits.cli", "algorithms"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 1
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
