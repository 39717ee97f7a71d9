"""Mechanism stacks of the agent family: stock LangGraph plus any subset of the guard's three layers.

Serves issue 15's independence claim: each layer removes its own failures and
leaves the others.  A :class:`Stack` says, for the agent's four decisions, what
it does with or without each layer:

- **saver** (``once``): LangGraph's own ``SqliteSaver`` / ``PostgresSaver``, or
  the guard's consume-once subclass of it (a second resume of a consumed
  interrupt is refused; a recovery is handed the claimed value);
- **effects** (``once``): a plain insert per firing, or the guard's
  idempotent effect ledger (fired once per thread / task / key);
- **act check** (``premises``): without the layer the agent does what it was
  written to do (the scenario's ``stock_check``: compare the version of the
  row it acts on, REPLAN if it moved); with it, ATR's revalidation
  (:mod:`mechanisms.agent.premises`);
- **resolution** (``pinning``): the live alias every time, or the manifest
  (:mod:`mechanisms.agent.pinning`).

The consume-once layer is the existing guard (``GuardedSqliteSaver`` ...,
``OnceLedger``); it is imported in :func:`once_parts` only, the one place that
switches to the ``driftguard`` package when it lands.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mechanisms.agent.pinning import Pinning
from mechanisms.agent.premises import Revalidator
from vocabulary.agent import KEEP, ONCE, PINNING, PREMISES, REPLAN, stack_layers, stack_name


def once_parts():
    """(guarded saver classes by backend kind, the effect-ledger class, the refusal exception)."""
    from mechanisms.resume.langgraph_effects import OnceLedger
    from mechanisms.resume.langgraph_guard import GuardedPostgresSaver, GuardedSqliteSaver, ResumeRefused
    return {"sqlite": GuardedSqliteSaver, "postgres": GuardedPostgresSaver}, OnceLedger, ResumeRefused


def stock_savers():
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    return {"sqlite": SqliteSaver, "postgres": PostgresSaver}


@dataclass
class Stack:
    """One mechanism stack; ``planted`` switches on a test's planted bug (see the layers' docstrings)."""

    name: str
    planted: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        self.layers = stack_layers(self.name)
        self.name = stack_name(self.layers)

    @property
    def once(self) -> bool:
        return ONCE in self.layers

    @property
    def premises(self) -> bool:
        return PREMISES in self.layers

    @property
    def pinning(self) -> bool:
        return PINNING in self.layers

    def saver_class(self, kind: str) -> type:
        return once_parts()[0][kind] if self.once else stock_savers()[kind]

    def revalidator(self, scenario) -> Revalidator:
        return Revalidator.of(scenario, skip=[p.split(":", 1)[1] for p in self.planted if p.startswith("skip:")])

    def pinner(self, scenario) -> Pinning:
        return Pinning(scenario.contracts, scenario.resources,
                       inherit_to_subgraph="no_subgraph_inheritance" not in self.planted)

    def check(self, scenario, snapshot: dict, versions_then: dict, state_now: dict, versions_now: dict) -> tuple[str, int]:
        """The act node's decision before releasing: (outcome, premises evaluated)."""
        if self.premises:
            d = self.revalidator(scenario).revalidate(snapshot, state_now)
            return d.outcome, d.evaluated
        obj = scenario.stock_check
        return (REPLAN if versions_now[obj] != versions_then[obj] else KEEP), 0

    def resolve(self, scenario, manifest: dict, identity: str, live: int) -> tuple[int, dict]:
        if self.pinning:
            return self.pinner(scenario).resolve(manifest, identity, live)
        return live, manifest

    def inherit(self, scenario, manifest: dict) -> dict:
        return self.pinner(scenario).inherit(manifest) if self.pinning else {}

    def describe(self) -> str:
        return ("stock LangGraph" if not self.layers else "LangGraph + the guard's " + ", ".join(sorted(self.layers))
                + (" layer" if len(self.layers) == 1 else " layers"))


def stack(name: str, planted: Any = ()) -> Stack:
    return Stack(name, frozenset(planted))
