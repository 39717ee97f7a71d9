"""Planted bugs of the guard's layers, for the agent family's tests (each test names the one it catches).

Nothing here is a mechanism under test: a planted variant exists so that a
test can show the lab tells it from the real layer.  The variants of the
premises and pinning layers are switches of :class:`mechanisms.agent.stacks.Stack`
(``skip:<class>``, ``no_subgraph_inheritance``); the consume-once claim's is a
subclass of driftlab_guard's saver, made here.
"""
from __future__ import annotations


def claim_without_interrupt_id(saver_class: type) -> type:
    """``saver_class`` whose consume-once claim is keyed by thread (and namespace) alone, not by interrupt id:
    a second interrupt of the same thread then looks consumed, and its approval is refused."""

    class ClaimWithoutInterruptId(saver_class):
        def _guard_procedure(self, tup, plan):
            if plan.kind == "claim":
                plan.ids = ["-"]
            return super()._guard_procedure(tup, plan)

    ClaimWithoutInterruptId.__name__ = f"{saver_class.__name__}ClaimWithoutInterruptId"
    return ClaimWithoutInterruptId
