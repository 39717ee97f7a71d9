"""The sequencer with one fault switch on: the paper's separating models, run as implementations.

Serves the paper's independence result (its 39-cell matrix: 6 fault switches
x 6 properties on the TLA+ model, plus 3 cells of a state-rebuild model).
Each class below is ``sequencer`` with exactly one switch; the independence
experiment runs every fault-matrix cell on each, and the checkers' tests use
them as planted bugs (a checker that misses its own switch, or flags a
property its switch leaves intact, is wrong).  The paper's expected
breakage is in ``data/reference/resume.toml``:

=================== ============================================================ ==============
switch              what it does                                                 paper breaks
=================== ============================================================ ==============
``replay``          recovery re-executes from the first checkpoint, effects       EO, PC, CO
                    fired plainly, the interrupt consuming its claimed value again
``fork_ignore``     a resume at a checkpoint that was already resumed once (a      FD
                    fork of it) gets the first resume's value
``invalid_persist`` no schema validation before persist                           CV
``nondet_recovery`` from one frontier, recovery alternately continues (odd)       EO, PC, CO, RD
                    or replays (even), by a counter in the ledger
``double_consume``  a stray resume of a consumed interrupt re-fires its gated     EO, CO
                    effects (plainly) instead of being refused
``prefix_replay``   recovery re-executes the nodes before the interrupt with      EO, PC
                    their effects, serves the interrupt and the nodes after it
                    from their record (memo), then continues from the head
``state_rebuild``   recovery rebuilds the state by replaying every completed      PC
                    node from memoized results, without effects
=================== ============================================================ ==============
"""
from __future__ import annotations

from typing import Any

from mechanisms.resume.lab import NO_VALUE
from mechanisms.resume.sequencer import Sequencer
from vocabulary.resume import MEMO, REFUSED, Status


class _PlainDuringReplay(Sequencer):
    """A sequencer whose effects fire plainly (no idempotency key) while it replays."""

    replaying = False

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        if self.replaying:
            return self.ledger.fire(run_id, task, key, payload, op=self.hooks.op)
        return super().fire_effect(run_id, task, key, payload)

    def replay(self, run_id: str) -> Status:
        """Re-execute the run from its first checkpoint, consuming its claimed value again."""
        first = self.tables.list(run_id)[0]
        claimed, value = self.tables.claimed(run_id, self.graph.interrupt_step)
        self.replaying = True
        try:
            return self.drive(run_id, first, value if claimed else NO_VALUE)
        finally:
            self.replaying = False


class Replay(_PlainDuringReplay):
    name = "sequencer+replay"

    def recover(self, run_id: str) -> Status:
        if self.tables.head(run_id) is None:
            return super().recover(run_id)
        return self.replay(run_id)


class NondetRecovery(_PlainDuringReplay):
    name = "sequencer+nondet_recovery"

    def recover(self, run_id: str) -> Status:
        if self.tables.head(run_id) is not None and self.ledger.bump("recoveries") % 2 == 0:
            return self.replay(run_id)
        return super().recover(run_id)


class PrefixReplay(_PlainDuringReplay):
    name = "sequencer+prefix_replay"

    def recover(self, run_id: str) -> Status:
        head = self.tables.head(run_id)
        if head is None:
            return super().recover(run_id)
        state = dict(self.tables.list(run_id)[0].values)
        gate = self.graph.interrupt_step
        self.replaying = True
        try:
            for step in range(min(gate, head.step)):  # the prefix before the interrupt: re-executed, effects and all
                state = self.run_node(run_id, step, state)
        finally:
            self.replaying = False
        for step in range(gate, head.step):  # the interrupt and what follows: served from the record
            self.ledger.trace(run_id, step, self.graph.nodes[step].name, MEMO, None, op=self.hooks.op)
        return super().recover(run_id)


class StateRebuild(Sequencer):
    name = "sequencer+state_rebuild"

    def recover(self, run_id: str) -> Status:
        head = self.tables.head(run_id)
        if head is not None:
            for step in range(head.step):  # memoized results, no effects: the state is rebuilt, not re-done
                self.ledger.trace(run_id, step, self.graph.nodes[step].name, MEMO, None, op=self.hooks.op)
        return super().recover(run_id)


class DoubleConsume(Sequencer):
    name = "sequencer+double_consume"

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        status = super().resume(run_id, value, checkpoint_id)
        gate = self.graph.interrupt_step
        if status.state == REFUSED and self.tables.claimed(run_id, gate)[0]:
            head = self.tables.head(run_id)
            gated = self.graph.gated_node
            if gated is not None:
                step = self.graph.names.index(gated)
                for key in self.graph.nodes[step].effects:  # the stray resume re-fires the gated effects
                    self.ledger.fire(run_id, self.graph.task(step), key,
                                     self.graph.payload(step, key, head.values), op=self.hooks.op)
            return self.status(head, run_id)
        return status


class ForkIgnore(Sequencer):
    name = "sequencer+fork_ignore"

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        target, _ = self.target(run_id, checkpoint_id)
        if target is not None and not self.tables.claimed(run_id, target.step)[0]:
            origin = self.tables.origin(run_id) if target.step == self.tables.list(run_id)[0].step else None
            value = self.tables.first_outcome(origin or target.id, value)
        return super().resume(run_id, value, checkpoint_id)


class InvalidPersist(Sequencer):
    name = "sequencer+invalid_persist"
    validate_before_persist = False
