"""CrewAI Flows at a pinned release (``crewai@1.15``), stock and LLM-free, inside their own environment.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  Imported as ``driftlab_frameworks.crewai``: ``import crewai``
here is the framework (the folder is never on ``sys.path``).  What the framework
does is left to it, through its documented Flow API (``crewai.flow.flow``:
``Flow``, ``@start``, ``@listen``; ``crewai.flow.persistence``: ``@persist``,
``SQLiteFlowPersistence``; ``crewai.flow.human_feedback.human_feedback`` with an
async ``HumanFeedbackProvider``; ``Flow.from_pending`` / ``Flow.resume``;
``Flow.kickoff(inputs={"id": ...})``):

- one Flow method per graph node, named after it (``@start`` for the first,
  ``@listen(<previous>)`` for the others), each a plain method whose body is the
  protocol's ``run_node`` on the flow's dict state (the lab's keys beside
  CrewAI's ``id`` = the lab's run id);
- persistence: CrewAI's own class-level ``@persist`` with its SQLite backend,
  ``SQLiteFlowPersistence`` on ``<location>/<ns>crewai.sqlite`` (a subclass that
  only adds the ``during_checkpoint_write`` point): one ``flow_states`` row per
  method that completed (the state as the method left it) and a
  ``pending_feedback`` row while the flow waits for its human.  SQLite only;
  ``CREWAI_STORAGE_DIR`` (set per backend before a flow is built) keeps the
  rest of what CrewAI writes (the auto-created memory's LanceDB folder) under
  the cell's folder too;
- the human decision is CrewAI's documented async human-in-the-loop:
  ``@human_feedback`` reviews a method's output *after* it ran, so the interrupt
  node is parked by a method of its own just before it (``<node>__ask``,
  ``@listen`` on the previous node, ``@human_feedback(provider=...)``, returning
  the interrupt payload) whose provider raises ``HumanFeedbackPending``: kickoff
  returns it and CrewAI saves the pending feedback with the state.  The interrupt
  node listens to the ask method and runs ``run_node`` with
  ``HumanFeedbackResult.feedback``;
- ``start`` = ``kickoff(inputs={"id": run, **initial state})``; ``resume`` =
  ``Flow.from_pending(run, persistence)`` then ``resume(value)`` in a fresh
  process (``from_pending``'s ``ValueError`` "No pending feedback found" is
  CrewAI's refusal); ``recover`` (a new process after a SIGKILL, as a user
  would) = nothing to run when the flow waits for its human (a pending feedback
  row: only ``resume`` with the human's value continues it) or when its newest
  row is the last node's; else ``kickoff(inputs={"id": run})``, the documented
  restore of a persisted flow: CrewAI loads the newest state and runs the flow
  from its start method (the SQLite persistence records no completed methods).
  No fork, replay, update or resume by id (the env's ``not_applicable``).

The store is read (``checkpoints``, ``state``) from CrewAI's SQLite file as it
wrote it: one checkpoint per ``flow_states`` row, ``step`` = the index of the
row's method + 1 (an ask row: the interrupt's index; the row the pause wrote is
``parked``, the one ``resume`` writes when the ask completes is not),
``values`` = the lab's keys of the state, ``created`` = the row's timestamp, the id
``flow_states/<row id>``.

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (the method's body, after ``run_node``, before
it returns and CrewAI persists), ``during_checkpoint_write`` (inside
``SQLiteFlowPersistence``'s INSERT of the row that follows a node, before its
commit), ``parked`` (the call whose flow paused returned) and
``after_resume_consumed`` (the interrupt node's row is written; the next node's
method has begun, before ``run_node``).
"""
from __future__ import annotations

import os

# CrewAI's documented opt-outs, before crewai is imported: no telemetry, no tracing, no version check (the machine
# may have no network; nothing of this is part of what the lab measures)
for _var, _val in (("CREWAI_DISABLE_TELEMETRY", "true"), ("CREWAI_DISABLE_TRACKING", "true"),
                   ("OTEL_SDK_DISABLED", "true"), ("CREWAI_TRACING_ENABLED", "false"),
                   ("CREWAI_DISABLE_VERSION_CHECK", "true")):
    os.environ.setdefault(_var, _val)

