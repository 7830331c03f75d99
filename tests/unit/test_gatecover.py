"""Coverage of live gates by a compat matrix (jaxrel.gates.cover) and ``jaxrel gates --matrix``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from jaxrel.cli import main
from jaxrel.family import jax_profile
from jaxrel.gates import cover as gatecover
from jaxrel.gates import judge as gates

# jax 0.10.2 with minimum jaxlib 0.10.1: jaxlib_extension_version 452 (0.10.1), 467 (0.10.2), per jax.json.
VERSION_FILE = '_version = "0.10.2"\n_minimum_jaxlib_version = "0.10.1"\n'
MODULE = """\
from jax._src.lib import jaxlib_extension_version

if jaxlib_extension_version >= 460:
    new = True
if jaxlib_extension_version >= 400:
    old = True
"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "jax" / "_src").mkdir(parents=True)
    (tmp_path / "jax" / "version.py").write_text(VERSION_FILE)
    (tmp_path / "jax" / "_src" / "a.py").write_text(MODULE)
    return tmp_path


def _matrix(*backends: str, refused: str | None = None) -> dict:
    cells = [{"id": f"py3.11-jaxlib{b}", "backend": b, "expected": "accepted"} for b in backends]
    if refused:
        cells.append({"id": f"py3.11-jaxlib{refused}", "backend": refused, "expected": "refused"})
    return {"cells": cells}


@pytest.fixture()
def judged(tmp_path: Path) -> tuple[list[gates.Judgement], gates.Releases]:
    family = jax_profile()
    found, failed = gates.find_gates(_tree(tmp_path), family)
    assert not failed
    releases = gates.Releases.from_family(family, Version("0.10.1"), Version("0.10.2"))
    return gates.judge_all(found, releases), releases


def test_both_sides_covered_when_both_releases_run(judged: tuple[list[gates.Judgement], gates.Releases]) -> None:
    judgements, releases = judged
    assert [j.verdict for j in judgements] == ["live", "always-true"]
    (coverage,) = gatecover.cover(judgements, releases, gatecover.matrix_cells(_matrix("0.10.1", "0.10.2")))
    assert coverage.cells == {"true": ["py3.11-jaxlib0.10.2"], "false": ["py3.11-jaxlib0.10.1"]}
    assert coverage.missing == {}


def test_missing_side_names_the_release_that_covers_it(judged: tuple[list[gates.Judgement], gates.Releases]) -> None:
    judgements, releases = judged
    (coverage,) = gatecover.cover(judgements, releases, gatecover.matrix_cells(_matrix("0.10.2", refused="0.10.1")))
    assert coverage.cells == {"true": ["py3.11-jaxlib0.10.2"], "false": []}, "refused cells exercise nothing"
    assert coverage.missing == {"false": "0.10.1"}
    assert "false: not covered; add 0.10.1" in coverage.describe()


def test_report_json_holds_the_matrix_under_matrix() -> None:
    assert gatecover.matrix_cells({"matrix": _matrix("0.10.2")}) == [("py3.11-jaxlib0.10.2", "0.10.2")]


def test_cli_matrix_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "src")
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(_matrix("0.10.2")))
    assert main(["gates", str(tree), "--json", "--matrix", str(matrix)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["coverage"] == [{"file": "jax/_src/a.py", "line": 3, "cells": {"true": ["py3.11-jaxlib0.10.2"],
                                                                                "false": []},
                                "missing": {"false": "0.10.1"}}]
    assert main(["gates", str(tree), "--matrix", str(matrix)]) == 0
    assert "jax/_src/a.py:3: true: py3.11-jaxlib0.10.2; false: not covered; add 0.10.1" in capsys.readouterr().out
    assert main(["gates", str(tree), "--matrix", str(tmp_path / "missing.json")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "jaxrel matrix --format json" in error
