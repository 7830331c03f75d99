"""Write a reproducible wheel (PEP 427) from files on disk; used by `py_wheel_file` (wheel.bzl).

    python wheel_builder.py --out X.whl --name N --version V --tag PY-ABI-PLAT --summary S
        [--license L] [--requires-python R] [--requires REQ ...] [--description README.md]
        --file SRC=PATH_IN_WHEEL ...

Standard library only. Reproducible: members sorted (dist-info last, RECORD at the very end),
timestamps fixed to 1980-01-01, permissions normalised (0644, 0755 for shared objects),
deflate at a fixed level. A shared object built for another machine than the platform tag names
(an aarch64 Python's tags with the host's x86_64 compiler: `--config=manylinux_aarch64` forgotten)
is refused, not packed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
import zipfile

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine: EM_X86_64, EM_AARCH64


def elf_machine(data: bytes) -> str | None:
    """The machine a little-endian ELF object is for (``x86_64``, ``aarch64``, ``e_machine=N``), or None."""
    if len(data) < 20 or data[:4] != b"\x7fELF" or data[5] != 1:
        return None
    number = int.from_bytes(data[18:20], "little")
    return ELF_MACHINES.get(number, f"e_machine={number}")


def machine_problems(members: dict[str, bytes], tag: str) -> list[str]:
    """Each ELF member whose machine is not the one the tag's (linux) platform names."""
    platform = tag.rsplit("-", 1)[-1]
    wanted = next((m for m in ELF_MACHINES.values() if platform.endswith("_" + m)), None)
    if wanted is None:
        return []
    config = "manylinux" if wanted == "x86_64" else f"manylinux_{wanted}"  # .bazelrc
    return [f"{path} is built for {machine}, the tag {platform} says {wanted}: build with the toolchain for "
            f"{wanted} (--config={config}) or for a Python of this machine"
            for path, data in sorted(members.items()) if (machine := elf_machine(data)) not in (None, wanted)]


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def metadata(args: argparse.Namespace) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {args.name}", f"Version: {args.version}", f"Summary: {args.summary}"]
    if args.license:
        lines.append(f"License: {args.license}")
    if args.requires_python:
        lines.append(f"Requires-Python: {args.requires_python}")
    lines += [f"Requires-Dist: {requirement}" for requirement in args.requires]
    text = "\n".join(lines) + "\n"
    if args.description:
        with open(args.description, encoding="utf-8") as handle:
            text += "Description-Content-Type: text/markdown\n\n" + handle.read()
    return text


def wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: jaxrel bazel/wheel_builder.py\nRoot-Is-Purelib: false\nTag: {tag}\n"


def write_wheel(out: str, members: dict[str, bytes], dist_info: str) -> None:
    """Write ``members`` plus a RECORD, in a fixed order with fixed metadata."""
    ordered = sorted(p for p in members if not p.startswith(dist_info + "/"))
    ordered += sorted(p for p in members if p.startswith(dist_info + "/"))
    record_path = f"{dist_info}/RECORD"
    record = "".join(f"{path},{record_hash(members[path])},{len(members[path])}\n" for path in ordered)
    record += f"{record_path},,\n"
    with zipfile.ZipFile(out, "w") as archive:
        for path, data in [(p, members[p]) for p in ordered] + [(record_path, record.encode())]:
            info = zipfile.ZipInfo(path, date_time=FIXED_TIME)
            mode = 0o755 if path.endswith(".so") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            archive.writestr(info, data, compresslevel=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--license")
    parser.add_argument("--requires-python")
    parser.add_argument("--requires", action="append", default=[])
    parser.add_argument("--description")
    parser.add_argument("--file", action="append", default=[], metavar="SRC=PATH")
    args = parser.parse_args(argv)

    members: dict[str, bytes] = {}
    for spec in args.file:
        source, _, path = spec.partition("=")
        if not path or path in members:
            print(f"wheel_builder: bad or repeated --file {spec!r}", file=sys.stderr)
            return 1
        with open(source, "rb") as handle:
            members[path] = handle.read()
    problems = machine_problems(members, args.tag)
    if problems:
        print("wheel_builder: " + "; ".join(problems), file=sys.stderr)
        return 1
    dist_info = f"{args.name.replace('-', '_').replace('.', '_')}-{args.version}.dist-info"
    members[f"{dist_info}/METADATA"] = metadata(args).encode("utf-8")
    members[f"{dist_info}/WHEEL"] = wheel_file(args.tag).encode("utf-8")
    write_wheel(args.out, members, dist_info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
