"""What ``jaxrel downstream`` prints and writes: a text table, Markdown to paste into an issue, and JSON (which
``jaxrel history ingest`` reads)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from packaging.version import Version

from jaxrel._util.atomic import write_reports
from jaxrel._util.text import clip, table
from jaxrel.downstream.cellrun import CellResult
from jaxrel.downstream.crater import CraterResult
from jaxrel.downstream.minimum import MinimumResult

__all__ = ["crater_markdown", "crater_text", "gil_lines", "root_causes", "minimum_markdown", "minimum_text", "write"]


UNBOXED = ("UNBOXED (--unboxed): the tests ran outside the box, as this user, with the file system, memory and "
           "what they leave running not contained")


def _box(boxed: bool) -> str:
    return "boxed: bubblewrap, no network, read-only root, private home, memory and process limits" if boxed \
        else UNBOXED


def gil_lines(cells: Iterable[tuple[str, CellResult | None]]) -> list[str]:
    """One line per library whose cells saw the GIL come on (free-threaded cells), naming what turned it on."""
    seen: dict[str, str] = {}
    for name, cell in cells:
        if cell is not None and cell.gil not in ("", "off"):
            seen.setdefault(name, cell.gil)
    return [f"free-threaded: the GIL came on as {name} loaded (its tests ran with PYTHON_GIL=0): {_cut(why, 110)}"
            for name, why in seen.items()]


def _cut(text: str, width: int = 90) -> str:
    """The first line of ``text``, clipped."""
    return clip(text.strip().splitlines()[0] if text.strip() else "", width)


def minimum_text(result: MinimumResult) -> str:
    """One library release's answer and its cells."""
    lines = [f"{result.library} {result.version} (Python {result.python}; tests from its {result.route})",
             f"  declared: {result.frontend}>={result.declared}" if result.declared else
             f"  declared: no lower bound on {result.frontend}",
             f"  true minimum: {result.true_minimum or 'none found'}" + _verdict(result)]
    failing = result.highest_failing
    if failing is not None and failing.failing:
        lines.append(f"  highest failing: {result.frontend} {failing.jax} / {failing.jaxlib}: {failing.failing[0]}")
        lines.append(f"    {_cut(failing.first_error, 110)}")
    elif failing is not None:
        lines.append(f"  highest ruled out: {result.frontend} {failing.jax}, by its own requirements:")
        lines.append(f"    {_cut(failing.reason, 110)}")
    for edge in (c for c in result.cells if c.role == "edge"):
        lines.append(f"  top edge: {result.frontend} {edge.jax} / {edge.jaxlib}: {edge.outcome}"
                     + (f": {_cut(edge.first_error, 100)}" if edge.first_error else ""))
    rows = [[c.jax, c.jaxlib, c.outcome, c.role, f"{sum(c.seconds.values()):.0f}", _cut(c.reason, 70)]
            for c in result.cells]
    lines += ["", table(["jax", "jaxlib", "outcome", "role", "s", "why"], rows)]
    if result.not_installable:
        shown = ", ".join(v for v, _ in result.not_installable[:8])
        more = f" and {len(result.not_installable) - 8} more" if len(result.not_installable) > 8 else ""
        first, why = result.not_installable[0]  # each its own reason: the first one's shown, named (all in the JSON)
        lines.append(f"not-installable: {shown}{more} ({first}: {_cut(why, 100)})")
    lines += [f"note: {note}" for note in result.notes]
    lines += gil_lines((result.library, cell) for cell in result.cells)
    lines.append(f"{result.searched} cells to find the minimum; {result.seconds:.0f} s; {_box(result.boxed)}")
    return "\n".join(lines)


def _verdict(result: MinimumResult) -> str:
    if result.fix:
        return f"   fix: {result.fix}"
    if not result.true_minimum:
        return ""
    if result.declared and Version(result.declared) < Version(result.true_minimum):
        return "   (the oldest it admits that installs here; older ones cannot be tested)"
    return "   (the declared minimum holds)"


def minimum_markdown(results: list[MinimumResult]) -> str:
    rows = ["| library | declared | true minimum | fix | highest failing | cells | time |",
            "|---|---|---|---|---|---|---|"]
    for r in results:
        failing = r.highest_failing
        shown = f"{failing.jax}: `{_cut(failing.first_error, 80)}`" if failing is not None else ""
        rows.append(f"| {r.library} {r.version} | {r.declared or 'none'} | {r.true_minimum or 'none'} | "
                    f"{f'`{r.fix}`' if r.fix else ''} | {shown} | {r.searched} | {r.seconds:.0f} s |")
    unboxed = [r for r in results if not r.boxed]
    return "\n".join(rows) + "\n" + (f"\n**{UNBOXED}**\n" if unboxed else "")


