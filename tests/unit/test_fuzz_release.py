"""Generative fuzz of the release half's inputs: ``bump``'s versions and dates, ``--as-of`` times, ``collect``'s
artifact trees and ``audit``'s index pages and METADATA.

The property for every example: the command answers or refuses in one line with one of its exit codes (1
refused, 2 bad input, 3 the index), never a traceback (70); a refused bump or collect writes nothing; and nothing
outside the tree it was given changes. CI runs a bounded count; ``nox -s fuzz`` runs far more.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from matrix_family import build_matrix, project, wheel
from test_fuzz_net_archive import fuzz
from test_release_audit import Served, run, served  # noqa: F401 (served: the fixture)

from jaxrel._util.literals import is_version
from jaxrel.cli import main
from jaxrel.cli._common import UsageError
from jaxrel.cli._matrix import as_of
from jaxrel.errors import JaxrelError
from jaxrel.release import collect
from jaxrel.release.project import open_project

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam"
VERSIONS = st.one_of(
    st.sampled_from(["0.2.0", "0.2.0\n", " 0.2.0", "0.2.*", "v0.2.0", "1!0.2.0", "0.2.0+local", "0.2.0rc1", "0.0.1",
                     "9" * 5000, "0.2.0\x00", "０.２.０", "", "0.2.0.post1", "0.2.0 # comment", "0.2.0;rm -rf /"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
)
DATES = st.one_of(st.none(), st.sampled_from(["2026-03-04", "9999-12-31", "0001-01-01", "2026-02-30", "yesterday",
                                              "2026-03-04T12:00:00Z", "\n"]), st.text(max_size=12))


def _tree(root: Path) -> dict[str, str]:
    """Every file below ``root`` (``.git`` aside) and its sha256: what a run must leave alone."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and ".git" not in p.parts}


@pytest.fixture(scope="module")
def template_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bump-template") / "splitfam"
    shutil.copytree(TEMPLATE, root)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                                "-qm", "0.1.0"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


@fuzz(ci=25)
@given(version=VERSIONS, minimum=st.one_of(st.none(), VERSIONS), date=DATES)
def test_bump_writes_every_file_right_or_nothing(template_repo: Path, tmp_path_factory: pytest.TempPathFactory,
                                                 capsys: pytest.CaptureFixture[str], version: str,
                                                 minimum: str | None, date: str | None) -> None:
    where = tmp_path_factory.mktemp("bump")
    repo = where / "splitfam"
    shutil.copytree(template_repo, repo, symlinks=True)
    (where / "outside.txt").write_text("left alone")
    before, around = _tree(repo), _tree(where)
    argv = ["release", "bump", version, "--project", str(repo), *(["--minimum-backend", minimum] if minimum else []),
            *(["--release-date", date] if date is not None else [])]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2, 3), err
    assert "Traceback" not in err and "internal error" not in err, err
    after = _tree(repo)
    outside = {k: v for k, v in _tree(where).items() if not k.startswith("splitfam/")}
    assert outside == {k: v for k, v in around.items() if not k.startswith("splitfam/")}, "a file outside changed"
    if code != 0:
        assert after == before, "a refused bump wrote something"
        assert len(err.strip().splitlines()) == 1, err
    else:
        assert "\n" not in version and version == version.strip()


@fuzz(ci=60)
@given(text=st.one_of(DATES.filter(lambda d: d is not None), st.datetimes(timezones=st.just(datetime.UTC)).map(
    lambda d: d.isoformat()), st.builds(lambda d, h: f"{d.isoformat()}T00:00:00{h:+03d}:00", st.dates(),
                                        st.integers(-23, 23))))
def test_as_of_is_a_utc_moment_or_one_usage_error(text: str) -> None:
    try:
        moment = as_of(text)
    except UsageError as error:
        assert "\n" not in str(error) and "--as-of" in str(error)
        return
    assert moment is not None and moment.tzinfo is not None and moment.utcoffset() == datetime.timedelta(0)


NAMES = st.sampled_from(["mfam_core-0.2.0-cp312-cp312-manylinux_2_27_x86_64.whl", "mfam-0.2.0.tar.gz",
                         "mfam_core-0.2.0-1-cp312-cp312-manylinux_2_27_x86_64.whl", "x.whl", "mfam_core-0.2.0.whl",
                         "mfam_gpu_plugin-0.2.0-cp312-cp312t-manylinux_2_27_x86_64.whl", "README", "\u2028.whl",
                         "mfam_core-0.2.0-cp312-cp312-manylinux_2_27_x86_64.whl.part"])


@fuzz(ci=25)
@given(files=st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "deep"]), max_size=4), NAMES,
                                st.sampled_from([b"", b"PK\x03\x04", b"not a zip", None])), max_size=6),
       dangling=st.booleans())
