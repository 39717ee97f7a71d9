"""pydantic-graph at a pinned release (``pydantic-graph@1.107``), inside its own environment.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  1.107 is the last 1.x line: 2.x removed the ``BaseNode``
runner's state persistence.  What the framework does is left to it, through
its documented API (``pydantic_graph.graph.Graph``, ``BaseNode``, ``End``,
``FileStatePersistence``, ``Graph.initialize``, ``Graph.iter_from_persistence``,
``GraphRun.next``):

- one ``BaseNode`` dataclass per graph node, each returning the next node (the
  last returns ``End``); each node's body is the protocol's ``run_node`` on the
  graph run's state (``ctx.state``, mutated in place as pydantic-graph nodes
  do; the adapter reaches the node through ``ctx.deps``).  The state is the
  lab's dict (``graph.hints["state"] == "pydantic"``: a pydantic model);
- persistence: pydantic-graph's own ``FileStatePersistence``, one JSON file per
  run (``<location>/<ns>pg-<run>.json``), a snapshot before every node (status
  created -> pending -> running -> success) and an end snapshot.  SQLite only:
  the store is files;
- the human decision is the documented human-in-the-loop pattern: the driver
  stops as soon as the next node is the interrupt node (its snapshot is
  persisted ``created``: the run is parked), and the answer is the interrupt
  node's own field, set on the node restored from persistence before
  ``GraphRun.next`` runs it ("inspect or mutate the node before continuing"):
  the file keeps the node as it was persisted, the value reaches it through
  the state of the snapshot that follows;
- ``start`` = ``Graph.initialize`` then ``iter_from_persistence`` and ``next``
  until the interrupt; ``resume`` = ``iter_from_persistence`` in a fresh
  process, the restored interrupt node given the value, ``next`` until ``End``;
  whatever pydantic-graph raises there before any node ran (e.g.
  ``GraphRuntimeError: Unable to restore snapshot`` when no snapshot is
  ``created``: a run that ended, a racer that lost) is its refusal;
  ``recover`` = the same ``iter_from_persistence`` with no value (nothing is
  run when the persisted head is the end or the parked interrupt); a snapshot
  left ``running``/``success`` by a SIGKILL is not restorable: pydantic-graph's
  error is the recovery's answer (``failed``, its one line).  No fork, replay,
  update or resume by snapshot id: pydantic-graph has none (the env's
  ``not_applicable``).

The store is read (``checkpoints``, ``state``) from the JSON file as
pydantic-graph wrote it, without its type adapter, so that a file it can no
longer validate is still judged (a read that lands inside a racer's rewrite of
the file is repeated: :func:`read_snapshots`): one checkpoint per snapshot (``step`` = the
node's index, ``values`` = the state before it; the end snapshot: every node
done), ``created`` = the node's creation time (a field of each node: node
snapshots carry no time of their own until they run).

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (the node's body returned, before
pydantic-graph records it and persists the next snapshot),
``during_checkpoint_write`` (inside the persistence's ``snapshot_node`` /
``snapshot_end`` for the snapshot that follows a node: the node's own
snapshot already says ``success``, the next one is not yet written),
``parked`` (the start that parked returned) and ``after_resume_consumed``
(the snapshot after the interrupt is written, before ``next`` runs it).
"""
from __future__ import annotations

import asyncio
import json
import time
import warnings
from dataclasses import field, make_dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import pydantic
from pydantic import BaseModel, Field
from pydantic_graph.basenode import BaseNode, End, GraphRunContext
from pydantic_graph.exceptions import GraphRuntimeError
from pydantic_graph.graph import Graph as PGGraph
from pydantic_graph.persistence.file import FileStatePersistence

# pydantic's serializer warns on stderr when a snapshot holds a value its type rejects: the invalid-state cells'
# very point, recorded by the lab (CV); the warning would only flood the lab's terminal
warnings.filterwarnings("ignore", message="Pydantic serializer warnings")

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE, FAILED,
                       PARKED, REFUSED, Adapter)

FIELDS = ("input", "approval", "steps", "log")
#: what pydantic-graph raises as an answer: no snapshot to restore or a snapshot in the wrong status
#: (GraphRuntimeError, GraphNodeStatusError), a snapshot id it does not hold (LookupError), a persisted file it
#: cannot validate (pydantic.ValidationError)
RAISED = (GraphRuntimeError, LookupError, pydantic.ValidationError)


class LabStateModel(BaseModel):
    """The lab's state as a pydantic model (graph hint ``state = "pydantic"``)."""

    input: str = ""
    approval: Optional[str] = None
    steps: int = 0
    log: list[str] = Field(default_factory=list)


def as_dict(state: Any) -> dict:
    if isinstance(state, dict):
        return {k: state[k] for k in FIELDS if k in state}
    return {k: getattr(state, k) for k in FIELDS}


