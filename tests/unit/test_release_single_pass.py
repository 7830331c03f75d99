"""Collect reads every member against RECORD once; verify checks that the files are those bytes (sha256 against
the manifest) and reads the members again only where collect did not (a build's manifest) or with ``--deep``.
The previous release's grid is asked of the index while collect reads the files."""

from __future__ import annotations

import json
import threading
import zipfile
from pathlib import Path

import pytest
from matrix_family import build_matrix, project

from jaxrel._util.files import sha256_of
from jaxrel._util.parallel import in_background
from jaxrel.cli import main
from jaxrel.errors import EnvironmentFailure
from jaxrel.release import collect, manifest, verify
from jaxrel.release.project import open_project


@pytest.fixture
def collected(tmp_path: Path) -> tuple[Path, Path]:
    """The sample matrix family collected: (its tree, the output directory)."""
    tree = project(tmp_path / "mfam")
    with open_project(tree) as found:
        collect.collect(found, [build_matrix(tmp_path / "artifacts")], tmp_path / "out")
    return tree, tmp_path / "out"


def _verify(tree: Path, out: Path, deep: bool = False) -> verify.Verification:
    with open_project(tree) as found:
        return verify.verify_dist(out, found.family, run_twine=False, release=found.release, deep=deep)


def test_collect_records_how_many_members_it_checked_in_each_wheel(collected: tuple[Path, Path]) -> None:
    _, out = collected
    artifacts = manifest.read(out).artifacts
    assert {a.kind for a in artifacts} == {"wheel", "sdist"}
    for artifact in artifacts:
        if artifact.kind == "sdist":
            assert artifact.members_checked is None
        else:
            with zipfile.ZipFile(out / artifact.file) as archive:
                assert artifact.members_checked == len(archive.namelist())


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    read: list[Path] = []
    real = verify.verify_record

    def counted(path: Path) -> int:
        read.append(path)
        return real(path)
    monkeypatch.setattr(verify, "verify_record", counted)
    return read


