"""What a name in a module denotes: its dotted import path (standard library only, like :mod:`find`).

``from jax._src import lib as jaxlib`` makes ``jaxlib.version`` mean ``jax._src.lib.version``;
``import jax._src.lib`` makes ``jax._src.lib.version`` mean itself; a module's own top-level
names mean ``<module>.<name>``. Relative imports resolve against the module's own dotted name,
which comes from its path in the tree (``jax/_src/lib/__init__.py`` → ``jax._src.lib``).
"""

from __future__ import annotations

import ast
import bisect
import os
import re
from collections.abc import Callable, Iterable, Sequence

__all__ = ["Imports", "TooComplex", "import_statements", "is_package", "module_name", "package_prefix", "parse",
    "parse_around", "parse_lines", "resolve_from", "top_level_chunks", "walk_around"]


def package_prefix(root: str) -> str:
    """The dotted package ``root`` itself is part of ('' for a checkout holding the packages).

    A tree passed as the package directory (``jax/``, holding ``__init__.py``) names its
    modules ``jax.…``, not ``…``.
    """
    parts: list[str] = []
    directory = os.path.abspath(root)
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        parts.append(os.path.basename(directory))
        directory = os.path.dirname(directory)
    return ".".join(reversed(parts))


def module_name(relative: str, prefix: str = "") -> str:
    """``jax/_src/lib/__init__.py`` → ``jax._src.lib`` (``prefix``: see :func:`package_prefix`)."""
    parts = relative.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in (prefix, *parts) if p)


def is_package(relative: str) -> bool:
    return relative.endswith("/__init__.py") or relative == "__init__.py"


def resolve_from(module: str, package: bool, level: int, target: str | None) -> str:
    """The absolute module of ``from <'.' * level><target> import …`` written in ``module``."""
    if not level:
        return target or ""
    parts = module.split(".") if module else []
    base = parts if package else parts[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([target] if target else [])])


class Imports:
    """Local names bound by the imports of one module, and the dotted path each stands for."""

    def __init__(self, tree: ast.AST, module: str = "", package: bool = False,
                 nodes: Iterable[ast.AST] | None = None) -> None:
        self.module = module
        self.bound: dict[str, str] = {}
        self.stars: list[str] = []  # modules imported with `from M import *`
        for node in nodes if nodes is not None else ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.bound[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.bound.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom):
                source = resolve_from(module, package, node.level, node.module)
                for alias in node.names:
                    if alias.name == "*":
                        self.stars.append(source)
                    else:
                        self.bound[alias.asname or alias.name] = f"{source}.{alias.name}" if source else alias.name

    def qualname(self, node: ast.expr) -> str | None:
        """``a.b.c`` for a name or attribute chain whose base is imported (or a top-level name here)."""
        attributes: list[str] = []
        while isinstance(node, ast.Attribute):
            attributes.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.bound.get(node.id)
        if base is None:
            if not self.module:
                return None
            base = f"{self.module}.{node.id}"
        return ".".join([base, *reversed(attributes)])


_TOP_LEVEL = re.compile(r"[A-Za-z_@]")
_CONTINUES = re.compile(r"(?:else|elif|except|finally)\b")
_TRIPLE = re.compile(r'"""|\'\'\'')
_DEFINITION = re.compile(r"(?:@|def\s|class\s|async\s+def\s)")


def top_level_chunks(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) 1-based line spans that look like top-level statements.

    A statement starts on a line beginning in column 0 with a letter, ``_`` or ``@``, outside a
    triple-quoted string; a definition stays with its decorators, ``else:``/``except …:`` with
    their statement. A guess: :func:`parse_around` checks each span by parsing it.
    """
    starts: list[int] = [1]
    quote: str | None = None  # the triple quote of the string a line starts in
    decorated = False  # the current span so far holds only decorators
    for number, line in enumerate(lines, 1):
        if quote is None and line[:1] and _TOP_LEVEL.match(line) and not _CONTINUES.match(line):
            if not decorated and number != 1:
                starts.append(number)
            decorated = line.startswith("@")
        for found in (_TRIPLE.findall(line) if ('"""' in line or "'''" in line) else ()):
            if quote is None:
                quote = found
            elif found == quote:
                quote = None
    return [(first, (starts[i + 1] - 1) if i + 1 < len(starts) else len(lines)) for i, first in enumerate(starts)]


