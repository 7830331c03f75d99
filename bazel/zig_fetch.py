"""Fetch the `ziglang` wheel for `zig_toolchain` (bazel/zig.bzl). Standard library only.

    python zig_fetch.py --dest DIR --version 0.17.0 WHEEL SHA256

Downloads exactly WHEEL (`ziglang==VERSION`) with `python -m pip download`, so pip's own index configuration
applies; refuses it unless its sha256 equals SHA256; extracts its `ziglang/**` members into DIR (the `zig`
executable kept executable) and checks that `zig version` says VERSION. Prints `{"zig": "<path>"}`. Errors are
one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile

from xla_ffi_fetch import FetchError, download, sha256_of, write_member


def extract(wheel: str, dest: str) -> str:
    """The wheel's ``ziglang/**`` into ``dest``; the path of ``zig``."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if not name.startswith("ziglang/") or name.endswith("/") or ".." in name.split("/"):
                continue
            write_member(archive, info, os.path.join(dest, *name.split("/")))
    zig = os.path.join(dest, "ziglang", "zig")
    if not os.path.isfile(zig):
        raise FetchError(f"{os.path.basename(wheel)} holds no ziglang/zig. Fix: pin a ziglang wheel.")
    os.chmod(zig, 0o755)  # the compiler itself, whatever mode the wheel recorded
    return zig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("wheel")
    parser.add_argument("sha256")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            path = download("ziglang", args.version, args.wheel, scratch)
            found = sha256_of(path)
            if found != args.sha256:
                raise FetchError(f"{args.wheel} has sha256 {found}, the pin says {args.sha256}. Fix: check the pin "
                                 "in bazel/zig_pins.bzl (a file changed on the index is refused).")
            zig = extract(path, args.dest)
        reported = subprocess.run([zig, "version"], capture_output=True, text=True, timeout=60).stdout.strip()
        if reported != args.version:
            raise FetchError(f"the pinned wheel's zig says {reported or 'nothing'}, not {args.version}. Fix: pin the "
                             "wheel of that version.")
    except FetchError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps({"zig": zig}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
