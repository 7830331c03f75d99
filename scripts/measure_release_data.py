"""Regenerate ``jaxrel/data/jax.json`` from the real wheels on the package index.

For every jaxlib release: ``jaxlib_extension_version`` (``_version = N`` in
``jaxlib/xla_client.py``) and the XLA FFI API version (``c_api.h``); for every jax
release: ``_minimum_jaxlib_version``, the plain ``Requires-Dist`` on jaxlib and
``Requires-Python``. Each file is downloaded with pip (pip's own index
configuration), read with :mod:`zipfile`/:mod:`tarfile`, hashed and deleted; jaxlib
wheels are 80-105 MB each, so the full run moves several GB. Releases already in the
data file are kept unless ``--refresh``.

    python scripts/measure_release_data.py [--refresh] [VERSION ...]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel._util.files import sha256_of  # noqa: E402
from jaxrel.gating import assigned_int  # noqa: E402
from jaxrel.guard import assigned_string, ffi_api_in  # noqa: E402

DATA = ROOT / "jaxrel" / "data" / "jax.json"
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64"]


def index_versions(package: str, python: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--python-version", python],
                          capture_output=True, text=True)
    found = re.search(r"Available versions: (.*)", done.stdout)
    return [v.strip() for v in found[1].split(",")] if found else []


def download(requirement: str, folder: Path, binary: bool) -> Path | None:
    for python in ("3.11", "3.12"):
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--python-version", python, "-d", str(folder)]
        command += ["--only-binary=:all:", *(f"--platform={p}" for p in PLATFORMS)] if binary else []
        if subprocess.run([*command, requirement], capture_output=True).returncode == 0:
            return next(folder.iterdir())
    if not binary:  # a few old jax releases have only an sdist
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-d", str(folder)]
        if subprocess.run([*command, requirement], capture_output=True).returncode == 0:
            return next(folder.iterdir())
    return None


def read_members(path: Path, wanted: list[str]) -> dict[str, str]:
    """The text of archive members whose path ends with one of ``wanted``."""
    out: dict[str, str] = {}
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                for suffix in wanted:
                    if name.endswith(suffix) and suffix not in out:
                        out[suffix] = archive.read(name).decode("utf-8", "replace")
    else:
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                for suffix in wanted:
                    if member.name.endswith(suffix) and suffix not in out and (f := archive.extractfile(member)):
                        out[suffix] = f.read().decode("utf-8", "replace")
    return out


def measure_jaxlib(path: Path) -> dict[str, object]:
    files = read_members(path, ["jaxlib/xla_client.py", "xla/ffi/api/c_api.h"])
    return {"jaxlib_extension_version": assigned_int(files.get("jaxlib/xla_client.py", ""), "_version"),
            "xla_ffi_api": ffi_api_in(files.get("xla/ffi/api/c_api.h", "")),
            "wheel": path.name, "sha256": sha256_of(path)}


def measure_jax(path: Path) -> dict[str, object]:
    files = read_members(path, ["jax/version.py", ".dist-info/METADATA", "PKG-INFO"])
    minimum = assigned_string(files.get("jax/version.py", ""), ("_minimum_jaxlib_version",))
    headers = (files.get(".dist-info/METADATA") or files.get("PKG-INFO", "")).split("\n\n")[0]
    requires = [line.split(":", 1)[1].strip() for line in headers.splitlines()
                if line.startswith("Requires-Dist:") and re.match(r"Requires-Dist:\s*jaxlib\b", line)
                and "extra" not in line]
    python = re.search(r"^Requires-Python:\s*(.+)$", headers, re.M)
    key = "wheel" if path.suffix == ".whl" else "sdist"
    return {"minimum_jaxlib": minimum, "requires_jaxlib": requires, "runtime_pins": runtime_pins(headers),
            "requires_python": python[1].strip() if python else None, key: path.name, "sha256": sha256_of(path)}


def runtime_pins(headers: str) -> dict[str, dict[str, str]]:
    """The runtimes with their own numbering that an extra pins: {"libtpu": {"extra": "tpu", "pin": "==0.0.50.*"}}."""
    pins: dict[str, dict[str, str]] = {}
    for line in headers.splitlines():
        found = re.match(r"Requires-Dist:\s*(libtpu(?:-nightly)?)\s*\(?([^;)]*)\)?\s*;.*extra\s*==\s*['\"]([^'\"]+)",
                         line)
        if found and found[2].strip():
            pins[found[1]] = {"extra": found[3], "pin": found[2].strip()}
    return pins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="measure again releases already recorded")
    parser.add_argument("--package", choices=("jax", "jaxlib"), help="measure only this package")
    parser.add_argument("versions", nargs="*", help="only these versions (default: every release from 0.4.13)")
    args = parser.parse_args()
    data = json.loads(DATA.read_text())
    for package, binary, measure in (("jaxlib", True, measure_jaxlib), ("jax", False, measure_jax)):
        if args.package not in (None, package):
            continue
        listed = sorted(set(index_versions(package, "3.11")) | set(index_versions(package, "3.12")),
                        key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()))
        for version in args.versions or listed:
            if version in data[package] and not args.refresh:
                continue
            with tempfile.TemporaryDirectory() as folder:
                path = download(f"{package}=={version}", Path(folder), binary)
                if path is None:
                    print(f"{package} {version}: no file for linux x86_64 / Python 3.11-3.12", file=sys.stderr)
                    continue
                data[package][version] = measure(path)
            print(f"{package} {version}: {data[package][version]}", flush=True)
            DATA.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
