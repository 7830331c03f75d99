"""``jaxrel release plan``: what a release at version V contains, which rules apply, and what
will be built and uploaded, in which order.

A component is in the release when the versions its files declare equal V; the frontend
always is. The index (the one pip uses, or ``--index-url``) says which backends are
released and whether V is already there.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from packaging.version import Version

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel._util.text import table
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.errors import BadInput
from jaxrel.release.config import Component
from jaxrel.release.pins import frontend_range
from jaxrel.release.project import Project

__all__ = ["Plan", "Planned", "artifacts_of", "make_plan", "render"]


@dataclass(frozen=True)
class Planned:
    """One component and its part in the release."""

    distribution: str
    role: str
    version: str
    in_release: bool
    build: str
    artifacts: str
    on_index: bool | None = None  # V already on the index (None: not asked)
    why: str = ""  # why it is not in the release (released separately, not named by the tree, another version)


@dataclass
class Plan:
    """A release of ``family`` at ``version``."""

    family: str
    version: str
    tag: str
    contents: str
    components: list[Planned]
    minimum_backend: str | None
    backend_version: str | None  # the backend the frontend is released with (in the release or not)
    released_backends: list[str] | None  # None: the index was not asked or unreachable
    rules: list[str] = field(default_factory=list)
    problems: list[policy.Violation] = field(default_factory=list)
    index_error: str | None = None
    as_of: str | None = None  # the index judged as of this time (the release tag's date), else now

    @property
    def upload_order(self) -> list[str]:
        return [c.distribution for c in self.components if c.in_release]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["upload_order"] = self.upload_order
        return data


def artifacts_of(component: Component) -> str:
    """What building ``component`` yields."""
    if component.build == "python":
        return "sdist + wheel (python -m build)"
    if component.build == "bazel":
        return f"wheel ({' '.join(component.targets)}, jaxrel build)"
    return "built outside jaxrel"


def _named(project: Project, component: Component) -> bool:
    """Whether the file ``component`` must be named in names it, or a component that pins it."""
    if component.present_if_named_in is None:
        return True
    try:
        text = localfiles.read_text(project.root / component.present_if_named_in, what="the release's")
    except BadInput:
        return False
    names = [component.distribution, *(c.distribution for c in project.release.components
                                       if component.distribution in c.pins)]
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in names)


def make_plan(project: Project, version: str | None = None, index: Index | None = None,
              as_of: datetime.datetime | None = None) -> Plan:
    """The plan for a release at ``version`` (default: the frontend's declared version); the index is judged
    as it was at ``as_of`` (its upload times), else as it is now."""
    release = project.release
    target = version or project.version_of(release.lead())
    wanted = policy.parse_version(target, "release version")
    planned = []
    for component in release.components:
        if component.released_separately:
            planned.append(Planned(component.distribution, component.role, "", False, component.build, "",
                                   why="released separately"))
            continue
        declared = project.version_of(component)
        in_release = policy.parse_version(declared, f"{component.distribution} version") == wanted
        why = "" if in_release else f"declares {declared}"
        if in_release and not _named(project, component):
            in_release, why = False, f"not named in {component.present_if_named_in}"
        planned.append(Planned(component.distribution, component.role, declared, in_release, component.build,
                               artifacts_of(component), why=why))
    backend = next((p for p in planned if p.role == "backend"), None)
    minimum = project.minimum_backend()
    released: list[Version] | None = None
    index_error = None
    if index is not None:
        backend_name = project.family.backend.distribution
        try:  # each listing fetched once: the backend's releases, and whether V is already there
            listed = {name: index.listing(name).as_of(as_of).versions()
                      for name in dict.fromkeys([backend_name, *(p.distribution for p in planned if p.in_release)])}
            released = [v for v in listed[backend_name] if policy.is_final(v)]
            planned = [replace(p, on_index=wanted in listed[p.distribution]) if p.in_release else p for p in planned]
        except IndexClientError as error:
            index_error = str(error)
    plural = {"plugin": "plugins", "extension": "extensions"}
    shown = ("frontend", "backend", "plugin", "extension")
    roles = [plural.get(r, r) for r in shown if any(p.role == r and p.in_release for p in planned)]
    contents = " + ".join(roles) + (" only" if len(roles) == 1 else "")
    plan = Plan(
        family=project.family.name, version=target, tag=release.tag_for(target), contents=contents,
        components=planned, minimum_backend=minimum,
        backend_version=(target if backend and backend.in_release else backend.version if backend
                         else str(released[-1]) if released else None),
        released_backends=None if released is None else [str(v) for v in released], index_error=index_error,
        as_of=None if as_of is None else as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    plan.rules = _rules(project, plan)
    plan.problems = _problems(project, plan, released)
    return plan


def _rules(project: Project, plan: Plan) -> list[str]:
    family = project.family
    backend, frontend = family.backend.distribution, family.frontend.distribution
    if project.release.frontend() is None:
        return [f"{p.distribution} must admit {backend} {plan.backend_version or '(the latest release)'}"
                for p in plan.components if p.in_release]
    rules = [f"{frontend} requires {backend} {frontend_range(plan.minimum_backend or '?', plan.version)}"
             " (the minimum, up to the release itself)"]
    rules.append(f"the minimum {backend} {plan.minimum_backend} must be a released {backend}")
    if any(p.role == "backend" and p.in_release for p in plan.components):
        rules.append(f"a {backend} release needs a {frontend} release of the same version (both {plan.version})")
        rules.append(f"upload {backend} before {frontend}, so the index never holds a {frontend} without its {backend}")
    for p in plan.components:
        spec = project.family.plugin_for(p.distribution) if p.role == "plugin" else None
        component = project.release.component(p.distribution)
        if spec is not None and p.in_release and component.pins:
            rules.append(f"{p.distribution} requires {', '.join(f'{n}=={plan.version}' for n in component.pins)} "
                         f"(released with it) and is held to {backend} {plan.backend_version} by the guard")
        elif spec is not None and p.in_release:
            rules.append(f"{p.distribution} is " + (f"pinned: ={backend} {plan.backend_version}" if spec.pinned
                                                    else f"unpinned: must admit {backend} {plan.backend_version}"))
        if p.role == "extension" and p.in_release:
            rules.append(f"{p.distribution} must admit {backend} {plan.backend_version}")
    return rules


def _problems(project: Project, plan: Plan, released: list[Version] | None) -> list[policy.Violation]:
    if plan.minimum_backend is None or project.release.frontend() is None:
        return []
    family = project.family
    backend_in = any(p.role == "backend" and p.in_release for p in plan.components)
    frontend_in = any(p.role == "frontend" and p.in_release for p in plan.components)
    known = list(released or [])
    if backend_in:  # uploaded first, so it counts as released for the frontend beside it
        known.append(Version(plan.version))
    return policy.check_release(
        frontend=family.frontend.distribution, backend=family.backend.distribution,
        frontend_version=Version(plan.version) if frontend_in else None,
        backend_version=Version(plan.version) if backend_in else None,
        minimum_backend=policy.parse_version(plan.minimum_backend, "minimum backend"),
        released_backends=known if released is not None else [],
        released_complete=released is not None,  # an index listing is every release there is
    )


def render(plan: Plan) -> str:
    """The plan as a table a person reads."""
    rows: list[tuple[str, ...]] = []
    for p in plan.components:
        on_index = "?" if p.on_index is None else "yes" if p.on_index else "no"
        rows.append((p.distribution, p.role, p.version, "yes" if p.in_release else f"no ({p.why})",
                     on_index if p.in_release else "", p.artifacts if p.in_release else "not built"))
    when = f"; the index as of {plan.as_of}" if plan.as_of else ""
    lines = [f"release {plan.family} {plan.version} (tag {plan.tag}): {plan.contents}{when}", "",
             table(("component", "role", "version", "in release", "on index", "build → artifacts"), rows, rule=False)]
    lines += ["", "rules:"] + [f"  - {rule}" for rule in plan.rules]
    lines += ["", "upload order: " + " → ".join(plan.upload_order)]
    if plan.index_error:
        lines.append(f"index: {plan.index_error}")
    for problem in plan.problems:
        lines.append(f"problem: {problem.message} Fix: {problem.fix}.")
    return "\n".join(lines)
