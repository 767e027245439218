"""Every reproduced table/figure runs at --scale quick and writes its CSV, PNG and Markdown."""

import pandas as pd
import pytest

from purebandits.cli import main
from purebandits.experiments.base import all_experiments

EXPERIMENTS = sorted(all_experiments())


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_scale_writes_csv_png_markdown(name, tmp_path):
    assert main(["reproduce", name, "--scale", "quick", "--out", str(tmp_path), "--no-progress", "--jobs", "1"]) == 0
    csv, png, md = (tmp_path / f"{name}.{ext}" for ext in ("csv", "png", "md"))
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
