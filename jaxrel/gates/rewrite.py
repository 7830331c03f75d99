"""The libcst transformer that rewrites decided gates, and which decided gates it refuses.

Inside an accepted gate every comparison judged always-true/always-false is replaced by its
value and the condition simplified (``X and True`` → ``X``; ``X or True`` → ``True`` only when
``X`` is a plain name or attribute, so no call is dropped). A condition that becomes constant
removes its branch: ``if``/``elif``/``else`` keep the branch that remains (an emptied block
gets ``pass``), a ternary becomes its chosen side, an ``assert`` that always holds is removed,
a skip decorator that never skips is removed, a ``while`` that never runs is removed (its
``else`` kept). A gate outside a branch (an assignment, a return, an argument, a comprehension)
keeps its value exactly: ``<always true> and rest`` → ``rest``, ``<always false> or rest`` →
``rest`` (and their negations); there ``rest and <always true>`` would change the value
(``rest`` is not always a bool) and is refused.

Refused, and listed instead: an ``assert`` that always fails, a skip decorator that always
skips, a ``while`` that would loop forever, a gate outside a branch that is wholly decided
(``x = v >= 3``) and any simplification that would drop code with side effects.

The transformer may run on a slice of a module (:mod:`jaxrel.gates.slices`): ``offset`` is added
to every line number it sees, so positions and messages stay those of the whole file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from jaxrel.gates.judge import Condition, GateVerdict, Judgement

__all__ = ["DECIDED", "DropImports", "Rewriter", "char_col", "refusal"]

DECIDED: dict[str, bool] = {GateVerdict.ALWAYS_TRUE: True, GateVerdict.ALWAYS_FALSE: False}


def char_col(lines: Sequence[str], line: int, byte_col: int) -> int:
    """ast's UTF-8 byte offset as libcst's character column."""
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _constant(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


_PREDICATES = frozenset({"hasattr", "isinstance", "issubclass", "callable"})  # builtins that only look


def _pure(node: cst.BaseExpression) -> bool:
    """Evaluating ``node`` has no side effects we could drop: names, attributes, constants, and
    ``hasattr``/``isinstance``/``issubclass``/``callable`` of such (``hasattr(x, "serialize") or True``)."""
    if isinstance(node, cst.Name | cst.Integer | cst.SimpleString):
        return True
    if isinstance(node, cst.Attribute):
        return _pure(node.value)
    if isinstance(node, cst.UnaryOperation):
        return _pure(node.expression)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _PREDICATES:
        return all(_pure(argument.value) and not argument.star for argument in node.args)
    return False


class Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(self, judgements: Sequence[Judgement], lines: Sequence[str], offset: int = 0,
                 shift: int = 0) -> None:
        super().__init__()
        self.offset = offset
        self.shift = shift  # columns to add on the slice's first line (an expression cut out of its line)
        self.compares: dict[tuple[int, int], bool] = {}  # Compare position -> value, all its parts decided
        self.gates: dict[tuple[int, int], Judgement] = {}  # condition position -> judgement
        self.spans: list[tuple[tuple[int, int], tuple[int, int]]] = []  # (start, end) of each gate's condition
        for judgement in judgements:
            gate = judgement.gate
            start = (gate.line, char_col(lines, gate.line, gate.col))
            self.gates[start] = judgement
            self.spans.append((start, (gate.end_line, char_col(lines, gate.end_line, gate.end_col))))
            by_position: dict[tuple[int, int], list[bool | None]] = {}
            for comparison in gate.comparisons:
                position = (comparison.line, char_col(lines, comparison.line, comparison.col))
                by_position.setdefault(position, []).append(DECIDED.get(judgement.comparisons[str(comparison)]))
            for position, values in by_position.items():
                if None not in values:
                    self.compares[position] = all(values)
        self.changed: list[str] = []
        self.expressions: dict[tuple[int, int], str] = {}
        self.unsafe = False
        self.gate_elifs: dict[int, tuple[cst.If, int]] = {}  # id(rewritten elif with a gate test) -> (it, line)
        self.footers: dict[int, tuple[cst.CSTNode, Sequence[cst.EmptyLine]]] = {}  # lifted last statement -> footer

    def _at(self, line: int, column: int) -> tuple[int, int]:
        """A slice's position as the whole file's."""
        return line + self.offset, column + (self.shift if line == 1 else 0)

    def _position(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.get_metadata(PositionProvider, node).start
        return self._at(start.line, start.column)

    def _gate_of(self, condition: cst.BaseExpression) -> Judgement | None:
        return self.gates.get(self._position(condition))

    def _simplified(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> None:
        """Report a gate whose condition was rewritten but did not become constant."""
        if _constant(updated) is None and self._gate_of(original) is not None and not updated.deep_equals(original):
            code = " ".join(cst.Module([]).code_for_node(updated).split())
            self.changed.append(f"{self._position(original)[0]}: condition simplified to {code}")

    def _in_gate(self, node: cst.CSTNode) -> bool:
        """``node`` lies inside the condition of a gate being rewritten (other code is never simplified)."""
        where = self.get_metadata(PositionProvider, node)
        start, end = self._at(where.start.line, where.start.column), self._at(where.end.line, where.end.column)
        return any(first <= start and end <= last for first, last in self.spans)

    def _note_expression(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> None:
        """Remember how a gate outside a branch reads now (the outermost node at its start wins)."""
        judgement = self._gate_of(original)
        if judgement is not None and judgement.gate.kind == "expression" and not updated.deep_equals(original):
            self.expressions[self._position(original)] = " ".join(cst.Module([]).code_for_node(updated).split())

    @property
    def notes(self) -> list[str]:
        """What was done, in source order: branches, then gates outside a branch."""
        return self.changed + [f"{line}: expression simplified to {code}"
                               for (line, _), code in sorted(self.expressions.items())]

    # -- conditions -------------------------------------------------------------------------------

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        value = self.compares.get(self._position(original))
        return updated if value is None else cst.Name("True" if value else "False", lpar=updated.lpar,
                                                      rpar=updated.rpar)

    def leave_BooleanOperation(self, original: cst.BooleanOperation,
                               updated: cst.BooleanOperation) -> cst.BaseExpression:
        if not self._in_gate(original):
            return updated
        left, right = updated.left, updated.right
        is_and = isinstance(updated.operator, cst.And)
        neutral, absorbing = (True, False) if is_and else (False, True)
        for this, other in ((left, right), (right, left)):
            value = _constant(this)
            if value is neutral:
                kept = other.with_changes(lpar=[], rpar=[]) if isinstance(other, cst.Name) else other
                result = kept.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else kept
                self._note_expression(original, result)
                return result
            if value is absorbing:
                if _pure(other):
                    return cst.Name("True" if absorbing else "False", lpar=updated.lpar, rpar=updated.rpar)
                self.unsafe = True
        self._note_expression(original, updated)
        return updated

    def leave_UnaryOperation(self, original: cst.UnaryOperation, updated: cst.UnaryOperation) -> cst.BaseExpression:
        value = _constant(updated.expression)
        if isinstance(updated.operator, cst.Not) and value is not None and self._in_gate(original):
            return cst.Name("False" if value else "True", lpar=updated.lpar, rpar=updated.rpar)
        self._note_expression(original, updated)
        return updated

    # -- statements -------------------------------------------------------------------------------

    def _is_elif(self, node: cst.If) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        return isinstance(parent, cst.If) and parent.orelse is node

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.FlattenSentinel[
            cst.BaseStatement] | cst.RemovalSentinel:
        updated = updated.with_changes(orelse=self._resolve_elifs(updated.orelse))
        value = _constant(updated.test)
        self._simplified(original.test, updated.test)
        if value is None or self._gate_of(original.test) is None:
            return updated
        line = self._position(original)[0]
        if self._is_elif(original):  # resolved by the if it belongs to
            self.gate_elifs[id(updated)] = (updated, line)
            return updated
        if value:
            self.changed.append(f"{line}: if always true: kept its body")
            return self._lift(updated.body, updated.leading_lines)
        self.changed.append(f"{line}: if always false: kept {'its else' if updated.orelse else 'nothing'}")
        if isinstance(updated.orelse, cst.Else):
            return self._lift(updated.orelse.body, updated.leading_lines)
        if isinstance(updated.orelse, cst.If):
            return updated.orelse.with_changes(leading_lines=updated.leading_lines)
        return cst.RemovalSentinel.REMOVE

    def _resolve_elifs(self, orelse: cst.If | cst.Else | None) -> cst.If | cst.Else | None:
        while isinstance(orelse, cst.If) and self.gate_elifs.get(id(orelse), (None,))[0] is orelse:
            line = self.gate_elifs[id(orelse)][1]
            if _constant(orelse.test):
                self.changed.append(f"{line}: elif always true: became else")
                return cst.Else(body=orelse.body, leading_lines=orelse.leading_lines)
            self.changed.append(f"{line}: elif always false: removed")
            orelse = orelse.orelse
        return orelse

    def _lift(self, suite: cst.BaseSuite,
              leading: Sequence[cst.EmptyLine]) -> cst.FlattenSentinel[cst.BaseStatement]:
        """The statements of ``suite`` for the enclosing block, the dropped line's comments on the first
        and its closing comments after the last (placed by :meth:`_place_footers`)."""
        if isinstance(suite, cst.IndentedBlock):
            statements: list[cst.BaseStatement] = list(suite.body)
        else:
            assert isinstance(suite, cst.SimpleStatementSuite)
            statements = [cst.SimpleStatementLine(body=list(suite.body))]
        first = statements[0]
        if leading and isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            statements[0] = first.with_changes(leading_lines=[*leading, *first.leading_lines])
        if isinstance(suite, cst.IndentedBlock) and suite.footer:
            self.footers[id(statements[-1])] = (statements[-1], suite.footer)
        return cst.FlattenSentinel(statements)

    def _place_footers(self, body: Sequence[cst.BaseStatement]) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
        """``body`` with the closing comments of lifted blocks on the statement after them; those left over."""
        placed: list[cst.BaseStatement] = []
        pending: list[cst.EmptyLine] = []
        for statement in body:
            if pending and isinstance(statement, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                statement = statement.with_changes(leading_lines=[*pending, *statement.leading_lines])
                pending = []
            placed.append(statement)
            entry = self.footers.pop(id(statement), None)
            if entry is not None and entry[0] is statement:
                pending += entry[1]
        return placed, pending

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        if not self.footers:
            return updated
        body, footer = self._place_footers(updated.body)
        return updated.with_changes(body=body, footer=[*footer, *updated.footer])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.footers:
            return updated
        body, footer = self._place_footers(updated.body)
        return updated.with_changes(body=body, footer=[*footer, *updated.footer])

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        value = _constant(updated.test)
        self._simplified(original.test, updated.test)
        if value is None or self._gate_of(original.test) is None:
            return updated
        self.changed.append(f"{self._position(original)[0]}: ternary: kept its {'true' if value else 'false'} side")
        chosen = updated.body if value else updated.orelse
        return chosen.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else chosen

    def leave_While(self, original: cst.While, updated: cst.While) -> cst.While | cst.FlattenSentinel[
            cst.BaseStatement] | cst.RemovalSentinel:
        self._simplified(original.test, updated.test)
        if self._gate_of(original.test) is None or _constant(updated.test) is not False:
            return updated  # always true: refused, never chosen
        kept = "its else" if updated.orelse else "nothing"
        self.changed.append(f"{self._position(original)[0]}: while always false: kept {kept}")
        if updated.orelse:
            return self._lift(updated.orelse.body, updated.leading_lines)
        return cst.RemovalSentinel.REMOVE

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert) -> cst.Assert | cst.RemovalSentinel:
        self._simplified(original.test, updated.test)
        if self._gate_of(original.test) is None or _constant(updated.test) is not True:
            return updated
        self.changed.append(f"{self._position(original)[0]}: assert always holds: removed")
        return cst.RemovalSentinel.REMOVE

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        return cst.RemovalSentinel.REMOVE if not updated.body else updated

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator | cst.RemovalSentinel:
        call = updated.decorator
        if not isinstance(call, cst.Call) or not call.args or not isinstance(original.decorator, cst.Call):
            return updated
        judgement = self._gate_of(original.decorator.args[0].value)
        value = _constant(call.args[0].value)
        self._simplified(original.decorator.args[0].value, call.args[0].value)
        if judgement is None or value is None or judgement.gate.skips_when_true is None:
            return updated
        if value != judgement.gate.skips_when_true:
            self.changed.append(f"{self._position(original)[0]}: skip decorator never skips: removed")
            return cst.RemovalSentinel.REMOVE
        return updated


def refusal(j: Judgement) -> str | None:
    """Why a decided gate cannot be rewritten exactly; ``None`` when it can (or is not decided)."""
    value = DECIDED.get(j.verdict)
    where = f"{j.gate.line}: {j.gate.source}"
    if j.gate.kind == "expression" and value is not None:
        return f"{where}: {j.verdict} outside a branch; replace it by hand"
    if j.gate.kind == "expression" and not _keeps_value(j.gate.condition, _decided(j)):
        return (f"{where}: a decided comparison to the right of and/or outside a branch (the value would "
                "change); replace it by hand")
    if j.gate.kind == "assert" and value is False:
        return f"{where}: an assert that always fails"
    if j.gate.kind == "skip-decorator" and value is not None and value == j.gate.skips_when_true:
        return f"{where}: the test is always skipped; delete it by hand"
    if j.gate.kind == "while" and value is True:
        return f"{where}: a loop whose condition is always true"
    return None




def _decided(j: Judgement) -> list[bool | None]:
    return [DECIDED.get(j.comparisons[str(c)]) for c in j.gate.comparisons]


def _value(condition: Condition, decided: Sequence[bool | None]) -> bool | None:
    """``condition``'s constant value from the decided comparisons alone (three-valued)."""
    if "and" in condition or "or" in condition:
        operands: list[Condition] = condition["and"] if "and" in condition else condition["or"]
        values = [_value(c, decided) for c in operands]
        absorbing = "or" in condition
        return absorbing if absorbing in values else None if None in values else not absorbing
    if "not" in condition:
        inner = _value(condition["not"], decided)
        return None if inner is None else not inner
    if "cmp" in condition:
        parts = [decided[i] for i in condition["cmp"]]
        return False if False in parts else None if None in parts else True
    return None


