"""Read and move the XLA pin: the ``xla_ffi(name = "xla", ...)`` call in a Bazel ``WORKSPACE``.

The pin names the XLA commit (provenance) and the backend wheel whose FFI headers extensions
compile against, by file name and sha256 (see ``bazel/xla.bzl``). :func:`read_pin` parses the
call (Starlark's call syntax is Python's); :func:`rewrite` replaces only the string literals
of the pinned fields, so comments and formatting survive; :func:`write_pin` replaces the file
atomically. :func:`pin_for` makes a pin for a backend release from the index listing (file
name and sha256) and the known XLA commits (``releasedata.xla_commits``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.tags import Tag
from packaging.version import Version

from jaxrel import releasedata
from jaxrel._util import localfiles
from jaxrel._util.atomic import read_exactly, write_atomically
from jaxrel._util.literals import line_starts, span
from jaxrel._util.shape import is_name
from jaxrel.distributions.index import IndexFile, Listing
from jaxrel.errors import BadInput

__all__ = ["FIELDS", "PinError", "RULE", "XlaPin", "checked_pin", "choose_wheel", "pin_facts", "pin_for", "read_pin",
    "rewrite", "write_pin"]

RULE = "xla_ffi"
FIELDS = ("commit", "backend", "backend_version", "wheel", "sha256")


class PinError(BadInput):
    """The pin cannot be read, made or written; the message names the fix."""


@dataclass(frozen=True)
class XlaPin:
    """What ``WORKSPACE`` pins: the XLA commit and the backend wheel its FFI headers come from."""

    commit: str
    backend: str
    backend_version: str
    wheel: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class _Located:
    pin: XlaPin
    spans: dict[str, tuple[int, int]]  # field -> (start, end) byte offsets of its string literal
    line: int = 0


def _locate(source: bytes, where: str, name: str = "xla") -> _Located:
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as error:
        raise PinError(f"{where}:{error.lineno}: cannot parse ({error.msg}); fix the syntax first") from None
    except ValueError:  # Python 3.11.0-3.11.3 (a NUL byte)
        raise PinError(f"{where}: cannot parse (it holds a NUL byte); fix the file first") from None
    except (RecursionError, MemoryError):
        raise PinError(f"{where}: nested too deeply for Python's parser; fix the file first") from None
    starts = line_starts(source)
    found: list[_Located] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == RULE):
            continue
        named = next((k.value for k in node.keywords if k.arg == "name"), None)
        if not (isinstance(named, ast.Constant) and named.value == name):
            continue
        given = [k.arg for k in node.keywords if k.arg]
        twice = sorted({arg for arg in given if given.count(arg) > 1})
        if twice:
            raise PinError(f"{where}:{node.lineno}: {RULE}(name = {name!r}) sets {twice[0]} {given.count(twice[0])} "
                           "times; keep one (Bazel refuses a repeated argument too)")
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        values, spans = {}, {}
        for field in FIELDS:
            value = keywords.get(field)
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise PinError(f"{where}:{node.lineno}: {RULE}(name = {name!r}) needs {field} as a string literal; "
                               f"write {field} = \"...\" in the call")
            spans[field] = span(starts, value)
            values[field] = value.value
        found.append(_Located(checked_pin(values, f"{where}:{node.lineno}"), spans, node.lineno))
    if len(found) > 1:
        lines = ", ".join(str(located.line) for located in found)
        raise PinError(f"{where}: {len(found)} {RULE}(name = {name!r}) calls (lines {lines}); keep exactly one")
    if not found:
        raise PinError(f"{where}: no {RULE}(name = {name!r}, ...) call; add one (see bazel/xla.bzl)")
    return found[0]


_HEX = {"commit": 40, "sha256": 64}


def checked_pin(values: dict[str, str], where: str) -> XlaPin:
    """An :class:`XlaPin` whose every field is what it must be before it is read or written into WORKSPACE:
    the commit 40 and the sha256 64 lowercase hex digits, the backend a project name, its version PEP 440,
    the wheel one file name ending in ``.whl`` (a value from the index is checked here too)."""
    for field, digits in _HEX.items():
        value = values[field]
        if len(value) != digits or any(c not in "0123456789abcdef" for c in value):
            raise PinError(f"{where}: {field} {value[:80]!r} is not {digits} lowercase hex digits; "
                           f"{'pass --commit SHA' if field == 'commit' else 'use an index that lists sha256 hashes'}")
    try:
        Version(values["backend_version"])
    except ValueError:
        raise PinError(f"{where}: backend_version {values['backend_version'][:40]!r} is not a "
                       "PEP 440 version; move the pin with jaxrel xla pin --jaxlib X") from None
    backend, wheel = values["backend"], values["wheel"]
    if not is_name(backend):
        raise PinError(f"{where}: backend {backend[:80]!r} is not a project name (e.g. jaxlib)")
    if not re.fullmatch(r"[A-Za-z0-9_.+!-]{1,250}\.whl", wheel) or wheel.startswith("."):
        raise PinError(f"{where}: wheel {wheel[:80]!r} is not a wheel file name (one path component ending in .whl)")
    return XlaPin(**values)


def read_pin(workspace: Path, name: str = "xla") -> XlaPin:
    """The pin in ``workspace`` (a ``WORKSPACE`` file)."""
    try:
        source = localfiles.read_bytes(workspace, what="the workspace")
    except BadInput as error:
        raise PinError(f"cannot read {error} (or pass --workspace PATH)") from None
    return _locate(source, str(workspace), name).pin


def rewrite(source: str, pin: XlaPin, where: str = "WORKSPACE", name: str = "xla") -> str:
    """``source`` with the pin's string literals replaced by ``pin``'s values, nothing else touched;
    a pin whose fields are not what they must be (:func:`checked_pin`) is refused, never written."""
    checked_pin(pin.to_json(), "the new pin")
    data = source.encode("utf-8")
    located = _locate(data, where, name)
    for field in sorted(FIELDS, key=lambda f: located.spans[f][0], reverse=True):
        start, end = located.spans[field]
        literal = '"' + getattr(pin, field).replace("\\", "\\\\").replace('"', '\\"') + '"'
        data = data[:start] + literal.encode("utf-8") + data[end:]
    return data.decode("utf-8")


def write_pin(workspace: Path, pin: XlaPin, name: str = "xla") -> bool:
    """Rewrite ``workspace`` in place (atomically); ``False`` when it already held ``pin``."""
    source = read_exactly(workspace)
    updated = rewrite(source, pin, str(workspace), name)
    if updated == source:
        return False
    write_atomically(workspace, updated)
    return True


def choose_wheel(files: Sequence[IndexFile], preferred_tags: Sequence[Tag]) -> IndexFile | None:
    """The wheel to take headers from: the first of ``preferred_tags`` (best first) that one supports,
    else the first linux x86_64 wheel by name; yanked files never."""
    wheels = [f for f in files if f.is_wheel and f.yanked is None]
    for tag in preferred_tags:
        for wheel in wheels:
            if tag in wheel.tags:
                return wheel
    linux = sorted((w for w in wheels if w.filename.endswith("x86_64.whl") and "linux" in w.filename),
                   key=lambda w: w.filename)
    return linux[0] if linux else None


def pin_for(profile: str, backend: str, version: str, listing: Listing, preferred_tags: Sequence[Tag],
            commit: str | None = None) -> XlaPin:
    """A pin to ``backend==version``: a wheel from ``listing``, the XLA commit known for it (or ``commit``)."""
    files = listing.files_for(version)
    if not files:
        known = ", ".join(str(v) for v in listing.versions()[-5:])
        raise PinError(f"{backend} {version} is not on the index (newest: {known}); pick a released version")
    wheel = choose_wheel(files, preferred_tags)
    if wheel is None:
        yanked = sum(1 for f in files if f.yanked is not None)
        why = f"{yanked} of its {len(files)} files are yanked" if yanked else "it has no wheel"
        raise PinError(f"{backend} {version} has no usable wheel on the index ({why}); pick another release")
    if not wheel.sha256:
        raise PinError(f"the index lists no sha256 for {wheel.filename}; use an index that publishes hashes")
    known_commit = releasedata.xla_commits(profile, backend).get(version)
    if commit is None and known_commit is None:
        known = ", ".join(releasedata.xla_commits(profile, backend)) or "none"
        raise PinError(f"no known XLA commit for {backend} {version} (known: {known}); pass --commit SHA, the XLA "
                       f"commit in jax's third_party/xla/revision.bzl at that release's tag")
    chosen = commit or known_commit
    assert chosen is not None
    if len(chosen) != 40 or any(c not in "0123456789abcdef" for c in chosen):
        raise PinError(f"--commit {chosen!r} is not a full 40-hex-digit git commit")
    return checked_pin({"commit": chosen, "backend": backend, "backend_version": version, "wheel": wheel.filename,
                        "sha256": wheel.sha256}, f"the index's answer for {backend} {version}")


def pin_facts(profile: str, pin: XlaPin) -> dict[str, str | None]:
    """What a pin means for extensions: its XLA FFI API and the first backend release providing it."""
    try:
        row = releasedata.builtin(profile).get(pin.backend, {}).get(pin.backend_version, {})
    except OSError:
        row = {}
    api = row.get("xla_ffi_api")
    minimum = releasedata.first_release_with_ffi_api(profile, pin.backend, api) if api else None
    return {"xla_ffi_api": api, "minimum_backend": minimum}
