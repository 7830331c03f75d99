"""One cell, two ways: compat's runner (a process per probe, then pytest) against the atlas's one interpreter.

Run: ``python benchmarks/atlas_cell.py [--frontend 0.12.0.1] [--repeat 3]`` or ``nox -s bench -- atlas_cell``.
For one jax release and its newest admitted jaxlib (both from the index, warm caches assumed) it runs,
alternately and ``--repeat`` times each, in ``build/bench/atlas-cell/``:

- ``runner``: :func:`jaxrel.compat.runner.run_cell` as ``jaxrel compat`` does it (environment; guard,
  doctor and import probes, each its own interpreter; the compat suite in a pytest subprocess);
- ``atlas``: :func:`jaxrel.compat.atlas.run_cell` (the same environment; guard, ``import jax`` and the
  suite in one interpreter).

It prints each part's median seconds side by side, the ratio of the cell totals, and the machine's
load average (the machine is shared: both ways are measured in the same minutes, alternately).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.compat import atlas, runner  # noqa: E402
from jaxrel.dist.index import Index  # noqa: E402
from jaxrel.family import resolve_family  # noqa: E402

WORK = ROOT / "build" / "bench" / "atlas-cell"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", default="0.12.0.1", help="the jax release (default 0.12.0.1)")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    family = resolve_family(None)
    index = Index.from_pip(None, [], progress=lambda m: print(m, file=sys.stderr))
    found = atlas.plan(family, index, [args.frontend], WORK, python=args.python, backends="newest")
    (item,) = found.cells
    wheel = runner.jaxrel_wheel(WORK)
    print(f"cell: {item.label}, Python {args.python}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    old: dict[str, list[float]] = {}
    new: dict[str, list[float]] = {}
    for round_ in range(1, args.repeat + 1):
        start = time.perf_counter()
        result = runner.run_cell(item.cell, family, item.front, wheel, item.options)
        old.setdefault("cell", []).append(time.perf_counter() - start)
        for name, seconds in result.timings.items():
            old.setdefault(name, []).append(seconds)
        measured = atlas.run_cell(item, family, wheel)
        for name, seconds in measured.timings.items():
            new.setdefault(name, []).append(seconds)
        print(f"round {round_}: runner {old['cell'][-1]:.1f} s ({result.tests.passed} passed, "
              f"{'ok' if result.ok else 'not ok'}); atlas {measured.timings['cell']:.1f} s "
              f"({sum(o['outcome'] == 'passed' for o in measured.outcomes.values())} passed"
              f"{', ' + measured.problem if measured.problem else ''})", flush=True)
    median = {name: statistics.median(values) for name, values in old.items()}
    median_new = {name: statistics.median(values) for name, values in new.items()}
    print(f"\nmedian seconds over {args.repeat} rounds (load average {os.getloadavg()[0]:.1f} at the end)")
    print(f"{'part':<36}{'runner':>10}{'atlas':>10}")
    print(f"{'environment':<36}{median.get('environment', 0):>10.2f}{median_new.get('environment', 0):>10.2f}")
    print(f"{'probes (guard, doctor, import) / guard':<36}{median.get('probes', 0):>10.2f}"
          f"{median_new.get('guard', 0):>10.2f}")
    print(f"{'import jax (atlas: once, for all)':<36}{'-':>10}{median_new.get('import jax', 0):>10.2f}")
    print(f"{'compat suite':<36}{median.get('compat suite', 0):>10.2f}{median_new.get('suite', 0):>10.2f}")
    print(f"{'interpreter start (atlas)':<36}{'-':>10}{median_new.get('interpreter start', 0):>10.2f}")
    print(f"{'cell':<36}{median['cell']:>10.2f}{median_new['cell']:>10.2f}")
    print(f"ratio runner / atlas: {median['cell'] / median_new['cell']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