import json  # noqa: E402
import sqlite3  # noqa: E402
import warnings  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from crewai.events.event_listener import event_listener  # noqa: E402
from crewai.flow.async_feedback import HumanFeedbackPending  # noqa: E402
from crewai.flow.flow import Flow, listen, start  # noqa: E402
from crewai.flow.human_feedback import human_feedback  # noqa: E402
from crewai.flow.persistence import SQLiteFlowPersistence, persist  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE,  # noqa: E402
                       REFUSED, Adapter)

# the flow's auto-created memory imports LanceDB, which the fork server imports once (WARM) before it forks each
# call: LanceDB resets its async runtime in the child and warns at every fork; nothing of it runs in the server
warnings.filterwarnings("ignore", message="lancedb fork support is experimental")
# CrewAI's console (Rich panels per flow, method and pause, state-loading notes) would flood the lab's terminal:
# its one Rich console, quiet; nothing CrewAI persists or decides goes through it
event_listener.formatter.console.quiet = True

FIELDS = ("input", "approval", "steps", "log")
ASK = "__ask"


def as_dict(state: Any) -> dict:
    return {k: state[k] for k in FIELDS if k in state}


class PointedPersistence(SQLiteFlowPersistence):
    """CrewAI's SQLite persistence with ``during_checkpoint_write`` inside the INSERT of the row after a node."""

    _rt: Any = PrivateAttr(default=None)

    def _save_state_sql(self, conn, flow_uuid, method_name, state_dict) -> None:
        super()._save_state_sql(conn, flow_uuid, method_name, state_dict)
        rt = self._rt
        if rt is not None and rt.unsaved is not None and rt.unsaved[0] == method_name:
            step, rt.unsaved = rt.unsaved[1], None
            rt.point(DURING_CHECKPOINT_WRITE, rt.run_id, step)  # the row inserted, not committed


class LabProvider:
    """An async human-feedback provider (CrewAI's ``HumanFeedbackProvider`` protocol): the human answers later."""

    def request_feedback(self, context, flow):
        raise HumanFeedbackPending(context=context, callback_info={"run": context.flow_id})


def _method_name(name: str) -> str:
    return name if not hasattr(Flow, name) else f"node_{name}"  # never shadow a Flow attribute


def _flow_class(rt: "CrewAIAdapter") -> type:
    """The lab's graph as a CrewAI Flow: one method per node, the ask method before the interrupt node."""
    g = rt.graph
    names = [_method_name(n) for n in g.names]
    ns: dict[str, Any] = {"__module__": __name__, "__qualname__": "LabFlow"}
    prev: str | None = None
    for step, node in enumerate(g.nodes):
        if node["interrupt"]:
            ask_name = names[step] + ASK
            ask = human_feedback(message="approve?", provider=LabProvider())(_ask(rt, ask_name))
            ns[ask_name] = start()(ask) if prev is None else listen(prev)(ask)
            prev = ask_name
        body = _node(rt, step, names[step])
        ns[names[step]] = start()(body) if prev is None else listen(prev)(body)
        prev = names[step]
    cls = type(Flow)("LabFlow", (Flow,), ns)
    return persist(rt.store)(cls)


def _ask(rt: "CrewAIAdapter", name: str):
    """The method that parks the interrupt node: its output is what the human reviews (the interrupt payload)."""

    def ask(self):
        return rt.interrupt_payload(self.state["id"])

    ask.__name__ = ask.__qualname__ = name
    return ask


def _node(rt: "CrewAIAdapter", step: int, name: str):
    """The method of the node at ``step`` (the interrupt node takes the ask method's ``HumanFeedbackResult``; a
    listener's only other parameter would receive its trigger's output, so the others take none)."""
    if rt.graph.nodes[step]["interrupt"]:
        def body(self, result):
            return _run(rt, self, step, resume=result.feedback)
    else:
        def body(self):
            return _run(rt, self, step)
    body.__name__ = body.__qualname__ = name
    return body


