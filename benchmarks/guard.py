"""What the import-time guard costs, beside real jax's own version check and ``import jax``.

Run (from any directory): ``python benchmarks/guard.py [--python 3.12] [--env DIR] [--repeat N] [--json]``.
An environment of Python ``--python`` (3.12 when this machine has it, else the running
interpreter) with the newest jax and jaxlib installable there and this checkout of jaxrel (not
editable) is made with :func:`jaxrel.distributions.envs.create` (``build/bench/guard-env-3.12``;
reused while its ``jaxrel/guard.py`` is this checkout's). Each measurement is a fresh process
of that Python, timed by ``perf_counter_ns`` inside:

1. ``import jaxrel.guard`` + ``check(...)`` with the jax profile's arguments (the first
   import of jaxrel there), and the check alone, averaged over many later calls;
2. the floor under (1): importing an empty module of a package beside jaxrel in the same
   site-packages (``_guard_bench_floor.empty``), which is what Python's import system costs
   before the guard's own code runs;
3. real jax's check: ``import jaxlib.version`` (its own process) plus a call of
   ``jax._src.lib.check_jaxlib_version`` (imported first, untimed: it loads the backend);
4. ``import jax``.

N rounds, round-robin, after an untimed warm-up round; bytecode caching on (warm caches are
realistic). Prints median, min, ratios, targets: guard (import + check) at most 0.3 ms, and
under 1% of ``import jax``.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.distributions import envs  # noqa: E402
from jaxrel.distributions.pythons import PythonNotFound, python_for  # noqa: E402
from jaxrel.family import jax_profile  # noqa: E402
from jaxrel.guard import read_assignment, read_version_file  # noqa: E402

CALLS = 2000  # calls averaged for the per-call costs
TARGET_MS, TARGET_PERCENT = 0.3, 1.0  # guard import + check at most TARGET_MS; under TARGET_PERCENT of import jax
FLOOR = "_guard_bench_floor"  # a package holding an empty module, written beside jaxrel in the environment

PROBE = """import importlib.metadata as m, json, sys, sysconfig
found = {d.metadata["Name"]: d.version for d in m.distributions()}
print(json.dumps({"purelib": sysconfig.get_path("purelib"), "python": "%d.%d%s" % (*sys.version_info[:2],
                  "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""), **found}))"""

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
t0 = time.perf_counter_ns()
check_jaxlib_version(**ARGS)
t1 = time.perf_counter_ns()
for _ in range(CALLS):
    check_jaxlib_version(**ARGS)
t2 = time.perf_counter_ns()
import json
print(json.dumps({"jax_check_first": (t1 - t0) / 1e3, "jax_check": (t2 - t1) / CALLS / 1e3}))"""

FLOOR_IMPORT = f"""import time
start = time.perf_counter_ns()
import {FLOOR}.empty
end = time.perf_counter_ns()
import json
print(json.dumps({{"floor": (end - start) / 1e6}}))"""

IMPORT = """import time
start = time.perf_counter_ns()
import {module}
end = time.perf_counter_ns()
import json
print(json.dumps({{"{key}": (end - start) / 1e6}}))"""

ROWS = [  # key, label, unit
    ("guard", "guard: import jaxrel.guard + check", "ms"),
    ("guard_check", f"guard: check alone (mean of {CALLS})", "us"),
    ("floor", "floor: import of an empty module, same path", "ms"),
    ("jaxlib_import", "jax: import jaxlib.version", "ms"),
    ("jax_check_first", "jax: check_jaxlib_version, 1st timed call", "us"),
    ("jax_check", f"jax: check_jaxlib_version (mean of {CALLS})", "us"),
    ("jax_total", "jax: import jaxlib.version + 1st call", "ms"),
    ("import_jax", "import jax", "ms"),
]


def run(env: envs.Env, code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh process of ``env`` (no cwd on sys.path); parse its JSON line."""
    done = env.run(str(env.python), "-P", "-c", code,
                   env={"PYTHONDONTWRITEBYTECODE": "", "JAXREL_SKIP_GUARD": ""})
    if done.returncode != 0:
        raise SystemExit(f"benchmark process failed:\n{done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def interpreter(version: str | None) -> str:
    """The interpreter of ``version`` (``"3.12"``); the running one when none is asked or found."""
    if not version:
        return sys.executable
    try:
        return python_for(version).executable
    except PythonNotFound as error:
        print(f"{error}; using {sys.executable}", file=sys.stderr)
        return sys.executable


def prepare(root: Path, python: str, wanted: str) -> tuple[envs.Env, Path]:
    """The environment, its site-packages and its Python version; reused if it has jax, jaxlib,
    this guard.py and Python ``wanted`` (``python``'s version). Writes the floor package there."""
    env = envs.Env(root)
    found: dict[str, Any] = run(env, PROBE) if env.python.exists() else {}
    installed = Path(found.get("purelib", "."), "jaxrel", "guard.py")
    if not (found.get("jax") and found.get("jaxlib") and found.get("python") == wanted and installed.is_file()
            and installed.read_bytes() == (ROOT / "jaxrel" / "guard.py").read_bytes()):
        print(f"creating {root} (Python {wanted}) ...", file=sys.stderr)
        env = envs.create(root, python=python, requirements=["jax", "jaxlib"], no_deps=[str(ROOT)],
                          only_binary=wanted.endswith("t"))  # a free-threaded build: wheels only (cp313t)
        found = run(env, PROBE)
    site = Path(found["purelib"])
    (site / FLOOR).mkdir(exist_ok=True)
    for name in ("__init__.py", "empty.py"):
        (site / FLOOR / name).write_text("")
    return env, site


def run_python(python: str, code: str) -> str:
    """The output of ``code`` run by ``python``."""
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def programs(site: Path) -> dict[str, str]:
    """The four programs, with the versions read from the installed sources as literals."""
    jax_version = read_version_file(str(site / "jax" / "version.py"))
    jaxlib_version = read_version_file(str(site / "jaxlib" / "version.py"))
    minimum = read_assignment(str(site / "jax" / "version.py"), ("_minimum_jaxlib_version",))
    if not (jax_version and jaxlib_version and minimum):
        raise SystemExit(f"cannot read the versions under {site}")
    arguments = jax_profile().guard_arguments(jax_version, minimum)
    plugins = [(plugin.distribution, plugin.pinned) for plugin in arguments.pop("plugins")]
    jax_arguments = dict(jax_version=jax_version, jaxlib_version=jaxlib_version,
                         minimum_jaxlib_version=minimum)
    return {
        "guard": f"CALLS = {CALLS}\nARGS = {arguments!r}\nPLUGINS = {plugins!r}\n{GUARD}",
        "jax_check": f"CALLS = {CALLS}\nARGS = {jax_arguments!r}\n{JAX_CHECK}",
        "floor": FLOOR_IMPORT,
        "jaxlib_import": IMPORT.format(module="jaxlib.version", key="jaxlib_import"),
        "import_jax": IMPORT.format(module="jax", key="import_jax"),
    }


def measure(env: envs.Env, codes: dict[str, str], repeat: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """An untimed warm-up round, then ``repeat`` rounds running each program once, order rotated."""
    kinds, warm_up = list(codes), {kind: run(env, code) for kind, code in codes.items()}
    samples: dict[str, list[float]] = {key: [] for key, _, _ in ROWS}
    for round_ in range(repeat):
        results: dict[str, Any] = {}
        for kind in kinds[round_ % len(kinds):] + kinds[:round_ % len(kinds)]:
            results.update(run(env, codes[kind]))
        results["jax_total"] = results["jaxlib_import"] + results["jax_check_first"] / 1e3
        for key in samples:
            samples[key].append(results[key])
    return samples, warm_up["guard"]


def summarise(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Medians, minima, ratios (of medians) and targets."""
    stats = {key: {"median": statistics.median(samples[key]), "min": min(samples[key]),
                   "unit": unit} for key, _, unit in ROWS}
    median = {key: statistics.median(samples[key]) for key, _, _ in ROWS}
    guard_ms = median["guard"]
    percent = 100 * guard_ms / median["import_jax"]
    return {"measurements": stats,
            "ratios": {"guard_percent_of_import_jax": percent,
                       "guard_over_jax_check": guard_ms / median["jax_total"],
                       "guard_minus_floor_ms": guard_ms - median["floor"]},
            "targets": {f"guard (import + check, median) at most {TARGET_MS:g} ms": guard_ms <= TARGET_MS,
                        f"guard under {TARGET_PERCENT:g}% of import jax": percent < TARGET_PERCENT}}


def report(summary: dict[str, Any], modules: list[str], env: envs.Env, repeat: int, jaxlib: str,
           python: str) -> None:
    """The readable table."""
    print(f"env: {env.root}  (Python {python}; jax and jaxlib {jaxlib}; {repeat} rounds, round-robin)")
    print(f"{'measurement':<46}{'median':>11}{'min':>11}  unit")
    for key, label, unit in ROWS:
        row = summary["measurements"][key]
        print(f"{label:<46}{row['median']:>11.3f}{row['min']:>11.3f}  {unit}")
    ratios = summary["ratios"]
    print(f"\nguard / import jax: {ratios['guard_percent_of_import_jax']:.3f} %;  guard / jax's "
          f"own check (import jaxlib.version + call): {ratios['guard_over_jax_check']:.2f} x;  guard above the "
          f"floor: {ratios['guard_minus_floor_ms']:.3f} ms")
    for target, met in summary["targets"].items():
        print(f"target {target}: {'met' if met else 'NOT met'}")
    print(f"modules the guard import adds: {', '.join(modules) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    """Measure, then print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="Python version of the environment ('' = this one)")
    parser.add_argument("--env", type=Path, help="environment directory (default build/bench/guard-env-VERSION)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print a JSON object, not a table")
    args = parser.parse_args(argv)
    python = interpreter(args.python)
    version = run_python(python, "import sys, sysconfig; print('%d.%d%s' % (*sys.version_info[:2], "
                                 "'t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")  # 3.13t: its own
    root = args.env or ROOT / "build" / "bench" / f"guard-env-{version}"
    env, site = prepare(root.resolve(), python, version)
    samples, guard_run = measure(env, programs(site), max(1, args.repeat))
    jaxlib = read_version_file(str(site / "jaxlib" / "version.py"))
    if not guard_run["file"].startswith(str(site)) or guard_run["found"] != jaxlib:
        raise SystemExit(f"the guard ran from {guard_run['file']}, found {guard_run['found']}")
    if args.json:
        print(json.dumps({"env": str(env.root), "python": version, "repeat": args.repeat, **summarise(samples),
                          "guard_modules": guard_run["modules"], "samples": samples}, indent=2))
    else:
        report(summarise(samples), guard_run["modules"], env, args.repeat, jaxlib or "?", version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
