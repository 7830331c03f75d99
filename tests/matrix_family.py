"""A small family released the way jax releases: a backend built per (Python, platform), a plugin that pins its
pjrt (one ``py3`` wheel per platform), a frontend wheel and sdist; the wheels written here, file by file, as
a CI build matrix would leave them (each job's files in a directory of its own)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

PYPROJECT = """
[tool.jaxrel]
name = "mfam"
[tool.jaxrel.frontend]
distribution = "mfam"
version-file = "mfam/version.py"
minimum-backend-variable = "_minimum_core_version"
[tool.jaxrel.backend]
distribution = "mfam-core"
[[tool.jaxrel.plugins]]
distribution = "mfam-gpu-plugin"
set = "gpu"
[[tool.jaxrel.plugins]]
distribution = "mfam-gpu-pjrt"
set = "gpu"
[[tool.jaxrel.plugins]]
distribution = "mfam-tpu-plugin"
pinned = false
released-separately = true
[[tool.jaxrel.plugins]]
distribution = "mfam-tpu-pjrt"
pinned = false
released-separately = true

[tool.jaxrel.release]
versioning = "next"
changelog-style = "unreleased"
changelog-heading = "mfam {version} ({date})"
tag = "mfam-v{version}"
[tool.jaxrel.release.components.mfam]
build = "external"
versions = ["mfam/version.py:_version"]
minimum-backend = "mfam/version.py:_minimum_core_version"
[tool.jaxrel.release.components.mfam-core]
build = "external"
shares-version-with = "mfam"
[tool.jaxrel.release.components.mfam-gpu-pjrt]
build = "external"
shares-version-with = "mfam"
python-tag = "py3"
platforms = ["manylinux", "linux"]
[tool.jaxrel.release.components.mfam-gpu-plugin]
build = "external"
shares-version-with = "mfam"
pins = ["mfam-gpu-pjrt"]
platforms = ["manylinux", "linux"]
[tool.jaxrel.release.components.mfam-tpu-plugin]
build = "external"
released-separately = true
pins = ["mfam-tpu-pjrt"]
[tool.jaxrel.release.components.mfam-tpu-pjrt]
build = "external"
"""
PYTHONS = ("cp312", "cp313")
PLATFORMS = ("manylinux_2_27_x86_64", "macosx_11_0_arm64")


def project(root: Path, version: str = "0.2.0", minimum: str = "0.2.0") -> Path:
    """The family's tree at ``version`` (what the tagged commit declares)."""
    (root / "mfam").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "mfam" / "version.py").write_text(f'_version = "{version}"\n_minimum_core_version = "{minimum}"\n')
    (root / "CHANGELOG.md").write_text("# Changes\n\n## Unreleased\n\n* things\n")
    return root


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def wheel(out: Path, name: str, version: str, tag: str, requires: tuple[str, ...] = (),
          files: dict[str, bytes] | None = None, tamper: bool = False, requires_python: str | None = None) -> Path:
    """A wheel ``name-version-TAG.whl`` with METADATA (``requires`` as Requires-Dist), WHEEL and RECORD."""
    stem = f"{name.replace('-', '_')}-{version}"
    package = name.replace("-", "_")
    members = {f"{package}/__init__.py": f"__version__ = {version!r}\n".encode(), **(files or {})}
    members[f"{stem}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {name}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
        + (f"Requires-Python: {requires_python}\n" if requires_python else "")
        + "Description-Content-Type: text/markdown\n\n# " + name + "\n").encode()
    members[f"{stem}.dist-info/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                          f"Tag: {tag}\n").encode()
    record = [_record_line(path, data) for path, data in sorted(members.items())]
    members[f"{stem}.dist-info/RECORD"] = ("\n".join([*record, f"{stem}.dist-info/RECORD,,"]) + "\n").encode()
    if tamper:
        members[f"{package}/__init__.py"] += b"# changed after the build\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in sorted(members.items()):
            archive.writestr(zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def frontend_files(out: Path, version: str, minimum: str) -> list[Path]:
    """The frontend's wheel and sdist, declaring its minimum backend and its extras as jax does."""
    requires = (f"mfam-core<={version},>={minimum}",
                f'mfam-core<={version},>={version}; extra == "gpu"',
                f'mfam-gpu-plugin<={version},>={version}; extra == "gpu"')
    version_py = f'_version = "{version}"\n_minimum_core_version = "{minimum}"\n'.encode()
    built = wheel(out, "mfam", version, "py3-none-any", requires, {"mfam/version.py": version_py})
    return [built, sdist(out, "mfam", version, requires, {"mfam/version.py": version_py})]


def sdist(out: Path, name: str, version: str, requires: tuple[str, ...] = (),
          files: dict[str, bytes] | None = None) -> Path:
    """An sdist ``name-version.tar.gz`` with PKG-INFO (``requires`` as Requires-Dist) and ``files``."""
    path = out / f"{name}-{version}.tar.gz"
    pkg_info = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {name}\n"
                + "".join(f"Requires-Dist: {r}\n" for r in requires)
                + f"Description-Content-Type: text/markdown\n\n# {name}\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for member, data in ((f"{name}-{version}/PKG-INFO", pkg_info),
                             *((f"{name}-{version}/{relative}", data) for relative, data in (files or {}).items())):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def build_matrix(artifacts: Path, version: str = "0.2.0", minimum: str = "0.2.0",
                 pythons: tuple[str, ...] = PYTHONS, platforms: tuple[str, ...] = PLATFORMS) -> Path:
    """What the CI jobs upload: one directory per (Python, platform) job for the backend and plugin, one per
    platform for the pjrt, one for the frontend. The GPU plugin and pjrt exist on Linux only."""
    for platform in platforms:
        linux = "linux" in platform
        if linux:
            wheel(artifacts / f"pjrt-{platform}", "mfam-gpu-pjrt", version, f"py3-none-{platform}")
        for python in pythons:
            job = artifacts / f"build-{python}-{platform}"
            wheel(job, "mfam-core", version, f"{python}-{python}-{platform}")
            if linux:
                wheel(job, "mfam-gpu-plugin", version, f"{python}-{python}-{platform}",
                      (f"mfam-gpu-pjrt=={version}",))
    frontend_files(artifacts / "frontend", version, minimum)
    return artifacts
