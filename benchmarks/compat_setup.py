"""Per-cell environment setup time of the compat matrix: uv vs venv + pip, on warm caches, side by side.

Run (from any directory): ``python benchmarks/compat_setup.py [--requirements REQ ...] [--python PATH]
[--repeat N] [--json]``, or ``nox -s bench -- compat_setup``.

A cell environment is what the compat runner builds for one matrix cell: a fresh virtual environment
holding a real frontend, a real backend and pytest (default: ``jax==0.10.2 jaxlib==0.10.2 pytest`` on
this interpreter). Both ways go through :func:`jaxrel.distributions.envs.create`, the code the runner uses:
``uv venv`` + ``uv pip install`` with pip's index configuration, or ``python -m venv`` + ``pip install``.

One warm-up build each way (fills uv's cache and pip's http cache; reported apart), then N pairs
interleaved in the same run (uv, pip, uv, pip, ...), so the machine's noise hits both alike. Each build
goes into a fresh directory under ``build/bench/compat-setup/``, deleted once measured. Prints min /
median / max per tool, the median of the per-pair ratios pip/uv (target: uv at least 5x faster), and the
disk usage of one environment each way with the link mode uv used (read from ``st_nlink``), and the
``.pyc`` files each left (pip compiles bytecode at install; uv leaves it to the first import).
Exit status 0 whether or not the target is met; 1 with a one-line message if an environment cannot be built.
"""

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import time
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.distributions import envs  # noqa: E402
from jaxrel.distributions.pipconfig import pip_index_config  # noqa: E402

REQUIREMENTS = ["jax==0.10.2", "jaxlib==0.10.2", "pytest"]
TARGET = 5.0  # pip / uv, medians of paired ratios
TOOLS = {"uv": "uv venv + uv pip install", "pip": "python -m venv + pip install"}
WORK = ROOT / "build" / "bench" / "compat-setup"
VENV_SEED = {"pip", "setuptools"}  # what `python -m venv` itself puts into the pip environment
MIB = 1024 * 1024

PROBE = """import importlib.metadata as m, json, sys
found = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in m.distributions()}
print(json.dumps({"python": sys.version.split()[0], "packages": found}))"""


def fail(message: str) -> SystemExit:
    """A one-line exit message (exit status 1)."""
    return SystemExit("compat_setup: " + " ".join(message.split()))


def disk_usage(root: Path) -> dict[str, Any]:
    """Regular files under ``root`` (each inode once): bytes, ``.pyc`` files, and the part shared with inodes outside.

    ``largest_shared`` is the biggest such file, relative to its site-packages, to look up in uv's cache.
    """
    inodes: dict[int, tuple[str, os.stat_result]] = {}
    links_inside: Counter[int] = Counter()
    outside_symlinks = 0
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                target = os.path.realpath(path)
                outside_symlinks += "/lib/" in path and not target.startswith(str(root) + os.sep)
            elif stat.S_ISREG(info.st_mode):
                inodes[info.st_ino] = (path, info)
                links_inside[info.st_ino] += 1
    shared = [(path, info) for ino, (path, info) in inodes.items() if info.st_nlink > links_inside[ino]]
    largest = max(shared, key=lambda item: item[1].st_size, default=None)
    return {"files": len(inodes), "pyc_files": sum(path.endswith(".pyc") for path, _ in inodes.values()),
            "apparent_bytes": sum(info.st_size for _, info in inodes.values()),
            "allocated_bytes": sum(info.st_blocks * 512 for _, info in inodes.values()),
            "shared_files": len(shared), "shared_bytes": sum(info.st_blocks * 512 for _, info in shared),
            "symlinks_out_of_env": outside_symlinks,
            "largest_shared": largest and largest[0].split("/site-packages/", 1)[-1]}


@cache
def uv_cache_dir() -> Path | None:
    """uv's cache directory as uv reports it (``UV_CACHE_DIR`` and the rest taken into account)."""
    uv = envs.find_uv()
    if uv is None:
        return None
    done = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, env=envs.uv_environment())
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def linked_from_cache(root: Path, relative: str | None) -> str | None:
    """The file in uv's unpacked-wheel cache with the same inode as ``relative`` in ``root``'s site-packages."""
    cache_dir = uv_cache_dir()
    if not relative or cache_dir is None:
        return None
    installed = next(root.glob(f"lib/python*/site-packages/{relative}"), None)
    if installed is None:
        return None
    mine = installed.stat()
    for candidate in cache_dir.glob(f"archive-v*/*/{relative}"):
        theirs = candidate.stat()
        if (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino):
            return str(candidate)
    return None


