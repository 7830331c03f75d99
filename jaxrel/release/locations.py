"""Read and rewrite version strings at their declared locations, exactly and atomically.

A :class:`~jaxrel.release.config.Location` is a dotted key in a TOML file (rewritten with
tomlkit, so comments and layout stay) or a top-level string assignment in a Python or
Starlark file (rewritten by replacing only the literal's bytes). Callers write the results
with :func:`jaxrel._util.atomic.write_all_atomically`.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from jaxrel._util import localfiles
from jaxrel._util.literals import line_starts, span
from jaxrel.errors import BadInput, EnvironmentFailure
from jaxrel.release.config import Location
from jaxrel.release.pyprojects import project_table

__all__ = ["LocationError", "read", "read_text", "requirement_on", "rewrite", "rewrite_requirement"]


class LocationError(BadInput):
    """A declared version location that is missing, unreadable or not a string."""


def _file(root: Path, location: Location) -> str:
    path = localfiles.inside(root, location.file, what=f"{location}:")
    if not path.exists():
        raise LocationError(f"{location}: {location.file} does not exist; fix the path in "
                            "[tool.jaxrel.release] or restore the file")
    try:
        return localfiles.read_text(path)
    except BadInput as error:
        raise LocationError(f"{location}: {error}") from None


def _assignment(text: str, location: Location) -> ast.expr:
    try:
        module = ast.parse(text)
    except SyntaxError as error:
        raise LocationError(f"{location}: {location.file} does not parse ({error.msg}, line {error.lineno})") from None
    except ValueError:  # Python 3.11.0-3.11.3 (a NUL byte)
        raise LocationError(f"{location}: {location.file} does not parse (it holds a NUL byte)") from None
    except (RecursionError, MemoryError):
        raise LocationError(f"{location}: {location.file} is nested too deeply for Python's parser") from None
    found: list[ast.expr] = []
    for node in module.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == location.key for t in targets):
            assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
            found.append(node.value)
    if len(found) > 1:
        lines = ", ".join(str(value.lineno) for value in found)
        raise LocationError(f"{location}: {location.key} is assigned {len(found)} times in {location.file} "
                            f"(lines {lines}); keep one assignment so the version has one source")
    if found:
        return found[0]
    raise LocationError(f"{location}: no top-level `{location.key} = \"...\"` in {location.file}; "
                        "assign the version there or fix [tool.jaxrel.release]")


def _toml_value(text: str, location: Location) -> Any:
    try:
        node: Any = localfiles.loads_toml(text, location.file)
    except BadInput as error:
        raise LocationError(f"{location}: {error}") from None
    for part in location.key.split("."):
        if not isinstance(node, dict) or part not in node:
            dynamic = node.get("dynamic", []) if isinstance(node, dict) else []
            dynamic = dynamic if isinstance(dynamic, list) else []
            hint = ("it is dynamic; declare the file that sets it instead" if part in dynamic
                    else "add it or fix [tool.jaxrel.release]")
            raise LocationError(f"{location}: no key {location.key!r} in {location.file}; {hint}")
        node = node[part]
    return node


def read_text(text: str, location: Location) -> str | None:
    """The version at ``location`` in ``text``; ``None`` when assigned ``None``."""
    if location.kind == "toml":
        value = _toml_value(text, location)
    else:
        node = _assignment(text, location)
        value = node.value if isinstance(node, ast.Constant) else ...
    if value is None or isinstance(value, str):
        return value
    raise LocationError(f"{location}: not a string literal in {location.file}; assign the version as \"X.Y.Z\"")


def read(root: Path, location: Location) -> str | None:
    """The version string at ``location`` under ``root``."""
    return read_text(_file(root, location), location)


def _tomlkit() -> Any:
    """tomlkit (the release extra: it rewrites TOML keeping comments), or one line saying how to install it."""
    try:
        import tomlkit
    except ImportError:
        raise EnvironmentFailure("rewriting a TOML version needs tomlkit, which is not installed; "
                                 "pip install 'jaxrel[release]'") from None
    return tomlkit


def rewrite(text: str, location: Location, version: str) -> str:
    """``text`` with the string at ``location`` replaced by ``version`` (quotes kept)."""
    if location.kind == "toml":
        tomlkit = _tomlkit()
        document = tomlkit.parse(text)
        _toml_value(text, location)  # a clear error when missing
        *parents, last = location.key.split(".")
        table: Any = document
        for part in parents:
            table = table[part]
        table[last] = version
        return str(tomlkit.dumps(document))
    node = _assignment(text, location)
    if not (isinstance(node, ast.Constant) and (isinstance(node.value, str) or node.value is None)):
        raise LocationError(f"{location}: not a string literal in {location.file}; cannot move it")
    source = ast.get_source_segment(text, node) or '""'
    quote = "'" if source.lstrip("rbuRBU")[:1] == "'" else '"'
    data = text.encode("utf-8")
    start, end = span(line_starts(data), node)
    return (data[:start] + f"{quote}{version}{quote}".encode() + data[end:]).decode("utf-8")


def requirement_on(pyproject: str, distribution: str, file: str = "pyproject.toml") -> tuple[int, Requirement] | None:
    """The index and requirement in ``[project].dependencies`` naming ``distribution``.

    A ``dependencies`` that is not a list of strings, an entry that does not parse, or
    ``distribution`` listed twice is bad input (:mod:`jaxrel.release.pyprojects`)."""
    return project_table(pyproject, file).requirement_on(distribution)


def rewrite_requirement(pyproject: str, distribution: str, specifier: str, file: str = "pyproject.toml") -> str:
    """``pyproject`` with the dependency on ``distribution`` given ``specifier`` (extras, markers kept)."""
    tomlkit = _tomlkit()
    found = requirement_on(pyproject, distribution, file)
    if found is None:
        raise LocationError(f"{file}: no dependency on {distribution} in [project].dependencies")
    index, requirement = found
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    marker = f"; {requirement.marker}" if requirement.marker else ""
    document = tomlkit.parse(pyproject)
    document["project"]["dependencies"][index] = f"{requirement.name}{extras}{specifier}{marker}"
    return str(tomlkit.dumps(document))
