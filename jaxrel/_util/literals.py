"""Literals in source text: byte offsets of ``ast`` nodes (to replace one literal and nothing else;
standard library only). ``ast`` columns count UTF-8 bytes, so offsets are into the encoded source.

Also the one reader of module-level literal assignments (``_version = "0.4.30"``) and of the XLA FFI
API version in a C header, for every module but the stdlib-only guard and runtime gating."""

from __future__ import annotations

import ast

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel.errors import JaxrelError

__all__ = ["VERSION_VARIABLES", "assigned_int", "assigned_string", "checked_version", "ffi_api_in", "is_version",
    "line_starts", "module_literals", "read_assignment", "read_ffi_api", "read_text", "read_version",
    "read_version_file", "span"]


def line_starts(source: bytes) -> list[int]:
    """The byte offset at which each line of ``source`` starts (index 0 is line 1)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def span(starts: list[int], node: ast.expr) -> tuple[int, int]:
    """``node``'s (start, end) byte offsets, given its source's :func:`line_starts`."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def module_literals(source: str) -> dict[str, object]:
    """Module-level ``name = <literal>`` (and ``name: T = <literal>``) assignments of ``source``.

    Read with ``ast`` when this Python can parse the source; otherwise line by line (syntax
    newer than this interpreter). Only literals count: ``_version = compute()`` is absent.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _literals_by_line(source)
    found: dict[str, object] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                try:
                    found.setdefault(target.id, ast.literal_eval(value))
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    continue
    return found


def _literals_by_line(source: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for line in source.splitlines():
        name, sep, value = line.partition("=")
        name = name.split(":")[0].strip()
        value = value.split("#")[0].strip()
        if not sep or not name.isidentifier() or name in found or line[:1].isspace():
            continue
        if value[:1] in ("'", '"') and value.find(value[0], 1) > 0:
            found[name] = value[1:value.find(value[0], 1)]
        elif value.isascii() and value.isdigit() and len(value) <= 4300:
            found[name] = int(value)
    return found


def assigned_string(source: str, variables: tuple[str, ...]) -> str | None:
    """The string literal assigned at module level to the first of ``variables`` that has one."""
    found = module_literals(source)
    return next((value for name in variables if isinstance(value := found.get(name), str)), None)


def assigned_int(source: str, variable: str) -> int | None:
    """The integer literal assigned at module level to ``variable``; ``None`` if there is none."""
    value = module_literals(source).get(variable)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_text(path: str) -> str | None:
    """A text file's contents (UTF-8, undecodable bytes replaced); ``None`` when it is not a readable
    regular file (a FIFO is opened without waiting for a writer, then refused)."""
    try:
        return localfiles.read_bytes(path).decode("utf-8", errors="replace")
    except JaxrelError:
        return None


def read_assignment(path: str, variables: tuple[str, ...]) -> str | None:
    """:func:`assigned_string` of the file at ``path``; ``None`` when it cannot be read."""
    text = read_text(path)
    return None if text is None else assigned_string(text, variables)


VERSION_VARIABLES = ("_release_version", "_version", "__version__")


def is_version(text: str) -> bool:
    """Whether :func:`jaxrel.policy.parse_version` takes ``text``."""
    try:
        policy.parse_version(text)
    except policy.VersionError:
        return False
    return True


def checked_version(value: str | None, file: str, field: str) -> str | None:
    """``value``, read from ``field`` of ``file``, if it is a PEP 440 version (``None`` stays ``None``: unset).

    A word where a version belongs (``"latest"``, a template's ``"{version}"``, a merge gone wrong) is
    :class:`~jaxrel.policy.VersionError` (exit 2) naming the file, the field and the value: every reader of a
    version file checks here, once, so none carries the word on to where it crashes."""
    if value is None:
        return None
    try:
        policy.parse_version(value, f"{file}: {field} =")
    except policy.VersionError as error:
        raise policy.VersionError(f"{error}; correct it in {file}") from None
    return value


def read_version(path: str, variables: tuple[str, ...]) -> str | None:
    """:func:`read_assignment`, checked by :func:`checked_version` (a word there is one line, exit 2)."""
    text = read_text(path)
    if text is None:
        return None
    found = module_literals(text)
    name = next((name for name in variables if isinstance(found.get(name), str)), None)
    return None if name is None else checked_version(str(found[name]), path, name)


def read_version_file(path: str) -> str | None:
    """``_release_version``, else ``_version`` or ``__version__``, from a version module's source, checked.

    JAX's version modules hold ``_version = "X.Y.Z"`` and a build-stamped ``_release_version``
    (``None`` in unstamped builds); other projects use ``__version__``.
    """
    return read_version(path, VERSION_VARIABLES)


def ffi_api_in(header_text: str) -> str | None:
    """``MAJOR.MINOR`` of the XLA FFI API that the text of a ``c_api.h`` defines; ``None`` if absent."""
    found = {}
    for line in header_text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "#define" and words[2].isascii() and words[2].isdigit() \
                and len(words[2]) <= 9:
            if words[1] in ("XLA_FFI_API_MAJOR", "XLA_FFI_API_MINOR"):
                found[words[1]] = words[2]
    if len(found) != 2:
        return None
    return f"{int(found['XLA_FFI_API_MAJOR'])}.{int(found['XLA_FFI_API_MINOR'])}"


def read_ffi_api(header: str) -> str | None:
    """:func:`ffi_api_in` of the ``c_api.h`` at ``header``; ``None`` when it cannot be read."""
    text = read_text(header)
    return None if text is None else ffi_api_in(text)