def link_mode(usage: dict[str, Any]) -> str:
    """How uv put the files into the environment, judged from inode link counts and symlinks."""
    if usage["shared_files"] and usage["shared_bytes"] >= usage["allocated_bytes"] / 2:
        return "hardlink"
    if usage["symlinks_out_of_env"] > usage["files"]:
        return "symlink"
    return "copy (or clone): installed files share no inode with uv's cache"


def build(tool: str, label: str, python: str, requirements: list[str]) -> dict[str, Any]:
    """Time one :func:`jaxrel.distributions.envs.create` in a fresh directory; probe and size it (untimed),
    then delete it."""
    root = WORK / f"{tool}-{label}"
    shutil.rmtree(root, ignore_errors=True)
    print(f"  {label:<8} {tool:<3} ...", end="", file=sys.stderr, flush=True)
    try:
        start = time.perf_counter()
        try:
            env = envs.create(root, python=python, requirements=requirements, use_uv=tool == "uv")
        except (envs.EnvError, OSError) as error:
            print(" failed", file=sys.stderr)
            raise fail(f"cannot build the {tool} environment at {root}: {error}") from None
        seconds = time.perf_counter() - start
        print(f" {seconds:6.2f} s", file=sys.stderr, flush=True)
        done = env.run(str(env.python), "-I", "-c", PROBE)  # -I: keeps the current directory off sys.path
        if done.returncode != 0:
            raise fail(f"the {tool} environment at {root} does not run: {done.stderr.strip()[-300:]}")
        disk = disk_usage(root)
        if tool == "uv":
            disk["cache_file"] = linked_from_cache(root, disk["largest_shared"])
        return {"seconds": seconds, **json.loads(done.stdout), "disk": disk}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(python: str, requirements: list[str], repeat: int) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """One warm-up build each way, then ``repeat`` interleaved pairs (uv first in each pair)."""
    warm_up = {tool: build(tool, "warm-up", python, requirements) for tool in TOOLS}
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in TOOLS}
    for index in range(1, repeat + 1):
        for tool in TOOLS:
            runs[tool].append(build(tool, f"{index}/{repeat}", python, requirements))
    return warm_up, runs


def summarise(warm_up: dict[str, Any], runs: dict[str, list[dict]], requirements: list[str]) -> dict[str, Any]:
    """Statistics, ratios, target, disk usage (first timed build each way) and what was installed."""
    seconds = {tool: [run["seconds"] for run in runs[tool]] for tool in TOOLS}
    stats = {tool: {"min": min(values), "median": statistics.median(values), "max": max(values)}
             for tool, values in seconds.items()}
    paired = [pip / uv for uv, pip in zip(seconds["uv"], seconds["pip"], strict=True)]
    ratio = statistics.median(paired)
    first = {tool: runs[tool][0] for tool in TOOLS}
    uv_packages, pip_packages = first["uv"]["packages"], first["pip"]["packages"]
    return {
        "requirements": requirements, "python_version": first["uv"]["python"], "repeat": len(paired),
        "order": "warm-up uv, warm-up pip, then (uv, pip) x repeat",
        "warm_up_seconds": {tool: warm_up[tool]["seconds"] for tool in TOOLS},
        "seconds": seconds, "stats": stats,
        "ratios": {"paired_pip_over_uv": paired, "median_paired": ratio,
                   "of_medians": stats["pip"]["median"] / stats["uv"]["median"]},
        "target": {"pip_over_uv_at_least": TARGET, "met": ratio >= TARGET},
        "disk": {tool: first[tool]["disk"] for tool in TOOLS},
        "uv_link_mode": link_mode(first["uv"]["disk"]), "uv_link_mode_setting": os.environ.get("UV_LINK_MODE"),
        "installed": {"uv": uv_packages, "pip": pip_packages,
                      "same": uv_packages == {k: v for k, v in pip_packages.items() if k not in VENV_SEED}},
    }


