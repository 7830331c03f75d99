"""Bazel build of the C++ XLA-FFI extension wheel: cold build, no-op rebuild, one-line C++ edit, wheel size.

Run (from any directory): ``python benchmarks/build.py [--rounds R] [--cold-runs N] [--json]``,
or ``nox -s bench -- build [ARGS]``. Needs Bazel and bazelisk: ``scripts/install_build_tools.sh``.

Everything happens in a throwaway copy of the workspace in a temporary directory (the files
``git ls-files --cached --others --exclude-standard`` lists, with ``build/tools`` symlinked to
this checkout's, so the same bazelisk runs), so this checkout's Bazel state is not touched. A
fresh workspace path is a fresh Bazel output base, so the first build there is truly cold:
server start, fetch of ``@xla`` (the pinned jaxlib wheel, through pip and its cache),
compile, link and wheel. Each build is :func:`jaxrel.distributions.bazel.build` on the copy, as ``jaxrel
build`` runs it (``bazel build //...``, the wheels among its outputs copied to ``dist/``),
timed by ``perf_counter`` around the call (wall) and by the driver around ``bazel build``
alone (bazel):

1. cold: the first build in a fresh copy (``--cold-runs N``: N copies, one cold build each);
2. no-op: the same build again, nothing changed, server warm;
3. edit: a one-line edit appended to ``rmsnorm/cc/rms_norm.cc`` (``#ident "... edit R"``: a
   string in the object file's ``.comment`` section, so the object, the ``.so`` and the wheel
   all change while the code does not), then the build again.

Steps 2 and 3 alternate ``--rounds R`` times (default 3) in the first copy; median and min
are reported. The wheel's size and the size of the ``.so`` in it come from the cold build.
Each copy ends with ``bazel clean --expunge`` (no server or output base is left) and is
deleted. Prints a table (or, with ``--json``, one JSON object); no assertions on timing.
Exit status 2 if neither bazelisk nor bazel is installed, 1 if a build fails.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.distributions.bazel import BuildError, BuildResult, build, find_launcher, host_python  # noqa: E402

EDITED = Path("rmsnorm/cc/rms_norm.cc")
TOOLS = Path("build/tools")
KIB = 1024
ROWS = [  # key, label
    ("cold", "cold build (fresh output base)"),
    ("noop", "no-op rebuild"),
    ("edit", "rebuild after a one-line C++ edit"),
]


def fail(message: str, status: int = 1) -> SystemExit:
    """A one-line message on stderr and the exit status."""
    print("build benchmark: " + " ".join(message.split()), file=sys.stderr)
    return SystemExit(status)


def workspace_files(root: Path) -> list[str]:
    """The checkout's files as git sees them: tracked, plus untracked but not ignored."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise fail(f"git ls-files failed in {root}: {done.stderr.strip()}")
    return sorted({name for name in done.stdout.split("\0") if name})


def make_copy(root: Path, files: list[str]) -> Path:
    """A fresh temporary directory holding ``files`` (paths kept) and ``build/tools`` symlinked to the checkout's."""
    copy = Path(tempfile.mkdtemp(prefix="jaxrel-bench-build-")).resolve()
    for name in files:
        source = root / name
        if source.is_file():  # --cached also lists files deleted from the working tree
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    if (root / TOOLS).is_dir():
        (copy / TOOLS).parent.mkdir(parents=True, exist_ok=True)
        (copy / TOOLS).symlink_to(root / TOOLS, target_is_directory=True)
    return copy


