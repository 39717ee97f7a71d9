"""Every exception driftlab_guard raises, in one place (the README says what to do after each).

Layer 1 (consume-once, exactly-once): :class:`ResumeRefused`, :class:`InvalidState`.
Layer 2 (premise revalidation): :class:`StaleDecision`.
Layer 3 (semantic pinning): :class:`PinningError` and its three kinds.
"""
from __future__ import annotations

from typing import Any, Sequence


class ResumeRefused(RuntimeError):
    """A resume was refused before any node ran: its interrupt is consumed, or nothing is parked there."""

    def __init__(self, thread_id: str, checkpoint_id: str, reason: str, *,
                 interrupt_ids: Sequence[str] = (), claimant: str | None = None):
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.interrupt_ids = tuple(interrupt_ids)
        self.claimant = claimant
        self.reason = reason
        super().__init__(f"resume refused (thread {thread_id}, checkpoint {checkpoint_id}): {reason}")


class InvalidState(ValueError):
    """A state that does not fit the graph's schema was about to be persisted (nothing was written)."""

    def __init__(self, where: str, problems: list[str]):
        self.where = where
        self.problems = list(problems)
        super().__init__(f"schema-invalid state refused before {where}: " + "; ".join(self.problems))


class StaleDecision(RuntimeError):
    """Revalidation at resume says the parked action must not be released as decided (REPLAN or BLOCK)."""

    def __init__(self, verdict: Any):
        self.verdict = verdict
        failed = ", ".join(verdict.failed) or "-"
        super().__init__(f"stale decision: {verdict.outcome.name} (failed premises: {failed}; {verdict.reason})")


class PinningError(RuntimeError):
    """A resource could not be resolved or merged without breaking the run's semantic snapshot."""


class ContractViolation(PinningError):
    """No version of a resource satisfies the declared contracts with what the run has already bound."""


class PinConflict(PinningError):
    """A fan-in (merge) or a rebinding would give one alias two versions in one run."""


class PinsNotInherited(PinningError):
    """A node inside a subgraph resolved a resource, but its state does not carry the parent's manifest."""
