"""LlamaIndex Workflows at a pinned release, inside its own environment, in its two human-in-the-loop forms.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836); the paper's artifact profiled ``llama-index-workflows``
2.22.2 and found the two forms to behave differently, so each is a row:

- ``llamaindex[step-boundary]`` (``options.variant = "step-boundary"``): the human
  decision sits at a step boundary.  The step of ``prepare`` returns an
  ``InputRequiredEvent``; the step of the interrupt node takes the
  ``HumanResponseEvent``; ``act`` and ``notify`` follow, one step per node.
- ``llamaindex[wait-for-event]`` (``options.variant = "wait-for-event"``): one
  step runs ``prepare``, then waits inside itself with
  ``ctx.wait_for_event(HumanResponseEvent, waiter_event=InputRequiredEvent(...))``
  (the documented example's form), then runs the interrupt node with the
  response; ``act`` and ``notify`` follow.

LlamaIndex keeps a run in memory; persistence is the application's, through
``ctx.to_dict()`` / ``Context.from_dict(workflow, data)``, which is what this
adapter does, as the documentation's pattern: the handler's event stream is
read; on the ``InputRequiredEvent`` the context is saved (a row of the table
``llama_snapshots`` in ``<location>/<ns>llama.sqlite`` or PostgreSQL schema
``<ns>``) and the run is cancelled (the process can end); when the run ends,
its final context is saved too.  Those two snapshots are the run's
checkpoints: LlamaIndex writes none of its own between steps.

- ``start`` = ``workflow.run()`` until the park (or the end);
- ``resume`` = ``Context.from_dict`` of the run's newest snapshot (or the one
  ``checkpoint_id`` names), ``workflow.run(ctx=...)``, then
  ``ctx.send_event(HumanResponseEvent(response=value))``; a snapshot of a
  finished run is restored and run like any other (what LlamaIndex then does
  is measured);
- ``recover`` = the newest snapshot, as it is: a parked run restored with no
  response waits for one (LlamaIndex re-emits no ``InputRequiredEvent``), and
  nothing else is ever snapshotted, so there is nothing to run;
- ``fork`` = the snapshot copied to a new run (nothing runs).

The run id is the adapter's (the call's ``run_id``), never read back from the
restored context, so a fork's effects are its own.  Named points:
``before_node``/``after_effect`` (``run_node``), ``after_node_before_checkpoint``
(a node's step body returned), ``during_checkpoint_write`` (the snapshot is
taken, its INSERT not made) and ``parked`` (the parked snapshot is stored; the
call has not returned).  ``after_resume_consumed`` is not reachable: nothing
is persisted between the response and the next step (pyproject's
``not_applicable``).
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from workflows import Context, Workflow, step
from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent

from .protocol import (AFTER_NODE_BEFORE_CHECKPOINT, DONE, DURING_CHECKPOINT_WRITE, PARKED, PARKED_POINT, REFUSED,
                       Adapter, current)

RUN_TIMEOUT_S = 60



class NodeDone(Event):
    """The state after node ``step``; the next node's step takes it."""

    step: int
    state: dict


def _node(step_index: int, state: dict, resume: Any = None) -> dict:
    rt = current()
    new = rt.run_node(rt.run_id, step_index, state, resume=resume)
    rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step_index)
    return new


async def _initial(ctx: Context, ev: StartEvent) -> dict:
    """The run's input: the StartEvent's, kept in the context's store (a restored finished run starts again
    from a bare StartEvent: it then reads the input it kept)."""
    initial = ev.get("initial")
    if initial is None:
        initial = await ctx.store.get("initial")
    await ctx.store.set("initial", initial)
    return dict(initial)


class _Tail(Workflow):
    """The nodes after the interrupt: ``act`` then ``notify`` (one step per node, in the lab's graph order)."""

    @step
    async def after_interrupt(self, ev: NodeDone) -> NodeDone | StopEvent:
        nodes = current().graph.nodes
        nxt = ev.step + 1
        state = _node(nxt, ev.state)
        return StopEvent(result=state) if nxt + 1 >= len(nodes) else NodeDone(step=nxt, state=state)


class BoundaryWorkflow(_Tail):
    """The decision at a step boundary: InputRequiredEvent out of one step, HumanResponseEvent into the next."""

    @step
    async def before_interrupt(self, ctx: Context, ev: StartEvent) -> InputRequiredEvent:
        state = await _initial(ctx, ev)
        for i in range(current().graph.interrupt_step):
            state = _node(i, state)
        await ctx.store.set("state", state)
        return InputRequiredEvent(prefix="approve?")

    @step
    async def interrupt(self, ctx: Context, ev: HumanResponseEvent) -> NodeDone | StopEvent:
        i = current().graph.interrupt_step
        state = _node(i, await ctx.store.get("state"), ev.response)
        return NodeDone(step=i, state=state)


class WaitForEventWorkflow(_Tail):
    """The decision awaited inside a step, after that step's own work (``ctx.wait_for_event``)."""

    @step
    async def waiting(self, ctx: Context, ev: StartEvent) -> NodeDone | StopEvent:
        state = await _initial(ctx, ev)
        for i in range(current().graph.interrupt_step):
            state = _node(i, state)
        await ctx.store.set("state", state)
        response = await ctx.wait_for_event(HumanResponseEvent, waiter_event=InputRequiredEvent(prefix="approve?"),
                                            waiter_id="approve", timeout=None)
        i = current().graph.interrupt_step
        return NodeDone(step=i, state=_node(i, state, response.response))