def parse_lines(source: str, lines: Sequence[str], wanted: set[int], filename: str = "<unknown>",
                top_level: bool = True) -> ast.Module:
    """Like :func:`parse_around`, for the statements holding the line numbers ``wanted``."""
    return _parse_pieces(source, lines, lambda first, last: any(first <= n <= last for n in wanted), filename,
                         top_level)


def parse_around(source: str, lines: Sequence[str], wanted: Callable[[str], bool],
                 filename: str = "<unknown>", top_level: bool = True) -> ast.Module:
    """The module's top-level statements that hold a wanted line, or are not definitions (imports,
    assignments, ``if TYPE_CHECKING:`` blocks), parsed with their real line numbers; the whole
    module when a piece does not parse on its own (the split was wrong)."""
    return _parse_pieces(source, lines, lambda first, last: any(wanted(line) for line in lines[first - 1:last]),
                         filename, top_level)


class TooComplex(SyntaxError):
    """Source nested deeper than Python's parser goes (it raised ``RecursionError`` or ``MemoryError``)."""


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, with code too deeply nested for the parser raised as :class:`TooComplex` (a
    ``SyntaxError``: callers treat the module as one that does not parse)."""
    try:
        return ast.parse(source, filename=filename)
    except (RecursionError, MemoryError) as error:
        raise TooComplex(f"too deeply nested for Python's parser ({type(error).__name__}: {error})") from None
    except ValueError as error:  # Python 3.11.0-3.11.3: a NUL byte is a ValueError, not a SyntaxError
        raise SyntaxError(str(error), (filename, 1, 1, None)) from None


def _parse_pieces(source: str, lines: Sequence[str], keep: Callable[[int, int], bool], filename: str,
                  top_level: bool = True) -> ast.Module:
    """One parse of ``source`` with the statements not kept blanked out (line numbers stay real).

    ``top_level``: keep every top-level statement that is not a definition too (imports, ``if
    TYPE_CHECKING:`` blocks); without it, callers read imports with :func:`import_statements`.
    """
    masked = list(lines)
    for first, last in top_level_chunks(lines):
        if (not top_level or _DEFINITION.match(lines[first - 1])) and not keep(first, last):
            masked[first - 1:last] = [""] * (last - first + 1)
    try:
        return parse("\n".join(masked), filename)
    except TooComplex:
        raise
    except SyntaxError:  # the split was wrong (or the module does not parse): the whole module
        return parse(source, filename)


def walk_around(tree: ast.AST, wanted_lines: Sequence[int]) -> tuple[list[ast.AST], dict[ast.AST, ast.AST]]:
    """Every node of ``tree`` except inside definitions holding no wanted line; each child's parent.

    ``wanted_lines`` sorted. One walk instead of several: a large test class is mostly methods
    without a gate.
    """
    parents: dict[ast.AST, ast.AST] = {}
    nodes: list[ast.AST] = [tree]
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            at = bisect.bisect_left(wanted_lines, first)
            if at == len(wanted_lines) or wanted_lines[at] > (node.end_lineno or node.lineno):
                continue
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            nodes.append(child)
    return nodes, parents


_IMPORT_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n;#]*)"
                               r"|import[ \t]+[^\n;#]*)", re.MULTILINE)


def import_statements(text: str) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``text``, found by pattern and parsed together (a module's imports
    without parsing its code; one inside a string counts too). Raises ``SyntaxError`` for an import
    continued with a backslash or otherwise not parsed alone."""
    statements = [match.group(0).strip() for match in _IMPORT_STATEMENT.finditer(text)]
    if any(statement.endswith("\\") for statement in statements):
        raise SyntaxError("an import continued with a backslash")
    try:
        body = parse("\n".join(statements)).body
    except SyntaxError:
        body = [parse(statement).body[0] for statement in statements]
    return [node for node in body if isinstance(node, ast.Import | ast.ImportFrom)]
