"""How ``jaxrel gates`` shows its judgements: text grouped by file, JSON, Markdown; and the tree's minimum."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles
from jaxrel._util.literals import read_version, read_version_file
from jaxrel._util.text import markdown_table, shorten
from jaxrel.errors import BadInput
from jaxrel.family import Family
from jaxrel.gates.judge import VERDICTS, Judgement

__all__ = ["MinimumNotFound", "counts", "declared_minimum", "markdown", "one_line", "text", "to_json"]


class MinimumNotFound(BadInput):
    """The tree declares no minimum backend; the message names the fix."""


def declared_minimum(tree: Path, family: Family) -> tuple[str, str | None, Path]:
    """The minimum backend the tree's own version file declares, the tree's version, and that file."""
    tree = tree.resolve()
    frontend = family.frontend
    variable = frontend.minimum_backend_variable
    what = f"the family's version-file (from {tree})"
    candidates = [localfiles.inside(tree, frontend.version_file, what=what)]  # symlinks out are refused too
    if tree.name == frontend.package.split(".")[-1]:
        candidates.append(localfiles.inside(tree.parent, frontend.version_file, what=what))
    for path in candidates:
        value = read_version(str(path), (variable,)) if variable else None
        if value:
            return value, read_version_file(str(path)), path
    names = " or ".join(str(c) for c in candidates)
    raise MinimumNotFound(f"no {shorten(variable or 'minimum-backend variable', 100)} in {shorten(names, 300)}; "
                          "pass --min-backend VERSION")


def counts(judgements: Sequence[Judgement]) -> dict[str, int]:
    found = Counter(j.verdict for j in judgements)
    return {verdict: found.get(verdict, 0) for verdict in VERDICTS}


def one_line(source: str) -> str:
    """A condition's source on one line (a multi-line condition's whitespace collapsed)."""
    return " ".join(source.split())


def _first(judgement: Judgement) -> str:
    parts = [f"{c}: {release or 'no release yet'}" for c, release in judgement.first_releases.items()]
    return "; ".join(parts)


def text(judgements: Sequence[Judgement], header: str) -> str:
    lines = [header]
    current = None
    for j in judgements:
        if j.gate.file != current:
            current = j.gate.file
            lines.append(f"{current}")
        lines.append(f"  {j.gate.file}:{j.gate.line}: {j.verdict:<12} {j.gate.kind:<14} {one_line(j.gate.source)}")
        lines.append(f"      {j.reason}; first release: {_first(j)}")
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts(judgements).items())
    lines.append(f"{len(judgements)} gates: {summary}")
    return "\n".join(lines)


def markdown(judgements: Sequence[Judgement], header: str) -> str:
    gates = [(f"`{j.gate.file}:{j.gate.line}`", j.gate.kind, f"`{one_line(j.gate.source)}`", j.verdict, _first(j))
             for j in judgements]
    return "\n".join([f"**{header}**", "", markdown_table(("verdict", "gates"), list(counts(judgements).items())), "",
                      markdown_table(("where", "kind", "condition", "verdict", "first release on the upper side"),
                                     gates)])


def to_json(judgements: Sequence[Judgement], minimum: str, source: str, failed: dict[str, str]) -> dict[str, Any]:
    return {"minimum_backend": minimum, "minimum_source": source, "counts": counts(judgements),
            "gates": [j.to_json() for j in judgements], "unparsed": failed}
