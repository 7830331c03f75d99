"""The audit of plugin families released separately (ROCm, oneAPI): each of their releases, on its own schedule.

They are released after the frontend and backend they build against, with re-spins (``0.10.0.post1``)
and pre-releases, so every version on the index is looked at and judged against the frontend and
backend release of its base version (``0.10.0.post1`` → jax and jaxlib 0.10.0):

* **pins**: the plugin requires its pjrt ``==V`` (however spelled), and that pjrt release exists: a
  plugin pinning a pjrt the index does not have (a local version: ``==0.9.0+rocm7.2.0``) can never be
  installed; a re-spin pinning the original pjrt installs with it; a loose pin (``==0.9.1.*``) pairs it
  with whichever re-spin of the pjrt is newest;
* **respin**: a ``.postN`` release, with when it came: from then on pip prefers it wherever a pin admits
  both (jax's ``rocm7-local`` extra pins ``==X.Y.Z.*``);
* **wheel-set**: plugin wheels for an (interpreter, ABI, platform) the backend of the base version has
  no wheel for (installable without its backend), or backend slots on the plugin's platforms it lacks;
* **requires-python**: a Python the frontend at the base version admits and the plugin refuses.

Findings are (base version, kind, detail); :mod:`jaxrel.release.audit` files them under the frontend
release of that base version.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel.distributions.filenames import covers, slot_text, wheel_slots
from jaxrel.distributions.pages import IndexFile, Listing, parse_time
from jaxrel.release.config import Component, ReleaseConfig
from jaxrel.release.pins import first_refused_python, pins_exactly

__all__ = ["separate_findings"]

Found = tuple[str, str, str]  # (base version, kind, detail)


def _base(version: Version) -> str:
    return ".".join(str(part) for part in (*version.release, 0, 0)[:3])


def separate_findings(release: ReleaseConfig, frontend_requires_python: Callable[[str], str | None],
                      listing: Callable[[str], Listing], metadata: Callable[[IndexFile], Any],
                      bases: set[str]) -> list[Found]:
    """Findings for every release of every separately released plugin whose base version is in ``bases``."""
    backend = release.backend()
    found: list[Found] = []
    for component in release.components:
        if not component.released_separately or component.role != "plugin" or not component.pins:
            continue
        plugins = listing(component.distribution)
        for version in plugins.versions():
            base = _base(version)
            if base not in bases:
                continue
            files = plugins.files_for(version)
            found += [(base, kind, detail) for kind, detail in _one(component, version, files, plugins, listing,
                                                                    metadata, backend, base,
                                                                    frontend_requires_python(base))]
    return found


def _one(component: Component, version: Version, files: list[IndexFile], plugins: Listing,
         listing: Callable[[str], Listing], metadata: Callable[[IndexFile], Any], backend: Component | None,
         base: str, frontend_python: str | None) -> list[tuple[str, str]]:
    name = component.distribution
    wheels = [f for f in files if f.is_wheel]
    out: list[tuple[str, str]] = []
    if wheels:
        declared = metadata(min(wheels, key=lambda f: (not f.metadata, f.size or 0)))
        requirements, _ = declared.requirements() if declared is not None else ([], [])
        for pinned in component.pins:
            out += _pin(name, version, pinned, requirements, listing(pinned))
    if version.post is not None:
        first = _first_upload(plugins.files_for(Version(str(version).split(".post")[0])))
        came = _first_upload(files)
        if first is not None and came is not None:
            out.append(("respin", f"{name} {version}: a re-spin of {version.public.split('.post')[0]}, "
                        f"{(came - first).days} days after it ({came:%Y-%m-%d}): a second build of that version, "
                        f"which pip prefers from then on wherever a pin admits both (==X.Y.Z.*)"))
    if backend is not None and wheels:
        have = wheel_slots(f.filename for f in listing(backend.distribution).files_for(base))
        own = wheel_slots(f.filename for f in wheels)
        if have and not all(platform == "any" for _, _, platform in own):  # a backend wheel must install beside it
            extra = sorted(slot for slot in own if not any(covers(mine, slot) for mine in have))
            if extra:
                out.append(("wheel-set", f"{name} {version} has {len(extra)} wheel(s) {backend.distribution} {base} "
                            f"lacks: {', '.join(slot_text(s) for s in extra[:4])}" + (" …" if len(extra) > 4 else "")))
    out += _python(name, version, files, base, frontend_python)
    return out


def _pin(name: str, version: Version, pinned: str, requirements: list[Any], pjrt: Listing) -> list[tuple[str, str]]:
    """The plugin's pin on its pjrt: a release of it must satisfy the pin (else the plugin never installs), and the
    pin must be exact (else pip may pair it with another re-spin of the pjrt)."""
    on = [r for r in requirements if canonicalize_name(r.name) == canonicalize_name(pinned) and r.marker is None]
    if not on:
        return [("pins", f"{name} {version} does not require {pinned}: pip installs it without its pjrt")]
    if not any(on[0].specifier.contains(v, prereleases=True) for v in pjrt.versions()):
        return [("pins", f"{name} {version} requires {on[0]}, which no {pinned} release on the index satisfies: "
                 f"`pip install {name}=={version}` can never succeed")]
    if pins_exactly(on[0].specifier, version):
        return []
    paired = [str(v) for v in pjrt.versions() if on[0].specifier.contains(v, prereleases=True)]
    if len(paired) == 1:
        if not pjrt.files_for(version):
            return []  # a re-spin of the plugin alone, pinned to the pjrt it was built with
        return [("pins", f"{name} {version} requires {on[0]}: it installs with {pinned} {paired[0]}, not "
                 f"{pinned} {version}")]
    return [("pins", f"{name} {version} requires {on[0]}, a loose pin: pip pairs it with whichever of {len(paired)} "
             f"{pinned} releases ({', '.join(paired[:3])}{' …' if len(paired) > 3 else ''}) is newest")]


def _python(name: str, version: Version, files: list[IndexFile], base: str,
            frontend_python: str | None) -> list[tuple[str, str]]:
    stated = sorted({f.requires_python for f in files if f.requires_python})
    if not stated or not frontend_python:
        return []
    try:
        admitted, theirs = SpecifierSet(frontend_python), SpecifierSet(stated[0])
    except InvalidSpecifier:
        return []
    refused = first_refused_python(admitted, theirs)
    if refused is None:
        return []
    return [("requires-python", f"the frontend {base} admits Python 3.{refused} ({frontend_python}) but {name} "
             f"{version} requires {stated[0]}: its extra cannot be installed on 3.{refused}")]


def _first_upload(files: list[IndexFile]) -> datetime.datetime | None:
    times = [parse_time(f.upload_time) for f in files if f.upload_time]
    return min(times) if times else None
