"""``jaxrel release check``: the pre-flight that refuses a bad release.

Each check passes, fails (one line: what is wrong, and the fix) or cannot apply (e.g. git
checks on an unpacked sdist), and says which. The checks, in order: every declared file
agrees on each component's version; the release rules of the policy (a backend release
comes with the frontend at the same version, the minimum backend is released, the frontend
admits the latest backend); the frontend requires exactly [minimum, release] of the
backend; plugins and extensions pin or admit the backend as the policy says; nothing at
this version is on the index yet; the changelog names the version; the git tree is clean
and the tag is free (or already points at HEAD, as in CI on a tag push).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel._util.text import table
from jaxrel.distributions.extras import plugin_families, unsatisfied_extras
from jaxrel.distributions.index import Index, IndexClientError, IndexFile, Listing
from jaxrel.distributions.pages import parse_time
from jaxrel.release import locations
from jaxrel.release.built_metadata import built_requirements
from jaxrel.release.changelog import PLACEHOLDER, changelog_has, changelog_heading
from jaxrel.release.config import Component, Location
from jaxrel.release.pins import frontend_range, is_frontend_range, pins_exactly
from jaxrel.release.plan import Plan
from jaxrel.release.project import Project, Reading
from jaxrel.release.pyprojects import ProjectTable, project_table

__all__ = ["Check", "Status", "changelog_has", "render", "run_checks", "to_json"]


class Status(StrEnum):
    """A check's outcome."""

    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "n/a"
    WARN = "warn"  # does not fail the release (a family released separately, e.g. ROCm)


PASS, FAIL, NOT_APPLICABLE, WARN = Status.PASS, Status.FAIL, Status.NOT_APPLICABLE, Status.WARN