def _set(state: Any, new: dict) -> None:
    """Write the node's new state into the graph run's state object, in place (as pydantic-graph nodes do)."""
    if isinstance(state, dict):
        state.clear()
        state.update(new)
    else:
        for k, v in new.items():
            setattr(state, k, v)  # a plain model: no validation on assignment


class PointedPersistence(FileStatePersistence):
    """pydantic-graph's file persistence with ``during_checkpoint_write`` before the snapshot that follows a node."""

    rt: "PydanticGraphAdapter"

    def _point(self) -> None:
        if self.rt.unsaved is not None:
            step, self.rt.unsaved = self.rt.unsaved, None
            self.rt.point(DURING_CHECKPOINT_WRITE, self.rt.run_id, step)

    async def snapshot_node(self, state, next_node) -> None:
        self._point()
        await super().snapshot_node(state, next_node)

    async def snapshot_end(self, state, end) -> None:
        self._point()
        await super().snapshot_end(state, end)


def _node_classes(graph) -> list[type]:
    """One ``BaseNode`` dataclass per lab node (node id = the lab's node name), each returning the next."""
    classes: list[type] = []
    n = len(graph.nodes)
    for step in reversed(range(n)):
        node = graph.nodes[step]
        nxt = classes[0] if classes else None

        async def arun(self, ctx, _step=step, _next=nxt):
            return _run(self, ctx, _step, _next)

        arun.__annotations__ = {"ctx": GraphRunContext, "return": (nxt if nxt is not None else End[dict])}
        fields = [("created", float, field(default_factory=time.time))]
        if node["interrupt"]:
            fields.append(("answer", Any, field(default=None)))
        classes.insert(0, make_dataclass(node["name"], fields, bases=(BaseNode,), namespace={"run": arun}))
    return classes


def _run(node, ctx: GraphRunContext, step: int, nxt: type | None):
    """The body of every node: the protocol's ``run_node`` on the run's state, then the next node (or ``End``)."""
    rt: PydanticGraphAdapter = ctx.deps
    resume = getattr(node, "answer", None) if rt.graph.nodes[step]["interrupt"] else None
    rt.ran = True
    new = rt.run_node(rt.run_id, step, as_dict(ctx.state), resume=resume)
    rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
    _set(ctx.state, new)
    rt.unsaved = step
    return nxt() if nxt is not None else End(dict(new))


