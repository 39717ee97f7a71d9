"""The lab's own runtime loop: run nodes in order, checkpoint after each, park at the interrupt.

Shared by the two reference runtimes (``naive``, ``sequencer``) and the
sequencer's faulted variants; it is not itself a registered runtime.  The
loop is the one the paper's reference semantics describes and LangGraph
implements: a checkpoint after every node (the run's durable frontier), the
interrupt node parks the run when it has no resume value, and a resume value
is consumed by running the interrupt node.  What differs between runtimes is
left to four policy points: :meth:`fire_effect` (plain or idempotent),
``validate_before_persist``, and what ``resume`` and ``recover`` do.

Checkpoints, resume writes, claims and intents live in
:class:`mechanisms.resume.store.CheckpointTables` (the runtime's store);
effects and the trace in the ledger (a separate store).  Every checkpoint
is written in its own transaction with the ``during_checkpoint_write`` point
inside it, so a SIGKILL there leaves no checkpoint.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from mechanisms.resume.base import DurableRuntime, Hooks
from mechanisms.resume.store import CheckpointTables
from vocabulary.resume import (AFTER_CHECKPOINT_WRITE, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE,
                               FAILED, PARKED, PARKED_POINT, REFUSED, Backend, Checkpoint, GraphSpec, Status)

NO_VALUE = object()  # "no resume value": the interrupt node parks


class SchemaRefused(Exception):
    """A node returned a state that the schema refuses (caught by the loop: the call fails, nothing persisted)."""


class LabRuntime(DurableRuntime):
    """The loop (module docstring); subclasses choose the policies."""

    name = "lab"
    validate_before_persist = False

    def __init__(self, backend: Backend, graph: GraphSpec, hooks: Hooks | None = None):
        super().__init__(backend, graph, hooks)
        self.tables = CheckpointTables(backend)

    def setup(self) -> None:
        super().setup()
        self.tables.setup()

    def close(self) -> None:
        self.tables.close()
        super().close()

    # ------------------------------------------------------------------ checkpoints
    def persist(self, run_id: str, step: int, values: dict, parent: str | None, origin: str | None = None,
                ran: bool = True) -> Checkpoint:
        """Write the checkpoint after ``step`` nodes (``ran``: a node just ran, so the two points apply)."""
        n = len(self.graph.nodes)
        if ran:
            self.point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step - 1)
        if self.validate_before_persist:
            problems = self.graph.problems(values)
            if problems:
                raise SchemaRefused("; ".join(problems))
        cp = Checkpoint(uuid.uuid4().hex, run_id, step, self.graph.names[step] if step < n else None, values, parent,
                        time.time(), step < n and self.graph.nodes[step].interrupt)
        with self.tables.sql.transaction():
            self.tables.insert(cp, origin)
            if ran:
                self.point(DURING_CHECKPOINT_WRITE, run_id, step - 1)
        if ran:
            self.point(AFTER_CHECKPOINT_WRITE, run_id, step - 1)  # the save returned (the power-loss cells' point)
        return cp

    def status(self, cp: Checkpoint | None, run_id: str, state: str | None = None, reason: str = "") -> Status:
        if cp is None:
            return Status(run_id, state or REFUSED, reason=reason or f"no run {run_id!r}")
        if state is None:
            state = DONE if cp.step >= len(self.graph.nodes) else PARKED
        return Status(run_id, state, cp.id, cp.next, self.interrupt_payload(run_id) if cp.parked else None,
                      dict(cp.values), reason)

    # ------------------------------------------------------------------ the loop
    def drive(self, run_id: str, head: Checkpoint, resume: Any = NO_VALUE) -> Status:
        """Run from ``head`` until the run parks or ends (consuming ``resume`` at the interrupt)."""
        state, step, cp = dict(head.values), head.step, head
        n = len(self.graph.nodes)
        while step < n:
            node = self.graph.nodes[step]
            if node.interrupt and resume is NO_VALUE:
                self.point(PARKED_POINT, run_id, step)
                return self.status(cp, run_id, PARKED)
            value = resume if node.interrupt else None
            if node.interrupt:
                resume = NO_VALUE
            state = self.run_node(run_id, step, state, value)
            try:
                cp = self.persist(run_id, step + 1, state, cp.id)
            except SchemaRefused as exc:
                return Status(run_id, FAILED, cp.id, node.name, None, dict(cp.values),
                              f"node {node.name} returned a schema-invalid state ({exc}); nothing persisted")
            if node.interrupt:
                self.point(AFTER_RESUME_CONSUMED, run_id, step)
            step += 1
        return self.status(cp, run_id, DONE)

    # ------------------------------------------------------------------ protocol parts every lab runtime shares
    def start(self, run_id: str, input: str) -> Status:
        if self.tables.head(run_id) is not None:
            return Status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        cp = self.persist(run_id, 0, self.graph.initial_state(input), None, ran=False)
        return self.drive(run_id, cp)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> Status:
        src = self.tables.get(checkpoint_id)
        if src is None or src.run_id != run_id:
            return Status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self.tables.head(new_run_id) is not None:
            return Status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        cp = Checkpoint(uuid.uuid4().hex, new_run_id, src.step, src.next, dict(src.values), src.id, time.time(),
                        src.parked)
        self.tables.insert(cp, origin=src.id)
        return self.status(cp, new_run_id)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        return self.tables.list(run_id)

    def state(self, run_id: str) -> Status:
        return self.status(self.tables.head(run_id), run_id)

    def recover(self, run_id: str) -> Status:
        head = self.tables.head(run_id)
        if head is None:
            return self.status(None, run_id)
        if head.step >= len(self.graph.nodes) or head.parked:
            return self.status(head, run_id)
        return self.drive(run_id, head)
