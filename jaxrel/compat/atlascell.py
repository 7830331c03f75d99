"""One atlas cell in one interpreter: the guard, ``import jax`` (once) and the compat suite, timed apart.

compat's runner starts an interpreter per probe (guard, doctor, import) and another for
pytest, each importing jax again. An atlas run has tens of cells, so here a single driver
program runs in the cell's environment: it calls the guard as the frontend would, imports the
frontend with the eight host CPU devices the suite wants, then runs the suite with
``pytest.main`` in the same process, and writes what it saw (and the time each part took) to a
JSON file. The suite's records come from :mod:`jaxrel.compat.cellplugin`, as in compat.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxrel._util.text import tail
from jaxrel.compat import cellrecord
from jaxrel.dist import envs

__all__ = ["DRIVER", "DriverResult", "run_driver"]

# argv: a JSON object {guard, package, suite, ini, record, out}. Writes {guard, import, timings, returncode} to out.
_DRIVER = r"""
import json, os, sys, time
start = time.perf_counter()
spec = json.loads(sys.argv[1])
result = {"timings": {}}
def done():
    result["timings"]["driver"] = time.perf_counter() - start
    with open(spec["out"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)
from jaxrel.guard import GuardError, Plugin, check
arguments = spec["guard"]
arguments["plugins"] = tuple(Plugin(name, pinned) for name, pinned in arguments["plugins"])
try:
    check(**arguments)
    result["guard"] = {"accepted": True}
except GuardError as error:
    result["guard"] = {"accepted": False, "message": str(error), "fix": error.fix}
result["timings"]["guard"] = time.perf_counter() - start
if not result["guard"]["accepted"]:
    done(); sys.exit(0)
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""),
                                                 "--xla_force_host_platform_device_count=8"]))
before = time.perf_counter()
try:
    import importlib
    frontend = importlib.import_module(spec["package"])
    facts = {"version": getattr(frontend, "__version__", None), "file": getattr(frontend, "__file__", None)}
    if spec["package"] == "jax":
        facts["platforms"] = sorted({d.platform for d in frontend.devices()})
    result["import"] = facts
except Exception as error:
    result["import_error"] = f"{type(error).__name__}: {error}".splitlines()[0]
result["timings"]["import"] = time.perf_counter() - before
if "import_error" in result:
    done(); sys.exit(0)
before = time.perf_counter()
import pytest
os.environ["@RECORD@"] = spec["record"]
os.environ["@PACKAGE@"] = spec["package"]
result["returncode"] = int(pytest.main([spec["suite"], "-p", "no:cacheprovider", "-p", "jaxrel.compat.cellplugin",
                                        "--rootdir", spec["suite"], "--confcutdir", spec["suite"],
                                        "-c", spec["ini"], "-q", "-p", "no:randomly"]))
result["timings"]["suite"] = time.perf_counter() - before
done()
"""
DRIVER = _DRIVER.replace("@RECORD@", cellrecord.RECORD).replace("@PACKAGE@", cellrecord.PACKAGE)


@dataclass
class DriverResult:
    """What the driver reported: the guard's answer, the import, the suite's records, and where time went."""

    accepted: bool = False
    guard_message: str | None = None
    imported: dict[str, Any] | None = None
    import_error: str | None = None
    returncode: int | None = None
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)
    properties: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # guard, import jax, suite, driver (its whole run)
    problem: str | None = None


def run_driver(env: envs.Env, *, guard: dict[str, Any], package: str, suite: Path, work: Path,
               timeout: float = 1800) -> DriverResult:
    """Run :data:`DRIVER` in ``env`` from ``suite`` (its working directory); ``work`` (emptied) keeps its files."""
    work.mkdir(parents=True, exist_ok=True)
    record, out = work / "record", work / "driver.json"
    for stale in [out, *record.glob("*.json")] if record.is_dir() else [out]:
        stale.unlink(missing_ok=True)
    record.mkdir(exist_ok=True)
    spec = {"guard": guard, "package": package, "suite": str(suite), "ini": str(suite / "pytest.ini"),
            "record": str(record), "out": str(out)}
    start = time.perf_counter()
    done = env.run(str(env.python), "-c", DRIVER, json.dumps(spec), timeout=timeout, cwd=str(suite),
                   env={"PYTHONSAFEPATH": "1"})
    wall = time.perf_counter() - start
    if not out.is_file():
        return DriverResult(problem=f"the cell's interpreter ended (exit {done.returncode}) without a result: "
                                    f"{tail(done.stderr or done.stdout, 2)}", timings={"driver": wall})
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    timings = {("import jax" if k == "import" else k): float(v) for k, v in data.get("timings", {}).items()}
    timings["interpreter start"] = max(0.0, wall - timings.get("driver", wall))
    guard_seen = data.get("guard", {})
    result = DriverResult(bool(guard_seen.get("accepted")), guard_seen.get("message"), data.get("import"),
                          data.get("import_error"), data.get("returncode"), timings=timings)
    main = record / "main.json"
    if main.is_file():
        recorded = json.loads(main.read_text(encoding="utf-8"))
        result.outcomes = recorded.get("outcomes", {})
        result.properties = recorded.get("properties", {})
    if not result.accepted:
        result.problem = f"the guard refused it: {result.guard_message}"
    elif result.import_error:
        result.problem = f"import failed: {result.import_error}"
    elif not result.outcomes:
        result.problem = f"pytest exited {result.returncode} without results: {tail(done.stdout + done.stderr, 2)}"
    return result
