"""The XLA pin in WORKSPACE: reading it, rewriting its literals in place, and making a pin from an index listing."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest
from packaging.tags import Tag

from jaxrel import releasedata
from jaxrel.distributions.index import IndexFile, Listing
from jaxrel.extension import xla

REPO = Path(__file__).resolve().parents[2]
KNOWN_COMMIT = "5a9e73cbd92530cac2ac36f4736a774b2412afe2"  # jaxlib 0.10.2, data/jax_xla_commits.json
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"

OLD = xla.XlaPin(commit=KNOWN_COMMIT, backend="jaxlib", backend_version="0.10.2",
                 wheel="jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl", sha256="1f" * 32)
NEW = xla.XlaPin(commit=OTHER_COMMIT, backend="jaxlib", backend_version="0.11.0",
                 wheel="jaxlib-0.11.0-cp312-cp312-manylinux_2_27_x86_64.whl", sha256="ab" * 32)

# Comments, odd spacing, shuffled keywords, a non-ASCII literal before a pinned one on the same line
# (offsets are bytes), and a second xla_ffi call that is not the pin.
TEMPLATE = """\
# WORKSPACE — café
load("//bazel:xla.bzl", "xla_ffi")

xla_ffi(name = "other", commit = "{other_commit}", backend = "jaxlib", backend_version = "0.4.30",
        wheel = "other.whl", sha256 = "{other_sha}")

xla_ffi(
    wheel="{wheel}",   # the wheel
    # a comment between the fields
    sha256  =  "{sha256}",
    name = "xla",
    release_data = "//données:jax.json", backend_version="{backend_version}" , commit =
        "{commit}",
    backend = "{backend}",
)
"""


def workspace_text(pin: xla.XlaPin) -> str:
    return TEMPLATE.format(other_commit="f" * 40, other_sha="e" * 64, **pin.to_json())


def files(version: str, *names: str, yanked: str | None = None, sha256: str | None = "cd" * 32) -> list[IndexFile]:
    return [IndexFile(filename=f"jaxlib-{version}-{name}.whl", url=f"https://example.invalid/{name}",
                      source="https://example.invalid/simple", sha256=sha256, yanked=yanked) for name in names]


CP312_LINUX = Tag("cp312", "cp312", "manylinux_2_27_x86_64")
WINDOWS = Tag("cp312", "cp312", "win_amd64")
LINUX_WHEELS = ("cp312-cp312-manylinux_2_27_x86_64", "cp311-cp311-manylinux_2_27_x86_64")
OTHER_WHEELS = ("cp310-cp310-macosx_10_14_x86_64", "cp312-cp312-macosx_11_0_arm64",
                "cp312-cp312-manylinux_2_27_aarch64")


def listing(*groups: list[IndexFile]) -> Listing:
    return Listing("jaxlib", [file for group in groups for file in group])


# read_pin


def test_read_pin_of_the_repository_workspace_is_well_formed() -> None:
    pin = xla.read_pin(REPO / "WORKSPACE")
    assert re.fullmatch(r"[0-9a-f]{40}", pin.commit)
    assert re.fullmatch(r"[0-9a-f]{64}", pin.sha256)
    assert pin.backend == "jaxlib"
    assert re.fullmatch(r"\d+(\.\d+)+", pin.backend_version)
    assert pin.wheel.startswith(f"jaxlib-{pin.backend_version}-") and pin.wheel.endswith(".whl")
    assert set(pin.to_json()) == set(xla.FIELDS)


def test_read_pin_reads_the_named_call_only(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text(workspace_text(OLD), encoding="utf-8")
    assert xla.read_pin(workspace) == OLD
    assert xla.read_pin(workspace, name="other").commit == "f" * 40


def test_read_pin_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(xla.PinError, match=r"WORKSPACE: file not found.*--workspace"):
        xla.read_pin(tmp_path / "WORKSPACE")


# rewrite


def test_rewrite_changes_only_the_five_literals() -> None:
    expected = workspace_text(NEW)
    assert xla.rewrite(workspace_text(OLD), NEW) == expected
    assert 'xla_ffi(name = "other", commit = "' + "f" * 40 in expected  # the other call stays


def test_rewrite_round_trip_gives_the_original_bytes() -> None:
    original = workspace_text(OLD)
    assert xla.rewrite(xla.rewrite(original, NEW), OLD).encode("utf-8") == original.encode("utf-8")


def test_rewrite_with_the_same_pin_is_the_identity() -> None:
    assert xla.rewrite(workspace_text(OLD), OLD) == workspace_text(OLD)


def test_rewrite_of_the_repository_workspace_keeps_everything_else() -> None:
    original = (REPO / "WORKSPACE").read_text(encoding="utf-8")
    current = xla.read_pin(REPO / "WORKSPACE")
    updated = xla.rewrite(original, NEW)
    for field in xla.FIELDS:
        updated = updated.replace(f'"{getattr(NEW, field)}"', f'"{getattr(current, field)}"')
    assert updated == original


@pytest.mark.parametrize(("field", "value"), [
    ("wheel", 'a"b\\c.whl'), ("wheel", "../../evil.whl"), ("wheel", "x.whl\nload()"), ("wheel", "x.tar.gz"),
    ("sha256", "../../" + "a" * 58), ("sha256", "A" * 64), ("sha256", "a" * 63), ("sha256", ""),
    ("commit", "f" * 39), ("commit", "G" * 40), ("backend", "jax lib"), ("backend_version", "banana"),
])
def test_a_pin_that_is_not_what_it_must_be_is_never_written(field: str, value: str) -> None:
    odd = dataclasses.replace(NEW, **{field: value})
    with pytest.raises(xla.PinError, match=field):
        xla.rewrite(workspace_text(OLD), odd)


def test_a_field_set_twice_is_refused_not_last_wins(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    text = workspace_text(OLD)
    workspace.write_text(text.replace("xla_ffi(\n", f'xla_ffi(\n    commit = "{"a" * 40}",\n', 1))
    with pytest.raises(xla.PinError, match="sets commit 2 times"):
        xla.read_pin(workspace)


@pytest.mark.parametrize(("text", "wanted"), [
    ('load("//bazel:xla.bzl", "xla_ffi")\n', r"no xla_ffi\(name = 'xla', \.\.\.\) call"),
    ('xla_ffi(name = "other", commit = "x")\n', r"no xla_ffi\(name = 'xla', \.\.\.\) call"),
    (workspace_text(OLD).replace(f'"{OLD.sha256}"', "SHA"), "needs sha256 as a string literal"),
    (workspace_text(OLD).replace(f'commit =\n        "{KNOWN_COMMIT}",', ""), "needs commit as a string literal"),
    (workspace_text(OLD).replace('"jaxlib",\n)', '"jaxlib",\n'), "cannot parse"),
])
def test_errors_name_the_file(tmp_path: Path, text: str, wanted: str) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text(text, encoding="utf-8")
    with pytest.raises(xla.PinError, match=wanted) as info:
        xla.read_pin(workspace)
    assert str(info.value).startswith(str(workspace))
    with pytest.raises(xla.PinError, match=wanted) as info:
        xla.rewrite(text, NEW, where="ws/WORKSPACE")
    assert str(info.value).startswith("ws/WORKSPACE")


def test_error_for_a_non_literal_names_the_line(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text(workspace_text(OLD).replace(f'"{OLD.sha256}"', "SHA"), encoding="utf-8")
    with pytest.raises(xla.PinError, match=rf"^{re.escape(str(workspace))}:7: "):
        xla.read_pin(workspace)


# write_pin


def test_write_pin_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text(workspace_text(OLD), encoding="utf-8")
    workspace.chmod(0o640)
    assert xla.write_pin(workspace, NEW) is True
    assert workspace.read_text(encoding="utf-8") == workspace_text(NEW)
    assert workspace.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["WORKSPACE"]


def test_write_pin_unchanged_returns_false_and_does_not_write(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text(workspace_text(OLD), encoding="utf-8")
    before = workspace.stat()
    assert xla.write_pin(workspace, OLD) is False
    assert workspace.stat().st_ino == before.st_ino and workspace.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["WORKSPACE"]


def test_write_pin_keeps_crlf_line_ends(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_bytes(workspace_text(OLD).replace("\n", "\r\n").encode("utf-8"))
    assert xla.write_pin(workspace, NEW) is True
    assert workspace.read_bytes() == workspace_text(NEW).replace("\n", "\r\n").encode("utf-8")


def test_write_pin_on_a_bad_file_leaves_it_and_no_temporary(tmp_path: Path) -> None:
    workspace = tmp_path / "WORKSPACE"
    shutil.copyfile(REPO / "WORKSPACE", workspace)
    workspace.write_text(workspace.read_text() + "xla_ffi(\n", encoding="utf-8")
    before = workspace.read_bytes()
    with pytest.raises(xla.PinError, match="cannot parse"):
        xla.write_pin(workspace, NEW)
    assert workspace.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["WORKSPACE"]


# choose_wheel / pin_for


def test_pin_for_picks_the_wheel_of_the_preferred_tag() -> None:
    index = listing(files("0.10.2", *OTHER_WHEELS, *LINUX_WHEELS), files("0.11.0", *LINUX_WHEELS))
    pin = xla.pin_for("jax", "jaxlib", "0.10.2", index, [WINDOWS, CP312_LINUX])
    assert pin == xla.XlaPin(commit=KNOWN_COMMIT, backend="jaxlib", backend_version="0.10.2",
                             wheel="jaxlib-0.10.2-cp312-cp312-manylinux_2_27_x86_64.whl", sha256="cd" * 32)
    assert pin.commit == releasedata.xla_commits("jax", "jaxlib")["0.10.2"]


def test_pin_for_falls_back_to_the_first_linux_x86_64_wheel_by_name() -> None:
    index = listing(files("0.10.2", *OTHER_WHEELS, *LINUX_WHEELS))
    pin = xla.pin_for("jax", "jaxlib", "0.10.2", index, [WINDOWS])
    assert pin.wheel == "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"


def test_pin_for_an_unknown_version_is_refused() -> None:
    index = listing(files("0.10.2", *LINUX_WHEELS), files("0.11.0", *LINUX_WHEELS))
    with pytest.raises(xla.PinError, match=r"jaxlib 0\.99\.0 is not on the index \(newest: 0\.10\.2, 0\.11\.0\)"):
        xla.pin_for("jax", "jaxlib", "0.99.0", index, [CP312_LINUX])


@pytest.mark.parametrize("reason", ["broken headers", ""])
def test_pin_for_an_all_yanked_version_says_yanked(reason: str) -> None:
    index = listing(files("0.10.2", *LINUX_WHEELS, yanked=reason), files("0.11.0", *LINUX_WHEELS))
    with pytest.raises(xla.PinError, match=r"jaxlib 0\.10\.2 has no usable wheel.*2 of its 2 files are yanked"):
        xla.pin_for("jax", "jaxlib", "0.10.2", index, [CP312_LINUX])


def test_pin_for_a_version_without_wheels_says_so() -> None:
    index = listing([IndexFile("jaxlib-0.10.2.tar.gz", "https://example.invalid/s", "https://example.invalid")])
    with pytest.raises(xla.PinError, match="it has no wheel"):
        xla.pin_for("jax", "jaxlib", "0.10.2", index, [CP312_LINUX])


def test_pin_for_a_wheel_without_sha256_is_refused() -> None:
    index = listing(files("0.10.2", *LINUX_WHEELS, sha256=None))
    with pytest.raises(xla.PinError, match="no sha256"):
        xla.pin_for("jax", "jaxlib", "0.10.2", index, [CP312_LINUX])


def test_pin_for_a_version_without_known_commit_needs_commit() -> None:
    assert "0.9.1" not in releasedata.xla_commits("jax", "jaxlib")
    index = listing(files("0.9.1", *LINUX_WHEELS))
    with pytest.raises(xla.PinError, match=r"no known XLA commit for jaxlib 0\.9\.1 \(known: .*0\.10\.2.*--commit"):
        xla.pin_for("jax", "jaxlib", "0.9.1", index, [CP312_LINUX])
    pin = xla.pin_for("jax", "jaxlib", "0.9.1", index, [CP312_LINUX], commit=OTHER_COMMIT)
    assert pin.commit == OTHER_COMMIT and pin.backend_version == "0.9.1"


def test_pin_for_an_explicit_commit_overrides_the_known_one() -> None:
    index = listing(files("0.10.2", *LINUX_WHEELS))
    assert xla.pin_for("jax", "jaxlib", "0.10.2", index, [CP312_LINUX], commit=OTHER_COMMIT).commit == OTHER_COMMIT


@pytest.mark.parametrize("commit", ["5a9e73c", KNOWN_COMMIT + "0", "g" * 40, KNOWN_COMMIT[:-1] + " "])
def test_pin_for_validates_the_commit(commit: str) -> None:
    index = listing(files("0.10.2", *LINUX_WHEELS))
    with pytest.raises(xla.PinError, match="not a full 40-hex-digit git commit"):
        xla.pin_for("jax", "jaxlib", "0.10.2", index, [CP312_LINUX], commit=commit)


def test_choose_wheel_never_returns_a_yanked_file() -> None:
    yanked = files("0.10.2", *LINUX_WHEELS, yanked="")
    fine = files("0.10.2", "cp313-cp313-manylinux_2_27_x86_64")
    chosen = xla.choose_wheel(yanked + fine, [CP312_LINUX])
    assert chosen is not None and chosen.filename == fine[0].filename
    assert xla.choose_wheel(yanked, [CP312_LINUX]) is None
    assert xla.choose_wheel(yanked, []) is None


def test_choose_wheel_prefers_the_earlier_tag_and_skips_non_linux_fallbacks() -> None:
    wheels = files("0.10.2", *OTHER_WHEELS, *LINUX_WHEELS)
    first = xla.choose_wheel(wheels, [Tag("cp312", "cp312", "macosx_11_0_arm64"), CP312_LINUX])
    assert first is not None and first.filename.endswith("macosx_11_0_arm64.whl")
    assert xla.choose_wheel(files("0.10.2", *OTHER_WHEELS), [WINDOWS]) is None
