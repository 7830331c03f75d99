"""The version rules of a split-wheel family, as pure functions on ``packaging.version``.

For frontend F with minimum backend M, backend B and plugins P:

* ``backend-at-least-minimum``: B >= M.
* ``backend-not-newer-than-frontend``: B <= F.
* ``minimum-not-newer-than-frontend``: M <= F.
* ``minimum-is-released``: M is a final release (no rc/dev/local part) and, when the
  released backends are known (and reach back to M), one of them.
* ``backend-installed``: there is a backend at all (environments only).
* ``plugin-matches-backend``: each pinned plugin has B's release number (ROCm exempt).
* ``backend-release-has-frontend-release`` / ``frontend-supports-latest-backend``:
  release-plan rules, see :func:`check_release`.

How versions take part (this agrees with real jax's check on every real pair):

* Comparison is on the PEP 440 *release segment*, as a tuple of ints whose trailing
  zeros are insignificant: ``0.4.30 == 0.4.30.0`` (real jax's regex would call
  ``0.4.30.0`` newer; PEP 440 says they are one version, and no release is spelled so).
  ``0.12.0.1`` is a distinct release newer than ``0.12.0``.
* Pre-release, dev, post and local parts are ignored for compatibility: a frontend at
  HEAD ``0.4.36.dev20241119+gabc`` admits backends up to 0.4.36; a frontend
  ``0.5.0rc1`` admits backend ``0.5.0``; ``0.12.0.post1`` is the 0.12.0 line.
* A minimum must be a final release (post-releases count as final).
* An epoch (``1!0.4.30``) is refused as an input error: jax's regex would read it
  as version ``1``.

The policy does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from jaxrel._util.text import shorten
from jaxrel.errors import BadInput

__all__ = [
    "MAX_VERSION_LENGTH", "Pin", "Rule", "Verdict", "VersionError", "Violation", "check_release", "is_final",
    "parse_version", "release_key", "release_text", "verdict", "versions_or_specifier",
]


class Rule(StrEnum):
    """The rule ids, as printed by ``verdict``/``doctor`` and written to JSON."""

    BACKEND_AT_LEAST_MINIMUM = "backend-at-least-minimum"
    BACKEND_NOT_NEWER_THAN_FRONTEND = "backend-not-newer-than-frontend"
    MINIMUM_NOT_NEWER_THAN_FRONTEND = "minimum-not-newer-than-frontend"
    MINIMUM_IS_RELEASED = "minimum-is-released"
    BACKEND_INSTALLED = "backend-installed"
    PLUGIN_MATCHES_BACKEND = "plugin-matches-backend"
    BACKEND_RELEASE_HAS_FRONTEND_RELEASE = "backend-release-has-frontend-release"
    FRONTEND_SUPPORTS_LATEST_BACKEND = "frontend-supports-latest-backend"
    RUNTIME_WITHIN_EXTRA_PIN = "runtime-within-extra-pin"


class VersionError(BadInput):
    """A version string that cannot take part in the rules."""


@dataclass(frozen=True)
class Pin:
    """A distribution at a version (``jax==0.12.0``)."""

    name: str
    version: Version

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Violation:
    """One broken rule: its id, what is wrong, and the command that fixes it."""

    rule: Rule
    message: str
    fix: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The outcome of applying the rules to one set of pins."""

    violations: tuple[Violation, ...]
    checked: tuple[Rule, ...]
    skipped: dict[Rule, str] = field(default_factory=dict)
    allowed_backend: str | None = None
    alternatives: tuple[str, ...] = ()
    warnings: tuple[Violation, ...] = ()  # release-rule findings; they do not make a set incompatible

    @property
    def compatible(self) -> bool:
        return not self.violations

    @property
    def fix(self) -> str | None:
        """The first command that repairs the set, ``None`` when nothing is broken."""
        return next((v.fix for v in self.violations if v.fix), None)

    def to_json(self) -> dict[str, Any]:
        """A stable JSON object: ``compatible``, ``reasons``, ``fix`` and details."""
        return {
            "compatible": self.compatible,
            "reasons": [{"rule": v.rule, "message": v.message, "fix": v.fix} for v in self.violations],
            "fix": self.fix,
            "fix_alternatives": list(self.alternatives),
            "warnings": [{"rule": w.rule, "message": w.message, "fix": w.fix} for w in self.warnings],
            "allowed_backend": self.allowed_backend,
            "rules_checked": list(self.checked),
            "rules_skipped": dict(self.skipped),
        }


