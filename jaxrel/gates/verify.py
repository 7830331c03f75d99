"""Check a rewritten tree before it is written: every rewritten file compiles under the newest
Python here, and no name another module imports (``from M import N``, ``M.N``) stopped being bound
at the top level of its module."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Mapping

from jaxrel._util import localfiles, procs
from jaxrel.distributions.pythons import newest_python
from jaxrel.errors import BadInput
from jaxrel.gates import names as qualnames
from jaxrel.gates.imports import TreeIndex, bound_by_import

__all__ = ["Compiler", "lost_imports", "top_level_names"]

_DEFINITION = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)

_TARGETS = (ast.Tuple, ast.List, ast.Starred, ast.NamedExpr)  # expressions that may bind names
_COMPILE = """
import json, sys
sources = json.load(sys.stdin)
failed = {}
for name, source in sources.items():
    try:
        compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        failed[name] = f"line {getattr(error, 'lineno', '?')}: {getattr(error, 'msg', error)}"
json.dump(failed, sys.stdout)
"""


class Compiler:
    """Compiles sources under the newest Python here, in one subprocess started ahead of time (its
    start-up overlaps the rewrite)."""

    def __init__(self) -> None:
        newest = newest_python()
        self.version = newest.version
        self.process = procs.popen([newest.executable, "-I", "-c", _COMPILE], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def errors(self, sources: Mapping[str, str]) -> dict[str, str]:
        """File → why it does not compile."""
        try:
            out, err = self.process.communicate(json.dumps(dict(sources)), timeout=600)
        except BaseException:  # a deadline or Ctrl-C: the compiler goes, whole
            procs.stop(self.process)
            raise
        if self.process.returncode != 0:
            return {name: f"cannot run Python {self.version} to compile it: {err.strip()[-200:]}" for name in sources}
        try:
            answer = localfiles.loads_json(out, f"the compiler under Python {self.version}")
        except BadInput:
            answer = None
        if not isinstance(answer, dict) or not all(isinstance(why, str) for why in answer.values()):
            return {name: f"Python {self.version} gave no readable answer about it" for name in sources}
        return {name: f"{reason} (Python {self.version})" for name, reason in answer.items()}

    def close(self) -> None:
        procs.stop(self.process, grace=0)


def top_level_names(source: str, filename: str = "<unknown>") -> set[str]:
    """Names bound at the top level of a module: definitions, assignments, imports, loop and
    ``with`` targets, in any ``if``/``try``/``with``/``for`` block (not inside functions or classes)."""
    tree = qualnames.parse_around(source, re.split(r"\r\n|\r|\n", source), lambda line: False, filename)
    found = set(_DEFINITION.findall(source))
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(bound_by_import(node))
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                found.add(child.id)
            elif not isinstance(child, ast.expr) or isinstance(child, _TARGETS):
                pending.append(child)
    return found


def _top_level_code(source: str) -> list[str]:
    """The module's top-level statements other than definitions, as text."""
    lines = re.split(r"\r\n|\r|\n", source)
    return ["\n".join(lines[first - 1:last]) for first, last in qualnames.top_level_chunks(lines)
            if not _DEFINITION.match(lines[first - 1]) and not lines[first - 1].startswith("@")]


def lost_imports(before: str, after: str, module: str, index: TreeIndex, filename: str = "<unknown>") -> list[str]:
    """``"N (imported by F)"`` for every top-level name of ``module`` that ``after`` no longer binds and
    another module of the tree imports."""
    if re.search(r"^def __getattr__\b", after, re.MULTILINE):
        return []  # a module __getattr__ answers any name
    if _top_level_code(before) == _top_level_code(after):
        return []  # every change is inside a definition: the module binds the same names
    lost = top_level_names(before, filename) - top_level_names(after, filename)
    return [f"{name} (imported by {', '.join(users[:3])})" for name in sorted(lost)
            if (users := index.users(module, name))]
