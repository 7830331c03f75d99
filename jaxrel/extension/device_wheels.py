"""The wheels the device check is given: checked as a build makes them, then one CUDA companion at a time.

The directory holds the extension's CPU wheel and its CUDA wheels (``jaxrel build --wheels all``), and may hold
the CUDA runtime wheel of a major the machine's jax lacks (``nvidia-cuda-runtime-cu12`` beside a CUDA 12 wheel
on a ``jax[cuda13]`` machine). Everything is installed ``--no-deps --no-index`` from that directory alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxrel._util import procs
from jaxrel.errors import BadInput

__all__ = ["CPU_WHEEL", "CUDA_WHEELS", "check_wheels", "install_cuda_wheel", "not_for_here", "plugin_major",
           "uninstall_cuda_wheels"]

CPU_WHEEL = "jaxrel_rmsnorm"
CUDA_WHEELS = {13: "jaxrel_rmsnorm_cuda13", 12: "jaxrel_rmsnorm_cuda12"}  # CUDA major → companion, newest first
# the CUDA runtime each companion links, installed from the wheels' directory when the machine lacks it
RUNTIME_WHEELS = {13: "nvidia_cuda_runtime", 12: "nvidia_cuda_runtime_cu12"}
PIP_SECONDS = 180


def plugin_major() -> int | None:
    """The CUDA major of the installed jax CUDA plugin (newest first), or None without one."""
    from importlib import metadata

    for major in CUDA_WHEELS:
        try:
            metadata.version(f"jax-cuda{major}-plugin")
            return major
        except metadata.PackageNotFoundError:
            continue
    return None


def _listed(directory: Path) -> list[tuple[str, Path, bool]]:
    """The extension's wheels in ``directory``, CPU first: (distribution, path, whether this interpreter installs
    it by its tags); :class:`~jaxrel.distributions.filenames.FilenameError` for a name that is not a wheel's."""
    from packaging.tags import sys_tags

    from jaxrel.distributions.filenames import wheel_tags

    here = set(sys_tags())
    return [(name, path, bool(wheel_tags(path.name) & here)) for name in (CPU_WHEEL, *CUDA_WHEELS.values())
            for path in sorted(directory.glob(f"{name}-*.whl"))]


def check_wheels(directory: Path) -> list[Path]:
    """The extension's wheels in ``directory`` for this interpreter, each what a build makes: installable here by
    its tags, every member matching RECORD, and the CUDA wheel's module an ELF object carrying GPU code.
    :class:`BadInput` (one line: the file and the fix) for anything else, before anything is installed."""
    import zipfile

    from jaxrel.distributions.archives import WheelError, verify_record
    from jaxrel.distributions.filenames import FilenameError
    from jaxrel.extension.fatbin import fatbin_section

    if not directory.is_dir():
        raise BadInput(f"{directory}: not a directory; pass the directory `jaxrel build --wheels …` wrote")
    try:
        listed = _listed(directory)
    except FilenameError as error:
        raise BadInput(f"{error}; remove it, or rebuild with `jaxrel build`") from None
    build = f"build it with `jaxrel build --wheels all --python {sys.version_info.major}.{sys.version_info.minor}`"
    chosen = []
    for name in (CPU_WHEEL, *CUDA_WHEELS.values()):
        found = [path for listed_name, path, fits in listed if listed_name == name and fits]
        if name == CPU_WHEEL and not found:
            raise BadInput(f"{directory}: no {name} wheel for this Python ({sys.version.split()[0]}); {build}")
        chosen += found[-1:]
    if len(chosen) == 1:
        raise BadInput(f"{directory}: no CUDA wheel ({' or '.join(CUDA_WHEELS.values())}) for this Python; {build}")
    for path in chosen:
        try:
            verify_record(path)
            with zipfile.ZipFile(path) as archive:
                modules = [n for n in archive.namelist() if n.endswith(".so")]
                heads = {n: archive.open(n).read(4) for n in modules}
                cuda = not path.name.startswith(CPU_WHEEL + "-")
                if not modules or any(head != b"\x7fELF" for head in heads.values()):
                    raise BadInput(f"{path.name}: its native module is not an ELF shared object (a stand-in, not a "
                                   "build); rebuild it with `jaxrel build`")
                if cuda and not any(fatbin_section(archive.read(n), n) for n in modules):
                    raise BadInput(f"{path.name}: its CUDA module carries no GPU code (.nv_fatbin); rebuild it with "
                                   "`jaxrel build`")
        except (WheelError, zipfile.BadZipFile, OSError) as error:
            why = str(error).removeprefix(f"{path}: ").split("; ")[0]  # the archive's own fix is replaced by ours
            raise BadInput(f"{path.name}: not a wheel a build makes ({why}); rebuild it with `jaxrel build`") from None
    return chosen


def not_for_here(directory: Path) -> list[str]:
    """The extension's wheels in ``directory`` this interpreter cannot install (another Python or machine, such as
    the aarch64 ones of the release grid): named in the report, not run. Call after :func:`check_wheels`."""
    return [path.name for _, path, fits in _listed(directory) if not fits]


def _pip(*args: str) -> dict[str, Any]:
    """pip on this interpreter: its exit code and error output (124 past its deadline)."""
    try:
        done = procs.run([sys.executable, "-m", "pip", *args], timeout=PIP_SECONDS)
    except subprocess.TimeoutExpired:
        return {"code": 124, "stderr": f"pip {args[0]} timed out after {PIP_SECONDS} s"}
    return {"code": done.returncode, "stderr": done.stderr}


def uninstall_cuda_wheels() -> dict[str, Any]:
    """Every CUDA companion uninstalled (pip skips those that are not installed)."""
    return _pip("uninstall", "--yes", *(name.replace("_", "-") for name in CUDA_WHEELS.values()))


def install_cuda_wheel(wheel: Path, major: int) -> dict[str, Any]:
    """``wheel`` as the only CUDA companion installed, with its CUDA runtime wheel from the same directory when
    the environment lacks that runtime (a major other than the jax plugin's); ``runtime_missing`` names the
    runtime when it is neither installed nor in the directory."""
    from importlib import metadata

    removed = uninstall_cuda_wheels()
    extra: list[str] = []
    missing = False
    try:
        metadata.version(RUNTIME_WHEELS[major].replace("_", "-"))
    except metadata.PackageNotFoundError:
        extra = [str(path) for path in sorted(wheel.parent.glob(f"{RUNTIME_WHEELS[major]}-*.whl"))[-1:]]
        missing = not extra
    added = _pip("install", "--quiet", "--no-index", "--no-deps", "--force-reinstall", str(wheel), *extra)
    return {"code": removed["code"] or added["code"], "stderr": added["stderr"][-2000:],
            "runtime_wheel": Path(extra[0]).name if extra else None,
            "runtime_missing": RUNTIME_WHEELS[major].replace("_", "-") if missing else None}
