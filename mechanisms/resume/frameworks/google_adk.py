"""Google's Agent Development Kit at a pinned release (``google-adk@2.13``), LLM-free, inside its own environment.

Serves issue 29 (frameworks, round 2, under the harness of "Resume Means
Resume", arXiv 2608.03836).  Imported as ``driftlab_frameworks.google_adk``.
What ADK does is left to it, through its documented API (``google.adk``:
``apps.App`` with ``ResumabilityConfig(is_resumable=True)``,
``agents.LlmAgent``, ``tools.FunctionTool(require_confirmation=True)``,
``runners.Runner.run_async``, ``sessions.DatabaseSessionService``):

- no LLM, no network: the agent's model is :class:`ScriptedLlm`, a ``BaseLlm``
  subclass whose response is a pure function of the request's contents: it
  calls the graph's next node as a tool (the node after the highest step a
  lab tool's function response reports), with a deterministic call id
  (``call_<step>_<node>``), and answers with a text once every node ran;
- one ``FunctionTool`` per graph node, named after it; each tool's body is the
  protocol's ``run_node`` on the lab's state, kept in the ADK session state
  under ``lab`` (``tool_context.state``: ADK writes it as the state delta of
  the tool's function-response event, in the same row).  The interrupt node's
  tool has ``require_confirmation=True``: ADK answers the model's call to it
  with an ``adk_request_confirmation`` long-running call and the resumable
  invocation pauses (ADK's tool confirmation is the human decision);
- persistence: ADK's ``DatabaseSessionService`` on SQLite
  (``sqlite+aiosqlite:///<location>/<ns>adk.sqlite``) or PostgreSQL
  (``postgresql+psycopg``, the DSN's server, schema ``<ns>``; there ADK locks
  the session's row (``SELECT ... FOR UPDATE``) for its stale-session check,
  which it does on MySQL and PostgreSQL only): one ``events`` row per
  event (the user's message, each model call, each function response with its
  state delta, the confirmation request), the session's state beside them;
- ``start`` = ``create_session(state={"lab": initial})`` then ``run_async``
  with the start message; ``resume`` = the session read, its newest
  ``adk_request_confirmation`` call answered with a ``FunctionResponse`` of that
  id (``ToolConfirmation(confirmed=True, payload={"value": value})``, ADK's
  documented confirmation answer) through ``run_async``: ADK resolves the
  paused invocation from the response id, runs the confirmed tool with
  ``tool_context.tool_confirmation`` and goes on.  A session without any
  confirmation call has nothing to answer (refused).  ``recover`` (a new
  process after a SIGKILL) = nothing to run when the run is done or waits for
  its confirmation; else ``run_async(invocation_id=<the session's newest
  invocation>)``, ADK's documented resume of an invocation "paused or failed
  midway" (``ResumabilityConfig``: "we only guarantee an at-least-once
  behavior once resumed").  No fork, replay, update or resume by id (the env's
  ``not_applicable``).

The store is read (``checkpoints``, ``state``) through the service's own
``get_session``: one checkpoint per lab tool's function-response event
(``step`` = its node's index + 1, ``values`` = the ``lab`` state its delta
wrote) and one per confirmation request (``parked``, at the interrupt node,
with the state before it); the id is ADK's event id, ``created`` its timestamp.

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (a tool's body, after ``run_node``, before it
returns and ADK appends its response event), ``during_checkpoint_write``
(SQLAlchemy's ``after_flush`` of the session service's transaction that inserts
that response event: the row is written, not committed), ``parked`` (the call
whose invocation paused returned) and ``after_resume_consumed`` (the confirmed
tool's response event is written; the next tool has begun, before
``run_node``).
"""
from __future__ import annotations

import asyncio
import logging
import os
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("OTEL_SDK_DISABLED", "true")  # no telemetry exporter (nothing the lab measures)
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")  # ResumabilityConfig is marked experimental

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App, ResumabilityConfig  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import DatabaseSessionService  # noqa: E402
from google.adk.sessions.schemas.v1 import StorageEvent  # noqa: E402
from google.adk.tools import FunctionTool, ToolContext  # noqa: E402
from google.genai import types  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict  # noqa: E402
from sqlalchemy import event as sa_event  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402
from sqlalchemy.orm import Session as SaSession  # noqa: E402

from .protocol import (AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE,  # noqa: E402
                       FAILED, REFUSED, Adapter, Answer, current)

logging.getLogger("google_adk").setLevel(logging.ERROR)  # "Skipping missing token usage metadata" per model turn

