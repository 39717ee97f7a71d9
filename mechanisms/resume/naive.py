"""``naive``: checkpoint after each node and nothing more — the behaviour the paper measured in LangGraph 1.2.9.

Serves the paper's conformance profile ("exactly-once across interrupts,
at-least-once across crashes, on one API"):

- a crash between an effect and its node's checkpoint re-runs the node on
  recovery, so the effect fires again (EO violated across crashes);
- a resume of a run that is no longer parked is recorded (a resume write, as
  LangGraph records a pending write) and ignored: it is neither refused nor
  consulted (CO violated under a second resume);
- a resume addressed to the paused checkpoint's id replays from it, and k
  concurrent resumers each read the parked head and each run on (CO and EO
  violated under concurrent resume: saturation 1.0);
- no schema check: a node's schema-invalid state is persisted (CV violated).

Its recovery is deterministic (it continues from the head), so RD holds.
"""
from __future__ import annotations

from typing import Any

from mechanisms.resume.lab import LabRuntime
from vocabulary.resume import REFUSED, Status


class Naive(LabRuntime):
    name = "naive"

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        target = self.tables.get(checkpoint_id) if checkpoint_id else self.tables.head(run_id)
        if target is None or target.run_id != run_id:
            return Status(run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}"
                          if checkpoint_id else f"no run {run_id!r}")
        self.tables.record_write(run_id, target.id, value)  # recorded ...
        if not target.parked:  # ... and never consulted
            return self.status(self.tables.head(run_id), run_id)
        return self.drive(run_id, target, value)