@dataclass(frozen=True)
class Check:
    """One check's outcome."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def line(self) -> str:
        return f"{self.detail}" + (f" Fix: {self.fix}." if self.fix else "")


def _versions_consistent(project: Project, plan: Plan) -> list[Check]:
    checks = []
    for component in project.release.components:
        if component.released_separately or (component.shares_version_with and not component.versions):
            checks += _current(project, plan, component)
            continue
        readings = [r for r in project.readings(component) if r.value is not None]
        values = {str(Version(r.value)) for r in readings if r.value is not None}
        if project.sdist_metadata is not None and component.role == "frontend":
            declared = project.sdist_metadata.version
            readings.append(Reading(Location("PKG-INFO", "Version"), declared))
            values.add(str(Version(declared)))
        where = ", ".join(f"{r.location}={r.value}" for r in readings)
        if len(values) == 1:
            checks.append(Check(f"versions:{component.distribution}", PASS,
                                f"{component.distribution} {values.pop()} in every declared file ({where})"))
        else:
            wanted = plan.version if component.distribution in plan.upload_order else project.version_of(component)
            checks.append(Check(f"versions:{component.distribution}", FAIL,
                                f"{component.distribution}: declared files disagree ({where})",
                                f"jaxrel release bump {wanted} --component {component.distribution}"))
    return checks


def _current(project: Project, plan: Plan, component: Component) -> list[Check]:
    """A component released with the frontend at its version: where the tree names it as released with this
    release (jax's ``setup.py:_current_jaxlib_version``) says the release's version."""
    if component.distribution not in plan.upload_order or not component.current:
        return []
    readings = project.read(component.current)
    wrong = [r for r in readings if r.value is None or Version(r.value) != Version(plan.version)]
    where = ", ".join(f"{r.location}={r.value}" for r in readings)
    if wrong:
        return [Check(f"versions:{component.distribution}", FAIL, f"{component.distribution} is released with "
                      f"{plan.version}, but {where}",
                      f"jaxrel release bump {plan.version} (it sets {wrong[0].location})")]
    return [Check(f"versions:{component.distribution}", PASS, f"{component.distribution} {plan.version} ({where})")]


def _declared(project: Project, plan: Plan) -> Check:
    """The tree declares the version being released (a tag must match the files)."""
    lead = project.release.lead()
    declared = project.version_of(lead)
    if Version(declared) == Version(plan.version):
        return Check("release-version", PASS, f"{lead.distribution} declares {plan.version}")
    return Check("release-version", FAIL, f"releasing {plan.version}, but {lead.distribution} declares {declared}",
                 f"jaxrel release bump {plan.version}, commit, and tag that commit")


def _rules(project: Project, plan: Plan) -> list[Check]:
    if project.release.frontend() is None:
        return [Check("rules", NOT_APPLICABLE, "this tree releases no frontend or backend; the release rules "
                      "apply where they are released")]
    if plan.minimum_backend is None:
        return [Check("rules", NOT_APPLICABLE, "the frontend declares no minimum backend; the release rules need one",
                      "declare minimum-backend for the frontend component")]
    checks = [Check(f"rule:{v.rule}", FAIL, v.message, v.fix) for v in plan.problems]
    failed = {v.rule for v in plan.problems}
    names = ["backend-release-has-frontend-release", "minimum-is-released", "frontend-supports-latest-backend",
             "minimum-not-newer-than-frontend"]
    for name in names:
        if name in failed:
            continue
        if plan.released_backends is None and name in ("minimum-is-released", "frontend-supports-latest-backend"):
            checks.append(Check(f"rule:{name}", FAIL, f"cannot tell: {plan.index_error or 'the index was not asked'}",
                                "make the index reachable or pass --index-url"))
        else:
            checks.append(Check(f"rule:{name}", PASS, _explain(name, plan)))
    return checks


def _explain(rule: str, plan: Plan) -> str:
    released = plan.released_backends or []
    return {
        "backend-release-has-frontend-release": "the backend is released with the frontend at the same version"
        if plan.backend_version == plan.version else "no backend release in this plan",
        "minimum-is-released": f"minimum backend {plan.minimum_backend} is released"
        + ("" if plan.minimum_backend in released else " in this release"),
        "frontend-supports-latest-backend": f"the frontend admits the latest released backend "
        f"{released[-1] if released else plan.backend_version}",
        "minimum-not-newer-than-frontend": f"minimum {plan.minimum_backend} <= {plan.version}",
    }[rule]


def _requirements(project: Project, component: Component) -> tuple[list[Requirement] | None, str]:
    """The component's declared requirements (with extras' markers) and where they come from."""
    if project.sdist_metadata is not None and component.role == "frontend":
        declared = ProjectTable("PKG-INFO", tuple(project.sdist_metadata.requires_dist))
        return [declared.requirement(r, "Requires-Dist") for r in declared.dependencies or ()], "PKG-INFO"
    if component.build != "python":
        return None, f"{component.distribution} is built by {component.build}; `release verify` checks its metadata"
    path = project.root / component.pyproject
    if not path.exists():
        return None, f"{component.pyproject} does not exist"
    declared = project_table(localfiles.read_text(path), component.pyproject)
    if declared.static:
        return declared.requirements(), component.pyproject
    if component.role == "frontend" and component.build == "python":  # jax's setup.py writes its extras
        computed, source = built_requirements(project.root / component.path)
        if computed is not None:
            built = ProjectTable(source, computed)
            return [built.requirement(r, "Requires-Dist") for r in built.dependencies or ()], source
        return None, f"{component.pyproject} computes its dependencies at build time and {source}; " \
            "`release verify` checks them"
    return None, f"{component.pyproject} computes its dependencies at build time; `release verify` checks them"


def _unconditional(requirement: Requirement) -> bool:
    return requirement.marker is None or "extra" not in str(requirement.marker)


def _frontend_range(project: Project, plan: Plan) -> Check:
    name = "frontend-requires-backend-range"
    frontend = project.release.frontend()
    if frontend is None:
        return Check(name, NOT_APPLICABLE, "this tree does not release the frontend")
    backend = project.family.backend.distribution
    requirements, source = _requirements(project, frontend)
    if requirements is None:
        return Check(name, NOT_APPLICABLE, f"cannot read the frontend's requirements: {source}")
    found = [r for r in requirements if canonicalize_name(r.name) == canonicalize_name(backend) and _unconditional(r)]
    wanted = frontend_range(plan.minimum_backend or "0", plan.version)
    fix = f"require \"{backend}{wanted}\" (jaxrel release bump {plan.version} rewrites it)"
    if len(found) != 1:
        return Check(name, FAIL, f"{source}: {len(found)} unconditional requirements on {backend}, expected one", fix)
    specifier = found[0].specifier
    if not is_frontend_range(specifier, plan.minimum_backend or "0", plan.version):
        return Check(name, FAIL, f"{source}: the frontend requires {backend}{specifier}, not exactly {wanted}", fix)
    return Check(name, PASS, f"{source}: {backend}{specifier} is exactly [minimum, release]")


def _pins(project: Project, plan: Plan) -> list[Check]:
    """Plugins (pinned: exactly the backend; unpinned: admit it) and extensions (admit it)."""
    checks: list[Check] = []
    family = project.family
    backend = family.backend.distribution
    if plan.backend_version is None:
        return [Check("pins", NOT_APPLICABLE, "no backend version known, so plugin pins cannot be checked")]
    current = Version(plan.backend_version)
    for component in project.release.components:
        if component.role not in ("plugin", "extension") or component.distribution not in plan.upload_order:
            continue
        spec = family.plugin_for(component.distribution)
        pinned = component.role == "plugin" and spec is not None and spec.pinned
        name = f"pin:{component.distribution}"
        version = Version(project.version_of(component))
        if pinned and policy.release_key(version) != policy.release_key(current):
            checks.append(Check(name, FAIL, f"{component.distribution} {version} is pinned to the backend, but "
                                f"{backend} is {current}", f"release {backend} {version} with it, or bump "
                                f"{component.distribution} to {current}"))
            continue
        requirements, source = _requirements(project, component)
        found = [r for r in requirements or [] if canonicalize_name(r.name) == canonicalize_name(backend)]
        if requirements is None:
            checks.append(Check(name, NOT_APPLICABLE, source))
        elif not found and component.role == "extension":
            checks.append(Check(name, PASS, f"{source}: {component.distribution} does not depend on {backend}"))
        elif not found:
            checks.append(Check(name, FAIL, f"{source}: {component.distribution} does not require {backend}",
                                f"add \"{backend}=={current}\"" if pinned else f"require a {backend} range"))
        elif pinned and not pins_exactly(found[0].specifier, current):
            checks.append(Check(name, FAIL, f"{source}: {component.distribution} requires {backend}"
                                f"{found[0].specifier}, not exactly {current}",
                                f"require \"{backend}=={current}\" (jaxrel release bump rewrites it)"))
        elif not found[0].specifier.contains(current, prereleases=True):
            checks.append(Check(name, FAIL, f"{source}: {component.distribution} requires {backend}"
                                f"{found[0].specifier}, which excludes {current}", f"admit {backend} {current}"))
        else:
            checks.append(Check(name, PASS, f"{source}: {component.distribution} requires {backend}"
                                f"{found[0].specifier}" + (" (pinned)" if pinned else " (admits it)")))
    checks += _frontend_extras(project, plan, current)
    return checks


def _frontend_extras(project: Project, plan: Plan, current: Version) -> list[Check]:
    """The frontend's extras that install plugins must admit the backend (pinned ones: only it)."""
    frontend = project.release.frontend()
    if frontend is None:
        return []
    requirements, source = _requirements(project, frontend)
    checks = []
    for requirement in requirements or []:
        spec = project.family.plugin_for(requirement.name)
        if spec is None or spec.runtime or _unconditional(requirement):
            continue  # a runtime (libtpu) has its own numbering: the extra's pin is not the backend's
        ok = (pins_exactly(requirement.specifier, current) if spec.pinned
              else requirement.specifier.contains(current, prereleases=True))
        extra = str(requirement.marker)
        name = f"pin:{requirement.name}[{extra.split('==')[-1].strip().strip(chr(34) + chr(39))}]"
        if ok:
            checks.append(Check(name, PASS, f"{source}: {requirement} " + ("pins" if spec.pinned else "admits")
                                + f" {project.family.backend.distribution} {current}"))
        else:
            checks.append(Check(name, FAIL, f"{source}: {requirement} does not "
                                + ("pin" if spec.pinned else "admit") + f" the backend version {current}",
                                f"require {requirement.name}=={current} in that extra"))
    return checks


