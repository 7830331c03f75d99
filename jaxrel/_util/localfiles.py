"""The one reader of local files: regular files only, never waiting, never a traceback (standard library only).

Every file jaxrel reads from the user's disk (a family's ``pyproject.toml``, a version file, a bump
target, ``~/.pypirc``, ``WORKSPACE``, ``--matrix`` JSON, ``manifest.json``, a changelog) comes
through here. A FIFO or a device is opened without waiting for a writer (``O_NONBLOCK``) and
refused; a file larger than the cap, bytes that are not UTF-8, TOML or JSON nested thousands deep,
integers longer than Python converts, a duplicate key or option: each is one
:class:`~jaxrel.errors.BadInput` (exit 2) naming the file, what was expected and what was found.
Parsers past this module get Python values, never bytes; their shape is checked by
:mod:`jaxrel._util.shape`.
"""

from __future__ import annotations

import configparser
import errno
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from jaxrel.errors import BadInput, EnvironmentFailure, JaxrelError

__all__ = ["LIMIT", "decode", "inside", "is_regular", "load_cached_json", "load_ini", "load_json", "load_toml",
           "loads_json", "loads_toml", "not_regular", "read_bytes", "read_text"]

LIMIT = 64 << 20  # bytes: no configuration, manifest or source file jaxrel reads is near this

_NOT_REGULAR = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
                stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def _kind(mode: int) -> str:
    return _NOT_REGULAR.get(stat.S_IFMT(mode), "not a regular file")


def not_regular(path: str | Path) -> str | None:
    """What ``path`` is when it is not a regular file ("a FIFO", "a dangling symlink", "missing", …), ``None`` when it
    is one (symlinks followed); never opens it, so a FIFO cannot block."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a dangling symlink" if os.path.islink(path) else "missing"
    except (OSError, ValueError) as error:
        return f"unreadable ({getattr(error, 'strerror', None) or error})"
    return None if stat.S_ISREG(mode) else _kind(mode)


def is_regular(path: str | Path) -> bool:
    """``path`` is a regular file (symlinks followed); never opens it, so a FIFO cannot block."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_bytes(path: str | Path, *, what: str = "", limit: int = LIMIT) -> bytes:
    """The bytes of the regular file at ``path``; :class:`BadInput` when it is missing, not a regular
    file (a FIFO is opened without waiting, then refused) or larger than ``limit`` bytes;
    :class:`EnvironmentFailure` when the system refuses to read it (permissions).

    ``what`` names the file for the user (``--matrix``, ``the version file``); the path is always named.
    """
    name = f"{what} {path}" if what else str(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise BadInput(f"{name}: file not found; check the path") from None
    except IsADirectoryError:
        raise BadInput(f"{name}: a directory, not a file; pass the file's path") from None
    except ValueError:  # a NUL byte in the path
        raise BadInput(f"{name!r}: not a usable path (it holds a NUL byte)") from None
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.ENODEV):  # a socket or a device without a driver
            raise BadInput(f"{name}: not a regular file; pass a regular file") from None
        raise EnvironmentFailure(f"{name}: cannot read it ({error.strerror}); check its permissions") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise BadInput(f"{name}: {_kind(mode)}, not a regular file; pass a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(descriptor, 1 << 20):
            size += len(chunk)
            if size > limit:
                raise BadInput(f"{name}: larger than {limit >> 20} MiB; this is not the file jaxrel expects there")
            chunks.append(chunk)
    except OSError as error:
        raise EnvironmentFailure(f"{name}: cannot read it ({error.strerror}); check the disk") from None
    finally:
        os.close(descriptor)
    return b"".join(chunks)


def decode(data: bytes, name: str) -> str:
    """``data`` as UTF-8 (line ends kept as they are); :class:`BadInput` naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"{name}: not UTF-8 text (byte {error.start} is {data[error.start]:#04x}); "
                       "save it as UTF-8") from None


def read_text(path: str | Path, *, what: str = "", limit: int = LIMIT) -> str:
    """The UTF-8 text of the regular file at ``path``, line ends as they are (see :func:`read_bytes`)."""
    return decode(read_bytes(path, what=what, limit=limit), f"{what} {path}" if what else str(path))


def loads_toml(text: str, name: str) -> dict[str, Any]:
    """``text`` parsed as TOML; :class:`BadInput` naming ``name`` for a syntax error, a duplicate key,
    nesting deeper than Python recurses, or an integer longer than Python converts."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{name}: not valid TOML ({error}); fix the syntax") from None
    except RecursionError:
        raise BadInput(f"{name}: nested too deeply to read; flatten the tables and arrays") from None
    except ValueError as error:  # int/str conversion limits ("Exceeds the limit (4300 digits)")
        raise BadInput(f"{name}: a value jaxrel cannot read ({str(error)[:80]}); shorten it") from None


