"""Progress lines: the one ``Progress`` type every long run takes, and ``say``, its default.

``say`` writes one line to stderr in one write (lines from cells running side by side do not
interleave), with credentials redacted (:func:`jaxrel._util.text.redact`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from jaxrel._util.text import redact

__all__ = ["Progress", "say", "silent"]

Progress = Callable[[str], None]


def say(message: str) -> None:
    """A progress or warning line on stderr, credentials redacted, written at once."""
    sys.stderr.write(redact(message) + "\n")
    sys.stderr.flush()


def silent(message: str) -> None:
    """A progress sink that drops every line."""