def _extras_satisfiable(project: Project, plan: Plan, index: Index | None) -> list[Check]:
    """Every plugin family extra of the frontend can be installed at release time: each requirement on a
    family distribution is met by the index or by this release; a family released separately (ROCm)
    that is not met yet is a warning naming the release it expects."""
    frontend = project.release.frontend()
    if frontend is None or index is None:
        return []
    requirements, source = _requirements(project, frontend)
    if requirements is None:
        return [Check("extras-satisfiable", NOT_APPLICABLE, f"cannot read the frontend's requirements: {source}")]
    family = project.family
    texts = [str(r) for r in requirements]
    names = {d for f in plugin_families(family, texts).values() for d in f.distributions}
    listings: dict[str, Listing] = {}
    as_of = parse_time(plan.as_of) if plan.as_of else None
    try:
        for name in sorted(names | {str(canonicalize_name(family.backend.distribution))}):
            listings[name] = index.listing(name).as_of(as_of)
    except IndexClientError as error:
        return [Check("extras-satisfiable", FAIL, f"cannot tell whether the extras can be installed: {error}")]
    in_release = [(str(canonicalize_name(p.distribution)), Version(plan.version)) for p in plan.components
                  if p.in_release]
    for name, version in in_release:  # what this release uploads counts as available
        if name in listings:
            listings[name] = Listing(name, [*listings[name].files, IndexFile(
                f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "", "this release")])
    checks = []
    frontend_name = f"{family.frontend.distribution}=={plan.version}"
    for missing in unsatisfied_extras(family, texts, listings):
        if missing.served_elsewhere:
            checks.append(Check(f"extra:{missing.extra}", NOT_APPLICABLE, f"{missing.requirement}: a runtime the "
                                "index never had then (libtpu came from its own find-links page); not judged"))
            continue
        status = WARN if missing.released_separately else FAIL
        fix = (f"release {missing.requirement} before {frontend_name}, or drop it from the extra"
               if not missing.released_separately else None)
        checks.append(Check(f"extra:{missing.extra}", status, missing.message(frontend_name), fix))
    if all(c.status == NOT_APPLICABLE for c in checks):
        checks.append(Check("extras-satisfiable", PASS, f"{source}: every plugin family extra can be installed "
                            "from the index or this release"))
    return checks


