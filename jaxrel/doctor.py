"""Inspect an environment's split wheels without importing the compiled backend.

Reads installed distributions (``importlib.metadata``), the frontend's declared
minimum backend from its version file, the backend's API numbers from source and
the XLA FFI API version from the installed ``c_api.h``, then applies the policy.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel._util.literals import read_assignment, read_ffi_api, read_version_file
from jaxrel._util.text import table
from jaxrel.errors import BadInput
from jaxrel.family import Family, Package
from jaxrel.gating import read_api_number


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
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60, check=True)
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


def _distributions(path: list[str]) -> dict[str, Installed]:
    found: dict[str, Installed] = {}
    for dist in metadata.distributions(path=path):
        name = dist.metadata["Name"]
        if name and canonicalize_name(name) not in found:
            found[canonicalize_name(name)] = Installed(
                canonicalize_name(name), dist.version, str(dist.locate_file("")), list(dist.requires or [])
            )
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
    installed = _distributions(path)
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
            env.minimum_backend = read_assignment(
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


def _pin(installed: Installed | None) -> policy.Pin | None:
    return None if installed is None else _installed_pin(installed)


def _installed_pin(installed: Installed) -> policy.Pin:
    return policy.Pin(installed.name, policy.parse_version(installed.version, f"installed {installed.name}"))


def diagnose(family: Family, env: Environment) -> policy.Verdict:
    """Apply the policy to what ``env`` holds; a missing backend is itself a violation."""
    minimum = None
    if env.minimum_backend:
        minimum = policy.parse_version(
            env.minimum_backend, f"minimum {family.backend.distribution} declared by {family.frontend.distribution}"
        )
    return policy.verdict(
        backend=_pin(env.backend),
        backend_name=family.backend.distribution,
        frontend=_pin(env.frontend),
        minimum_backend=minimum,
        plugins=[pin for pin in map(_pin, env.plugins) if pin],
        exempt_plugins=family.unpinned(p.name for p in env.plugins),
        released_backends=family.released_backends(),
    )


def to_json(family: Family, env: Environment, result: policy.Verdict) -> dict[str, Any]:
    """The doctor's stable JSON object."""
    return {**result.to_json(), "family": family.name, "environment": asdict(env),
            "plugin_families": [asdict(status) for status in plugin_families(family, env)]}


def render(family: Family, env: Environment, result: policy.Verdict) -> str:
    """A readable report: what is installed, the numbers, the verdict and the fix."""
    rows = [("python", env.python_version, env.python)]
    for role, dist in (("frontend", env.frontend), ("backend", env.backend)):
        name = getattr(family, role).distribution
        rows.append((name, dist.version if dist else "not installed", dist.location if dist else ""))
    rows += [(p.name, p.version, p.location) for p in env.plugins]
    source = f"{family.frontend.version_file} {family.frontend.minimum_backend_variable or ''}".strip()
    rows.append((f"minimum {family.backend.distribution}", env.minimum_backend or "unknown", source))
    for name, value in env.api_numbers.items():
        rows.append((name, "unknown" if value is None else str(value), family.api_number(name).file))
    if family.backend.ffi_header:
        rows.append(("XLA FFI API", env.xla_ffi_api or "unknown", family.backend.ffi_header))
    lines = [f"jaxrel doctor: family {family.name}", table(None, rows, indent="  ")]
    lines += [f"  note: {note}" for note in env.notes]
    statuses = plugin_families(family, env)
    if statuses:
        lines.append("plugin families:")
        lines += [f"  {s.name}: {s.verdict} ({', '.join(s.installed)}): {s.detail}" + (f"; fix: {s.fix}" if s.fix
                                                                                        else "") for s in statuses]
    lines.append(f"verdict: {'compatible' if result.compatible else 'INCOMPATIBLE'}")
    lines += [f"  x {v.rule}: {v.message}" for v in result.violations]
    lines += [f"  ! {w.rule}: {w.message} ({w.fix})" for w in result.warnings]
    if result.fix:
        lines.append(f"fix: {result.fix}")
        lines += [f" or: {alt}" for alt in result.alternatives]
    return "\n".join(lines)


