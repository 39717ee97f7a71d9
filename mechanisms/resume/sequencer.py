"""``sequencer``: the reference runtime that conforms (the paper's REMIT, re-implemented over SQL).

Serves the paper's repair results: the fork and validity cells, and the
cross-process cell "repaired at the read path: an opt-in gate claims
consumption in the shared store, serving one racer and refusing the rest
before any node executes".  On top of the lab loop it adds:

- **a write-ahead effect intent and an idempotent effect ledger**: before an
  effect fires, its intent ``run/task/key`` is written to the runtime's
  store; the firing carries the same key as its idempotency key, so a node
  re-run after a crash finds the effect already in the ledger and fires
  nothing (EO across crashes);
- **schema validation before anything is persisted**: a node that returns a
  schema-invalid state fails the call and leaves the head where it was (CV);
- **a consume-once claim**: a resume first inserts ``(run, interrupt step)``
  into the claims table (``INSERT ... ON CONFLICT DO NOTHING``, one row per
  interrupt, in the shared store): exactly one resumer — sequential, addressed
  by checkpoint id, or one of k concurrent processes — gets the row; every
  other is refused before any node runs (CO);
- **deterministic recovery**: continue from the head; a parked head whose
  interrupt is claimed (its resumer was killed mid-resume) is continued with
  the claimed value — the claim is the durable record of the consumption (RD).

What it trades: one extra row per resume (the claim) and one intent row per
effect, measured against ``naive`` by ``benchmarks/resume/bench_overhead.py``.
"""
from __future__ import annotations

from typing import Any

from mechanisms.resume.lab import LabRuntime
from vocabulary.resume import REFUSED, Status


class Sequencer(LabRuntime):
    name = "sequencer"
    validate_before_persist = True

    def idem(self, run_id: str, task: str, key: str) -> str:
        return f"{run_id}/{task}/{key}"

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        idem = self.idem(run_id, task, key)
        self.tables.intend(idem, run_id, task, key)  # write-ahead intent
        fired = self.ledger.fire(run_id, task, key, payload, op=self.hooks.op, idem=idem)
        self.tables.settle(idem)
        return fired

    def target(self, run_id: str, checkpoint_id: str | None):
        """The parked checkpoint a resume addresses, or the reason it is refused."""
        target = self.tables.get(checkpoint_id) if checkpoint_id else self.tables.head(run_id)
        if target is None or target.run_id != run_id:
            return None, (f"no checkpoint {checkpoint_id!r} in run {run_id!r}" if checkpoint_id else f"no run {run_id!r}")
        if not target.parked:
            return None, f"run {run_id!r} is not parked at {'checkpoint ' + checkpoint_id if checkpoint_id else 'its head'}"
        return target, ""

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        target, reason = self.target(run_id, checkpoint_id)
        if target is None:
            return Status(run_id, REFUSED, reason=reason)
        if not self.tables.claim(run_id, target.step, value):
            return Status(run_id, REFUSED, target.id, target.next,
                          reason=f"the interrupt at step {target.step} of run {run_id!r} is already consumed")
        return self.drive(run_id, target, value)

    def recover(self, run_id: str) -> Status:
        head = self.tables.head(run_id)
        if head is not None and head.parked:
            claimed, value = self.tables.claimed(run_id, head.step)
            if claimed:  # its resumer died after the claim: finish the consumption it started
                return self.drive(run_id, head, value)
        return super().recover(run_id)
