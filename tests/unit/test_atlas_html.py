"""The atlas's HTML page in a real headless Chromium: it loads, its script runs, and the filter hides rows.

Chromium comes from Debian (``apt-get install chromium``, done by scripts/install_build_tools.sh, which
``nox -s tests`` runs); without it the test skips and says so. The page's filter is the one the search
box drives; ``#filter=TEXT`` in the URL fills the box before the script's first pass.
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jaxrel.atlas import table as atlastable
from jaxrel.atlas.table import CellRun

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH: run scripts/install_build_tools.sh "
                                                          "(apt-get install chromium)")


class Rows(HTMLParser):
    """The table body's rows as (API text, hidden) and the row counter's text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, bool]] = []
        self.count = ""
        self._in_api = self._in_count = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "data-search" in found:
            self.rows.append(("", "hidden" in found))
        self._in_api = tag == "td" and found.get("class") == "api"
        self._in_count = found.get("id") == "count"

    def handle_data(self, data: str) -> None:
        if self._in_api and self.rows:
            self.rows[-1] = (self.rows[-1][0] + data, self.rows[-1][1])
        if self._in_count:
            self.count += data

    def handle_endtag(self, tag: str) -> None:
        self._in_api = self._in_count = False


def page(tmp_path: Path) -> Path:
    outcomes = {f"test_api.py::test_api[{name}]": {"outcome": "passed", "message": ""}
                for name in ("jax.lax.pcast", "jax.lax.pmean", "jax.extend.mlir")}
    flagged = {"test_api.py::test_api[jax.extend.mlir]": {"jaxlib_sensitive": "MLIR bindings live in jaxlib"}}
    table = atlastable.build([CellRun("0.12.0.1", "0.12.0.1", "3.12", outcomes, flagged)], "2026-11-25")
    path = tmp_path / "atlas.html"
    path.write_text(atlastable.html_page(table), encoding="utf-8")
    return path


def rendered(url: str, tmp_path: Path) -> Rows:
    assert BROWSER is not None
    done = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = Rows()
    rows.feed(done.stdout)
    return rows


def test_the_page_loads_and_shows_every_row(tmp_path):
    rows = rendered(page(tmp_path).as_uri(), tmp_path)
    assert [api for api, _ in rows.rows] == ["jax.lax.pcast", "jax.lax.pmean", "jax.extend.mlir ◆"]
    assert not any(hidden for _, hidden in rows.rows)
    assert rows.count == "3 of 3 rows"  # written by the page's script: it ran


def test_the_filter_hides_the_rows_that_do_not_match(tmp_path):
    rows = rendered(page(tmp_path).as_uri() + "#filter=lax%20pm", tmp_path)
    assert [(api, hidden) for api, hidden in rows.rows] == [
        ("jax.lax.pcast", True), ("jax.lax.pmean", False), ("jax.extend.mlir ◆", True)]
    assert rows.count == "1 of 3 rows"
