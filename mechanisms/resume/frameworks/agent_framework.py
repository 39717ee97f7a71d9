"""Microsoft Agent Framework workflows at a pinned release (``agent-framework@1.23``), inside their own environment.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  What the framework does is left to it, through its
documented workflow API (``agent_framework``: ``Executor``, ``@handler``,
``@response_handler``, ``WorkflowBuilder``, ``FileCheckpointStorage``):

- one executor per graph node, edges in order; each handler's body is the
  protocol's ``run_node`` and sends the new state to the next executor (the
  last yields it as the workflow's output).  The interrupt node's executor
  parks with ``ctx.request_info(request, str)``; its ``@response_handler``
  runs the node with the response;
- checkpoints: the framework's own, written at every superstep boundary into
  a ``FileCheckpointStorage`` folder per run (``<location>/<ns>maf/<run>/``:
  a checkpoint belongs to a workflow definition, not an instance, so the
  folder is what makes it a run's).  SQLite only: the storage is files;
- ``start`` = ``workflow.run(initial_state)``; ``resume`` =
  ``workflow.run(responses={request_id: value}, checkpoint_id=...)`` in a
  fresh process, on the run's newest checkpoint (or the one ``checkpoint_id``
  names), with the request id its pending request carries (the newest
  pending one of the run when the checkpoint has none, as a caller holding it
  would send); ``recover`` = ``workflow.run(checkpoint_id=newest)``;
  ``replay`` = ``workflow.run(checkpoint_id=past)`` on the same run;
  ``fork`` = the checkpoint saved into a new run's folder (nothing runs).

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (a handler returned), ``during_checkpoint_write``
(inside the storage's ``save``, before the file is written, for the checkpoint
that follows a node), ``parked`` (the run that parked returned) and
``after_resume_consumed`` (the node after the interrupt is about to start; the
superstep boundary before it wrote a checkpoint).
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_framework import (Executor, FileCheckpointStorage, WorkflowBuilder, WorkflowContext, handler,
                             response_handler)

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE, REFUSED,
                       Adapter)

WORKFLOW = "driftlab-graph"
#: FileCheckpointStorage warns on stderr for every checkpoint file it cannot read (after a power loss: an emptied
#: file) and skips it; what the framework then answers (the run gone, or back at an older checkpoint) is the cell's
#: recorded outcome, so the warning would only reach the user's terminal
logging.getLogger("agent_framework._workflows._checkpoint").setLevel(logging.ERROR)


class NodeExecutor(Executor):
    """One graph node: run it on the incoming state, pass the new state on (or yield it at the end)."""

    def __init__(self, rt: "AgentFrameworkAdapter", step: int):
        super().__init__(id=rt.graph.names[step])
        self.rt, self.step = rt, step

    @handler
    async def on_state(self, state: dict, ctx: WorkflowContext[dict, dict]) -> None:
        rt = self.rt
        if self.step > 0 and rt.graph.nodes[self.step - 1]["interrupt"]:
            rt.point(AFTER_RESUME_CONSUMED, rt.run_id, self.step - 1)
        if rt.graph.nodes[self.step]["interrupt"]:
            await ctx.request_info({"state": state, **rt.interrupt_payload(rt.run_id)}, str)
            return
        await self._done(rt.run_node(rt.run_id, self.step, state), ctx)

    @response_handler
    async def on_response(self, original_request: dict, response: str, ctx: WorkflowContext[dict, dict]) -> None:
        rt = self.rt
        await self._done(rt.run_node(rt.run_id, self.step, original_request["state"], resume=response), ctx)

    async def _done(self, new: dict, ctx) -> None:
        self.rt.point(AFTER_NODE_BEFORE_CHECKPOINT, self.rt.run_id, self.step)
        self.rt.unsaved = self.step
        if self.step + 1 < len(self.rt.graph.nodes):
            await ctx.send_message(new)
        else:
            await ctx.yield_output(new)
        ctx.set_state("driftlab", new)  # the lab's state, committed into the superstep's checkpoint


class PointedStorage(FileCheckpointStorage):
    """The framework's file storage with the ``during_checkpoint_write`` point before a node's checkpoint is saved."""

    def __init__(self, path: str, rt: "AgentFrameworkAdapter"):
        super().__init__(path)
        self.rt = rt

    async def save(self, checkpoint):
        if self.rt.unsaved is not None:
            step, self.rt.unsaved = self.rt.unsaved, None
            self.rt.point(DURING_CHECKPOINT_WRITE, self.rt.run_id, step)
        return await super().save(checkpoint)


class AgentFrameworkAdapter(Adapter):
    """Microsoft Agent Framework behind the durable-runtime interface (module docstring)."""

    name = "agent-framework"
    #: Agent Framework's answers (issue 24 §1): responses sent with no request pending
    ANSWERS = (Answer(REFUSED, r"No pending requests", "Agent Framework: RuntimeError 'No pending requests found'"),
               Answer(REFUSED, r"the run never asked for a response", "the contract: a resume of a run never parked"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.root = Path(backend["location"]) / f"{self.ns}maf"
        self.run_id, self.unsaved = "", None
        self.loop = asyncio.new_event_loop()

    def _storage(self, run_id: str) -> PointedStorage:
        folder = self.root / run_id
        folder.mkdir(parents=True, exist_ok=True)
        return PointedStorage(str(folder), self)

    def _workflow(self, run_id: str):
        self.run_id = run_id
        storage = self._storage(run_id)
        nodes = [NodeExecutor(self, i) for i in range(len(self.graph.nodes))]
        builder = WorkflowBuilder(start_executor=nodes[0], checkpoint_storage=storage, name=WORKFLOW)
        for a, b in zip(nodes, nodes[1:]):
            builder = builder.add_edge(a, b)
        return builder.build(), storage

    def _cps(self, run_id: str) -> list:
        """The run's checkpoints, oldest first (the lineage order: timestamps, then the chain)."""
        if not (self.root / run_id).is_dir():
            return []
        cps = self.loop.run_until_complete(self._storage(run_id).list_checkpoints(workflow_name=WORKFLOW))
        return sorted(cps, key=lambda c: c.timestamp)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._cps(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        workflow, _ = self._workflow(run_id)
        self.loop.run_until_complete(workflow.run(self.graph.initial_state(input)))
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        cps = self._cps(run_id)
        target = next((c for c in cps if c.checkpoint_id == checkpoint_id), None) if checkpoint_id else \
            (cps[-1] if cps else None)
        if target is None:
            named = f"{checkpoint_id} " if checkpoint_id else ""
            return self.status(run_id, REFUSED, reason=f"no checkpoint {named}of run {run_id!r}")
        pending = target.pending_request_info_events or next(
            (c.pending_request_info_events for c in reversed(cps) if c.pending_request_info_events), {})
        if not pending:
            return self.status(run_id, REFUSED, reason="the run never asked for a response (no request id to answer)")
        workflow, _ = self._workflow(run_id)
        try:
            self.loop.run_until_complete(workflow.run(responses={rid: value for rid in pending},
                                                      checkpoint_id=target.checkpoint_id))
        except RuntimeError as exc:  # the framework's answer to a response with nothing pending
            if "No pending requests" not in str(exc):
                raise
            return self.status(run_id, REFUSED, reason=str(exc).splitlines()[0])
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        cps = self._cps(run_id)
        if not cps:
            return self.status(run_id, REFUSED, reason=f"no checkpoint of run {run_id!r}")
        head = self.state(run_id)
        if head["state"] == DONE:
            return head
        workflow, _ = self._workflow(run_id)
        self.loop.run_until_complete(workflow.run(checkpoint_id=cps[-1].checkpoint_id))
        return self.answer(run_id)

    def replay(self, run_id: str, checkpoint_id: str) -> dict:
        """The framework's own re-run from a past checkpoint of the run: ``workflow.run(checkpoint_id=...)``."""
        if not any(c.checkpoint_id == checkpoint_id for c in self._cps(run_id)):
            return self.status(run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        workflow, _ = self._workflow(run_id)
        self.loop.run_until_complete(workflow.run(checkpoint_id=checkpoint_id))
        return self.answer(run_id)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        src = next((c for c in self._cps(run_id) if c.checkpoint_id == checkpoint_id), None)
        if src is None:
            return self.status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self._cps(new_run_id):
            return self.status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        self.run_id = new_run_id
        self.loop.run_until_complete(self._storage(new_run_id).save(src))
        return self.state(new_run_id)

    # ------------------------------------------------------------------ reading
    def _step(self, cp) -> tuple[int, dict]:
        """Nodes completed at this checkpoint, and the lab state it holds."""
        values = (cp.state or {}).get("driftlab") or {}
        if cp.pending_request_info_events:
            req = next(iter(cp.pending_request_info_events.values()))
            return self.graph.interrupt_step, dict(getattr(req, "data", {}).get("state", values))
        steps = values.get("steps")
        if not isinstance(steps, int):  # a schema-invalid state: count the nodes its log records
            steps = len(values.get("log") or ())
        return steps, values

    def checkpoints(self, run_id: str) -> list[dict]:
        out = []
        for cp in self._cps(run_id):
            step, values = self._step(cp)
            if not values:  # the input checkpoint, before any node ran (the start message in flight)
                continue
            nxt = self.graph.names[step] if step < len(self.graph.names) else None
            created = datetime.fromisoformat(cp.timestamp).timestamp() if cp.timestamp else 0.0
            out.append(self.checkpoint(cp.checkpoint_id, run_id, step, nxt, values, cp.previous_checkpoint_id,
                                       created, bool(cp.pending_request_info_events)))
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "checkpoint")

    def close(self) -> None:
        self.loop.close()
        super().close()
