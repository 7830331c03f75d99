"""Real compat cells: real jax and jaxlib (and cuda12 plugin) wheels from the index, run by `jaxrel compat`.

The same runner `nox -s compat` uses, on a few cells of jax 0.10.2's matrix on Python 3.11:
one positive cell (the compat suite must pass), the below-minimum and the mismatched-plugin
negative cells (the guard must refuse with its fix). Wheels come through uv's shared cache.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from bazel_workspace import kept_workspace

import jaxrel

pytestmark = pytest.mark.integration

CELLS = ["py3.11-jaxlib0.10.2", "py3.11-jaxlib0.10.0", "py3.11-jaxlib0.10.2-cuda12@0.10.1"]


def compat(workdir: Path, *cells: str, env: dict[str, str] | None = None,
           options: tuple[str, ...] = ("--no-extension",)) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jaxrel", "compat", "--frontend", "jax==0.10.2", "--python", "3.11",
               "--workdir", str(workdir), *(arg for cell in cells for arg in ("--cell", cell)), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=1800, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def run(index_reachable, tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The three cells with the extension, which compat builds with Bazel as released (in the kept workspace of
    that configuration: tests/bazel_workspace.py)."""
    workdir = tmp_path_factory.mktemp("compat")
    with kept_workspace("manylinux") as workspace:
        return compat(workdir, *CELLS, options=("--workspace", str(workspace))), workdir


def test_run_passes_and_prints_the_table(run):
    done, workdir = run
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert "3 cells (1 positive, 2 negative): 3 as expected" in done.stdout
    for cell in CELLS:
        assert any(line.startswith(cell + " ") and line.rstrip().endswith("ok") for line in done.stdout.splitlines())
    assert sum(f"] {cell}:" in done.stderr for cell in CELLS) == 3  # a progress line per cell


def test_positive_cell_runs_the_compat_suite(run):
    _, workdir = run
    report = json.loads((workdir / "report.json").read_text())
    assert report["ok"] is True
    cell = next(c for c in report["cells"] if c["cell"]["id"] == "py3.11-jaxlib0.10.2")
    assert cell["observed"] == "accepted" and cell["frontend_import"]["sum"] == 3.0
    assert cell["tests"]["passed"] >= 5 and cell["tests"]["failed"] == 0 and cell["tests"]["errors"] == 0
    assert cell["backend_api"]["jaxlib_extension_version"] == 467
    passed = [name for name, outcome in cell["outcomes"].items() if outcome == "passed"]
    assert any("primitive" in name for name in passed) and any("shard_map" in name for name in passed)
    # the extension as released (--config=manylinux, from pyproject's release): the portable stable-ABI wheel
    released = f"jaxrel_rmsnorm-{jaxrel.__version__}-cp311-abi3-manylinux_2_27_{platform.machine()}.whl"
    assert cell["extension"] == released
    on_cpu = {name: outcome for name, outcome in cell["outcomes"].items()
              if name.startswith("test_extension.py::") and "[cpu" in name}  # computed on the CPU, against NumPy
    assert len(on_cpu) >= 10 and set(on_cpu.values()) == {"passed"}, on_cpu
    suite = ElementTree.parse(workdir / "junit" / "py3.11-jaxlib0.10.2.xml").getroot()
    assert int(suite.find("testsuite").get("tests")) == sum(cell["tests"].values())  # type: ignore[union-attr]
    # XLA's compiled programs kept for the next run, per backend build; the negative cells ran no suite
    cached = {p.parent.name.rsplit("-", 1)[0] for p in (workdir / "xla-cache").glob("*/*")}
    assert cached == {"py3.11-jaxlib0.10.2"}, cached


