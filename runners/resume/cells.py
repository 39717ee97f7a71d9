"""Play one fault-matrix cell on one runtime and write its resume history.

Serves the paper's fault matrix (arXiv 2608.03836: crash points x operations,
plus the second-resume, fork, validity and double-recovery cells).  A cell is
data (``scenarios/resume/cell_*.toml``): a literal list of steps that each of
its replicas performs.  :func:`play` interprets the steps through an executor
(:class:`runners.resume.procs.ForkedExecutor` for real processes and real
SIGKILL; the in-process one for the hypothesis machine), appends every call
to the history, and answers a killed call the way an operator would: recover
the run in a fresh process (and, if it is still parked after a killed
resume, send the resume again).  :func:`finish` then reads the stores — every
run's checkpoints through the runtime's ``checkpoints``, the effect ledger
and its trace — into the same history, which the checkers judge.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from runners.plugins import call_plugin, expect
from runners.resume.procs import CallResult, build
from scenarios.resume.loader import FaultCell
from vocabulary import INDETERMINATE, History, Operation
from vocabulary.resume import (CHECKPOINT, EFFECT, FAMILY, FORK, PARKED, RECOVER, REPLAY, RESUME, START, STORES_READ,
                               TRACE, UPDATE, Backend, Checkpoint, GraphSpec)


@dataclass
class Recorder:
    """Collects a history's operations (calls now; the stores at :func:`finish`)."""

    graph: GraphSpec
    meta: dict[str, Any] = field(default_factory=dict)
    ops: list[Operation] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    kills: list[tuple[int, int]] = field(default_factory=list)
    counter: int = 0

    def label(self, run: str, call: str) -> str:
        self.counter += 1
        return f"{run}/{call}#{self.counter}"

    def add(self, actor: str, name: str, status: str, start: float | None, end: float | None, value: dict) -> Operation:
        op = Operation(len(self.ops), actor, name, status, start, end, value)
        self.ops.append(op)
        return op

    def record(self, actor: str, call: str, res: CallResult, value: dict) -> Operation:
        value = dict(value, pid=res.pid)
        if res.result is not None:
            value.update(state=res.result.state, reason=res.result.reason, values=res.result.values,
                         head=res.result.checkpoint_id)
        if res.note:
            value["note"] = res.note
        if res.killed:
            value["killed_by"] = 9
        return self.add(actor, call, res.status, res.start, res.end, value)

    def history(self) -> History:
        return History(FAMILY, tuple(self.ops), {**self.meta, "graph": self.graph.to_dict()})


def play(cell: FaultCell, executor, rec: Recorder, prefix: str, group: str) -> None:
    """Run the cell's steps once (one replica) with run ids ``<prefix>-<run>``."""
    parked: dict[str, str] = {}  # run -> its parked checkpoint id
    ordinals: dict[str, int] = {}

    def run_id(name: str) -> str:
        rid = f"{prefix}-{name}"
        if rid not in rec.runs:
            rec.runs.append(rid)
        return rid

    def do(call: str, rid: str, args: dict, crash=None, extra: dict | None = None) -> CallResult:
        label = rec.label(rid, call)
        res = executor.call(call, args, label, crash)
        value = {"run": rid, "op": label, "group": group, **(extra or {})}
        if call == RECOVER:
            ordinals[rid] = ordinals.get(rid, 0) + 1
            value["ordinal"] = ordinals[rid]
        rec.record("driver", call, res, value)
        if res.killed:
            rec.kills.append((res.pid, -9))
        if res.result is not None and res.result.state == PARKED and res.result.checkpoint_id:
            parked.setdefault(rid, res.result.checkpoint_id)
        return res

    for step in cell.steps:
        rid = run_id(step.run)
        crash = (step.crash, step.node) if step.crash else None
        if step.call == START:
            res = do(START, rid, {"run_id": rid, "input": f"order-{group}"}, crash)
        elif step.call == RESUME:
            args = {"run_id": rid, "value": step.value}
            extra = {"resume": step.value}
            if step.at == "parked":
                args["checkpoint_id"] = parked.get(rid)
                extra["checkpoint"] = parked.get(rid)
            res = do(RESUME, rid, args, crash, extra)
        elif step.call == FORK:
            new = run_id(step.new_run)
            res = do(FORK, new, {"run_id": rid, "checkpoint_id": parked.get(rid), "new_run_id": new}, crash,
                     {"from_run": rid, "from_checkpoint": parked.get(rid)})
            if res.result is not None and res.result.checkpoint_id and res.result.state == PARKED:
                parked.setdefault(new, res.result.checkpoint_id)
        elif step.call == REPLAY:  # a framework's own re-run of the thread from a past checkpoint (issue 14)
            res = do(REPLAY, rid, {"run_id": rid, "checkpoint_id": parked.get(rid)}, crash,
                     {"checkpoint": parked.get(rid)})
        elif step.call == UPDATE:  # an external update of the state (issue 14)
            res = do(UPDATE, rid, {"run_id": rid, "values": {step.key: step.value}}, crash,
                     {"update": {step.key: step.value}})
        else:
            res = do(RECOVER, rid, {"run_id": rid}, crash)
        if res.status == INDETERMINATE:  # the call's process died: recover in a fresh process
            rec_res = do(RECOVER, rid, {"run_id": rid})
            if step.call == RESUME and rec_res.result is not None and rec_res.result.state == PARKED:
                do(RESUME, rid, {"run_id": rid, "value": step.value}, None, {"resume": step.value, "retry": True})


def finish(rec: Recorder, runtime: str, backend: Backend, graph: GraphSpec) -> History:
    """Append the stores (checkpoints of every run, the ledger's effects and trace) to the history."""
    rt = call_plugin(runtime, "its constructor", build, runtime, backend, graph)
    try:
        now = time.time()
        for rid in rec.runs:
            cps = call_plugin(runtime, "checkpoints", rt.checkpoints, rid, returns=(list, tuple))
            for cp in cps:
                expect(runtime, "checkpoints", cp, Checkpoint)
                rec.add("store", CHECKPOINT, "ok", now, now, cp.to_dict())
        for e in rt.ledger.effects():
            rec.add("ledger", EFFECT, "ok", e.at, e.at, e.to_dict())
        for t in rt.ledger.traces():
            rec.add("ledger", TRACE, "ok", t.at, t.at, t.to_dict())
        rec.meta[STORES_READ] = True  # an execution with no entries left nothing durable (analysis/resume/checkers)
    finally:
        rt.close()
    return rec.history()


def setup_backend(runtime: str, backend: Backend, graph: GraphSpec) -> None:
    """Create the stores' tables once, in this process, and close the connections before any fork."""
    rt = call_plugin(runtime, "its constructor", build, runtime, backend, graph)
    try:
        call_plugin(runtime, "setup", rt.setup)
    finally:
        rt.close()
