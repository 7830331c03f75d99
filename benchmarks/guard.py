"""What the import-time guard costs, beside real jax's own version check and ``import jax``.

Run from the repository root::

    python benchmarks/guard.py [--env DIR] [--repeat N] [--json]

An environment with jax==0.10.2, jaxlib==0.10.2 and this checkout of jaxrel (not editable)
is made with :func:`jaxrel.envs.create` (``build/bench/guard-env``; reused while current).
Each measurement is a fresh process of its Python, timed by ``perf_counter_ns`` inside:

1. ``import jaxrel.guard`` + ``check(...)`` with the jax profile's arguments (the first
   import of jaxrel there), and the check alone, averaged over many later calls;
2. real jax's check: ``import jaxlib.version`` (its own process) plus a call of
   ``jax._src.lib.check_jaxlib_version`` (imported first, untimed: it loads the backend);
3. ``import jax``.

N rounds, round-robin, after one untimed warm-up round; bytecode caching stays on (warm caches
are the realistic case). Prints median, min, ratios and the targets: guard import + check
under 1 ms and under 1% of ``import jax``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel import envs  # noqa: E402
from jaxrel.family import jax_profile  # noqa: E402

VERSION = "0.10.2"
CALLS = 2000  # calls averaged for the per-call costs
TARGET_MS, TARGET_PERCENT = 1.0, 1.0

PROBE = """import importlib.metadata as m, json, sysconfig
found = {d.metadata["Name"]: d.version for d in m.distributions()}
print(json.dumps({"purelib": sysconfig.get_path("purelib"), "jax": found.get("jax"), "jaxlib": found.get("jaxlib")}))"""

GUARD = """import sys, time
assert "jaxrel" not in sys.modules, "jaxrel was imported before the measurement"
before = set(sys.modules)
start = time.perf_counter_ns()
import jaxrel.guard
found = jaxrel.guard.check(**ARGS, plugins=tuple(jaxrel.guard.Plugin(*p) for p in PLUGINS))
end = time.perf_counter_ns()
new = sorted(set(sys.modules) - before)
plugins = tuple(jaxrel.guard.Plugin(*p) for p in PLUGINS)
loop = time.perf_counter_ns()
for _ in range(CALLS):
    jaxrel.guard.check(**ARGS, plugins=plugins)
loop_end = time.perf_counter_ns()
import json
print(json.dumps({"guard": (end - start) / 1e6, "guard_check": (loop_end - loop) / CALLS / 1e3,
                  "found": found, "file": jaxrel.guard.__file__, "modules": new}))"""

JAX_CHECK = """import time
from jax._src.lib import check_jaxlib_version  # untimed: imports the whole backend
start = time.perf_counter_ns()
check_jaxlib_version(**ARGS)
end = time.perf_counter_ns()
for _ in range(CALLS):
    check_jaxlib_version(**ARGS)