def crater_text(result: CraterResult) -> str:
    rows = [[v.name, v.version, v.outcome, v.group or "", (v.culprit or {}).get("commit", "")[:12], _cut(v.reason, 80)]
            for v in result.libraries]
    lines = [f"crater: {result.frontend} against {result.frontend.split()[0]} {result.baseline} "
             f"(Python {result.python})", *_sides(result), "",
             table(["library", "version", "outcome", "group", "culprit", "why"], rows)]
    for group, (signature, names) in sorted(result.groups().items()):
        lines.append(f"{group}: {len(names)} libraries: {', '.join(names)}: {signature}")
    lines += _culprit_lines(result)
    lines += _cause_lines(result)
    lines += gil_lines((v.name, cell) for v in result.libraries for cell in (v.baseline, v.candidate))
    counts = result.to_json()["counts"]
    lines.append(", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"; {result.seconds:.0f} s")
    lines += [result.coverage()] if result.coverage() else []
    lines.append(_box(result.boxed))
    return "\n".join(lines)


def root_causes(result: CraterResult) -> list[tuple[str, str, list[str]]]:
    """The regressions grouped by the commit bisect named, across libraries and error groups: (commit, subject,
    libraries), the commit breaking the most first."""
    found: dict[str, tuple[str, list[str]]] = {}
    for verdict in result.libraries:
        culprit = verdict.culprit or {}
        if verdict.outcome == "regressed" and "commit" in culprit:
            found.setdefault(str(culprit["commit"]), (str(culprit.get("subject", "")), []))[1].append(verdict.name)
    return sorted(((commit, subject, names) for commit, (subject, names) in found.items()),
                  key=lambda item: (-len(item[2]), item[0]))


def _cause_lines(result: CraterResult) -> list[str]:
    return [f"root cause {commit[:12]} {_cut(subject, 80)}: {len(names)} "
            f"{'library' if len(names) == 1 else 'libraries'}: {', '.join(names)}"
            for commit, subject, names in root_causes(result)]


def _culprit_lines(result: CraterResult) -> list[str]:
    """Each bisected library: the commit bisect named (or why none), with the bisection's notes."""
    lines = []
    for verdict in result.libraries:
        culprit = verdict.culprit or {}
        if "commit" in culprit:
            lines.append(f"{verdict.name}: first bad commit {str(culprit['commit'])[:12]} {culprit.get('subject', '')} "
                         f"({culprit.get('steps', '?')} steps)")
        elif "error" in culprit:
            lines.append(f"{verdict.name}: not bisected: {_cut(str(culprit['error']), 200)}")
        elif culprit:
            lines.append(f"{verdict.name}: bisection left {len(culprit.get('candidates', []))} candidates")
        lines += [f"  note: {note}" for note in culprit.get("notes", [])]
    return lines


def _sides(result: CraterResult) -> list[str]:
    """How the baseline was chosen and the backend of each side."""
    base, cand = result.backends
    lines = [f"baseline: {result.baseline_why}"] if result.baseline_why else []
    if result.libraries_as_of:
        lines.append(f"libraries: each one named without a version at its newest release uploaded before "
                     f"{result.libraries_as_of} (the candidate's commit)")
    if base or cand:
        lines.append(f"backends: {base} with the baseline, {cand} with the candidate"
                     + (" (one environment, the frontend swapped)" if base == cand else " (an environment each)"))
    apart = [v.name for v in result.libraries
             if v.candidate is not None and v.candidate.resolution.startswith("its own")]
    if base != cand and any(v.candidate is not None and v.candidate.resolution for v in result.libraries):
        lines.append("candidate environments: the baseline's versions of everything but the frontend and its backend"
                     + (f", except {', '.join(apart)} (resolved as of the same era: the baseline's versions do not fit "
                        "the candidate's backend)" if apart else ""))
    return lines


def crater_markdown(result: CraterResult) -> str:
    lines = [f"### Crater: {result.frontend} against {result.baseline}", "", *_sides(result),
             *([result.coverage()] if result.coverage() else []), "",
             *([] if result.boxed else [f"**{UNBOXED}**", ""]),
             "| library | version | outcome | group | culprit | why |", "|---|---|---|---|---|---|"]
    for v in result.libraries:
        culprit = (v.culprit or {}).get("commit", "")
        lines.append(f"| {v.name} | {v.version} | **{v.outcome}** | {v.group or ''} | "
                     f"{f'`{culprit[:12]}`' if culprit else ''} | {_cut(v.reason, 100).replace('|', '/')} |")
    groups = result.groups()
    if groups:
        lines += ["", "Error groups:", ""]
        lines += [f"- **{g}** ({len(names)}: {', '.join(names)}): `{s}`" for g, (s, names) in sorted(groups.items())]
    causes = root_causes(result)
    if causes:
        lines += ["", "Root causes (by the commit bisect named):", ""]
        lines += [f"- [ ] `{commit[:12]}` {subject.replace('|', '/')}: {len(names)} "
                  f"{'library' if len(names) == 1 else 'libraries'} ({', '.join(names)})"
                  for commit, subject, names in causes]
    culprits = _culprit_lines(result)
    if culprits:
        lines += ["", "Bisections:", "", *(f"- {line.strip()}" for line in culprits)]
    return "\n".join(lines) + "\n"


def write(workdir: Path, stem: str, data: dict[str, object], text: str, markdown: str) -> list[Path]:
    """``STEM.json``, ``STEM.txt`` and ``STEM.md`` in ``workdir``, all or none."""
    paths = [workdir / f"{stem}.json", workdir / f"{stem}.txt", workdir / f"{stem}.md"]
    write_reports({paths[0]: json.dumps(data, indent=1) + "\n", paths[1]: text + "\n", paths[2]: markdown})
    return paths