VARIANTS = {"step-boundary": BoundaryWorkflow, "wait-for-event": WaitForEventWorkflow}

#: the snapshot table, per backend (only the key column's type differs)
_DDL = {
    "sqlite": """CREATE TABLE IF NOT EXISTS llama_snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, label TEXT NOT NULL, step INTEGER NOT NULL,
    values_json TEXT NOT NULL, ctx_json TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)""",
    "postgres": """CREATE TABLE IF NOT EXISTS llama_snapshots (
    seq BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, label TEXT NOT NULL, step INTEGER NOT NULL,
    values_json TEXT NOT NULL, ctx_json TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)""",
}


class LlamaIndexAdapter(Adapter):
    """LlamaIndex Workflows behind the durable-runtime interface (module docstring)."""

    name = "llamaindex"

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.workflow_cls = VARIANTS[self.options.get("variant", "step-boundary")]
        self.run_id = ""
        if backend["kind"] == "sqlite":
            path = Path(backend["location"]) / f"{self.ns}llama.sqlite"
            self.db = sqlite3.connect(str(path), isolation_level=None, timeout=30, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.mark = "?"
        else:
            import psycopg
            from psycopg import sql

            self.db = psycopg.connect(backend["location"], autocommit=True)
            self.db.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.ns)))
            self.db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.ns)))
            self.mark = "%s"

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def setup(self) -> None:
        self.db.execute(_DDL[self.backend["kind"]])

    # ------------------------------------------------------------------ snapshots (this adapter's store)
    def _save(self, label: str, step: int, values: dict, ctx: dict) -> None:
        self.point(DURING_CHECKPOINT_WRITE, self.run_id, max(step - 1, 0))
        self.db.execute(self._q("INSERT INTO llama_snapshots (run_id, label, step, values_json, ctx_json, created) "
                                "VALUES (?, ?, ?, ?, ?, ?)"),
                        (self.run_id, label, step, json.dumps(values), json.dumps(ctx), time.time()))

    def _rows(self, run_id: str) -> list[tuple]:
        return list(self.db.execute(self._q("SELECT seq, label, step, values_json, ctx_json, created FROM "
                                            "llama_snapshots WHERE run_id = ? ORDER BY seq"), (run_id,)).fetchall())

    def _snapshot(self, run_id: str, checkpoint_id: str | None = None) -> tuple | None:
        rows = self._rows(run_id)
        if checkpoint_id is not None:
            rows = [r for r in rows if f"{run_id}:{r[0]}" == checkpoint_id]
        return rows[-1] if rows else None

    # ------------------------------------------------------------------ running
    async def _drive(self, handler) -> None:
        """Read the event stream: park (save, cancel) at the InputRequiredEvent, or save the end."""
        async for ev in handler.stream_events():
            if isinstance(ev, InputRequiredEvent):
                state = await handler.ctx.store.get("state")
                self._save(PARKED, self.graph.interrupt_step, state, handler.ctx.to_dict())
                await handler.cancel_run()
                self.point(PARKED_POINT, self.run_id, self.graph.interrupt_step)
                return
        result = await handler
        self._save(DONE, len(self.graph.nodes), result, handler.ctx.to_dict())

    def _run(self, run_id: str, ctx_json: dict | None, response: Any = None, send: bool = False,
             initial: dict | None = None) -> dict:
        self.run_id = run_id
        workflow = self.workflow_cls(timeout=self.options.get("timeout_s", RUN_TIMEOUT_S))

        async def go():
            if ctx_json is None:
                handler = workflow.run(initial=initial)
            else:
                handler = workflow.run(ctx=Context.from_dict(workflow, ctx_json))
                if send:
                    handler.ctx.send_event(HumanResponseEvent(response=response))
            await self._drive(handler)

        asyncio.run(go())
        return self.state(run_id)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        return self._run(run_id, None, initial=self.graph.initial_state(input))

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        snap = self._snapshot(run_id, checkpoint_id)
        if snap is None:
            named = f"{checkpoint_id} " if checkpoint_id else ""
            return self.status(run_id, REFUSED, reason=f"no snapshot {named}of run {run_id!r}")
        return self._run(run_id, json.loads(snap[4]), value, send=True)

    def recover(self, run_id: str) -> dict:
        snap = self._snapshot(run_id)
        if snap is None:  # killed before its first snapshot: nothing of the run is durable
            return self.status(run_id, REFUSED, reason=f"no snapshot of run {run_id!r}")
        # the newest snapshot is the park (a run is only snapshotted there and at its end): restored with no
        # response it would wait for one, re-emitting nothing; what is durable is that parked run
        return self.state(run_id)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        snap = self._snapshot(run_id, checkpoint_id)
        if snap is None:
            return self.status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self._rows(new_run_id):
            return self.status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        self.run_id = new_run_id
        self._save(snap[1], snap[2], json.loads(snap[3]), json.loads(snap[4]))
        return self.state(new_run_id)

    # ------------------------------------------------------------------ reading
    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent = [], None
        for seq, label, step_, values, _ctx, created in self._rows(run_id):
            cid = f"{run_id}:{seq}"
            nxt = self.graph.names[step_] if step_ < len(self.graph.names) else None
            out.append(self.checkpoint(cid, run_id, step_, nxt, json.loads(values), parent, created, label == PARKED))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "snapshot")

    def close(self) -> None:
        try:
            self.db.close()
        except Exception:  # noqa: BLE001 - closing after the server went away
            pass
        super().close()
