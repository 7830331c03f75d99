"""Read and rewrite version strings at their declared locations, exactly and atomically.

A :class:`~jaxrel.release.config.Location` is a dotted key in a TOML file (rewritten with
tomlkit, so comments and layout stay) or a top-level string assignment in a Python or
Starlark file (rewritten by replacing only the literal's bytes). Callers write the results
with :func:`jaxrel._util.atomic.write_all_atomically`.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jaxrel._util.atomic import read_exactly
from jaxrel._util.literals import line_starts, span
from jaxrel.errors import BadInput
from jaxrel.release.config import Location


class LocationError(BadInput):
    """A declared version location that is missing, unreadable or not a string."""


def _file(root: Path, location: Location) -> str:
    try:
        return read_exactly(root / location.file)
    except FileNotFoundError:
        raise LocationError(f"{location}: {location.file} does not exist; fix the path in "
                            "[tool.jaxrel.release] or restore the file") from None
    except UnicodeDecodeError as error:
        raise LocationError(f"{location}: {location.file} is not UTF-8 text (byte {error.start}); "
                            "save it as UTF-8") from None
    except OSError as error:
        raise LocationError(f"{location}: cannot read {location.file} ({error.strerror})") from None


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
        node: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LocationError(f"{location}: {location.file} is not valid TOML ({error})") from None
    for part in location.key.split("."):
        if not isinstance(node, dict) or part not in node:
            dynamic = node.get("dynamic", []) if isinstance(node, dict) else []
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


def rewrite(text: str, location: Location, version: str) -> str:
    """``text`` with the string at ``location`` replaced by ``version`` (quotes kept)."""
    if location.kind == "toml":
        import tomlkit  # the release extra

        document = tomlkit.parse(text)
        _toml_value(text, location)  # a clear error when missing
        *parents, last = location.key.split(".")
        table: Any = document
        for part in parents:
            table = table[part]
        table[last] = version
        return tomlkit.dumps(document)
    node = _assignment(text, location)
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise LocationError(f"{location}: not a string literal in {location.file}; cannot move it")
    source = ast.get_source_segment(text, node) or '""'
    quote = "'" if source.lstrip("rbuRBU")[:1] == "'" else '"'
    data = text.encode("utf-8")
    start, end = span(line_starts(data), node)
    return (data[:start] + f"{quote}{version}{quote}".encode() + data[end:]).decode("utf-8")


def requirement_on(pyproject: str, distribution: str) -> tuple[int, Requirement] | None:
    """The index and requirement in ``[project].dependencies`` naming ``distribution``."""
    dependencies = tomllib.loads(pyproject).get("project", {}).get("dependencies", [])
    for index, text in enumerate(dependencies):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == canonicalize_name(distribution):
            return index, requirement
    return None


def rewrite_requirement(pyproject: str, distribution: str, specifier: str) -> str:
    """``pyproject`` with the dependency on ``distribution`` given ``specifier`` (extras, markers kept)."""
    import tomlkit

    found = requirement_on(pyproject, distribution)
    if found is None:
        raise LocationError(f"no dependency on {distribution} in [project].dependencies")
    index, requirement = found
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    marker = f"; {requirement.marker}" if requirement.marker else ""
    document = tomlkit.parse(pyproject)
    document["project"]["dependencies"][index] = f"{requirement.name}{extras}{specifier}{marker}"
    return tomlkit.dumps(document)
