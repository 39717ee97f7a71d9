"""The OpenAI Agents SDK at a pinned release (``openai-agents@0.24``), inside its own environment, LLM-free.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  What the SDK does is left to it, through its documented
human-in-the-loop API (``agents``: ``Agent``, ``function_tool(needs_approval=True)``,
``Runner.run``, ``RunResult.to_state``, ``RunState.to_string`` /
``RunState.from_string``, ``RunState.approve``):

- no LLM, no network, no API key: the agent's model is :class:`ScriptedModel`,
  a subclass of the SDK's ``Model`` interface whose ``ModelResponse`` is a
  pure function of the conversation it is handed: it calls the lab's nodes as
  tools in the graph's order, passing the state the previous tool returned
  (``{"state": <json>}``), and answers with that state as its final message
  once every node ran.  Call ids are deterministic (``call_<step>_<node>``);
  tracing is disabled (``RunConfig(tracing_disabled=True)``);
- one ``FunctionTool`` per graph node, named after it; each tool's body is
  the protocol's ``run_node`` on the state in its arguments and returns the
  new state.  The interrupt node's tool has ``needs_approval=True``: the
  model's call to it stops the run with an interruption (the SDK's own tool
  approval is the human decision).  The resume value reaches the tool through
  the run context (``RunState.from_string(..., context_override={"approval":
  value})``), then ``state.approve(interruption)`` and ``Runner.run(agent,
  state)``: the approved tool runs the node with the value.  Every resume
  value is an approval (the lab's node semantics consume it; a "no" is a
  value, not ``state.reject``).  Tools are built with
  ``failure_error_function=None``, so an exception in a node propagates
  instead of becoming a message to the model;
- persistence: the SDK has **no durable store of its own** for a run (a
  ``Session`` keeps conversation items, not the paused run).  The documented
  pattern is the application's: serialize ``result.to_state().to_string()``
  when ``Runner.run`` returns and ``RunState.from_string(agent, ...)`` it in a
  later process.  This adapter does exactly that, when the run parks and when
  it ends, one file per saved state
  (``<location>/<ns>openai-agents/<run>/<time_ns>-<pid>.json``, written to a
  temporary file and renamed into place; SQLite backends only: the store is
  files).  Those saved states are the run's checkpoints; nothing is written
  while ``Runner.run`` runs (between the approved tool and the end);
- ``start`` = ``Runner.run(agent, <initial state as json>)``; ``resume`` = the
  run's newest saved state (or the one ``checkpoint_id`` names) restored,
  every pending interruption approved, ``Runner.run(agent, state)``, the
  result saved (a finished state is restored and run like any other: the SDK
  accepts it and asks the model for one more turn, which runs no tool);
  ``recover`` (a new process after a SIGKILL) = the newest saved state
  restored, as a user would: a parked state waits for a decision (run again
  with none, the SDK returns the same interruption without calling the model
  or a tool; the lab then resumes again), a finished one is done; nothing
  between the park and the end was ever saved, so there is nothing else to
  continue from.  ``fork`` = the saved state copied into a new run's
  folder (a ``RunState`` carries no run identity: the run id is the
  adapter's; nothing runs).

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (a tool's body returned),
``during_checkpoint_write`` (the state file is written, not yet renamed into
place; only at the park, after ``prepare``, and at the end) and ``parked``
(the parked state is saved; the call has not returned).  Not reachable
(pyproject's ``not_applicable``): ``after_resume_consumed`` (nothing is
saved between the approved tool and the next one) and
``during_checkpoint_write`` after ``act`` (no state is saved after it).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator

from agents import (Agent, Model, ModelResponse, RunConfig, RunContextWrapper, Runner, RunState, Usage, UserError,
                    function_tool, set_tracing_disabled)
from agents.testing import assistant_message, function_call

from .protocol import Answer, AFTER_NODE_BEFORE_CHECKPOINT, DONE, DURING_CHECKPOINT_WRITE, PARKED, REFUSED, Adapter

AGENT = "driftlab-graph"

set_tracing_disabled(True)  # no trace exporter (it would call the OpenAI API)


def _item(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


class ScriptedModel(Model):
    """A deterministic model: call the graph's next node with the last tool output, or answer with it at the end."""

    def __init__(self, names: list[str]):
        self.names = list(names)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        outputs = [_item(i, "output") for i in items if _item(i, "type") == "function_call_output"]
        if outputs:
            last = outputs[-1]
        else:  # the first turn: the user message is the initial state
            first = items[0]
            last = first if isinstance(first, str) else _item(first, "content")
        if not isinstance(last, str):
            last = json.dumps(last)
        n = len(outputs)
        if n < len(self.names):
            out = [function_call(self.names[n], {"state": last}, call_id=f"call_{n}_{self.names[n]}")]
        else:
            out = [assistant_message(last, item_id="msg_final")]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    async def stream_response(self, *args, **kwargs) -> AsyncIterator[Any]:
        raise NotImplementedError("the lab runs the agent with Runner.run (no streaming)")
        yield  # pragma: no cover - makes this an async generator


