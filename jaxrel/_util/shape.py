"""The typed reader every local-data boundary uses to check the shape of parsed TOML or JSON.

A :class:`Shape` names its source (a file); each method takes the raw value, the place it
sits (``tool.jaxrel.frontend``) and, for a field, its key, and returns the value typed or raises
one :class:`~jaxrel.errors.BadInput` line: ``FILE: [place] 'key' must be <expected>, not <found>``.
The callers turn what it returns into dataclasses; nothing past them sees a raw dict.

Why a small reader and not a schema library (msgspec, pydantic, jsonschema): jaxrel's core depends
only on ``packaging`` and runs inside the stdlib-only guard's world; the tables are few and small;
and each error must say the fix in the project's words (a TOML table header, a CLI option), which
the libraries' generic messages do not. This module is the one place the shape checks live.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from jaxrel.errors import BadInput

__all__ = ["REQUIRED", "Shape", "found", "is_name", "is_relative_path", "printable"]

_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_WILDCARD_NAME = re.compile(r"[A-Za-z0-9*]([A-Za-z0-9._*-]*[A-Za-z0-9*])?")
REQUIRED: Any = object()  # a default meaning "the key must be there"


def is_name(value: Any, pattern: re.Pattern[str] = _NAME) -> bool:
    """``value`` is a project name (PEP 508) of at most 100 characters."""
    return isinstance(value, str) and len(value) <= 100 and bool(pattern.fullmatch(value))


def is_relative_path(value: Any) -> bool:
    """``value`` is a path relative to a root that stays under it: no absolute path, no ``..``, no backslash,
    printable, each part at most 255 bytes and the whole at most 1024 (what file systems take)."""
    if not isinstance(value, str) or not value or not value.isprintable() or "\\" in value or len(value) > 1024:
        return False
    path = PurePosixPath(value)
    return not path.is_absolute() and ".." not in path.parts and all(
        len(part.encode("utf-8", "surrogatepass")) <= 255 for part in path.parts)


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\r``, ``\\x00``): an error stays one line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def found(value: Any) -> str:
    """What a value is, shortly, for an error message (``int 5``, ``a table``, ``'abc…'``)."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return repr(value[:60] + ("…" if len(value) > 60 else ""))
    if isinstance(value, int):
        return f"the integer {value}" if value.bit_length() < 200 else f"an integer of {value.bit_length()} bits"
    return f"{type(value).__name__} {str(value)[:40]}"


class Shape:
    """Checks the shape of values parsed from one ``source``; errors are one line of ``error_type``."""

    def __init__(self, source: str, error_type: type[BadInput] = BadInput) -> None:
        self.source = source
        self.error_type = error_type

    def error(self, where: str, problem: str) -> BadInput:
        return self.error_type(printable(f"{self.source}: [{where}] {problem}"))

    def table(self, value: Any, where: str, keys: set[str] | None = None) -> dict[str, Any]:
        """A table (JSON object) whose keys are all in ``keys`` (any keys when ``None``)."""
        if not isinstance(value, dict):
            raise self.error(where, f"must be a table, not {found(value)}")
        if keys is not None:
            unknown = sorted(set(value) - keys)
            if unknown:
                raise self.error(where, f"unknown key {unknown[0][:60]!r} (allowed: {', '.join(sorted(keys))})")
        return value

    def field(self, table: dict[str, Any], key: str, where: str, check: Callable[[Any], bool], expected: str,
              default: Any = REQUIRED) -> Any:
        """``table[key]`` when ``check`` accepts it; ``default`` when absent (required without one)."""
        if key not in table:
            if default is REQUIRED:
                raise self.error(where, f"missing required key {key!r} ({expected})")
            return default
        value = table[key]
        if not check(value):
            raise self.error(where, f"{key!r} must be {expected}, not {found(value)}")
        return value

    def string(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED) -> Any:
        """A non-empty string (or ``default`` when absent)."""
        return self.field(table, key, where, lambda v: isinstance(v, str) and bool(v.strip()),
                          "a non-empty string", default)

    def optional_string(self, table: dict[str, Any], key: str, where: str) -> str | None:
        """A non-empty string, or ``None`` when absent."""
        value: str | None = self.string(table, key, where, None)
        return value

    def name(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED,
             wildcard: bool = False) -> Any:
        """A project name (PEP 508: letters, digits, ``._-``; ``*`` too with ``wildcard``), at most 100 long."""
        pattern = _WILDCARD_NAME if wildcard else _NAME
        expected = "a project name" + (" (only '*' as a wildcard)" if wildcard else "") + ", at most 100 characters"
        return self.field(table, key, where, lambda v: is_name(v, pattern), expected, default)

    def module(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED) -> Any:
        """A dotted import name (``jax_plugins.xla_cuda12``)."""
        return self.field(table, key, where, lambda v: isinstance(v, str) and len(v) <= 200 and all(
            part.isidentifier() for part in v.split(".")), "a dotted import name", default)

    def label(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED) -> Any:
        """A short printable label (a plugin set's name)."""
        return self.field(table, key, where, lambda v: isinstance(v, str) and 0 < len(v) <= 100 and v.isprintable()
                          and bool(v.strip()), "a printable name of at most 100 characters", default)

    def boolean(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.field(table, key, where, lambda v: isinstance(v, bool), "true or false", default)

    def integer(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED,
                minimum: int = 0) -> Any:
        """An integer (not a boolean) of at least ``minimum``."""
        expected = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        return self.field(table, key, where, lambda v: isinstance(v, int) and not isinstance(v, bool)
                          and v >= minimum, expected, default)

    def strings(self, table: dict[str, Any], key: str, where: str, default: Any = REQUIRED,
                expected: str = "a list of non-empty strings") -> Any:
        """A list of non-empty strings (a tuple is returned)."""
        value = self.field(table, key, where, lambda v: isinstance(v, list) and all(
            isinstance(item, str) and item.strip() for item in v), expected, default)
        return tuple(value) if isinstance(value, list) else value

    def array(self, value: Any, where: str) -> list[Any]:
        """An array (its items are checked by the caller)."""
        if not isinstance(value, list):
            raise self.error(where, f"must be an array, not {found(value)}")
        return value
