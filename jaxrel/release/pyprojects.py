"""A component's ``pyproject.toml`` ``[project]`` table, typed: the boundary for its dependencies.

``release check`` judges the requirements a component declares and ``release bump`` moves the
frontend's backend range and the plugins' pins; both read them here. A ``dependencies`` that is not
a list of strings, an extra that is not one, a requirement or marker that does not parse: each is
:class:`~jaxrel.errors.BadInput` (exit 2) naming the file and the field, never a check quietly
turned into "not applicable" and never a bump that reports success with a range left unmoved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jaxrel._util import localfiles
from jaxrel._util.shape import Shape
from jaxrel.errors import BadInput

__all__ = ["ProjectTable", "ProjectTableError", "project_table", "read_project_table"]


class ProjectTableError(BadInput):
    """A ``[project]`` table whose fields are of the wrong type or do not parse."""


@dataclass(frozen=True)
class ProjectTable:
    """What ``[project]`` declares about requirements (``dependencies`` is ``None`` when absent)."""

    file: str
    dependencies: tuple[str, ...] | None
    optional: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dynamic: tuple[str, ...] = ()

    @property
    def static(self) -> bool:
        """The dependencies are written in the file (not computed at build time)."""
        return self.dependencies is not None and "dependencies" not in self.dynamic

    def requirement(self, text: str, where: str) -> Requirement:
        try:
            return Requirement(text)
        except InvalidRequirement as error:
            raise ProjectTableError(f"{self.file}: [{where}] {text[:80]!r} is not a valid requirement "
                                    f"({str(error).splitlines()[0][:120]}); fix it") from None

    def requirements(self) -> list[Requirement]:
        """Every requirement, the extras' with an ``extra == "name"`` marker added."""
        found = [self.requirement(text, "project.dependencies") for text in self.dependencies or ()]
        for extra, items in self.optional.items():
            for text in items:
                where = f"project.optional-dependencies.{extra}"
                requirement = self.requirement(text, where)
                marker = f"extra == {extra!r}" if requirement.marker is None else f"({requirement.marker}) and " \
                    f"extra == {extra!r}"
                extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
                target = f" @ {requirement.url} " if requirement.url else str(requirement.specifier)
                found.append(self.requirement(f"{requirement.name}{extras}{target}; {marker}", where))
        return found

    def requirement_on(self, distribution: str) -> tuple[int, Requirement] | None:
        """The index and requirement in ``dependencies`` naming ``distribution``; listing it twice is bad input."""
        wanted = canonicalize_name(distribution)
        found = [(index, requirement) for index, text in enumerate(self.dependencies or ())
                 if canonicalize_name((requirement := self.requirement(text, "project.dependencies")).name) == wanted]
        if len(found) > 1:
            raise ProjectTableError(f"{self.file}: [project.dependencies] {distribution} is listed {len(found)} times "
                                    f"(entries {', '.join(str(i + 1) for i, _ in found)}); keep one, so one range "
                                    "holds it")
        return found[0] if found else None


def project_table(text: str, file: str) -> ProjectTable:
    """The ``[project]`` table of the pyproject ``text`` (named ``file``), checked."""
    data = localfiles.loads_toml(text, file)
    shape = Shape(file, ProjectTableError)
    table: dict[str, Any] = shape.table(data.get("project", {}), "project")
    dynamic = shape.field(table, "dynamic", "project", lambda v: isinstance(v, list) and all(
        isinstance(item, str) for item in v), "a list of field names", [])
    dependencies = shape.field(table, "dependencies", "project", lambda v: isinstance(v, list) and all(
        isinstance(item, str) for item in v), "a list of requirement strings", None)
    optional = shape.table(table.get("optional-dependencies", {}), "project.optional-dependencies")
    extras = {extra: tuple(shape.field(optional, extra, "project.optional-dependencies", lambda v: isinstance(
        v, list) and all(isinstance(item, str) for item in v), "a list of requirement strings"))
        for extra in optional}
    return ProjectTable(file, None if dependencies is None else tuple(dependencies), extras, tuple(dynamic))


def read_project_table(path: str) -> ProjectTable:
    """:func:`project_table` of the file at ``path`` (read by :mod:`jaxrel._util.localfiles`)."""
    return project_table(localfiles.read_text(path), path)
