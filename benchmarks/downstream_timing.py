"""How long ``jaxrel downstream`` makes people wait, measured.

1. Cells to find a true minimum over N admitted releases: the search (``jaxrel.downstream.minimum.search``) against
   a library whose true minimum is each of the N in turn, beside ``--sweep`` (every release, both backends).
2. One cell's environment from a warm uv cache (``--env``): a library release, pytest, the frontend and the backend
   pinned, resolved as of an era, as a cell builds it; three times, after one to warm the cache.
3. A report's own times (``--report PATH``): a ``crater.json`` (per library: environment, baseline and candidate
   tests) or a ``minimum.json`` (per cell).

    python benchmarks/downstream_timing.py [--releases 30] [--env optax==0.2.5 jax==0.6.2 jaxlib==0.6.2]
                                           [--report build/crater/crater.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

from jaxrel.distributions import envs
from jaxrel.downstream.cellrun import CellResult, CellSpec
from jaxrel.downstream.minimum import Candidate, MinimumResult, search


def cells_to_find(releases: int) -> tuple[list[int], int]:
    """Cells the search runs for each possible true minimum, and what a sweep runs."""
    found = [Candidate(Version(f"0.4.{i}"), [Version(f"0.4.{max(0, i - 1)}"), Version(f"0.4.{i}")],
                       {"library": "", "frontend": ""}) for i in range(releases)]
    counts = []
    for minimum in range(releases):
        calls = []

        def run(spec: CellSpec, role: str, minimum: int = minimum, calls: list[str] = calls) -> CellResult:
            calls.append(spec.frontend)
            passed = Version(spec.frontend) >= Version(f"0.4.{minimum}")
            return CellResult(spec.frontend, spec.backend, "passed" if passed else "failed")

        result = MinimumResult("lib", "1", "3.12", "jax", None, "sdist")
        search(result, [Candidate(c.version, list(c.backends), dict(c.uploaded)) for c in found], run)
        assert result.true_minimum == f"0.4.{minimum}", (minimum, result.true_minimum)
        counts.append(len(calls))
    return counts, 2 * releases - 1


def environment_seconds(requirements: list[str], as_of: str, repeats: int = 3) -> list[float]:
    """Seconds to build one cell's environment with uv, after one build that warms the cache."""
    times = []
    with tempfile.TemporaryDirectory() as scratch:
        for attempt in range(repeats + 1):
            start = time.perf_counter()
            envs.create(Path(scratch) / "env", python=sys.executable, requirements=[*requirements, "pytest"],
                        exclude_newer=as_of)
            if attempt:
                times.append(time.perf_counter() - start)
    return times


def report_times(path: Path) -> None:
    data = json.loads(path.read_text())
    if data.get("kind") == "downstream-crater":
        print(f"crater {data['frontend']} vs {data['baseline']}: {len(data['libraries'])} libraries, "
              f"{data['seconds'] / 60:.1f} min in all")
        for library in data["libraries"]:
            base, cand = library.get("baseline") or {}, library.get("candidate") or {}
            print(f"  {library['name']:<12} {library['outcome']:<10} environment "
                  f"{(base.get('seconds') or {}).get('environment', 0):6.1f} s  baseline tests "
                  f"{(base.get('seconds') or {}).get('tests', 0):6.1f} s  candidate tests "
                  f"{(cand.get('seconds') or {}).get('tests', 0):6.1f} s")
    else:
        print(f"minimum {data['library']} {data['version']}: {data['cells_searched']} cells searched, "
              f"{data['seconds']:.0f} s")
        for cell in data["cells"]:
            print(f"  {cell['jax']:<8} {cell['jaxlib']:<8} {cell['role']:<7} {cell['outcome']:<16} environment "
                  f"{cell['seconds'].get('environment', 0):5.1f} s  tests {cell['seconds'].get('tests', 0):6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=30)
    parser.add_argument("--env", nargs="+", metavar="REQ", help="requirements of one cell, e.g. optax==0.2.5 "
                                                                 "jax==0.6.2 jaxlib==0.6.2")
    parser.add_argument("--as-of", default="2025-06-18T00:00:00Z", help="the cell's era (uv --exclude-newer)")
    parser.add_argument("--report", action="append", default=[], type=Path)
    args = parser.parse_args()
    counts, sweep = cells_to_find(args.releases)
    print(f"cells to find the minimum over {args.releases} releases: at most {max(counts)}, mean "
          f"{statistics.mean(counts):.1f} (search) vs {sweep} (--sweep, both backends)")
    if args.env:
        times = environment_seconds(args.env, args.as_of)
        print(f"one cell's environment from a warm uv cache ({' '.join(args.env)}): "
              + ", ".join(f"{t:.2f} s" for t in times) + f" (median {statistics.median(times):.2f} s)")
    for path in args.report:
        report_times(path)


if __name__ == "__main__":
    main()
