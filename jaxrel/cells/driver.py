"""A cell in one interpreter: the guard, ``import`` of the frontend (once) and the compat suite, timed apart.

Used by compat's runner and by the API atlas. Starting an interpreter per probe (guard, import)
and another for pytest imports the frontend again each time; here one driver program runs in the
cell's environment: it calls the guard as the frontend would, imports the frontend with the eight
host CPU devices the suite wants (recording the file it came from, each ``RuntimeWarning`` once,
the family's smoke code's facts and what importing printed on stderr), then, when asked and the
guard accepted, runs the suite with ``pytest.main`` in the same process. What it saw (and the time
each part took) goes to a JSON file, rewritten after each part, so a crash later keeps the parts
before it. The suite's records come from :mod:`jaxrel.cells.pytest_plugin`.

The interpreter's exit is judged too: the last write marks the answer finished, so a status other
than 0 after it is a crash at exit (a backend's or plugin's teardown), which users' programs hit.
Just before exiting the driver moves every object into the collector's permanent generation
(``gc.freeze``): the exit still clears every module, runs the atexit hooks and tears down the
backend, but skips the collections that would walk each object the frontend and the suite made,
0.2–0.3 s of each cell's CPU. What that leaves out: finalizers of objects held only by reference
cycles; their memory goes back with the process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles, procs
from jaxrel._util.text import tail
from jaxrel.cells import records
from jaxrel.cells.probes import traceback_summary
from jaxrel.distributions import envs
from jaxrel.errors import JaxrelError

__all__ = ["DRIVER", "DriverResult", "run_driver"]

# argv: a JSON object {guard, package, smoke, pytest (argv or null), cpu_only_pytest (argv or null), env, record,
# out, stderr}. Writes {guard, import | import_error, returncode, cpu_only, timings, finished} to out.
_DRIVER = r"""
import gc, json, os, sys, time
start = time.perf_counter()
spec = json.loads(sys.argv[1])
result = {"timings": {}}
def save():
    result["timings"]["driver"] = time.perf_counter() - start
    with open(spec["out"] + ".part", "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(spec["out"] + ".part", spec["out"])
def finish():
    result["finished"] = True  # all asked is done: what follows is the interpreter's exit, judged by its status
    save()
    gc.freeze()  # the exit's garbage collections (not its teardown) would walk every object the frontend made
    sys.exit(0)
try:
    from jaxrel.guard import GuardError, Plugin, check
    arguments = spec["guard"]
    arguments["plugins"] = tuple(Plugin(name, pinned) for name, pinned in arguments["plugins"])
    try:
        check(**arguments)
        result["guard"] = {"accepted": True}
    except GuardError as error:
        result["guard"] = {"accepted": False, "message": str(error), "fix": error.fix}
except Exception as error:
    result["guard_error"] = f"{type(error).__name__}: {error}".splitlines()[0]
result["timings"]["guard"] = time.perf_counter() - start
save()
if "guard_error" in result:
    finish()
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""),
                                                 "--xla_force_host_platform_device_count=8"]))