class OpenAIAgentsAdapter(Adapter):
    """The OpenAI Agents SDK behind the durable-runtime interface (module docstring)."""

    name = "openai-agents"
    #: the OpenAI Agents SDK's answers (issue 24 §1): a state it will not run (``UserError``)
    ANSWERS = (Answer(REFUSED, r"UserError: ", "OpenAI Agents: RunState.from_string / Runner.run UserError"),)

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.root = Path(backend["location"]) / f"{self.ns}openai-agents"
        self.run_id = ""
        self.loop = asyncio.new_event_loop()
        self.agent = Agent(name=AGENT, instructions="Run the graph's nodes in order.",
                           model=ScriptedModel(self.graph.names),
                           tools=[self._tool(i) for i in range(len(self.graph.nodes))])
        self.config = RunConfig(tracing_disabled=True)

    def _tool(self, step: int):
        rt, node = self, self.graph.nodes[step]

        async def body(ctx: RunContextWrapper[Any], state: str) -> str:
            """Run one node of the lab's graph on ``state`` (json) and return the new state (json)."""
            resume = (ctx.context or {}).get("approval") if node["interrupt"] else None
            new = rt.run_node(rt.run_id, step, json.loads(state), resume=resume)
            rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
            return json.dumps(new)

        return function_tool(body, name_override=node["name"], description_override=f"the node {node['name']}",
                             needs_approval=node["interrupt"], failure_error_function=None)

    # ------------------------------------------------------------------ the saved states (the application's store)
    def _files(self, run_id: str) -> list[Path]:
        folder = self.root / run_id
        return sorted(folder.glob("*.json")) if folder.is_dir() else []

    def _save(self, run_id: str, result) -> None:
        """Save ``result.to_state()`` with what it holds for the lab: parked at the interruption, or done."""
        interruptions = result.interruptions
        if interruptions:
            name = interruptions[0].tool_name
            step = self.graph.names.index(name)
            values = json.loads(json.loads(interruptions[0].arguments)["state"])
            label = PARKED
        else:
            step, values, label = len(self.graph.nodes), json.loads(result.final_output), DONE
        self._write(run_id, {"label": label, "step": step, "values": values,
                             "state": result.to_state().to_string(), "created": time.time()})

    def _write(self, run_id: str, envelope: dict) -> None:
        folder = self.root / run_id
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}"
        tmp = folder / f".{name}.tmp"
        with open(tmp, "w") as f:
            json.dump(envelope, f)
            f.flush()
            os.fsync(f.fileno())
        self.point(DURING_CHECKPOINT_WRITE, run_id, max(envelope["step"] - 1, 0))
        os.replace(tmp, folder / f"{name}.json")

    def _read(self, path: Path) -> dict:
        return json.loads(path.read_text())

    def _cid(self, run_id: str, path: Path) -> str:
        return f"{run_id}:{path.stem}"

    def _restore(self, envelope: dict, value: Any = None) -> RunState:
        context = None if value is None else {"approval": value}
        return self.loop.run_until_complete(RunState.from_string(self.agent, envelope["state"],
                                                                 context_override=context))

    def _run(self, run_id: str, input) -> dict:
        self.run_id = run_id
        result = self.loop.run_until_complete(Runner.run(self.agent, input, context={"approval": None},
                                                         run_config=self.config))
        self._save(run_id, result)
        return self.answer(run_id)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._files(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        return self._run(run_id, json.dumps(self.graph.initial_state(input)))

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        files = self._files(run_id)
        if checkpoint_id is not None:
            files = [p for p in files if self._cid(run_id, p) == checkpoint_id]
        if not files:
            named = f"{checkpoint_id} " if checkpoint_id else ""
            return self.status(run_id, REFUSED, reason=f"no saved state {named}of run {run_id!r}")
        self.run_id = run_id
        state = self._restore(self._read(files[-1]), value)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        try:
            result = self.loop.run_until_complete(Runner.run(self.agent, state, run_config=self.config))
        except UserError as exc:  # the SDK's answer to a state it will not run
            return self.status(run_id, REFUSED, reason=f"UserError: {str(exc).splitlines()[0]}")
        self._save(run_id, result)
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        files = self._files(run_id)
        if not files:  # killed before its first save: nothing of the run is durable
            return self.status(run_id, REFUSED, reason=f"no saved state of run {run_id!r}")
        # the newest saved state is the park or the end (nothing else is ever saved): restored, a parked state
        # waits for a decision and a finished one is done; the SDK must still restore it
        self._restore(self._read(files[-1]))
        return self.state(run_id)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        src = next((p for p in self._files(run_id) if self._cid(run_id, p) == checkpoint_id), None)
        if src is None:
            return self.status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self._files(new_run_id):
            return self.status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        self.run_id = new_run_id
        self._write(new_run_id, {**self._read(src), "created": time.time()})
        return self.state(new_run_id)

    # ------------------------------------------------------------------ reading
    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent = [], None
        for path in self._files(run_id):
            env = self._read(path)
            cid = self._cid(run_id, path)
            step = env["step"]
            nxt = self.graph.names[step] if step < len(self.graph.names) else None
            out.append(self.checkpoint(cid, run_id, step, nxt, env["values"], parent, env["created"],
                                       env["label"] == PARKED))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "saved state")

    def close(self) -> None:
        self.loop.close()
        super().close()
