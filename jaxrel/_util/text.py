"""Text for people: every secret jaxrel knows of redacted, aligned tables, the last lines of a program's output."""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Sequence

__all__ = ["PASSWORD_ENV", "SECRET_ENVS", "clip", "excerpt", "markdown_table", "redact", "remember_secret", "shorten",
           "table", "tail"]

PASSWORD_ENV = "TWINE_PASSWORD"
# secrets the environment hands jaxrel: the upload password, the CI's request token for OIDC tokens
SECRET_ENVS = (PASSWORD_ENV, "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
_SHORT = 6  # a secret shorter than this is replaced only where it stands alone ("b" inside "unreachable" stays)
_remembered: set[str] = set()
# userinfo runs to the last "@" of a URL token: a password may hold "/" or "@"
_USERINFO = re.compile(r"(://)([^/\s:@'\"<>]+)(:[^\s'\"<>]*)?@")


def remember_secret(value: str | None) -> None:
    """Add ``value`` to the secrets :func:`redact` replaces from now on in this process (an OIDC token, a minted
    upload token, a password from a URL or ~/.pypirc)."""
    if value:
        _remembered.add(value)


def _spellings(secret: str) -> set[str]:
    """How ``secret`` can appear in text jaxrel prints: as itself, as Python writes it in a repr (``\\r\\n``), as
    JSON writes it in a string, percent-encoded in a URL."""
    return {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe="")} - {""}


def redact(text: str) -> str:
    """``text`` without any secret jaxrel knows of: the environment's (:data:`SECRET_ENVS`), every
    :func:`remember_secret` value (in each of its spellings), and the userinfo of any URL
    (``user:***@``; a bare ``token@`` is ``***@``)."""
    secrets = {*_remembered, *(os.environ.get(name, "") for name in SECRET_ENVS)} - {""}
    for secret in sorted((s for value in secrets for s in _spellings(value)), key=len, reverse=True):
        if len(secret) >= _SHORT:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", "***", text)
    return _USERINFO.sub(lambda m: f"{m[1]}{m[2]}:***@" if m[3] is not None else f"{m[1]}***@", text)


def excerpt(body: bytes | str, width: int = 60) -> str:
    """A short, printable, secret-free excerpt of what a server or a program answered, for an error line:
    secrets are replaced *before* the text is cut (a cut never leaves half a token), then control
    characters are escaped and the length bounded."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    clean = "".join(c if c.isprintable() else repr(c)[1:-1] for c in redact(text[: 64 * 1024]))
    return repr(clean[:width] + ("…" if len(clean) > width else ""))


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


def clip(text: str, width: int) -> str:
    """``text`` as given when it fits in ``width`` characters, else cut to fit, ending in ``…`` (for table cells)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def shorten(text: str, width: int = 60) -> str:
    """``text`` as given when short, else its start and end around ``…`` and its length (for one-line errors)."""
    if len(text) <= width:
        return text
    keep = max(width // 2 - 4, 1)
    return f"{text[:keep]}…{text[-keep:]} ({len(text)} characters)"
