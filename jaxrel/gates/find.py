"""Find api-version gates in Python source (standard library only, so any interpreter can run it).

A frontend may use syntax newer than the interpreter running jaxrel (jax 0.12 needs Python
3.12), so :mod:`jaxrel.gates.judge` runs this module in a newer interpreter for files the current
one cannot parse::

    python3.12 -m jaxrel.gates.find '{"root": ..., "files": [...], "names": {...}, "raw": [...],
                                      "release": ["jaxlib", ["jax._src.lib.version", ...]]}'

Each gate is a JSON-ready dict: where it is (``file``, ``line``, ``col``, ``end_line``,
``end_col``), how it is used (``kind``: if, elif, while, ternary, assert, skip-decorator,
expression; ``skips_when_true`` for skip decorators), its ``source``, its ``comparisons``
(``number OP threshold``, the API number or the release on the left; a release's threshold is a
list of integers, ``jaxlib_version < (0, 10)`` giving ``jaxlib < [0, 10]``) and its ``condition`` as a tree of
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

from jaxrel._util import parallel
from jaxrel.gates import names as qualnames

__all__ = ["Names", "Prefilter", "Release", "SKIPPED_DIRECTORIES", "Segments", "comparisons_in", "find_in_source",
    "main", "python_files", "scan"]

_OPS: dict[type, str] = {ast.GtE: ">=", ast.LtE: "<=", ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.NotEq: "!="}
_FLIP = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "==": "==", "!=": "!="}
_SKIP_DECORATORS = {"skipIf": True, "skipif": True, "skipUnless": False}  # name -> skips when the condition holds
SKIPPED_DIRECTORIES = frozenset({"build", "dist", "__pycache__", "node_modules"})


class Names:
    """Which names and attributes of one module denote which API number, or the backend's release.

    ``names`` maps every spelling of a number (``xla_extension_version``) to its canonical name;
    ``raw`` maps ``(module stem, variable)`` (``("xla_client", "_version")``) to it. ``release``
    (optional) names the backend's release tuple and how code spells it: dotted paths holding it
    (``jax._src.lib.version``), functions returning it (``jax._src.test_util.jaxlib_version()``) and
    parsers of its version string (``jax._src.test_util.parse_version(jax.lib.__version__)``); a
    name assigned one of these (``jaxlib_version = jtu.jaxlib_version()``) spells it too.
    """

    def __init__(self, names: Mapping[str, str], raw: Mapping[tuple[str, str], str], tree: ast.AST,
                 release: Release | None = None, module: str = "", package: bool = False,
                 nodes: Sequence[ast.AST] | None = None) -> None:
        self.canonical = dict(names)
        self.raw = dict(raw)
        self.aliases = dict(names)
        self.release = release
        everything = list(ast.walk(tree)) if nodes is None else nodes
        stems = {stem for stem, _ in self.raw}
        self.modules: dict[str, str] = {}  # a local name bound to a module holding a raw variable -> its stem
        imports = [n for n in everything if isinstance(n, ast.ImportFrom | ast.Import)]
        for statement in imports:
            for alias in statement.names:
                if alias.name in self.canonical:
                    self.aliases[alias.asname or alias.name] = self.canonical[alias.name]
                last = alias.name.rsplit(".", 1)[-1]
                if last in stems and alias.asname:  # import xla_client as xc / import a.xla_client as xc
                    self.modules[alias.asname] = last
        self.imports = qualnames.Imports(tree, module, package, imports)
        self.release_names: set[str] = set()  # local names assigned the release
        if release is not None:
            for node in everything:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                        and self._spells_release(node.value):
                    self.release_names.add(node.targets[0].id)

    def _spells_release(self, node: ast.expr) -> bool:
        release = self.release
        assert release is not None
        if isinstance(node, ast.Call) and not node.keywords:
            function = self.imports.qualname(node.func)
            if not node.args:
                return function in release.functions
            if len(node.args) == 1:
                return (function, self.imports.qualname(node.args[0])) in release.parsers
            return False
        return self.imports.qualname(node) in release.paths

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

    def release_of(self, node: ast.expr) -> str | None:
        """The release's name if ``node`` spells the backend's release tuple."""
        if self.release is None:
            return None
        if isinstance(node, ast.Name) and node.id in self.release_names:
            return self.release.name
        return self.release.name if self._spells_release(node) else None


class Release:
    """How a frontend's code spells its backend's release tuple (see :class:`Names`)."""

    def __init__(self, name: str, spellings: Sequence[str]) -> None:
        self.name = name
        self.paths: set[str] = set()
        self.functions: set[str] = set()
        self.parsers: set[tuple[str, str]] = set()
        for spelling in spellings:
            if "(" not in spelling:
                self.paths.add(spelling)
                continue
            function, argument = spelling.rstrip(")").split("(", 1)
            if argument:
                self.parsers.add((function, argument))
            else:
                self.functions.add(function)

    @property
    def words(self) -> set[str]:
        """The last name of every spelling: a file mentioning none of them cannot spell the release."""
        dotted = [*self.paths, *self.functions, *(f for f, _ in self.parsers)]
        return {d.rsplit(".", 1)[-1] for d in dotted}


def _int(node: ast.expr) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _release_tuple(node: ast.expr) -> list[int] | None:
    """``(0, 10, 2)`` as ``[0, 10, 2]`` (JSON has no tuples); ``None`` for anything else."""
    if not isinstance(node, ast.Tuple) or not node.elts:
        return None
    parts = [_int(element) for element in node.elts]
    return None if None in parts else parts  # type: ignore[return-value]


def _operand(left: ast.expr, right: ast.expr, names: Names) -> tuple[str, int | list[int]] | None:
    """``(number, threshold)`` when ``left`` spells a number and ``right`` is a literal threshold for it."""
    number = names.number_of(left)
    if number is not None:
        threshold = _int(right)
        return None if threshold is None else (number, threshold)
    release = names.release_of(left)
    if release is not None:
        parts = _release_tuple(right)
        return None if parts is None else (release, parts)
    return None


def comparisons_in(node: ast.Compare, names: Names) -> list[dict[str, Any]] | None:
    """The API-number and release comparisons of a (possibly chained) ``Compare``; ``None`` if any part
    is something else."""
    found = []
    operands = [node.left, *node.comparators]
    for (left, right), op in zip(itertools.pairwise(operands), node.ops, strict=True):
        symbol = _OPS.get(type(op))
        if symbol is None:
            return None
        pair = _operand(left, right, names)
        if pair is None:
            pair, symbol = _operand(right, left, names), _FLIP[symbol]
        if pair is None:
            return None
        found.append({"number": pair[0], "op": symbol, "threshold": pair[1], "line": node.lineno,
                      "col": node.col_offset})
    return found


def _mentions_number(node: ast.Compare, names: Names) -> bool:
    return any(names.number_of(operand) or names.release_of(operand) for operand in (node.left, *node.comparators))


class Segments:
    """``ast.get_source_segment`` for many nodes of one source, with its lines split and encoded once.

    The standard function splits the whole source on every call: a condition of thousands of terms
    on one line took minutes.
    """

    def __init__(self, source: str) -> None:
        self.lines = [line.encode() for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", source)]

    def __call__(self, node: ast.expr) -> str:
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None:
            return ""
        first, last, start = node.lineno - 1, end_line - 1, node.col_offset
        if first == last:
            return self.lines[first][start:end_col].decode()
        middle = b"".join(self.lines[first + 1:last])
        return (self.lines[first][start:] + middle + self.lines[last][:end_col]).decode()


def _condition(node: ast.expr, names: Names, comparisons: list[dict[str, Any]], source: Segments) -> dict[str, Any]:
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
    return {"other": source(node)}


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


def _words(source: str, names: Mapping[str, str], raw: Mapping[tuple[str, str], str],
           release: Release | None) -> list[str]:
    """Words on every line that may hold a gate: the spellings, and names assigned the release."""
    words = [*names, *(variable for _, variable in raw)]
    if names:  # from jax._src.lib import jaxlib_extension_version as v
        words += re.findall(rf"\b(?:{'|'.join(map(re.escape, names))})\s+as\s+(\w+)", source)
    if release is not None:
        words += release.words
        words += re.findall(rf"\b(?:{'|'.join(map(re.escape, release.words))})\s+as\s+(\w+)", source) \
            if release.words else []
        words += re.findall(rf"(?m)^[ \t]*(\w+)[ \t]*=[^=\n]*\b(?:{'|'.join(map(re.escape, release.words))})\b",
                            source) if release.words else []
    return words


def find_in_source(source: str, relative: str, names: Mapping[str, str],
                   raw: Mapping[tuple[str, str], str], release: Release | None = None,
                   prefix: str = "") -> list[dict[str, Any]]:
    """The gates of one module (raises ``SyntaxError`` when this interpreter cannot parse it).

    Only the top-level statements that may hold a gate are parsed, with the module's imports and
    other top-level code (:func:`jaxrel.gates.names.parse_around`): a large test file is mostly
    test methods without one.
    """
    lines = re.split(r"\r\n|\r|\n", source)  # ast's line numbers: not str.splitlines (\f, \u2028)
    words = _words(source, names, raw, release)
    wanted = [number for number, line in enumerate(lines, 1) if any(word in line for word in words)]
    try:  # the imports by pattern; only the statements holding a spelling are parsed
        imported: list[ast.AST] = list(qualnames.import_statements(source))
        tree = qualnames.parse_lines(source, lines, set(wanted), relative, top_level=False)
    except SyntaxError:
        imported = []
        tree = qualnames.parse_lines(source, lines, set(wanted), relative)
    nodes, parents = qualnames.walk_around(tree, wanted)
    resolver = Names(names, raw, tree, release, qualnames.module_name(relative, prefix),
                     qualnames.is_package(relative), nodes + imported)
    roots: dict[int, ast.expr] = {}
    for node in nodes:
        if isinstance(node, ast.Compare) and _mentions_number(node, resolver):
            root = _root(node, parents)
            roots[id(root)] = root
    gates = []
    segment = Segments(source)
    for root in roots.values():
        comparisons: list[dict[str, Any]] = []
        condition = _condition(root, resolver, comparisons, segment)
        if not comparisons:
            continue  # e.g. `jaxlib_extension_version >= minimum`: no literal threshold
        kind, skips = _kind(root, parents, lines)
        gates.append({"file": relative, "line": root.lineno, "col": root.col_offset, "end_line": root.end_lineno,
                      "end_col": root.end_col_offset, "kind": kind, "skips_when_true": skips,
                      "source": segment(root), "comparisons": comparisons,
                      "condition": condition})
    return sorted(gates, key=lambda g: (g["line"], g["col"]))


def python_files(root: str) -> Iterator[str]:
    """Every ``.py`` regular file under ``root`` (relative, ``/``-separated), in a stable order.

    Anything else named ``.py`` (a FIFO, a socket, a device, a dangling link) is skipped: reading a
    FIFO would wait for a writer forever.
    """
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d not in SKIPPED_DIRECTORIES)
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".py") and os.path.isfile(path):
                yield os.path.relpath(path, root).replace(os.sep, "/")


_TUPLE_COMPARISON = re.compile(r"(?:<|>|==|!=)=?\s*\(\s*\d+\s*,|\(\s*\d+\s*,[\d\s,]*\)\s*(?:<|>|==|!=)")


class Prefilter:
    """Which files may hold a gate, by their text alone (most files: nothing to parse).

    Plain substring tests first (fast), then the exact patterns: a word spelling an API number,
    ``.<variable>`` of a module holding one, or a comparison with a tuple in a file naming the release.
    """

    def __init__(self, names: Mapping[str, str], raw: Mapping[tuple[str, str], str],
                 release: Release | None) -> None:
        self.words = tuple(names) + tuple(f".{variable}" for _, variable in raw)
        spelled = [rf"\b{re.escape(name)}\b" for name in names] + [rf"\.{re.escape(v)}\b" for _, v in raw]
        self.pattern = re.compile("|".join(spelled) or r"(?!)")
        self.release_words = tuple(sorted(release.words)) if release else ()
        self.release_pattern = re.compile("|".join(rf"\b{re.escape(w)}\b" for w in self.release_words) or r"(?!)")

    def __call__(self, source: str) -> bool:
        if any(word in source for word in self.words) and self.pattern.search(source):
            return True
        return (any(word in source for word in self.release_words) and _TUPLE_COMPARISON.search(source) is not None
                and self.release_pattern.search(source) is not None)


def scan(root: str, files: Sequence[str], names: Mapping[str, str],
         raw: Mapping[tuple[str, str], str], release: Release | None = None,
         texts: dict[str, str] | None = None, processes: int | None = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Gates of ``files`` under ``root``, and the files that could not be read or parsed (file -> reason).

    ``texts`` (optional) receives every file's text as read, for callers that need them again;
    ``processes`` parse the candidate files in parallel (``None``: one per CPU).
    """
    may_hold_gates = Prefilter(names, raw, release)
    prefix = qualnames.package_prefix(root)
    failed: dict[str, str] = {}
    candidates: list[tuple[str, str]] = []
    for relative in files:
        try:
            with open(os.path.join(root, relative), encoding="utf-8") as handle:
                source = handle.read()
        except (OSError, UnicodeDecodeError) as error:
            failed[relative] = str(error)
            continue
        if texts is not None:
            texts[relative] = source
        if may_hold_gates(source):  # most files: nothing to parse
            candidates.append((relative, source))
    candidates.sort(key=lambda c: -len(c[1]))  # the largest first: workers finish together

    def one(candidate: tuple[str, str]) -> tuple[list[dict[str, Any]], str | None]:
        relative, source = candidate
        try:
            return find_in_source(source, relative, names, raw, release, prefix), None
        except qualnames.TooComplex as error:
            return [], str(error)
        except SyntaxError as error:
            return [], f"line {error.lineno}: {error.msg} (Python {sys.version_info[0]}.{sys.version_info[1]})"
        except (RecursionError, MemoryError) as error:  # an expression nested deeper than the parser goes
            return [], f"too deeply nested for Python's parser ({type(error).__name__}: {error})"

    gates: list[dict[str, Any]] = []
    for (relative, _), (found, why) in zip(candidates, parallel.map_forked(one, candidates, processes), strict=True):
        gates.extend(found)
        if why:
            failed[relative] = why
    return gates, failed


def main(argv: Sequence[str] | None = None) -> int:
    """Subprocess entry: one JSON argument in, ``{"gates": [...], "failed": {...}}`` out."""
    request = json.loads((argv or sys.argv[1:])[0])
    raw = {(stem, variable): number for stem, variable, number in request["raw"]}
    release = Release(request["release"][0], request["release"][1]) if request.get("release") else None
    gates, failed = scan(request["root"], request["files"], request["names"], raw, release)
    print(json.dumps({"gates": gates, "failed": failed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