loop_end = time.perf_counter_ns()
import json
print(json.dumps({"jax_check_first": (end - start) / 1e3, "jax_check": (loop_end - end) / CALLS / 1e3}))"""

IMPORT = """import time
start = time.perf_counter_ns()
import {module}
end = time.perf_counter_ns()
import json
print(json.dumps({{"{key}": (end - start) / 1e6}}))"""

ROWS = [  # key, label, unit
    ("guard", "guard: import jaxrel.guard + check", "ms"),
    ("guard_check", f"guard: check alone (mean of {CALLS})", "us"),
    ("jaxlib_import", "jax: import jaxlib.version", "ms"),
    ("jax_check_first", "jax: check_jaxlib_version, one call", "us"),
    ("jax_check", f"jax: check_jaxlib_version (mean of {CALLS})", "us"),
    ("jax_total", "jax: import jaxlib.version + one call", "ms"),
    ("import_jax", "import jax", "ms"),
]


def run(env: envs.Env, code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh process of ``env`` (no cwd on sys.path) and parse its JSON line."""
    done = env.run(str(env.python), "-P", "-c", code,
                   env={"PYTHONDONTWRITEBYTECODE": "", "JAXREL_SKIP_GUARD": ""})
    if done.returncode != 0:
        raise SystemExit(f"benchmark process failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def prepare(root: Path) -> tuple[envs.Env, Path]:
    """The benchmark environment and its site-packages: reused if current, else created."""
    env = envs.Env(root)
    if env.python.exists():
        found = run(env, PROBE)
        site = Path(found["purelib"])
        installed = site / "jaxrel" / "guard.py"
        current = installed.exists() and installed.read_bytes() == (ROOT / "jaxrel" / "guard.py").read_bytes()
        if found["jax"] == found["jaxlib"] == VERSION and current:
            return env, site
    print(f"creating {root} ...", file=sys.stderr)
    env = envs.create(root, requirements=[f"jax=={VERSION}", f"jaxlib=={VERSION}", str(ROOT)])
    return env, Path(run(env, PROBE)["purelib"])


def literal(path: Path, *names: str) -> str | None:
    """The string assigned to the first of ``names`` found in the source at ``path``."""
    source = path.read_text(encoding="utf-8")
    found = (re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", source, re.M) for name in names)
    return next((match[1] for match in found if match), None)


def programs(site: Path) -> dict[str, str]:
    """The four measurement programs, with the versions read from the installed sources as literals."""
    jax_version = literal(site / "jax" / "version.py", "_release_version", "_version")
    jaxlib_version = literal(site / "jaxlib" / "version.py", "_release_version", "_version")
    minimum = literal(site / "jax" / "version.py", "_minimum_jaxlib_version")
    if not (jax_version and jaxlib_version and minimum):
        raise SystemExit(f"cannot read the versions under {site}")
    arguments = jax_profile().guard_arguments(jax_version, minimum)
    plugins = [(plugin.distribution, plugin.pinned) for plugin in arguments.pop("plugins")]
    jax_arguments = {"jax_version": jax_version, "jaxlib_version": jaxlib_version,
                     "minimum_jaxlib_version": minimum}
    prelude = f"CALLS = {CALLS}\n"
    return {
        "guard": f"{prelude}ARGS = {arguments!r}\nPLUGINS = {plugins!r}\n{GUARD}",
        "jax_check": f"{prelude}ARGS = {jax_arguments!r}\n{JAX_CHECK}",
        "jaxlib_import": IMPORT.format(module="jaxlib.version", key="jaxlib_import"),
        "import_jax": IMPORT.format(module="jax", key="import_jax"),
    }


def measure(env: envs.Env, codes: dict[str, str], repeat: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """One untimed warm-up round, then ``repeat`` rounds, each process kind once per round, order rotated."""
    kinds = list(codes)
    first = {kind: run(env, codes[kind]) for kind in kinds}  # warm-up: bytecode, page cache
    samples: dict[str, list[float]] = {}
    for round_ in range(repeat):
        shift = round_ % len(kinds)
        results: dict[str, Any] = {}
        for kind in kinds[shift:] + kinds[:shift]:
            results.update(run(env, codes[kind]))
        results["jax_total"] = results["jaxlib_import"] + results["jax_check_first"] / 1e3
        for key, _, _ in ROWS:
            samples.setdefault(key, []).append(results[key])
    return samples, first["guard"]


def summarise(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Medians, minima, ratios and targets."""
    stats = {key: {"median": statistics.median(samples[key]), "min": min(samples[key]), "unit": unit}
             for key, _, unit in ROWS}
    guard_ms, jax_ms = stats["guard"]["median"], stats["import_jax"]["median"]
    percent = 100 * guard_ms / jax_ms
    return {
        "measurements": stats,
        "ratios": {"guard_percent_of_import_jax": percent,
                   "guard_over_jax_check": guard_ms / stats["jax_total"]["median"]},
        "targets": {f"guard under {TARGET_MS:g} ms": guard_ms < TARGET_MS,
                    f"guard under {TARGET_PERCENT:g}% of import jax": percent < TARGET_PERCENT},
    }


def report(summary: dict[str, Any], guard_run: dict[str, Any], env: envs.Env, repeat: int) -> None:
    """The readable table."""
    print(f"env: {env.root}  (jax {VERSION}, jaxlib {VERSION}; {repeat} rounds, round-robin)")
    print(f"{'measurement':<46}{'median':>11}{'min':>11}  unit")
    for key, label, unit in ROWS:
        row = summary["measurements"][key]
        print(f"{label:<46}{row['median']:>11.3f}{row['min']:>11.3f}  {unit}")
    ratios = summary["ratios"]
    print(f"\nguard / import jax:        {ratios['guard_percent_of_import_jax']:.3f} %  (medians)")
    print(f"guard / jax's own check:   {ratios['guard_over_jax_check']:.2f} x")
    for target, met in summary["targets"].items():
        print(f"target {target}: {'met' if met else 'NOT met'}")
    print(f"\nmodules the guard import adds: {', '.join(guard_run['modules'])}")


def main(argv: list[str] | None = None) -> int:
    """Measure, then print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, default=ROOT / "build" / "bench" / "guard-env")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    args = parser.parse_args(argv)
    env, site = prepare(args.env.resolve())
    samples, guard_run = measure(env, programs(site), max(1, args.repeat))
    if not guard_run["file"].startswith(str(site)) or guard_run["found"] != VERSION:
        raise SystemExit(f"the guard ran from {guard_run['file']} and found {guard_run['found']}")
    summary = summarise(samples)
    if args.json:
        print(json.dumps({"env": str(env.root), "repeat": args.repeat, **summary,
                          "guard_modules": guard_run["modules"], "samples": samples}, indent=2))
    else:
        report(summary, guard_run, env, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
