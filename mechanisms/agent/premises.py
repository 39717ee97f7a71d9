"""The guard's premise-revalidation layer for the agent: ATR at resume (KEEP / REFRESH / REPLAN / BLOCK).

Serves the ATR paper ("From Version Conflicts to Decision Conflicts", arXiv
2609.08015) inside issue 15's agent: when the agent parks for approval it
declares the premises its pending action depends on (the reads and the rule
over them) and takes a snapshot of what it read; on resume the layer rereads,
finds the fields that changed, follows a **reverse index** from each changed
field to the premises that read it, re-evaluates only those, and answers the
dominant outcome: a broken premise gives its severity (BLOCK > REPLAN), a
changed payload field alone gives REFRESH, anything else KEEP.

This evaluator is the mechanism's own; the scenario's oracle is computed by
``scenarios/agent/loader.py`` from the same declarations with code of its own
(the lab's trust rule).  ``skip`` plants a bug for the tests: a layer that
ignores every change of one premise-change class's kind of field.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from vocabulary.agent import BLOCK, KEEP, REFRESH, REPLAN

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _value(state: Mapping[str, Mapping[str, Any]], ref: str) -> Any:
    obj, _, fld = ref.partition(".")
    return state[obj][fld]


@dataclass(frozen=True)
class Decision:
    outcome: str
    evaluated: int  # premises re-evaluated (ATR's cost measure)
    reasons: tuple[str, ...] = ()


@dataclass
class Revalidator:
    """Premises ``(name, left, op, right, severity)`` and payload fields -> an outcome at resume."""

    premises: tuple[tuple[str, str, str, Any, str], ...]
    payload: tuple[str, ...]
    other_reads: tuple[str, ...] = ()
    skip: frozenset[str] = frozenset()  # planted bug: ignore changes to these kinds ("payload", "premise")
    index: dict[str, list[int]] = field(init=False)

    def __post_init__(self):
        self.index = {}
        for i, (_, left, _, right, _) in enumerate(self.premises):
            for ref in (left, right):
                if isinstance(ref, str) and "." in ref:
                    self.index.setdefault(ref, []).append(i)

    @classmethod
    def of(cls, scenario, skip: Iterable[str] = ()) -> "Revalidator":
        return cls(tuple((p.name, p.left, p.op, p.right, p.severity) for p in scenario.premises), scenario.payload,
                   scenario.other_reads, frozenset(skip))

    def reads(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.index, *self.payload, *self.other_reads]))

    def snapshot(self, state: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """What the decision read: ref -> value (kept in the checkpoint while parked)."""
        return {ref: _value(state, ref) for ref in self.reads()}

    def _holds(self, i: int, values: Mapping[str, Any]) -> bool:
        _, left, op, right, _ = self.premises[i]
        r = values[right] if isinstance(right, str) and right in values else right
        return bool(_OPS[op](values[left], r))

    def revalidate(self, snapshot: Mapping[str, Any], state: Mapping[str, Mapping[str, Any]]) -> Decision:
        now = {ref: _value(state, ref) for ref in snapshot}
        changed = [ref for ref in snapshot if now[ref] != snapshot[ref]]
        affected = sorted({i for ref in changed for i in self.index.get(ref, ())})
        if "premise" in self.skip:
            affected = []
        broken = [i for i in affected if not self._holds(i, now)]
        reasons = tuple(f"{self.premises[i][0]} no longer holds" for i in broken)
        sev = {self.premises[i][4] for i in broken}
        if BLOCK in sev:
            return Decision(BLOCK, len(affected), reasons)
        if REPLAN in sev:
            return Decision(REPLAN, len(affected), reasons)
        stale = [ref for ref in changed if ref in self.payload]
        if stale and "payload" not in self.skip:
            return Decision(REFRESH, len(affected), tuple(f"{ref} changed" for ref in stale))
        return Decision(KEEP, len(affected))
