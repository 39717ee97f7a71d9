"""The oracle, derived from the rules: a brute-force reference evaluator (issue 6, §1).

Given a workload's premises (their parsed rule trees and severities), its
initial objects and a sequence of changes, the reference evaluator applies
the changes to a copy of the initial objects, evaluates **every** premise
from scratch against the changed state (``unchanged(x)`` compares with the
initial value, which is what the agent observed when it decided), and
returns the dominant severity among the premises that fail, or KEEP if none
fails.  Dominance is spelled out here by name (``BLOCK > REPLAN > REFRESH >
KEEP``) rather than taken from the integer order of ``Outcome``.

It deliberately shares no code with the mechanisms' ``evaluate``
(``mechanisms/revalidation/base.py``) nor with the compiled premise checks
(:func:`scenarios.revalidation.rules.compile_tree`): it walks the rule tree itself.  That
independence is what makes ATR's and FullScan's agreement with the oracle
mean something; the loader uses it to refuse a file whose declared oracle
contradicts its rules, and the tests compare the mechanisms against it.

Schedule s7 lands a *prelude* change before the case's own change
(:func:`prelude_class`): the loader also checks every prelude + variant
combination, so that the oracle never depends on the schedule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from scenarios.revalidation import rules as r
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


# ------------------------------------------------------------------ the interpreter
class _Undefined(Exception):
    pass


def _value(node, state: Mapping[Ref, Any], observed: Mapping[Ref, Any]) -> Any:
    kind = type(node).__name__
    if kind == "Field":
        return state[node.ref]
    if kind == "Literal":
        return node.value
    if kind == "ListLiteral":
        return list(node.items)
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
    if op == "not in":
        return not any(a == x for x in b)
    raise _Undefined(op)


def holds(node, state: Mapping[Ref, Any], observed: Mapping[Ref, Any]) -> bool:
    """Evaluate a rule tree (from :func:`scenarios.revalidation.rules.parse_rule`) on ``state``; ``observed`` for unchanged()."""
    kind = type(node).__name__
    if kind == "Unchanged":
        return state[node.ref] == observed[node.ref]
    if kind == "Field":
        return state[node.ref] is True
    if kind == "Not":
        return not holds(node.operand, state, observed)
    if kind == "And":
        results = [holds(o, state, observed) for o in node.operands]
        return all(results)
    if kind == "Or":
        results = [holds(o, state, observed) for o in node.operands]
        return any(results)
    if kind == "Compare":
        return bool(_compare(node.op, _value(node.left, state, observed), _value(node.right, state, observed)))
    raise _Undefined(kind)


# ------------------------------------------------------------------ the reference
@dataclass(frozen=True)
class Judgement:
    outcome: str  # KEEP | REFRESH | REPLAN | BLOCK
    failed: tuple[str, ...]  # ids of the premises that fail, in declaration order


@dataclass(frozen=True)
class Reference:
    """A workload's premises as the reference evaluator sees them: (id, rule tree, severity name)."""

    premises: tuple[tuple[str, Any, str], ...]
    initial: Mapping[Ref, Any]

    def judge(self, *changes: Mapping[Ref, Any] | Iterable) -> Judgement:
        """Apply the change groups in order to the initial objects; judge every premise."""
        state = dict(self.initial)
        for group in changes:
            items = group.items() if isinstance(group, Mapping) else ((c.ref, c.value) for c in group)
            for ref, value in items:
                state[ref] = value
        failed = [(pid, severity) for pid, tree, severity in self.premises if not holds(tree, state, self.initial)]
        return Judgement(dominant_name(s for _, s in failed), tuple(pid for pid, _ in failed))

    def outcome(self, *changes) -> Outcome:
        return Outcome[self.judge(*changes).outcome]


def reference_of(workload) -> Reference:
    """The reference evaluator of a loaded workload (re-parses each premise's declared rule text)."""
    return Reference(tuple((p.id, r.parse_rule(p.rule), p.severity.name) for p in workload.premises),
                     workload.initial_state())