MAX_VERSION_LENGTH = 200  # longer than any real release's version, local label included; bounds packaging's work


def parse_version(text: str, what: str = "version") -> Version:
    """Parse ``text`` as PEP 440, refusing epochs and text over :data:`MAX_VERSION_LENGTH`; errors name ``what``."""
    if not isinstance(text, str) or len(text) > MAX_VERSION_LENGTH:
        raise VersionError(f"{what} {shorten(str(text))!r} is not a PEP 440 version (expected e.g. 0.4.30)")
    try:
        version = Version(text)
    except (InvalidVersion, ValueError):  # ValueError: a number over Python's 4300-digit limit
        raise VersionError(f"{what} {shorten(text)!r} is not a PEP 440 version (expected e.g. 0.4.30)") from None
    if "!" in text:
        raise VersionError(
            f"{what} {shorten(text)!r} has an epoch, which jax's version check cannot compare; drop the epoch"
        )
    return version


def versions_or_specifier(given: str, what: str, example: str = ">=0.4.30",
                          name: str = "") -> list[Version] | SpecifierSet:
    """An option that takes released versions (``0.4.30,0.12.0.1``) or a PEP 440 specifier (``>=0.4.30``),
    optionally after the distribution's ``name`` (``jax>=0.4.30``).

    Each comma-separated item a version: the versions; else the whole text a specifier. Anything
    else, or text over a bounded length, is one :class:`VersionError` naming ``what``.
    """
    text = given.strip()
    if name and text.lower().startswith(name.lower()):
        text = text[len(name):].strip()
    items = [item.strip() for item in text.split(",") if item.strip()]
    if len(text) <= MAX_VERSION_LENGTH * 8:
        try:
            return [parse_version(item) for item in items] if items else SpecifierSet(text)
        except (VersionError, InvalidSpecifier):
            pass
        try:
            return SpecifierSet(text)
        except (InvalidSpecifier, ValueError):
            pass
    raise VersionError(f"{what} {shorten(given)!r}: expected a specifier ({example}) or versions (0.4.30,0.12.0.1)")


