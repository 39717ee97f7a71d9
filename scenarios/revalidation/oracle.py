"""The oracle, derived from the rules: a brute-force reference evaluator (issue 6, §1).

Given a workload's premises (their rule texts and severities), its
initial objects and a sequence of changes, the reference evaluator applies
the changes to a copy of the initial objects, evaluates **every** premise
from scratch against the changed state (``unchanged(x)`` compares with the
initial value, which is what the agent observed when it decided), and
returns the dominant severity among the premises that fail, or KEEP if none
fails.  Dominance is spelled out here by name (``BLOCK > REPLAN > REFRESH >
KEEP``) rather than taken from the integer order of ``Outcome``.

It deliberately shares no code with the mechanisms' ``evaluate``
(``mechanisms/revalidation/base.py``), with the compiled premise checks
(:func:`scenarios.revalidation.rules.compile_tree`), nor with the rule parser
(:func:`scenarios.revalidation.rules.parse_rule`): it reads the rule *text* itself
(:func:`read_rule`, with Python's own expression grammar) and walks its own
tree.  That independence is what makes ATR's and FullScan's agreement with
the oracle mean something; the loader uses it to refuse a file whose
declared oracle contradicts its rules, and to refuse a file on which the
compiled checks and this reading disagree (a parser bug, issue 16 §7); the
tests compare the mechanisms against it.

Schedule s7 lands a *prelude* change before the case's own change
(:func:`prelude_class`, variant :func:`prelude_variant`): the loader checks
every variant after the prelude it is paired with, so that the oracle never
depends on the schedule, and loading stays linear in the number of variants.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from vocabulary.revalidation import Outcome, Ref

#: The dominance order, most severe first.  Written out by name on purpose (see the module docstring).
DOMINANCE = ("BLOCK", "REPLAN", "REFRESH", "KEEP")


def dominant_name(severities: Iterable[str]) -> str:
    """The most severe of ``severities`` by :data:`DOMINANCE` (KEEP if there are none)."""
    present = set(severities)
    for name in DOMINANCE:
        if name in present:
            return name
    return "KEEP"


def prelude_class(oracle: Outcome | str) -> str:
    """Schedule s7's first change: the strongest class the case's oracle still dominates.

    An irrelevant change before KEEP cases (a presentation change would turn KEEP
    into REFRESH), a presentation change before REFRESH, REPLAN and BLOCK cases.
    """
    name = oracle.name if isinstance(oracle, Outcome) else str(oracle)
    return "irrelevant" if name == "KEEP" else "presentation"


def prelude_variant(variant: int, preludes: int) -> int:
    """Which of the prelude class's ``preludes`` variants s7 lands before ``variant``: one fixed partner each."""
    return variant % preludes


# ------------------------------------------------------------------ the oracle's own reading of the rule text
# The rule language (README, "The rule language") is a subset of Python's expression grammar once names and
# literals are spelled the Python way: `or` looser than `and`, `and` looser than `not`, `not` looser than one
# comparison, parentheses group.  So the oracle does not use the rule parser (scenarios.revalidation.rules):
# it respells the text (every name and string becomes a placeholder identifier, true/false become True/False)
# and lets Python's own parser (ast.parse; nothing is evaluated) build the tree.  A precedence or grouping bug
# in the rule parser then makes the compiled checks and this reading disagree, and the loader refuses the file.
class ReadingError(ValueError):
    """Rule text this reading does not accept (the loader reports it as a disagreement with the parser)."""


@dataclass(frozen=True)
class Reading:
    """A rule as the oracle reads it: nested tuples ``(kind, ...)``, kinds field, lit, list, unchanged, not, and,
    or, cmp."""

    text: str
    tree: tuple


