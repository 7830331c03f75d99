"""The documentation: the Sphinx site builds without warnings, the CLI page covers every verb,
the README stays short and opens with the two commands, and nothing points outside the repository."""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from jaxrel.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
COMMANDS = (
    "```bash\n"
    "python3 -m pip install nox uv && python3 -m nox -s compat\n"
    "python3 -m pip install nox uv && python3 -m nox -s tests\n"
    "```\n"
)
OUTSIDE = ("../", "..\\", "DESIGN.md", "JAX_FACTS.md", "/work/", "/tmp/")
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs-html")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, f"sphinx-build failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    return out


def _verbs() -> list[str]:
    parser = build_parser()
    (subparsers,) = [action for action in parser._actions if action.dest == "verb"]
    return list(subparsers.choices)


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def _documents() -> list[Path]:
    return [README, *sorted(p for p in DOCS.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".rst"})]


def test_docs_build_without_warnings(site: Path) -> None:
    for page in ("index", "rules", "guard", "gating", "configuration", "cli", "compat", "extension",
                 "gates", "release", "benchmarks", "architecture", "exit-codes"):
        assert (site / f"{page}.html").is_file(), page


def test_cli_page_is_generated_for_every_verb(site: Path) -> None:
    verbs = _verbs()
    assert {"verdict", "doctor", "matrix", "compat", "gates", "build", "release", "xla"} <= set(verbs)
    text = " ".join(_text(site / "cli.html").split())
    missing = [verb for verb in verbs if f"jaxrel {verb}" not in text]
    assert not missing, f"the CLI page does not show: {missing}"


def test_readme_opens_with_the_name_one_line_then_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text) <= 8000, f"README.md is {len(text)} characters; the reference belongs in docs/"
    title, blank, line, blank2, rest = text.split("\n", 4)
    assert title == "# jaxrel" and blank == blank2 == "" and line and not line.startswith(("#", "`"))
    assert rest.startswith(COMMANDS), "the two commands come right after the one line"


def test_readme_holds_no_dated_timings() -> None:
    """Measured numbers and their dates live in docs/benchmarks.md; the README links there."""
    dates = re.findall(r"20\d\d-\d\d-\d\d", README.read_text(encoding="utf-8"))
    assert not dates, f"README.md has dated numbers ({dates}); move them to docs/benchmarks.md"


def test_architecture_names_every_module() -> None:
    """docs/architecture.md's module table has a row for every module of the package."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(jaxrel/[^`]+\.py)` \|", text, re.M))
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "jaxrel").rglob("*.py")
               if "suite" not in path.parts}
    assert not modules - rows, f"docs/architecture.md does not name: {sorted(modules - rows)}"
    assert not rows - modules, f"docs/architecture.md names modules that are gone: {sorted(rows - modules)}"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_outside_the_repository(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    found = [needle for needle in OUTSIDE if needle in text]
    assert not found, f"{document.relative_to(ROOT)} refers outside the repository: {found}"
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = (document.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{document.relative_to(ROOT)}: broken link {target}"


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
ATLAS_COLOURS = {"works": (0xD8, 0xF5, 0xD0), "removed": (0xE4, 0xDC, 0xF8), "not yet": (0xF2, 0xF2, 0xF2)}


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of an 8-bit RGB(A) PNG, as headless Chromium writes it (no interlace)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        chunks.setdefault(kind, []).append(data[at + 8:at + 8 + size])
        at += 12 + size
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    step = 3 if colour == 2 else 4
    raw, rows, previous = zlib.decompress(b"".join(chunks[b"IDAT"])), [], bytes(width * step)
    for y in range(height):
        start = y * (width * step + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + width * step])
        for x in range(len(line)):
            left = line[x - step] if x >= step else 0
            up, corner = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                best = min((abs(guess - left), left), (abs(guess - up), up), (abs(guess - corner), corner))[1]
                line[x] = (line[x] + best) & 0xFF
        rows.append(bytes(line) if step == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        previous = bytes(line)
    return width, height, rows


@pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH: run scripts/install_build_tools.sh")
def test_the_atlas_page_of_the_site_reads_like_the_standalone_page(site: Path, tmp_path: Path) -> None:
    """At 1400 px the site's atlas page shows the release columns coloured beside the API column (not one tall
    API column with the releases off to the right), and its filter box works."""
    assert BROWSER is not None
    page = (site / "atlas.html").as_uri()
    common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1100", "--hide-scrollbars"]
    shot = tmp_path / "atlas.png"
    done = subprocess.run([*common, f"--screenshot={shot}", page], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    width, _, rows = _png_pixels(shot.read_bytes())
    seen = {name for row in rows for name, rgb in ATLAS_COLOURS.items() if bytes(rgb) * 4 in row}
    assert seen == set(ATLAS_COLOURS), f"coloured cells on screen: {sorted(seen)}"
    green = bytes(ATLAS_COLOURS["works"]) * 4
    greens = [x // 3 for row in rows for x in range(0, len(row) - 12, 3) if row[x:x + 12] == green]
    assert min(greens) < width * 0.7 and max(greens) - min(greens) > width // 4, \
        "the release columns span the page beside the API column, not off to its right"
    dom = subprocess.run([*common, "--dump-dom", page + "#filter=lax.pmean"], capture_output=True, text=True,
                         timeout=120)
    shown = re.search(r'id="count">(\d+) of (\d+) rows<', dom.stdout)
    assert shown and int(shown[1]) == 1 < int(shown[2]), "the filter box's script ran and kept one row"
