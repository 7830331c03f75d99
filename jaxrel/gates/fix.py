"""Rewrite decided api-version gates to the code that remains (libcst: formatting and comments kept).

What a gate becomes, and which gates are refused, is :mod:`jaxrel.gates.rewrite`'s; only the
statements holding gates go through libcst (:mod:`jaxrel.gates.slices`). Imports the rewrite
left unread are removed under :mod:`jaxrel.gates.imports`' rules. :func:`fix_tree` then
verifies the tree (:mod:`jaxrel.gates.verify`): a file whose rewrite does not compile under the
newest Python here, or stops binding a name another module imports, is left as it was and
listed. :meth:`TreeFix.write` writes every rewritten file or none.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from jaxrel._util import parallel
from jaxrel._util.atomic import read_exactly, unwritable, write_all_atomically, write_atomically
from jaxrel.errors import EnvironmentFailure
from jaxrel.gates import imports, slices, verify
from jaxrel.gates import names as qualnames
from jaxrel.gates.judge import Judgement
from jaxrel.gates.rewrite import DECIDED, DropImports, Rewriter, char_col, refusal

__all__ = ["FileFix", "TreeFix", "fix_source", "fix_tree", "write_atomically"]

Progress = Callable[[int, int, str], None]


@dataclass
class FileFix:
    """The rewritten source of one file, and the gates left alone with why."""

    source: str
    changed: list[str] = field(default_factory=list)  # "line: what was done"
    refused: list[str] = field(default_factory=list)  # "line: why not"


class _Unchanged(Exception):
    """The file cannot be rewritten exactly; the message says why."""


def _lines_of(source: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", source)  # ast's lines: not str.splitlines (\f, \u2028)


def _gate_transform(chosen: Sequence[Judgement], lines: Sequence[str], notes: list[str]) -> slices.Transform:
    def transform(module: cst.Module, offset: int, shift: int) -> cst.Module:
        rewriter = Rewriter(chosen, lines, offset, shift)
        try:
            rewritten = MetadataWrapper(module, unsafe_skip_copy=True).visit(rewriter)
        except cst.CSTValidationError as error:  # e.g. `if(v >= 3)and x:` would need `if x:` re-spaced
            raise _Unchanged(f"cannot rewrite without reformatting ({error}); the file was left unchanged") from None
        if rewriter.unsafe:
            raise _Unchanged("a decided comparison sits next to code with side effects; the file was left unchanged")
        notes.extend(rewriter.notes)
        return rewritten
    return transform


def _drop_transform(names: set[str]) -> slices.Transform:
    return lambda module, offset, shift: module.visit(DropImports(names))


Span = tuple[tuple[int, int], tuple[int, int]]  # an expression's (line, character column) start and end
LARGE = 40  # lines: a gate's expression inside a longer statement is rewritten alone


def _rewrite_statements(source: str, tree: ast.Module, targets: Sequence[ast.stmt | tuple[ast.stmt, Span]],
                        transform: slices.Transform) -> tuple[str, str]:
    """``source`` with each target rewritten by ``transform`` (a statement, or an expression inside a
    large statement); and the text replaced."""
    lines = slices.split_lines(source)
    blocks = slices.Blocks(tree, _lines_of(source))
    pieces: list[tuple[slices.Slice, Span | None]] = []
    for target in targets:
        node, span = target if isinstance(target, tuple) else (target, None)
        piece = blocks.slice_of(blocks.chain_head(node))
        if span is not None and piece.last - piece.first >= LARGE:
            piece = slices.expression_slice(lines, *span)
        else:
            span = None
        if any(p.first <= piece.first and piece.last <= p.last and (s is None or p is piece) for p, s in pieces):
            continue  # inside a statement slice already taken
        pieces = [(p, s) for p, s in pieces if not (piece.first <= p.first and p.last <= piece.last)]
        pieces.append((piece, span))
    pieces.sort(key=lambda p: p[0].first)
    for (one, _), (two, _) in zip(pieces, pieces[1:], strict=False):
        if two.first <= one.last:
            raise _Overlap
    replacements: list[tuple[slices.Slice, str | None]] = []
    for piece, span in pieces:
        try:
            if span is not None:
                replacements.append((piece, slices.rewrite_expression(lines, piece, *span, transform)))
            else:
                replacements.append((piece, slices.rewrite_slice(lines, piece, transform)))
        except slices.Removed:
            replacements.append((piece, None))
    replaced = "".join("".join(lines[p.first - 1:p.last]) for p, _ in pieces)
    return slices.splice(lines, replacements), replaced


class _Overlap(Exception):
    """Two slices share lines: rewrite the whole module instead."""


def _gate_targets(tree: ast.Module, lines: Sequence[str],
                  chosen: Sequence[Judgement]) -> list[ast.stmt | tuple[ast.stmt, Span]]:
    """The statement holding each gate; with, for a ternary or a gate outside a branch, the span of
    the expression that changes (the ternary, or the gate's condition)."""
    blocks = slices.Blocks(tree, lines)
    targets: list[ast.stmt | tuple[ast.stmt, Span]] = []
    for judgement in chosen:
        gate = judgement.gate
        node = blocks.innermost(gate.line, gate.col, gate.end_line, gate.end_col)
        if node is None:
            raise _Overlap  # not inside a statement we parsed: take the slow, whole-module path
        expression: ast.expr | None = None
        if gate.kind == "ternary":
            expression = next((n for n in ast.walk(node) if isinstance(n, ast.IfExp) and
                               (n.test.lineno, n.test.col_offset) == (gate.line, gate.col)), None)
        elif gate.kind == "expression":
            expression = next((n for n in ast.walk(node) if isinstance(n, ast.expr) and
                               (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset) ==
                               (gate.line, gate.col, gate.end_line, gate.end_col)), None)
        if expression is None or expression.end_lineno is None or expression.end_col_offset is None:
            targets.append(node)
            continue
        start = (expression.lineno, char_col(lines, expression.lineno, expression.col_offset))
        end = (expression.end_lineno, char_col(lines, expression.end_lineno, expression.end_col_offset))
        targets.append((node, (start, end)))
    return targets


def fix_source(source: str, judgements: Sequence[Judgement], *, module: str | None = None,
               index: imports.TreeIndex | None = None, filename: str = "<unknown>") -> FileFix:
    """``source`` with its decided gates rewritten; gates it refuses are listed, untouched.

    ``module`` and ``index`` (the module's dotted name and its tree's import index) keep the
    imports other modules import from this one.
    """
    refusals = {id(j): refusal(j) for j in judgements}
    refused = [reason for reason in refusals.values() if reason]
    chosen = [j for j in judgements if not refusals[id(j)] and any(v in DECIDED for v in j.comparisons.values())]
    if not chosen:
        return FileFix(source, [], refused)
    lines = _lines_of(source)
    wanted = {line for j in chosen for line in range(j.gate.line, j.gate.end_line + 1)}
    notes: list[str] = []
    try:
        tree = qualnames.parse_lines(source, lines, wanted, filename, top_level=False)
        rewritten, replaced = _rewrite_statements(source, tree, _gate_targets(tree, lines, chosen),
                                                  _gate_transform(chosen, lines, notes))
    except (_Unchanged, slices.TooDeep) as why:
        return FileFix(source, [], refused + [str(why)])
    except (SyntaxError, _Overlap):
        return _fix_whole_module(source, chosen, refused, module, index, filename)
    try:
        return _drop_imports(source, rewritten, replaced, notes, refused, module, index, filename)
    except slices.TooDeep as why:
        return FileFix(source, [], refused + [str(why)])


def _drop_imports(source: str, rewritten: str, replaced: str, notes: list[str], refused: list[str],
                  module: str | None, index: imports.TreeIndex | None, filename: str) -> FileFix:
    """``rewritten`` without the imports it left unread (the rules of :mod:`jaxrel.gates.imports`)."""
    drop, kept = imports.removable(source, rewritten, replaced, module, index, filename)
    changed = notes + kept
    if drop:
        lines = _lines_of(rewritten)
        wanted = {line for line, text in enumerate(lines, 1) if any(name in text for name in drop)}
        try:
            tree = qualnames.parse_lines(rewritten, lines, wanted, filename, top_level=False)
            targets: list[ast.stmt] = list(imports.import_statements(tree, drop))
            rewritten, _ = _rewrite_statements(rewritten, tree, targets, _drop_transform(drop))
        except (SyntaxError, _Overlap):
            rewritten = slices.parse_cst(rewritten, filename).visit(DropImports(drop)).code
        changed += [f"import {name}: no longer used, removed" for name in sorted(drop)]
    return FileFix(rewritten, changed, refused)


def _fix_whole_module(source: str, chosen: Sequence[Judgement], refused: list[str], module: str | None,
                      index: imports.TreeIndex | None, filename: str) -> FileFix:
    """The slow path: the whole module through libcst (slices overlap, or syntax newer than this Python)."""
    notes: list[str] = []
    try:
        rewritten = _gate_transform(chosen, _lines_of(source), notes)(slices.parse_cst(source, filename), 0, 0)
    except (_Unchanged, slices.TooDeep) as why:
        return FileFix(source, [], refused + [str(why)])
    try:
        ast.parse(source)
        ast.parse(rewritten.code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # newer syntax: imports stay as they are
        return FileFix(rewritten.code, notes + ["imports not checked (syntax newer than this Python)"], refused)
    return _drop_imports(source, rewritten.code, source, notes, refused, module, index, filename)


@dataclass
class TreeFix:
    """Every file of a tree with decided gates: its source as read and its :class:`FileFix`.

    ``failed`` lists the files whose rewrite did not pass verification (file → why); they are
    left as they were.
    """

    root: Path
    files: dict[str, tuple[str, FileFix]]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> dict[str, str]:
        """Relative path → new source, for the files the fix rewrites."""
        return {file: fix.source for file, (original, fix) in self.files.items()
                if fix.source != original and file not in self.failed}

    @property
    def refused(self) -> int:
        return sum(len(fix.refused) for _, fix in self.files.values())

    def diff(self) -> str:
        """A unified diff of every rewrite (``a/FILE`` → ``b/FILE``)."""
        changed = self.changed
        return "".join(line for file, (original, _) in self.files.items() if file in changed
                       for line in difflib.unified_diff(original.splitlines(keepends=True),
                                                        changed[file].splitlines(keepends=True),
                                                        f"a/{file}", f"b/{file}"))

    def write(self) -> None:
        """Write every rewritten file, all or none.

        Raises :class:`~jaxrel.errors.EnvironmentFailure` (exit 3), with nothing changed, when a
        file cannot be written (read-only file system, an immutable file) or the write fails; an
        interruption (Ctrl-C) puts every file back before it propagates.
        """
        targets = {self.root / file: source for file, source in self.changed.items()}
        blocked = unwritable(targets)
        if blocked:
            listed = "; ".join(f"{path.relative_to(self.root)}: {why}" for path, why in sorted(blocked.items()))
            raise EnvironmentFailure(f"cannot write {len(blocked)} of {len(targets)} files ({listed}); "
                                     "nothing was changed")
        try:
            write_all_atomically(targets)
        except OSError as error:
            raise EnvironmentFailure(f"writing the fixed files failed ({error}); nothing was changed") from None


def fix_tree(root: Path, judgements: Sequence[Judgement], *, texts: dict[str, str] | None = None,
             progress: Progress | None = None) -> TreeFix:
    """Rewrite every decided gate of ``judgements`` (gates of the tree at ``root``), file by file, then
    verify the result (files failing verification are left as they were, in ``failed``).

    ``texts``: the tree's files as already read (relative path → text), for the import index.
    """
    by_file: dict[str, list[Judgement]] = {}
    for judgement in judgements:
        by_file.setdefault(judgement.gate.file, []).append(judgement)
    index = imports.TreeIndex(root, texts)
    todo = sorted(by_file.items())

    def one(item: tuple[str, list[Judgement]]) -> tuple[str, FileFix, list[str]]:
        file, group = item
        original = read_exactly(root / file)  # CRLF line ends kept as they are
        module = index.module_of.get(file)
        try:
            done = fix_source(original, group, module=module, index=index, filename=file)
            lost = verify.lost_imports(original, done.source, module, index, file) \
                if module is not None and done.source != original else []
        except qualnames.TooComplex as error:  # the gates parse alone, the whole module does not
            return original, FileFix(original, [], [f"{error}; the file was left unchanged"]), []
        return original, done, lost

    files = {}
    failed = {}
    compiler = verify.Compiler() if todo else None  # its start-up overlaps the rewrite
    try:
        for number, ((file, _), (original, done, lost)) in enumerate(zip(todo, parallel.map_forked(one, todo),
                                                                          strict=True), 1):
            if progress:
                progress(number, len(todo), file)
            files[file] = (original, done)
            if lost:
                failed[file] = f"the rewrite no longer binds {'; '.join(lost)}"
        fixed = TreeFix(root, files)
        to_compile = {file: source for file, source in fixed.changed.items() if file not in failed}
        compiled = compiler.errors(to_compile) if compiler and to_compile else {}
    finally:
        if compiler:
            compiler.close()
    fixed.failed = {**failed, **{file: f"does not compile after the rewrite: {why}" for file, why in compiled.items()}}
    return fixed