APP, USER = "driftlab", "lab"
CONFIRM = "adk_request_confirmation"
START = "Run the graph."


def _parts(ev) -> list:
    return list(ev.content.parts or []) if ev.content is not None else []


class ScriptedLlm(BaseLlm):
    """A deterministic model: call the node after the highest step a lab tool reported, or answer at the end."""

    model: str = "driftlab-scripted"
    names: list[str] = []

    async def generate_content_async(self, llm_request, stream: bool = False):
        done = -1
        for content in llm_request.contents or []:
            for part in content.parts or []:
                fr = part.function_response
                if fr is not None and fr.name in self.names and isinstance(fr.response, dict) \
                        and isinstance(fr.response.get("step"), int):
                    done = max(done, fr.response["step"])
        n = done + 1
        if n < len(self.names):
            part = types.Part(function_call=types.FunctionCall(name=self.names[n], args={},
                                                               id=f"call_{n}_{self.names[n]}"))
        else:
            part = types.Part(text="done")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _after_flush(session, flush_context) -> None:
    """``during_checkpoint_write``: the response event of the node just run is inserted, not committed."""
    rt = current()
    if not isinstance(rt, GoogleADKAdapter) or rt.unsaved is None:
        return
    if any(isinstance(obj, StorageEvent) for obj in session.new):
        step, rt.unsaved = rt.unsaved, None
        rt.point(DURING_CHECKPOINT_WRITE, rt.run_id, step)


sa_event.listen(SaSession, "after_flush", _after_flush)


