"""Mechanism stacks of the agent family: stock LangGraph plus any subset of the guard's three layers.

Serves issue 15's independence claim: each layer removes its own failures and
leaves the others.  The layers are the ``driftlab_guard`` package's (``guard/``);
the lab keeps no copy of them.  A :class:`Stack` says, for the agent's four
decisions, what it uses with or without each layer:

- **saver** (``once``): LangGraph's own ``SqliteSaver`` / ``PostgresSaver``, or
  driftlab_guard's consume-once subclass of it (a second resume of a consumed
  interrupt is refused; a recovery is handed the claimed value);
- **effects** (``once``): a plain insert per firing, or driftlab_guard's
  idempotent ``OnceLedger`` (fired once per thread / task / key);
- **act check** (``premises``): without the layer the agent does what it was
  written to do (the scenario's ``stock_check``: compare the version of the
  row it acts on, REPLAN if it moved); with it, driftlab_guard's ``Revalidator``
  over the scenario's declared premises (:meth:`Stack.premises`);
- **resolution** (``pinning``): the live alias every time, or driftlab_guard's
  ``Pins`` (a manifest channel in the state, inherited by the subgraph).

``planted`` switches on a test's planted bug: ``skip:<class>`` declares no
premise for the fields of that premise-change class's kind (``payload``:
presentation fields, ``rule``: the business rules), ``no_subgraph_inheritance``
hands the subgraph an empty manifest, ``claim_without_interrupt_id`` keys the
consume-once claim by thread alone.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from vocabulary.agent import ONCE, PINNING, PREMISES, stack_layers, stack_name

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def stock_savers() -> dict[str, type]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    return {"sqlite": SqliteSaver, "postgres": PostgresSaver}


def guarded_savers() -> dict[str, type]:
    import driftlab_guard
    return {"sqlite": driftlab_guard.GuardedSqliteSaver, "postgres": driftlab_guard.GuardedPostgresSaver}


def _rule(left: str, op: str, right: Any):
    compare = _OPS[op]
    if isinstance(right, str) and "." in right:
        return lambda now, then: compare(now[left], now[right])
    return lambda now, then: compare(now[left], right)


def _unchanged(ref: str):
    return lambda now, then: now[ref] == then[ref]


@dataclass
class Stack:
    """One mechanism stack (module docstring)."""

    name: str
    planted: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        self.layers = stack_layers(self.name)
        self.name = stack_name(self.layers)

    @property
    def once(self) -> bool:
        return ONCE in self.layers

    @property
    def premises_layer(self) -> bool:
        return PREMISES in self.layers

    @property
    def pinning(self) -> bool:
        return PINNING in self.layers

    def saver_class(self, kind: str) -> type:
        if not self.once:
            return stock_savers()[kind]
        cls = guarded_savers()[kind]
        if "claim_without_interrupt_id" in self.planted:
            from mechanisms.agent.planted import claim_without_interrupt_id
            return claim_without_interrupt_id(cls)
        return cls

    def ledger_class(self) -> type | None:
        if not self.once:
            return None
        import driftlab_guard
        return driftlab_guard.OnceLedger

    def premises(self, scenario) -> list:
        """The pending refund's premises as driftlab_guard declares them: each business rule with its severity, and
        one REFRESH premise per payload field (its value must not have changed)."""
        import driftlab_guard

        out = []
        if "skip:rule" not in self.planted:
            for p in scenario.premises:
                reads = tuple(r for r in (p.left, p.right) if isinstance(r, str) and "." in r)
                out.append(driftlab_guard.Premise(p.name, reads, _rule(p.left, p.op, p.right),
                                              driftlab_guard.Outcome[p.severity]))
        if "skip:payload" not in self.planted:
            for ref in scenario.payload:
                out.append(driftlab_guard.Premise(f"payload:{ref}", (ref,), _unchanged(ref), driftlab_guard.REFRESH))
        return out

    def subgraph_manifest(self, manifest: dict) -> dict:
        """What the notify subgraph starts with: the parent's manifest (I1), unless a test plants its loss."""
        return {} if "no_subgraph_inheritance" in self.planted else dict(manifest)

    def describe(self) -> str:
        if not self.layers:
            return "stock LangGraph (its own savers, plain effects, live aliases, the agent's own version check)"
        return "LangGraph + driftlab_guard's " + ", ".join(x for x in ("once", "premises", "pinning") if x in self.layers) \
            + (" layer" if len(self.layers) == 1 else " layers")


def stack(name: str, planted: Any = ()) -> Stack:
    return Stack(name, frozenset(planted))
