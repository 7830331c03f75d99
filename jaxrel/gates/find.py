"""Find api-version gates in Python source (standard library only, so any interpreter can run it).

A frontend may use syntax newer than the interpreter running jaxrel (jax 0.12 needs Python
3.12), so :mod:`jaxrel.gates.judge` runs this module in a newer interpreter for files the current
one cannot parse::

    python3.12 -m jaxrel.gates.find '{"root": ..., "files": [...], "names": {...}, "raw": [...]}'

Each gate is a JSON-ready dict: where it is (``file``, ``line``, ``col``, ``end_line``,
``end_col``), how it is used (``kind``: if, elif, while, ternary, assert, skip-decorator,
expression; ``skips_when_true`` for skip decorators), its ``source``, its ``comparisons``
(``number OP threshold``, the API number on the left) and its ``condition`` as a tree of
``{"and": [...]}``, ``{"or": [...]}``, ``{"not": ...}``, ``{"cmp": [i, ...]}`` (a conjunction of
comparisons by index) and ``{"other": "source"}`` (anything else: unknown to the judge).
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

_OPS: dict[type, str] = {ast.GtE: ">=", ast.LtE: "<=", ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.NotEq: "!="}
_FLIP = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "==": "==", "!=": "!="}
_SKIP_DECORATORS = {"skipIf": True, "skipif": True, "skipUnless": False}  # name -> skips when the condition holds
SKIPPED_DIRECTORIES = frozenset({"build", "dist", "__pycache__", "node_modules"})


class Names:
    """Which names and attributes of one module denote which API number.

    ``names`` maps every spelling of a number (``xla_extension_version``) to its canonical name;
    ``raw`` maps ``(module stem, variable)`` (``("xla_client", "_version")``) to it.
    """

    def __init__(self, names: Mapping[str, str], raw: Mapping[tuple[str, str], str], tree: ast.AST) -> None:
        self.canonical = dict(names)
        self.raw = dict(raw)
        self.aliases = dict(names)
        stems = {stem for stem, _ in self.raw}
        self.modules: dict[str, str] = {}  # a local name bound to a module holding a raw variable -> its stem
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                for alias in node.names:
                    if alias.name in self.canonical:
                        self.aliases[alias.asname or alias.name] = self.canonical[alias.name]
                    last = alias.name.rsplit(".", 1)[-1]
                    if last in stems and alias.asname:  # import xla_client as xc / import a.xla_client as xc
                        self.modules[alias.asname] = last

    def number_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr in self.canonical:
                return self.canonical[node.attr]
            base = node.value
            if isinstance(base, ast.Name):
                return self.raw.get((self.modules.get(base.id, base.id), node.attr))
            if isinstance(base, ast.Attribute):
                return self.raw.get((base.attr, node.attr))
        return None


def _int(node: ast.expr) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def comparisons_in(node: ast.Compare, names: Names) -> list[dict[str, Any]] | None:
    """The API-number comparisons of a (possibly chained) ``Compare``; ``None`` if any part is something else."""
    found = []
    operands = [node.left, *node.comparators]
    for (left, right), op in zip(itertools.pairwise(operands), node.ops, strict=True):
        symbol = _OPS.get(type(op))
        number, threshold = names.number_of(left), _int(right)
        if symbol and (number is None or threshold is None):
            number, threshold, symbol = names.number_of(right), _int(left), _FLIP[symbol]
        if symbol is None or number is None or threshold is None:
            return None
        found.append({"number": number, "op": symbol, "threshold": threshold, "line": node.lineno,
                      "col": node.col_offset})
    return found


def _mentions_number(node: ast.Compare, names: Names) -> bool:
    return any(names.number_of(operand) for operand in (node.left, *node.comparators))


def _condition(node: ast.expr, names: Names, comparisons: list[dict[str, Any]], source: str) -> dict[str, Any]:
    if isinstance(node, ast.BoolOp):
        key = "and" if isinstance(node.op, ast.And) else "or"
        return {key: [_condition(value, names, comparisons, source) for value in node.values]}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return {"not": _condition(node.operand, names, comparisons, source)}
    if isinstance(node, ast.Compare):
        found = comparisons_in(node, names)
        if found:
            comparisons.extend(found)
            return {"cmp": list(range(len(comparisons) - len(found), len(comparisons)))}
    return {"other": ast.get_source_segment(source, node) or ""}


def _root(node: ast.expr, parents: Mapping[ast.AST, ast.AST]) -> ast.expr:
    """Climb through ``and``/``or``/``not`` to the whole condition ``node`` belongs to."""
    while True:
        parent = parents.get(node)
        if isinstance(parent, ast.BoolOp) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
            node = parent
        else:
            return node


def _kind(root: ast.expr, parents: Mapping[ast.AST, ast.AST], lines: Sequence[str]) -> tuple[str, bool | None]:
    parent = parents.get(root)
    if isinstance(parent, ast.If) and parent.test is root:
        return ("elif" if lines[parent.lineno - 1][parent.col_offset:].startswith("elif") else "if"), None
    if isinstance(parent, ast.While) and parent.test is root:
        return "while", None
    if isinstance(parent, ast.IfExp) and parent.test is root:
        return "ternary", None
    if isinstance(parent, ast.Assert) and parent.test is root:
        return "assert", None
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is root:
        function = parent.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        owner = parents.get(parent)
        if name in _SKIP_DECORATORS and isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and parent in owner.decorator_list:
            return "skip-decorator", _SKIP_DECORATORS[name]
    return "expression", None


def find_in_source(source: str, relative: str, names: Mapping[str, str],
                   raw: Mapping[tuple[str, str], str]) -> list[dict[str, Any]]:
    """The gates of one module (raises ``SyntaxError`` when this interpreter cannot parse it)."""
    tree = ast.parse(source, filename=relative)
    resolver = Names(names, raw, tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    roots: dict[int, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and _mentions_number(node, resolver):
            root = _root(node, parents)
            roots[id(root)] = root
    lines = re.split(r"\r\n|\r|\n", source)  # ast's line numbers: not str.splitlines (\f, \u2028)
    gates = []
    for root in roots.values():
        comparisons: list[dict[str, Any]] = []
        condition = _condition(root, resolver, comparisons, source)
        if not comparisons:
            continue  # e.g. `jaxlib_extension_version >= minimum`: no literal threshold
        kind, skips = _kind(root, parents, lines)
        gates.append({"file": relative, "line": root.lineno, "col": root.col_offset, "end_line": root.end_lineno,
                      "end_col": root.end_col_offset, "kind": kind, "skips_when_true": skips,
                      "source": ast.get_source_segment(source, root) or "", "comparisons": comparisons,
                      "condition": condition})
    return sorted(gates, key=lambda g: (g["line"], g["col"]))


def python_files(root: str) -> Iterator[str]:
    """Every ``.py`` file under ``root`` (relative, ``/``-separated), in a stable order."""
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d not in SKIPPED_DIRECTORIES)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")


def scan(root: str, files: Sequence[str], names: Mapping[str, str],
         raw: Mapping[tuple[str, str], str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Gates of ``files`` under ``root``, and the files that could not be read or parsed (file -> reason)."""
    spellings = tuple(names) + tuple(variable for _, variable in raw)
    gates: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    for relative in files:
        try:
            with open(os.path.join(root, relative), encoding="utf-8") as handle:
                source = handle.read()
        except (OSError, UnicodeDecodeError) as error:
            failed[relative] = str(error)
            continue
        if not any(spelling in source for spelling in spellings):
            continue  # most files: nothing to parse
        try:
            gates.extend(find_in_source(source, relative, names, raw))
        except SyntaxError as error:
            failed[relative] = f"line {error.lineno}: {error.msg} (Python {sys.version_info[0]}.{sys.version_info[1]})"
    return gates, failed


def main(argv: Sequence[str] | None = None) -> int:
    """Subprocess entry: one JSON argument in, ``{"gates": [...], "failed": {...}}`` out."""
    request = json.loads((argv or sys.argv[1:])[0])
    raw = {(stem, variable): number for stem, variable, number in request["raw"]}
    gates, failed = scan(request["root"], request["files"], request["names"], raw)
    print(json.dumps({"gates": gates, "failed": failed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
