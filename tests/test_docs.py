from pathlib import Path

from purebandits.docs import algorithms_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_algorithms_md_in_sync_with_registry():
    text = (ROOT / "docs" / "algorithms.md").read_text()
    assert text.startswith(algorithms_markdown()), (
        "docs/algorithms.md is out of date: run `purebandits algorithms --markdown > docs/algorithms.md`"
    )
