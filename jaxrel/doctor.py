"""Judge an environment's split wheels: the policy applied to what
:mod:`jaxrel.distributions.installed` read, the plugin families, the text and JSON report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel import policy
from jaxrel._util.text import table
from jaxrel.distributions.installed import Environment, Installed
from jaxrel.family import Family

__all__ = ["FamilyStatus", "diagnose", "plugin_families", "render", "to_json"]


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