def _unreleased(plan: Plan) -> Check:
    taken = [p.distribution for p in plan.components if p.in_release and p.on_index]
    if any(p.in_release and p.on_index is None for p in plan.components):
        return Check("version-unreleased", FAIL, f"cannot tell whether {plan.version} is on the index: "
                     f"{plan.index_error or 'the index was not asked'}", "make the index reachable or pass --index-url")
    if taken:
        return Check("version-unreleased", FAIL, f"{', '.join(taken)} {plan.version} already on the index",
                     "bump to a new version (jaxrel release bump)")
    return Check("version-unreleased", PASS, f"nothing at {plan.version} is on the index yet")


def _changelog(project: Project, plan: Plan) -> Check:
    name = project.release.changelog
    if name is None:
        return Check("changelog", NOT_APPLICABLE, "no changelog declared")
    path = project.root / name
    if not path.exists():
        if project.sdist is not None:
            return Check("changelog", NOT_APPLICABLE, f"the sdist does not ship {name}; check the checkout")
        return Check("changelog", FAIL, f"{name} does not exist", f"create {name} with a '## {plan.version}' section")
    text = localfiles.read_text(path, what="the changelog")
    heading = changelog_heading(text, plan.version)
    if heading is not None and PLACEHOLDER.search(heading):
        return Check("changelog", FAIL, f"{name}'s heading for {plan.version} is a placeholder: {heading[:80]!r}",
                     "give it the release date (the post-release bump does: jaxrel release bump)")
    if heading is not None:
        return Check("changelog", PASS, f"{name} has a heading for {plan.version}: {heading[:80]!r}")
    if project.release.changelog_style == "unreleased" and re.search(r"^#+\s*Unreleased\s*$", text, re.M | re.I):
        return Check("changelog", PASS, f"{name} keeps the release's notes under 'Unreleased' (the family's "
                     f"convention: the post-release bump writes the dated heading of {plan.version})")
    return Check("changelog", FAIL, f"{name} has no heading for {plan.version}",
                 f"add a '## {plan.version}' section describing the release")