def _run(rt: "CrewAIAdapter", flow, step: int, resume: Any = None) -> dict:
    """The body of every node: the protocol's ``run_node`` on the flow's state, written back into it."""
    run_id = flow.state["id"]
    rt.run_id = run_id
    if step > 0 and rt.graph.nodes[step - 1]["interrupt"]:
        rt.point(AFTER_RESUME_CONSUMED, run_id, step - 1)
    new = rt.run_node(run_id, step, as_dict(flow.state), resume=resume)
    rt.point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step)
    for k, v in new.items():
        flow.state[k] = v
    rt.unsaved = (rt.methods[step], step)
    return new


class CrewAIAdapter(Adapter):
    """CrewAI Flows behind the durable-runtime interface (module docstring)."""

    name = "crewai"
    #: CrewAI's answers (issue 24 §1): feedback for a flow with none pending; a resume addressed to a state id
    ANSWERS = (Answer(REFUSED, r"No pending feedback found for flow_id", "CrewAI: ValueError from resume()"),
               Answer(REFUSED, r"CrewAI resumes a flow's pending feedback by flow id only",
                      "CrewAI: resume() takes the flow id"))
    #: the auto-created flow memory imports LanceDB (seconds): once in the server, not in every call's child
    WARM = {**Adapter.WARM, "sqlite": ("crewai.memory.storage.lancedb_storage",)}

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        root = Path(backend["location"])
        os.environ["CREWAI_STORAGE_DIR"] = str(root / f"{self.ns}crewai-storage")  # what else CrewAI writes
        self.db = root / f"{self.ns}crewai.sqlite"
        self.store = PointedPersistence(str(self.db))
        self.store._rt = self
        self.run_id, self.unsaved = "", None
        self.methods = [_method_name(n) for n in self.graph.names]
        self.ask = self.methods[self.graph.interrupt_step] + ASK
        self.flow_cls = _flow_class(self)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        self.run_id = run_id
        self.flow_cls().kickoff(inputs={"id": run_id, **self.graph.initial_state(input)})
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id): from_pending takes the flow id only
            return self.status(run_id, REFUSED, reason="CrewAI resumes a flow's pending feedback by flow id only")
        self.run_id = run_id
        try:
            flow = self.flow_cls.from_pending(run_id, self.store)
        except ValueError as exc:  # CrewAI's answer: "No pending feedback found for flow_id: ..."
            return self.status(run_id, REFUSED, reason=str(exc).splitlines()[0])
        flow.resume(str(value))
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        """A new process picking the flow up as a user would: nothing to run while it waits for its human or once
        its last node's row is written; else ``kickoff(inputs={"id": run})`` (CrewAI's restore of a persisted
        flow: its newest state, run from the start method)."""
        rows = self._rows(run_id)
        if not rows:
            return self.status(run_id, REFUSED, reason=f"no persisted state of flow {run_id!r}")
        head = self.state(run_id)
        if head["state"] == DONE or self._pending(run_id):
            return head
        self.run_id = run_id
        self.flow_cls().kickoff(inputs={"id": run_id})
        return self.answer(run_id)

    # ------------------------------------------------------------------ reading
    def _query(self, sql: str, args: tuple) -> list:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(str(self.db), timeout=30)
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:  # the tables are not there yet (no flow ever ran)
            if "no such table" not in str(exc):
                raise
            return []
        finally:
            conn.close()

    def _rows(self, run_id: str) -> list:
        return self._query("SELECT id, method_name, timestamp, state_json FROM flow_states WHERE flow_uuid = ? "
                           "ORDER BY id", (run_id,))

    def _pending(self, run_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM pending_feedback WHERE flow_uuid = ?", (run_id,)))

    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent, prev_method, n = [], None, None, len(self.graph.nodes)
        for rid, method, ts, state_json in self._rows(run_id):
            if method == self.ask:
                step, parked = self.graph.interrupt_step, prev_method != self.ask  # the pause's row, not resume's
            elif method in self.methods:
                step, parked = self.methods.index(method) + 1, False
            else:
                continue
            prev_method = method
            values = as_dict(json.loads(state_json))
            cid, nxt = f"flow_states/{rid}", self.graph.names[step] if step < n else None
            out.append(self.checkpoint(cid, run_id, step, nxt, values, parent, datetime.fromisoformat(ts).timestamp(),
                                       parked))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "persisted state")
