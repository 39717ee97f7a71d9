"""Premise rules: the tiny, safe language a scenario file uses for validators.

A premise's validator is written as one comparison, for example
``order.amount <= policy.refund_limit`` or ``order.refunded == false``, or as
``unchanged(customer.display_name)`` (the field still has the value the agent
observed when it decided: the shape of a refreshable presentation premise).

Operands are field references (``object.field``), numbers, quoted strings,
``true``/``false``.  Operators: ``== != < <= > >=``.  Nothing is evaluated with
``eval``: the text is parsed into a closure once, at load time, so the
validators the mechanisms run are plain Python calls (ATR paper, §2: "a
deterministic validator").
"""
from __future__ import annotations

import operator
import re
from typing import Any

from vocabulary.revalidation import Check, Ref

OPERATORS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*")
_COMPARISON = re.compile(r"^\s*(.+?)\s*(==|!=|<=|>=|<|>)\s*(.+?)\s*$")
_UNCHANGED = re.compile(r"^\s*unchanged\(\s*(" + _REF.pattern + r")\s*\)\s*$")


class RuleError(ValueError):
    """A rule that cannot be parsed; the message names the problem."""


def _operand(text: str) -> tuple[bool, Any]:
    """(is_ref, ref-or-literal)."""
    if _REF.fullmatch(text):
        return True, text
    if text in ("true", "false"):
        return False, text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return False, text[1:-1]
    try:
        return False, int(text)
    except ValueError:
        pass
    try:
        return False, float(text)
    except ValueError:
        raise RuleError(f"operand {text!r} is neither object.field, a number, a quoted string, true nor false") from None


def compile_rule(text: str) -> tuple[Check, tuple[Ref, ...]]:
    """Parse ``text`` into (check, evidence fields in order of appearance)."""
    m = _UNCHANGED.match(text)
    if m:
        ref = m.group(1)
        return (lambda current, observed: current(ref) == observed[ref]), (ref,)
    m = _COMPARISON.match(text)
    if not m:
        raise RuleError(f"rule {text!r} is not 'A op B' (op one of {' '.join(OPERATORS)}) nor 'unchanged(object.field)'")
    (lref, left), op, (rref, right) = _operand(m.group(1)), OPERATORS[m.group(2)], _operand(m.group(3))
    if not (lref or rref):
        raise RuleError(f"rule {text!r} compares two literals; it must read at least one field")
    evidence = tuple(dict.fromkeys(x for is_ref, x in ((lref, left), (rref, right)) if is_ref))
    if lref and rref:
        check = lambda current, observed: op(current(left), current(right))  # noqa: E731
    elif lref:
        check = lambda current, observed: op(current(left), right)  # noqa: E731
    else:
        check = lambda current, observed: op(left, current(right))  # noqa: E731
    return check, evidence
