"""The documentation: the Sphinx site builds without warnings, the CLI page covers every verb,
the README stays short and opens with the two commands, and nothing points outside the repository."""

from __future__ import annotations

import html
import re
import subprocess
import sys
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
