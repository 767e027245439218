"""Sphinx configuration of the documentation site (``sphinx-build -W --keep-going -b html docs docs/_build/html``).

The pages are the Markdown files of ``docs/`` (MyST); the API reference comes from the docstrings (autodoc,
numpydoc style through napoleon). Nothing third-party is committed: the theme is the ``furo`` package.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]
# the checkout's own code, also when an installed copy is on the path
sys.path.insert(0, str(ROOT / "src"))

import purebandits  # noqa: E402

project = "purebandits"
author = "the purebandits authors"
copyright = "the purebandits authors, BSD-3-Clause"
release = purebandits.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# docs/reproduction/*.md are the reproduction runs' raw sections (REPRODUCTION.md gathers them) and
# docs/reliability/ holds JSON reports: data of the pages, not pages
exclude_patterns = ["_build", "reproduction/*.md", "reliability", "Thumbs.db", ".DS_Store"]

# MyST: heading anchors for the pages' "#section" links, and the usual Markdown niceties
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: numpydoc-style docstrings, members in source order, hints in the description
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}
autosummary_generate = False  # the API pages are written by hand; nothing is generated into the checkout

html_theme = "furo"
html_title = f"purebandits {release}"
html_static_path: list[str] = []


_HTML_ANCHOR = re.compile(r'^<a id="([\w.-]+)"></a>[ \t]*$', re.MULTILINE)


def _html_anchors_as_targets(app: Sphinx, docname: str, source: list[str]) -> None:
    """``<a id="x"></a>`` lines (the anchors GitHub renders in REPRODUCTION.md) become MyST targets ``(x)=``, so
    the pages' ``#x`` and ``REPRODUCTION.md#x`` links resolve on the site too."""
    source[0] = _HTML_ANCHOR.sub(r"(\1)=", source[0])


def setup(app: Sphinx) -> None:
    """Register the anchor rewrite above."""
    app.connect("source-read", _html_anchors_as_targets)