def load_toml(path: str | Path, *, what: str = "") -> dict[str, Any]:
    """The TOML file at ``path``, read by :func:`read_text` and parsed by :func:`loads_toml`."""
    return loads_toml(read_text(path, what=what), f"{what} {path}" if what else str(path))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key[:60]!r} is given twice")
        found[key] = value
    return found


def loads_json(text: str | bytes, name: str) -> Any:
    """``text`` parsed as strict JSON (no NaN/Infinity, no key given twice); :class:`BadInput` naming
    ``name`` for a syntax error, nesting deeper than Python recurses, or an integer longer than Python
    converts."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique)
    except RecursionError:
        raise BadInput(f"{name}: nested too deeply to read; this is not the JSON jaxrel expects") from None
    except UnicodeDecodeError as error:
        raise BadInput(f"{name}: not UTF-8 JSON (byte {error.start}); this is not the JSON jaxrel expects") from None
    except ValueError as error:  # JSONDecodeError, conversion limits, NaN
        raise BadInput(f"{name}: not JSON ({str(error)[:120]})") from None


def load_json(path: str | Path, *, what: str = "") -> Any:
    """The JSON file at ``path``, read by :func:`read_text` and parsed by :func:`loads_json`."""
    name = f"{what} {path}" if what else str(path)
    return loads_json(read_text(path, what=what), name)


def load_cached_json(path: str | Path) -> Any:
    """An entry of jaxrel's own cache, parsed; ``None`` when it is missing or damaged in any way (not
    JSON, nested too deep, not a regular file, unreadable). A cache is never trusted: a damaged entry
    is removed, so it is fetched or computed again and rewritten, never a crash. The caller checks the
    shape of what it gets, as for any JSON."""
    try:
        return load_json(path)
    except JaxrelError:
        try:
            if os.path.lexists(path):
                os.unlink(path)
        except OSError:
            pass  # a read-only cache: the entry stays a miss
        return None


def load_ini(path: str | Path, *, what: str = "") -> configparser.RawConfigParser:
    """The INI file at ``path`` (``~/.pypirc``), strict: a duplicate section or option, a line outside
    every section or text that is not UTF-8 is :class:`BadInput`; values are never interpolated."""
    name = f"{what} {path}" if what else str(path)
    text = read_text(path, what=what)
    parser = configparser.RawConfigParser(strict=True)
    try:
        parser.read_string(text, source="the file")  # the path is named once, at the start of the message
    except configparser.Error as error:
        first = str(error).splitlines()[0][:160]
        raise BadInput(f"{name}: not a valid INI file ({first}); fix that line") from None
    return parser


def inside(root: Path, relative: str, *, what: str) -> Path:
    """``root / relative`` when it stays inside ``root`` with every symlink resolved; :class:`BadInput`
    naming ``what`` when the path is absolute, climbs out with ``..`` or leads out through a symlink."""
    base = root.resolve()
    target = (base / relative).resolve()
    if Path(relative).is_absolute() or not target.is_relative_to(base):
        raise BadInput(f"{what} {relative!r} leads outside {root} (to {target}); give a path inside the tree")
    return target