def expunge(copy: Path) -> None:
    """``bazel clean --expunge`` in ``copy`` (stops its server, deletes its output base), then delete ``copy``."""
    try:
        done = subprocess.run([*find_launcher(copy), "clean", "--expunge"], cwd=copy,
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["no output"]
            print(f"warning: bazel clean --expunge failed in {copy}: {lines[-1]}", file=sys.stderr)
    except (BuildError, OSError, subprocess.TimeoutExpired) as error:
        print(f"warning: bazel clean --expunge failed in {copy}: {error}", file=sys.stderr)
    finally:
        shutil.rmtree(copy, ignore_errors=True)  # unlinks the build/tools symlink, does not follow it


@contextmanager
def workspace_copy(root: Path, files: list[str]) -> Iterator[Path]:
    """A fresh copy of the workspace for the ``with`` block; expunged and deleted afterwards."""
    copy = make_copy(root, files)
    try:
        yield copy
    finally:
        expunge(copy)


def wheel_contents(wheel: Path) -> dict[str, Any]:
    """The wheel's size and the size (and sha256) of the shared objects in it."""
    with zipfile.ZipFile(wheel) as archive:
        objects = [info for info in archive.infolist() if info.filename.endswith(".so")]
        digest = hashlib.sha256()
        for info in objects:
            digest.update(archive.read(info))
    return {"name": wheel.name, "bytes": wheel.stat().st_size,
            "so": [{"name": info.filename, "bytes": info.file_size, "compressed_bytes": info.compress_size}
                   for info in objects],
            "so_sha256": digest.hexdigest()}


def timed_build(copy: Path, label: str) -> dict[str, Any]:
    """One :func:`jaxrel.distributions.bazel.build` of every wheel in ``copy``: wall and bazel seconds, the wheels."""
    print(f"{label} ...", end="", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        result: BuildResult = build(copy, output=copy / "dist", progress=None)
    except BuildError as error:
        print(" failed", file=sys.stderr)
        raise fail(f"{label} failed: {error}") from None
    wall = time.perf_counter() - start
    print(f" {wall:7.2f} s (bazel build {result.seconds:.2f} s)", file=sys.stderr, flush=True)
    wheels = [wheel_contents(wheel) for wheel in result.wheels]
    return {"wall": wall, "bazel": result.seconds, "wheels": wheels, "command": result.command,
            "so_sha256": [wheel["so_sha256"] for wheel in wheels]}


def edit_line(round_: int) -> str:
    """The one line appended for edit ``round_``: new object bytes (``.comment``), no new code."""
    return f'#ident "jaxrel benchmarks/build.py: one-line edit {round_}"\n'


def append_edit(copy: Path, round_: int) -> None:
    """Append :func:`edit_line` to the copy's ``rms_norm.cc``."""
    path = copy / EDITED
    text = path.read_text(encoding="utf-8")
    path.write_text(text + ("" if text.endswith("\n") else "\n") + edit_line(round_), encoding="utf-8")


def debian_package(binary: str) -> str | None:
    """``"<package> <version>"`` of the Debian package that installed ``binary`` (Debian's Bazel has no build label)."""
    if not shutil.which("dpkg-query"):
        return None
    owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(binary)], capture_output=True, text=True)
    package = owner.stdout.partition(":")[0].strip()
    if owner.returncode != 0 or not package:
        return None
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return f"{package} {version.stdout.strip()}" if version.returncode == 0 else package


