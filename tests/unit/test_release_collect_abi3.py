"""Stable-ABI (``abi3``) wheels in ``jaxrel release collect``: a ``cp311-abi3`` wheel serves every newer CPython,
a platform missing from an abi3 grid is a hole, and moving from per-Python wheels to abi3 drops nothing but what
abi3 cannot serve (free-threaded builds). The last test collects this repository's own release grid as
release.yml's collect job asks for it: jaxrel-rmsnorm and its CUDA 12 and 13 wheels, abi3, for x86_64 and aarch64.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from matrix_family import sdist, wheel

import jaxrel
from jaxrel.distributions.filenames import grid_holes, serves
from jaxrel.release import collect
from jaxrel.release.project import open_project

REPO = Path(__file__).resolve().parents[2]
X86, ARM = "manylinux_2_27_x86_64", "manylinux_2_27_aarch64"


@pytest.mark.parametrize(("slot", "interpreter", "served"), [
    (("cp311", "abi3", X86), "cp311", True),
    (("cp311", "abi3", X86), "cp313", True),
    (("cp311", "abi3", X86), "cp314", True),
    (("cp311", "abi3", X86), "cp310", False),  # older than the stable ABI's floor
    (("cp311", "abi3", X86), "cp313t", False),  # not an interpreter tag: free-threaded builds have no abi3
    (("cp311", "cp311", X86), "cp312", False),  # a per-version wheel serves its own Python only
    (("cp312", "cp312", X86), "cp312", True),
    (("cp311", "abi3", X86), "pp311", False),
])
def test_a_stable_abi_wheel_serves_its_cpython_and_every_newer_one(slot: tuple[str, str, str], interpreter: str,
                                                                    served: bool) -> None:
    assert serves(slot, interpreter) is served


def test_a_platform_missing_from_a_stable_abi_grid_is_a_hole() -> None:
    slots = {("cp311", "abi3", X86), ("cp311", "abi3", ARM), ("cp312", "abi3", X86), ("cp312", "cp312", X86)}
    assert grid_holes(slots) == [("cp312", "abi3", ARM)]
    assert grid_holes({("cp311", "abi3", X86), ("cp311", "abi3", ARM)}) == []


def test_moving_to_the_stable_abi_drops_only_what_it_cannot_serve() -> None:
    before = {("cp311", "cp311", X86), ("cp312", "cp312", X86), ("cp313", "cp313", X86), ("cp313", "cp313t", X86)}
    now = {("cp311", "abi3", X86), ("cp311", "abi3", ARM)}
    assert collect.dropped(before, now, []) == ["cp313t"]
    assert collect.dropped(before, {("cp312", "abi3", X86)}, []) == ["cp311", "cp313t"]  # 3.11 is below its floor


def _tree(root: Path) -> Path:
    """This repository's release configuration, version file and changelog, outside any checkout."""
    for relative in ("pyproject.toml", "jaxrel/__init__.py", "CHANGELOG.md"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, root / relative)
    return root


def _grid(artifacts: Path) -> None:
    """What release.yml's build jobs upload: jaxrel's wheel and sdist, and one abi3 wheel per compiled component
    and machine."""
    version = jaxrel.__version__
    wheel(artifacts / "build-pure", "jaxrel", version, "py3-none-any")
    sdist(artifacts / "build-pure", "jaxrel", version)
    for component in ("jaxrel-rmsnorm", "jaxrel-rmsnorm-cuda12", "jaxrel-rmsnorm-cuda13"):
        for platform in (X86, ARM):
            wheel(artifacts / f"build-{component}-{platform}", component, version, f"cp311-abi3-{platform}",
                  requires_python=">=3.11")


def _collect(tmp_path: Path, artifacts: Path, out: str) -> collect.Collection:
    with open_project(_tree(tmp_path / f"tree-{out}")) as project:
        return collect.collect(project, [artifacts], tmp_path / out, pythons=["cp311", "cp312", "cp313", "cp314"],
                               platforms=[X86, ARM])


def test_the_release_grid_of_this_repository_is_collected_and_a_missing_aarch64_wheel_refused(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    _grid(artifacts)
    result = _collect(tmp_path, artifacts, "dist")
    names = sorted(a.file for a in result.manifest.artifacts)
    assert len(names) == 2 + 6 and sum("-cp311-abi3-" in name for name in names) == 6, names

    (artifacts / f"build-jaxrel-rmsnorm-cuda12-{ARM}"
     / f"jaxrel_rmsnorm_cuda12-{jaxrel.__version__}-cp311-abi3-{ARM}.whl").unlink()
    with pytest.raises(collect.CollectRefused) as refused:
        _collect(tmp_path, artifacts, "holed")
    assert str(refused.value).startswith(f"jaxrel-rmsnorm-cuda12 has no wheel for cp311 on {ARM}"), str(refused.value)
    assert "(and 3 more)" in str(refused.value), "cp312, cp313 and cp314 go with it"
    assert not (tmp_path / "holed").exists() or not list((tmp_path / "holed").iterdir())
