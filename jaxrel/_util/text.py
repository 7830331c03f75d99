"""Text for people: credentials redacted, aligned tables, the last lines of a program's output."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

__all__ = ["PASSWORD_ENV", "markdown_table", "redact", "shorten", "table", "tail"]

PASSWORD_ENV = "TWINE_PASSWORD"


def redact(text: str) -> str:
    """``text`` without the password from the environment or any ``user:password@`` in a URL."""
    secret = os.environ.get(PASSWORD_ENV, "")
    if len(secret) >= 6:
        text = text.replace(secret, "***")
    elif secret:  # too short to replace inside words ("b" in "unreachable"): only where it stands alone
        text = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", "***", text)
    return re.sub(r"(://[^/\s:@]+):[^@\s/]+@", r"\1:***@", text)


def table(
    headers: Sequence[str] | None, rows: Sequence[Sequence[object]], *, indent: str = "", rule: bool = True
) -> str:
    """A plain-text table: columns padded to their widest cell, two spaces apart, no trailing spaces.

    A rule of dashes goes under the header (``rule=False``: none). ``headers=None`` gives
    the rows alone, aligned (a key/value list). ``indent`` starts every line. Nothing to
    show (no header, no rows) is the empty string.
    """
    cells = [[str(h) for h in headers]] if headers is not None else []
    cells += [[str(c) for c in row] for row in rows]
    if not cells:
        return ""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = [(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip() for row in cells]
    if headers is not None and rule:
        lines.insert(1, indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    def line(row: Sequence[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(row) for row in rows)])


def tail(output: str | None, lines: int = 3, *, separator: str = " | ", empty: str = "no output") -> str:
    """The last ``lines`` non-empty lines of a program's output, stripped, on one line (``empty`` if none)."""
    kept = [line.strip() for line in (output or "").splitlines() if line.strip()][-lines:]
    return separator.join(kept) or empty


def shorten(text: str, width: int = 60) -> str:
    """``text`` as given when short, else its start and end around ``…`` and its length (for one-line errors)."""
    if len(text) <= width:
        return text
    keep = max(width // 2 - 4, 1)
    return f"{text[:keep]}…{text[-keep:]} ({len(text)} characters)"