def _keeps_value(condition: Condition, decided: Sequence[bool | None]) -> bool:
    """Only leading operands of ``and``/``or`` are decided, so dropping them keeps the value exactly
    (``True and x`` is ``x``, ``x and True`` is not); inside ``not`` only truth counts."""
    operands: Any = condition.get("and", condition.get("or"))
    if operands is None:
        return True  # a comparison, `other`, or `not` (whose operand is a truth test)
    undecided_seen = False
    for operand in operands:
        if _value(operand, decided) is None:
            undecided_seen = True
            if not _keeps_value(operand, decided):
                return False
        elif undecided_seen:
            return False
    return True


_AnyImport = TypeVar("_AnyImport", cst.Import, cst.ImportFrom)


class DropImports(cst.CSTTransformer):
    """Remove the given bound names from import statements (and statements left empty)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def _keep(self, alias: cst.ImportAlias) -> bool:
        bound = alias.asname.name if alias.asname else alias.name
        return cst.helpers.get_full_name_for_node(bound).split(".")[0] not in self.names  # type: ignore[union-attr]

    def _filtered(self, updated: _AnyImport) -> _AnyImport | cst.RemovalSentinel:
        if isinstance(updated.names, cst.ImportStar):
            return updated
        kept = [a for a in updated.names if self._keep(a)]
        if not kept:
            return cst.RemovalSentinel.REMOVE
        if len(kept) != len(updated.names):
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=kept)
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom | \
            cst.RemovalSentinel:
        return self._filtered(updated)

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import | cst.RemovalSentinel:
        return self._filtered(updated)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        return cst.RemovalSentinel.REMOVE if not updated.body else updated