def release_key(version: Version) -> tuple[int, ...]:
    """The release segment without trailing zeros: the only part compatibility looks at."""
    release = list(version.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    return tuple(release)


def release_text(version: Version) -> str:
    """The release segment as written (``0.4.36`` for ``0.4.36.dev20241119+gabc``)."""
    return ".".join(str(part) for part in version.release)


def is_final(version: Version) -> bool:
    """No pre-release, dev or local part."""
    return not (version.is_prerelease or version.local)


def requirement(distribution: str, minimum: str | None, maximum: str | None) -> str:
    """A quoted pip requirement bounding ``distribution`` to ``[minimum, maximum]``."""
    bounds = [f">={minimum}" if minimum else "", f"<={maximum}" if maximum else ""]
    return f'"{distribution}{",".join(b for b in bounds if b)}"'


def allowed_range(backend: str, minimum: str | None, maximum: str | None) -> str:
    """Human text for the allowed backend range (release numbers only)."""
    low = f"{minimum} <= " if minimum else ""
    high = f" <= {maximum}" if maximum else ""
    return f"{low}{backend}{high} (release numbers; rc/dev/post/local suffixes ignored)"


def _pip_range(backend: str, minimum: Version | None, frontend: Version | None) -> str:
    return "pip install " + requirement(
        backend, str(minimum) if minimum else None, release_text(frontend) if frontend else None
    )


def verdict(
    *,
    backend: Pin | None,
    frontend: Pin | None = None,
    minimum_backend: Version | None = None,
    plugins: Sequence[Pin] = (),
    exempt_plugins: Iterable[str] = (),
    released_backends: Iterable[Version] | None = None,
    backend_name: str = "backend",
    runtime_pins: Mapping[str, tuple[str, str]] | None = None,
) -> Verdict:
    """Apply the compatibility rules to installed (or planned) pins.

    ``minimum-is-released`` is a rule about how the frontend was released, not about
    whether these pins work together: its findings are ``warnings``.

    ``backend=None`` means the backend is not installed (rule ``backend-installed``;
    the others need it). ``exempt_plugins`` names plugins not bound to the backend
    version (ROCm). ``runtime_pins`` maps a runtime with its own numbering (libtpu) to the
    frontend's extra pinning it and the specifier (``("tpu", "==0.0.50.*")``): a runtime outside
    it is a warning (:func:`runtime_within_pin`). Rules whose inputs are missing are listed in
    ``Verdict.skipped``.
    """
    name = backend.name if backend else backend_name
    consumer = str(frontend) if frontend else "this package"
    fix: str | None = _pip_range(name, minimum_backend, frontend.version if frontend else None)
    if frontend and minimum_backend and release_key(minimum_backend) > release_key(frontend.version):
        fix = None  # an empty range: no pip command helps; the minimum-not-newer rule names the fix
    allowed = allowed_range(
        name,
        str(minimum_backend) if minimum_backend else None,
        release_text(frontend.version) if frontend else None,
    )
    if backend is None:
        missing = Violation(Rule.BACKEND_INSTALLED, f"{name} is not installed; {consumer} needs {allowed}.", fix)
        return Verdict((missing,), (Rule.BACKEND_INSTALLED,), {}, allowed)
    violations: list[Violation] = []
    checked: list[Rule] = []
    skipped: dict[Rule, str] = {}
    b = release_key(backend.version)
    f = release_key(frontend.version) if frontend else None
    m = release_key(minimum_backend) if minimum_backend else None
    alternatives: list[str] = []

    if m is None:
        skipped[Rule.BACKEND_AT_LEAST_MINIMUM] = "no minimum backend given"
    else:
        checked.append(Rule.BACKEND_AT_LEAST_MINIMUM)
        if b < m:
            violations.append(Violation(
                Rule.BACKEND_AT_LEAST_MINIMUM,
                f"{backend.name} is version {backend.version}, but {consumer} requires {allowed}.",
                fix,
            ))

    if f is None:
        skipped[Rule.BACKEND_NOT_NEWER_THAN_FRONTEND] = "no frontend given"
    else:
        checked.append(Rule.BACKEND_NOT_NEWER_THAN_FRONTEND)
        if b > f:
            assert frontend is not None
            violations.append(Violation(
                Rule.BACKEND_NOT_NEWER_THAN_FRONTEND,
                f"{backend.name} version {backend.version} is newer than {consumer} allows: "
                f"it requires {allowed}.",
                fix,
            ))
            alternatives.append(f"pip install --upgrade {frontend.name} {backend.name}")

    if m is None or f is None:
        skipped[Rule.MINIMUM_NOT_NEWER_THAN_FRONTEND] = "needs both a frontend and a minimum backend"
    else:
        checked.append(Rule.MINIMUM_NOT_NEWER_THAN_FRONTEND)
        if m > f:
            violations.append(Violation(
                Rule.MINIMUM_NOT_NEWER_THAN_FRONTEND,
                f"the minimum {backend.name} {minimum_backend} is newer than {consumer}; "
                f"no {backend.name} can satisfy {allowed}.",
                f"lower the minimum {backend.name} to at most {release_text(frontend.version)}"
                if frontend else None,
            ))

    warnings: list[Violation] = []
    if minimum_backend is None:
        skipped[Rule.MINIMUM_IS_RELEASED] = "no minimum backend given"
    else:
        checked.append(Rule.MINIMUM_IS_RELEASED)
        warnings.extend(_minimum_released(backend.name, minimum_backend, released_backends))

    exempt = set(exempt_plugins)
    if not plugins:
        skipped[Rule.PLUGIN_MATCHES_BACKEND] = "no plugins"
    else:
        checked.append(Rule.PLUGIN_MATCHES_BACKEND)
        mismatched = [p for p in plugins if p.name not in exempt and release_key(p.version) != b]
        if mismatched:
            aligned = " ".join(f'"{p.name}=={release_text(backend.version)}"' for p in mismatched)
            listing = ", ".join(str(p) for p in mismatched)
            violations.append(Violation(
                Rule.PLUGIN_MATCHES_BACKEND,
                f"{listing} installed, but plugins must have the same release number as "
                f"{backend}; a mismatched plugin is skipped, fails later or crashes.",
                f"pip install {aligned}",
            ))
    pinned_runtimes = [(p, runtime_pins[p.name]) for p in plugins if runtime_pins and p.name in runtime_pins]
    if pinned_runtimes:
        checked.append(Rule.RUNTIME_WITHIN_EXTRA_PIN)
        for runtime, (extra, pin) in pinned_runtimes:
            if (outside := runtime_within_pin(runtime, pin, extra, frontend)) is not None:
                warnings.append(outside)
    elif plugins:
        skipped[Rule.RUNTIME_WITHIN_EXTRA_PIN] = "no runtime whose pin in the frontend's extras is known"
    return Verdict(tuple(violations), tuple(checked), skipped, allowed, tuple(alternatives), tuple(warnings))


def runtime_within_pin(runtime: Pin, pin: str, extra: str, frontend: Pin | None = None) -> Violation | None:
    """A runtime with its own numbering (libtpu) outside the pin its frontend's extra declares, as a warning.

    Not a refusal: jax loads libtpu without a version check and gates its own TPU code paths on the
    libtpu version (``is_libtpu_at_least``); the extra's pin is the pairing that was released and
    tested. ``pin`` is a PEP 440 specifier (``==0.0.50.*``); ``extra`` names the extra (``tpu``).
    """
    try:
        specifier = SpecifierSet(pin)
    except InvalidSpecifier:
        raise VersionError(f"the {extra} extra's pin {pin!r} is not a PEP 440 specifier") from None
    if specifier.contains(runtime.version, prereleases=True):
        return None
    owner = f"{frontend}[{extra}]" if frontend else f"the {extra} extra"
    return Violation(Rule.RUNTIME_WITHIN_EXTRA_PIN,
                     f"{runtime} is outside {owner}'s pin {runtime.name}{specifier}; it loads without a version "
                     "check, but that is not the pairing that was released and tested.",
                     f'pip install "{runtime.name}{specifier}"')


def _minimum_released(
    backend: str, minimum: Version, released: Iterable[Version] | None, complete: bool = False
) -> list[Violation]:
    if not is_final(minimum):
        return [Violation(
            Rule.MINIMUM_IS_RELEASED,
            f"the minimum {backend} {minimum} is not a release; frontends at HEAD are tested "
            f"against released {backend} wheels.",
            f"set the minimum {backend} to a released version (e.g. {release_text(minimum)} once released)",
        )]
    if released is None:
        return []
    released = sorted(set(released))
    if any(release_key(v) == release_key(minimum) for v in released):
        return []
    if not complete and (not released or minimum < released[0]):
        return []  # older than partial release data reaches: cannot tell
    older = [v for v in released if v < minimum]
    suggestion = f"the nearest older known release is {older[-1]}" if older else "none is older"
    return [Violation(
        Rule.MINIMUM_IS_RELEASED,
        f"the minimum {backend} {minimum} is not a known {backend} release ({suggestion}).",
        f"set the minimum {backend} to a released version" + (f" such as {older[-1]}" if older else ""),
    )]


def check_release(
    *,
    frontend: str,
    backend: str,
    frontend_version: Version | None,
    backend_version: Version | None,
    minimum_backend: Version,
    released_backends: Iterable[Version],
    released_complete: bool = False,
) -> list[Violation]:
    """Rules for a release plan: a backend release comes with its frontend release, the minimum is
    released, the frontend supports the latest backend release and the next.

    ``released_complete``: ``released_backends`` is every release there is (an index listing),
    so a minimum older than all of them is not released either (partial release data forgives it).

    A backend release needs a frontend release of the same version; the minimum must
    be released; and the frontend must support the latest backend release (minimum
    <= latest release <= frontend) as well as the next one (its own version).
    """
    released = sorted(set(released_backends))
    violations: list[Violation] = []
    if backend_version is not None and (
        frontend_version is None or release_key(frontend_version) != release_key(backend_version)
    ):
        violations.append(Violation(
            Rule.BACKEND_RELEASE_HAS_FRONTEND_RELEASE,
            f"releasing {backend} {backend_version} needs a {frontend} release of the same version "
            f"at the same time (planned: {frontend} {frontend_version or 'none'}).",
            f"release {frontend} {backend_version} together with {backend} {backend_version}",
        ))
    violations.extend(_minimum_released(backend, minimum_backend, released, released_complete))
    if frontend_version is not None and released:
        latest = released[-1]
        if not release_key(minimum_backend) <= release_key(latest) <= release_key(frontend_version):
            violations.append(Violation(
                Rule.FRONTEND_SUPPORTS_LATEST_BACKEND,
                f"{frontend} {frontend_version} must support the latest {backend} release {latest} "
                f"and the next one, but it admits {backend} {minimum_backend} to "
                f"{release_text(frontend_version)}.",
                f"set the minimum {backend} to at most {latest} and {frontend}'s version to at least {latest}",
            ))
    if frontend_version is not None and release_key(minimum_backend) > release_key(frontend_version):
        violations.append(Violation(
            Rule.MINIMUM_NOT_NEWER_THAN_FRONTEND,
            f"the minimum {backend} {minimum_backend} is newer than {frontend} {frontend_version}.",
            f"set the minimum {backend} to at most {release_text(frontend_version)}",
        ))
    return violations
