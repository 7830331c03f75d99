"""Changelog headings as release tools read and write them (no I/O): the heading that names a version, whether it
is a placeholder, and a release's dated heading spelled as the changelog's own precedent spells one."""

from __future__ import annotations

import datetime
import re

__all__ = ["DATED", "PLACEHOLDER", "changelog_has", "changelog_heading", "date_heading", "precedent_heading"]


def changelog_heading(text: str, version: str) -> str | None:
    """The Markdown/RST heading line that names ``version`` exactly (not a longer version), or ``None``."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)")
    lines = text.splitlines()
    for number, line in enumerate(lines):
        underlined = number + 1 < len(lines) and re.fullmatch(r"[=\-~^]{3,}", lines[number + 1].strip() or "x")
        if (line.lstrip().startswith("#") or underlined) and pattern.search(line):
            return line.strip()
    return None


def changelog_has(text: str, version: str) -> bool:
    """A Markdown/RST heading line names ``version`` exactly (not a longer version)."""
    return changelog_heading(text, version) is not None


PLACEHOLDER = re.compile(r"\b(TODO|TBD|FIXME|XXX)\b|\(\s*\)|\bunreleased\b", re.I)


DATED = re.compile(r"#{1,3} (?P<word>\S+) [\w.]+ \((?P<month>[A-Z][a-z]+)\.? \d{1,2}, \d{4}\)\s*$")


def precedent_heading(heading: str, lines: list[str], after: int, released: str, day: datetime.date) -> str:
    """The released version's heading as the changelog's newest dated heading below ``after`` spells one (jax wrote
    "jax 0.5.0 (Jan 17, 2025)" then "JAX 0.6.0 (April 16, 2025)": the nearest precedent wins), else ``heading``."""
    for line in lines[after:]:
        found = DATED.match(line)
        if found:
            month = f"{day:%b}" if len(found["month"]) == 3 and found["month"] != "May" else f"{day:%B}"
            if found["month"] == "May":  # May is the same either way: the next precedent decides
                continue
            return f"{found['word']} {released} ({month} {day.day}, {day.year})"
    return heading


def date_heading(line: str, date: str) -> str:
    """An existing heading of the release, its text kept: a placeholder in parentheses becomes the date, else the
    date is added ("## jax 0.5.3" → "## jax 0.5.3 (Mar 19, 2025)")."""
    if re.search(r"\([^)]*\)\s*$", line):
        return re.sub(r"\([^)]*\)\s*$", f"({date})", line)
    return f"{line.rstrip()} ({date})"
