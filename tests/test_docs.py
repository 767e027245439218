import subprocess
import sys
from pathlib import Path

import pytest

from purebandits.docs import algorithms_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_algorithms_md_in_sync_with_registry():
    text = (ROOT / "docs" / "algorithms.md").read_text()
    assert text.startswith(algorithms_markdown()), (
        "docs/algorithms.md is out of date: run `purebandits algorithms --markdown > docs/algorithms.md`"
    )


@pytest.mark.slow  # a whole Sphinx build
def test_site_builds_with_warnings_as_errors(tmp_path):
    """The documentation site, as `sphinx-build -W --keep-going -b html docs docs/_build/html` builds it: a broken
    link or reference, a page outside every toctree or a docstring that does not parse fails it."""
    for module in ("sphinx", "myst_parser", "furo"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install -e '.[docs]'")
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    assert (tmp_path / "html" / "api" / "learners.html").is_file()
