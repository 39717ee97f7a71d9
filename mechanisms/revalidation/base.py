"""The one interface every decision-revalidation mechanism implements (ATR paper §3, §5).

A mechanism is asked, just before an agent's effect is released, whether the
agent transaction's decision still stands: ``validate(txn, store)`` returns a
:class:`~vocabulary.revalidation.Validation` (outcome, premises evaluated, tokens to bind to
the commit).  It may rebase the transaction (record the values and versions it
has just checked) so that a later revalidation starts from there.  The runner,
not the mechanism, commits the effect with the tokens and revalidates when the
target's compare-and-set refuses them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar

from vocabulary.revalidation import AgentTransaction, Outcome, Ref, Store, Validation


class Mechanism(ABC):
    name: ClassVar[str]

    @abstractmethod
    def validate(self, txn: AgentTransaction, store: Store) -> Validation:
        """Decide KEEP / REFRESH / REPLAN / BLOCK for the pending intent."""


def reread(txn: AgentTransaction, store: Store, refs) -> dict[Ref, Any]:
    """Read ``refs`` afresh (value and version together) and rebase the transaction on them.

    Returns the fresh values.  Reading value and version in one step is what
    keeps the tokens honest: a write after this read bumps the version, and
    the commit's compare-and-set then refuses the tokens.
    """
    fresh: dict[Ref, Any] = {}
    for ref in refs:
        value, version = store.read(ref)
        fresh[ref] = value
        txn.reads[ref] = version
    return fresh


def evaluate(premises, ids, current: Callable[[Ref], Any], observed) -> tuple[Outcome, int, tuple[str, ...]]:
    """Run the premises at positions ``ids``; the dominant failure severity wins."""
    outcome, failed, n = Outcome.KEEP, [], 0
    for i in ids:
        p = premises[i]
        n += 1
        if not p.check(current, observed):
            failed.append(p.id)
            if p.severity > outcome:
                outcome = p.severity
    return outcome, n, tuple(failed)
