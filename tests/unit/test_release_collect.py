"""``jaxrel release collect``: a build matrix's files gathered as one release, or refused naming the file and the fix.

The family (tests/matrix_family.py) is shaped as jax releases: a backend per (Python, platform), a plugin that
pins its pjrt, the pjrt once per platform, Linux only for both, a frontend wheel and sdist, one component
released separately.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from matrix_family import build_matrix, project, wheel

from jaxrel.cli import main
from jaxrel.errors import BadInput
from jaxrel.release import collect
from jaxrel.release.manifest import read
from jaxrel.release.project import open_project
from jaxrel.release.verify import verify_dist


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return project(tmp_path / "mfam")


def gather(tree: Path, artifacts: Path, out: Path, **options: object) -> collect.Collection:
    with open_project(tree) as found:
        return collect.collect(found, [artifacts], out, **options)  # type: ignore[arg-type]


def test_a_whole_matrix_is_collected_in_upload_order_and_verifies(tree: Path, tmp_path: Path) -> None:
    artifacts = build_matrix(tmp_path / "artifacts")
    result = gather(tree, artifacts, tmp_path / "out", pythons=["cp312", "cp313"],
                    platforms=["manylinux_2_27_x86_64", "macosx_11_0_arm64"])
    manifest = read(tmp_path / "out")
    assert manifest == result.manifest and manifest.version == "0.2.0" and manifest.tag == "mfam-v0.2.0"
    order = list(dict.fromkeys(a.distribution for a in manifest.artifacts))
    assert order == ["mfam-core", "mfam-gpu-pjrt", "mfam-gpu-plugin", "mfam"]
    assert len(manifest.artifacts) == 4 + 1 + 2 + 2  # core: 2 Pythons x 2 platforms; Linux pjrt; Linux plugin
    with open_project(tree) as found:
        verification = verify_dist(tmp_path / "out", found.family, run_twine=False, release=found.release)
    assert verification.ok, verification.problems()


def _damage(artifacts: Path, damage: str) -> None:  # noqa: C901 (one branch per damage, read as a table)
    """Break the build matrix's artifacts the way ``damage`` says."""
    job = artifacts / "build-cp313-manylinux_2_27_x86_64"
    if damage == "plugin-old":
        (job / "mfam_gpu_plugin-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
        wheel(job, "mfam-gpu-plugin", "0.1.9", "cp313-cp313-manylinux_2_27_x86_64", ("mfam-gpu-pjrt==0.1.9",))
    elif damage == "core-missing":
        (job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
    elif damage == "core-and-plugin-missing":  # the plugin follows the backend: the hole is the backend's grid's
        (job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
        (job / "mfam_gpu_plugin-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
    elif damage == "core-linux-only":  # no hole (cp313 has no wheel on any platform now): the plugin is alone
        (job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
        (artifacts / "build-cp313-macosx_11_0_arm64" / "mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl").unlink()
    elif damage == "free-threaded-plugin":  # cp313t is not cp313: a plugin for an interpreter the backend lacks
        wheel(job, "mfam-gpu-plugin", "0.2.0", "cp313-cp313t-manylinux_2_27_x86_64", ("mfam-gpu-pjrt==0.2.0",))
    elif damage == "free-threaded-core":
        wheel(job, "mfam-core", "0.2.0", "cp313-cp313t-manylinux_2_27_x86_64")
    elif damage == "plugin-missing":
        (artifacts / "build-cp312-manylinux_2_27_x86_64" / "mfam_gpu_plugin-0.2.0-cp312-cp312-manylinux_2_27_x86_64.whl"
         ).unlink()
    elif damage == "pjrt-missing":
        shutil.rmtree(artifacts / "pjrt-manylinux_2_27_x86_64")
    elif damage == "separately":
        wheel(job, "mfam-tpu-plugin", "0.2.0", "cp312-cp312-manylinux_2_27_x86_64")
    elif damage == "foreign":
        wheel(job, "numpy", "2.0.0", "cp312-cp312-manylinux_2_27_x86_64")
    elif damage == "tampered":
        (job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
        wheel(job, "mfam-core", "0.2.0", "cp313-cp313-manylinux_2_27_x86_64", tamper=True)
    elif damage == "bad-name":
        (job / "mfam_core-0.2.0-cp312.whl").write_bytes(b"x")
    elif damage == "two-dist-info":
        (job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
        wheel(job, "mfam-core", "0.2.0", "cp313-cp313-manylinux_2_27_x86_64",
              files={"numpy-2.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n"})
    elif damage == "not-utf8":
        _rewrite(job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl", "mfam_core-0.2.0.dist-info/METADATA",
                 lambda data: data.replace(b"Summary: mfam-core", b"Summary: caf\xe9"))
    elif damage == "build-tag":  # a rebuild with a build tag beside the first build: pip would take it over the first
        shutil.copyfile(job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl",
                        job / "mfam_core-0.2.0-1-cp313-cp313-manylinux_2_27_x86_64.whl")
    elif damage == "no-sdist":
        (artifacts / "frontend" / "mfam-0.2.0.tar.gz").unlink()
    elif damage == "same-name":
        other = artifacts / "again" / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl"
        other.parent.mkdir()
        other.write_bytes(b"other bytes")


@pytest.mark.parametrize(("damage", "says"), [
    ("plugin-old", "mfam_gpu_plugin-0.1.9-cp313-cp313-manylinux_2_27_x86_64.whl: version 0.1.9, but the release is "
                   "0.2.0: a file from another release; take the mfam-gpu-plugin 0.2.0 artifact"),
    ("core-missing", "mfam-core has no cp313-cp313-manylinux_2_27_x86_64 wheel, though it has cp313-cp313 wheels for "
                     "other platforms and other interpreters' wheels for manylinux_2_27_x86_64: add that build job's "
                     "artifact"),
    ("core-and-plugin-missing", "mfam-core has no cp313-cp313-manylinux_2_27_x86_64 wheel, though"),  # a hole
    ("core-linux-only", "mfam_gpu_plugin-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl: mfam-core has no "
                        "cp313-cp313-manylinux_2_27_x86_64 wheel beside it"),
    ("plugin-missing", "mfam-gpu-plugin has no cp312-cp312-manylinux_2_27_x86_64 wheel, which mfam-core has: add "
                       "its wheel from that build job"),
    ("free-threaded-plugin", "mfam_gpu_plugin-0.2.0-cp313-cp313t-manylinux_2_27_x86_64.whl: mfam-core has no "
                             "cp313-cp313t-manylinux_2_27_x86_64 wheel beside it"),
    ("free-threaded-core", "mfam-gpu-plugin has no cp313-cp313t-manylinux_2_27_x86_64 wheel, which mfam-core has"),
    ("pjrt-missing", "mfam-gpu-pjrt 0.2.0: no file, but the release includes it"),
    ("separately", "mfam_tpu_plugin-0.2.0-cp312-cp312-manylinux_2_27_x86_64.whl: mfam-tpu-plugin is released "
                   "separately"),
    ("foreign", "numpy-2.0.0-cp312-cp312-manylinux_2_27_x86_64.whl: numpy is not a distribution of the mfam release"),
    ("tampered", "does not match its RECORD"),
    ("bad-name", "'mfam_core-0.2.0-cp312.whl' is not a valid wheel or sdist file name"),
    ("same-name", "two different files of that name"),
    ("no-sdist", "mfam 0.2.0: wheels but no sdist, and it publishes one with every release"),
    ("two-dist-info", "2 .dist-info directories (mfam_core-0.2.0.dist-info, numpy-2.0.0.dist-info); a wheel has one"),
    ("not-utf8", "mfam_core-0.2.0.dist-info/METADATA is not UTF-8"),
    ("build-tag", "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl: a second mfam-core wheel for "
                  "cp313-cp313-manylinux_2_27_x86_64 beside mfam_core-0.2.0-1-cp313-cp313-manylinux_2_27_x86_64.whl"),
    ("matrix", "mfam-core has no wheel for cp314 on manylinux_2_27_x86_64 (--pythons/--platforms ask for it)"),
])
def test_a_matrix_that_is_not_one_release_is_refused_naming_the_file(tree: Path, tmp_path: Path, damage: str,
                                                                     says: str) -> None:
    artifacts = build_matrix(tmp_path / "artifacts")
    _damage(artifacts, damage)
    options = {"pythons": ["cp312", "cp313", "cp314"], "platforms": ["manylinux_2_27_x86_64"]} \
        if damage == "matrix" else {}
    with pytest.raises(collect.CollectRefused) as refused:
        gather(tree, artifacts, tmp_path / "out", **options)
    assert says in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
    assert refused.value.exit_code == 1
    assert not (tmp_path / "out").exists(), "nothing is written when the collection is refused"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], "no staging directory is left"


def _rewrite(path: Path, member: str, change: Callable[[bytes], bytes]) -> None:
    """``member`` of the wheel at ``path`` changed in place, its RECORD line made to match (as a build tool that
    wrote those bytes would)."""
    import base64
    import hashlib

    with zipfile.ZipFile(path) as archive:
        members = {info.filename: (info, archive.read(info)) for info in archive.infolist()}
    info, data = members[member]
    changed = change(data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(changed).digest()).rstrip(b"=").decode()
    record_name = next(name for name in members if name.endswith(".dist-info/RECORD"))
    record_info, record = members[record_name]
    lines = [f"{member},sha256={digest},{len(changed)}" if line.startswith(f"{member},") else line
             for line in record.decode().splitlines()]
    members[member] = (info, changed)
    members[record_name] = (record_info, ("\n".join(lines) + "\n").encode())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members.values():
            archive.writestr(info, data)


def test_a_planted_cache_verdict_lets_no_lying_wheel_through(tree: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is a hint keyed by content, never a verdict: entries planted for a tampered wheel's bytes (a
    "RECORD ok" marker, an inspect record saying what a good build declares) change nothing."""
    from jaxrel._util.files import cache_root, sha256_of
    from jaxrel.distributions.wheels import SCHEMA

    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    artifacts = build_matrix(tmp_path / "artifacts")
    job = artifacts / "build-cp313-manylinux_2_27_x86_64"
    good = job / "mfam_core-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl"
    with open_project(tree) as found:
        from jaxrel.distributions.wheels import inspect
        honest = inspect(good, found.family)
    good.unlink()
    wheel(job, "mfam-core", "0.2.0", "cp313-cp313-manylinux_2_27_x86_64", tamper=True)
    digest = sha256_of(good)
    (cache_root() / "record-ok").mkdir(parents=True, exist_ok=True)
    (cache_root() / "record-ok" / digest).touch()
    (cache_root() / "inspect").mkdir(parents=True, exist_ok=True)
    (cache_root() / "inspect" / f"{digest}-mfam-{SCHEMA}.json").write_text(
        json.dumps({**honest.__dict__, "sha256": digest}))
    with pytest.raises(collect.CollectRefused, match="does not match its RECORD"):
        gather(tree, artifacts, tmp_path / "out")


def test_a_tree_nested_past_the_recursion_limit_is_one_line(tree: Path, tmp_path: Path) -> None:
    deep = tmp_path / "artifacts"
    levels = [deep]
    for _ in range(1100):  # deeper than Python's recursion limit; made and removed one level at a time
        levels.append(levels[-1] / "d")
    for level in levels:
        level.mkdir()
    try:
        with pytest.raises(BadInput, match="nested more than 64 directories") as refused:
            gather(tree, deep, tmp_path / "out")
        assert "\n" not in str(refused.value)
    finally:
        for level in reversed(levels):  # pytest's own clean-up of tmp_path recurses
            level.rmdir()


def test_the_version_is_the_tagged_commits(tree: Path, tmp_path: Path) -> None:
    artifacts = build_matrix(tmp_path / "artifacts", version="0.2.1", minimum="0.2.0")
    with pytest.raises(collect.CollectRefused, match=r"collecting 0.2.1, but the tree at .* declares 0.2.0; check out "
                                                     r"the tag mfam-v0.2.1"):
        gather(tree, artifacts, tmp_path / "out", version="0.2.1")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(BadInput, match="is not an empty directory"):
        gather(tree, build_matrix(tmp_path / "again"), tmp_path / "busy")


def collect_cli(*argv: str) -> int:
    """``jaxrel release collect`` in process, its grid not compared with the index's previous release (offline)."""
    return main(["release", "collect", "--no-previous", *argv])


def test_the_command_line_prints_the_table_and_json(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    artifacts = build_matrix(tmp_path / "artifacts")
    monkeypatch.chdir(tree)
    assert collect_cli(str(artifacts), "--output", str(tmp_path / "out"), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == "0.2.0" and len(data["artifacts"]) == 9
    assert collect_cli(str(artifacts), "--output", str(tmp_path / "out2")) == 0
    assert "upload order mfam-core → mfam-gpu-pjrt → mfam-gpu-plugin → mfam" in capsys.readouterr().out
    (artifacts / "build-cp312-manylinux_2_27_x86_64" / "mfam_core-0.2.0-cp312-cp312-manylinux_2_27_x86_64.whl").unlink()
    assert collect_cli(str(artifacts), "--output", str(tmp_path / "out3")) == 1
    assert "mfam-core has no cp312-cp312-manylinux_2_27_x86_64 wheel" in capsys.readouterr().err


def test_family_jax_means_jax_whatever_the_current_directory_holds(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    artifacts = build_matrix(tmp_path / "artifacts")
    monkeypatch.chdir(tree)  # a checkout of another family, with its own [tool.jaxrel] release table
    assert collect_cli("--family", "jax", str(artifacts), "--output", str(tmp_path / "o1")) == 2
    assert "is a checkout, but not of jax" in capsys.readouterr().err
    elsewhere = tmp_path / "nowhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert collect_cli("--family", "jax", str(artifacts), "--output", str(tmp_path / "o2")) == 2
    assert "give --version V" in capsys.readouterr().err
    assert collect_cli("--family", "jax", str(artifacts), "--output", str(tmp_path / "o3"),
                 "--version", "0.2.0") == 1
    err = capsys.readouterr().err
    assert "is not a distribution of the jax release (its components: jaxlib," in err and "mfam-core" not in err
    assert not (tmp_path / "o3").exists()


def test_a_plugin_family_the_frontend_names_cannot_be_left_out_even_without_a_tree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a checkout only the files say what the release holds: the frontend's METADATA extras name the plugin
    family at this version, so its absence is seen."""
    project(tmp_path / "mfam")
    artifacts = build_matrix(tmp_path / "artifacts")
    for path in [*artifacts.rglob("mfam_gpu_*.whl")]:
        path.unlink()
    elsewhere = tmp_path / "nowhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert collect_cli("--family", str(tmp_path / "mfam" / "pyproject.toml"), str(artifacts),
                 "--output", str(tmp_path / "out"), "--version", "0.2.0") == 1
    err = capsys.readouterr().err
    assert "mfam-gpu-plugin 0.2.0: no file, but the frontend's METADATA names it" in err, err


@pytest.mark.parametrize(("have", "wanted", "covered"), [
    (("cp312", "cp312", "manylinux_2_27_x86_64"), ("cp312", "cp312", "manylinux_2_28_x86_64"), True),
    (("cp312", "cp312", "manylinux_2_28_x86_64"), ("cp312", "cp312", "manylinux_2_27_x86_64"), False),
    (("cp312", "cp312", "manylinux2014_x86_64"), ("cp312", "cp312", "manylinux_2_17_x86_64"), True),
    (("cp312", "cp312", "manylinux_2_27_aarch64"), ("cp312", "cp312", "manylinux_2_28_x86_64"), False),
    (("cp312", "cp312", "macosx_11_0_arm64"), ("cp312", "cp312", "macosx_14_0_arm64"), True),
    (("cp313", "cp313", "manylinux_2_27_x86_64"), ("cp313", "cp313t", "manylinux_2_27_x86_64"), False),
    (("cp312", "cp312", "win_amd64"), ("cp312", "cp312", "win_amd64"), True),
    (("cp312", "cp312", "manylinux_2_27_x86_64.manylinux_2_28_x86_64"), ("cp312", "cp312", "manylinux_2_28_x86_64"),
     True),
])
def test_a_slot_covers_another_where_its_wheel_installs_wherever_the_others_does(
        have: tuple[str, str, str], wanted: tuple[str, str, str], covered: bool) -> None:
    from jaxrel.distributions.filenames import covers

    assert covers(have, wanted) is covered


def test_what_the_previous_release_had_is_not_dropped_unnamed(tree: Path, tmp_path: Path) -> None:
    """The backend's grid against the previous release's on the index: an interpreter or a platform it had must be
    there, or named with --drop; a raised glibc floor drops nothing."""
    before = {("cp311", "cp311", "manylinux2014_x86_64"), ("cp312", "cp312", "manylinux2014_x86_64"),
              ("cp312", "cp312", "macosx_11_0_arm64"), ("cp313", "cp313t", "manylinux2014_x86_64"),
              ("cp312", "cp312", "win_amd64")}
    now = {("cp312", "cp312", "manylinux_2_27_x86_64"), ("cp312", "cp312", "macosx_14_0_arm64")}
    assert collect.dropped(before, now, []) == ["cp311", "cp313t", "win_amd64"]
    assert collect.dropped(before, now, ["cp311", "win_amd64", "cp313t"]) == []

    def previous(distribution: str, version: object) -> tuple[str, set[tuple[str, str, str]]]:
        return f"{distribution} 0.1.0", {("cp311", "cp311", "manylinux_2_27_x86_64"),
                                         ("cp312", "cp312", "manylinux_2_17_x86_64.manylinux2014_x86_64"),
                                         ("cp313", "cp313", "macosx_11_0_arm64")}

    with pytest.raises(collect.CollectRefused, match=r"mfam-core 0.2.0 has no wheel for cp311, which mfam-core 0.1.0 "
                                                     r"had: name what the release drops with --drop cp311"):
        gather(tree, build_matrix(tmp_path / "a1"), tmp_path / "o1", previous=previous)
    assert not (tmp_path / "o1").exists()
    done = gather(tree, build_matrix(tmp_path / "a2"), tmp_path / "o2", previous=previous, drop=["cp311"])
    assert done.manifest.version == "0.2.0"
    first = gather(tree, build_matrix(tmp_path / "a3"), tmp_path / "o3", previous=lambda d, v: None)
    assert any("no earlier mfam-core release" in note for note in first.notes)
