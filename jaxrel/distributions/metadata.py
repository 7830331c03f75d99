"""A distribution's core metadata (METADATA, PKG-INFO, PEP 658 files) parsed once, by packaging.

Every METADATA jaxrel reads from an index, a wheel or a cache goes through
:func:`parse_core_metadata`: :func:`packaging.metadata.parse_email` reads the headers (a line in the
description that looks like ``Requires-Dist:`` is not a header and does not count), then the fields
jaxrel uses are taken from what packaging parsed. Text over :data:`MAX_METADATA` bytes, text that
packaging cannot read as headers, or a file without ``Name``/``Version`` is refused with the error
class the caller names. Requirements stay text here; :meth:`CoreMetadata.requirements` parses them,
keeping the ones that do not parse apart so that a report can name them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.markers import Marker, default_environment
from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jaxrel.distributions.transport import MIB
from jaxrel.errors import JaxrelError

__all__ = ["MAX_METADATA", "CoreMetadata", "extra_requirements", "parse_core_metadata"]

MAX_METADATA = 4 * MIB  # jax's METADATA is about 10 KB; a larger one is not a wheel jaxrel reads


@dataclass(frozen=True)
class CoreMetadata:
    """The fields jaxrel uses, as packaging parsed them."""

    name: str
    version: str
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    provides_extra: tuple[str, ...] = ()
    project_urls: tuple[tuple[str, str], ...] = ()  # (label, URL) as written: where its source lives

    def requirements(self) -> tuple[list[Requirement], list[str]]:
        """``Requires-Dist`` parsed: the requirements, and the texts that do not parse."""
        parsed, broken = [], []
        for text in self.requires_dist:
            try:
                parsed.append(Requirement(text))
            except InvalidRequirement:
                broken.append(text)
        return parsed, broken


def parse_core_metadata(raw: bytes | str, where: str, error: type[JaxrelError]) -> CoreMetadata:
    """``raw`` METADATA as :class:`CoreMetadata`; ``error`` (naming ``where``) when it is not one."""
    size = len(raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw)
    if size > MAX_METADATA:
        raise error(f"{where}: its METADATA is {size} bytes, more than the {MAX_METADATA // MIB} MiB jaxrel reads; "
                    "not a wheel's metadata")
    try:
        fields, unparsed = parse_email(raw)
    except (ValueError, TypeError, LookupError, RecursionError) as failure:
        raise error(f"{where}: its METADATA cannot be read as headers ({str(failure)[:80]}); the file is damaged"
                    ) from None
    name, version = fields.get("name"), fields.get("version")
    if not name or not version:
        broken = next((key for key in ("name", "version") if key in unparsed), None)
        why = f"its {broken.title()} header cannot be read" if broken else "it has no Name or no Version"
        raise error(f"{where}: not a distribution's METADATA ({why}); the file is damaged")
    if "requires_dist" in unparsed or "requires-dist" in unparsed:
        raise error(f"{where}: its Requires-Dist headers cannot be read (not UTF-8?); the file is damaged")
    return CoreMetadata(
        name=str(name), version=str(version), requires_dist=tuple(fields.get("requires_dist") or ()),
        requires_python=fields.get("requires_python") or None,
        provides_extra=tuple(str(canonicalize_name(e)) for e in fields.get("provides_extra") or ()),
        project_urls=tuple((str(k), str(v)) for k, v in (fields.get("project_urls") or {}).items()),
    )


def _candidates(requirement: Requirement) -> set[str]:
    """Names that could satisfy an ``extra`` comparison in ``requirement``'s marker: its quoted literals."""
    text = str(requirement.marker)
    found, quote, start = set(), "", 0
    for at, char in enumerate(text):
        if quote:
            if char == quote:
                found.add(text[start:at])
                quote = ""
        elif char in "'\"":
            quote, start = char, at + 1
    return {str(canonicalize_name(name)) for name in found if name}


def extra_requirements(requires_dist: tuple[str, ...] | list[str], provides: tuple[str, ...] | list[str] = (),
                       environment: Mapping[str, str] | None = None) -> dict[str, list[Requirement]]:
    """Extra name → the requirements it adds, as pip decides: a requirement belongs to extra ``X`` when its
    marker is true with ``extra == X`` and false without an extra (``Marker.evaluate``), in ``environment``
    (default: this interpreter's). Candidate names are ``provides`` (``Provides-Extra``) and the literals in
    each marker. Texts that do not parse are skipped (a report names them elsewhere)."""
    base = {key: str(value) for key, value in default_environment().items()}
    base.update(environment or {})
    extras: dict[str, list[Requirement]] = {}
    for text in requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        marker: Marker | None = requirement.marker
        if marker is None:
            continue
        try:
            if marker.evaluate({**base, "extra": ""}):
                continue  # not conditional on an extra
            names = {str(canonicalize_name(p)) for p in provides} | _candidates(requirement)
            for name in sorted(names):
                if marker.evaluate({**base, "extra": name}):
                    extras.setdefault(name, []).append(requirement)
        except Exception:  # noqa: BLE001 - packaging raises UndefinedComparison and friends: an unusable marker
            continue
    return extras