def test_negative_cells_are_refused_by_the_guard_with_the_fix(run):
    _, workdir = run
    cells = {c["cell"]["id"]: c for c in json.loads((workdir / "report.json").read_text())["cells"]}
    below = cells["py3.11-jaxlib0.10.0"]
    assert below["observed"] == "refused" and below["guard_fix"] == 'pip install "jaxlib>=0.10.1,<=0.10.2"'
    assert "requires version >= 0.10.1" in below["import_error"]  # real jax refuses too, without a fix
    plugin = cells["py3.11-jaxlib0.10.2-cuda12@0.10.1"]
    assert plugin["observed"] == "refused" and "jax-cuda12-plugin" in plugin["guard_message"]
    assert plugin["guard_fix"].startswith("pip install") and "0.10.2" in plugin["guard_fix"]
    assert any("not compatible" in w for w in plugin["frontend_import"]["warnings"])  # real jax only warns
    for cell_id in ("py3.11-jaxlib0.10.0", "py3.11-jaxlib0.10.2-cuda12@0.10.1"):
        case = next(ElementTree.parse(workdir / "junit" / f"{cell_id}.xml").getroot().iter("testcase"), None)
        assert case is not None and case.find("failure") is None
    markdown = (workdir / "report.md").read_text()
    assert "| `py3.11-jaxlib0.10.0` | refused (backend-at-least-minimum) | refused |" in markdown


def test_a_cell_whose_observation_differs_fails_the_run(run, tmp_path):
    """With the guard switched off, the below-minimum cell is accepted: the run must fail and say so."""
    done = compat(tmp_path, "py3.11-jaxlib0.10.0", env={"JAXREL_SKIP_GUARD": "1"})
    assert done.returncode == 1
    assert "FAILED: expected refused, the guard accepted it" in done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is False and report["cells"][0]["observed"] == "accepted"
    case = next(ElementTree.parse(tmp_path / "junit" / "py3.11-jaxlib0.10.0.xml").getroot().iter("testcase"), None)
    assert case is not None and case.find("failure") is not None


@pytest.mark.long("two compat runs of a real cell, each building a jax sdist's tree as the frontend")
def test_frontend_source_tree_with_its_own_tests(index_reachable, tmp_path):
    """--frontend-src: the tree is built out of tree as the frontend, and its own tests (selected by path and -k)
    run against the wheel installed in the cell, not the tree."""
    from jaxrel.cells.frontend import _unpack_sdist
    from jaxrel.distributions.index import Index

    index = Index.from_pip()
    sdist = index.download(index.listing("jax").sdist("0.10.2"))  # type: ignore[arg-type]
    tree, _ = _unpack_sdist(sdist, tmp_path / "src")
    (tree / "tests").mkdir()
    (tree / "tests" / "test_own.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n"
        "def test_selected():\n    assert float(jnp.arange(3).sum()) == 3\n"
        "    assert '/site-packages/jax/' in jax.__file__, jax.__file__\n\n"
        "def test_not_selected():\n    raise AssertionError('-k must deselect this')\n")
    before = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*"))
    command = [sys.executable, "-m", "jaxrel", "compat", "--frontend-src", str(tree), "--python", "3.11",
               "--cell", "py3.11-jaxlib0.10.2", "--frontend-tests", "tests/test_own.py", "--no-extension",
               "-k", "selected and not not_selected", "--workdir", str(tmp_path / "w")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    assert report["matrix"]["frontend"]["source"].startswith(f"source {tree} (copy of {tree}, built out of tree")
    cell = report["cells"][0]
    assert cell["frontend_tests"] == {"passed": 1, "failed": 0, "skipped": 0, "errors": 0}
    assert all(Path(f).is_relative_to(tmp_path / "w" / "envs") for f in cell["frontend_files"])
    assert "1 passed, 0 failed, 0 skipped" in done.stdout  # the own-tests column
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == before, "nothing written in the tree"

    # Changed by #13: a test that fails on the newest admitted jaxlib too is a frontend failure: reported with
    # its error, apart from compat regressions, and the run does not fail for it.
    (tree / "tests" / "test_own.py").write_text("def test_selected():\n    raise AssertionError('fails')\n")
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    (failure,) = json.loads((tmp_path / "w" / "report.json").read_text())["cells"][0]["failures"]
    assert (failure["test"], failure["verdict"]) == ("tests/test_own.py::test_selected", "frontend failure")
    assert failure["message"] == "AssertionError: fails"
    assert "failed tests: 1 frontend failure" in done.stdout
