"""Byte offsets of ``ast`` nodes in their source, to replace one literal and nothing else
(standard library only). ``ast`` columns count UTF-8 bytes, so offsets are into the encoded source."""

from __future__ import annotations

import ast


def line_starts(source: bytes) -> list[int]:
    """The byte offset at which each line of ``source`` starts (index 0 is line 1)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def span(starts: list[int], node: ast.expr) -> tuple[int, int]:
    """``node``'s (start, end) byte offsets, given its source's :func:`line_starts`."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset
