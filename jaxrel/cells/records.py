"""What the runner and the cell plugin (:mod:`jaxrel.cells.pytest_plugin`) agree on, without pytest.

The runner passes the plugin its settings in these environment variables; jaxrel itself does
not depend on pytest, only the cells do.
"""

from __future__ import annotations

import re

__all__ = ["ONLY", "PACKAGE", "RECORD", "SEVERITY", "SHARD", "first_error", "parse_shard", "signature"]

RECORD = "JAXREL_CELL_RECORD"
PACKAGE = "JAXREL_CELL_PACKAGE"
ONLY = "JAXREL_CELL_ONLY"
SHARD = "JAXREL_CELL_SHARD"
SEVERITY = {"skipped": 0, "passed": 1, "failed": 2, "error": 3}  # a test's outcome is its worst report's


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; raises ``ValueError`` unless ``1 <= I <= N``."""
    index, _, count = text.partition("/")
    i, n = int(index), int(count)
    if not 1 <= i <= n:
        raise ValueError(f"shard {text!r}: expected I/N with 1 <= I <= N")
    return i, n


def first_error(text: str) -> str:
    """The cause in a pytest failure text: its first ``E   `` line (the exception and its message, or the failed
    assertion), else its last line. When that line is a traceback's ``File "…", line N`` (a module that does not
    compile: a ``SyntaxError`` shows where first), the exception line after it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line[1:].strip() for line in lines if line.startswith("E ")]
    found = raised[0] if raised else (lines[-1] if lines else "")
    if found.startswith('File "'):
        found = next((line for line in raised if _EXCEPTION.match(line)), found)
    return found[:500]


_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Warning|Exit)\b")


def signature(message: str) -> str:
    """A failure's signature: its first line with hex, long ids, paths and numbers folded, so the same error groups
    across runs, cells and libraries (``AttributeError: module 'jax.core' has no attribute 'pp_eqn_rules'``)."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    line = re.sub(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b", "#", line)
    line = re.sub(r"(/[\w.-]+)+", "/…", line)
    return re.sub(r"\d+", "N", line)[:200]
