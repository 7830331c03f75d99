"""Which imports a fix may remove: a tree-wide index of cross-module imports, and the local rules.

A name bound by an import is removed only when every *load* of it was in code the fix removed
(it was read before, is read nowhere after; a store such as ``hlo = _jax`` is no read), it is not
listed in ``__all__``, its import carries no ``noqa: F401``, and no other module of the tree
imports it: ``from M import name``, ``import M`` then ``M.name``, ``from P import M`` then
``M.name``, or ``from M import *`` for a public name. The index parses, per question, only the
files that mention the name, and only their statements that do.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel.errors import JaxrelError
from jaxrel.gates import find as gatefind
from jaxrel.gates import names as qualnames

__all__ = ["TreeIndex", "bound_by_import", "exported", "import_statements", "removable"]

_NOQA_F401 = re.compile(r"#\s*noqa(?!\s*:)|#\s*noqa\s*:[^#\n]*\bF401\b", re.IGNORECASE)


def _lines(source: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", source)


def _parse_mentioning_any(source: str, words: set[str], filename: str) -> ast.Module:
    """The top-level statements of ``source`` whose lines hold any of ``words`` (every read of a
    word, every import binding it, every ``__all__`` listing it lies on such a line)."""
    return qualnames.parse_around(source, _lines(source), lambda line: any(w in line for w in words), filename,
                                  top_level=False)


class TreeIndex:
    """The modules of one source tree and who imports what from them."""

    def __init__(self, root: Path, texts: Mapping[str, str] | None = None,
                 files: Sequence[str] | None = None) -> None:
        self.root = root
        self.prefix = qualnames.package_prefix(str(root))
        self.files = list(files) if files is not None else list(gatefind.python_files(str(root)))
        self.texts: dict[str, str] = dict(texts or {})
        self.module_of = {f: qualnames.module_name(f, self.prefix) for f in self.files}
        self.file_of = {module: f for f, module in self.module_of.items()}
        self._users: dict[tuple[str, str], list[str]] = {}
        self._statements: dict[str, list[ast.Import | ast.ImportFrom] | None] = {}
        self._stars: dict[str, bool] = {}

    def text(self, relative: str) -> str:
        if relative not in self.texts:
            try:
                text = localfiles.read_text(self.root / relative)
                self.texts[relative] = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads
            except JaxrelError:  # missing, not a regular file (never waited on), not UTF-8
                self.texts[relative] = ""
        return self.texts[relative]

    def users(self, module: str, name: str) -> list[str]:
        """Files of the tree (other than ``module``'s own) that import ``name`` from ``module``."""
        key = (module, name)
        if key not in self._users:
            own = self.file_of.get(module)
            word = re.compile(rf"\b{re.escape(name)}\b")
            self._users[key] = [relative for relative in self.files if relative != own
                                and ((name in (text := self.text(relative)) and word.search(text))
                                     or (not name.startswith("_") and self._star(relative, text)))
                                and self._imports(relative, text, module, name)]
        return self._users[key]

    def _star(self, relative: str, text: str) -> bool:
        if relative not in self._stars:
            self._stars[relative] = "*" in text and _STAR.search(text) is not None
        return self._stars[relative]

    def _imports(self, relative: str, text: str, module: str, name: str) -> bool:
        """``relative`` imports ``name`` from ``module``, judged from its import statements alone (an
        import that does not parse on its own counts as one that does)."""
        if relative not in self._statements:
            try:
                self._statements[relative] = qualnames.import_statements(text)
            except SyntaxError:
                self._statements[relative] = None
        statements = self._statements[relative]
        if statements is None:
            return True
        resolver = qualnames.Imports(ast.Module(body=[], type_ignores=[]), self.module_of[relative],
                                     qualnames.is_package(relative), statements)
        if module in resolver.stars and not name.startswith("_"):
            return True
        wanted = f"{module}.{name}"
        if wanted in resolver.bound.values():
            return True
        for attribute in re.finditer(rf"\.{re.escape(name)}\b", text):  # M.name, with M imported
            chain = _CHAIN_END.search(text, max(0, attribute.start() - 300), attribute.start())
            if chain and resolver.qualname(ast.parse(chain.group(0), mode="eval").body) == module:
                return True
        return False


_STAR = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\*", re.MULTILINE)
_CHAIN_END = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


def bound_by_import(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The local names an import statement binds (``import a.b`` binds ``a``)."""
    return [alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*"]


def exported(tree: ast.Module) -> set[str]:
    """Names listed in ``__all__`` (assigned, annotated or extended at the top level)."""
    found: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], node.value
        if value is not None and any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            found |= {c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return found


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)


def _imported_words(source: str) -> set[str]:
    """Every word of every import statement (a superset of the names imports bind)."""
    return {word for found in _IMPORT.findall(source) for word in re.findall(r"[A-Za-z_]\w*", found)}


def _loads(tree: ast.AST, names: set[str]) -> dict[str, int]:
    """Reads (and ``del``) of each of ``names``; stores do not count."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names and not isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def removable(before: str, after: str, removed_text: str, module: str | None, index: TreeIndex | None,
              filename: str = "<unknown>") -> tuple[set[str], list[str]]:
    """Names whose imports the rewrite of ``before`` into ``after`` left unread and no one else needs,
    and why other unread ones stay (``"name: kept, why"``)."""
    code_after = _IMPORT.sub("", after)  # a name still written anywhere (not in imports, quotes, after a dot) stays
    words = {w for w in set(re.findall(r"[A-Za-z_]\w*", removed_text)) & _imported_words(after)
             if w in after and not re.search(rf"(?<![.'\"])\b{re.escape(w)}\b(?!['\"])", code_after)}
    drop: set[str] = set()
    kept: list[str] = []
    if not words:
        return drop, kept
    after_tree, before_tree = (_parse_mentioning_any(text, words, filename) for text in (after, before))
    loads_after, loads_before = _loads(after_tree, words), _loads(before_tree, words)
    statements = [n for n in ast.walk(after_tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    for name in sorted(words):
        imports = [n for n in statements if name in bound_by_import(n)]
        if not imports or loads_after.get(name):
            continue
        if not loads_before.get(name):
            continue  # never read here: a re-export, or imported for its side effects
        lines = _lines(after)
        why = None
        if any(_NOQA_F401.search(line) for n in imports for line in lines[n.lineno - 1:n.end_lineno]):
            why = "its import says noqa: F401"
        elif name in exported(after_tree):
            why = "listed in __all__"
        elif module is not None and index is not None and (users := index.users(module, name)):
            why = f"imported from here by {_few(users)}"
        if why:
            kept.append(f"{name}: import kept ({why}), though no longer used here")
        else:
            drop.add(name)
    return drop, kept


def _few(files: Iterable[str]) -> str:
    listed = list(files)
    return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")


def import_statements(tree: ast.Module, names: set[str]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements binding any of ``names``."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
            and names & set(bound_by_import(n))]
