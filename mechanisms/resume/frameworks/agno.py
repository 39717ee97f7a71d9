"""Agno at a pinned release (``agno@3.1``), LLM-free, inside its own environment.

Serves issue 29 (frameworks, round 2, under the harness of "Resume Means
Resume", arXiv 2608.03836).  Imported as ``driftlab_frameworks.agno``: ``import
agno`` here is the framework (the folder is never on ``sys.path``).  What Agno
does is left to it, through its documented human-in-the-loop API
(``agno.agent.Agent`` with ``db=SqliteDb(...)``, ``agno.tools.tool(
requires_confirmation=True)``, ``Agent.run``, ``Agent.get_last_run_output``,
``RunRequirement.confirm``, ``Agent.continue_run(run_id=..., requirements=...)``):

- no LLM, no network: the agent's model is :class:`ScriptedModel`, a subclass
  of Agno's ``Model`` whose response is a pure function of the messages it is
  handed: it calls the graph's next node as a tool (the node after the highest
  step a tool result reports), passing that result's state as the tool's
  ``state`` argument, with a deterministic call id (``call_<step>_<node>``),
  and answers with a text once every node ran.  Telemetry is off
  (``telemetry=False``);
- one tool per graph node, named after it; each tool's body is the protocol's
  ``run_node`` on the state in its arguments and returns ``{"step", "state",
  "at"}`` as json (Agno stores it as the tool execution's result in the run).
  The interrupt node's tool has ``requires_confirmation=True``: the model's
  call to it pauses the run (``RunStatus.paused``, a ``RunRequirement``).  The
  resume value reaches the tool as a run dependency
  (``continue_run(..., dependencies={"approval": value})``,
  ``run_context.dependencies``); every value is a confirmation (the lab's node
  semantics consume it; a "no" is a value, not ``reject``);
- persistence: Agno's ``SqliteDb`` on ``<location>/<ns>agno.sqlite``, or its
  ``PostgresDb`` on the DSN's server in schema ``<ns>`` (its ``agno_sessions``
  row per session, its ``agno_runs`` row per run, the run's messages, tool
  executions and requirements in it).  When it writes is the
  agent's ``checkpoint`` setting: the default (``"runs"``) writes a run at its
  terminal states only (paused, completed, error); ``"tool-batch"`` (the row
  ``agno[tool-batch]@3.1``, ``options.checkpoint``) also after each model turn's
  tool results, with status ``RUNNING`` (the tool a resume confirms runs
  before the model loop and is written only with the next turn's checkpoint);
- ``start`` = ``Agent.run(<initial state as json>, session_id=run)``;
  ``resume`` = the session's last run (``get_last_run_output``), its
  requirement for the interrupt tool confirmed (``RunRequirement.confirm``,
  which raises ``ValueError`` for a requirement that needs no confirmation any
  more: Agno's refusal of an answered confirmation) and
  ``continue_run(run_id=..., requirements=...)``; ``recover`` (a new process
  after a SIGKILL) = nothing to run when the stored run is completed or paused
  for its confirmation (only ``resume`` with the human's value continues it);
  else (a ``RUNNING`` row: a tool-batch checkpoint) ``continue_run(run_id=...)``
  with no requirements, Agno's documented mid-flight resume of a run whose
  loop never finished.  No fork, replay, update or resume by id (the env's
  ``not_applicable``).

The store is read (``checkpoints``, ``state``) from Agno's runs table as it
wrote it: the session's newest ``agno_runs`` row (a completed run continued
again is forked by Agno into a sibling row, the newest), one checkpoint per
stored tool execution of a node with a result (``step`` = the node's index + 1,
``values`` its state, ``created`` the time the tool returned, recorded in the
result) and one for a paused row's pending requirement (``parked``, at the
interrupt node, with the state its call carries, ``created`` the requirement's
own time); the id is ``<run id>/<tool call id>``.

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (a tool's body, after ``run_node``, before it
returns), ``during_checkpoint_write`` (the first commit of a transaction that
wrote the ``agno_runs`` row after a node: the row written, not committed),
``parked`` (the call whose run paused returned).  ``after_resume_consumed`` is
not reachable in either row (pyproject's ``not_applicable``): nothing is
written between the confirmed tool and the next tool.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("AGNO_TELEMETRY", "false")  # no telemetry call (the machine may have no network)

from agno.agent import Agent  # noqa: E402
from agno.db.postgres import PostgresDb  # noqa: E402
from agno.db.sqlite import SqliteDb  # noqa: E402
from agno.models.base import Model  # noqa: E402
from agno.models.response import ModelResponse  # noqa: E402
from agno.run import RunContext  # noqa: E402
from agno.tools import tool  # noqa: E402
from psycopg.conninfo import conninfo_to_dict  # noqa: E402
from sqlalchemy import column, create_engine, select, table  # noqa: E402
from sqlalchemy import event as sa_event  # noqa: E402
from sqlalchemy import inspect as sa_inspect  # noqa: E402

from .protocol import (AFTER_NODE_BEFORE_CHECKPOINT, DONE, DURING_CHECKPOINT_WRITE, REFUSED, Adapter,  # noqa: E402
                       Answer)

USER = "lab"
RUNS_TABLE = "agno_runs"


class ScriptedModel(Model):
    """A deterministic model: call the node after the highest step a tool result reported, or answer at the end."""

    def __init__(self, names: list[str]):
        super().__init__(id="driftlab-scripted", name="DriftlabScripted", provider="driftlab")
        self.names = list(names)

    def _next(self, messages) -> ModelResponse:
        done, state = -1, None
        for m in messages:
            if m.role == "user" and state is None and isinstance(m.content, str):
                state = m.content  # the first turn: the user message is the initial state
            if m.role != "tool" or not isinstance(m.content, str):
                continue
            try:
                result = json.loads(m.content)
            except ValueError:
                continue
            if isinstance(result, dict) and isinstance(result.get("step"), int) and result["step"] > done:
                done, state = result["step"], json.dumps(result["state"])
        n = done + 1
        response = ModelResponse(role="assistant")
        if n < len(self.names):
            response.tool_calls = [{"id": f"call_{n}_{self.names[n]}", "type": "function",
                                    "function": {"name": self.names[n], "arguments": json.dumps({"state": state})}}]
        else:
            response.content = "done"
        return response

    def invoke(self, messages, assistant_message, *args, **kwargs) -> ModelResponse:
        return self._next(messages)

    async def ainvoke(self, messages, assistant_message, *args, **kwargs) -> ModelResponse:
        return self._next(messages)

    def invoke_stream(self, *args, **kwargs):
        raise NotImplementedError("the lab runs the agent without streaming")

    def ainvoke_stream(self, *args, **kwargs):
        raise NotImplementedError("the lab runs the agent without streaming")

    def _parse_provider_response(self, response: Any, **kwargs) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


class AgnoAdapter(Adapter):
    """Agno behind the durable-runtime interface (module docstring)."""

    name = "agno"
    #: Agno's answers (issue 24 §1): a confirmation for a requirement that needs none any more; a run it will not
    #: continue; a run with no confirmation requirement to answer; a resume by id
    ANSWERS = (Answer(REFUSED, r"ValueError: This requirement does not require confirmation",
                      "Agno: RunRequirement.confirm() raises ValueError when the requirement needs no confirmation"),
               Answer(REFUSED, r"RunNotContinuableError: ",
                      "Agno: continue_run raises RunNotContinuableError for a cancelled run"),
               Answer(REFUSED, r"no requirement of the interrupt tool in run",
                      "Agno: a confirmation answers a paused run's RunRequirement; a run without one has none"),
               Answer(REFUSED, r"Agno continues a run by its run id only",
                      "Agno: continue_run takes a run id, never a past state's id"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        if backend["kind"] == "sqlite":
            self.db = SqliteDb(db_file=str(Path(backend["location"]) / f"{self.ns}agno.sqlite"))
            self.schema = None
        else:  # the DSN's server, Agno's tables in schema <ns> (Agno creates it; the lab drops it after the cell)
            self.schema = self.ns
            self.db = PostgresDb(db_engine=create_engine("postgresql+psycopg://",
                                                         connect_args=conninfo_to_dict(backend["location"])),
                                 db_schema=self.schema)
        self.run_id, self.unsaved, self.wrote_run = "", None, False
        self.interrupt = self.graph.names[self.graph.interrupt_step]
        self.agent = Agent(name="driftlab-graph", model=ScriptedModel(self.graph.names), db=self.db,
                           tools=[self._tool(i) for i in range(len(self.graph.nodes))],
                           checkpoint=self.options.get("checkpoint", "runs"), telemetry=False)
        sa_event.listen(self.db.db_engine, "after_cursor_execute", self._executed)
        sa_event.listen(self.db.db_engine, "commit", self._commit)

    def _tool(self, step: int):
        rt, node = self, self.graph.nodes[step]

        def body(state: str, run_context: RunContext) -> str:
            resume = (run_context.dependencies or {}).get("approval") if node["interrupt"] else None
            new = rt.run_node(rt.run_id, step, json.loads(state), resume=resume)
            rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
            rt.unsaved = step
            return json.dumps({"step": step, "state": new, "at": time.time()})

        body.__name__ = body.__qualname__ = node["name"]
        body.__doc__ = f"Run the node {node['name']} of the lab's graph on `state` (json); returns the new state."
        return tool(name=node["name"], requires_confirmation=node["interrupt"] or None)(body)

    # ------------------------------------------------------------------ the during_checkpoint_write point
    def _executed(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if self.unsaved is not None and RUNS_TABLE in statement and statement.lstrip().upper().startswith(
                ("INSERT", "UPDATE")):
            self.wrote_run = True

    def _commit(self, conn) -> None:
        if self.unsaved is not None and self.wrote_run:
            step, self.unsaved, self.wrote_run = self.unsaved, None, False
            self.point(DURING_CHECKPOINT_WRITE, self.run_id, step)  # the run's row written, not committed

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        self.run_id = run_id
        self.agent.run(json.dumps(self.graph.initial_state(input)), session_id=run_id, user_id=USER)
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id)
            return self.status(run_id, REFUSED, reason="Agno continues a run by its run id only")
        self.run_id = run_id
        run = self.agent.get_last_run_output(session_id=run_id) if self._rows(run_id) else None
        if run is None:
            return self.status(run_id, REFUSED, reason=f"no persisted state of run {run_id!r}")
        requirements = list(run.requirements or [])
        mine = [r for r in requirements
                if r.tool_execution is not None and r.tool_execution.tool_name == self.interrupt]
        if not mine:
            return self.status(run_id, REFUSED, reason=f"no requirement of the interrupt tool in run {run_id!r}")
        try:
            mine[-1].confirm()
        except ValueError as exc:  # Agno's answer: "This requirement does not require confirmation"
            return self.status(run_id, REFUSED, reason=f"ValueError: {str(exc).splitlines()[0]}")
        self.agent.continue_run(run_id=run.run_id, session_id=run_id, user_id=USER, requirements=requirements,
                                dependencies={"approval": value})
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        """A new process picking the run up as a user would: nothing to run when the stored run is completed or
        paused for its confirmation; else Agno's mid-flight resume (``continue_run(run_id=...)``)."""
        rows = self._rows(run_id)
        if not rows:
            return self.status(run_id, REFUSED, reason=f"no persisted state of run {run_id!r}")
        head = self.state(run_id)
        status = rows[-1][1]
        if head["state"] == DONE or status in ("COMPLETED", "PAUSED"):
            return head
        self.run_id = run_id
        self.agent.continue_run(run_id=rows[-1][0], session_id=run_id, user_id=USER)
        return self.answer(run_id)

    # ------------------------------------------------------------------ reading
    def _rows(self, run_id: str) -> list:
        """The session's rows of Agno's runs table (run id, status, run data), oldest first: read as stored."""
        engine = self.db.db_engine
        if not sa_inspect(engine).has_table(RUNS_TABLE, schema=self.schema):  # no run ever stored
            return []
        runs = table(RUNS_TABLE, column("run_id"), column("status"), column("run_data"), column("session_id"),
                     column("run_index"), column("created_at"), schema=self.schema)
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(
                select(runs.c.run_id, runs.c.status, runs.c.run_data).where(runs.c.session_id == run_id)
                .order_by(runs.c.run_index, runs.c.created_at))]

    def checkpoints(self, run_id: str) -> list[dict]:
        rows = self._rows(run_id)
        if not rows:
            return []
        rid, status, raw = rows[-1]
        data = json.loads(raw) if isinstance(raw, str) else (raw or {})
        out, parent, n = [], None, len(self.graph.nodes)
        for m in data.get("messages") or []:  # the run's tool results (a tool-batch row's ``tools`` holds the last
            name, result = m.get("tool_name"), m.get("content")  # turn's only; its messages hold every turn's)
            if m.get("role") != "tool" or name not in self.graph.names or not isinstance(result, str):
                continue
            try:
                r = json.loads(result)
            except ValueError:
                continue
            if not (isinstance(r, dict) and isinstance(r.get("step"), int)):
                continue
            step = r["step"] + 1
            cid = f"{rid}/{m.get('tool_call_id')}"
            out.append(self.checkpoint(cid, run_id, step, self.graph.names[step] if step < n else None, r["state"],
                                       parent, float(r["at"]), False))
            parent = cid
        if status == "PAUSED":
            for req in data.get("requirements") or []:
                te = req.get("tool_execution") or {}
                if te.get("tool_name") != self.interrupt or req.get("confirmation") is not None:
                    continue
                args = te.get("tool_args") or {}
                values = json.loads(args["state"]) if isinstance(args.get("state"), str) else {}
                cid = f"{rid}/{te.get('tool_call_id')}"
                out.append(self.checkpoint(cid, run_id, self.graph.interrupt_step, self.interrupt, values, parent,
                                           datetime.fromisoformat(req["created_at"]).timestamp(), True))
                parent = cid
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "persisted state")