class GoogleADKAdapter(Adapter):
    """Google ADK behind the durable-runtime interface (module docstring)."""

    name = "google-adk"
    #: ADK's answers (issue 24 §1): a session write that lost ADK's optimistic concurrency check; a resume by id;
    #: a session with no confirmation call to answer
    ANSWERS = (*(Answer(state, r"StaleSessionError: ",
                        "ADK: DatabaseSessionService.append_event raises StaleSessionError when a session write "
                        "loses an optimistic concurrency race (errors/_stale_session_error.py)")
                 for state in (REFUSED, FAILED)),
               Answer(REFUSED, r"ADK resumes a paused invocation by its confirmation call id only",
                      "ADK: a resume is a FunctionResponse to the adk_request_confirmation call, never a row id"),
               Answer(REFUSED, r"no adk_request_confirmation call in session",
                      "ADK: a tool confirmation answers the session's adk_request_confirmation call"))
    #: the async SQLite driver and ADK's v1 schema, imported lazily by the first call: once in the server
    WARM = {**Adapter.WARM, "sqlite": ("aiosqlite", "sqlalchemy.dialects.sqlite.aiosqlite"),
            "postgres": ("psycopg", "sqlalchemy.dialects.postgresql.psycopg")}

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.loop = asyncio.new_event_loop()
        self.run_id, self.unsaved = "", None
        if backend["kind"] == "sqlite":
            db = Path(backend["location"]) / f"{self.ns}adk.sqlite"
            self.service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{db}")
        else:  # the DSN's server, ADK's tables in schema <ns> (created by setup; the lab drops it after the cell)
            engine = create_async_engine("postgresql+psycopg://", connect_args=conninfo_to_dict(backend["location"]))
            sa_event.listen(engine.sync_engine, "connect", self._search_path)
            self.service = DatabaseSessionService(db_engine=engine)
        agent = LlmAgent(name="driftlab_graph", model=ScriptedLlm(names=list(self.graph.names)),
                         instruction="Run the graph's nodes in order.",
                         tools=[self._tool(i) for i in range(len(self.graph.nodes))])
        self.app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
        self.runner = Runner(app=self.app, session_service=self.service)

    def _search_path(self, dbapi_conn, _record) -> None:
        """Each new PostgreSQL connection's search path: ADK's tables in schema ``<ns>`` (the name an identifier,
        composed by psycopg, never formatted into the statement)."""
        cur = dbapi_conn.cursor()
        try:
            cur.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.ns)))
        finally:
            cur.close()
        dbapi_conn.commit()

    def _tool(self, step: int) -> FunctionTool:
        rt, node = self, self.graph.nodes[step]

        async def body(tool_context: ToolContext) -> dict:
            if step > 0 and rt.graph.nodes[step - 1]["interrupt"]:
                rt.point(AFTER_RESUME_CONSUMED, rt.run_id, step - 1)
            resume = None
            if node["interrupt"]:
                confirmation = tool_context.tool_confirmation
                payload = confirmation.payload if confirmation is not None else None
                resume = payload.get("value") if isinstance(payload, dict) else payload
            new = rt.run_node(rt.run_id, step, dict(tool_context.state.get("lab") or {}), resume=resume)
            rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
            tool_context.state["lab"] = new
            rt.unsaved = step
            return {"step": step}

        body.__name__ = body.__qualname__ = node["name"]
        body.__doc__ = f"The node {node['name']} of the lab's graph."
        return FunctionTool(body, require_confirmation=node["interrupt"])

    # ------------------------------------------------------------------ the framework's calls
    def _session(self, run_id: str):
        return self.loop.run_until_complete(self.service.get_session(app_name=APP, user_id=USER, session_id=run_id))

    def _run(self, run_id: str, **kwargs) -> None:
        self.run_id = run_id

        async def go():
            async for _ in self.runner.run_async(user_id=USER, session_id=run_id, **kwargs):
                pass

        self.loop.run_until_complete(go())

    def setup(self) -> None:
        if self.backend["kind"] == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.backend["location"], autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.ns)))
        self.loop.run_until_complete(self.service.prepare_tables())

    def start(self, run_id: str, input: str) -> dict:
        if self._session(run_id) is not None:
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        self.loop.run_until_complete(self.service.create_session(
            app_name=APP, user_id=USER, session_id=run_id, state={"lab": self.graph.initial_state(input)}))
        self._run(run_id, new_message=types.Content(role="user", parts=[types.Part(text=START)]))
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id)
            return self.status(run_id, REFUSED,
                               reason="ADK resumes a paused invocation by its confirmation call id only")
        session = self._session(run_id)
        if session is None:
            return self.status(run_id, REFUSED, reason=f"no persisted state of run {run_id!r}")
        calls = [fc.id for ev in session.events for fc in ev.get_function_calls() if fc.name == CONFIRM]
        if not calls:
            return self.status(run_id, REFUSED, reason=f"no adk_request_confirmation call in session {run_id!r}")
        answer = types.FunctionResponse(name=CONFIRM, id=calls[-1],
                                        response={"confirmed": True, "payload": {"value": value}})
        self._run(run_id, new_message=types.Content(role="user", parts=[types.Part(function_response=answer)]))
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        """A new process picking the session up as a user would: nothing to run once the last node's response is
        written or while the invocation waits for its confirmation; else ADK's resume of the session's newest
        invocation (``run_async(invocation_id=...)``)."""
        session = self._session(run_id)
        if session is None:
            return self.status(run_id, REFUSED, reason=f"no persisted state of run {run_id!r}")
        head = self.state(run_id)
        if head["state"] == DONE or self._waiting(session):
            return head
        invocations = [ev.invocation_id for ev in session.events if ev.invocation_id]
        if invocations:
            self._run(run_id, invocation_id=invocations[-1])
        else:  # killed before the start message was appended: the start message is sent again
            self._run(run_id, new_message=types.Content(role="user", parts=[types.Part(text=START)]))
        return self.answer(run_id)

    @staticmethod
    def _waiting(session) -> bool:
        """The session's newest confirmation call has no response yet (the invocation is paused for its human)."""
        asked = [fc.id for ev in session.events for fc in ev.get_function_calls() if fc.name == CONFIRM]
        answered = {fr.id for ev in session.events for fr in ev.get_function_responses() if fr.name == CONFIRM}
        return bool(asked) and asked[-1] not in answered

    # ------------------------------------------------------------------ reading
    def checkpoints(self, run_id: str) -> list[dict]:
        session = self._session(run_id)
        if session is None:
            return []
        out, parent, values, n = [], None, None, len(self.graph.nodes)
        for ev in session.events:
            delta = (ev.actions.state_delta if ev.actions is not None else None) or {}
            for part in _parts(ev):
                step, parked = None, False
                fr, fc = part.function_response, part.function_call
                if fr is not None and fr.name in self.graph.names and isinstance(fr.response, dict) \
                        and isinstance(fr.response.get("step"), int) and "lab" in delta:
                    step, values = fr.response["step"] + 1, dict(delta["lab"])
                elif fc is not None and fc.name == CONFIRM and values is not None:
                    step, parked = self.graph.interrupt_step, True
                if step is None:
                    continue
                nxt = self.graph.names[step] if step < n else None
                out.append(self.checkpoint(ev.id, run_id, step, nxt, values, parent, float(ev.timestamp), parked))
                parent = ev.id
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "persisted state")

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.service.close())
        finally:
            self.loop.close()
            super().close()