_SPELL = re.compile(r"""\s+|`(?P<quoted>[^`\n]+)`|(?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
                    r"""|(?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)"""
                    r"""|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<other>.)""", re.DOTALL)
_KEPT = {"and": "and", "or": "or", "not": "not", "in": "in", "true": "True", "false": "False", "unchanged": "unchanged"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.In: "in",
        ast.NotIn: "not in"}


def _decode(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append({"n": "\n", "t": "\t"}.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def read_rule(text: str) -> Reading:
    """The oracle's tree of ``text``, read with Python's expression grammar (see above)."""
    names: dict[str, str] = {}
    strings: dict[str, str] = {}
    parts = []
    for m in _SPELL.finditer(text):
        if m.group("quoted") is not None or m.group("name") is not None:
            word = m.group("quoted") if m.group("quoted") is not None else m.group("name")
            if m.group("name") is not None and word in _KEPT:
                parts.append(f" {_KEPT[word]} ")
            else:
                key = f"_n{len(names)}"
                names[key] = word
                parts.append(f" {key} ")
        elif m.group("number") is not None:
            parts.append(f" {m.group('number')} ")
        elif m.group("string") is not None:
            key = f"_s{len(strings)}"
            strings[key] = _decode(m.group("string")[1:-1])
            parts.append(f" {key} ")
        else:
            parts.append(m.group())
    try:
        body = ast.parse("".join(parts).strip(), mode="eval").body
    except SyntaxError as exc:
        raise ReadingError(f"rule {text!r}: not an expression ({exc.msg})") from None

    def ref(node) -> str:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names \
                and node.attr in names:
            return f"{names[node.value.id]}.{names[node.attr]}"
        raise ReadingError(f"rule {text!r}: expected object.field, found {ast.dump(node)}")

    def lit(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and type(node.operand.value) in (int, float):
            return -node.operand.value
        if isinstance(node, ast.Name) and node.id in strings:
            return strings[node.id]
        raise ReadingError(f"rule {text!r}: expected a literal, found {ast.dump(node)}")

    def conv(node) -> tuple:
        if isinstance(node, ast.BoolOp):
            return ("and" if isinstance(node.op, ast.And) else "or", tuple(conv(v) for v in node.values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", conv(node.operand))
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise ReadingError(f"rule {text!r}: a chained comparison")
            return ("cmp", _CMP[type(node.ops[0])], conv(node.left), conv(node.comparators[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "unchanged" \
                and len(node.args) == 1 and not node.keywords:
            return ("unchanged", ref(node.args[0]))
        if isinstance(node, ast.Attribute):
            return ("field", ref(node))
        if isinstance(node, ast.List):
            return ("list", tuple(lit(e) for e in node.elts))
        return ("lit", lit(node))

    return Reading(text, conv(body))


# ------------------------------------------------------------------ the interpreter
def _value(node: tuple, state: Mapping[Ref, Any], observed: Mapping[Ref, Any]) -> Any:
    kind = node[0]
    if kind == "field":
        return state[node[1]]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return list(node[1])
    return holds(node, state, observed)


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return not (a == b)
    if op == "<":
        return a < b
    if op == "<=":
        return a < b or a == b
    if op == ">":
        return b < a
    if op == ">=":
        return b < a or a == b
    if op == "in":
        return any(a == x for x in b)
    assert op == "not in", op
    return not any(a == x for x in b)


def holds(rule: "Reading | tuple | str", state: Mapping[Ref, Any], observed: Mapping[Ref, Any]) -> bool:
    """Evaluate a rule (its text, or the oracle's own :func:`read_rule` of it) on ``state``; ``observed`` for
    unchanged()."""
    node = read_rule(rule).tree if isinstance(rule, str) else rule.tree if isinstance(rule, Reading) else rule
    kind = node[0]
    if kind == "unchanged":
        return state[node[1]] == observed[node[1]]
    if kind == "field":
        return state[node[1]] is True
    if kind == "not":
        return not holds(node[1], state, observed)
    if kind == "and":
        return all([holds(o, state, observed) for o in node[1]])
    if kind == "or":
        return any([holds(o, state, observed) for o in node[1]])
    assert kind == "cmp", node
    return bool(_compare(node[1], _value(node[2], state, observed), _value(node[3], state, observed)))


# ------------------------------------------------------------------ the reference
@dataclass(frozen=True)
class Judgement:
    outcome: str  # KEEP | REFRESH | REPLAN | BLOCK
    failed: tuple[str, ...]  # ids of the premises that fail, in declaration order


@dataclass(frozen=True)
class Reference:
    """A workload's premises as the reference evaluator sees them: (id, rule text, severity name).

    Each rule text is read once by :func:`read_rule` (a :class:`ReadingError` if it cannot be read).
    """

    premises: tuple[tuple[str, Any, str], ...]
    initial: Mapping[Ref, Any]

    def __post_init__(self):
        object.__setattr__(self, "premises", tuple((pid, read_rule(rule) if isinstance(rule, str) else rule, sev)
                                                   for pid, rule, sev in self.premises))

    def state(self, *changes: Mapping[Ref, Any] | Iterable) -> dict[Ref, Any]:
        """The initial objects with the change groups applied in order."""
        state = dict(self.initial)
        for group in changes:
            items = group.items() if isinstance(group, Mapping) else ((c.ref, c.value) for c in group)
            for ref, value in items:
                state[ref] = value
        return state

    def judge(self, *changes: Mapping[Ref, Any] | Iterable) -> Judgement:
        """Apply the change groups in order to the initial objects; judge every premise."""
        state = self.state(*changes)
        failed = [(pid, severity) for pid, rule, severity in self.premises if not holds(rule, state, self.initial)]
        return Judgement(dominant_name(s for _, s in failed), tuple(pid for pid, _ in failed))

    def outcome(self, *changes) -> Outcome:
        return Outcome[self.judge(*changes).outcome]


def reference_of(workload) -> Reference:
    """The reference evaluator of a loaded workload (reads each premise's declared rule text on its own)."""
    return Reference(tuple((p.id, p.rule, p.severity.name) for p in workload.premises),
                     workload.initial_state())
