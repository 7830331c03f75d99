"""Where a compat run spends its time, per cell: environment, frontend build, probes, tests, triage.

Run (from any directory): ``python benchmarks/compat_cells.py [--json] [-- JAXREL_COMPAT_OPTIONS ...]``,
or ``nox -s bench -- compat_cells [-- ...]``. Without options it measures what ``nox -s compat``
runs by default (the newest jax release's sdist as the HEAD stand-in); with, e.g.
``-- --frontend-src ~/jax --python 3.12``, a checkout and its own tests.

It runs ``jaxrel compat`` once into ``build/bench/compat-cells/``, kept from run to run as ``nox -s
compat`` keeps ``build/compat/`` (the cells' bytecode, the sdist's wheel; compat clears the earlier
reports itself), so a second run measures warm, then reads ``report.json``: each cell's ``timings`` (environment:
creating it and installing its wheels and test requirements; probes: guard, doctor, import; compat
suite; own tests; triage: rerunning failed tests), the frontend's build (once per run, shared by
every cell) and the wall time of the whole run. Exit status: that of ``jaxrel compat``.

``--side-by-side`` runs it twice in one go, one cell at a time (``--cells-at-once 1``) and then two
(``--cells-at-once 2``), and prints both wall times and their ratio (measured in the same minutes,
since this machine is shared and noisy).
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "bench" / "compat-cells"
PARTS = ("environment", "probes", "compat suite", "own tests", "triage")


def measure(options: list[str]) -> tuple[int, float, dict[str, Any]]:
    """Run ``jaxrel compat`` (progress on stderr, as it goes); its exit status, wall time and report."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jaxrel", "compat", "--workdir", str(WORK), *options], cwd=ROOT,
                          stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    report = WORK / "report.json"
    if not report.exists():
        raise SystemExit(f"compat_cells: jaxrel compat exited {done.returncode} without a report")
    return done.returncode, seconds, json.loads(report.read_text())


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per cell: its id, each part's seconds (absent: 0) and the cell's total."""
    return [{"cell": c["cell"]["id"], **{part: c["timings"].get(part, 0.0) for part in PARTS},
             "total": c["seconds"], "tests": (c["tests"]["passed"] + (c["frontend_tests"] or {}).get("passed", 0))}
            for c in report["cells"]]


def show(status: int, seconds: float, report: dict[str, Any]) -> None:
    table = rows(report)
    build = report.get("frontend_build_seconds") or 0.0
    print(f"jaxrel compat: {report['matrix']['frontend']['name']} {report['matrix']['frontend']['version']} "
          f"({report['matrix']['frontend']['source']}), exit {status}, {seconds:.1f} s wall")
    print(f"frontend build: {build:.1f} s (once per run, shared by {len(table)} cells)")
    width = max(len(row["cell"]) for row in table)
    print(f"\n{'cell':<{width}}" + "".join(f"{part:>14}" for part in (*PARTS, "total")) + f"{'tests passed':>14}")
    for row in table:
        print(f"{row['cell']:<{width}}" + "".join(f"{row[part]:>12.1f} s" for part in (*PARTS, "total"))
              + f"{row['tests']:>14}")
    sums = {part: sum(row[part] for row in table) for part in (*PARTS, "total")}
    print(f"{'all cells':<{width}}" + "".join(f"{sums[part]:>12.1f} s" for part in (*PARTS, "total")))


def side_by_side(options: list[str]) -> int:
    """Wall time with one cell at a time, then two; the ratio of the two."""
    walls: dict[int, float] = {}
    worst = 0
    for width in (1, 2):
        status, walls[width], report = measure([*options, "--cells-at-once", str(width)])
        worst = max(worst, status)
        print(f"--cells-at-once {width}: {len(report['cells'])} cells, exit {status}, {walls[width]:.1f} s wall")
    print(f"one at a time / two at a time: {walls[1] / walls[2]:.2f}x")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print a JSON object, not a table")
    parser.add_argument("--side-by-side", action="store_true",
                        help="measure one cell at a time against two at a time, in one run")
    parser.add_argument("options", nargs="*", help="options for jaxrel compat (after --)")
    args = parser.parse_args(argv)
    if args.side_by_side:
        return side_by_side(args.options)
    status, seconds, report = measure(args.options)
    if args.json:
        print(json.dumps({"status": status, "wall_seconds": seconds,
                          "frontend_build_seconds": report.get("frontend_build_seconds"), "cells": rows(report)},
                         indent=2))
    else:
        show(status, seconds, report)
    return status


if __name__ == "__main__":
    sys.exit(main())
