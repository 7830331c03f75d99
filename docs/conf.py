"""Sphinx configuration for the jaxrel documentation (MyST Markdown, furo theme).

Build: ``nox -s docs`` or ``sphinx-build -W --keep-going -b html docs build/docs``.
"""

from __future__ import annotations

import sys
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
