"""One cell, four ways: a process per probe (compat's first runner), compat's runner without and with the
bytecode cache, and an atlas cell.

Run: ``python benchmarks/atlas_cell.py [--frontend 0.12.0.1] [--repeat 3]`` or ``nox -s bench -- atlas_cell``.
For one jax release and its newest admitted jaxlib (both from the index, warm caches assumed) it runs,
in turn and ``--repeat`` times each, in ``build/bench/atlas-cell/``:

- ``per process``: what compat's runner did before it used :mod:`jaxrel.cells.driver`: the
  environment, then the guard, doctor and import probes, each its own interpreter, then the compat suite
  in a pytest subprocess (the same pieces, which ``jaxrel bisect`` still uses); bytecode as the caller's
  environment says (``PYTHONDONTWRITEBYTECODE``: every interpreter compiles jax from source);
- ``compat, no cache``: :func:`jaxrel.compat.cell.run_cell` with ``keep_bytecode=False``, as ``jaxrel
  compat`` ran on 2026-11-25 before the bytecode cache (the driver: guard, ``import jax`` and the suite
  in one interpreter, plus the doctor's file reads, junit XML and the result's checks);
- ``atlas``: :func:`jaxrel.atlas.measure.run_cell` (the same environment and driver, bytecode kept);
- ``compat``: :func:`jaxrel.compat.cell.run_cell` as ``jaxrel compat`` does it now (bytecode kept in
  ``WORKDIR/pycache`` from run to run).

It prints each part's median seconds side by side, the ratios of the cell totals, and the machine's
load average (the machine is shared: the ways are measured in the same minutes, in turn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.atlas import measure  # noqa: E402
from jaxrel.atlas.measure import AtlasCell  # noqa: E402
from jaxrel.cells import probes, suites  # noqa: E402
from jaxrel.cells.environment import environment, jaxrel_wheel  # noqa: E402
from jaxrel.compat.cell import run_cell  # noqa: E402
from jaxrel.compat.options import Options  # noqa: E402
from jaxrel.distributions import installed  # noqa: E402
from jaxrel.distributions.index import Index  # noqa: E402
from jaxrel.family import Family, resolve_family  # noqa: E402

WORK = ROOT / "build" / "bench" / "atlas-cell"


def per_process(item: AtlasCell, family: Family, wheel: Path) -> tuple[dict[str, float], int]:
    """The old runner's steps: environment; guard, doctor and import probes; the suite in a pytest subprocess."""
    start = time.perf_counter()
    env, _ = environment(item.cell, family, item.front, wheel, replace(item.settings, bytecode=None))
    built = time.perf_counter()
    arguments = family.guard_arguments(item.front.spec.version, item.front.spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    guard = probes.last_json(env.run(str(env.python), "-c", probes.GUARD_PROBE, json.dumps(arguments)).stdout)
    assert guard is not None and guard["accepted"], guard
    installed.read_environment(family, python=str(env.python))
    imported, error, _ = probes.import_frontend(env, family)
    assert imported is not None, error
    probed = time.perf_counter()
    suite = suites.compat_suite(suites.DEFAULT_SUITE)
    run = suites.run_suite(env, suite, item.settings.workdir / "runs" / item.cell.id / "per-process",
                           package=family.frontend.package)
    end = time.perf_counter()
    timings = {"environment": built - start, "probes": probed - built, "compat suite": end - probed,
               "cell": end - start}
    return timings, run.counts().passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", default="0.12.0.1", help="the jax release (default 0.12.0.1)")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    family = resolve_family(None)
    index = Index.from_pip(None, [], progress=lambda m: print(m, file=sys.stderr))
    found = measure.plan(family, index, [args.frontend], WORK, python=args.python, backends="newest")
    (item,) = found.cells
    wheel = jaxrel_wheel(WORK)
    print(f"cell: {item.label}, Python {args.python}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    ways: dict[str, dict[str, list[float]]] = {"per process": {}, "compat, no cache": {}, "atlas": {}, "compat": {}}
    cached = Options(workdir=item.settings.workdir, index=index, extensions=False)
    uncached = replace(cached, keep_bytecode=False)
    for round_ in range(1, args.repeat + 1):
        timings, passed = per_process(item, family, wheel)
        for name, seconds in timings.items():
            ways["per process"].setdefault(name, []).append(seconds)
        line = f"round {round_}: per process {timings['cell']:.1f} s ({passed} passed)"
        start = time.perf_counter()
        result = run_cell(item.cell, family, item.front, wheel, uncached)
        ways["compat, no cache"].setdefault("cell", []).append(time.perf_counter() - start)
        for name, seconds in result.timings.items():
            ways["compat, no cache"].setdefault(name, []).append(seconds)
        line += f"; compat, no cache {ways['compat, no cache']['cell'][-1]:.1f} s"
        measured = measure.run_cell(item, family, wheel)
        for name, seconds in measured.timings.items():
            ways["atlas"].setdefault(name, []).append(seconds)
        line += (f"; atlas {measured.timings['cell']:.1f} s "
                 f"({sum(o['outcome'] == 'passed' for o in measured.outcomes.values())} passed"
                 f"{', ' + measured.problem if measured.problem else ''})")
        start = time.perf_counter()
        result = run_cell(item.cell, family, item.front, wheel, cached)
        ways["compat"].setdefault("cell", []).append(time.perf_counter() - start)
        for name, seconds in result.timings.items():
            ways["compat"].setdefault(name, []).append(seconds)
        line += (f"; compat {ways['compat']['cell'][-1]:.1f} s ({result.tests.passed} passed, "
                 f"{'ok' if result.ok else 'not ok: ' + '; '.join(result.problems)})")
        print(line, flush=True)
    median = {way: {name: statistics.median(values) for name, values in parts.items()} for way, parts in ways.items()}
    old, before, new, now = (median[way] for way in ("per process", "compat, no cache", "atlas", "compat"))
    print(f"\nmedian seconds over {args.repeat} rounds (load average {os.getloadavg()[0]:.1f} at the end)")
    print(f"{'part':<40}{'per process':>12}{'compat, no cache':>18}{'atlas':>10}{'compat':>10}")
    rows = [("environment", old.get("environment"), before.get("environment"), new.get("environment"),
             now.get("environment")),
            ("probes (guard, doctor, import) / all", old.get("probes"), before.get("probes"), None, now.get("probes")),
            ("  interpreter start", None, before.get("interpreter start"), new.get("interpreter start"),
             now.get("interpreter start")),
            ("  guard", None, before.get("guard"), new.get("guard"), now.get("guard")),
            ("  import jax (+ smoke), once", None, before.get("import jax"), new.get("import jax"),
             now.get("import jax")),
            ("compat suite", old.get("compat suite"), before.get("compat suite"), new.get("suite"),
             now.get("compat suite"))]
    rows.append(("cell", old["cell"], before["cell"], new["cell"], now["cell"]))
    for name, *values in rows:
        print(f"{name:<40}" + "".join(f"{'-' if v is None else f'{v:.2f}':>{w}}"
                                      for v, w in zip(values, (12, 18, 10, 10), strict=True)))
    print(f"ratios of the cell: per process / compat {old['cell'] / now['cell']:.2f}; compat, no cache / compat "
          f"{before['cell'] / now['cell']:.2f}; per process / atlas {old['cell'] / new['cell']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
