"""Fetch a CUDA toolkit for `cuda_toolkit` (bazel/cuda.bzl) from NVIDIA's wheels. Standard library only.

    python cuda_fetch.py --dest DIR --major 13 --version 13.0 WHEEL SHA256 [WHEEL SHA256 ...]

Downloads each pinned WHEEL (e.g. `nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64...whl`) with
`python -m pip download`, so pip's own index configuration applies; refuses it unless its sha256 equals
SHA256; extracts its `nvidia/cuMAJOR/**` members into DIR, executables kept executable. Prints one JSON
object: the CUDA version nvcc reports (`{"cuda_version": "13.0"}`). Errors are one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

from xla_ffi_fetch import FetchError, download, sha256_of, wheel_tags, write_member


def distribution_of(wheel: str) -> str:
    """The distribution a wheel file name names (``nvidia_cuda_nvcc`` → ``nvidia-cuda-nvcc``)."""
    return wheel.split("-", 1)[0].replace("_", "-")


def extract(wheel: str, prefix: str, dest: str) -> int:
    """Extract the members under ``prefix`` (``nvidia/cu13/``); how many were written."""
    written = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if not name.startswith(prefix) or name.endswith("/") or ".." in name.split("/"):
                continue
            write_member(archive, info, os.path.join(dest, *name.split("/")))
            written += 1
    if not written:
        raise FetchError(f"{os.path.basename(wheel)} has nothing under {prefix}. Fix: pin NVIDIA wheels of "
                         f"CUDA {prefix.split('/')[1][2:]} (the cuda_toolkit's major).")
    return written


def nvcc_version(dest: str, prefix: str) -> str:
    """``MAJOR.MINOR`` from ``nvcc --version`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    nvcc = os.path.join(dest, *prefix.split("/"), "bin", "nvcc")
    if not os.path.isfile(nvcc):
        raise FetchError("the pinned wheels hold no bin/nvcc. Fix: pin nvidia-cuda-nvcc with the toolkit.")
    result = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"release (\d+)\.(\d+)", result.stdout)
    if result.returncode != 0 or found is None:
        raise FetchError(f"{nvcc} --version failed ({result.stderr.strip()[-200:] or result.stdout.strip()[-200:]})")
    return f"{found.group(1)}.{found.group(2)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True)
    parser.add_argument("--major", required=True, type=int)
    parser.add_argument("--version", required=True, help="MAJOR.MINOR nvcc must report")
    parser.add_argument("pins", nargs="+", metavar="WHEEL SHA256")
    args = parser.parse_args(argv)
    prefix = f"nvidia/cu{args.major}/"
    try:
        if len(args.pins) % 2:
            raise FetchError("pins come in pairs: WHEEL SHA256. Fix: give each wheel its sha256 in WORKSPACE.")
        versions = {}
        for wheel, expected in zip(args.pins[::2], args.pins[1::2], strict=True):
            version = wheel_tags(wheel)[0]
            with tempfile.TemporaryDirectory() as scratch:
                path = download(distribution_of(wheel), version, wheel, scratch)
                actual = sha256_of(path)
                if actual != expected:
                    raise FetchError(f"{wheel} has sha256 {actual}, but the pin says {expected}. Fix: correct "
                                     "the pin's sha256 in WORKSPACE.")
                extract(path, prefix, args.dest)
            versions[distribution_of(wheel)] = version
        cuda_version = nvcc_version(args.dest, prefix)
        if cuda_version != args.version or int(cuda_version.split(".")[0]) != args.major:
            raise FetchError(f"nvcc is CUDA {cuda_version}, but the pin says {args.version} (major {args.major}). "
                             "Fix: make the pin's version what its nvidia-cuda-nvcc wheel is.")
    except (FetchError, OSError, zipfile.BadZipFile, subprocess.SubprocessError) as error:
        print(f"cuda_toolkit: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"cuda_version": cuda_version, "wheels": versions}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