def bazel_version(copy: Path) -> dict[str, str]:
    """The launcher, bazelisk's version and Bazel's (``<launcher> version``; else the Debian package of the
    binary ``.bazeliskrc`` names)."""
    launcher = find_launcher(copy)
    found = {"launcher": os.path.realpath(launcher[0])}
    done = subprocess.run([*launcher, "version"], cwd=copy, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        key, _, value = line.partition(":")
        if key in ("Bazelisk version", "Build label") and value.strip():
            found["bazelisk" if key.startswith("Bazelisk") else "bazel"] = value.strip()
    if "bazel" not in found:
        rc = copy / ".bazeliskrc"
        settings = dict(line.partition("=")[::2] for line in rc.read_text().splitlines()) if rc.is_file() else {}
        binary = settings.get("USE_BAZEL_VERSION", "").strip() or launcher[0]
        package = debian_package(binary) if binary.startswith("/") else None
        found["bazel"] = f"{binary} ({package})" if package else binary
    return found


def rounds_in(copy: Path, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` times: a no-op rebuild, then a rebuild after a one-line edit."""
    runs: dict[str, list[dict[str, Any]]] = {"noop": [], "edit": []}
    for round_ in range(1, rounds + 1):
        runs["noop"].append(timed_build(copy, f"no-op rebuild {round_}/{rounds}"))
        append_edit(copy, round_)
        runs["edit"].append(timed_build(copy, f"one-line C++ edit {round_}/{rounds}"))
    return runs


def measure(root: Path, rounds: int, cold_runs: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Cold builds, each in a fresh copy; the no-op/edit rounds in the first copy; Bazel's version."""
    files = workspace_files(root)
    runs: dict[str, list[dict[str, Any]]] = {"cold": [], "noop": [], "edit": []}
    version: dict[str, str] = {}
    for index in range(1, cold_runs + 1):
        with workspace_copy(root, files) as copy:
            print(f"workspace copy {index}/{cold_runs}: {copy} ({len(files)} files)", file=sys.stderr)
            runs["cold"].append(timed_build(copy, f"cold build {index}/{cold_runs}"))
            if index == 1:
                for kind, found in rounds_in(copy, rounds).items():
                    runs[kind].extend(found)
                version = bazel_version(copy)
    return runs, version


def stats(values: list[float]) -> dict[str, Any]:
    """Median, min and every value."""
    return {"median": statistics.median(values), "min": min(values), "all": values}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Seconds per kind (wall and bazel build), the wheel (from the first cold build), edit/no-op effects."""
    summary: dict[str, Any] = {}
    for kind, _ in ROWS:
        summary[f"{kind}_s"] = stats([run["wall"] for run in runs[kind]])
        summary[f"{kind}_bazel_s"] = stats([run["bazel"] for run in runs[kind]])
    wheels = runs["cold"][0]["wheels"]
    summary.update(wheels=wheels, wheel_bytes=sum(wheel["bytes"] for wheel in wheels),
                   so_bytes=sum(so["bytes"] for wheel in wheels for so in wheel["so"]))
    summary["wheel_kib"] = summary["wheel_bytes"] / KIB
    summary["so_kib"] = summary["so_bytes"] / KIB
    # Each build's .so digest against the one before: a no-op must keep it, an edit must change it.
    sequence = [runs["cold"][0]] + [run for pair in zip(runs["noop"], runs["edit"], strict=True) for run in pair]
    changed = [after["so_sha256"] != before["so_sha256"] for before, after in pairwise(sequence)]
    summary["noop_changed_so"], summary["edit_changed_so"] = changed[0::2], changed[1::2]
    summary["command"] = runs["cold"][0]["command"]
    return summary


def report(summary: dict[str, Any], version: dict[str, str], python: str, rounds: int) -> None:
    """The readable table."""
    targets = " ".join(part for part in summary["command"] if part.startswith(("//", "@")))
    print(f"Bazel build of the XLA-FFI extension wheel ({targets}) in a throwaway copy of the workspace")
    print(f"bazel: {version.get('bazel', '?')}, launched by {version['launcher']}"
          f" (bazelisk {version.get('bazelisk', '-')})")
    print(f"Python {platform.python_version()} ({python}); {os.cpu_count()} CPUs")
    print(f"\n{'measurement':<36}{'runs':>5}{'median':>10}{'min':>10}{'bazel build':>13}  unit")
    for kind, label in ROWS:
        wall, bazel = summary[f"{kind}_s"], summary[f"{kind}_bazel_s"]
        print(f"{label:<36}{len(wall['all']):>5}{wall['median']:>10.2f}{wall['min']:>10.2f}"
              f"{bazel['median']:>13.2f}  s")
    print("(median, min: wall time of jaxrel.distributions.bazel.build: bazel build + copying the wheel;"
          " bazel build: median of bazel build alone)")
    for kind, what in (("noop", "no-op"), ("edit", "edit")):
        times = ", ".join(f"{value:.2f}" for value in summary[f"{kind}_s"]["all"])
        print(f"{what} rounds (wall, s): {times}; .so changed by the build: "
              f"{sum(summary[f'{kind}_changed_so'])}/{rounds}")
    print(f"edit line appended each round (R = round): {edit_line(0).strip().replace('edit 0', 'edit R')}")
    print(f"\n{'wheel':<74}{'bytes':>10}{'KiB':>8}")
    for wheel in summary["wheels"]:
        print(f"{wheel['name']:<74}{wheel['bytes']:>10}{wheel['bytes'] / KIB:>8.1f}")
        for so in wheel["so"]:
            print(f"{'  ' + so['name'] + ' (unpacked)':<74}{so['bytes']:>10}{so['bytes'] / KIB:>8.1f}")
            print(f"{'  ' + so['name'] + ' (compressed)':<74}{so['compressed_bytes']:>10}"
                  f"{so['compressed_bytes'] / KIB:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    """Measure, then print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="no-op and edit rebuilds, alternating (default 3)")
    parser.add_argument("--cold-runs", type=int, default=1, help="cold builds, each in a fresh copy (default 1)")
    parser.add_argument("--json", action="store_true", help="print a JSON object, not a table")
    args = parser.parse_args(argv)
    try:
        find_launcher(ROOT)
    except BuildError:
        raise fail("neither bazelisk nor bazel is installed; run scripts/install_build_tools.sh", status=2) from None
    rounds, cold_runs = max(1, args.rounds), max(1, args.cold_runs)
    runs, version = measure(ROOT, rounds, cold_runs)
    summary = summarise(runs)
    python = host_python()
    if args.json:
        print(json.dumps({"rounds": rounds, "cold_runs": cold_runs, "bazel": version,
                          "python": {"executable": python, "version": platform.python_version()},
                          "cpus": os.cpu_count(), "edit_line": edit_line(0).strip().replace("edit 0", "edit R"),
                          **summary}, indent=2))
    else:
        report(summary, version, python, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
