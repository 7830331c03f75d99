"""Rewrite single statements of a module with libcst, leaving every other byte as it was.

libcst is exact but slow (a 12,000-line test file takes seconds to parse); a gate touches one
statement. A :class:`Slice` is the statement (an ``if``/``elif`` chain, a decorated definition, an
assignment, an import), the comment lines directly above it at its own indentation and, for a
compound statement, the deeper comment lines that close its block: what libcst would attach to
that statement in the whole module. It is parsed alone, behind a line that keeps its indentation
valid (``if True:`` for an indented statement, ``pass`` at the top level), transformed, and
spliced back. A statement whose rewrite leaves nothing is deleted; a block left empty gets ``pass``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

__all__ = ["Blocks", "DEEPEST", "Removed", "Slice", "TooDeep", "Transform", "expression_slice", "nesting",
    "parse_cst", "rewrite_expression", "rewrite_slice", "splice", "split_lines", "statement_start"]

_COMMENT_OR_BLANK = re.compile(r"[ \t\f]*(?:#.*)?$")


def split_lines(source: str) -> list[str]:
    """``source`` as lines with their ends, split where Python's tokenizer does (not \\f, \\u2028)."""
    parts = re.split(r"(\r\n|\r|\n)", source)
    lines = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t\f"))]


# libcst's native parser recurses once per operator of a chain and overflows its stack (a segfault,
# measured at 10,000 `or` terms; 3,000 parse) on code nested deeper than this.
DEEPEST = 1000


class TooDeep(Exception):
    """Code nested deeper than libcst parses safely; the message says where."""


def nesting(tree: ast.AST) -> int:
    """How deep libcst would nest ``tree``: each node one level, a boolean chain one per operand."""
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        step = max(1, len(node.values) - 1) if isinstance(node, ast.BoolOp) else 1
        stack.extend((child, depth + step) for child in ast.iter_child_nodes(node))
    return deepest


def parse_cst(text: str, where: str = "the code") -> cst.Module:
    """``libcst.parse_module(text)``, refused with :class:`TooDeep` past :data:`DEEPEST` levels (or when
    Python's own parser already gives up) instead of crashing the process."""
    try:
        depth = nesting(ast.parse(text))
    except (SyntaxError, ValueError):  # ValueError: a NUL byte on Python 3.11.0-3.11.3
        depth = 0  # syntax newer than this Python: libcst alone can read it
    except (RecursionError, MemoryError):
        depth = DEEPEST + 1
    if depth > DEEPEST:
        raise TooDeep(f"{where} is nested more than {DEEPEST} levels deep, past what the rewriter (libcst) "
                      "parses safely; the file was left unchanged")
    return cst.parse_module(text)


@dataclass
class Slice:
    """Lines ``first`` .. ``last`` (1-based, inclusive) of a module: whole statements of one block."""

    first: int
    last: int
    indent: str
    statements: list[ast.stmt]
    siblings: list[ast.stmt]  # the block the statements belong to


def statement_start(node: ast.stmt) -> int:
    """The first line of ``node``, its decorators included."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


class Blocks:
    """Every statement of a module with the block (list of statements) holding it."""

    def __init__(self, tree: ast.Module, lines: Sequence[str]) -> None:
        self.lines = lines
        self.block: dict[int, list[ast.stmt]] = {}  # id(statement) -> its block
        self.parent: dict[int, ast.AST] = {}
        self.statements: list[ast.stmt] = []
        pending: list[ast.AST] = [tree]
        while pending:
            node = pending.pop()
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(node, name, None)
                if not isinstance(block, list):
                    continue
                for child in block:
                    if isinstance(child, ast.stmt):
                        self.block[id(child)] = block
                        self.statements.append(child)
                    self.parent[id(child)] = node
                    pending.append(child)

    def innermost(self, line: int, col: int, end_line: int, end_col: int) -> ast.stmt | None:
        """The smallest statement whose span holds the expression at ``(line, col)``..``(end_line, end_col)``."""
        best: ast.stmt | None = None
        for node in self.statements:
            start = (statement_start(node), 0 if statement_start(node) < node.lineno else node.col_offset)
            end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            if start <= (line, col) and (end_line, end_col) <= end:
                if best is None or (statement_start(node), node.col_offset) >= (statement_start(best), best.col_offset):
                    best = node
        return best

    def chain_head(self, node: ast.stmt) -> ast.stmt:
        """An ``elif``'s whole ``if`` statement (the ``elif`` is the sole statement of its ``orelse``)."""
        while isinstance(node, ast.If):
            parent = self.parent.get(id(node))
            text = self.lines[node.lineno - 1][node.col_offset:]
            if isinstance(parent, ast.If) and parent.orelse == [node] and text.startswith("elif"):
                node = parent
            else:
                break
        return node

    def slice_of(self, node: ast.stmt) -> Slice:
        """``node``'s lines, with the statements sharing a line with it (``a = 1; b = 2``) and its comments."""
        block = self.block[id(node)]
        members = [node]
        first, last = statement_start(node), node.end_lineno or node.lineno
        grown = True
        while grown:
            grown = False
            for other in block:
                if other not in members and statement_start(other) <= last and (other.end_lineno or 0) >= first:
                    members.append(other)
                    first, last = min(first, statement_start(other)), max(last, other.end_lineno or 0)
                    grown = True
        members.sort(key=lambda s: (s.lineno, s.col_offset))
        indent = _indent(self.lines[first - 1])
        while first > 1 and _COMMENT_OR_BLANK.match(self.lines[first - 2].rstrip("\r\n")) and \
                (not self.lines[first - 2].strip() or _indent(self.lines[first - 2]) == indent):
            first -= 1
        if hasattr(members[-1], "body"):  # deeper comments closing its block
            end = last
            while end < len(self.lines) and _COMMENT_OR_BLANK.match(self.lines[end].rstrip("\r\n")) and \
                    (not self.lines[end].strip() or len(_indent(self.lines[end])) > len(indent)):
                end += 1
                if self.lines[end - 1].strip():
                    last = end
        return Slice(first, last, indent, members, block)


