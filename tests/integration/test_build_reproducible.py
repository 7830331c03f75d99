"""Reproducible release builds: the wheels of both machines, built clean in a new directory and output base, are
byte-identical to those built in the kept workspaces (tests/bazel_workspace.py) that the other build tests check.

One clean output base serves both machines, as one release job's would. Zig's libc++ (what a link needs; about a
minute of CPU a machine to compile) comes from Zig's cache, which bazel/zig.bzl shares between output bases: it is
Zig's own compile of a pinned wheel's sources, and the same rules link it into both builds. What would make a
release machine's bytes differ from these, the absolute path of the toolchain or of the output base in a binary
(Zig's libc++ carries its source paths in debug information, hence ``--strip-all``), is checked on the binaries."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from bazel_workspace import fresh_workspace, kept_workspace
from test_build_aarch64 import aarch64_python  # noqa: F401 (a fixture: Debian's arm64 Python under qemu-user)
from test_build_manylinux import GRID, by_kind

from jaxrel.distributions.bazel import build

pytestmark = pytest.mark.integration


@pytest.mark.long("clean builds of both machines' wheels in a new output base are what it compares")
@pytest.mark.usefixtures("index_reachable")
def test_clean_builds_of_both_machines_are_byte_identical_to_the_kept_ones(
        launcher: list[str], aarch64_python: str, tmp_path: Path) -> None:  # noqa: F811
    """The x86_64 wheels with ``--config=manylinux``; the aarch64 ones, in the kept build with
    ``--config=manylinux_aarch64``, and here given only ``--config=manylinux`` (what the release components say):
    jaxrel adds ``--cpu=aarch64`` for the aarch64 Python, and the bytes are the same."""
    with kept_workspace("manylinux") as workspace:
        kept = by_kind(build(workspace, wheels=GRID, bazel_options=["--config=manylinux"],
                             output=tmp_path / "kept-x86_64").wheels)
    with kept_workspace("manylinux_aarch64") as workspace:
        kept |= {f"aarch64-{kind}": wheel for kind, wheel in by_kind(
            build(workspace, wheels=GRID, python=aarch64_python, bazel_options=["--config=manylinux_aarch64"],
                  output=tmp_path / "kept-aarch64").wheels).items()}
    with fresh_workspace(launcher, tmp_path / "clean") as again:
        clean = by_kind(build(again, wheels=GRID, bazel_options=["--config=manylinux"],
                              output=tmp_path / "clean-x86_64").wheels)
        clean |= {f"aarch64-{kind}": wheel for kind, wheel in by_kind(
            build(again, wheels=GRID, python=aarch64_python, bazel_options=["--config=manylinux"],
                  output=tmp_path / "clean-aarch64").wheels).items()}
    assert sorted(clean) == sorted(kept) == ["aarch64-cpu", "aarch64-cuda12", "aarch64-cuda13",
                                             "cpu", "cuda12", "cuda13"]
    for kind, wheel in clean.items():
        assert wheel.name == kept[kind].name and wheel.name.endswith(
            "_aarch64.whl" if kind.startswith("aarch64") else "_x86_64.whl"), (kind, wheel.name)
        assert wheel.read_bytes() == kept[kind].read_bytes(), f"{kind}: {wheel.name} differs from the kept build's"
        binaries = _shared_objects(wheel)
        assert binaries, f"{kind}: {wheel.name} holds no shared object"
        for name, data in binaries.items():
            leaked = [path for path in BUILD_PATHS + [str(tmp_path)] if path.encode() in data]
            assert not leaked, f"{kind}: {name} names the build machine's paths {leaked}"


# Where a build's absolute paths would show: Zig's libc++ sources, Zig's cache (where links run Zig from), a Bazel
# output base and its execution root.
BUILD_PATHS = ["/libcxx/", "zig-cache", "/_bazel_", "/execroot/"]


def _shared_objects(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.endswith(".so")}
