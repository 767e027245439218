"""``purebandits simulate`` end to end through purebandits.cli.main."""

import re
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


# ---------------------------------------------------------------- users' own data (issue #22)
def _write(path, text: str, bom: bool = False):
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def test_a_caption_summary_file_by_path_is_read_by_header(tmp_path):
    """Columns found by name in any order, extra columns ignored, a spreadsheet's byte-order mark skipped: the
    bundled contest 559 rewritten that way is the same instance."""
    from purebandits.instances import make_instance
    from purebandits.instances.real import caption_contest

    c = caption_contest("559")
    rows = ["note,caption,unfunny,item_id,somewhat_funny,funny"]
    for i, (text, (u, s, f)) in enumerate(zip(c.captions, c.votes, strict=True)):
        quoted = '"' + text.replace('"', '""') + '"'
        rows.append(f"x,{quoted},{u},id{i},{s},{f}")
    path = _write(tmp_path / "mine.csv", "\n".join(rows) + "\n", bom=True)
    inst = make_instance(f"caption:{path}")
    bundled = make_instance("caption:559")
    assert inst.n_arms == 138 and inst.name == f"caption:{path}"
    np.testing.assert_allclose(inst.model.means, bundled.model.means)
    # the service's summary.csv export (rank,item_id,funny,...) reads as well
    export = ["rank,item_id,funny,somewhat_funny,unfunny,count,score,precision,contest,caption",
              "1,a,5,3,2,10,2.3,0.2,contest 9,first", "2,b,1,1,8,10,1.3,0.1,contest 9,second"]
    two = make_instance(f"caption:{_write(tmp_path / 'export.csv', chr(10).join(export))}")
    np.testing.assert_allclose(two.model.means, [(5 + 1.5) / 10, (1 + 0.5) / 10])


@pytest.mark.parametrize("text, message", [
    ("caption,funny,somewhat_funny\nx,1,2\n", "missing column(s) ['unfunny']"),
    ("caption,funny,somewhat_funny,unfunny,count\nx,1,2,3,7\n", "count 7 != funny + somewhat_funny + unfunny = 6"),
    ("caption,funny,somewhat_funny,unfunny\nx,1,two,3\n", "line 2: column 'somewhat_funny' must be an integer"),
])
def test_a_bad_caption_summary_says_file_and_line(tmp_path, text, message):
    from purebandits.instances import make_instance

    path = _write(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError, match=re.escape(message)):
        make_instance(f"caption:{path}")


def test_a_csv_of_means_and_its_errors(tmp_path):
    from purebandits.instances import make_instance

    path = _write(tmp_path / "arms.csv", "id,Mean,comment\na,0.9,best\nb,0.5,\nc,0.4,x\n")
    inst = make_instance(f"means:{path}")
    np.testing.assert_array_equal(inst.model.means, [0.9, 0.5, 0.4])
    assert make_instance(f"means:{path},k=2,model=gaussian").k == 2
    for text, message in [("value\n0.1\n0.2\n", "no 'mean' column"),
                          ("mean\n0.1\nabc\n", "line 3: mean must be a number"),
                          ("mean\n0.1\n", "at least 2 arms"), ("mean\n1.5\n0.2\n", "model=gaussian takes any means")]:
        bad = _write(tmp_path / "bad.csv", text)
        with pytest.raises(ValueError, match=re.escape(message)):
            make_instance(f"means:{bad}")
    assert make_instance(f"means:{_write(tmp_path / 'g.csv', 'mean' + chr(10) + '1.5' + chr(10) + '0.2')},"
                         "model=gaussian").n_arms == 2


def test_simulate_runs_on_a_file_by_path(tmp_path, capsys):
    arms = _write(tmp_path / "arms.csv", "mean\n" + "\n".join(["0.9"] + ["0.3"] * 9) + "\n")
    out = tmp_path / "r.csv"
    assert main(["simulate", "--algorithm", "lucb1", "--param", "delta=0.1", "--instance", f"means:{arms}",
                 "--reps", "4", "--seed", "1", "--jobs", "1", "--out", str(out), "--no-progress"]) == 0
    df = pd.read_csv(out)
    # the file's first row is the best arm: "correct" is exactly "recommended arm 0"
    assert len(df) == 4 and df["stopped"].all()
    assert (df["correct"].astype(bool) == (df["recommended"].astype(str) == "0")).all()
