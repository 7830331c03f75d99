"""What an environment holds of one family, read without importing the compiled backend.

Installed distributions (``importlib.metadata``, of this interpreter or another one asked
once through a probe), the frontend's declared minimum backend from its version file, the
backend's API numbers from source and the XLA FFI API version from the installed ``c_api.h``.
``doctor`` judges what this reads; compat cells record it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata

from packaging.utils import canonicalize_name

from jaxrel import policy
from jaxrel._util import localfiles, procs
from jaxrel._util.literals import read_ffi_api, read_version, read_version_file
from jaxrel.errors import BadInput
from jaxrel.family import Family, Package
from jaxrel.gating import read_api_number

__all__ = ["Environment", "Installed", "InterpreterError", "interpreter_path", "parse_interpreter_answer",
           "read_environment"]


class InterpreterError(BadInput):
    """The environment to inspect cannot be reached (bad ``--python``)."""


@dataclass(frozen=True)
class Installed:
    """One installed distribution of the family."""

    name: str
    version: str
    location: str
    requires: list[str] = field(default_factory=list)  # Requires-Dist, extras' markers included


@dataclass
class Environment:
    """What an environment holds of one family."""

    python: str
    python_version: str
    frontend: Installed | None = None
    minimum_backend: str | None = None
    backend: Installed | None = None
    plugins: list[Installed] = field(default_factory=list)
    api_numbers: dict[str, int | None] = field(default_factory=dict)
    xla_ffi_api: str | None = None
    notes: list[str] = field(default_factory=list)


def interpreter_path(python: str | None) -> tuple[str, str, list[str]]:
    """``(executable, version, sys.path)`` of ``python`` (default: this interpreter)."""
    if python is None:
        return sys.executable, sys.version.split()[0], list(sys.path)
    probe = "import json, sys; print(json.dumps([sys.executable, sys.version.split()[0], sys.path]))"
    try:
        done = procs.run([python, "-c", probe], timeout=60, check=True, text=False)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        raise InterpreterError(
            f"cannot run Python interpreter {python!r} ({error.__class__.__name__}); "
            "pass --python the path of an existing interpreter"
        ) from None
    return parse_interpreter_answer(done.stdout, python)


def parse_interpreter_answer(answer: bytes, python: str) -> tuple[str, str, list[str]]:
    """What an interpreter answered the probe: ``[executable, version, sys.path]`` as JSON, checked;
    anything else is :class:`InterpreterError` (exit 2) saying it did not answer as Python does."""
    wrong = InterpreterError(f"{python!r} did not answer as a Python interpreter does; "
                             "pass --python the path of a Python interpreter")
    try:
        found = localfiles.loads_json(answer, f"the answer of {python!r}")
    except BadInput:
        raise wrong from None
    if not (isinstance(found, list) and len(found) == 3 and all(isinstance(item, str) for item in found[:2])
            and isinstance(found[2], list) and all(isinstance(entry, str) for entry in found[2])
            and re.fullmatch(r"\d+\.\d+\.\d+\S*", found[1])):
        raise wrong
    executable, version, path = found
    return executable, version, [entry for entry in path if entry and "\0" not in entry]


def _distributions(path: list[str], notes: list[str]) -> dict[str, Installed]:
    """Every installed distribution with a readable name and version; a damaged one (METADATA that is not
    UTF-8, no Name or Version, a version or requirement packaging refuses) is skipped with a note."""
    found: dict[str, Installed] = {}
    for dist in metadata.distributions(path=path):
        where = str(getattr(dist, "_path", "") or "a distribution")
        try:
            name, version = dist.metadata["Name"], dist.metadata["Version"]
            requires = list(dist.requires or [])
            location = str(dist.locate_file(""))
        except (UnicodeDecodeError, OSError, ValueError) as error:
            notes.append(f"skipped {where}: its metadata cannot be read ({type(error).__name__}); reinstall it")
            continue
        if not name or not version:
            notes.append(f"skipped {where}: its METADATA has no {'Name' if not name else 'Version'}; reinstall it")
            continue
        try:
            policy.parse_version(version, f"{name} version")
        except policy.VersionError as error:
            notes.append(f"skipped {where}: {error}")
            continue
        if canonicalize_name(name) not in found:
            found[canonicalize_name(name)] = Installed(canonicalize_name(name), version, location, requires)
    return found


def _source_install(package: Package, path: list[str]) -> Installed | None:
    """A package importable from a source tree on ``path`` without a ``.dist-info``."""
    for entry in path:
        version = read_version_file(os.path.join(entry, package.version_file))
        if version is not None:
            return Installed(package.distribution, version, entry)
    return None


def read_environment(family: Family, python: str | None = None, path: list[str] | None = None) -> Environment:
    """Inspect the environment of ``python`` (default: the running interpreter).

    ``path`` replaces that interpreter's ``sys.path`` (to inspect a directory directly).
    """
    executable, version, interpreter_sys_path = interpreter_path(python)
    path = interpreter_sys_path if path is None else path
    env = Environment(python=executable, python_version=version)
    installed = _distributions(path, env.notes)
    env.frontend = installed.get(canonicalize_name(family.frontend.distribution)) or _source_install(
        family.frontend, path
    )
    env.backend = installed.get(canonicalize_name(family.backend.distribution)) or _source_install(
        family.backend, path
    )
    env.plugins = [dist for name, dist in sorted(installed.items()) if family.plugin_for(name)]
    if env.frontend is not None:
        variable = family.frontend.minimum_backend_variable
        if variable:
            env.minimum_backend = read_version(
                os.path.join(env.frontend.location, family.frontend.version_file), (variable,)
            )
        env.minimum_backend = env.minimum_backend or family.frontend.minimum_backend
    if env.backend is not None:
        for number in family.api_numbers:
            env.api_numbers[number.name] = read_api_number(number.file, number.variable, [env.backend.location])
            if env.api_numbers[number.name] is None and not number.literal:
                env.notes.append(f"{number.name} is set by a compiled module; not read without importing it")
        if family.backend.ffi_header:
            env.xla_ffi_api = read_ffi_api(os.path.join(env.backend.location, family.backend.ffi_header))
    return env
