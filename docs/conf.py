"""Sphinx configuration for the jaxrel documentation (MyST Markdown, furo theme).

Build: ``nox -s docs`` or ``sphinx-build -W --keep-going -b html docs build/docs``.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the CLI page is generated from jaxrel.cli.build_parser

from jaxrel import __version__  # noqa: E402

project = "jaxrel"
author = "jaxrel contributors"
release = __version__
version = __version__

extensions = ["myst_parser", "sphinxarg.ext"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = f"jaxrel {__version__}"

# The API atlas page (atlas.md) carries the standalone page's table as raw HTML; the site gets the
# same styling, wide enough for its release columns, and the filter box's script, written here from
# jaxrel.atlas.table at build time (one source for both pages).
from jaxrel.atlas.table import DOCS_STYLE, SCRIPT  # noqa: E402

_STATIC = Path(tempfile.mkdtemp(prefix="jaxrel-docs-static-"))
atexit.register(shutil.rmtree, _STATIC, True)  # Sphinx has copied them into the site by then
(_STATIC / "atlas.css").write_text(DOCS_STYLE, encoding="utf-8")
(_STATIC / "atlas.js").write_text(SCRIPT, encoding="utf-8")
html_static_path = [str(_STATIC)]
html_css_files = ["atlas.css"]
html_js_files = [("atlas.js", {"defer": "defer"})]