def test_collect_gathers_or_refuses_in_one_line_and_writes_only_its_output(
        tmp_path_factory: pytest.TempPathFactory, files: list[tuple[list[str], str, bytes | None]],
        dangling: bool) -> None:
    where = tmp_path_factory.mktemp("collect")
    tree = project(where / "mfam")
    artifacts = build_matrix(where / "artifacts")
    for folders, name, data in files:
        folder = artifacts.joinpath(*folders)
        folder.mkdir(parents=True, exist_ok=True)
        if data is None:  # a real wheel of the family, placed somewhere odd
            wheel(folder, "mfam-core", "0.2.0", "cp312-cp312-manylinux_2_27_x86_64")
        else:
            (folder / name).write_bytes(data)
    if dangling:
        (artifacts / "link.whl").symlink_to(where / "nowhere.whl")
    before = {k: v for k, v in _tree(where).items() if not k.startswith("out")}
    out = where / "out"
    try:
        with open_project(tree) as found:
            collect.collect(found, [artifacts], out)
    except JaxrelError as error:
        assert error.exit_code in (1, 2) and "\n" not in str(error), str(error)
        assert not out.exists(), "a refused collection wrote its output"
    assert {k: v for k, v in _tree(where).items() if not k.startswith("out")} == before, "an input changed"
    assert not [p for p in where.iterdir() if p.name.startswith(".out.")], "a staging directory was left"


TIMES = st.sampled_from(["2026-07-16T12:00:00Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00",
                         "2026-13-01T00:00:00Z", "", "2026-07-16", "2026-07-16T12:00:00.123456789Z"])
REQUIRES = st.sampled_from(["mfam-core==0.2.*", "mfam-core>=0.2.0,<=0.2.0", "mfam-core===0.2.0", "mfam-core (<1)",
                            'mfam-gpu-plugin==0.2.*; extra == "gpu-local"', "mfam-core>=", "mfam-core==9" * 50,
                            'mfam-core; python_version >= "3.99"', "mfam_core ~= 0.2"])


@fuzz(ci=20)
@given(time=TIMES, requires=st.lists(REQUIRES, max_size=4), python=st.sampled_from(["", ">=3.12", ">=banana", "<3"]),
       yanked=st.sampled_from([False, True, "reason\nwith a line", ""]))
def test_audit_answers_or_refuses_hostile_pages_in_one_line(served: Served,  # noqa: F811 (the fixture)
                                                            tmp_path_factory: pytest.TempPathFactory,
                                                            time: str, requires: list[str], python: str,
                                                            yanked: bool | str) -> None:
    index = served
    root = index.root
    (root / "mfam-0.2.0-py3-none-any.whl").unlink(missing_ok=True)
    wheel(root, "mfam", "0.2.0", "py3-none-any", tuple(requires))
    index.times["mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl"] = time
    index.yanked["mfam_core-0.2.0-cp312-cp312-macosx_11_0_arm64.whl"] = yanked
    if python:
        index.requires["mfam_core-0.2.0-cp312-cp312-macosx_11_0_arm64.whl"] = python
    try:
        (result,) = run(tmp_path_factory.mktemp("tree"), index)
    except JaxrelError as error:
        assert error.exit_code in (2, 3) and "\n" not in str(error), str(error)
        return
    assert all("\n" not in f.detail for f in result.findings), result.findings


FIELDS = [  # every version field of the sample family's files: (file, field, how its value is written there)
    ("frontend/splitfam/version.py", "_version", repr), ("frontend/splitfam/version.py", "_minimum_core_version", repr),
    ("frontend/pyproject.toml", "version", json.dumps), ("core/splitfam_core/version.py", "_version", repr),
    ("core/version.bzl", "VERSION", json.dumps), ("plugin/splitfam_cpu_plugin/version.py", "_version", repr),
]
WORDS = st.one_of(st.sampled_from(["latest", "{version}", "<<<<<<< HEAD", "TODO", "0.2.0 # comment", "v0.2.0",
                                   "1!0.2.0", "9" * 5000, "", "None", "0.2.0;rm -rf /"]), VERSIONS)


@fuzz(ci=12)
@given(field=st.sampled_from(FIELDS), value=WORDS)
def test_a_word_in_any_version_field_of_a_file_is_one_line_naming_the_file_and_field(
        template_repo: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
        field: tuple[str, str, Any], value: str) -> None:
    """The file form of each version field (the option form is the test above): plan, check and bump read the
    files; a value that is not a version is exit 2 naming the file, the field and the value, never a crash (a
    "latest" in the minimum once ended bump in an InvalidVersion traceback, exit 70), and nothing is written."""
    file, name, literal = field
    repo = tmp_path_factory.mktemp("word") / "splitfam"
    shutil.copytree(template_repo, repo, symlinks=True)
    path = repo / file
    lines = path.read_text().splitlines()
    key = "version" if file.endswith(".toml") else name
    assert any(line.startswith(f"{key} = ") for line in lines), f"{file} has no {key}"
    path.write_text("\n".join(f"{key} = {literal(value)}" if line.startswith(f"{key} = ") else line
                              for line in lines) + "\n")
    before = _tree(repo)
    word = not is_version(value)
    verbs = [["release", "plan", "--project", str(repo)], ["release", "bump", "0.2.0", "--project", str(repo)]]
    if word:  # a good version goes on to ask the index; a word is refused before
        verbs.append(["release", "check", str(repo)])
    for argv in verbs:
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err and "internal error" not in err, err
        assert code in (0, 1, 2, 3), err
        if word:
            assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
            assert file in err and f"{name} = " in err, err
            assert "is not a PEP 440 version" in err or "has an epoch" in err, err
            assert _tree(repo) == before, "a refused command wrote something"
