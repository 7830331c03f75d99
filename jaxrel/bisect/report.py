"""What ``jaxrel bisect`` answers: a table for the terminal, JSON, and ``bisect.json`` + ``bisect.md``.

Both files are written together or not at all (:func:`jaxrel._util.atomic.write_reports`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jaxrel._util.atomic import write_reports
from jaxrel._util.text import clip, markdown_table, table
from jaxrel.bisect.git import Commit
from jaxrel.bisect.records import StepRecord
from jaxrel.bisect.search import Result

__all__ = ["markdown", "text", "to_json", "write"]

HEADLINE = {
    "found": "first bad commit",
    "candidates": "first bad commit: one of several (skipped commits left them apart)",
    "no-regression": "no regression: the bad revision passes",
    "good-fails": "refused: a good revision fails",
    "endpoint-skipped": "refused: an endpoint cannot be tested",
}


def _commit(commit: Commit | None) -> dict[str, Any] | None:
    if commit is None:
        return None
    return {**asdict(commit), "short": commit.short, "merge": commit.merge, "files": list(commit.files),
            "parents": list(commit.parents)}


def _step(step: StepRecord | None) -> dict[str, Any] | None:
    return None if step is None else asdict(step)


def to_json(result: Result) -> dict[str, Any]:
    """The whole result as JSON-ready data (``bisect.json``, ``--json``)."""
    return {
        "status": result.status,
        "message": result.message,
        "cell": result.cell,
        "bad": result.bad,
        "goods": result.goods,
        "commits_in_range": result.commits_in_range,
        "steps_taken": result.bisect_steps,
        "first_bad": _commit(result.first_bad),
        "version_only": result.version_only,
        "merge_brings": [_commit(c) for c in result.merge_brings],
        "candidates": [_commit(c) for c in result.candidates],
        "at_first_bad": _step(result.at_culprit),
        "at_parent": _step(result.at_parent),
        "steps": [asdict(s) for s in result.steps],
        "environment_seconds": round(result.environment_seconds, 2),
        "seconds": round(result.seconds, 2),
        "deps_as_of": result.deps_as_of,
        "notes": result.notes,
        "tests": result.tests,
        "keyword": result.keyword,
    }


def _several_backends(result: Result) -> bool:
    return len({step.backend for step in result.steps if step.backend}) > 1


def _step_rows(result: Result) -> list[list[str]]:
    rows = []
    for number, step in enumerate(result.steps, 1):
        seconds = step.seconds
        rows.append([str(number), step.role, step.short, clip(step.subject, 40), step.verdict,
                     *([step.backend] if _several_backends(result) else []),
                     clip(step.reason, 90), f"{seconds.get('export', 0):.1f}",
                     f"{seconds.get('build+install', 0):.1f}" + (" (cached)" if step.cached else ""),
                     f"{seconds.get('tests', 0):.1f}"])
    return rows


STEP_HEADERS = ["#", "role", "commit", "subject", "verdict", "reason", "export s", "build+install s", "tests s"]


def step_headers(result: Result) -> list[str]:
    """The steps table's columns: with the backend's when the steps ran with more than one."""
    return [*STEP_HEADERS[:5], *(["backend"] if _several_backends(result) else []), *STEP_HEADERS[5:]]


def _at(label: str, step: StepRecord | None) -> list[str]:
    if step is None:
        return [f"{label}: not tested"]
    lines = [f"{label}: {step.verdict} ({step.reason})"]
    lines += [f"  failing: {test}" for test in step.failing[:10]]
    lines += [f"  … and {len(step.failing) - 10} more (bisect.json lists them)"] if len(step.failing) > 10 else []
    if step.first_error:
        lines.append(f"  first error: {step.first_error}")
    return lines


def _commit_lines(commit: Commit, indent: str = "") -> list[str]:
    return [f"{indent}{commit.hash} {commit.subject}", f"{indent}  author {commit.author}, {commit.date}",
            *([f"{indent}  files: {', '.join(commit.files[:20])}" + (" …" if len(commit.files) > 20 else "")]
              if commit.files else [])]


def text(result: Result) -> str:
    """The answer for a terminal: the culprit (or candidates), the failures, the steps."""
    lines = [f"{HEADLINE.get(result.status, result.status)} · cell {result.cell}"]
    if result.first_bad is not None:
        lines += _commit_lines(result.first_bad)
        if result.version_only:
            lines.append("  it changes only the version files: what turned red judged the version string "
                         "(an expectation, not a regression)")
        if result.first_bad.merge:
            lines.append(f"  a merge: it brings in {len(result.merge_brings)} commits:")
            lines += [f"    {c.short} {c.subject}" for c in result.merge_brings]
        lines += _at("at the first bad commit", result.at_culprit)
        lines += _at("at its parent", result.at_parent)
    for commit in result.candidates:
        lines += _commit_lines(commit, "  ")
    if result.status not in ("found", "candidates") and result.message:
        lines.append(result.message)
    lines.append("")
    lines.append(table(step_headers(result), _step_rows(result)))
    skipped = [s for s in result.steps if s.verdict == "skip"]
    flaky = [s for s in result.steps if s.flaky]
    lines.append(f"{result.commits_in_range} commits in range · {result.bisect_steps} bisection steps"
                 f" ({len(skipped)} skipped, {len(flaky)} with flaky tests) · environment "
                 f"{result.environment_seconds:.1f} s · total {result.seconds:.1f} s · deps as of {result.deps_as_of}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def markdown(result: Result) -> str:
    """``bisect.md``."""
    out = [f"# jaxrel bisect: {HEADLINE.get(result.status, result.status)}", "",
           f"Cell `{result.cell}`; bad `{result.bad[:12]}`; good {', '.join(f'`{g[:12]}`' for g in result.goods)}; "
           f"{result.commits_in_range} commits in range, {result.bisect_steps} bisection steps, "
           f"{result.seconds:.1f} s (environment {result.environment_seconds:.1f} s); "
           f"test requirements as of {result.deps_as_of}.", ""]
    if result.first_bad is not None:
        commit = result.first_bad
        out += [f"## First bad commit `{commit.short}`" + (" (a merge)" if commit.merge else ""), "",
                f"- subject: {commit.subject}", f"- author: {commit.author}", f"- date: {commit.date}",
                f"- commit: `{commit.hash}`",
                f"- files changed: {', '.join(f'`{f}`' for f in commit.files) or 'none'}", ""]
        if commit.merge:
            out += ["The merge brings in:", "", *(f"- `{c.short}` {c.subject}" for c in result.merge_brings), ""]
        for label, step in (("At the first bad commit", result.at_culprit), ("At its parent", result.at_parent)):
            if step is None:
                continue
            out += [f"{label}: **{step.verdict}** ({step.reason})", ""]
            out += [f"- failing: `{t}`" for t in step.failing]
            out += [f"- first error: `{step.first_error}`"] if step.first_error else []
            out.append("")
    if result.candidates:
        out += ["## Candidates", "", "Skipped commits leave these apart; the first bad commit is one of them:", ""]
        out += [f"- `{c.short}` {c.subject} ({c.author}, {c.date})" for c in result.candidates]
        out.append("")
    if result.status not in ("found", "candidates"):
        out += [result.message, ""]
    out += ["## Steps", "", markdown_table(step_headers(result), _step_rows(result)), ""]
    out += [f"- note: {note}" for note in result.notes]
    return "\n".join(out).rstrip() + "\n"


def write(workdir: Path, result: Result) -> tuple[Path, Path]:
    """``bisect.json`` and ``bisect.md`` in ``workdir``, both or neither."""
    json_path, md_path = workdir / "bisect.json", workdir / "bisect.md"
    write_reports({json_path: json.dumps(to_json(result), indent=2) + "\n", md_path: markdown(result)})
    return json_path, md_path
