"""Power loss: what was written and not fsynced is gone (issue 31; LazyFS's model, Jepsen's "When Amnesia Strikes").

The faults, as data the runner interprets (``runners/resume/powerloss.py``
drives them through the lab's lazy file system, ``runners/resume/lazyfs.py``):

- ``power_loss``: every unsynced byte of the store's files is dropped;
- ``torn``: the newest unsynced write keeps its prefix up to a 4 KiB boundary,
  every other unsynced byte is dropped;
- ``flush``: everything unsynced is written (what the OS does in the
  background, given time): applied at park when the run was parked long ago.
- ``power_loss_posix``: ``power_loss`` on the file system's strict mode
  (``runners.resume.lazyfs.StrictLazyFS``, POSIX's reading): a file created,
  renamed or unlinked since its folder's last fsync is also undone;
- ``crash_only``: the control, no power loss at all: the same SIGKILL at the same point and the same remount,
  but nothing unsynced is dropped (a killed process loses nothing the OS holds, so the file system is flushed):
  beside a ``power_loss`` cell it says what the power loss itself changes.

The named points of the resume path where the power fails, each with what the
framework had acknowledged before it (the run's step the store must still show
after the restart for "acknowledged progress kept"):
"""
from __future__ import annotations

from dataclasses import dataclass

from vocabulary.resume import AFTER_CHECKPOINT_WRITE, AFTER_EFFECT, DURING_CHECKPOINT_WRITE

POWER_LOSS, TORN, FLUSH, CRASH_ONLY = "power_loss", "torn", "flush", "crash_only"
POWER_LOSS_POSIX = "power_loss_posix"
FAULTS = (POWER_LOSS, TORN, POWER_LOSS_POSIX)
#: what the lazy file system is told for each fault (the control's crash loses nothing: everything is synced)
SENT = {POWER_LOSS: POWER_LOSS, TORN: TORN, POWER_LOSS_POSIX: POWER_LOSS, CRASH_ONLY: FLUSH}
#: the faults whose file system is mounted in strict mode (metadata durable only after its folder's fsync)
STRICT = {POWER_LOSS_POSIX: "runners.resume.lazyfs:StrictLazyFS"}


@dataclass(frozen=True)
class LossPoint:
    """Where the power fails: a runtime point (name, node) or, for ``after_done``, the resume call's return."""

    name: str
    point: str  # the runtime's named point, or "" for "after the call returned"
    node: str
    acknowledged: str  # the node the store must still show the run at (or past), or "done"
    says: str  # one line for the witness


#: on the lab's approval graph (prepare -> approve (interrupt) -> act (gated effect charge) -> notify)
POINTS = (
    LossPoint("after_effect", AFTER_EFFECT, "act", "approve",
              "after act's effect (charge) fired, before act's checkpoint"),
    LossPoint("during_checkpoint_write", DURING_CHECKPOINT_WRITE, "act", "approve",
              "inside the write of act's checkpoint"),
    LossPoint("after_save_returned", AFTER_CHECKPOINT_WRITE, "act", "notify",
              "after the save of act's checkpoint returned"),
    LossPoint("after_done", "", "", "done",
              "a moment after the resume returned done"),
)
BY_NAME = {p.name: p for p in POINTS}