def read_snapshots(path: Path, settle: float = 2.0) -> list[dict]:
    """The snapshots in pydantic-graph's file (JSON, not validated), oldest first; none if there is no file.

    ``FileStatePersistence`` rewrites the whole file with ``Path.write_bytes`` (truncate, then write) under its own
    lock, which this reader does not take: a read that lands inside a concurrent racer's rewrite sees an empty or cut
    file.  That is a view no writer meant, so the read is repeated until the bytes parse; a file that still does not
    parse after ``settle`` seconds is not a rewrite in progress and its error stops the lab."""
    deadline = time.monotonic() + settle
    while True:
        try:
            return list(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return []
        except json.JSONDecodeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


class PydanticGraphAdapter(Adapter):
    """pydantic-graph 1.x behind the durable-runtime interface (module docstring)."""

    name = "pydantic-graph"
    #: pydantic-graph's answers (issue 24 §1): no snapshot it can restore or one in the wrong status
    #: (``GraphRuntimeError``, ``GraphNodeStatusError``: the file lock too), a snapshot id it does not hold
    #: (``LookupError``), a file it cannot validate (``ValidationError``), a head left 'running' by a kill
    ANSWERS = (*(Answer(s, r"(GraphRuntimeError|GraphNodeStatusError|LookupError|KeyError|\w*ValidationError): ",
                        "pydantic-graph: its persistence's exceptions") for s in (REFUSED, FAILED)),
               Answer(REFUSED, r"pydantic-graph resumes the next 'created' snapshot only",
                      "pydantic-graph: iter_from_persistence takes no snapshot id"),
               *(Answer(s, r"FileNotFoundError: .*\.pydantic-graph-persistence-lock'$",
                        "pydantic-graph: FileStatePersistence's lock file, removed under a concurrent holder (its "
                        "own code, racing; judged the framework's behaviour)") for s in (REFUSED, FAILED)),
               Answer(FAILED, r"the newest snapshot \(\w+\) is '\w+' and none is 'created'",
                      "pydantic-graph: nothing to restore after a kill inside a node"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.root = Path(backend["location"])
        self.pydantic = self.graph.hints.get("state") == "pydantic"
        self.classes = _node_classes(self.graph)
        self.pg = PGGraph(nodes=self.classes, name="driftlab-graph",
                          state_type=LabStateModel if self.pydantic else dict, run_end_type=dict)
        self.run_id, self.unsaved, self.ran = "", None, False
        self.loop = asyncio.new_event_loop()

    def _file(self, run_id: str) -> Path:
        return self.root / f"{self.ns}pg-{run_id}.json"

    def _persistence(self, run_id: str) -> PointedPersistence:
        self.run_id, self.unsaved, self.ran = run_id, None, False
        p = PointedPersistence(self._file(run_id))
        p.rt = self
        return p

    # ------------------------------------------------------------------ driving
    async def _drive(self, run, value: Any) -> None:
        """``GraphRun.next`` until ``End``, or until the next node is the interrupt with no value left (parked)."""
        node = run.next_node
        while not isinstance(node, End):
            step = self.graph.names.index(node.get_node_id())
            interrupt = self.graph.nodes[step]["interrupt"]
            if interrupt:
                if value is None:
                    return  # its snapshot is persisted 'created': the run waits for the human
                node.answer, value = value, None  # the restored node, mutated before next() runs it
            node = await run.next()
            if interrupt:
                self.point(AFTER_RESUME_CONSUMED, self.run_id, step)

    async def _from_persistence(self, run_id: str, value: Any) -> None:
        async with self.pg.iter_from_persistence(self._persistence(run_id), deps=self, infer_name=False) as run:
            await self._drive(run, value)

    async def _start(self, run_id: str, input: str) -> None:
        init = self.graph.initial_state(input)
        state = LabStateModel(**init) if self.pydantic else init
        await self.pg.initialize(self.classes[0](), self._persistence(run_id), state=state, infer_name=False)
        await self._from_persistence(run_id, None)

    def _answered(self, run_id: str, exc: BaseException, refused: bool) -> dict:
        """pydantic-graph's answer as a call's: refused before any node ran in this call (if ``refused``), else
        failed; its one line as the reason."""
        text = str(exc).splitlines()[0] if str(exc) else ""
        reason = f"{type(exc).__name__}: {text}"
        head = self.state(run_id)
        kind = REFUSED if refused and not self.ran else FAILED
        return self.status(run_id, kind, head["checkpoint"], head["node"], head["values"], reason)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._snapshots(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        try:
            self.loop.run_until_complete(self._start(run_id, input))
        except RAISED as exc:
            return self._answered(run_id, exc, refused=False)
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id): iter_from_persistence takes no snapshot id
            return self.status(run_id, REFUSED, reason="pydantic-graph resumes the next 'created' snapshot only")
        try:
            self.loop.run_until_complete(self._from_persistence(run_id, value))
        except RAISED as exc:
            return self._answered(run_id, exc, refused=True)
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        """A new process picking the run up from its file, as a user would: nothing to run when the persisted head
        is the end or the interrupt waiting for its human; else ``iter_from_persistence`` and ``next``."""
        snaps = self._snapshots(run_id)
        if not snaps:
            return self.status(run_id, REFUSED, reason=f"no snapshot of run {run_id!r}")
        head = snaps[-1]
        if head.get("kind") == "end" or (head.get("status") == "created"
                                         and self._step(head) == self.graph.interrupt_step):
            return self.state(run_id)
        try:
            self.loop.run_until_complete(self._from_persistence(run_id, None))
        except RAISED as exc:
            return self._answered(run_id, exc, refused=False)
        return self.answer(run_id)

    # ------------------------------------------------------------------ reading
    def _snapshots(self, run_id: str) -> list[dict]:
        """The run's snapshots as pydantic-graph wrote them (JSON, not validated), oldest first."""
        return read_snapshots(self._file(run_id))

    def _step(self, snap: dict) -> int:
        if snap.get("kind") == "end":
            return len(self.graph.nodes)
        # the node's id, or (a node pydantic-graph serialized without it: a state its schema rejects makes the
        # snapshot fall back to plain serialization) the prefix of the snapshot id, "<node_id>:<uuid>"
        return self.graph.names.index((snap.get("node") or {}).get("node_id") or snap["id"].split(":")[0])

    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent, n = [], None, len(self.graph.nodes)
        for snap in self._snapshots(run_id):
            step = self._step(snap)
            if snap.get("kind") == "end":
                created = datetime.fromisoformat(snap["ts"]).timestamp()
            else:
                created = float(snap["node"].get("created") or 0.0)
            out.append(self.checkpoint(snap["id"], run_id, step, self.graph.names[step] if step < n else None,
                                       as_dict(snap.get("state") or {}), parent, created,
                                       step < n and self.graph.nodes[step]["interrupt"]))
            parent = snap["id"]
        return out

    def state(self, run_id: str) -> dict:
        snaps = self._snapshots(run_id)
        if not snaps:
            return self.status(run_id, REFUSED, reason=f"no snapshot of run {run_id!r}")
        head = snaps[-1]
        step = self._step(head)
        values = as_dict(head.get("state") or {})
        if head.get("kind") == "end":
            return self.status(run_id, DONE, head["id"], None, values)
        name = self.graph.names[step]
        if head.get("status") in ("created", "pending"):
            return self.status(run_id, PARKED, head["id"], name, values)
        return self.status(run_id, FAILED, head["id"], name, values,
                           f"the newest snapshot ({name}) is '{head.get('status')}' and none is 'created': "
                           "pydantic-graph has nothing to restore")

    def close(self) -> None:
        self.loop.close()
        super().close()