def test_verify_takes_collects_member_check_for_the_same_bytes_and_deep_reads_them_again(
        collected: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tree, out = collected
    read = _counting(monkeypatch)
    light = _verify(tree, out)
    assert light.ok, light.problems()
    assert read == []
    wheels = [report for report in light.files if report.file.endswith(".whl")]
    assert wheels and all(any(c.endswith("members, by collect)") for c in r.checked) for r in wheels)
    deep = _verify(tree, out, deep=True)
    assert deep.ok and sorted(p.name for p in read) == sorted(r.file for r in wheels)
    assert all(not any("by collect" in c for c in r.checked) for r in deep.files)


def _tamper(out: Path, keep_record: bool) -> str:
    """A member of the backend's first wheel changed (its RECORD not), the manifest's sha256 made to match; collect's
    member count kept or dropped."""
    listing = json.loads((out / manifest.NAME).read_text())
    entry = next(a for a in listing["artifacts"] if a["kind"] == "wheel" and a["role"] == "backend")
    path = out / entry["file"]
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    path.unlink()  # collect hard-links: write a new file, leave the artifact alone
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members:
            archive.writestr(info, data + b"# changed\n" if info.filename.endswith(".py") else data)
    entry["sha256"], entry["size"] = sha256_of(path), path.stat().st_size
    if not keep_record:
        del entry["members_checked"]
    (out / manifest.NAME).write_text(json.dumps(listing))
    return str(entry["file"])


def test_a_file_changed_after_collect_is_refused_by_its_sha256(collected: tuple[Path, Path]) -> None:
    tree, out = collected
    listing = json.loads((out / manifest.NAME).read_text())
    wheel_name = next(a["file"] for a in listing["artifacts"] if a["kind"] == "wheel")
    data = (out / wheel_name).read_bytes()
    (out / wheel_name).unlink()
    (out / wheel_name).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    problems = _verify(tree, out).problems()
    assert len(problems) == 1 and f"{wheel_name}: sha256" in problems[0] and "changed after the build" in problems[0]


@pytest.mark.parametrize("keep_record", [False, True])
def test_members_that_lie_are_refused_where_verify_reads_them(collected: tuple[Path, Path],
                                                              keep_record: bool) -> None:
    """Without collect's count in the manifest verify reads the members itself; ``--deep`` reads them whatever the
    manifest says."""
    tree, out = collected
    name = _tamper(out, keep_record)
    problems = _verify(tree, out, deep=keep_record).problems()
    assert len(problems) == 1 and problems[0].startswith(f"{name}: member ")
    assert "does not match its RECORD hash" in problems[0]


def test_the_command_line_reads_the_members_again_with_deep(collected: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    tree, out = collected
    assert main(["release", "verify", str(out), "--project", str(tree), "--json"]) == 0
    light = json.loads(capsys.readouterr().out)
    assert main(["release", "verify", str(out), "--project", str(tree), "--json", "--deep"]) == 0
    deep = json.loads(capsys.readouterr().out)
    wheel_checks = [[c for c in f["checked"] if c.startswith("RECORD")] for f in light["files"]
                    if f["file"].endswith(".whl")]
    assert all(len(c) == 1 and c[0].endswith(", by collect)") for c in wheel_checks)
    assert [f["checked"] for f in deep["files"]] == [[c.replace(", by collect", "") for c in f["checked"]]
                                                     for f in light["files"]]


def test_a_member_count_that_is_not_the_wheels_is_refused(collected: tuple[Path, Path]) -> None:
    tree, out = collected
    listing = json.loads((out / manifest.NAME).read_text())
    entry = next(a for a in listing["artifacts"] if a["kind"] == "wheel")
    entry["members_checked"] += 1
    (out / manifest.NAME).write_text(json.dumps(listing))
    problems = _verify(tree, out).problems()
    assert problems == [f"{entry['file']}: the manifest says collect checked {entry['members_checked']} members, "
                        f"the wheel has {entry['members_checked'] - 1}: the manifest was not written for this file; "
                        "collect the release again"]


@pytest.mark.parametrize("value", [-1, True, "12", 1.5])
def test_a_malformed_member_count_in_the_manifest_is_bad_input(collected: tuple[Path, Path], value: object) -> None:
    _, out = collected
    listing = json.loads((out / manifest.NAME).read_text())
    listing["artifacts"][0]["members_checked"] = value
    (out / manifest.NAME).write_text(json.dumps(listing))
    with pytest.raises(manifest.ManifestError, match=r"members_checked' must be a non-negative integer"):
        manifest.read(out)


def test_a_manifest_without_counts_is_written_as_before(tmp_path: Path) -> None:
    artifact = manifest.Artifact("a-1-py3-none-any.whl", "a", "1", "backend", "wheel", "0" * 64, 1)
    written = manifest.Manifest("a", "1", "v1", None, (artifact,)).to_json()
    assert "members_checked" not in written["artifacts"][0]
    counted = manifest.Manifest("a", "1", "v1", None, (manifest.Artifact(**{**artifact.__dict__,
                                                                           "members_checked": 3}),))
    assert manifest.parse(counted.to_json(), "test").artifacts[0].members_checked == 3


def test_in_background_gives_the_result_or_raises_what_the_task_raised() -> None:
    assert in_background(lambda: 41 + 1)() == 42

    def fails() -> int:
        raise EnvironmentFailure("the index is unreachable")
    with pytest.raises(EnvironmentFailure, match="unreachable"):
        in_background(fails)()


def test_collect_asks_the_index_while_it_reads_and_does_not_wait_for_it_to_refuse(tmp_path: Path) -> None:
    """The previous grid is asked for as collect starts (in another thread); a refusal that comes first is given at
    once, and an index that failed matters only where its answer is needed."""
    tree = project(tmp_path / "mfam")
    asked = threading.Event()
    release = threading.Event()
    threads: list[str] = []

    def slow(distribution: str, version: object) -> None:
        threads.append(threading.current_thread().name)
        asked.set()
        release.wait(120)
        raise AssertionError("collect waited for the index before refusing")

    artifacts = build_matrix(tmp_path / "artifacts")
    next(artifacts.rglob("mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl")).unlink()
    try:
        with open_project(tree) as found, pytest.raises(collect.CollectRefused, match="has no cp313-cp313-manylinux"):
            collect.collect(found, [artifacts], tmp_path / "out", previous=slow)
        assert asked.is_set() and threads != [threading.current_thread().name]
    finally:
        release.set()

    def unreachable(distribution: str, version: object) -> None:
        raise EnvironmentFailure("the index is unreachable")
    with open_project(tree) as found, pytest.raises(EnvironmentFailure, match="unreachable"):
        collect.collect(found, [build_matrix(tmp_path / "again")], tmp_path / "out2", previous=unreachable)
    assert not (tmp_path / "out2").exists()