@dataclass(frozen=True)
class FamilyStatus:
    """One installed hardware family (its plugin and pjrt, or a runtime), judged against the backend."""

    name: str  # cuda12, rocm7, tpu
    installed: tuple[str, ...]  # "jax-cuda12-plugin 0.12.0.1", ...
    verdict: str  # ok | mismatched | exempt | warning
    detail: str
    fix: str | None = None


def _family_name(distribution: str, frontend: str) -> str:
    name = distribution.removeprefix(f"{frontend}-").removesuffix("-plugin").removesuffix("-pjrt")
    return "tpu" if name.startswith("libtpu") else name


def _extra_pin(frontend: Installed | None, distribution: str) -> tuple[str, SpecifierSet] | None:
    """The frontend's extra that pins ``distribution`` and its specifier (``tpu``, ``==0.0.50.*``)."""
    for text in frontend.requires if frontend else []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == distribution and requirement.marker is not None:
            extra = str(requirement.marker).split("==")[-1].strip().strip("\"'")
            return extra, requirement.specifier
    return None


def plugin_families(family: Family, env: Environment) -> list[FamilyStatus]:
    """Each installed plugin family with its verdict and fix.

    Pinned families (CUDA, oneapi) must have the backend's release number, as jaxlib's
    ``check_plugin_version`` requires (otherwise it skips the plugin with a warning); families
    released separately (ROCm) are exempt, as jaxlib exempts them; a runtime with its own
    numbering (libtpu) is held to the pin of the frontend's extra, as a warning: jax loads it
    without a version check.
    """
    grouped: dict[str, list[Installed]] = {}
    for dist in env.plugins:
        grouped.setdefault(_family_name(dist.name, canonicalize_name(family.frontend.distribution)), []).append(dist)
    backend = env.backend
    statuses = []
    for name, dists in sorted(grouped.items()):
        shown = tuple(f"{d.name} {d.version}" for d in dists)
        specs = [family.plugin_for(d.name) for d in dists]
        if any(s is not None and s.runtime for s in specs):
            pinned = [(d, pin) for d in dists if (pin := _extra_pin(env.frontend, d.name))]
            frontend = _pin(env.frontend)
            outside = [w for d, (extra, spec) in pinned
                       if (w := policy.runtime_within_pin(_installed_pin(d), str(spec), extra, frontend)) is not None]
            if outside:
                statuses.append(FamilyStatus(name, shown, "warning", outside[0].message, outside[0].fix))
            else:
                statuses.append(FamilyStatus(name, shown, "ok", "its own numbering; within the frontend's pin"
                                             if pinned else "its own numbering; no pin in the frontend's extras"))
        elif any(s is not None and not s.pinned for s in specs):
            statuses.append(FamilyStatus(name, shown, "exempt", "released on its own schedule; jaxlib does not "
                                         "hold it to its release number"))
        elif backend is None:
            statuses.append(FamilyStatus(name, shown, "mismatched", f"no {family.backend.distribution} installed",
                                         f"pip install {family.backend.distribution}"))
        else:
            key = policy.release_key(policy.parse_version(backend.version))
            wrong_dists = [d for d in dists if policy.release_key(policy.parse_version(d.version)) != key]
            if wrong_dists:
                aligned = " ".join(f'"{d.name}=={backend.version}"' for d in wrong_dists)
                statuses.append(FamilyStatus(name, shown, "mismatched", f"must have {family.backend.distribution}"
                                             f"'s release number {backend.version}; jaxlib skips it otherwise",
                                             f"pip install {aligned}"))
            else:
                statuses.append(FamilyStatus(name, shown, "ok", f"matches {family.backend.distribution} "
                                             f"{backend.version}"))
    return statuses