def report(summary: dict[str, Any], python: str) -> None:
    """The readable table."""
    print(f"compat cell environment, warm caches: {' '.join(summary['requirements'])}"
          f"  (Python {summary['python_version']}: {python})")
    print(f"{summary['repeat']} interleaved pair(s) (uv, pip, uv, pip, ...), after one warm-up build each way;"
          " each build in a fresh directory")
    print(f"\n{'tool':<38}{'min':>9}{'median':>9}{'max':>9}  unit")
    for tool, how in TOOLS.items():
        row = summary["stats"][tool]
        print(f"{f'{tool} ({how})':<38}{row['min']:>9.2f}{row['median']:>9.2f}{row['max']:>9.2f}  s")
    warm = summary["warm_up_seconds"]
    print(f"warm-up builds (not in the statistics): uv {warm['uv']:.2f} s, pip {warm['pip']:.2f} s")
    ratios = summary["ratios"]
    pairs = ", ".join(f"{value:.1f}x" for value in ratios["paired_pip_over_uv"])
    print(f"\npip / uv: median of the paired ratios {ratios['median_paired']:.1f}x ({pairs});"
          f" ratio of the medians {ratios['of_medians']:.1f}x")
    print(f"target uv at least {TARGET:g}x faster: {'met' if summary['target']['met'] else 'NOT met'}")
    print(f"\n{'disk usage of one environment':<38}{'files':>9}{'size':>11}{'on disk':>11}{'new on disk':>13}")
    for tool in TOOLS:
        disk = summary["disk"][tool]
        new = disk["allocated_bytes"] - disk["shared_bytes"]
        print(f"{tool:<38}{disk['files']:>9}{disk['apparent_bytes'] / MIB:>7.1f} MiB"
              f"{disk['allocated_bytes'] / MIB:>7.1f} MiB{new / MIB:>9.1f} MiB")
    uv_disk, pip_disk = summary["disk"]["uv"], summary["disk"]["pip"]
    where = f"same inode as {uv_disk['cache_file']}" if uv_disk["cache_file"] else "not found in uv's cache"
    print(f"uv link mode: {summary['uv_link_mode']} (UV_LINK_MODE {summary['uv_link_mode_setting'] or 'unset'}):"
          f" {uv_disk['shared_files']} of {uv_disk['files']} files ({uv_disk['shared_bytes'] / MIB:.1f} MiB) have"
          f" st_nlink > 1;\n  'new on disk' leaves them out. Largest: {uv_disk['largest_shared']}, {where}")
    print(f"bytecode: pip compiled {pip_disk['pyc_files']} .pyc files at install, uv {uv_disk['pyc_files']}"
          " (uv leaves compiling to the first import, which is then slower)")
    installed = summary["installed"]
    names = ", ".join(f"{name} {version}" for name, version in sorted(installed["uv"].items()))
    seed = ", ".join(f"{name} {installed['pip'][name]}" for name in sorted(VENV_SEED & set(installed["pip"])))
    if installed["same"]:
        print(f"installed in both: {names}; the pip environment also has {seed or 'nothing else'} (from venv)")
    else:
        print(f"WARNING: the environments differ, the comparison is unfair.\n  uv:  {names}\n"
              f"  pip: {', '.join(f'{n} {v}' for n, v in sorted(installed['pip'].items()))}")


def main(argv: list[str] | None = None) -> int:
    """Measure, then print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", nargs="+", default=REQUIREMENTS, metavar="REQ",
                        help=f"what each cell environment holds (default: {' '.join(REQUIREMENTS)})")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environments (default: this one)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved (uv, pip) pairs after the warm-up")
    parser.add_argument("--json", action="store_true", help="print a JSON object, not a table")
    args = parser.parse_args(argv)
    python = shutil.which(args.python)
    if python is None:
        raise fail(f"no Python interpreter at {args.python}")
    if envs.find_uv() is None:
        raise fail("uv is not installed: pip install uv")
    config = pip_index_config()  # asked once up front, as a runner would; untimed
    print(f"pip's index configuration, given to uv: {'a custom' if config.index_url else 'the default'} index,"
          f" {len(config.extra_index_urls)} extra index URL(s), {len(config.find_links)} find-links location(s)"
          f"{', no-index' if config.no_index else ''}", file=sys.stderr)
    print(f"building in {WORK}:", file=sys.stderr)
    try:
        warm_up, runs = measure(python, list(args.requirements), max(1, args.repeat))
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    summary = summarise(warm_up, runs, list(args.requirements))
    if args.json:
        print(json.dumps({"python": python, **summary}, indent=2))
    else:
        report(summary, python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