def _git(project: Project, plan: Plan) -> list[Check]:
    if project.sdist is not None:
        why = "an sdist has no git history"
        return [Check("git-clean", NOT_APPLICABLE, why), Check("tag-free", NOT_APPLICABLE, why)]
    if not project.is_git:
        why = f"{project.root} is not a git checkout"
        return [Check("git-clean", NOT_APPLICABLE, why), Check("tag-free", NOT_APPLICABLE, why)]
    status = project.git("status", "--porcelain").stdout.splitlines()
    clean = (Check("git-clean", PASS, "the git tree is clean") if not status else
             Check("git-clean", FAIL, f"the git tree has {len(status)} uncommitted change(s), e.g. {status[0].strip()}",
                   "commit or stash them, so the release is built from a commit"))
    tag = plan.tag
    tagged = project.git("rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}")
    if tagged.returncode != 0:
        return [clean, Check("tag-free", PASS, f"tag {tag} does not exist yet")]
    head = project.git("rev-parse", "HEAD").stdout.strip()
    if tagged.stdout.strip() == head:
        return [clean, Check("tag-free", PASS, f"tag {tag} points at HEAD (a tag-triggered release)")]
    return [clean, Check("tag-free", FAIL, f"tag {tag} already exists at {tagged.stdout.strip()[:12]}, not HEAD",
                         "bump to a new version; never move a release tag")]


def _paths(project: Project) -> list[Check]:
    """Every component's declared directory exists (a checkout only: an sdist holds one component)."""
    if project.sdist is not None:
        return [Check("paths", NOT_APPLICABLE, "an sdist holds one component's tree")]
    missing = [c for c in project.release.components if not (project.root / c.path).is_dir()]
    if missing:
        return [Check(f"path:{c.distribution}", FAIL, f"{c.distribution}'s path {c.path!r} is not a directory under "
                      f"{project.root}", "fix 'path' in [tool.jaxrel.release.components] or restore the directory")
                for c in missing]
    return [Check("paths", PASS, f"every component's directory exists ({len(project.release.components)})")]


def run_checks(project: Project, plan: Plan, index: Index | None = None) -> list[Check]:
    """Every check, in order (the extras' satisfiability only with an ``index``)."""
    paths = _paths(project)
    if any(c.status == FAIL for c in paths):
        return paths
    try:
        consistency = _versions_consistent(project, plan)
    except locations.LocationError as error:
        return [Check("versions", FAIL, str(error))]
    return [*paths, *consistency, _declared(project, plan), *_rules(project, plan), _frontend_range(project, plan),
            *_pins(project, plan), *_extras_satisfiable(project, plan, index),
            _unreleased(plan), _changelog(project, plan), *_git(project, plan)]


def render(checks: list[Check], plan: Plan) -> str:
    marks = {PASS: "ok  ", FAIL: "FAIL", NOT_APPLICABLE: "n/a ", WARN: "warn"}
    lines = [f"release check {plan.family} {plan.version} ({plan.contents})",
             table(None, [(marks[c.status], c.name, c.line()) for c in checks], indent="  ")]
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    lines.append(f"{len(checks)} checks: {sum(c.status == PASS for c in checks)} passed, {failed} failed, "
                 f"{sum(c.status == NOT_APPLICABLE for c in checks)} not applicable"
                 + (f", {warned} warning(s)" if warned else ""))
    return "\n".join(lines)


def to_json(checks: list[Check], plan: Plan) -> dict[str, Any]:
    return {"plan": plan.to_json(), "checks": [asdict(c) for c in checks],
            "ok": not any(c.status == FAIL for c in checks)}
