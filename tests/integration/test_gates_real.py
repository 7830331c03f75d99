"""``jaxrel gates`` on real jax sdists from the index: the newest release and 0.4.30.

0.4.30's gates are rewritten with its minimum raised from 0.4.27 to 0.4.30, then the rewritten
tree is byte-compiled, built, installed and imported against jaxlib 0.4.30 and run through the
compat suite by ``jaxrel compat --frontend-src``.
"""

from __future__ import annotations

import compileall
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from jaxrel import policy
from jaxrel.cli import main
from jaxrel.distributions.index import Index
from jaxrel.distributions.pythons import find_pythons
from jaxrel.gates.judge import VERDICTS

pytestmark = pytest.mark.integration

OLDER = "0.4.30"  # declares jaxlib >= 0.4.27; its gates sit between 0.4.27's and 0.4.30's API numbers


@pytest.fixture(scope="module")
def index(index_reachable: None) -> Index:
    return Index.from_pip()


def unpack(index: Index, version: str | None, into: Path) -> Path:
    """A jax sdist (``None``: the newest release), unpacked under ``into``."""
    listing = index.listing("jax")
    if version is None:
        version = str([v for v in listing.versions() if policy.is_final(v) and listing.sdist(v)][-1])
    sdist = listing.sdist(version)
    assert sdist is not None, f"jax {version} has no sdist"
    with tarfile.open(index.download(sdist)) as archive:
        archive.extractall(into, filter="data")
    return into / f"jax-{version}"


def report(tree: Path, capsys: pytest.CaptureFixture[str], *options: str) -> dict:
    assert main(["gates", str(tree), "--json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def test_newest_release_report(index: Index, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = unpack(index, None, tmp_path)
    result = report(tree, capsys)
    found = result["gates"]
    assert found, "the newest jax has api-version gates"
    assert sum(result["counts"].values()) == len(found)
    for gate in found:
        line = (tree / gate["file"]).read_text(encoding="utf-8").splitlines()[gate["line"] - 1]
        assert gate["source"].splitlines()[0] in line, gate
        assert gate["verdict"] in VERDICTS
        if gate["verdict"] == "live":
            assert gate["sides"]["true"] and gate["sides"]["false"]
    if any(tuple(map(int, v.split("."))) >= (3, 12) for v in find_pythons()):
        assert result["unparsed"] == {}, "files with 3.12 syntax are re-read by a newer Python"


@pytest.mark.long("a real jax release's tree gated, fixed and run against real wheels")
def test_older_release_fixed_still_works(index: Index, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = unpack(index, OLDER, tmp_path / "src")
    declared = report(tree, capsys)
    assert declared["minimum_backend"] == "0.4.27"
    assert declared["gates"] and declared["counts"]["live"] == len(declared["gates"])

    version_file = tree / "jax" / "version.py"
    version_file.write_text(version_file.read_text().replace('_minimum_jaxlib_version = "0.4.27"',
                                                             f'_minimum_jaxlib_version = "{OLDER}"'))
    raised = report(tree, capsys)
    assert raised["minimum_backend"] == OLDER
    assert {g["verdict"] for g in raised["gates"]} <= {"always-true", "always-false"}

    assert main(["gates", str(tree), "--fix"]) == 0
    assert f"rewrote {len({g['file'] for g in raised['gates']})} files" in capsys.readouterr().err
    assert report(tree, capsys)["gates"] == [], "every decided gate is gone"
    assert compileall.compile_dir(str(tree / "jax"), quiet=2, force=True)
    shutil.rmtree(tree / "build", ignore_errors=True)

    workdir = tmp_path / "compat"
    code = main(["compat", "--frontend-src", str(tree), "--python", "3.11", "--plugins", "none", "--no-extension",
                 "--workdir", str(workdir)])
    compat = json.loads((workdir / "report.json").read_text())
    assert code == 0, compat["summary"]
    accepted = [c for c in compat["cells"] if c["observed"] == "accepted"]
    assert [c["cell"]["backend"] for c in accepted] == [OLDER]
    assert accepted[0]["frontend_import"]["sum"] == 3.0
    assert accepted[0]["tests"]["passed"] >= 10 and accepted[0]["tests"]["failed"] == 0
