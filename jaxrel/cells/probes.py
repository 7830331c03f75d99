"""What a cell asks its environment before any test: does the guard accept it, does the frontend import, and on a
free-threaded interpreter, does the GIL stay off as the frontend, the backend, the extension and the plugins load?

Each probe is a small program run by the cell's interpreter that prints one JSON object on its
last line. The import probe imports the frontend package (recording the file it came from and
each warning once) and runs the family's smoke code, if it declares any (jax: a sum on the
default device); what importing printed on stderr is summed up from its tracebacks (a plugin
that fails to load logs one and carries on).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jaxrel._util import localfiles
from jaxrel._util.text import tail
from jaxrel.distributions import envs
from jaxrel.errors import BadInput
from jaxrel.family import Family

__all__ = ["GIL_PROBE", "GUARD_PROBE", "IMPORT_PROBE", "gil_answer", "gil_command", "gil_turned_on", "import_frontend",
           "last_json", "traceback_summary"]

GUARD_PROBE = """
import json, sys
from jaxrel.guard import GuardError, Plugin, check
arguments = json.loads(sys.argv[1])
arguments["plugins"] = tuple(Plugin(name, pinned) for name, pinned in arguments["plugins"])
try:
    check(**arguments)
    print(json.dumps({"accepted": True}))
except GuardError as error:
    print(json.dumps({"accepted": False, "message": str(error), "fix": error.fix}))
"""

# argv: the frontend's package, then the family's smoke code (may be empty). Each warning once, as Python shows it.
IMPORT_PROBE = """
import importlib, json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    frontend = importlib.import_module(sys.argv[1])
    facts = {}
    if sys.argv[2]:
        exec(sys.argv[2], {"frontend": frontend, "facts": facts})
messages = []
for warning in caught:
    if issubclass(warning.category, RuntimeWarning) and str(warning.message) not in messages:
        messages.append(str(warning.message))
print(json.dumps({"version": getattr(frontend, "__version__", None), "file": getattr(frontend, "__file__", None),
                  **facts, "warnings": messages}))
"""


# argv: the modules to import, in order (the frontend's, the backend's), as JSON; the family's smoke code, which
# loads the plugins (jax: jax.devices()); the distributions whose top-level packages to import after (a library's),
# as JSON. Run without PYTHON_GIL: a module that has not declared that it runs without the GIL turns it on as it
# loads, and CPython warns, naming it.
GIL_PROBE = """
import importlib, importlib.metadata, json, sys, warnings
modules, smoke, distributions = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
steps, errors = [], {}
def load(name):
    try:
        importlib.import_module(name)
    except Exception as error:
        errors[name] = f"{type(error).__name__}: {error}"
    steps.append([name, sys._is_gil_enabled()])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", RuntimeWarning)
    for name in modules:
        load(name)
    if smoke and modules and modules[0] in sys.modules:
        try:
            exec(smoke, {"frontend": sys.modules[modules[0]], "facts": {}})
        except Exception as error:
            errors["smoke"] = f"{type(error).__name__}: {error}"
        steps.append(["the smoke code", sys._is_gil_enabled()])
    for distribution in distributions:
        try:
            files = importlib.metadata.distribution(distribution).files or []
        except importlib.metadata.PackageNotFoundError as error:
            errors[distribution] = f"not installed: {error}"
            continue
        for name in sorted({f.parts[0] for f in files if len(f.parts) == 2 and f.parts[1] == "__init__.py"}):
            load(name)
said = [str(w.message) for w in caught if "GIL" in str(w.message)]
print(json.dumps({"gil": sys._is_gil_enabled(), "steps": steps, "said": said, "errors": errors}))
"""


def gil_command(python: str, family: Family, also: Sequence[str] = (), distributions: Sequence[str] = ()
                ) -> list[str]:
    """The GIL probe's command: ``python`` imports the frontend, the backend, the modules ``also`` (an extension's
    packages), runs the smoke code (the plugins load), then imports the top-level packages of ``distributions`` (a
    library's). Run it without ``PYTHON_GIL``; :func:`gil_answer` reads what it printed."""
    modules = [family.frontend.package, *([family.backend.package] if family.backend.package else []), *also]
    return [python, "-c", GIL_PROBE, json.dumps(modules), family.frontend.smoke or "", json.dumps(list(distributions))]


def gil_answer(returncode: int | None, output: str) -> str | None:
    """What turned the GIL on, in CPython's words (naming the module), from the probe's exit status and output;
    ``None`` when it stayed off."""
    found = last_json(output) if returncode == 0 else None
    if found is None:
        return f"the GIL probe failed: {tail(output, 1)}"
    if not found.get("gil"):
        return None
    said = [str(text) for text in found.get("said", []) if isinstance(text, str)]
    first = next((str(step[0]) for step in found.get("steps", []) if isinstance(step, list) and len(step) == 2
                  and step[1] is True), "?")
    return said[0] if said else f"the GIL is on after importing {first}"


def gil_turned_on(env: envs.Env, family: Family, also: Sequence[str] = ()) -> str | None:
    """On a free-threaded interpreter: what turned the GIL on while the frontend, the backend, the modules ``also``
    (an extension's packages) and (through the smoke code) the plugins loaded, in CPython's words (naming the
    module), or ``None`` when it stayed off."""
    done = env.run(*gil_command(str(env.python), family, also), unset=("PYTHON_GIL",))
    return gil_answer(done.returncode, done.stdout if done.returncode == 0 else (done.stderr or done.stdout))


def last_json(output: str) -> dict[str, Any] | None:
    """The JSON object a probe printed on its last line; ``None`` when there is none."""
    lines = output.strip().splitlines()
    try:
        found = localfiles.loads_json(lines[-1], "the probe's answer") if lines else None
    except BadInput:
        return None
    return found if isinstance(found, dict) else None


TRACEBACK = "Traceback (most recent call last):"


def traceback_summary(stderr: str) -> str | None:
    """``<what was logged before it>: <the exception it ended with>`` for the first traceback in ``stderr``
    (chained ones included); ``None`` when there is none."""
    lines = [line.rstrip() for line in stderr.splitlines()]
    if TRACEBACK not in lines:
        return None
    start = lines.index(TRACEBACK)
    before = next((line.strip() for line in reversed(lines[:start]) if line.strip()
                   and not line.startswith((" ", "\t"))), "")
    chained = ("The above exception", "During handling of the above exception")
    end, raised = start + 1, ""
    while end < len(lines):
        line = lines[end]
        if line and not line.startswith((" ", "\t")) and line != TRACEBACK:
            if line.startswith(chained):
                end += 1
                continue
            raised = line.strip()
            following = next((later for later in lines[end + 1:] if later.strip()), "")
            if not following.startswith(chained):
                break
        end += 1
    return f"{before}: {raised}" if before else raised or None


def import_frontend(env: envs.Env, family: Family, *, smoke: bool = True
                    ) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Run the import probe: what it printed as JSON (``None`` on failure), the import error's last line, and a
    summary of a traceback the import printed while succeeding. ``smoke=False``: import only (no device work)."""
    probe = env.run(str(env.python), "-c", IMPORT_PROBE, family.frontend.package,
                    (family.frontend.smoke or "") if smoke else "")
    found = last_json(probe.stdout) if probe.returncode == 0 else None
    if found is None:
        return None, tail(probe.stderr or probe.stdout, 1), None
    return found, None, traceback_summary(probe.stderr)