def _newline(lines: Sequence[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith(("\n", "\r")):
            return line[-1]
    return "\n"


class Removed(Exception):
    """The rewrite of a slice left no statement."""


Transform = Callable[[cst.Module, int, int], cst.Module]  # (module, line offset, first-line column shift)


def expression_slice(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> Slice:
    """The lines holding the expression from ``start`` to ``end`` ((line, character column)); no statements."""
    return Slice(start[0], end[0], _indent(lines[start[0] - 1]), [], [])


def rewrite_expression(lines: Sequence[str], piece: Slice, start: tuple[int, int], end: tuple[int, int],
                       transform: Transform) -> str:
    """The new text of ``piece``'s lines after ``transform`` rewrote the expression from ``start`` to ``end``
    (parsed alone, in parentheses: a gate inside a statement of a thousand lines)."""
    newline = _newline(lines)
    first, last = lines[start[0] - 1], lines[end[0] - 1]
    if start[0] == end[0]:
        text = first[start[1]:end[1]]
    else:
        text = first[start[1]:] + "".join(lines[start[0]:end[0] - 1]) + last[:end[1]]
    module = transform(parse_cst(f"({text}){newline}", f"line {start[0]}"), start[0] - 1, start[1] - 1)
    code = module.code
    assert code.startswith("(") and code.endswith(f"){newline}"), "the parentheses around a cut-out expression stay"
    return first[:start[1]] + code[1:-len(newline) - 1] + last[end[1]:]


def rewrite_slice(lines: Sequence[str], piece: Slice, transform: Transform) -> str:
    """The new text of ``piece`` after ``transform(module, offset)`` (offset: add it to a slice line to
    get the file's line); raises :class:`Removed` when nothing is left."""
    newline = _newline(lines)
    text = "".join(lines[piece.first - 1:piece.last])
    if not text.endswith(("\n", "\r")):
        text += newline
    opener = f"if True:{newline}" if piece.indent else f"pass{newline}"
    module = transform(parse_cst(opener + text, f"line {piece.first}"), piece.first - 2, 0)
    body = module.body
    if piece.indent:
        inner = body[0].body if len(body) == 1 and isinstance(body[0], cst.If) else None
        assert isinstance(inner, cst.IndentedBlock), "the opening `if True:` is kept"
        statements = list(inner.body)
    else:
        statements = list(body[1:])
    if not statements or (len(statements) == 1 and isinstance(statements[0], cst.SimpleStatementLine)
                          and len(statements[0].body) == 1 and isinstance(statements[0].body[0], cst.Pass)
                          and not statements[0].leading_lines and not _had_pass(piece)):
        raise Removed
    code = module.code.split(newline, 1)[1] if newline in module.code else ""
    original_ends = "".join(lines[piece.first - 1:piece.last])
    if not original_ends.endswith(("\n", "\r")) and code.endswith(newline):
        code = code[:-len(newline)]
    return code


def _had_pass(piece: Slice) -> bool:
    return any(isinstance(s, ast.Pass) for s in piece.statements)


def splice(lines: Sequence[str], replacements: Sequence[tuple[Slice, str | None]]) -> str:
    """The module with each slice replaced by its new text (``None``: removed; a block left with no
    statement gets ``pass`` at the slice's indentation)."""
    removed: dict[int, set[int]] = {}
    for piece, text in replacements:
        if text is None:
            removed.setdefault(id(piece.siblings), set()).update(id(s) for s in piece.statements)
    out = list(lines)
    newline = _newline(lines)
    placed: set[int] = set()
    for piece, text in sorted(replacements, key=lambda r: -r[0].first):
        if text is None:
            emptied = removed[id(piece.siblings)] >= {id(s) for s in piece.siblings}
            text = ""
            if emptied and piece.indent and id(piece.siblings) not in placed and \
                    piece.statements[0] is min(piece.siblings, key=lambda s: s.lineno):
                text = f"{piece.indent}pass{newline}"
                placed.add(id(piece.siblings))
        out[piece.first - 1:piece.last] = [text]
    return "".join(out)
