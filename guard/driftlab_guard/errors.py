"""Every exception driftlab_guard raises, in one place (the README says what to do after each).

Layer 1 (consume-once, exactly-once): :class:`ResumeRefused`, :class:`InvalidState`.
Layer 2 (premise revalidation): :class:`StaleDecision`.
Layer 3 (semantic pinning): :class:`PinningError` and its three kinds.
"""
from __future__ import annotations

from typing import Any, Sequence


#: Why a resume was refused -> the one thing its caller does next (the README's table says the same).
REFUSAL_ACTIONS = {
    "consumed": "do not resend: the interrupt was consumed by another resume; if that claimant crashed, "
                "continue the run with invoke(None, config) (it resumes with the claimed value)",
    "continued": "do not resend: the interrupt was consumed earlier and the run went on; if it has not "
                 "finished (its claimant crashed), continue it with invoke(None, config)",
    "not_parked": "do not resend: nothing is parked on this thread (no interrupt was ever claimed here)",
    "no_checkpoint": "do not resend: the thread has no checkpoint; start the run first",
    "state_lost": "do not resend: the saver lost the checkpoints behind a consumed interrupt; start the run again "
                  "with its input (invoke(input, config)) and, once it parks at that interrupt, continue it with "
                  "invoke(None, config): the guard hands the restarted run the value claimed before the loss",
}


#: how the reason of a ``state_lost`` refusal begins (a caller that has only the reason, not the exception, reads it)
STATE_LOST_REASON = "state lost: "


class ResumeRefused(RuntimeError):
    """A resume was refused before any node ran: its interrupt is consumed, or nothing is parked there.

    ``kind`` is one of :data:`REFUSAL_ACTIONS`; ``action`` is what the caller does next.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, reason: str, *,
                 interrupt_ids: Sequence[str] = (), claimant: str | None = None, kind: str = "consumed"):
        if kind not in REFUSAL_ACTIONS:
            raise ValueError(f"refusal kind {kind!r}: expected one of {', '.join(REFUSAL_ACTIONS)}")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.interrupt_ids = tuple(interrupt_ids)
        self.claimant = claimant
        self.reason = reason
        self.kind = kind
        self.action = REFUSAL_ACTIONS[kind]
        super().__init__(f"resume refused (thread {thread_id}, checkpoint {checkpoint_id}): {reason}; {self.action}")


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