before = time.perf_counter()
import importlib, traceback, warnings
sys.stderr.flush()
saved = os.dup(2)
with open(spec["stderr"], "w", encoding="utf-8") as captured:
    os.dup2(captured.fileno(), 2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            frontend = importlib.import_module(spec["package"])
            facts = {}
            if spec["smoke"]:
                exec(spec["smoke"], {"frontend": frontend, "facts": facts})
        messages = []
        for warning in caught:
            if issubclass(warning.category, RuntimeWarning) and str(warning.message) not in messages:
                messages.append(str(warning.message))
        result["import"] = {"version": getattr(frontend, "__version__", None),
                            "file": getattr(frontend, "__file__", None), **facts, "warnings": messages}
    except BaseException as error:
        traceback.print_exc()
        result["import_error"] = f"{type(error).__name__}: {error}".splitlines()[0]
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
result["timings"]["import"] = time.perf_counter() - before
save()
if spec["pytest"] is None or not result["guard"]["accepted"] or "import" not in result:
    finish()  # no suite to run, or nothing for it to run against (the import failed: the cell's problem)
before = time.perf_counter()
import pytest
os.environ.update(spec["env"])
os.environ["@RECORD@"] = spec["record"]
os.environ["@PACKAGE@"] = spec["package"]
arguments = spec["pytest"]
if spec["cpu_only_pytest"] and result["import"].get("platforms") == ["cpu"]:
    arguments, result["cpu_only"] = spec["cpu_only_pytest"], True
result["returncode"] = int(pytest.main(arguments))
result["timings"]["suite"] = time.perf_counter() - before
finish()
"""
DRIVER = _DRIVER.replace("@RECORD@", records.RECORD).replace("@PACKAGE@", records.PACKAGE)


@dataclass
class DriverResult:
    """What the driver reported: the guard's answer, the import, the suite's records, and where time went."""

    answered: bool = False  # the guard answered (accepted or refused)
    accepted: bool = False
    guard_message: str | None = None
    guard_fix: str | None = None
    guard_error: str | None = None  # the guard itself crashed (the cell's jaxrel is broken)
    imported: dict[str, Any] | None = None
    import_error: str | None = None
    import_output: str | None = None  # a traceback importing printed while succeeding (a plugin's), summed up
    returncode: int | None = None  # pytest's; None: the suite did not run, or the interpreter died inside it
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)
    properties: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # guard, import jax, suite, driver, interpreter start
    exit_code: int = 0  # the driver interpreter's
    exit_problem: str | None = None  # it died in its exit, after everything asked of it was done and recorded
    output: str = ""  # the last lines of what it printed (pytest's summary)
    last_line: str = ""  # the last line it printed on stderr (else stdout): why it died
    problem: str | None = None
    cpu_only: bool = False  # the frontend saw only CPU devices, so the suite ran ``cpu_only_pytest``


def _answer(path: Path) -> dict[str, Any] | None:
    """A JSON object the driver wrote, or ``None`` when it is missing or damaged (never trusted, never a crash)."""
    try:
        data = localfiles.load_json(path)
    except JaxrelError:
        return None
    return data if isinstance(data, dict) else None


def run_driver(env: envs.Env, *, guard: dict[str, Any], package: str, work: Path, smoke: str | None = None,
               pytest: Sequence[str] | None = None, cwd: Path | None = None,
               variables: Mapping[str, str] | None = None, timeout: float = 3600,
               cpu_only_pytest: Sequence[str] | None = None) -> DriverResult:
    """Run :data:`DRIVER` in ``env``; ``pytest``: the suite's arguments (``None``: guard and import only), run from
    ``cwd`` with ``variables`` set; ``cpu_only_pytest`` instead when the frontend sees only CPU devices. ``work``
    (its old files removed) keeps the result, records and stderr."""
    work.mkdir(parents=True, exist_ok=True)
    record, out, stderr = work / "record", work / "driver.json", work / "import-stderr.txt"
    for stale in [out, stderr, *(record.glob("*.json") if record.is_dir() else [])]:
        stale.unlink(missing_ok=True)
    record.mkdir(exist_ok=True)
    spec = {"guard": guard, "package": package, "smoke": smoke or "", "pytest": list(pytest) if pytest else None,
            "cpu_only_pytest": list(cpu_only_pytest) if cpu_only_pytest else None,
            "env": dict(variables or {}), "record": str(record), "out": str(out), "stderr": str(stderr)}
    start = time.perf_counter()
    done = env.run(str(env.python), "-c", DRIVER, json.dumps(spec), timeout=timeout,
                   cwd=str(cwd) if cwd is not None else None, env={"PYTHONSAFEPATH": "1", **dict(variables or {})})
    wall = time.perf_counter() - start
    printed = (done.stdout or "") + "\n" + (done.stderr or "")
    last_line = tail(done.stderr or done.stdout, 1)
    data = _answer(out)
    if data is None:
        return DriverResult(problem=f"the cell's interpreter ended (exit {done.returncode}) without a result: "
                                    f"{tail(done.stderr or done.stdout, 2)}", timings={"driver": wall},
                            exit_code=done.returncode, output=tail(printed), last_line=last_line)
    raw_timings = data.get("timings")
    timings = {("import jax" if k == "import" else k): float(v) for k, v in (
        raw_timings.items() if isinstance(raw_timings, dict) else ()) if isinstance(v, (int, float))}
    timings["interpreter start"] = max(0.0, wall - timings.get("driver", wall))
    seen: dict[str, Any] = data["guard"] if isinstance(data.get("guard"), dict) else {}
    captured = stderr.read_text(encoding="utf-8", errors="replace") if stderr.is_file() else ""
    result = DriverResult("guard" in data, bool(seen.get("accepted")), seen.get("message"), seen.get("fix"),
                          data.get("guard_error"),
                          data.get("import"), data.get("import_error"),
                          traceback_summary(captured) if "import" in data else None, data.get("returncode"),
                          timings=timings, exit_code=done.returncode, output=tail(printed), last_line=last_line,
                          cpu_only=data.get("cpu_only") is True)
    if data.get("finished") is True and done.returncode != 0:
        result.exit_problem = (f"the interpreter {_ended(done.returncode)} in its exit, after the cell's work was "
                               f"done (a crash users' programs hit at exit): {last_line or 'no message'}")
    recorded = _answer(record / "main.json")
    if recorded is not None:
        outcomes, properties = recorded.get("outcomes"), recorded.get("properties")
        result.outcomes = outcomes if isinstance(outcomes, dict) else {}
        result.properties = properties if isinstance(properties, dict) else {}
    if result.guard_error:
        result.problem = f"the guard crashed: {result.guard_error}"
    elif not result.accepted:
        result.problem = f"the guard refused it: {result.guard_message}"
    elif result.import_error:
        result.problem = f"import failed: {result.import_error}"
    elif pytest and not result.outcomes:
        result.problem = f"pytest exited {result.returncode} without results: {tail(printed, 2)}"
    else:
        result.problem = result.exit_problem
    return result


def _ended(returncode: int) -> str:
    """How a process with this exit status ended, in words: ``was killed by SIGSEGV (signal 11)``, ``exited 3``."""
    return f"was killed by {procs.signal_name(-returncode)}" if returncode < 0 else f"exited {returncode}"
