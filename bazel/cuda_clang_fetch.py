"""Fetch a CUDA toolkit for clang (`cuda_clang_toolkit`, bazel/cuda_clang.bzl) from pinned wheels. Standard
library only.

    python cuda_clang_fetch.py --dest DIR WHEEL SHA256 FROM TO [WHEEL SHA256 FROM TO ...]

Downloads each WHEEL with `python -m pip download`, so pip's own index configuration applies; refuses it unless
its sha256 equals SHA256; copies its members under the prefix FROM to TO in DIR (FROM ending in `/`: a
directory, else one file), executables kept executable. Clang's `--cuda-path` wants one tree, `bin/ptxas`,
`bin/fatbinary`, `nvvm/libdevice/`, `include/`; NVIDIA's CUDA 12 wheels spread it over several distributions
(and ship no nvcc and no fatbinary), so the pins say where each piece comes from. Errors are one line on
stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zipfile

from xla_ffi_fetch import FetchError, download, sha256_of, write_member


def _distribution_and_version(wheel: str) -> tuple[str, str]:
    name, version = wheel.split("-")[:2]
    return name.replace("_", "-"), version


def copy(wheel: str, source: str, target: str, dest: str) -> int:
    """Members of ``wheel`` under ``source`` into ``dest/target``; how many were written."""
    written = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/") or ".." in name.split("/"):
                continue
            if source.endswith("/"):
                if not name.startswith(source):
                    continue
                relative = os.path.join(target, *name[len(source):].split("/"))
            elif name == source:
                relative = target
            else:
                continue
            if os.path.basename(relative) == "__init__.py":
                continue  # the wheels' namespace-package markers are not part of a toolkit
            write_member(archive, info, os.path.join(dest, relative))
            written += 1
    if not written:
        raise FetchError(f"{os.path.basename(wheel)} has nothing at {source}. Fix: check the pin in "
                         "bazel/cuda_pins.bzl.")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True)
    parser.add_argument("pins", nargs="+", metavar="WHEEL SHA256 FROM TO")
    args = parser.parse_args(argv)
    try:
        if len(args.pins) % 4:
            raise FetchError("pins come in fours: WHEEL SHA256 FROM TO. Fix: the cuda_clang_toolkit rule's pins.")
        fetched: dict[str, str] = {}
        with tempfile.TemporaryDirectory() as scratch:
            for at in range(0, len(args.pins), 4):
                wheel, sha256, source, target = args.pins[at:at + 4]
                if wheel not in fetched:
                    name, version = _distribution_and_version(wheel)
                    path = download(name, version, wheel, scratch)
                    found = sha256_of(path)
                    if found != sha256:
                        raise FetchError(f"{wheel} has sha256 {found}, the pin says {sha256}. Fix: check the pin in "
                                         "bazel/cuda_pins.bzl (a file changed on the index is refused).")
                    fetched[wheel] = path
                copy(fetched[wheel], source, target, args.dest)
    except FetchError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
